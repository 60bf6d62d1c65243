//! `replay` against implementations the runner neither starts nor controls: a prefiller at an endpoint, a
//! decoder that pulls from the runner's listening prefiller, a bootstrap server at a URL.

use std::path::PathBuf;
use std::time::Duration;

use mooncake_conformance::play::{External, Role, Status};
use mooncake_conformance::run::{run, RunConfig};
use mooncake_conformance::setup;
use mooncake_conformance::testee::{Testee, TesteeSpec};
use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::Trace;
use serde_json::json;

fn trace(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("traces/vllm-0.33.0").join(name)
}

/// A `mooncake-peer testee` process (the built-in testee), driven by hand: an implementation the runner
/// does not control.
async fn peer() -> Testee {
    Testee::start(&TesteeSpec::Builtin).await.map_err(|e| e.message).unwrap().0
}

/// A bootstrap server of `revision` in a peer of its own, and its URL.
async fn bootstrap(revision: &str) -> (Testee, String) {
    let mut boot = peer().await;
    let a = boot.cmd(json!({"cmd": "start", "role": "bootstrap", "revision": revision, "config": {}})).await.unwrap();
    let url = a["url"].as_str().unwrap().to_string();
    (boot, url)
}

/// A 0.33.0 prefiller configured as recorded worker 0 of `model`, registered with the bootstrap server at
/// `url`, with the transfers `ready` (p_req_id, transfer_id, blocks) made ready; and its ROUTER endpoint.
async fn prefiller(model: &Conversation, url: &str, ready: &[(&str, &str, serde_json::Value)]) -> (Testee, String) {
    let mut p = peer().await;
    let sc = mooncake_conformance::bundled::scenarios();
    let conf = setup::prefiller_config(model, &model.prefillers[0], &sc.model, url).unwrap();
    let a =
        p.cmd(json!({"cmd": "start", "role": "prefiller", "revision": "vllm-0.33.0", "config": conf})).await.unwrap();
    let endpoint = a["endpoint"].as_str().unwrap().to_string();
    for (pr, t, b) in ready {
        p.cmd(json!({"cmd": "ready", "p_req_id": pr, "transfer_id": t, "blocks": b})).await.unwrap();
    }
    (p, endpoint)
}

/// `--listen` on a free port of 127.0.0.1 (`ready_after` as given), and the bootstrap address it binds.
fn listen(ready_after: Option<Duration>) -> (External, String) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let boot_bind = format!("127.0.0.1:{port}");
    let ext = External::Listen {
        endpoint: "tcp://127.0.0.1:*".into(),
        bootstrap: boot_bind.clone(),
        timeout: Duration::from_secs(20),
        ready_after,
    };
    (ext, boot_bind)
}

/// The decoder under test, configured as recorded in `model`: once the runner's prefiller has registered at
/// the bootstrap server `boot_bind`, it pulls `d-req-1` from it.
async fn decoder_pulling(model: &Conversation, boot_bind: &str) -> Testee {
    let req = model.decoders[0].layout_request.clone().unwrap();
    let mut d = peer().await;
    let conf = json!({"layout_id": req.layout_id.as_u64(), "abort_timeout_s": 2.0, "layout": setup::decoder_layout(&req, &mooncake_conformance::bundled::scenarios().model)});
    let a = d.cmd(json!({"cmd": "start", "role": "decoder", "revision": "vllm-0.33.0", "config": conf})).await.unwrap();
    assert_eq!(a["ok"], true);
    let url = format!("http://{boot_bind}");
    for _ in 0..200 {
        if mooncake_io::http::query(&url, Duration::from_secs(1))
            .await
            .is_ok_and(|q| q.as_object().is_some_and(|o| !o.is_empty()))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pulled = d.cmd(json!({"cmd": "pull", "requests": [{"d_req_id": "d-req-1", "transfer_id": "xfer-1", "blocks": [[3, 4, 5]], "engine_id": "engine-prefill-0", "bootstrap_addr": url}]})).await.unwrap();
    assert_eq!(pulled["ok"], true);
    d
}

fn cfg(path: PathBuf, role: Role, external: External) -> RunConfig {
    let mut c = RunConfig::paths(&[path], TesteeSpec::Builtin).unwrap();
    c.roles = vec![role];
    c.slack = Duration::from_secs(2);
    c.external = external;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_against_a_running_prefiller() {
    let path = trace("g_continue_then_finish.jsonl");
    let model = Conversation::new(Trace::load(&path).unwrap()).unwrap();
    // A prefiller someone else started, registered with some bootstrap server, transfers prepared by hand.
    // Only the first transfer is ready: the second never becomes ready, so the pull times out.
    let (_boot, url) = bootstrap("vllm-0.33.0").await;
    let (_p, endpoint) = prefiller(&model, &url, &[("p-req-1", "xfer-1", json!([[3, 4]]))]).await;
    let r = run(cfg(path, Role::Prefiller, External::Prefillers(vec![endpoint]))).await.unwrap();
    assert_eq!(r.results.len(), 1);
    let c = &r.results[0];
    assert_eq!(c.status, Status::Fail);
    let checks: Vec<&str> = c.findings.iter().map(|f| f.check.as_str()).collect();
    // The CONTINUE matches; the FINISH is the timeout's, not the recorded one.
    assert!(checks.contains(&"REPLY-DIFF"), "{:?}", c.findings);
    assert!(c.findings.iter().any(|f| f.detail.contains("Timeout waiting for P side ready.")), "{:?}", c.findings);
    // Both transfers ready before the pull (a second prefiller, with its own bootstrap server).
    let (_boot2, url2) = bootstrap("vllm-0.33.0").await;
    let ready = [("p-req-1", "xfer-1", json!([[3, 4]])), ("p-req-2", "xfer-2", json!([[5, 6, 7]]))];
    let (_p2, endpoint) = prefiller(&model, &url2, &ready).await;
    let r = run(cfg(trace("g_continue_then_finish.jsonl"), Role::Prefiller, External::Prefillers(vec![endpoint])))
        .await
        .unwrap();
    // Both ready at once: vLLM's prefiller answers with one FINISH listing both, which differs from the
    // recording's CONTINUE + FINISH; the runner reports exactly that.
    let c = &r.results[0];
    assert!(c.findings.iter().all(|f| ["REPLY-DIFF", "REPLY-MISSING"].contains(&f.check.as_str())), "{:?}", c.findings);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listens_for_a_decoder_it_does_not_control() {
    let path = trace("a_single_success.jsonl");
    let model = Conversation::new(Trace::load(&path).unwrap()).unwrap();
    let (ext, boot_bind) = listen(None);
    let runner = tokio::spawn(run(cfg(path, Role::Decoder, ext)));
    // The decoder under test, configured as recorded, pulls from the runner's bootstrap server.
    let mut d = decoder_pulling(&model, &boot_bind).await;
    let r = runner.await.unwrap().unwrap();
    assert_eq!(r.results[0].status, Status::Pass, "{:?}", r.results[0].findings);
    let s = d.cmd(json!({"cmd": "status"})).await.unwrap();
    assert_eq!(s["finished"], json!(["d-req-1"]));
}

/// A prefiller the runner does not control, whose transfer engine the runner cannot reach (the reference
/// prefiller's initiator names no segment of its own): the case passes, and the report says that landed bytes
/// were not checked, and why — instead of failing on a provenance pattern only the runner's own prefiller
/// fills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_a_reachable_engine_passes_with_landed_bytes_not_checked() {
    let path = trace("a_single_success.jsonl");
    let model = Conversation::new(Trace::load(&path).unwrap()).unwrap();
    let (_boot, url) = bootstrap("vllm-0.33.0").await;
    let (_p, endpoint) = prefiller(&model, &url, &[("p-req-1", "xfer-1", json!([[3, 4, 5]]))]).await;
    let r = run(cfg(path, Role::Prefiller, External::Prefillers(vec![endpoint]))).await.unwrap();
    let c = &r.results[0];
    assert_eq!(c.status, Status::Pass, "{:?}", c.findings);
    assert!(
        c.notes.iter().any(|n| n.starts_with("not checked: landed bytes — the peer's engine is not reachable")),
        "{:?}",
        c.notes
    );
}

/// `--listen` with the transfers made ready long after the decoder pulls (`ready_after`): the runner's
/// prefiller answers with the abort timeout's error instead of the recorded FINISH. The decoder's request is
/// exactly the recorded one, yet the case must not pass: it is broken (environment or timing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_run_whose_own_reply_deviates_is_broken() {
    let path = trace("a_single_success.jsonl");
    let model = Conversation::new(Trace::load(&path).unwrap()).unwrap();
    let (ext, boot_bind) = listen(Some(Duration::from_secs(30)));
    let runner = tokio::spawn(run(cfg(path, Role::Decoder, ext)));
    let _d = decoder_pulling(&model, &boot_bind).await;
    let r = runner.await.unwrap().unwrap();
    let c = &r.results[0];
    assert_eq!(c.status, Status::Error, "{:?} {:?}", c.findings, c.reason);
    assert!(c.findings.iter().any(|f| f.check.as_str() == "RUNNER-DEVIATION"), "{:?}", c.findings);
    assert!(c.reason.as_deref().is_some_and(|r| r.starts_with("broken case")), "{:?}", c.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_http_against_a_running_bootstrap_server() {
    let (_boot, url) = bootstrap("vllm-0.33.0").await;
    let r = run(cfg(trace("i_bootstrap_register_query.jsonl"), Role::Bootstrap, External::Bootstrap(url.clone())))
        .await
        .unwrap();
    assert_eq!(r.results[0].status, Status::Pass, "{:?}", r.results[0].findings);
    // A server with 0.30.0 semantics that already holds the registrations: the identical re-registrations the
    // recording expects to succeed are refused (0.30.0 has no idempotent /register).
    let (_old, url) = bootstrap("vllm-0.30.0").await;
    let first = json!({"engine_id": "engine-prefill-0", "dp_rank": 0, "tp_rank": 0, "pp_rank": 0, "addr": "tcp://127.0.0.1:37175"});
    mooncake_io::http::register(&url, &first, Duration::from_secs(5)).await.unwrap();
    let r =
        run(cfg(trace("i_bootstrap_register_query.jsonl"), Role::Bootstrap, External::Bootstrap(url))).await.unwrap();
    let checks: Vec<&str> = r.results[0].findings.iter().map(|f| f.check.as_str()).collect();
    assert!(checks.contains(&"BOOT-STATUS"), "{:?}", r.results[0].findings);
}
