//! The generation-1 cores (`src/proto/gen1.rs`) against what vLLM 0.13.0-0.15.1 do: success, an unknown id,
//! a failed write, and the decoder's one-reply rule.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mooncake_wire::msgpack::WireInt;
use mooncake_wire::plan::{GroupKind, Producer, ProducerConfig, RegisteredLayout};
use mooncake_wire::proto::gen1::{AgentMetadata, Gen1Decoder, Gen1DecoderConfig, Gen1Prefiller, Gen1Profile};
use mooncake_wire::proto::{DecoderEvent, PrefillerEvent, ProfileError, PullRequest};

fn producer(profile: &Gen1Profile) -> Producer {
    let rules = profile.plan_rules().unwrap();
    Producer {
        config: ProducerConfig {
            tp_rank: 0,
            tp_size: 1,
            pp_size: 1,
            total_num_kv_heads: 4,
            use_mla: false,
            groups: vec![GroupKind::Attention],
            physical_blocks_per_logical: 1,
            blocks_first: true,
        },
        layout: RegisteredLayout {
            kv_caches_base_addr: vec![0x1000_0000, 0x2000_0000],
            block_lens: vec![2048, 2048],
            ..Default::default()
        },
        has_opaque_packed_row: false,
        layer_groups: HashMap::new(),
        layer_specs: HashMap::new(),
        rules,
        column_check: None,
    }
}

fn pull(p: &Gen1Profile, ids: &[&str], blocks: &[&[u64]]) -> Vec<Vec<u8>> {
    let u = WireInt::from_u64;
    let m = AgentMetadata {
        remote_hostname: "127.0.0.1".into(),
        remote_port: u(17002),
        request_ids: ids.iter().map(|s| s.to_string()).collect(),
        kv_caches_base_addr: vec![u(0x5000_0000), u(0x6000_0000)],
        block_ids: blocks.iter().map(|b| b.iter().map(|x| u(*x)).collect()).collect(),
    };
    vec![b"id".to_vec(), vec![], p.encode_request(&m).unwrap()]
}

#[test]
fn success_unknown_and_failure_follow_generation_1() {
    let p = Gen1Profile::builtin("vllm-0.13.0..0.15.1").unwrap();
    let now = Instant::now();
    let mut core = Gen1Prefiller::new(p.clone(), producer(&p));
    core.request_allocated(now, "d-req-1", "d-req-1");
    core.request_finished(now, "d-req-1", "d-req-1", vec![vec![3, 4, 5]]);
    core.handle_frames(now, pull(&p, &["d-req-1"], &[&[3, 4, 5]]));
    let Some(PrefillerEvent::Write { id, descriptors, .. }) = core.poll_event() else { panic!("a write") };
    // One descriptor per region for the run 3..5, 3 blocks of the prefiller's 2048 bytes.
    assert_eq!(descriptors.len(), 2);
    assert_eq!(descriptors.iter().map(|d| d.len).sum::<u64>(), 12288);
    core.write_complete(now, id, 0);
    assert!(matches!(core.poll_event(), Some(PrefillerEvent::FinishedSending { expired: false, .. })));
    let t = core.poll_transmit().unwrap();
    assert_eq!((t.payload.as_slice(), t.delimiter), (&b"trans_done"[..], true));
    // An unknown id: trans_done, nothing written.
    core.handle_frames(now, pull(&p, &["d-req-404"], &[&[3]]));
    assert_eq!(core.poll_transmit().unwrap().payload, b"trans_done");
    assert!(core.poll_event().is_none());
    // A failed write: trans_error, and the request is never freed.
    core.request_allocated(now, "d-req-2", "d-req-2");
    core.request_finished(now, "d-req-2", "d-req-2", vec![vec![5]]);
    core.handle_frames(now, pull(&p, &["d-req-2"], &[&[5]]));
    let Some(PrefillerEvent::Write { id, .. }) = core.poll_event() else { panic!("a write") };
    core.write_complete(now, id, -1);
    assert_eq!(core.poll_transmit().unwrap().payload, b"trans_error");
    core.handle_timeout(now + Duration::from_secs(10_000));
    assert!(core.poll_event().is_none() && core.tracked_transfers() == 1, "kept forever");
}

#[test]
fn the_decoder_finishes_only_on_trans_done() {
    let p = Gen1Profile::builtin("vllm-0.13.0..0.15.1").unwrap();
    let now = Instant::now();
    let cfg =
        Gen1DecoderConfig { hostname: "127.0.0.1".into(), te_port: 17002, tp_rank: 1, kv_caches_base_addr: vec![1, 2] };
    let mut d = Gen1Decoder::new(p.clone(), cfg);
    let req = |id: &str| PullRequest {
        d_req_id: id.into(),
        transfer_id: String::new(),
        local_blocks: vec![vec![3]],
        engine_id: String::new(),
        bootstrap_addr: String::new(),
        remote: Some(("10.0.0.1".into(), 8998)),
    };
    d.pull(now, vec![req("a"), req("b")]);
    let Some(DecoderEvent::Open { id, addr, payload }) = d.poll_event() else { panic!("open") };
    assert_eq!(addr, "tcp://10.0.0.1:8999");
    assert_eq!(p.decode_request(&payload).unwrap().request_ids, ["a", "b"]);
    d.handle_reply(now, id, b"trans_error");
    let evs: Vec<DecoderEvent> = std::iter::from_fn(|| d.poll_event()).collect();
    assert!(evs.iter().filter(|e| matches!(e, DecoderEvent::Unsettled { .. })).count() == 2, "{evs:?}");
    d.pull(now, vec![req("c")]);
    let Some(DecoderEvent::Open { id, .. }) = d.poll_event() else { panic!("open") };
    d.handle_reply(now, id, b"trans_done");
    assert!(std::iter::from_fn(|| d.poll_event()).any(|e| e == DecoderEvent::Finished { d_req_id: "c".into() }));
}

/// A negative int anywhere in a request refuses it, whichever form the decoded list takes (a `list[int]` is
/// held packed since the codec decodes it in place).
#[test]
fn a_negative_block_id_or_address_refuses_the_request() {
    let p = Gen1Profile::builtin("vllm-0.13.0..0.15.1").unwrap();
    let u = WireInt::from_u64;
    let good = AgentMetadata {
        remote_hostname: "127.0.0.1".into(),
        remote_port: u(17002),
        request_ids: vec!["r1".into()],
        kv_caches_base_addr: vec![u(0x5000_0000)],
        block_ids: vec![vec![u(3), u(4)]],
    };
    assert!(p.decode_request(&p.encode_request(&good).unwrap()).is_ok());
    let mut bad_block = good.clone();
    bad_block.block_ids[0][1] = WireInt::from_i64(-4);
    let mut bad_addr = good.clone();
    bad_addr.kv_caches_base_addr[0] = WireInt::from_i64(-1);
    for bad in [bad_block, bad_addr] {
        let err = p.decode_request(&p.encode_request(&bad).unwrap()).unwrap_err();
        assert!(
            matches!(err, mooncake_wire::proto::gen1::RequestError::NotUnsigned(i) if i.as_i64() < Some(0)),
            "{err:?}"
        );
        assert!(err.to_string().contains("is not an unsigned 64-bit integer"), "{err}");
    }
}

/// Found by the `cross` fuzz target (FUZZING.md): a pull names two requests before either is ready; the first
/// finishes (its expiry armed again, as vLLM's `start_load_kv` does), expires while the pull waits for the
/// second, then the second finishes. vLLM's sender holds the first request's `SendBlockMeta`, so it writes
/// both, then raises on deleting the first (already deleted by the expiry) and answers `trans_error`; the
/// entries it deleted before the missing one are never reported freed. The core waited for the expired
/// entry for ever.
#[test]
fn a_request_expiring_while_its_pull_waits_is_still_written_and_the_reply_is_an_error() {
    let p = Gen1Profile::builtin("vllm-0.13.0..0.15.1").unwrap();
    let t0 = Instant::now();
    let abort = p.abort_timeout;
    for (order, leaked) in [(["a", "b"], 0usize), (["b", "a"], 1)] {
        let mut core = Gen1Prefiller::new(p.clone(), producer(&p));
        core.request_allocated(t0, "p-a", "a");
        core.request_allocated(t0, "p-b", "b");
        core.handle_frames(t0, pull(&p, &order, &[&[7], &[8]]));
        core.request_finished(t0, "p-a", "a", vec![vec![1]]);
        assert!(core.poll_event().is_none(), "written before both are ready");
        let late = t0 + abort + Duration::from_secs(1);
        core.handle_timeout(late);
        assert!(matches!(core.poll_event(), Some(PrefillerEvent::FinishedSending { expired: true, .. })));
        core.request_finished(late, "p-b", "b", vec![vec![2]]);
        let Some(PrefillerEvent::Write { id, descriptors, .. }) = core.poll_event() else { panic!("no write") };
        assert_eq!(descriptors.len(), 4, "both requests written, two regions each");
        core.write_complete(late, id, 0);
        assert_eq!(core.poll_transmit().unwrap().payload, b"trans_error", "order {order:?}");
        assert!(core.poll_event().is_none(), "an entry reported freed after the error");
        // `b` is kept (and expires later) unless it was deleted before the missing `a`.
        assert_eq!(core.tracked_transfers(), 1 - leaked, "order {order:?}");
    }
}

#[test]
fn a_generation_2_revision_is_no_generation_1_profile() {
    let e = Gen1Profile::builtin("vllm-0.33.0").unwrap_err();
    assert_eq!(e, ProfileError::WrongGeneration { revision: "vllm-0.33.0".into(), generation: 2, expected: 1 });
}

/// vLLM's sender checks each named request as it becomes ready, in order: one with fewer local blocks than the
/// decoder asks for fails the message at once (`trans_error`, nothing written), though a later one is not
/// ready. The core waited for every request first, so that pull was never answered.
#[test]
fn a_short_request_fails_the_pull_at_once_though_a_later_one_is_not_ready() {
    let p = Gen1Profile::builtin("vllm-0.13.0..0.15.1").unwrap();
    let now = Instant::now();
    let mut core = Gen1Prefiller::new(p.clone(), producer(&p));
    core.request_allocated(now, "p-a", "a");
    core.request_allocated(now, "p-b", "b");
    core.handle_frames(now, pull(&p, &["a", "b"], &[&[7, 8], &[9]]));
    assert!(core.poll_transmit().is_none(), "answered before any request is ready");
    core.request_finished(now, "p-a", "a", vec![vec![1]]);
    assert_eq!(core.poll_transmit().expect("an answer").payload, b"trans_error");
    assert!(core.poll_event().is_none(), "written or freed");
    // A request that is short but comes after one not ready is not reached: the pull still waits.
    core.request_allocated(now, "p-c", "c");
    core.request_allocated(now, "p-d", "d");
    core.handle_frames(now, pull(&p, &["c", "d"], &[&[7], &[8, 9]]));
    core.request_finished(now, "p-d", "d", vec![vec![1]]);
    assert!(core.poll_transmit().is_none(), "answered before the first request is ready");
}
