//! Metadata round trips per second through a prefiller on loopback: K concurrent decoders (1, 8, 64), each a
//! DEALER sending free-only pulls (no blocks to copy, so the prefiller answers FINISH as soon as it has
//! matched the ready transfer) and waiting for each reply. Runs the Rust reference prefiller and the Python
//! test peer's prefiller in one invocation and prints a Markdown table with the ratio, once per load
//! generator: libzmq DEALERs polled from one thread, and a minimal ZMTP DEALER on a single-threaded tokio
//! runtime ([`zmtp`]), which leaves more of a small machine's CPU to the prefiller being measured.
//! Both prefillers run as testee processes (`mooncake-peer testee`, `tests/peer/mooncake_test_peer.py`), so
//! the CPU time each one uses per round trip is read from `/proc` and reported next to the throughput.
//! Each decoder's pulls go in waves of [`WAVE`]: before a wave, untimed, the prefiller is told that the
//! wave's transfers are ready, so its table holds what a busy prefiller holds (thousands of transfers), not
//! every transfer of the run at once.
//!
//! The load generator and the prefiller under test run pinned to CPUs 0 and 1 (`MOONCAKE_BENCH_PIN`).
//!
//! `cargo bench -p mooncake-reference --bench roundtrip` (needs the test venv for the Python peer:
//! `$MOONCAKE_PYTHON` or `.venv/bin/python`). Not a test: nothing here asserts a speed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod zmtp;

use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse, ReqBlocks, Status};
use serde_json::{json, Value as J};

const PER_CLIENT: usize = 2000;
/// Pulls per decoder between two rounds of `ready` commands.
const WAVE: usize = 250;

fn layout() -> J {
    json!({
        "kv_caches_base_addr": [0x1000_0000u64, 0x1001_0000u64], "block_lens": [2048, 2048], "kv_block_lens": [2048, 2048],
        "registered_layer_names": ["model.layers.0.self_attn", "model.layers.1.self_attn"], "registered_layer_indices": [0, 1],
        "registered_group_indices": [0, 0], "registered_shared_group_ids": [[0], [0]], "registered_row_offsets": [0, 0], "num_blocks": 32,
    })
}

fn request(i: usize) -> Vec<u8> {
    let m = MooncakeXferMetadata {
        remote_hostname: "127.0.0.1".into(),
        remote_port: 1u64.into(),
        req_blocks: vec![(format!("d-{i}"), ReqBlocks { transfer_id: format!("x-{i}"), blocks: vec![] })],
        kv_caches_base_addr: vec![0x2000_0000u64.into(), 0x2001_0000u64.into()],
        block_lens: vec![2048u64.into(); 2],
        kv_block_lens: vec![2048u64.into(); 2],
        registered_layer_names: vec!["model.layers.0.self_attn".into(), "model.layers.1.self_attn".into()],
        registered_layer_indices: vec![0u64.into(), 1u64.into()],
        registered_group_indices: vec![0u64.into(), 0u64.into()],
        registered_shared_group_ids: vec![vec![0u64.into()], vec![0u64.into()]],
        registered_row_offsets: vec![0u64.into(), 0u64.into()],
        ..Default::default()
    };
    m.encode()
}

/// K decoders, each a DEALER with one pull in flight at a time, driven by one polling thread so that the
/// load generator costs little CPU next to the prefiller under test.
struct LibzmqLoad {
    _ctx: zmq::Context,
    sockets: Vec<zmq::Socket>,
}

impl LibzmqLoad {
    fn connect(endpoint: &str, clients: usize) -> LibzmqLoad {
        let ctx = zmq::Context::new();
        let sockets = (0..clients)
            .map(|_| {
                let s = ctx.socket(zmq::DEALER).unwrap();
                s.set_linger(0).unwrap();
                s.connect(endpoint).unwrap();
                s
            })
            .collect();
        LibzmqLoad { _ctx: ctx, sockets }
    }

    /// Sends each decoder's requests one after the other; returns the time from the first send to the
    /// last reply.
    fn run(&mut self, reqs: &[Vec<Vec<u8>>]) -> Duration {
        let clients = self.sockets.len();
        let per = reqs[0].len();
        let mut sent = vec![0usize; clients];
        let mut done = 0usize;
        let t = Instant::now();
        for (c, s) in self.sockets.iter().enumerate() {
            s.send(&reqs[c][0][..], 0).unwrap();
            sent[c] = 1;
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while done < clients * per {
            assert!(Instant::now() < deadline, "no progress: {done} replies");
            let mut items: Vec<zmq::PollItem> = self.sockets.iter().map(|s| s.as_poll_item(zmq::POLLIN)).collect();
            zmq::poll(&mut items, 30_000).unwrap();
            let ready: Vec<usize> = items.iter().enumerate().filter(|(_, i)| i.is_readable()).map(|(c, _)| c).collect();
            drop(items);
            for c in ready {
                while let Ok(reply) = self.sockets[c].recv_bytes(zmq::DONTWAIT) {
                    check(done, &reply);
                    done += 1;
                    if sent[c] < per {
                        self.sockets[c].send(&reqs[c][sent[c]][..], 0).unwrap();
                        sent[c] += 1;
                    }
                }
            }
        }
        t.elapsed()
    }
}

/// Every 64th reply is decoded: a benchmark of replies that are not FINISH would measure nothing.
fn check(n: usize, reply: &[u8]) {
    if n.is_multiple_of(64) {
        let r = MooncakeXferResponse::decode(reply).expect("a MooncakeXferResponse");
        assert_eq!(r.status, Status::FINISH, "{r:?}");
    }
}

/// The same workload from [`zmtp::Dealer`]s on a current-thread runtime: one task per decoder.
struct ZmtpLoad {
    rt: tokio::runtime::Runtime,
    dealers: Vec<zmtp::Dealer>,
}

impl ZmtpLoad {
    fn connect(endpoint: &str, clients: usize) -> ZmtpLoad {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let dealers = rt.block_on(async {
            let mut dealers = vec![];
            for _ in 0..clients {
                dealers.push(zmtp::Dealer::connect(endpoint).await.expect("ZMTP handshake"));
            }
            dealers
        });
        ZmtpLoad { rt, dealers }
    }

    fn run(&mut self, reqs: &[Vec<Vec<u8>>]) -> Duration {
        let framed: Vec<Vec<Vec<u8>>> = reqs.iter().map(|r| r.iter().map(|m| zmtp::frame(m)).collect()).collect();
        let dealers = std::mem::take(&mut self.dealers);
        let (elapsed, dealers) = self.rt.block_on(async move {
            let start = std::sync::Arc::new(tokio::sync::Barrier::new(dealers.len() + 1));
            let mut tasks = vec![];
            for (mut d, framed) in dealers.into_iter().zip(framed) {
                let start = start.clone();
                tasks.push(tokio::spawn(async move {
                    start.wait().await;
                    for (k, f) in framed.iter().enumerate() {
                        d.send_framed(f).await.expect("send");
                        let frames = d.recv().await.expect("reply");
                        assert_eq!(frames.len(), 1, "a DEALER receives one frame per reply");
                        check(k, &frames[0]);
                    }
                    d
                }));
            }
            start.wait().await;
            let t = Instant::now();
            let mut back = vec![];
            for task in tasks {
                back.push(
                    tokio::time::timeout(Duration::from_secs(120), task).await.expect("no progress for 120 s").unwrap(),
                );
            }
            (t.elapsed(), back)
        });
        self.dealers = dealers;
        elapsed
    }
}

fn python() -> Option<String> {
    let p = std::env::var("MOONCAKE_PYTHON")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python").into());
    std::path::Path::new(&p).exists().then_some(p)
}

/// A prefiller testee process (`conformance/TESTEE.md`).
struct Peer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    endpoint: String,
}

impl Peer {
    fn start(mut command: Command) -> Peer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the testee");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut p = Peer { child, stdin, lines, endpoint: String::new() };
        let _hello = p.lines.next();
        let a = p.cmd(json!({"cmd": "start", "role": "prefiller", "revision": "vllm-0.33.0", "config": {"engine_id": "e", "model": {"total_num_kv_heads": 4}, "layout": layout()}}));
        p.endpoint = a["endpoint"].as_str().expect("an endpoint").to_string();
        p
    }

    /// Tells the prefiller that the transfers of `ids` are ready (a block each), in pipelined chunks.
    fn ready(&mut self, ids: &[usize]) {
        for chunk in ids.chunks(1000) {
            for i in chunk {
                writeln!(self.stdin, "{}", json!({"cmd": "ready", "p_req_id": format!("p-{i}"), "transfer_id": format!("x-{i}"), "blocks": [[1]]})).unwrap();
            }
            self.stdin.flush().unwrap();
            for _ in chunk {
                let a: J = serde_json::from_str(&self.lines.next().unwrap().unwrap()).unwrap();
                assert_eq!(a["ok"], true, "ready → {a}");
            }
        }
    }

    fn cmd(&mut self, c: J) -> J {
        writeln!(self.stdin, "{c}").unwrap();
        self.stdin.flush().unwrap();
        let a: J = serde_json::from_str(&self.lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(a["ok"], true, "{c} → {a}");
        a
    }

    /// CPU time the process's threads have used, user and system, in nanoseconds: the sum of the first field
    /// of `/proc/PID/task/*/schedstat` (no thread of a testee ends while it is measured).
    fn cpu(&self) -> Duration {
        let mut ns = 0u64;
        for t in std::fs::read_dir(format!("/proc/{}/task", self.child.id())).into_iter().flatten().flatten() {
            let s = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            ns += s.split_whitespace().next().and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        }
        Duration::from_nanos(ns)
    }

    /// One level with one load generator, in waves: round trips per second and the prefiller's CPU µs per
    /// round trip, both over the timed parts only.
    fn measure_one(&mut self, k: usize, g: usize, off: &mut usize) -> (f64, f64) {
        let mut zmtp_load = (g == 0).then(|| ZmtpLoad::connect(&self.endpoint, k));
        let mut zmq_load = (g == 1).then(|| LibzmqLoad::connect(&self.endpoint, k));
        let (mut busy, mut cpu) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..PER_CLIENT / WAVE {
            let ids: Vec<usize> = (*off..*off + k * WAVE).collect();
            self.ready(&ids);
            let reqs: Vec<Vec<Vec<u8>>> =
                (0..k).map(|c| (0..WAVE).map(|j| request(*off + c * WAVE + j)).collect()).collect();
            *off += k * WAVE;
            let before = self.cpu();
            busy += match (&mut zmtp_load, &mut zmq_load) {
                (Some(l), _) => l.run(&reqs),
                (_, Some(l)) => l.run(&reqs),
                _ => unreachable!(),
            };
            cpu += self.cpu() - before;
        }
        let n = (k * (PER_CLIENT / WAVE) * WAVE) as f64;
        (n / busy.as_secs_f64(), cpu.as_secs_f64() * 1e6 / n)
    }

    /// Every level with both load generators.
    fn measure(&mut self, levels: &[usize], who: &str) -> Vec<[(f64, f64); 2]> {
        let mut off = 0;
        let mut out = vec![];
        for &k in levels {
            let row = [self.measure_one(k, 0, &mut off), self.measure_one(k, 1, &mut off)];
            eprintln!(
                "{who} {k}: zmtp {:.0}/s ({:.1} µs CPU each), libzmq {:.0}/s ({:.1} µs CPU each)",
                row[0].0, row[0].1, row[1].0, row[1].1
            );
            out.push(row);
        }
        out
    }

    fn stop(mut self) {
        let _ = self.cmd(json!({"cmd": "stop"}));
        let _ = self.child.wait();
    }
}

/// A comma-separated list from the environment, or the default.
fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

fn main() {
    // MOONCAKE_BENCH_LEVELS / MOONCAKE_BENCH_PEERS narrow a run while investigating (defaults: the full table).
    let levels: Vec<usize> = env_list("MOONCAKE_BENCH_LEVELS", "1,8,64")
        .iter()
        .map(|x| x.parse().expect("MOONCAKE_BENCH_LEVELS: numbers"))
        .collect();
    let peers = env_list("MOONCAKE_BENCH_PEERS", "rust,python");
    // The load generator and the prefiller under test each get a CPU of their own (`taskset`): CPU 0 and 1 by
    // default on a machine with two or more, MOONCAKE_BENCH_PIN=G:P to choose, MOONCAKE_BENCH_PIN=off to let
    // the scheduler place them.
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let pin_spec =
        std::env::var("MOONCAKE_BENCH_PIN").unwrap_or_else(|_| if cores >= 2 { "0:1".into() } else { "off".into() });
    let pin = (pin_spec != "off")
        .then(|| {
            let (g, p) = pin_spec.split_once(':').expect("MOONCAKE_BENCH_PIN=GEN_CPU:PREFILLER_CPU or off");
            let ok = Command::new("taskset")
                .args(["-a", "-p", "-c", g, &std::process::id().to_string()])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("warning: taskset could not pin the load generator to CPU {g}; running unpinned");
            }
            ok.then(|| p.to_string())
        })
        .flatten();
    let command = |program: &str| match &pin {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", cpu, program]);
            c
        }
        None => Command::new(program),
    };
    // Both prefillers run as testee processes, so each one's CPU time is its own.
    let mut rust_rates = vec![[(f64::NAN, f64::NAN); 2]; levels.len()];
    if peers.iter().any(|p| p == "rust") {
        let mut rust_cmd = command(env!("CARGO_BIN_EXE_mooncake-peer"));
        rust_cmd.arg("testee");
        let mut rust = Peer::start(rust_cmd);
        rust_rates = rust.measure(&levels, "rust");
        rust.stop();
    }
    let mut py_rates = vec![None; levels.len()];
    if let (true, Some(py)) = (peers.iter().any(|p| p == "python"), python()) {
        let mut py_cmd = command(&py);
        py_cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/peer/mooncake_test_peer.py"));
        let mut p = Peer::start(py_cmd);
        for (j, r) in p.measure(&levels, "python").into_iter().enumerate() {
            py_rates[j] = Some(r);
        }
        p.stop();
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("| Load generator | Concurrent decoders | Rust prefiller (round trips/s) | Python test peer (round trips/s) | Ratio | Prefiller CPU per round trip, Rust / Python | CPU ratio |");
    println!("|---|---|---|---|---|---|---|");
    for (g, name) in ["minimal ZMTP DEALERs, one tokio thread", "libzmq DEALERs, one polling thread"].iter().enumerate()
    {
        for (j, &k) in levels.iter().enumerate() {
            let (r, rc) = rust_rates[j][g];
            match py_rates[j] {
                Some(p) => {
                    let (y, yc) = p[g];
                    println!(
                        "| {name} | {k} | {r:.0} | {y:.0} | {:.1}× | {rc:.1} µs / {yc:.1} µs | {:.1}× |",
                        r / y,
                        yc / rc
                    );
                }
                None => println!("| {name} | {k} | {r:.0} | not run (no venv) | | {rc:.1} µs / – | |"),
            }
        }
    }
    let placement = match &pin {
        Some(p) => {
            format!("load generator pinned to CPU {}, prefiller to CPU {p}", pin_spec.split(':').next().unwrap_or("?"))
        }
        None => "not pinned".to_string(),
    };
    println!(
        "\n{PER_CLIENT} free-only pulls per decoder in waves of {WAVE}, one DEALER each, 127.0.0.1; {cores} cores, {placement}; load average at the end: {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
}
