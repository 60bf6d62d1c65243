//! The store lookup channel's codec (`mooncake_wire::lookup`) against vLLM's own way of building and parsing
//! the frames, over real ZeroMQ sockets: `tests/store/lookup_frames.py` plays each release's LookupKeyClient
//! and LookupKeyServer with pyzmq (msgspec for the 0.21–0.23 msgpack frame), the test plays the other end with
//! the codec. Every release 0.21.0 … 0.34.0, random requests and replies, both directions, byte for byte.
//! Sockets are IPC files in a private temporary directory (as vLLM's are), with timeouts; everything started
//! is stopped.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};

use mooncake_trace::oracle::python;
use mooncake_wire::codec::testgen::Rng;
use mooncake_wire::lookup::{self, LookupVersion, Reply, Request, TailBoundary};
use serde_json::{json, Value as J};

const RELEASES: &[&str] = &[
    "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0",
    "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0",
];
const CASES: usize = 8;
const TIMEOUT_MS: i32 = 10_000;

/// A private directory for the IPC socket files, removed on drop.
struct TmpDir(PathBuf);
impl TmpDir {
    fn new(tag: &str) -> TmpDir {
        let d = std::env::temp_dir().join(format!("mooncake-lookup-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        TmpDir(d)
    }
    /// The socket path as vLLM names it (the version's template, port 0, dp rank 0), in a directory of the
    /// release's own so that no two sockets ever share a file.
    fn endpoint(&self, v: &LookupVersion, rel: &str) -> String {
        let name = v.path.rsplit('/').next().unwrap();
        let name = name
            .replace("{lookup_rpc_port}", "0")
            .replace("{uid}", "1000")
            .replace("{hostname}", "testhost")
            .replace("{dp_rank}", "0");
        let d = self.0.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        format!("ipc://{}/{name}", d.display())
    }
}
impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `lookup_frames.py` in one of its modes, talking JSON lines.
struct Py {
    child: Child,
    out: BufReader<ChildStdout>,
}
impl Py {
    fn start(args: &[&str]) -> Py {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/store/lookup_frames.py");
        let mut child = Command::new(python().unwrap_or_else(|e| panic!("{e}")))
            .arg(script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start lookup_frames.py");
        let out = BufReader::new(child.stdout.take().unwrap());
        Py { child, out }
    }
    fn say(&mut self, q: &J) {
        writeln!(self.child.stdin.as_mut().unwrap(), "{q}").unwrap();
    }
    fn hear(&mut self) -> J {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("lookup_frames.py said {line:?}: {e}"))
    }
}
impl Drop for Py {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        if self.child.try_wait().ok().flatten().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(200));
            if self.child.try_wait().ok().flatten().is_none() {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

fn socket(ctx: &zmq::Context, kind: zmq::SocketType) -> zmq::Socket {
    let s = ctx.socket(kind).unwrap();
    s.set_linger(0).unwrap();
    s.set_rcvtimeo(TIMEOUT_MS).unwrap();
    s.set_sndtimeo(TIMEOUT_MS).unwrap();
    s
}

fn hexs(frames: &[Vec<u8>]) -> J {
    json!(frames.iter().map(hex::encode).collect::<Vec<_>>())
}

fn minor(rel: &str) -> u32 {
    rel.split('.').nth(1).unwrap().parse().unwrap()
}

/// A random lookup request and a random reply the release can carry.
fn case(rng: &mut Rng, rel: &str, i: usize) -> (Request, Reply) {
    let len = [32usize, 16, 32][i % 3];
    let n = [0usize, 1, 3, 17, 300][rng.below(5)];
    let hashes: Vec<Vec<u8>> = (0..n).map(|_| (0..len).map(|_| rng.next_u64() as u8).collect()).collect();
    let num_tokens = [0u32, 16, 70_000, u32::MAX][rng.below(4)];
    let tail = if minor(rel) >= 29 {
        (0..rng.below(3))
            .map(|_| TailBoundary { group_id: rng.below(4) as u32, boundary_tokens: rng.next_u64() as u32 })
            .collect()
    } else {
        vec![]
    };
    (Request::Lookup { num_tokens, hashes }, Reply::Hits { hit_tokens: rng.next_u64() as u32, tail_boundaries: tail })
}

fn request_json(r: &Request) -> J {
    match r {
        Request::Lookup { num_tokens, hashes } => {
            json!({"request": "lookup", "num_tokens": num_tokens, "hashes": hashes.iter().map(hex::encode).collect::<Vec<_>>()})
        }
        Request::Reset => json!({"request": "reset"}),
    }
}

fn reply_json(r: &Reply) -> J {
    match r {
        Reply::Hits { hit_tokens, tail_boundaries } => {
            json!({"hit_tokens": hit_tokens, "tail": tail_boundaries.iter().map(|b| [b.group_id, b.boundary_tokens]).collect::<Vec<_>>()})
        }
        Reply::Status { ok } => json!({"ok": ok}),
    }
}

/// vLLM's scheduler (pyzmq REQ) asks; the codec, behind a REP socket, reads the request and answers.
#[test]
fn vllm_scheduler_to_our_worker() {
    if !crate::python_env("store_lookup::vllm_scheduler_to_our_worker") {
        return;
    }
    let dir = TmpDir::new("rep");
    let ctx = zmq::Context::new();
    let mut py = Py::start(&["client"]);
    let mut rng = Rng::new(20261129);
    let mut exchanges = 0;
    for rel in RELEASES {
        let v = lookup::for_release(rel).unwrap_or_else(|| panic!("no lookup frames for {rel}"));
        let endpoint = dir.endpoint(v, rel);
        let rep = socket(&ctx, zmq::REP);
        rep.bind(&endpoint).unwrap();
        let mut cases: Vec<(Request, Reply)> = (0..CASES).map(|i| case(&mut rng, rel, i)).collect();
        if v.request("reset").is_some() {
            cases.push((Request::Reset, Reply::Status { ok: true }));
            cases.push((Request::Reset, Reply::Status { ok: false }));
        }
        for (req, reply) in cases {
            let mut q = request_json(&req);
            q["release"] = json!(rel);
            q["endpoint"] = json!(endpoint);
            py.say(&q);
            let frames = rep.recv_multipart(0).unwrap_or_else(|e| panic!("{rel}: no request from vLLM's client: {e}"));
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            assert_eq!(lookup::decode_request(v, &refs).unwrap_or_else(|e| panic!("{rel}: {e}")), req, "{rel}");
            assert_eq!(lookup::encode_request(v, &req).unwrap(), frames, "{rel}: our frames are vLLM's frames");
            let name = if req == Request::Reset { "reset" } else { "lookup" };
            rep.send(lookup::encode_reply(v, name, &reply).unwrap(), 0).unwrap();
            let heard = py.hear();
            assert_eq!(heard["sent"], hexs(&frames), "{rel}: what pyzmq sent is what we received");
            assert_eq!(heard["reply"], reply_json(&reply), "{rel}: vLLM's client reads our reply as we meant it");
            exchanges += 1;
        }
    }
    assert_eq!(exchanges, RELEASES.len() * CASES + 2 * RELEASES.iter().filter(|r| minor(r) >= 23).count());
}

/// The codec, behind a REQ socket, asks vLLM's worker (pyzmq REP), which parses and answers.
#[test]
fn our_scheduler_to_vllm_worker() {
    if !crate::python_env("store_lookup::our_scheduler_to_vllm_worker") {
        return;
    }
    let dir = TmpDir::new("req");
    let ctx = zmq::Context::new();
    let mut rng = Rng::new(7);
    let mut exchanges = 0;
    for rel in RELEASES {
        let v = lookup::for_release(rel).unwrap();
        let endpoint = dir.endpoint(v, rel);
        let mut py = Py::start(&["server", &endpoint]);
        assert_eq!(py.hear(), json!({"ready": true}));
        let req_sock = socket(&ctx, zmq::REQ);
        req_sock.connect(&endpoint).unwrap();
        let mut cases: Vec<(Request, Reply)> = (0..CASES).map(|i| case(&mut rng, rel, i)).collect();
        if v.request("reset").is_some() {
            cases.push((Request::Reset, Reply::Status { ok: true }));
        }
        for (req, reply) in cases {
            let mut q = reply_json(&reply);
            q["release"] = json!(rel);
            py.say(&q);
            let frames = lookup::encode_request(v, &req).unwrap();
            req_sock.send_multipart(&frames, 0).unwrap();
            let got = req_sock.recv_bytes(0).unwrap_or_else(|e| panic!("{rel}: no reply from vLLM's worker: {e}"));
            let heard = py.hear();
            assert_eq!(heard["received"], hexs(&frames), "{rel}");
            assert_eq!(heard["request"], request_json(&req), "{rel}: vLLM's worker reads our request as we meant it");
            assert_eq!(heard["sent"], json!(hex::encode(&got)), "{rel}");
            let name = if req == Request::Reset { "reset" } else { "lookup" };
            assert_eq!(lookup::decode_reply(v, name, &got).unwrap_or_else(|e| panic!("{rel}: {e}")), reply, "{rel}");
            exchanges += 1;
        }
        if v.tagged() {
            // An unknown tag: the worker answers with the status byte 0.
            py.say(&json!({"release": rel, "hit_tokens": 0}));
            req_sock.send("nope", 0).unwrap();
            let got = req_sock.recv_bytes(0).unwrap();
            assert_eq!(py.hear()["request"], json!({"error": "unknown tag"}));
            assert_eq!(lookup::decode_reply(v, "reset", &got).unwrap(), Reply::Status { ok: false }, "{rel}");
            assert_eq!(lookup::decode_request(v, &[b"nope"]).unwrap_err().frame.as_deref(), Some("tag"));
        }
    }
    assert_eq!(exchanges, RELEASES.len() * CASES + RELEASES.iter().filter(|r| minor(r) >= 23).count());
}

/// A 0.28 scheduler reads a 0.29 worker's reply with tail keys as one big integer, and a 0.22 worker reads a
/// 0.23 tag as the token count: the codec of the older release refuses what the newer one writes.
#[test]
fn neighbouring_releases_do_not_mix() {
    if !crate::python_env("store_lookup::neighbouring_releases_do_not_mix") {
        return;
    }
    let dir = TmpDir::new("mix");
    let ctx = zmq::Context::new();
    let (v28, v29) = (lookup::for_release("0.28.0").unwrap(), lookup::for_release("0.29.0").unwrap());
    let endpoint = dir.endpoint(v28, "0.28.0");
    let rep = socket(&ctx, zmq::REP);
    rep.bind(&endpoint).unwrap();
    let mut py = Py::start(&["client"]);
    py.say(&json!({"release": "0.28.0", "endpoint": endpoint, "request": "lookup", "num_tokens": 64, "hashes": []}));
    let _ = rep.recv_multipart(0).unwrap();
    let with_tail = lookup::encode_reply(
        v29,
        "lookup",
        &Reply::Hits { hit_tokens: 32, tail_boundaries: vec![TailBoundary { group_id: 1, boundary_tokens: 40 }] },
    )
    .unwrap();
    rep.send(&with_tail, 0).unwrap();
    assert_ne!(py.hear()["reply"]["hit_tokens"], json!(32), "int.from_bytes of 12 bytes is not 32");
    assert!(lookup::decode_reply(v28, "lookup", &with_tail).is_err());

    let r = Request::Lookup { num_tokens: 64, hashes: vec![vec![1; 32]] };
    let f23 = lookup::encode_request(lookup::for_release("0.23.0").unwrap(), &r).unwrap();
    let refs: Vec<&[u8]> = f23.iter().map(Vec::as_slice).collect();
    assert!(lookup::decode_request(lookup::for_release("0.22.1").unwrap(), &refs).is_err());
}
