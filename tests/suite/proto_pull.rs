//! The pull-family cores (`mooncake_wire::proto::pull`): their control messages and metadata byte for byte against
//! vllm-ascend's recordings; and with a simulated clock, the prefiller's answers, what it does not answer, its
//! expiry and port tables, the decoder's request flow (query, read, completion), its metadata cache, a failed read
//! reported per `failed_read`, and replies that never come.

use std::time::{Duration, Instant};

use mooncake_wire::proto::pull::*;
use mooncake_wire::proto::{ExchangeId, PeerId, PrefillerEvent};

const OLD: &str = "vllm-ascend-0.18.0";
const NEW: &str = "vllm-ascend-0.23.0.post1";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Two layers, K and V each, 1 KiB blocks, 32 of them.
fn layout(bases: &[u64]) -> PullLayout {
    PullLayout {
        base_addrs: bases.to_vec(),
        block_lens: vec![1024; bases.len()],
        layer_indices: (0..bases.len() as i64).map(|i| i / 2).collect(),
        layer_names: (0..bases.len()).map(|i| format!("model.layers.{}.self_attn", i / 2)).collect(),
        group_indices: vec![],
        num_blocks: 32,
    }
}

/// The recorded trace `c_failed_read` of `revision`, one JSON value per line (`None` from the packaged crate,
/// which has no `conformance/`: [`crate::in_repository`]).
fn trace(revision: &str) -> Option<Vec<serde_json::Value>> {
    let rel = format!("conformance/traces-pull/{revision}/c_failed_read.jsonl");
    let path = crate::in_repository(&rel, "the pull cores against the recordings")?;
    let text = std::fs::read_to_string(path).unwrap();
    Some(text.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

/// The payload of the record with `seq`.
fn payload(t: &[serde_json::Value], seq: u64) -> Vec<u8> {
    let r = t.iter().find(|r| r["seq"] == seq).unwrap();
    hex(r["frames"].as_array().unwrap().last().unwrap().as_str().unwrap())
}

/// The prefiller of the recording `c_failed_read` of `revision`, from its recorded metadata (`None`: see
/// [`trace`]).
fn recorded_prefiller(revision: &str) -> Option<(PullPrefillerConfig, Vec<u8>)> {
    let t = trace(revision)?;
    let meta = &t.iter().find(|r| r["seq"] == 3).unwrap()["decoded"];
    let addrs: Vec<u64> = match &meta["kv_caches_base_addr"][0] {
        serde_json::Value::Array(_) => meta["kv_caches_base_addr"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|l| l.as_array().unwrap().iter().map(|a| a.as_u64().unwrap()))
            .collect(),
        _ => meta["kv_caches_base_addr"].as_array().unwrap().iter().map(|a| a.as_u64().unwrap()).collect(),
    };
    let cfg = PullPrefillerConfig {
        engine_id: meta["engine_id"].as_str().unwrap().into(),
        local_ip: "127.0.0.1".into(),
        te_rpc_port: meta["te_rpc_port"].as_u64().unwrap(),
        handshake_port: meta["handshake_port"].as_u64().unwrap_or(0),
        block_size: 16,
        total_num_kv_heads: 4,
        tp_size: 1,
        layout: layout(&addrs),
    };
    Some((cfg, payload(&t, 3)))
}

#[test]
fn control_messages_are_the_recorded_bytes() {
    for rev in [OLD, NEW] {
        let p = PullProfile::builtin(rev).unwrap();
        let Some(t) = trace(rev) else { return };
        assert_eq!(p.encode_get_meta(), payload(&t, 1), "{rev}");
        assert_eq!(p.encode_done("req-3"), payload(&t, 5), "{rev}");
        assert_eq!(payload(&t, 7), p.ack, "{rev}");
    }
}

#[test]
fn the_metadata_is_the_recorded_bytes_given_the_recorded_values() {
    for rev in [OLD, NEW] {
        let Some((cfg, recorded)) = recorded_prefiller(rev) else { return };
        let p = PullPrefiller::new(PullProfile::builtin(rev).unwrap(), &cfg).unwrap();
        assert_eq!(hex::encode(p.metadata()), hex::encode(&recorded), "{rev}");
    }
}

/// A prefiller of the recordings' shape (its bytes against the recordings: above).
fn config(rev: &str) -> PullPrefillerConfig {
    PullPrefillerConfig {
        engine_id: "engine-prefill-0".into(),
        local_ip: "127.0.0.1".into(),
        te_rpc_port: 15311,
        handshake_port: if rev == NEW { 46835 } else { 0 },
        block_size: 16,
        total_num_kv_heads: 4,
        tp_size: 1,
        layout: layout(&[0xa0000, 0xb0000, 0xc0000, 0xd0000]),
    }
}

fn read(local: &[u64], remote: &[u64]) -> PullRead {
    PullRead {
        d_req_id: "d-1".into(),
        remote_request_id: "req-1".into(),
        local_blocks: vec![local.to_vec()],
        remote_blocks: vec![remote.to_vec()],
        engine_id: "engine-prefill-0".into(),
        remote_host: "127.0.0.1".into(),
        remote_port: 7000,
    }
}

fn prefiller(rev: &str) -> PullPrefiller {
    PullPrefiller::new(PullProfile::builtin(rev).unwrap(), &config(rev)).unwrap()
}

fn frames(payload: Vec<u8>) -> Vec<Vec<u8>> {
    vec![b"peer".to_vec(), vec![], payload]
}

#[test]
fn the_prefiller_answers_queries_and_frees_on_completion() {
    let t0 = Instant::now();
    let mut p = prefiller(NEW);
    let profile = PullProfile::builtin(NEW).unwrap();
    p.request_finished(t0, "p-3", "req-3");
    assert_eq!(p.tracked_transfers(), 1);
    p.handle_frames(t0, frames(profile.encode_get_meta()));
    let tx = p.poll_transmit().unwrap();
    assert_eq!(tx.frames(), vec![b"peer".to_vec(), vec![], p.metadata().to_vec()]);
    p.handle_frames(t0, frames(profile.encode_done("req-3")));
    assert_eq!(p.poll_transmit().unwrap().frames()[2], b"ACK");
    let ev = p.poll_event().unwrap();
    let want = PrefillerEvent::FinishedSending { p_req_id: "p-3".into(), transfer_id: "req-3".into(), expired: false };
    assert_eq!(ev, want);
    assert_eq!(p.tracked_transfers(), 0);
    // A completion of a request it does not track is still acknowledged, and frees nothing.
    p.handle_frames(t0, frames(profile.encode_done("req-9")));
    assert_eq!(p.poll_transmit().unwrap().frames()[2], b"ACK");
    assert_eq!(p.poll_event(), None);
}

#[test]
fn the_prefiller_does_not_answer_what_it_cannot_read() {
    let t0 = Instant::now();
    let mut p = prefiller(OLD);
    let unknown = hex("92c40b756e6b6e6f776e5f6d7367a0"); // [bin "unknown_msg", ""]
    let str_tag = hex("92ac6765745f6d6574615f6d7367a0"); // [str "get_meta_msg", ""]: not the bin tag
    let done_without_id = hex("91c410646f6e655f72656376696e675f6d7367");
    for bad in [vec![b"peer".to_vec()], frames(unknown), frames(str_tag), frames(vec![0xc1]), frames(done_without_id)] {
        p.handle_frames(t0, bad.clone());
        assert_eq!(p.poll_transmit(), None, "{bad:?}");
        assert!(matches!(p.poll_event(), Some(PrefillerEvent::Rejected { .. })), "{bad:?}");
    }
    // Two payload frames after the routing id: dropped too; a REQ's empty delimiter is not a payload.
    p.handle_frames(t0, vec![b"peer".to_vec(), b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(p.poll_transmit(), None);
    let profile = PullProfile::builtin(OLD).unwrap();
    p.handle_frames(t0, vec![b"peer".to_vec(), profile.encode_get_meta()]);
    assert_eq!(p.poll_transmit().unwrap().peer, PeerId(b"peer".to_vec()));
}

#[test]
fn the_prefiller_frees_what_nobody_completes_after_the_abort_timeout() {
    let t0 = Instant::now();
    let mut p = prefiller(OLD);
    p.set_abort_timeout(Duration::from_secs(5));
    p.request_finished(t0, "p-1", "req-1");
    p.request_finished(t0 + Duration::from_secs(1), "p-2", "req-2");
    assert_eq!(p.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    p.handle_timeout(t0 + Duration::from_millis(4999));
    assert_eq!(p.poll_event(), None);
    p.handle_timeout(t0 + Duration::from_secs(5));
    let want = PrefillerEvent::FinishedSending { p_req_id: "p-1".into(), transfer_id: "req-1".into(), expired: true };
    assert_eq!(p.poll_event(), Some(want));
    assert_eq!(p.tracked_transfers(), 1);
    assert_eq!(p.poll_timeout(), Some(t0 + Duration::from_secs(6)));
}

#[test]
fn a_port_table_frees_after_its_count() {
    let t0 = Instant::now();
    let mut p = prefiller(NEW);
    let handshake = config(NEW).handshake_port;
    p.request_finished(t0, "p-1", "req-1");
    // [bin tag, "req-1", {port: {"num": 2, "host": "127.0.0.1"}}]
    let mut done = hex("93c410646f6e655f72656376696e675f6d7367a57265712d3181cd");
    done.extend_from_slice(&(handshake as u16).to_be_bytes());
    done.extend_from_slice(&hex("82a36e756d02a4686f7374a93132372e302e302e31"));
    p.handle_frames(t0, frames(done.clone()));
    assert_eq!(p.poll_transmit().unwrap().frames()[2], b"ACK");
    assert_eq!(p.poll_event(), None, "one completion of two");
    p.handle_frames(t0, frames(done));
    assert_eq!(p.poll_transmit().unwrap().frames()[2], b"ACK");
    assert!(matches!(p.poll_event(), Some(PrefillerEvent::FinishedSending { expired: false, .. })));
}

fn decoder(rev: &str) -> PullDecoder {
    PullDecoder::new(PullProfile::builtin(rev).unwrap(), 1, layout(&[0x10000, 0x20000, 0x30000, 0x40000])).unwrap()
}

fn events(d: &mut PullDecoder) -> Vec<PullDecoderEvent> {
    std::iter::from_fn(|| d.poll_event()).collect()
}

fn opened(ev: &[PullDecoderEvent]) -> (ExchangeId, String, Vec<u8>) {
    ev.iter()
        .find_map(|e| match e {
            PullDecoderEvent::Open { id, addr, payload } => Some((*id, addr.clone(), payload.clone())),
            _ => None,
        })
        .unwrap()
}

/// Runs one request through query, read (returning `ret`) and completion; the events after the `ACK`.
fn one_request(rev: &str, ret: i64) -> (PullDecoder, Vec<PullDecoderEvent>) {
    let t0 = Instant::now();
    let p = prefiller(rev);
    let profile = PullProfile::builtin(rev).unwrap();
    let mut d = decoder(rev);
    d.pull(t0, vec![read(&[4, 5, 6], &[1, 2, 3])]);
    let (id, addr, payload) = opened(&events(&mut d));
    assert_eq!((addr.as_str(), payload), ("tcp://127.0.0.1:7001", profile.encode_get_meta()));
    assert_eq!((d.pending_pulls(), d.open_exchanges()), (1, 1));
    d.handle_reply(t0, id, p.metadata());
    let ev = events(&mut d);
    let PullDecoderEvent::Read { id: read_id, session, descriptors } = &ev[1] else { panic!("{ev:?}") };
    assert_eq!(session, &format!("127.0.0.1:{}", config(rev).te_rpc_port));
    assert_eq!(descriptors.len(), 4);
    assert_eq!(d.open_exchanges(), 0);
    d.read_complete(t0, *read_id, ret);
    let (done, _, payload) = opened(&events(&mut d));
    assert_eq!(payload, profile.encode_done("req-1"));
    d.handle_reply(t0, done, b"ACK");
    let ev = events(&mut d);
    assert_eq!((d.pending_pulls(), d.open_exchanges()), (0, 0));
    (d, ev)
}

#[test]
fn a_request_is_queried_read_and_completed() {
    for rev in [OLD, NEW] {
        let (_, ev) = one_request(rev, 0);
        let finished = PullDecoderEvent::Finished { d_req_id: "d-1".into() };
        assert_eq!(ev, vec![PullDecoderEvent::Close { id: ExchangeId(2) }, finished], "{rev}");
    }
}

#[test]
fn a_failed_read_is_reported_as_the_revision_does() {
    let (_, ev) = one_request(OLD, -1);
    assert_eq!(&ev[1..], [PullDecoderEvent::Finished { d_req_id: "d-1".into() }], "0.18.0: silent");
    let (_, ev) = one_request(NEW, -1);
    let failed = PullDecoderEvent::Failed {
        d_req_id: "d-1".into(),
        reason: "read returned -1".into(),
        invalid_blocks: vec![4, 5, 6],
    };
    assert_eq!(&ev[1..], [PullDecoderEvent::Finished { d_req_id: "d-1".into() }, failed], "0.23.0.post1");
}

#[test]
fn metadata_is_cached_per_engine_and_port_and_requests_go_one_at_a_time() {
    let t0 = Instant::now();
    let (mut d, _) = one_request(NEW, 0);
    let mut second = read(&[7], &[8]);
    second.d_req_id = "d-2".into();
    let mut third = second.clone();
    third.d_req_id = "d-3".into();
    d.pull(t0, vec![second, third]);
    let ev = events(&mut d);
    assert!(matches!(ev[..], [PullDecoderEvent::Read { .. }]), "no second query: {ev:?}");
    assert_eq!(d.pending_pulls(), 2);
    assert_eq!(d.stats().queries, 1);
}

#[test]
fn replies_that_do_not_come_fail_the_read_and_end_the_request() {
    let t0 = Instant::now();
    let mut d = decoder(NEW);
    d.set_reply_timeout(Duration::from_secs(2));
    d.pull(t0, vec![read(&[4], &[1])]);
    let (meta, ..) = opened(&events(&mut d));
    assert_eq!(d.poll_timeout(), Some(t0 + Duration::from_secs(2)));
    d.handle_timeout(t0 + Duration::from_secs(1));
    assert!(events(&mut d).is_empty());
    let t1 = t0 + Duration::from_secs(2);
    d.handle_timeout(t1);
    let ev = events(&mut d);
    assert_eq!(ev[0], PullDecoderEvent::Close { id: meta });
    let (done, _, _) = opened(&ev);
    // A late metadata reply changes nothing.
    d.handle_reply(t1, meta, b"late");
    assert!(events(&mut d).is_empty());
    d.handle_timeout(t1 + Duration::from_secs(2));
    let ev = events(&mut d);
    assert_eq!(ev[0], PullDecoderEvent::Close { id: done });
    assert_eq!(ev[1], PullDecoderEvent::Finished { d_req_id: "d-1".into() });
    assert!(matches!(&ev[2], PullDecoderEvent::Failed { invalid_blocks, .. } if invalid_blocks == &[4]));
    assert_eq!((d.pending_pulls(), d.open_exchanges(), d.poll_timeout()), (0, 0, None));
}

#[test]
fn a_garbled_metadata_reply_fails_the_read_and_a_free_only_pull_reads_nothing() {
    let t0 = Instant::now();
    let mut d = decoder(NEW);
    d.pull(t0, vec![read(&[4], &[1])]);
    let (meta, ..) = opened(&events(&mut d));
    d.handle_reply(t0, meta, &[0x92, 0x01]);
    let ev = events(&mut d);
    assert!(matches!(&ev[1], PullDecoderEvent::Open { .. }), "the completion is sent: {ev:?}");
    let mut d = decoder(OLD);
    d.pull(t0, vec![read(&[], &[1, 2])]);
    let (_, _, payload) = opened(&events(&mut d));
    assert_eq!(payload, PullProfile::builtin(OLD).unwrap().encode_done("req-1"), "straight to the completion");
}
