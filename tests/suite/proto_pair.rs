//! The sans-IO prefiller and decoder against each other in memory, with a simulated clock and simulated
//! memory: whole exchanges, byte-exact landing, timeouts, layout caching, failures, and no state left behind.
//! A toy planner (same TP on both sides, one region per layer) stands in for the transfer planner here;
//! `tests/proto_traces.rs` replays vLLM's recorded traffic with the real one.

use std::time::Duration;

use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::memory::Memory;
use mooncake_wire::proto::sim::Net;
use mooncake_wire::proto::*;
use mooncake_wire::spec::Spec;
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse, Status};

const BLOCK: u64 = 64;
const BLOCKS: u64 = 16;
const LAYERS: u64 = 2;
const P_BASE: u64 = 0x1000_0000;
const D_BASE: u64 = 0x2000_0000;

/// One region per layer, block `b` of layer `l` at `base + l * BLOCKS * BLOCK + b * BLOCK`.
struct ToyPlanner {
    tp_rank: usize,
    tp_size: usize,
    /// Calls of `prepare`.
    prepares: std::sync::atomic::AtomicUsize,
}

impl SenderPlanner for ToyPlanner {
    // A toy planner's refusals are its err_msg texts.
    type Error = String;
    type Pull = MooncakeXferMetadata;
    type Prepared = Vec<u64>;
    type PrepareKey = Vec<WireInt>;
    fn pull(&self, m: &MooncakeXferMetadata) -> Result<MooncakeXferMetadata, String> {
        Ok(m.clone())
    }
    fn check(&self, m: &MooncakeXferMetadata) -> Result<Vec<usize>, String> {
        let topo = mooncake_wire::plan::TransferTopology::new(self.tp_rank as i64, self.tp_size as i64, 1, false, 1)
            .map_err(|e| e.err_msg().to_string())?;
        let ranks: Vec<usize> = topo
            .handshake_target_ranks(m.remote_tp_size.as_i64().unwrap(), 1)
            .map_err(|e| e.err_msg().to_string())?
            .into_iter()
            .map(|r| r as usize)
            .collect();
        let rank = m.remote_tp_rank.as_usize().unwrap();
        if !ranks.contains(&rank) {
            return Err(format!(
                "This D tp_rank {rank} is not paired with P tp_rank {}; expected one of {ranks:?}.",
                self.tp_rank
            ));
        }
        Ok(ranks)
    }
    fn prepare_key(&self, m: &MooncakeXferMetadata) -> Vec<WireInt> {
        m.kv_caches_base_addr.clone()
    }
    fn prepare(&self, m: &MooncakeXferMetadata) -> Result<Vec<u64>, String> {
        self.prepares.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if m.kv_caches_base_addr.len() != LAYERS as usize {
            return Err(format!("toy planner: expected {LAYERS} regions, got {}", m.kv_caches_base_addr.len()));
        }
        Ok(m.kv_caches_base_addr.iter().map(|a| a.as_u64().unwrap()).collect())
    }
    fn validate(&self, m: &MooncakeXferMetadata, _: &Vec<u64>) -> Result<(), String> {
        match m.block_lens.iter().any(|l| *l != WireInt::from(BLOCK)) {
            true => Err("toy planner: block length mismatch".to_string()),
            false => Ok(()),
        }
    }
    fn build(
        &self,
        _: &MooncakeXferMetadata,
        remote: &Vec<u64>,
        ready: &[ReadyReq<'_>],
    ) -> Result<TransferBatch, String> {
        let mut out = TransferBatch::default();
        for r in ready {
            if r.local_blocks.len() != r.remote_blocks.len() && !r.remote_blocks.is_empty() {
                out.err_reqs.push(r.d_req_id.to_string());
                out.err_msg = Some("KV group count mismatch".into());
                continue;
            }
            for (lg, rg) in r.local_blocks.iter().zip(r.remote_blocks) {
                for (lb, rb) in lg.iter().zip(rg) {
                    for (l, rbase) in remote.iter().enumerate() {
                        let l = l as u64;
                        out.descriptors.push(Descriptor {
                            src: P_BASE + l * BLOCKS * BLOCK + lb * BLOCK,
                            dst: rbase + rb.as_u64().unwrap() * BLOCK,
                            len: BLOCK,
                        });
                    }
                }
            }
        }
        Ok(out)
    }
    fn need_send(&self, target_ranks: &[usize], _: usize) -> usize {
        target_ranks.len()
    }
}

fn layout() -> DecoderLayout {
    DecoderLayout {
        kv_caches_base_addr: (0..LAYERS).map(|l| (D_BASE + l * BLOCKS * BLOCK).into()).collect(),
        block_lens: vec![BLOCK.into(); LAYERS as usize],
        kv_block_lens: vec![BLOCK.into(); LAYERS as usize],
        registered_layer_names: (0..LAYERS).map(|l| format!("model.layers.{l}.self_attn")).collect(),
        registered_layer_indices: (0..LAYERS).map(WireInt::from).collect(),
        ..Default::default()
    }
}

/// P memory: byte value = 1 + block number (per layer offset); D memory: zeros.
fn p_memory() -> Memory {
    let mut m = Memory::default();
    m.register(P_BASE, (LAYERS * BLOCKS * BLOCK) as usize, |i| (1 + (i as u64 / BLOCK) % 200) as u8);
    m
}
fn d_memory() -> Memory {
    let mut m = Memory::default();
    m.register(D_BASE, (LAYERS * BLOCKS * BLOCK) as usize, |_| 0);
    m
}

fn net(p_rev: &str, d_rev: &str, layout_id: u64) -> Net<ToyPlanner> {
    let reg = Registry::new(BootstrapSpec::new(Spec::builtin().revision(p_rev).unwrap().clone()).unwrap().unwrap());
    let mut n = Net::new(reg, "http://127.0.0.1:8998", std::time::Instant::now());
    let p = PrefillerCore::new(
        WireProfile::builtin(p_rev).unwrap(),
        ToyPlanner { tp_rank: 0, tp_size: 1, prepares: 0.into() },
    );
    n.add_prefiller(p, "tcp://127.0.0.1:5000", p_memory());
    let body = serde_json::json!({"engine_id": "engine-p", "dp_rank": 0, "tp_rank": 0, "pp_rank": 0, "addr": "tcp://127.0.0.1:5000"});
    assert_eq!(n.registry.handle("POST", "/register", Some(&body)).status, 200);
    let cfg = DecoderConfig {
        hostname: "127.0.0.1".into(),
        te_port: 17001,
        tp_rank: 0,
        tp_size: 1,
        pp_rank: 0,
        pp_size: 1,
        layout: layout(),
        layout_id,
    };
    n.add_decoder(DecoderCore::new(WireProfile::builtin(d_rev).unwrap(), cfg), "127.0.0.1:17001", d_memory());
    n
}

fn pull(d: &str, t: &str, blocks: Vec<u64>) -> PullRequest {
    PullRequest {
        d_req_id: d.into(),
        transfer_id: t.into(),
        local_blocks: if blocks.is_empty() { vec![] } else { vec![blocks] },
        engine_id: "engine-p".into(),
        bootstrap_addr: "http://127.0.0.1:8998".into(),
        remote: None,
    }
}

fn statuses(n: &Net<ToyPlanner>) -> Vec<Status> {
    n.decoders[0].received.iter().map(|(_, b)| MooncakeXferResponse::decode(b).unwrap().status).collect()
}

fn assert_empty(n: &Net<ToyPlanner>) {
    assert_eq!(n.prefillers[0].core.tracked_transfers(), 0, "prefiller transfers left");
    assert_eq!(n.prefillers[0].core.open_exchanges(), 0, "prefiller exchanges left");
    assert_eq!(n.decoders[0].core.pending_pulls(), 0, "decoder pulls left");
    assert_eq!(n.decoders[0].core.open_exchanges(), 0, "decoder exchanges left");
    // Nothing tracked, so nothing to wake for: a timer left behind by a finished pull or a freed transfer
    // would live until the abort timeout (one per pull, so millions on a busy prefiller).
    assert_eq!(n.prefillers[0].core.poll_timeout(), None, "prefiller timers left");
    assert_eq!(n.decoders[0].core.poll_timeout(), None, "decoder timers left");
}

#[test]
fn single_pull_lands_exactly_the_right_bytes() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0x1234_5679);
    let now = n.now;
    n.prefillers[0].core.request_allocated(now, "p-req-1", "xfer-1");
    n.prefillers[0].core.request_finished(now, "p-req-1", "xfer-1", vec![vec![1, 2, 3]]);
    n.decoders[0].core.pull(now, vec![pull("d-req-1", "xfer-1", vec![3, 4, 5])]);
    n.settle();
    assert_eq!(statuses(&n), vec![Status::FINISH]);
    assert_eq!(n.decoders[0].finished, vec!["d-req-1"]);
    assert_eq!(n.prefillers[0].finished_sending, vec!["p-req-1"]);
    assert_eq!(n.prefillers[0].writes, vec![("127.0.0.1:17001".to_string(), 6, 6 * BLOCK)]);
    // Destination blocks 3, 4, 5 of both layers hold source blocks 1, 2, 3; nothing else changed.
    let d = n.decoders[0].memory.region(D_BASE).unwrap();
    let p = n.prefillers[0].memory.region(P_BASE).unwrap();
    for l in 0..LAYERS {
        for b in 0..BLOCKS {
            let dst = &d[((l * BLOCKS + b) * BLOCK) as usize..((l * BLOCKS + b + 1) * BLOCK) as usize];
            match b {
                3..=5 => {
                    let src_b = b - 2;
                    let src = &p[((l * BLOCKS + src_b) * BLOCK) as usize..((l * BLOCKS + src_b + 1) * BLOCK) as usize];
                    assert_eq!(dst, src, "layer {l} block {b}");
                }
                _ => assert!(dst.iter().all(|x| *x == 0), "layer {l} block {b} must be untouched"),
            }
        }
    }
    // The reply echoed the layout id, so the next pull leaves the layout out.
    assert!(n.decoders[0].core.is_acked("tcp://127.0.0.1:5000"));
    assert_empty(&n);
}

#[test]
fn continue_then_finish_when_requests_become_ready_one_by_one() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0);
    let now = n.now;
    for (p, t) in [("p-1", "x-1"), ("p-2", "x-2")] {
        n.prefillers[0].core.request_allocated(now, p, t);
    }
    n.prefillers[0].core.request_finished(now, "p-1", "x-1", vec![vec![1]]);
    n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![1]), pull("d-2", "x-2", vec![2])]);
    n.settle();
    assert_eq!(statuses(&n), vec![Status::CONTINUE]);
    n.sleep(Duration::from_secs(3));
    let now = n.now;
    n.prefillers[0].core.request_finished(now, "p-2", "x-2", vec![vec![2]]);
    n.settle();
    assert_eq!(statuses(&n), vec![Status::CONTINUE, Status::FINISH]);
    let r: Vec<_> = n.decoders[0].received.iter().map(|(_, b)| MooncakeXferResponse::decode(b).unwrap()).collect();
    assert_eq!(r[0].ok_reqs, Some(["d-1"].into()));
    assert_eq!(r[1].ok_reqs, Some(["d-2"].into()));
    assert_eq!(n.decoders[0].finished, vec!["d-1", "d-2"]);
    assert_empty(&n);
}

#[test]
fn an_unknown_transfer_times_out_and_leaves_nothing_behind() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0x77);
    let now = n.now;
    n.decoders[0].core.pull(now, vec![pull("d-1", "never", vec![7])]);
    n.settle();
    assert!(n.decoders[0].received.is_empty());
    assert_eq!(n.prefillers[0].core.tracked_transfers(), 1, "a placeholder while the pull waits");
    n.sleep(Duration::from_secs(479));
    assert!(n.decoders[0].received.is_empty(), "not before the abort timeout");
    n.sleep(Duration::from_secs(1));
    let r = MooncakeXferResponse::decode(&n.decoders[0].received[0].1).unwrap();
    assert_eq!(
        (r.status, r.err_reqs.clone(), r.err_msg.as_deref()),
        (Status::FINISH, Some(["d-1"].into()), Some("Timeout waiting for P side ready."))
    );
    assert_eq!(r.layout_id, WireInt::from(0x77u64), "the timeout FINISH echoes the layout id");
    assert_eq!(n.decoders[0].failed, vec![("d-1".to_string(), "Timeout waiting for P side ready.".to_string())]);
    assert_eq!(
        n.decoders[0].finished,
        vec!["d-1"],
        "a failed request is still reported finished (its blocks are invalid)"
    );
    assert_empty(&n);
}

/// Transfer `x-T` (prefiller request `p-T`, block T) made ready, then pulled by decoder request `d-T` into
/// block T, and the pair run until quiet.
fn ready_and_pull(n: &mut Net<ToyPlanner>, t: u64) {
    let now = n.now;
    let (p, x, d) = (format!("p-{t}"), format!("x-{t}"), format!("d-{t}"));
    n.prefillers[0].core.request_allocated(now, &p, &x);
    n.prefillers[0].core.request_finished(now, &p, &x, vec![vec![t]]);
    n.decoders[0].core.pull(now, vec![pull(&d, &x, vec![t])]);
    n.settle();
}

#[test]
fn layout_is_cached_missed_and_resent() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0x0123_4567_89ab_cdef);
    let mut t = 0;
    let mut round = |n: &mut Net<ToyPlanner>| {
        t += 1;
        ready_and_pull(n, t);
    };
    round(&mut n);
    round(&mut n);
    n.prefillers[0].core.clear_layout_cache();
    round(&mut n);
    let sent: Vec<MooncakeXferMetadata> =
        n.decoders[0].sent.iter().map(|(_, _, b)| MooncakeXferMetadata::decode(b).unwrap()).collect();
    let layout_less: Vec<bool> = sent.iter().map(|m| m.is_layout_less()).collect();
    assert_eq!(layout_less, vec![false, true, true, false], "full, cached, missed, resent with the layout");
    assert_eq!(statuses(&n), vec![Status::FINISH, Status::FINISH, Status::LAYOUT_MISS, Status::FINISH]);
    let miss = MooncakeXferResponse::decode(&n.decoders[0].received[2].1).unwrap();
    assert_eq!(
        miss.err_msg.as_deref(),
        Some("Mooncake KV layout 0x123456789abcdef from 127.0.0.1:17001 is not cached.")
    );
    assert_eq!(miss.layout_id, WireInt::ZERO);
    assert_ne!(n.decoders[0].sent[2].0, n.decoders[0].sent[3].0, "the resend uses a new DEALER");
    assert_eq!(n.decoders[0].finished, vec!["d-1", "d-2", "d-3"]);
    assert!(n.decoders[0].failed.is_empty());
    assert_eq!(n.prefillers[0].core.cached_layouts(), 1);
    assert_empty(&n);
}

#[test]
fn each_distinct_layout_is_prepared_once() {
    // layout_id 0: every pull carries the full layout, and none is cached by id.
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0);
    let prepares =
        |n: &Net<ToyPlanner>| n.prefillers[0].core.planner().prepares.load(std::sync::atomic::Ordering::Relaxed);
    for t in 1..=2 {
        ready_and_pull(&mut n, t);
    }
    assert_eq!(prepares(&n), 1, "the second pull reuses the regions prepared from the same layout");
    n.prefillers[0].core.clear_layout_cache();
    ready_and_pull(&mut n, 3);
    assert_eq!(prepares(&n), 2, "forgetting layouts forgets prepared regions too");
    assert_eq!(statuses(&n), vec![Status::FINISH; 3]);
    assert_eq!(n.decoders[0].finished, vec!["d-1", "d-2", "d-3"]);
    assert_eq!(n.prefillers[0].core.cached_layouts(), 0, "layout id 0 is never cached by id");
    assert_eq!(n.prefillers[0].writes.len(), 3);
    assert_empty(&n);
}

#[test]
fn a_transfer_engine_failure_is_a_finish_with_err_reqs() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0);
    let now = n.now;
    n.prefillers[0].write_result = -1;
    for i in 1..=2 {
        n.prefillers[0].core.request_allocated(now, &format!("p-{i}"), &format!("x-{i}"));
        n.prefillers[0].core.request_finished(now, &format!("p-{i}"), &format!("x-{i}"), vec![vec![i]]);
    }
    n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![1]), pull("d-2", "x-2", vec![2])]);
    n.settle();
    let r = MooncakeXferResponse::decode(&n.decoders[0].received[0].1).unwrap();
    assert_eq!(r.status, Status::FINISH);
    assert_eq!(r.err_reqs, Some(["d-1", "d-2"].into()));
    assert_eq!(r.err_msg.as_deref(), Some("Mooncake transfer engine returned -1"));
    assert_eq!(r.ok_reqs, None);
    assert_eq!(n.decoders[0].failed.len(), 2);
    // Failed deliveries do not count: the prefiller keeps the blocks until they expire.
    assert!(n.prefillers[0].finished_sending.is_empty());
    n.sleep(Duration::from_secs(481));
    assert_eq!(n.prefillers[0].finished_sending.len(), 2, "freed by expiry");
    assert_empty(&n);
}

#[test]
fn a_free_only_pull_is_ok_without_a_write() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0);
    let now = n.now;
    n.prefillers[0].core.request_allocated(now, "p-1", "x-1");
    n.prefillers[0].core.request_finished(now, "p-1", "x-1", vec![vec![1]]);
    n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![])]);
    n.settle();
    let r = MooncakeXferResponse::decode(&n.decoders[0].received[0].1).unwrap();
    assert_eq!((r.status, r.ok_reqs), (Status::FINISH, Some(["d-1"].into())));
    assert!(n.prefillers[0].writes.is_empty());
    assert_eq!(n.prefillers[0].finished_sending, vec!["p-1"]);
    assert!(n.decoders[0].finished.is_empty(), "a request without local blocks is settled silently");
    assert_empty(&n);
}

#[test]
fn revisions_interoperate_as_the_spec_says() {
    // 0.33.0 decoder → 0.32.0 prefiller: the prefiller ignores layout_id and never echoes it, so the decoder
    // keeps sending the layout; every pull succeeds.
    let mut n = net("vllm-0.32.0", "vllm-0.33.0", 0x99);
    for i in 1..=2u64 {
        let now = n.now;
        n.prefillers[0].core.request_finished(now, &format!("p-{i}"), &format!("x-{i}"), vec![vec![i]]);
        n.decoders[0].core.pull(now, vec![pull(&format!("d-{i}"), &format!("x-{i}"), vec![i])]);
        n.settle();
    }
    assert!(n.decoders[0].sent.iter().all(|(_, _, b)| !MooncakeXferMetadata::decode(b).unwrap().is_layout_less()));
    assert_eq!(n.decoders[0].finished, vec!["d-1", "d-2"]);
    // 0.32.0 on both sides: no layout_id on the wire at all.
    let mut n = net("vllm-0.32.0", "vllm-0.32.0", 0x99);
    let now = n.now;
    n.prefillers[0].core.request_finished(now, "p-1", "x-1", vec![vec![1]]);
    n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![1])]);
    n.settle();
    let payload = &n.decoders[0].sent[0].2;
    assert!(!payload.windows(9).any(|w| w == b"layout_id"), "0.32.0 never sends layout_id");
    assert_eq!(n.decoders[0].finished, vec!["d-1"]);
}

#[test]
fn faults_get_a_clear_answer_and_the_prefiller_keeps_serving() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0);
    let now = n.now;
    // A REQ socket's three frames: refused without a reply, nothing tracked.
    n.prefillers[0].core.handle_frames(now, vec![b"id".to_vec(), vec![], b"\x80".to_vec()]);
    assert!(matches!(n.prefillers[0].core.poll_event(), Some(PrefillerEvent::Rejected { .. })));
    assert!(n.prefillers[0].core.poll_transmit().is_none());
    // Garbage: an ERROR with msgspec's own message.
    n.prefillers[0].core.handle_frames(now, vec![b"id".to_vec(), vec![0xc1]]);
    let t = n.prefillers[0].core.poll_transmit().unwrap();
    let r = MooncakeXferResponse::decode(&t.payload).unwrap();
    assert_eq!(
        (r.status, r.err_msg.as_deref()),
        (Status::ERROR, Some("MessagePack data is malformed: invalid opcode '\\xc1' (byte 0)"))
    );
    // A 0.18-style request without block_lens/kv_block_lens.
    let old = mooncake_wire::codec::Codec::builtin("vllm-0.16.0..0.18.1").unwrap();
    let v = old
        .from_json(
            "MooncakeXferMetadata",
            &serde_json::json!({"remote_hostname": "h", "remote_port": 1, "remote_tp_size": 1, "remote_tp_rank": 0, "req_blocks": {}, "kv_caches_base_addr": []}),
        )
        .unwrap();
    n.prefillers[0].core.handle_frames(now, vec![b"id".to_vec(), old.encode("MooncakeXferMetadata", &v).unwrap()]);
    let r = MooncakeXferResponse::decode(&n.prefillers[0].core.poll_transmit().unwrap().payload).unwrap();
    assert_eq!(r.err_msg.as_deref(), Some("Object missing required field `block_lens`"));
    // A decoder of the wrong TP rank.
    let mut m = MooncakeXferMetadata {
        remote_hostname: "h".into(),
        remote_tp_size: 2u64.into(),
        remote_tp_rank: 5u64.into(),
        ..Default::default()
    };
    m.kv_caches_base_addr = layout().kv_caches_base_addr;
    n.prefillers[0].core.handle_frames(now, vec![b"id".to_vec(), m.encode()]);
    let r = MooncakeXferResponse::decode(&n.prefillers[0].core.poll_transmit().unwrap().payload).unwrap();
    assert_eq!(r.err_msg.as_deref(), Some("This D tp_rank 5 is not paired with P tp_rank 0; expected one of [0, 1]."));
    // An empty pull is answered with nothing, as vLLM does.
    let empty = MooncakeXferMetadata {
        remote_hostname: "h".into(),
        kv_caches_base_addr: layout().kv_caches_base_addr,
        block_lens: layout().block_lens,
        ..Default::default()
    };
    n.prefillers[0].core.handle_frames(now, vec![b"id".to_vec(), empty.encode()]);
    assert!(n.prefillers[0].core.poll_transmit().is_none());
    // The prefiller still serves a normal pull.
    n.prefillers[0].core.request_finished(now, "p-1", "x-1", vec![vec![1]]);
    n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![1])]);
    n.settle();
    assert_eq!(n.decoders[0].finished, vec!["d-1"]);
    assert_empty(&n);
}

#[test]
fn a_prefiller_that_never_answers_fails_the_pull_after_the_receive_timeout() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0);
    n.silent.push(0);
    let now = n.now;
    n.prefillers[0].core.request_finished(now, "p-1", "x-1", vec![vec![1]]);
    n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![1])]);
    n.settle();
    assert!(n.decoders[0].finished.is_empty());
    n.sleep(Duration::from_secs(480 + 60));
    assert_eq!(
        n.decoders[0].failed,
        vec![("d-1".to_string(), "transfer failed: Resource temporarily unavailable".to_string())]
    );
    assert_eq!(n.decoders[0].core.pending_pulls(), 0);
}

#[test]
fn an_unknown_engine_fails_every_request_of_the_batch() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0);
    let now = n.now;
    let mut r = pull("d-1", "x-1", vec![1]);
    r.engine_id = "ghost".into();
    n.decoders[0].core.pull(now, vec![r]);
    n.settle();
    assert_eq!(
        n.decoders[0].failed[0].1,
        "remote engine_id ghost not found from bootstrap server http://127.0.0.1:8998"
    );
    assert_eq!(n.decoders[0].finished, vec!["d-1"]);
}

#[test]
fn a_flood_of_pulls_is_served_with_no_completion_lost_or_doubled() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0x5);
    let now = n.now;
    let count = 10_000u64;
    for i in 0..count {
        n.prefillers[0].core.request_finished(now, &format!("p-{i}"), &format!("x-{i}"), vec![vec![i % BLOCKS]]);
    }
    for i in 0..count {
        n.decoders[0].core.pull(now, vec![pull(&format!("d-{i}"), &format!("x-{i}"), vec![i % BLOCKS])]);
    }
    n.settle();
    let mut fin = n.decoders[0].finished.clone();
    fin.sort();
    fin.dedup();
    assert_eq!(fin.len(), count as usize);
    assert_eq!(n.decoders[0].finished.len(), count as usize, "each completion reported once");
    assert_eq!(n.prefillers[0].finished_sending.len(), count as usize);
    assert_empty(&n);
}

// ---- KV leases (0.34.0, spec/PROTOCOL.md#kv-leases) -----------------------------------------------------------

const LEASE: Duration = Duration::from_secs(6);

fn lease_req(d: &str, t: &str) -> LeaseRequest {
    LeaseRequest {
        d_req_id: d.into(),
        transfer_id: t.into(),
        engine_id: "engine-p".into(),
        bootstrap_addr: "http://127.0.0.1:8998".into(),
    }
}

/// Every reply the decoder received, decoded.
fn replies(n: &Net<ToyPlanner>) -> Vec<MooncakeXferResponse> {
    n.decoders[0].received.iter().map(|(_, b)| MooncakeXferResponse::decode(b).unwrap()).collect()
}

/// A 0.34.0 pair; `p_lease`/`d_lease` set each side's `kv_lease_duration`.
fn lease_net(p_rev: &str, d_rev: &str, p_lease: Option<Duration>, d_lease: Option<Duration>) -> Net<ToyPlanner> {
    let mut n = net(p_rev, d_rev, 0x99);
    n.prefillers[0].core.set_kv_lease_duration(p_lease).unwrap();
    n.decoders[0].core.set_kv_lease_duration(d_lease).unwrap();
    n
}

fn ready(n: &mut Net<ToyPlanner>, p: &str, t: &str, blocks: Vec<u64>) {
    let now = n.now;
    n.prefillers[0].core.request_allocated(now, p, t);
    n.prefillers[0].core.request_finished(now, p, t, vec![blocks]);
}

#[test]
fn a_lease_duration_needs_a_revision_with_leases() {
    let mut n = net("vllm-0.33.0", "vllm-0.33.0", 0);
    let e = n.prefillers[0].core.set_kv_lease_duration(Some(LEASE)).unwrap_err();
    assert_eq!(e, LeaseError::NotInRevision("vllm-0.33.0".into()));
    assert!(e.to_string().contains("vllm-0.33.0 has no KV leases"), "{e}");
    assert_eq!(n.decoders[0].core.set_kv_lease_duration(Some(LEASE)).unwrap_err(), e);
    let mut n = net("vllm-0.34.0", "vllm-0.34.0", 0);
    assert_eq!(
        n.prefillers[0].core.set_kv_lease_duration(Some(Duration::ZERO)).unwrap_err(),
        LeaseError::NotPositive(Duration::ZERO)
    );
    assert!(n.decoders[0].core.set_kv_lease_duration(None).is_ok());
}

#[test]
fn renewals_keep_a_slow_pull_alive_and_end_when_it_settles() {
    let mut n = lease_net("vllm-0.34.0", "vllm-0.34.0", Some(LEASE), Some(LEASE));
    ready(&mut n, "p-1", "x-1", vec![1, 2]);
    let now = n.now;
    n.decoders[0].core.announce(now, vec![lease_req("d-1", "x-1")]);
    n.settle();
    // The first heartbeat goes at once, then one every 6 / 6 = 1 s, each answered FINISH with nothing else.
    assert_eq!(n.decoders[0].core.lease_stats().sent, 1);
    let (_, addr, payload) = &n.decoders[0].sent[0];
    assert_eq!(addr, "tcp://127.0.0.1:5000");
    let hb = mooncake_wire::typed::MooncakeLeaseHeartbeat::decode(payload).unwrap();
    assert_eq!(hb.lease_transfer_ids, vec!["x-1".to_string()]);
    assert_eq!(replies(&n)[0], MooncakeXferResponse::new(Status::FINISH));
    n.sleep(Duration::from_secs(20));
    let sent = n.decoders[0].core.lease_stats().sent;
    assert!((20..=21).contains(&sent), "one heartbeat a second: {sent}");
    assert_eq!(n.decoders[0].core.lease_stats().renewed, sent);
    assert!(n.prefillers[0].finished_sending.is_empty(), "renewed: not expired after 20 s with a 6 s lease");
    let now = n.now;
    n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![3, 4])]);
    n.settle();
    assert_eq!(n.decoders[0].finished, vec!["d-1"]);
    assert_eq!(n.prefillers[0].finished_sending, vec!["p-1"]);
    assert_eq!(n.decoders[0].core.leased_requests(), 0, "the lease ends when the pull settles");
    n.sleep(Duration::from_secs(5));
    assert_eq!(n.decoders[0].core.lease_stats().sent, sent, "no heartbeat after the pull settled");
    assert_empty(&n);
}

#[test]
fn without_renewal_a_leased_transfer_expires_and_a_late_pull_fails_at_once() {
    let mut n = lease_net("vllm-0.34.0", "vllm-0.34.0", Some(LEASE), None);
    ready(&mut n, "p-1", "x-1", vec![1, 2]);
    n.sleep(Duration::from_secs(5));
    assert!(n.prefillers[0].finished_sending.is_empty(), "held for the lease, not less");
    n.sleep(Duration::from_secs(2));
    assert_eq!(n.prefillers[0].finished_sending, vec!["p-1"], "freed after the 6 s lease, not the 480 s timeout");
    assert_eq!(n.prefillers[0].core.remembered_expired(), 1);
    let now = n.now;
    n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![3, 4])]);
    n.settle();
    let r = replies(&n);
    assert_eq!(r.len(), 1, "answered at once");
    assert_eq!(
        (r[0].status, r[0].err_reqs.clone(), r[0].err_msg.as_deref(), r[0].ok_reqs.clone()),
        (Status::FINISH, Some(["d-1"].into()), Some("KV expired on P side before the pull."), None)
    );
    assert_eq!(r[0].layout_id, WireInt::from(0x99u64), "the expired reply echoes the layout id");
    assert_eq!(n.decoders[0].failed, vec![("d-1".to_string(), "KV expired on P side before the pull.".to_string())]);
    assert_eq!(n.prefillers[0].core.tracked_transfers(), 0, "no placeholder for an expired transfer");
    // Remembered for the abort timeout after the expiry, then forgotten (and nothing wakes the core after).
    n.sleep(Duration::from_secs(481));
    assert_eq!(n.prefillers[0].core.remembered_expired(), 0);
    assert_empty(&n);
}

#[test]
fn a_pull_of_one_expired_and_one_pending_transfer_continues_for_the_rest() {
    let mut n = lease_net("vllm-0.34.0", "vllm-0.34.0", Some(LEASE), None);
    ready(&mut n, "p-1", "x-1", vec![1]);
    n.sleep(Duration::from_secs(7));
    let now = n.now;
    n.prefillers[0].core.request_allocated(now, "p-2", "x-2");
    n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![3]), pull("d-2", "x-2", vec![4])]);
    n.settle();
    let r = replies(&n);
    assert_eq!((r[0].status, r[0].err_reqs.clone()), (Status::CONTINUE, Some(["d-1"].into())));
    let now = n.now;
    n.prefillers[0].core.request_finished(now, "p-2", "x-2", vec![vec![2]]);
    n.settle();
    let r = replies(&n);
    assert_eq!((r[1].status, r[1].ok_reqs.clone()), (Status::FINISH, Some(["d-2"].into())));
    assert_eq!(n.decoders[0].finished, vec!["d-1", "d-2"]);
    n.sleep(Duration::from_secs(481));
    assert_empty(&n);
}

#[test]
fn expiry_by_the_abort_timeout_is_answered_at_once_from_0_34_0_only() {
    for (rev, at_once) in [("vllm-0.34.0", true), ("vllm-0.33.0", false)] {
        let mut n = net(rev, rev, 0);
        ready(&mut n, "p-1", "x-1", vec![1]);
        n.sleep(Duration::from_secs(481));
        assert_eq!(n.prefillers[0].finished_sending, vec!["p-1"], "{rev}");
        let now = n.now;
        n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![3])]);
        n.settle();
        assert_eq!(!replies(&n).is_empty(), at_once, "{rev}");
        n.sleep(Duration::from_secs(480));
        let r = replies(&n);
        let want = if at_once { "KV expired on P side before the pull." } else { "Timeout waiting for P side ready." };
        assert_eq!(r[0].err_msg.as_deref(), Some(want), "{rev}");
        n.sleep(Duration::from_secs(481));
        assert_empty(&n);
    }
}

#[test]
fn a_renewal_moves_a_deadline_to_two_thirds_of_the_lease_and_never_back() {
    let mut n = lease_net("vllm-0.34.0", "vllm-0.34.0", Some(LEASE), None);
    ready(&mut n, "p-1", "x-1", vec![1]); // expires at 6 s
    let heartbeat = |n: &mut Net<ToyPlanner>| {
        let payload =
            mooncake_wire::typed::MooncakeLeaseHeartbeat { lease_transfer_ids: vec!["x-1".into(), "unknown".into()] }
                .encode();
        let now = n.now;
        n.prefillers[0].core.handle_frames(now, vec![vec![0, 1], payload]);
        let t = n.prefillers[0].core.poll_transmit().expect("a heartbeat is answered");
        MooncakeXferResponse::decode(&t.payload).unwrap()
    };
    assert_eq!(heartbeat(&mut n), MooncakeXferResponse::new(Status::FINISH), "at 0 s: 0 + 4 < 6, unchanged");
    n.sleep(Duration::from_secs(5));
    heartbeat(&mut n); // 5 + 4 = 9 s
    n.sleep(Duration::from_millis(3_900));
    assert!(n.prefillers[0].finished_sending.is_empty(), "held until 9 s");
    n.sleep(Duration::from_millis(200));
    assert_eq!(n.prefillers[0].finished_sending, vec!["p-1"], "expired just after 9 s");
    assert_eq!(n.prefillers[0].core.tracked_transfers(), 0, "a renewal does not create unknown transfers");
}

#[test]
fn a_heartbeat_to_a_prefiller_without_a_lease_is_refused_and_harmless() {
    for (p_rev, text) in [
        ("vllm-0.34.0", "kv_lease_duration is not set on this prefill instance."),
        // An older prefiller reads the heartbeat as a pull that lacks its first required field.
        ("vllm-0.33.0", "Object missing required field `remote_hostname`"),
    ] {
        let mut n = lease_net(p_rev, "vllm-0.34.0", None, Some(LEASE));
        ready(&mut n, "p-1", "x-1", vec![1]);
        let now = n.now;
        n.decoders[0].core.announce(now, vec![lease_req("d-1", "x-1")]);
        n.settle();
        let r = replies(&n);
        assert_eq!((r[0].status, r[0].err_msg.as_deref()), (Status::ERROR, Some(text)), "{p_rev}");
        let stats = n.decoders[0].core.lease_stats().clone();
        assert_eq!((stats.sent, stats.rejected, stats.last_rejection.as_deref()), (1, 1, Some(text)), "{p_rev}");
        let now = n.now;
        n.decoders[0].core.pull(now, vec![pull("d-1", "x-1", vec![3])]);
        n.settle();
        assert_eq!(n.decoders[0].finished, vec!["d-1"], "{p_rev}: the pull is served as usual");
        assert_empty(&n);
    }
}

#[test]
fn a_free_only_pull_ends_its_lease_and_one_heartbeat_names_every_leased_transfer() {
    let mut n = lease_net("vllm-0.34.0", "vllm-0.34.0", Some(LEASE), Some(LEASE));
    ready(&mut n, "p-1", "x-1", vec![1]);
    ready(&mut n, "p-2", "x-2", vec![2]);
    let now = n.now;
    n.decoders[0].core.announce(now, vec![lease_req("d-1", "x-1"), lease_req("d-2", "x-2")]);
    n.settle();
    let hb = mooncake_wire::typed::MooncakeLeaseHeartbeat::decode(&n.decoders[0].sent[0].2).unwrap();
    assert_eq!(hb.lease_transfer_ids, vec!["x-1".to_string(), "x-2".to_string()]);
    let now = n.now;
    n.decoders[0].core.pull(now, vec![pull("d-2", "x-2", vec![])]);
    assert_eq!(n.decoders[0].core.leased_requests(), 1, "a free-only pull is not renewed any more");
    n.settle();
    n.sleep(Duration::from_secs(1));
    let last = n.decoders[0].sent.last().unwrap();
    let hb = mooncake_wire::typed::MooncakeLeaseHeartbeat::decode(&last.2).unwrap();
    assert_eq!(hb.lease_transfer_ids, vec!["x-1".to_string()]);
    n.decoders[0].core.release("d-1");
    assert_eq!(n.decoders[0].core.leased_requests(), 0);
    n.sleep(Duration::from_secs(10));
    assert_eq!(n.prefillers[0].finished_sending, vec!["p-2", "p-1"], "p-2 freed by its pull, p-1 expired");
}
