//! `mooncake-conformance tap` between real peers over 127.0.0.1: the reference peer and the Python test peer
//! (`tests/peer/`, pyzmq + msgspec from the pinned venv) pull through the tap. What each side receives is byte
//! for byte what it receives without the tap; the captured trace validates, and `run` replays it against the
//! reference peer; a rogue peer's garbage is reported while it flows and passes through unchanged, and the tap
//! keeps serving. The deployment is the one of the bundled recording `vllm-0.33.0/a_single_success` (its
//! model, layouts and prefiller transfer), so `run` can replay the tap's trace with the bundled scenarios.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_conformance::play::Status;
use mooncake_conformance::run::{run, RunConfig};
use mooncake_conformance::setup::{decoder_layout, prefiller_config};
use mooncake_conformance::tap::{finding_line, Say, Tap, TapConfig, TapReport};
use mooncake_conformance::testee::{Testee, TesteeSpec};
use mooncake_io::http::BootstrapServer;
use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::{Event, Role, Trace, ZmqDir};
use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::proto::Registry;
use mooncake_wire::spec::Spec;
use serde_json::{json, Value as J};

const REVISION: &str = "vllm-0.33.0";
/// Every wait in these tests is bounded by this.
const WAIT: Duration = Duration::from_secs(20);

/// The Python test peer (`tests/peer/`), `None` (a counted skip) from the packaged crate.
fn python_peer() -> Option<TesteeSpec> {
    let peer = crate::in_repository("tests/peer/mooncake_test_peer.py", "the Python test peer's cases")?;
    let py = mooncake_trace::oracle::python().unwrap_or_else(|e| panic!("{e}"));
    Some(TesteeSpec::Command(format!("{} {}", py.display(), peer.display())))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mooncake-tap-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The bundled recording whose deployment the tests rebuild.
fn recording() -> Conversation {
    Conversation::new(Trace::load(&crate::here().join("traces/vllm-0.33.0/a_single_success.jsonl")).unwrap()).unwrap()
}

/// A deployment's two workers, as the recording configured them, each keeping its wire.
struct Deployment {
    prefiller: Testee,
    decoder: Testee,
    /// The prefiller's registration, and its real endpoint.
    register: J,
    endpoint: String,
}

impl Deployment {
    /// The prefiller registers with `bootstrap` (the tap); its transfer is ready.
    async fn start(p: &TesteeSpec, d: &TesteeSpec, bootstrap: &str) -> Deployment {
        let t = recording();
        let sc = mooncake_conformance::bundled::scenarios();
        let pc = &t.prefillers[0];
        let mut cfg = prefiller_config(&t, pc, &sc.model, bootstrap).unwrap();
        cfg.record_wire = true;
        let (mut prefiller, _) = Testee::start(p).await.unwrap();
        let a = prefiller
            .cmd(json!({"cmd": "start", "role": "prefiller", "revision": REVISION, "config": cfg}))
            .await
            .unwrap();
        let endpoint = a["endpoint"].as_str().unwrap().to_string();
        let req = t.decoders[0].layout_request.clone().unwrap();
        let (mut decoder, _) = Testee::start(d).await.unwrap();
        let dcfg = json!({"tp_rank": 0, "tp_size": 1, "pp_rank": 0, "pp_size": 1, "layout_id": req.layout_id.as_u64(),
                          "abort_timeout_s": sc.model.abort_timeout_s, "layout": decoder_layout(&req, &sc.model), "record_wire": true});
        decoder.cmd(json!({"cmd": "start", "role": "decoder", "revision": REVISION, "config": dcfg})).await.unwrap();
        let mut register = pc.register.clone().unwrap();
        register["addr"] = json!(endpoint);
        let mut dep = Deployment { prefiller, decoder, register, endpoint };
        dep.ready().await;
        dep
    }

    /// The scenario's transfer becomes pullable (again).
    async fn ready(&mut self) {
        let tr = &mooncake_conformance::bundled::scenarios().scenario["a_single_success"].transfers[0];
        self.prefiller
            .cmd(json!({"cmd": "allocate", "p_req_id": tr.p_req_id, "transfer_id": tr.transfer_id}))
            .await
            .unwrap();
        self.prefiller
            .cmd(json!({"cmd": "ready", "p_req_id": tr.p_req_id, "transfer_id": tr.transfer_id, "blocks": tr.blocks}))
            .await
            .unwrap();
    }

    /// The decoder pulls the transfer from `engine` as `bootstrap` lists it, and settles it; returns the
    /// messages each side received meanwhile: (prefiller, decoder), each a list of frame lists.
    async fn pull(&mut self, bootstrap: &str, engine: &str) -> (Vec<Vec<Vec<u8>>>, Vec<Vec<Vec<u8>>>) {
        let (p0, d0) = (self.wire(true).await.len(), self.wire(false).await.len());
        let reqs = json!([{"d_req_id": "d-req-1", "transfer_id": "xfer-1", "blocks": [[3, 4, 5]], "engine_id": engine, "bootstrap_addr": bootstrap}]);
        self.decoder.cmd(json!({"cmd": "pull", "requests": reqs})).await.unwrap();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let s = self.decoder.cmd(json!({"cmd": "status"})).await.unwrap();
            let done = s["pending_pulls"] == 0 && s["open_exchanges"] == 0;
            if done && self.wire(false).await.len() > d0 {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "the pull through {bootstrap} did not settle: {s}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let failed = self.decoder.cmd(json!({"cmd": "status"})).await.unwrap()["failed"].clone();
        assert_eq!(failed, json!([]), "the pull through {bootstrap} failed");
        let inbound = |w: Vec<J>, from: usize| -> Vec<Vec<Vec<u8>>> {
            w[from..]
                .iter()
                .filter(|e| e["dir"] == "in")
                .map(|e| {
                    e["frames"].as_array().unwrap().iter().map(|f| hex::decode(f.as_str().unwrap()).unwrap()).collect()
                })
                .collect()
        };
        (inbound(self.wire(true).await, p0), inbound(self.wire(false).await, d0))
    }

    async fn wire(&mut self, prefiller: bool) -> Vec<J> {
        let t = if prefiller { &mut self.prefiller } else { &mut self.decoder };
        t.cmd(json!({"cmd": "status"})).await.unwrap()["wire"].as_array().cloned().unwrap_or_default()
    }

    async fn stop(self) {
        self.decoder.stop().await;
        self.prefiller.stop().await;
    }
}

fn bootstrap_spec() -> BootstrapSpec {
    BootstrapSpec::new(Spec::builtin().revision(REVISION).unwrap().clone()).unwrap().unwrap()
}

/// A printer that keeps what the tap said, as the CLI would print it.
fn collector() -> (mooncake_conformance::tap::Printer, Arc<Mutex<Vec<String>>>) {
    let said = Arc::new(Mutex::new(vec![]));
    let s = said.clone();
    (
        Box::new(move |x: Say<'_>| {
            let line = match x {
                Say::Finding(f) => finding_line(f),
                Say::Note(n) => format!("note: {n}"),
            };
            s.lock().unwrap().push(line);
        }),
        said,
    )
}

/// The tap's configuration; forwarding to an upstream server it reads the revision off the wire.
fn tap_config(out: PathBuf, upstream: Option<String>) -> TapConfig {
    let mut c = TapConfig::new("127.0.0.1:0", out);
    c.revision = upstream.is_none().then(|| "0.33.0".into());
    c.upstream = upstream;
    c.scenario = "a_single_success".into();
    c
}

/// The runner's view of the trace: it validates, and `run` passes against the reference peer with the
/// unobservable checks counted as not applicable.
fn trace_holds(path: &std::path::Path) {
    let rep = mooncake_trace::validate::validate_file(path);
    assert!(rep.ok(), "{:#?}", rep.findings);
    assert!(rep.zmq_payloads >= 4 && rep.http_events >= 4, "{} zmq, {} http", rep.zmq_payloads, rep.http_events);
    let r = rt().block_on(run(RunConfig::paths(&[path.to_path_buf()], TesteeSpec::Builtin).unwrap())).unwrap();
    let ids: Vec<(String, Status)> = r.results.iter().map(|c| (c.id.clone(), c.status)).collect();
    assert_eq!(r.results.len(), 3, "a prefiller, a decoder and a bootstrap case: {ids:?}");
    assert!(r.ok(), "{:#?}", r.results.iter().map(|c| (&c.id, &c.findings)).collect::<Vec<_>>());
    assert_eq!(r.not_applicable(), 3, "TE-CALLS, P-FINISHED-SENDING, D-OUTCOME");
    // A tap run without `--scenario` names the scenario `tap`, which has no scenarios-file entry: the setup is
    // derived from the trace (the decoder's own block ids, since no transfer-engine call was observed).
    let text = std::fs::read_to_string(path).unwrap();
    let (head, rest) = text.split_once('\n').unwrap();
    let mut h: J = serde_json::from_str(head).unwrap();
    h["scenario"] = J::from("tap");
    let unnamed = path.with_file_name("unnamed.jsonl");
    std::fs::write(&unnamed, format!("{}\n{rest}", serde_json::to_string(&h).unwrap())).unwrap();
    let r = rt().block_on(run(RunConfig::paths(std::slice::from_ref(&unnamed), TesteeSpec::Builtin).unwrap())).unwrap();
    assert!(r.ok(), "{:#?}", r.results.iter().map(|c| (&c.id, &c.findings)).collect::<Vec<_>>());
    assert_eq!(
        mooncake_conformance::report::derived_count(&r),
        (2, 0),
        "the prefiller and decoder cases, derived: {:#?}",
        r.results.iter().map(|c| (&c.id, &c.notes)).collect::<Vec<_>>()
    );
    assert_eq!(r.not_applicable(), 3);
    let _ = std::fs::remove_file(&unnamed);
}

/// One deployment, one pull through the tap and one without it: each side receives the same frames.
fn transparent(p: TesteeSpec, d: TesteeSpec, upstream_mode: bool, tag: &str) -> (TapReport, Vec<String>) {
    let dir = tempdir(tag);
    let out = dir.join("tap.jsonl");
    let rt = rt();
    let (report, said) = rt.block_on(async {
        // The real bootstrap server, the tap's upstream (in registry mode the tap is the only one).
        let real = BootstrapServer::start("127.0.0.1:0", Registry::new(bootstrap_spec())).await.unwrap();
        let (say, said) = collector();
        let tap = Tap::start(tap_config(out.clone(), upstream_mode.then(|| real.url())), say).await.unwrap();
        let mut dep = Deployment::start(&p, &d, &tap.url()).await;
        let engine = dep.register["engine_id"].as_str().unwrap().to_string();
        let (p_tapped, d_tapped) = dep.pull(&tap.url(), &engine).await;
        let report = tap.finish().await;
        // The same pull without the tap: the prefiller registered at a bootstrap server of its own, under an
        // engine id of its own (decoders keep an engine's address once they know it; the id never goes on the
        // wire).
        dep.ready().await;
        let direct = BootstrapServer::start("127.0.0.1:0", Registry::new(bootstrap_spec())).await.unwrap();
        let mut body = dep.register.clone();
        body["engine_id"] = json!("engine-direct");
        let (st, _) =
            mooncake_io::http::request("POST", &format!("{}/register", direct.url()), Some(&body), WAIT).await.unwrap();
        assert_eq!(st, 200);
        let (p_direct, d_direct) = dep.pull(&direct.url(), "engine-direct").await;
        // The prefiller receives the same frames (its routing ids aside: libzmq draws them per connection).
        assert_eq!(p_direct.len(), 1, "{p_direct:?}");
        assert_eq!(p_tapped.len(), p_direct.len());
        for (a, b) in p_direct.iter().zip(&p_tapped) {
            assert_eq!(a.len(), b.len(), "frame count");
            assert_eq!(a[1..], b[1..], "payload frames");
            assert_eq!(a[0].len(), b[0].len(), "a routing id of libzmq's shape");
        }
        // The decoder receives exactly the same frames.
        assert_eq!(d_tapped, d_direct);
        assert!(!d_direct.is_empty());
        let endpoint = dep.endpoint.clone();
        dep.stop().await;
        // The trace shows, as the prefiller's ROUTER, the frames (and routing id) the prefiller really saw.
        let t = Trace::load(&out).unwrap();
        let recv: Vec<&Vec<Vec<u8>>> =
            t.zmq().filter(|z| z.side == Role::Prefiller && z.dir == ZmqDir::Recv).map(|z| &z.frames).collect();
        assert_eq!(recv, p_tapped.iter().collect::<Vec<_>>());
        assert_eq!(t.header.conn_endpoints["prefiller0"], [endpoint]);
        let said = said.lock().unwrap().clone();
        (report, said)
    });
    trace_holds(&out);
    // Nothing in the trace names the tap's endpoints: it reads as if no tap had been there.
    let t = Trace::load(&out).unwrap();
    let real_ep = t.header.conn_endpoints["prefiller0"][0].clone();
    for e in &t.events {
        match e {
            Event::Zmq(z) => assert_eq!(z.endpoint, real_ep),
            Event::Http(h) => {
                assert!(!h.body_raw.contains("tcp://") || h.body_raw.contains(real_ep.as_str()), "{}", h.body_raw)
            }
        }
    }
    assert_eq!(t.header.unobserved, ["transfer_engine_calls", "observed_outcome"]);
    assert!(t.header.transfer_engine_calls.is_empty());
    let header: J = serde_json::from_str(std::fs::read_to_string(&out).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(header["tap"]["revision_from"], if upstream_mode { "the wire" } else { "--revision" });
    if upstream_mode {
        // A 0.33.0 pull is byte for byte a 0.34.0 pull (0.34.0 added a message, not a field): read off the
        // wire, the newest revision that fits is taken, and the description names the other.
        assert_eq!(t.header.vllm_version, "0.34.0");
        assert!(header["description"].as_str().unwrap().contains("also fit vllm-0.33.0"), "{header}");
    } else {
        assert_eq!(t.header.vllm_version, "0.33.0");
    }
    let _ = std::fs::remove_dir_all(&dir);
    (report, said)
}

#[test]
fn reference_peers_through_the_tap_receive_what_they_receive_without_it() {
    let (r, said) = transparent(TesteeSpec::Builtin, TesteeSpec::Builtin, false, "rust");
    assert!(r.ok(), "{said:#?}");
    assert!(r.findings.is_empty(), "{said:#?}");
    assert_eq!((r.requests, r.exchanges), (1, 1), "one pull through the tap, checked");
    assert!(
        r.summary().contains("0 findings") && r.summary().ends_with(&format!("OK; trace {}", r.path.display())),
        "{}",
        r.summary()
    );
}

#[test]
fn python_prefiller_through_the_tap_forwarding_to_an_upstream_server() {
    let Some(peer) = python_peer() else { return };
    let (r, said) = transparent(peer, TesteeSpec::Builtin, true, "pyp");
    assert!(r.ok(), "{said:#?}");
    // No --revision: the bootstrap traffic waited until the first pull request told the revision.
    // The Python peer speaks 0.33.0, whose pulls 0.34.0 writes identically: the newest is taken, the other named.
    assert!(
        said.iter().any(
            |l| l.contains("revision read off the first pull request: vllm-0.34.0; its bytes also fit vllm-0.33.0")
        ),
        "{said:#?}"
    );
}

#[test]
fn python_decoder_through_the_tap() {
    let Some(peer) = python_peer() else { return };
    let (r, said) = transparent(TesteeSpec::Builtin, peer, false, "pyd");
    assert!(r.ok(), "{said:#?}");
}

/// A message on `s` within `d`, or none.
fn recv_within(s: &zmq::Socket, d: Duration) -> Option<Vec<Vec<u8>>> {
    let mut items = [s.as_poll_item(zmq::POLLIN)];
    zmq::poll(&mut items, d.as_millis() as i64).ok()?;
    if items[0].is_readable() {
        s.recv_multipart(0).ok()
    } else {
        None
    }
}

/// Waits until the tap has said something containing `what`.
async fn until_said(said: &Arc<Mutex<Vec<String>>>, what: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !said.lock().unwrap().iter().any(|l| l.contains(what)) {
        assert!(tokio::time::Instant::now() < deadline, "the tap never said {what:?}: {:#?}", said.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The tap's endpoint for `engine` in a `/query` answer it gives.
async fn tapped_endpoint(tap: &str, engine: &str) -> String {
    let q = mooncake_io::http::query(tap, WAIT).await.unwrap();
    let e = q
        .as_object()
        .unwrap()
        .values()
        .find(|e| e["engine_id"] == engine)
        .unwrap_or_else(|| panic!("{engine} not in {q}"));
    e["worker_addr"]["0"]["0"].as_str().unwrap().to_string()
}

#[test]
fn rogue_peers_are_reported_as_their_traffic_passes_unchanged_and_the_tap_keeps_serving() {
    let dir = tempdir("rogue");
    let out = dir.join("tap.jsonl");
    let recorded_request = recording().exchanges[0].request.bytes.clone();
    let report = rt().block_on(async {
        let (say, said) = collector();
        let mut cfg = tap_config(out.clone(), None);
        cfg.reply_timeout = Some(Duration::from_secs(1));
        let tap = Tap::start(cfg, say).await.unwrap();
        let mut dep = Deployment::start(&TesteeSpec::Builtin, &TesteeSpec::Builtin, &tap.url()).await;
        let engine = dep.register["engine_id"].as_str().unwrap().to_string();
        let good = tapped_endpoint(&tap.url(), &engine).await;
        assert_ne!(good, dep.endpoint, "decoders are handed the tap's endpoint");
        let ctx = zmq::Context::new();

        // A rogue decoder: garbage, then a message of three frames, to the good prefiller through the tap.
        let rogue_d = ctx.socket(zmq::DEALER).unwrap();
        rogue_d.set_linger(0).unwrap();
        rogue_d.connect(&good).unwrap();
        let before = dep.wire(true).await.iter().filter(|e| e["dir"] == "in").count();
        rogue_d.send(&b"garbage"[..], 0).unwrap();
        rogue_d.send_multipart([&b"\x81"[..], b"two", b"three"], 0).unwrap();
        until_said(&said, "[ZMQ-DECODE]").await;
        until_said(&said, "[ZMQ-FRAMES]").await;
        // ... and the prefiller received both exactly as sent.
        let deadline = tokio::time::Instant::now() + WAIT;
        let got = loop {
            let w: Vec<J> = dep.wire(true).await.into_iter().filter(|e| e["dir"] == "in").skip(before).collect();
            if w.len() >= 2 || tokio::time::Instant::now() > deadline {
                break w;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let frames = |e: &J| -> Vec<String> {
            e["frames"].as_array().unwrap()[1..].iter().map(|f| f.as_str().unwrap().to_string()).collect()
        };
        assert_eq!(
            got.iter().map(frames).collect::<Vec<_>>(),
            [vec![hex::encode("garbage")], vec!["81".into(), hex::encode("two"), hex::encode("three")]]
        );

        // A bootstrap request that is not JSON: answered (422) and recorded, nothing else.
        let r = mooncake_io::http::request_raw(
            "POST",
            &format!("{}/register", tap.url()),
            Some("application/json"),
            Some(b"not json"),
            WAIT,
        )
        .await
        .unwrap();
        assert_eq!(r.status, 422);

        // A rogue prefiller (a raw ROUTER, another engine): answers with two frames of garbage, then vanishes.
        let rogue_p = ctx.socket(zmq::ROUTER).unwrap();
        rogue_p.set_linger(0).unwrap();
        rogue_p.bind("tcp://127.0.0.1:*").unwrap();
        let rogue_ep = rogue_p.get_last_endpoint().unwrap().unwrap();
        let body = json!({"engine_id": "engine-rogue", "dp_rank": 1, "tp_rank": 0, "pp_rank": 0, "addr": rogue_ep});
        let (st, _) =
            mooncake_io::http::request("POST", &format!("{}/register", tap.url()), Some(&body), WAIT).await.unwrap();
        assert_eq!(st, 200);
        let bad = tapped_endpoint(&tap.url(), "engine-rogue").await;
        let d = ctx.socket(zmq::DEALER).unwrap();
        d.set_linger(0).unwrap();
        d.connect(&bad).unwrap();
        d.send(&recorded_request[..], 0).unwrap();
        let (rogue_p, d, req) = tokio::task::spawn_blocking(move || {
            let req = recv_within(&rogue_p, WAIT).expect("the request reached the rogue prefiller");
            rogue_p.send_multipart([&req[0][..], b"\xc1", b"extra"], 0).unwrap();
            (rogue_p, d, req)
        })
        .await
        .unwrap();
        assert_eq!(req[1..], *std::slice::from_ref(&recorded_request), "the request arrives unchanged");
        let (d, reply) = tokio::task::spawn_blocking(move || {
            let r = recv_within(&d, WAIT);
            (d, r)
        })
        .await
        .unwrap();
        assert_eq!(reply, Some(vec![b"\xc1".to_vec(), b"extra".to_vec()]), "the garbage arrives unchanged");
        drop(rogue_p);
        d.send(&recorded_request[..], 0).unwrap();
        // Nobody answers: once the reply timeout has passed the pull is reported.
        until_said(&said, "0 replies and no terminal status").await;

        // The tap still serves the good deployment (its transfer made ready again: the first one expired).
        dep.ready().await;
        let (p, dd) = dep.pull(&tap.url(), &engine).await;
        assert_eq!((p.len(), dd.len()), (1, 1));
        let report = tap.finish().await;
        dep.stop().await;
        report
    });
    assert!(!report.ok() && report.troubles.is_empty() && report.finding_count > 0);
    let checks: std::collections::BTreeSet<&str> = report.findings.iter().map(|f| f.check.as_str()).collect();
    for c in ["ZMQ-DECODE", "ZMQ-FRAMES", "SEQ-TERMINAL"] {
        assert!(checks.contains(c), "{c} not in {checks:?}");
    }
    // The trace holds everything that went through, and validate finds what the tap found.
    let rep = mooncake_trace::validate::validate_file(&out);
    let vchecks: std::collections::BTreeSet<&str> = rep.findings.iter().map(|f| f.check.as_str()).collect();
    assert!(!vchecks.contains("TRACE-FORMAT"), "{:#?}", rep.findings);
    for c in ["ZMQ-DECODE", "ZMQ-FRAMES", "SEQ-TERMINAL"] {
        assert!(vchecks.contains(c), "validate: {c} not in {vchecks:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

const BIN: &str = env!("CARGO_BIN_EXE_mooncake-conformance");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Standard error of a child, line by line, on a channel.
fn lines_of(r: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (bounded) for a child to exit.
fn exit_within(child: &mut std::process::Child, d: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + d;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the tap did not exit within {d:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_cli_records_until_interrupted_and_its_trace_validates_and_replays() {
    use std::process::{Command, Stdio};
    let dir = tempdir("cli");
    let out = dir.join("deployment.jsonl");
    let bind = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(BIN)
        .args(["tap", "--bootstrap-bind", &bind, "--revision", "0.33.0", "--scenario", "a_single_success", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = lines_of(child.stderr.take().unwrap());
    let stdout = lines_of(child.stdout.take().unwrap());
    let first = stderr.recv_timeout(WAIT).expect("the tap says where it listens");
    assert!(first.contains(&format!("bootstrap server at http://{bind}")) && first.contains("Ctrl-C stops"), "{first}");
    rt().block_on(async {
        let url = format!("http://{bind}");
        let mut dep = Deployment::start(&TesteeSpec::Builtin, &TesteeSpec::Builtin, &url).await;
        let engine = dep.register["engine_id"].as_str().unwrap().to_string();
        dep.pull(&url, &engine).await;
        dep.stop().await;
    });
    // Every event is on disk before the tap stops: the header, register and query, the request and the reply
    // on both sides (the recorder may lag the peers by a moment).
    let deadline = std::time::Instant::now() + WAIT;
    while std::fs::read_to_string(&out).unwrap().lines().count() < 1 + 4 + 4 {
        assert!(std::time::Instant::now() < deadline, "{}", std::fs::read_to_string(&out).unwrap());
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let st = exit_within(&mut child, WAIT);
    let said: Vec<String> = stdout.try_iter().collect();
    assert_eq!(st.code(), Some(0), "{said:?} {:?}", stderr.try_iter().collect::<Vec<_>>());
    assert!(said.last().is_some_and(|l| l.contains("0 findings") && l.contains("OK")), "{said:?}");
    // The finished trace: its header knows who was who and what the tap could not see.
    let t = Trace::load(&out).unwrap();
    assert_eq!(t.header.recorded_by, format!("mooncake-conformance tap {}", env!("CARGO_PKG_VERSION")));
    assert_eq!(t.header.vllm_version, "0.33.0");
    assert_eq!(t.header.scenario, "a_single_success");
    assert_eq!(
        t.header.roles.iter().map(|(c, r)| (c.as_str(), r.as_str())).collect::<Vec<_>>(),
        [("bootstrap", "bootstrap"), ("prefiller0", "prefiller"), ("decoder0", "decoder")]
    );
    let v = Command::new(BIN).arg("validate").arg(&out).output().unwrap();
    let vtext = String::from_utf8_lossy(&v.stdout);
    assert_eq!(v.status.code(), Some(0), "{vtext}");
    assert!(vtext.contains("not observed by the recording: transfer_engine_calls, observed_outcome"), "{vtext}");
    let r = Command::new(BIN).args(["run", "--progress", "off"]).arg(&out).output().unwrap();
    let rtext = String::from_utf8_lossy(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{rtext}");
    assert!(rtext.contains("3 passed") && rtext.contains("3 checks not applicable"), "{rtext}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cli_exit_codes() {
    use std::process::Command;
    let dir = tempdir("codes");
    let out = dir.join("t.jsonl");
    let tap = |args: &[&str]| -> (Option<i32>, String) {
        let o = Command::new(BIN).arg("tap").args(args).arg("--out").arg(&out).output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    // A port in use: the environment.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = held.local_addr().unwrap().to_string();
    let (code, e) = tap(&["--bootstrap-bind", &busy, "--revision", "0.33.0"]);
    assert_eq!(code, Some(3), "{e}");
    assert!(e.contains("in use"), "{e}");
    // No revision and nothing to forward to, a generation-1 revision, a misspelt one: usage.
    let (code, e) = tap(&["--bootstrap-bind", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "{e}");
    assert!(e.contains("--revision"), "{e}");
    let (code, e) = tap(&["--bootstrap-bind", "127.0.0.1:0", "--revision", "0.14.0"]);
    assert_eq!(code, Some(2), "{e}");
    assert!(e.contains("not a generation-2 revision"), "{e}");
    let (code, e) = tap(&["--bootstrap-bind", "127.0.0.1:0", "--revision", "0.33"]);
    assert_eq!(code, Some(2), "{e}");
    // An upstream where nothing listens: the environment.
    let gone = format!("http://127.0.0.1:{}", free_port());
    let (code, e) = tap(&["--bootstrap-bind", "127.0.0.1:0", "--upstream", &gone]);
    assert_eq!(code, Some(3), "{e}");
    // --duration ends it by itself; a tap that saw nothing found nothing.
    let started = std::time::Instant::now();
    let (code, e) = tap(&["--bootstrap-bind", "127.0.0.1:0", "--revision", "0.33.0", "--duration", "0.5"]);
    assert_eq!(code, Some(0), "{e}");
    assert!(started.elapsed() < WAIT);
    let t = Trace::load(&out).unwrap();
    assert!(t.events.is_empty());
    assert_eq!(t.header.unobserved, ["transfer_engine_calls", "observed_outcome"]);
    drop(held);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 34: the tap's relay ROUTER was libzmq's, which holds a multipart message's frames until the last one
/// with no bound on their total: one client sending 16 MiB frames with MORE grew the tap without end. The
/// relay's ROUTERs are now the reference peer's own ZMTP server with its budget: that client is cut off once
/// the message passes `MAX_MESSAGE_BYTES`, and the tap keeps relaying the others.
#[test]
fn a_client_holding_a_multipart_message_open_is_cut_off_and_the_tap_keeps_relaying() {
    use mooncake_wire::zmtp::{self, FLAG_MORE, GREETING_LEN};
    use std::io::{Read, Write};
    let dir = tempdir("multipart");
    let out = dir.join("tap.jsonl");
    rt().block_on(async {
        let (say, said) = collector();
        let tap = Tap::start(tap_config(out.clone(), None), say).await.unwrap();
        let dep = Deployment::start(&TesteeSpec::Builtin, &TesteeSpec::Builtin, &tap.url()).await;
        let engine = dep.register["engine_id"].as_str().unwrap().to_string();
        let good = tapped_endpoint(&tap.url(), &engine).await;
        let addr = good.trim_start_matches("tcp://").to_string();
        let cut_off = tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            s.set_write_timeout(Some(WAIT)).unwrap();
            s.write_all(&zmtp::greeting()).unwrap();
            let mut g = [0u8; GREETING_LEN];
            s.read_exact(&mut g).unwrap();
            s.write_all(&zmtp::ready("DEALER", &[])).unwrap();
            let mut frame = vec![];
            zmtp::put_frame(&mut frame, FLAG_MORE, &vec![0x42u8; 16 << 20]);
            // 8 × 16 MiB = 128 MiB, twice the limit on one message.
            let refused = (0..8).any(|_| s.write_all(&frame).is_err());
            let mut buf = [0u8; 4096];
            refused
                || loop {
                    match s.read(&mut buf) {
                        Ok(0) => break true,
                        Ok(_) => continue,
                        // Still open when the wait ran out: the message is being held.
                        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                            break false
                        }
                        Err(_) => break true,
                    }
                }
        })
        .await
        .unwrap();
        assert!(cut_off, "a message over MAX_MESSAGE_BYTES was held by the tap");
        // Still relaying: a decoder's message reaches the checks.
        let ctx = zmq::Context::new();
        let d = ctx.socket(zmq::DEALER).unwrap();
        d.set_linger(0).unwrap();
        d.connect(&good).unwrap();
        d.send(&b"garbage"[..], 0).unwrap();
        until_said(&said, "[ZMQ-DECODE]").await;
        drop(dep);
        let _ = tap.finish().await;
    });
}
