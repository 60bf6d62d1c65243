//! Decoder-core bugs the fuzzers found, each as the smallest sequence that showed it (FUZZING.md, "Crashes
//! found and fixed"; the fuzz inputs themselves are in `fuzz/regressions/decoder/`).

use std::collections::BTreeMap;
use std::time::Instant;

use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::*;

/// A pull split over two prefiller workers (decoder TP 4 rank 3, prefiller TP 8) whose message cannot be said
/// in the revision (0.19.0 carries one block list per request; this one has three groups): the first exchange
/// fails before it is sent and settles the request. The core used to open the second exchange anyway, with no
/// request in it — a DEALER and a pull of nothing sent to a prefiller worker.
#[test]
fn a_request_settled_by_a_failed_first_exchange_is_not_pulled_from_the_other_workers() {
    let profile = WireProfile::builtin("vllm-0.19.0..0.19.1").unwrap();
    let layout = DecoderLayout {
        kv_caches_base_addr: vec![WireInt::from_u64(0x7000_0000)],
        block_lens: vec![WireInt::from_u64(4096)],
        kv_block_lens: vec![WireInt::from_u64(4096)],
        registered_layer_names: vec!["model.layers.0.self_attn".into()],
        registered_layer_indices: vec![WireInt::from_u64(0)],
        ..Default::default()
    };
    let cfg = DecoderConfig {
        hostname: "10.0.0.9".into(),
        te_port: 17001,
        tp_rank: 3,
        tp_size: 4,
        pp_rank: 0,
        pp_size: 1,
        layout,
        layout_id: 0,
    };
    let mut core = DecoderCore::new(profile, cfg);
    let now = Instant::now();
    core.pull(
        now,
        vec![PullRequest {
            d_req_id: "r1".into(),
            transfer_id: "t1".into(),
            local_blocks: vec![vec![1], vec![2], vec![3]],
            engine_id: "e0".into(),
            bootstrap_addr: "http://10.0.0.1:8998".into(),
            remote: None,
        }],
    );
    let mut events = vec![];
    while let Some(e) = core.poll_event() {
        events.push(e);
    }
    assert!(matches!(events.as_slice(), [DecoderEvent::Query { .. }]), "{events:?}");
    let table: EngineTable = (0..8).map(|r| (r, [(0, format!("tcp://e0-{r}-0:5555"))].into())).collect();
    core.query_result(now, "http://10.0.0.1:8998", Ok(BTreeMap::from([("e0".to_string(), table)])));
    let mut events = vec![];
    while let Some(e) = core.poll_event() {
        events.push(e);
    }
    let opened: Vec<_> = events.iter().filter(|e| matches!(e, DecoderEvent::Open { .. })).collect();
    assert!(opened.is_empty(), "an exchange opened for a request already settled: {opened:?}");
    let settled: Vec<_> =
        events.iter().filter(|e| matches!(e, DecoderEvent::Unsettled { d_req_id, .. } if d_req_id == "r1")).collect();
    assert_eq!(settled.len(), 1, "r1 settles once: {events:?}");
    assert_eq!(core.pending_pulls(), 0);
    assert_eq!(core.open_exchanges(), 0);
}
