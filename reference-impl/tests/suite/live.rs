//! The reference peer over real ZeroMQ, HTTP and TCP on 127.0.0.1, driven through the testee control protocol:
//! a bootstrap server, prefillers and decoders pull real bytes; faults from misbehaving peers get a clear
//! answer or a logged rejection, the peer keeps serving, and no state is left behind.

use std::time::Duration;

use mooncake_reference::testee::Testee;
use mooncake_wire::proto::memory::decode_provenance;
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse, Status};
use serde_json::{json, Value as J};

const BLOCK: u64 = 2048;
const NBLOCKS: u64 = 32;

fn layout(base: u64, kv_block: u64) -> J {
    json!({
        "kv_caches_base_addr": [base, base + BLOCK * NBLOCKS],
        "block_lens": [kv_block, kv_block], "kv_block_lens": [kv_block, kv_block],
        "registered_layer_names": ["model.layers.0.self_attn", "model.layers.1.self_attn"],
        "registered_layer_indices": [0, 1], "registered_group_indices": [0, 0],
        "registered_shared_group_ids": [[0], [0]], "registered_row_offsets": [0, 0],
        "num_blocks": NBLOCKS,
    })
}

async fn ok(t: &mut Testee, cmd: J) -> J {
    let r = t.handle(&cmd).await;
    assert_eq!(r["ok"], true, "{cmd} -> {r}");
    r
}

struct Setup {
    boot: Testee,
    pre: Testee,
    dec: Testee,
    url: String,
    endpoint: String,
}

async fn setup(rev: &str, abort_s: f64, layout_id: u64) -> Setup {
    let mut boot = Testee::default();
    let url =
        ok(&mut boot, json!({"cmd": "start", "role": "bootstrap", "revision": rev, "config": {"bind": "127.0.0.1:0"}}))
            .await["url"]
            .as_str()
            .unwrap()
            .to_string();
    let mut pre = Testee::default();
    let endpoint = ok(
        &mut pre,
        json!({"cmd": "start", "role": "prefiller", "revision": rev, "config": {
            "engine_id": "engine-p", "bootstrap": url, "abort_timeout_s": abort_s,
            "model": {"total_num_kv_heads": 4}, "layout": layout(0x1000_0000, BLOCK)}}),
    )
    .await["endpoint"]
        .as_str()
        .unwrap()
        .to_string();
    let mut dec = Testee::default();
    ok(&mut dec, json!({"cmd": "start", "role": "decoder", "revision": rev, "config": {"layout_id": layout_id, "abort_timeout_s": abort_s, "layout": layout(0x2000_0000, BLOCK)}})).await;
    Setup { boot, pre, dec, url, endpoint }
}

async fn wait_decoder(dec: &mut Testee, n: usize) -> J {
    for _ in 0..2000 {
        let s = ok(dec, json!({"cmd": "status"})).await;
        if s["finished"].as_array().unwrap().len() + s["unsettled"].as_array().unwrap().len() >= n
            && s["pending_pulls"] == 0
        {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("decoder did not settle: {}", ok(dec, json!({"cmd": "status"})).await);
}

fn pull(d: &str, t: &str, blocks: Vec<u64>, url: &str) -> J {
    json!({"d_req_id": d, "transfer_id": t, "blocks": [blocks], "engine_id": "engine-p", "bootstrap_addr": url})
}

/// Every destination block of both layers holds the words of the expected source block, and nothing else
/// was written.
async fn check_landed(dec: &mut Testee, expect: &[(u64, u64)]) {
    for layer in 0..2u64 {
        let base = 0x2000_0000 + layer * BLOCK * NBLOCKS;
        let hex = ok(dec, json!({"cmd": "read_memory", "addr": base, "len": BLOCK * NBLOCKS})).await["hex"]
            .as_str()
            .unwrap()
            .to_string();
        let mem = hex::decode(hex).unwrap();
        for b in 0..NBLOCKS {
            let words: Vec<Option<(u64, u64, u64)>> = mem[(b * BLOCK) as usize..((b + 1) * BLOCK) as usize]
                .chunks(8)
                .map(|w| decode_provenance(u64::from_le_bytes(w.try_into().unwrap())))
                .collect();
            match expect.iter().find(|(d, _)| *d == b) {
                Some((_, src)) => {
                    for (k, w) in words.iter().enumerate() {
                        assert_eq!(*w, Some((layer, *src, k as u64 * 8)), "layer {layer} block {b} word {k}");
                    }
                }
                None => assert!(
                    mem[(b * BLOCK) as usize..((b + 1) * BLOCK) as usize].iter().all(|x| *x == 0),
                    "layer {layer} block {b} must be untouched"
                ),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_move_real_bytes_over_zeromq_and_tcp() {
    let mut s = setup("vllm-0.33.0", 30.0, 0x1357).await;
    ok(&mut s.pre, json!({"cmd": "ready", "p_req_id": "p-1", "transfer_id": "x-1", "blocks": [[1, 2, 3]]})).await;
    ok(&mut s.pre, json!({"cmd": "ready", "p_req_id": "p-2", "transfer_id": "x-2", "blocks": [[10]]})).await;
    ok(&mut s.dec, json!({"cmd": "pull", "requests": [pull("d-1", "x-1", vec![5, 6, 7], &s.url), pull("d-2", "x-2", vec![20], &s.url)]})).await;
    let st = wait_decoder(&mut s.dec, 2).await;
    assert_eq!(st["failed"], json!([]));
    check_landed(&mut s.dec, &[(5, 1), (6, 2), (7, 3), (20, 10)]).await;
    let p = ok(&mut s.pre, json!({"cmd": "status"})).await;
    assert_eq!(p["finished_sending"].as_array().unwrap().len(), 2);
    assert_eq!((p["tracked_transfers"].as_u64(), p["open_exchanges"].as_u64()), (Some(0), Some(0)));
    assert_eq!(p["writes"][0]["ret"], 0);
    // The second pull leaves the layout out (the prefiller echoed the layout id) and still lands.
    ok(&mut s.pre, json!({"cmd": "ready", "p_req_id": "p-3", "transfer_id": "x-3", "blocks": [[4]]})).await;
    ok(&mut s.dec, json!({"cmd": "pull", "requests": [pull("d-3", "x-3", vec![8], &s.url)]})).await;
    wait_decoder(&mut s.dec, 3).await;
    check_landed(&mut s.dec, &[(5, 1), (6, 2), (7, 3), (20, 10), (8, 4)]).await;
    let b = ok(&mut s.boot, json!({"cmd": "status"})).await;
    assert_eq!(b["workers"], 1);
}

/// A raw DEALER/REQ client for the fault cases.
fn raw_socket(kind: zmq::SocketType, endpoint: &str) -> (zmq::Context, zmq::Socket) {
    let ctx = zmq::Context::new();
    let s = ctx.socket(kind).unwrap();
    s.set_linger(0).unwrap();
    s.set_rcvtimeo(5000).unwrap();
    s.connect(endpoint).unwrap();
    (ctx, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_clients_cannot_break_the_prefiller() {
    let mut s = setup("vllm-0.33.0", 1.0, 0).await;
    let endpoint = s.endpoint.clone();
    let (frames_ok, garbage_reply, req_reply) = tokio::task::spawn_blocking(move || {
        // A REQ socket adds an empty delimiter: three frames at the ROUTER. vLLM's listener dies on it; ours
        // logs and refuses it (no reply).
        let (_c1, req) = raw_socket(zmq::REQ, &endpoint);
        req.send(&b"\x80"[..], 0).unwrap();
        req.set_rcvtimeo(300).unwrap();
        let req_reply = req.recv_bytes(0).is_ok();
        // Garbage on a DEALER: an ERROR with msgspec's message.
        let (_c2, d) = raw_socket(zmq::DEALER, &endpoint);
        d.send(&b"\xc1"[..], 0).unwrap();
        let garbage = d.recv_bytes(0).unwrap();
        // A multipart message from a DEALER: refused too.
        d.send_multipart([&b"a"[..], &b"b"[..]], 0).unwrap();
        // An oversize frame (above MAX_FRAME_BYTES): libzmq drops that connection.
        let (_c3, big) = raw_socket(zmq::DEALER, &endpoint);
        let huge = vec![0u8; mooncake_wire::limits::MAX_FRAME_BYTES + 1];
        big.send(huge, 0).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        (true, garbage, req_reply)
    })
    .await
    .unwrap();
    assert!(frames_ok && !req_reply);
    let r = MooncakeXferResponse::decode(&garbage_reply).unwrap();
    assert_eq!(
        (r.status, r.err_msg.as_deref()),
        (Status::ERROR, Some("MessagePack data is malformed: invalid opcode '\\xc1' (byte 0)"))
    );
    // An unknown transfer id: FINISH with err_reqs after the abort timeout.
    ok(&mut s.dec, json!({"cmd": "pull", "requests": [pull("d-404", "nope", vec![3], &s.url)]})).await;
    let st = wait_decoder(&mut s.dec, 1).await;
    assert_eq!(st["failed"][0]["reason"], "Timeout waiting for P side ready.");
    // A decoder that vanishes mid-transfer: its DEALER closes before the answer; the prefiller answers into
    // the void (libzmq drops it), then still frees the transfer after the abort timeout.
    let endpoint = s.endpoint.clone();
    tokio::task::spawn_blocking(move || {
        let (_c, d) = raw_socket(zmq::DEALER, &endpoint);
        let m = MooncakeXferMetadata {
            remote_hostname: "127.0.0.1".into(),
            remote_port: 1u64.into(),
            req_blocks: vec![(
                "d-gone".into(),
                mooncake_wire::typed::ReqBlocks { transfer_id: "x-gone".into(), blocks: vec![vec![1u64.into()]] },
            )],
            kv_caches_base_addr: vec![0x3000_0000u64.into(), 0x3001_0000u64.into()],
            block_lens: vec![BLOCK.into(); 2],
            kv_block_lens: vec![BLOCK.into(); 2],
            registered_layer_names: vec!["model.layers.0.self_attn".into(), "model.layers.1.self_attn".into()],
            registered_layer_indices: vec![0u64.into(), 1u64.into()],
            ..Default::default()
        };
        d.send(m.encode(), 0).unwrap();
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The prefiller still serves a normal pull, and its tables are empty afterwards.
    ok(&mut s.pre, json!({"cmd": "ready", "p_req_id": "p-1", "transfer_id": "x-1", "blocks": [[1]]})).await;
    ok(&mut s.dec, json!({"cmd": "pull", "requests": [pull("d-1", "x-1", vec![2], &s.url)]})).await;
    let st = wait_decoder(&mut s.dec, 2).await;
    assert!(st["finished"].as_array().unwrap().iter().any(|x| x == "d-1"));
    check_landed(&mut s.dec, &[(2, 1)]).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let p = ok(&mut s.pre, json!({"cmd": "status"})).await;
    assert_eq!((p["tracked_transfers"].as_u64(), p["open_exchanges"].as_u64()), (Some(0), Some(0)), "{p}");
    assert!(p["rejected"].as_array().unwrap().len() >= 2, "the 3-frame and multipart messages were logged: {p}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefiller_that_never_answers_fails_the_pull_on_time() {
    let mut boot = Testee::default();
    let url = ok(&mut boot, json!({"cmd": "start", "role": "bootstrap", "revision": "vllm-0.33.0", "config": {}}))
        .await["url"]
        .as_str()
        .unwrap()
        .to_string();
    // A ROUTER that registers and then never answers.
    let ctx = zmq::Context::new();
    let router = ctx.socket(zmq::ROUTER).unwrap();
    router.set_linger(0).unwrap();
    router.bind("tcp://127.0.0.1:*").unwrap();
    let ep = router.get_last_endpoint().unwrap().unwrap();
    let body = json!({"engine_id": "engine-p", "dp_rank": 0, "tp_rank": 0, "pp_rank": 0, "addr": ep});
    mooncake_reference::http::register(&url, &body, Duration::from_secs(5)).await.unwrap();
    let mut dec = Testee::default();
    // A bad duration is refused, not a crash.
    let r = dec.handle(&json!({"cmd": "start", "role": "decoder", "revision": "vllm-0.33.0", "config": {"abort_timeout_s": -1.0, "layout": layout(0x2000_0000, BLOCK)}})).await;
    assert!(r["error"].as_str().unwrap().contains("abort_timeout_s"), "{r}");
    // vLLM waits abort timeout + 60 s for each reply; the test shortens the receive timeout itself.
    ok(&mut dec, json!({"cmd": "start", "role": "decoder", "revision": "vllm-0.33.0", "config": {"recv_timeout_s": 0.5, "layout": layout(0x2000_0000, BLOCK)}})).await;
    ok(&mut dec, json!({"cmd": "pull", "requests": [pull("d-1", "x-1", vec![1], &url)]})).await;
    let st = wait_decoder(&mut dec, 1).await;
    assert_eq!(st["failed"][0]["reason"], "transfer failed: Resource temporarily unavailable");
    drop(router);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_conflicts_are_refused_and_identical_retries_accepted() {
    let mut boot = Testee::default();
    let url = ok(&mut boot, json!({"cmd": "start", "role": "bootstrap", "revision": "vllm-0.33.0", "config": {}}))
        .await["url"]
        .as_str()
        .unwrap()
        .to_string();
    let body = |addr: &str| json!({"engine_id": "e", "dp_rank": 0, "tp_rank": 0, "pp_rank": 0, "addr": addr});
    let t = Duration::from_secs(5);
    mooncake_reference::http::register(&url, &body("tcp://127.0.0.1:1"), t).await.unwrap();
    mooncake_reference::http::register(&url, &body("tcp://127.0.0.1:1"), t).await.unwrap();
    let e = mooncake_reference::http::register(&url, &body("tcp://127.0.0.1:2"), t).await.unwrap_err();
    // An answer is final (no retry), and the error says which request, the status and the server's reason.
    assert!(
        matches!(&e, mooncake_reference::http::HttpError::Status { request: "POST /register", status: 400, body }
            if body.contains("is already registered at tcp://127.0.0.1:1")),
        "{e:?}"
    );
    assert!(!e.is_transient());
    let (status, _) =
        mooncake_reference::http::request("POST", &format!("{url}/register"), Some(&json!({"engine_id": 1})), t)
            .await
            .unwrap();
    assert_eq!(status, 422);
    let (status, body) = mooncake_reference::http::request("GET", &format!("{url}/nope"), None, t).await.unwrap();
    assert_eq!((status, String::from_utf8(body).unwrap()), (404, "{\"detail\":\"Not Found\"}".to_string()));
    let q = mooncake_reference::http::query(&url, t).await.unwrap();
    assert_eq!(q, json!({"0": {"engine_id": "e", "worker_addr": {"0": {"0": "tcp://127.0.0.1:1"}}}}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_ten_thousand_pulls_loses_and_doubles_nothing() {
    let mut s = setup("vllm-0.33.0", 30.0, 0x99).await;
    let n = 10_000u64;
    for i in 0..n {
        ok(&mut s.pre, json!({"cmd": "ready", "p_req_id": format!("p-{i}"), "transfer_id": format!("x-{i}"), "blocks": [[i % NBLOCKS]]})).await;
    }
    let reqs: Vec<J> = (0..n).map(|i| pull(&format!("d-{i}"), &format!("x-{i}"), vec![i % NBLOCKS], &s.url)).collect();
    for chunk in reqs.chunks(100) {
        ok(&mut s.dec, json!({"cmd": "pull", "requests": chunk})).await;
    }
    let mut st = J::Null;
    for _ in 0..6000 {
        st = ok(&mut s.dec, json!({"cmd": "status"})).await;
        if st["finished"].as_array().unwrap().len() as u64 >= n && st["pending_pulls"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let fin = st["finished"].as_array().unwrap();
    let mut ids: Vec<&str> = fin.iter().map(|x| x.as_str().unwrap()).collect();
    assert_eq!(ids.len() as u64, n, "every completion reported exactly once");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len() as u64, n);
    assert_eq!(st["failed"], json!([]));
    let p = ok(&mut s.pre, json!({"cmd": "status"})).await;
    assert_eq!(p["finished_sending"].as_array().unwrap().len() as u64, n);
    assert_eq!((p["tracked_transfers"].as_u64(), p["open_exchanges"].as_u64()), (Some(0), Some(0)));
}
