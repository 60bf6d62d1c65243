//! The pull family's roles of the reference peer (vllm-ascend 0.18.0 and 0.23.0.post1), driven through the testee
//! control protocol on 127.0.0.1: a decoder reads a prefiller's blocks over the real transfer engine, completes
//! the request and the prefiller frees it; a failed read is reported as each release does; and the prefiller's
//! metadata has the recorded replies' keys, nesting and values, live ones (ports, addresses) aside.

use std::time::Duration;

use mooncake_reference::testee::{hello, Testee};
use mooncake_wire::codec::Codec;
use mooncake_wire::proto::memory::decode_provenance;
use serde_json::{json, Value as J};

const REVISIONS: [&str; 2] = ["vllm-ascend-0.18.0", "vllm-ascend-0.23.0.post1"];
const BLOCK: u64 = 1024;
const NBLOCKS: u64 = 32;
const P_BASE: u64 = 0x1000_0000;
const D_BASE: u64 = 0x2000_0000;
const SPAN: u64 = 0x10_0000;

/// Two layers, K and V each (4 regions), as vllm-ascend's recordings register them.
fn layout(base: u64) -> J {
    json!({
        "kv_caches_base_addr": (0..4).map(|r| base + r * SPAN).collect::<Vec<_>>(),
        "block_lens": [BLOCK, BLOCK, BLOCK, BLOCK], "kv_block_lens": [BLOCK, BLOCK, BLOCK, BLOCK],
        "registered_layer_names": ["model.layers.0.self_attn", "model.layers.0.self_attn",
                                   "model.layers.1.self_attn", "model.layers.1.self_attn"],
        "registered_layer_indices": [0, 0, 1, 1], "registered_group_indices": [0, 0, 0, 0],
        "num_blocks": NBLOCKS,
    })
}

async fn ok(t: &mut Testee, cmd: J) -> J {
    let r = t.handle(&cmd).await;
    assert_eq!(r["ok"], true, "{cmd} -> {r}");
    r
}

/// A prefiller and a decoder of `rev`; the prefiller's ROUTER port.
async fn pair(rev: &str) -> (Testee, Testee, u64) {
    let mut pre = Testee::default();
    let started = ok(
        &mut pre,
        json!({"cmd": "start", "role": "prefiller", "revision": rev, "config": {
            "engine_id": "engine-prefill-0", "abort_timeout_s": 30.0,
            "model": {"total_num_kv_heads": 4, "block_size": 16}, "layout": layout(P_BASE)}}),
    )
    .await;
    let endpoint = started["endpoint"].as_str().unwrap().to_string();
    let port = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let mut dec = Testee::default();
    let started = ok(
        &mut dec,
        json!({"cmd": "start", "role": "decoder", "revision": rev, "config": {
            "recv_timeout_s": 5.0, "layout": layout(D_BASE)}}),
    )
    .await;
    assert_eq!(started, json!({"ok": true}), "a pull decoder answers start with nothing to say");
    (pre, dec, port)
}

/// Pulls `req` (the prefiller's `src` blocks into the decoder's `dst` blocks) and waits until it finished.
async fn pull(pre: &mut Testee, dec: &mut Testee, port: u64, req: &str, src: &[u64], dst: &[u64]) -> J {
    ok(pre, json!({"cmd": "ready", "p_req_id": format!("p-{req}"), "transfer_id": req, "blocks": [src]})).await;
    let p = json!({"d_req_id": format!("d-{req}"), "transfer_id": req, "blocks": [dst], "remote_blocks": [src],
                   "engine_id": "engine-prefill-0", "remote_host": "127.0.0.1", "remote_port": port});
    ok(dec, json!({"cmd": "pull", "requests": [p]})).await;
    for _ in 0..2000 {
        let s = ok(dec, json!({"cmd": "status"})).await;
        let done = s["finished"].as_array().unwrap().iter().any(|f| f == &format!("d-{req}"));
        if done && s["pending_pulls"] == 0 && s["open_exchanges"] == 0 {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{req} did not finish: {}", ok(dec, json!({"cmd": "status"})).await);
}

/// Every block of every decoder region: the prefiller's block `pairs` maps it from, or zeros.
async fn check_memory(dec: &mut Testee, pairs: &[(u64, u64)]) {
    for region in 0..4u64 {
        let addr = D_BASE + region * SPAN;
        let r = ok(dec, json!({"cmd": "read_memory", "addr": addr, "len": BLOCK * NBLOCKS})).await;
        let mem = hex::decode(r["hex"].as_str().unwrap()).unwrap();
        for (b, block) in mem.chunks(BLOCK as usize).enumerate() {
            let b = b as u64;
            match pairs.iter().find(|(d, _)| *d == b) {
                Some((_, src)) => {
                    for (k, w) in block.chunks(8).enumerate() {
                        let word = decode_provenance(u64::from_le_bytes(w.try_into().unwrap()));
                        assert_eq!(word, Some((region, *src, k as u64 * 8)), "region {region} block {b} word {k}");
                    }
                }
                None => assert!(block.iter().all(|x| *x == 0), "region {region} block {b} must be untouched"),
            }
        }
    }
}

#[test]
fn the_hello_lists_the_pull_revisions_after_the_push_ones() {
    let h = hello();
    let first_pull = h.revisions.iter().position(|r| r.starts_with("vllm-ascend-")).unwrap();
    assert_eq!(h.revisions[first_pull..], REVISIONS);
    assert!(h.revisions[..first_pull].iter().all(|r| r.starts_with("vllm-0.")), "{:?}", h.revisions);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decoder_reads_the_prefillers_blocks_and_a_failed_read_is_reported_as_the_release_does() {
    for rev in REVISIONS {
        let (mut pre, mut dec, port) = pair(rev).await;
        let s = pull(&mut pre, &mut dec, port, "req-1", &[1, 2, 3], &[4, 5, 6]).await;
        assert_eq!(s["failed"], json!([]), "{rev}");
        assert_eq!(
            s["reads"],
            json!([{"session": s["reads"][0]["session"], "descriptors": 4, "bytes": 12288, "ret": 0}])
        );
        check_memory(&mut dec, &[(4, 1), (5, 2), (6, 3)]).await;

        ok(&mut dec, json!({"cmd": "fail_next_transfer", "count": 1, "ret": -1})).await;
        let s = pull(&mut pre, &mut dec, port, "req-2", &[5, 6, 9], &[3, 4, 5]).await;
        assert_eq!(s["finished"], json!(["d-req-1", "d-req-2"]), "{rev}");
        assert_eq!(s["reads"][1]["descriptors"], 8, "{rev}: [5, 6, 9] → [3, 4, 5] is two runs (as recorded)");
        assert_eq!(s["reads"][1]["ret"], -1, "{rev}");
        let failed = if rev.ends_with("0.18.0") {
            json!([])
        } else {
            json!([{"d_req_id": "d-req-2", "reason": "read returned -1", "invalid_blocks": [3, 4, 5],
                    "failed_recving": false}])
        };
        assert_eq!(s["failed"], failed, "{rev}");
        check_memory(&mut dec, &[(4, 1), (5, 2), (6, 3)]).await;

        let p = ok(&mut pre, json!({"cmd": "status"})).await;
        let freed = json!([{"p_req_id": "p-req-1", "transfer_id": "req-1", "expired": false},
                           {"p_req_id": "p-req-2", "transfer_id": "req-2", "expired": false}]);
        assert_eq!(p["finished_sending"], freed, "{rev}: the completion frees, even after a failed read");
        assert_eq!((&p["tracked_transfers"], &p["open_exchanges"]), (&json!(0), &json!(0)), "{rev}");
        ok(&mut dec, json!({"cmd": "stop"})).await;
        ok(&mut pre, json!({"cmd": "stop"})).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_nobody_completes_expires() {
    let mut pre = Testee::default();
    ok(
        &mut pre,
        json!({"cmd": "start", "role": "prefiller", "revision": REVISIONS[1], "config": {
            "engine_id": "e", "abort_timeout_s": 0.2, "model": {"total_num_kv_heads": 4}, "layout": layout(P_BASE)}}),
    )
    .await;
    ok(&mut pre, json!({"cmd": "ready", "p_req_id": "p-1", "transfer_id": "req-1", "blocks": [[1]]})).await;
    for _ in 0..400 {
        let p = ok(&mut pre, json!({"cmd": "status"})).await;
        if p["tracked_transfers"] == 0 {
            assert_eq!(p["finished_sending"], json!([{"p_req_id": "p-1", "transfer_id": "req-1", "expired": true}]));
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("req-1 never expired");
}

/// The metadata reply of a prefiller at `endpoint`, over a REQ as vllm-ascend's decoder sends the query.
async fn query(endpoint: String, get_meta: Vec<u8>) -> Vec<u8> {
    tokio::task::spawn_blocking(move || {
        let ctx = zmq::Context::new();
        let s = ctx.socket(zmq::REQ).unwrap();
        s.set_rcvtimeo(5000).unwrap();
        s.set_linger(0).unwrap();
        s.connect(&endpoint).unwrap();
        s.send(get_meta, 0).unwrap();
        s.recv_bytes(0).unwrap()
    })
    .await
    .unwrap()
}

/// `got` has `want`'s keys in `want`'s order, its nesting and list lengths, and its values, except the live ones
/// (`te_rpc_port`, `handshake_port`, `kv_caches_base_addr`), whose shape alone must match.
fn same_shape(got: &J, want: &J, path: &str, live: bool) {
    match (got, want) {
        (J::Object(g), J::Object(w)) => {
            let (gk, wk): (Vec<&String>, Vec<&String>) = (g.keys().collect(), w.keys().collect());
            assert_eq!(gk, wk, "keys at {path}");
            for (k, x) in w {
                let live = live || ["te_rpc_port", "handshake_port", "kv_caches_base_addr"].contains(&k.as_str());
                same_shape(&g[k], x, &format!("{path}.{k}"), live);
            }
        }
        (J::Array(g), J::Array(w)) => {
            assert_eq!(g.len(), w.len(), "length at {path}");
            for (i, (x, y)) in g.iter().zip(w).enumerate() {
                same_shape(x, y, &format!("{path}[{i}]"), live);
            }
        }
        (J::Number(_), J::Number(_)) if live => {}
        _ => assert_eq!(got, want, "at {path}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_reply_has_the_recorded_shape() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("../conformance/traces-pull");
    if !dir.exists() {
        // The packaged crate (`scripts/package-check.sh` runs its tests from the tarball) has no recordings.
        assert!(root.join("Cargo.toml.orig").exists(), "conformance/traces-pull is missing from the repository");
        println!("SKIPPED: the metadata reply against the recordings — conformance/traces-pull is not in the package");
        return;
    }
    let mut checked = 0;
    for rev in REVISIONS {
        let codec = Codec::builtin(rev).unwrap();
        let profile = mooncake_wire::proto::pull::PullProfile::builtin(rev).unwrap();
        let mut pre = Testee::default();
        let started = ok(
            &mut pre,
            json!({"cmd": "start", "role": "prefiller", "revision": rev, "config": {
                "engine_id": "engine-prefill-0", "model": {"total_num_kv_heads": 4, "block_size": 16},
                "layout": layout(P_BASE)}}),
        )
        .await;
        let live = query(started["endpoint"].as_str().unwrap().into(), profile.encode_get_meta()).await;
        let live = Codec::to_json(&codec.decode("MooncakeAgentMetadata", &live).unwrap());
        assert!(live["te_rpc_port"].as_u64().is_some_and(|p| p > 0), "{live}");
        if let Some(port) = live.get("handshake_port") {
            assert_eq!(started["endpoint"].as_str().unwrap().rsplit(':').next().unwrap(), port.to_string());
        }
        for entry in std::fs::read_dir(dir.join(rev)).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in text.lines().skip(1) {
                let r: J = serde_json::from_str(line).unwrap();
                if r["side"] != "prefiller" || r["dir"] != "send" || r.get("payload_text").is_some() {
                    continue;
                }
                let payload = hex::decode(r["frames"].as_array().unwrap().last().unwrap().as_str().unwrap()).unwrap();
                let recorded = Codec::to_json(&codec.decode("MooncakeAgentMetadata", &payload).unwrap());
                same_shape(&live, &recorded, rev, false);
                checked += 1;
            }
        }
        ok(&mut pre, json!({"cmd": "stop"})).await;
    }
    assert_eq!(checked, 2 * (1 + 2 + 1), "every recorded metadata reply of both releases");
}
