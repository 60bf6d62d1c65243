//! Metadata round trips through a prefiller on loopback: K concurrent decoders (1, 8, 64 by default; 1 → 256
//! in `scripts/bench.sh`), each a DEALER sending free-only pulls (no blocks to copy, so the prefiller answers
//! FINISH as soon as it has matched the ready transfer) and waiting for each reply. One invocation measures
//! three servers the same way:
//!
//! * `floor`: a libzmq ROUTER that answers every pull with a fixed FINISH reply of the same size from a
//!   blocking receive-and-send loop ([`floor`]) — the transport's floor on this machine;
//! * `rust`: the reference prefiller (`mooncake-peer testee`);
//! * `python`: the Python test peer's prefiller (`tests/peer/`, pyzmq asyncio + msgspec).
//!
//! Each runs as a process of its own, so the CPU time it uses per round trip is read from `/proc` and reported
//! next to the round trips per second and the latency of each round trip (p50, p99). Two load generators:
//! libzmq DEALERs polled from one thread (what a vLLM decoder is), and a minimal ZMTP DEALER on a
//! single-threaded tokio runtime ([`zmtp`]). Each decoder's pulls go in waves: before a wave, untimed, the
//! prefiller is told that the wave's transfers are ready, so its table holds what a busy prefiller holds
//! (thousands of transfers), not every transfer of the run at once.
//!
//! The load generator and the server under test run pinned to CPUs 0 and 1 (`MOONCAKE_BENCH_PIN`).
//!
//! `cargo bench -p mooncake-reference --bench roundtrip` (needs the test venv for the Python peer:
//! `$MOONCAKE_PYTHON` or `.venv/bin/python`). Environment: `MOONCAKE_BENCH_LEVELS` (decoder counts),
//! `MOONCAKE_BENCH_PEERS` (`floor,rust,python`), `MOONCAKE_BENCH_GENERATORS` (`libzmq,zmtp`),
//! `MOONCAKE_BENCH_PULLS` (round trips per level and generator, 16000), `MOONCAKE_BENCH_JSON` (also write the
//! results there, for `bench/roundtrip_report.py`), `MOONCAKE_BENCH_DUMP` (a directory: every round trip's
//! latency in ns, in order, one file per level, generator and server — where the tail comes from). Not a
//! test: nothing here asserts a speed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod floor;
mod zmtp;

use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse, ReqBlocks, Status};
use serde_json::{json, Value as J};

/// Transfers made ready before each wave (about): what a busy prefiller's table holds.
const READY_PER_WAVE: usize = 4000;
/// Pulls per decoder in one wave, at most and at least.
const WAVE_MAX: usize = 250;
const WAVE_MIN: usize = 16;

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

/// What one timed wave gives back: its wall time and the latency of every round trip in it.
struct Wave {
    elapsed: Duration,
    latencies: Vec<Duration>,
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
    /// last reply, and each round trip's.
    fn run(&mut self, reqs: &[Vec<Vec<u8>>]) -> Wave {
        let clients = self.sockets.len();
        let per = reqs[0].len();
        let mut sent = vec![0usize; clients];
        let mut sent_at = vec![Instant::now(); clients];
        let mut latencies = Vec::with_capacity(clients * per);
        let t = Instant::now();
        for (c, s) in self.sockets.iter().enumerate() {
            sent_at[c] = Instant::now();
            s.send(&reqs[c][0][..], 0).unwrap();
            sent[c] = 1;
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut items: Vec<zmq::PollItem> = self.sockets.iter().map(|s| s.as_poll_item(zmq::POLLIN)).collect();
        while latencies.len() < clients * per {
            assert!(Instant::now() < deadline, "no progress: {} replies", latencies.len());
            zmq::poll(&mut items, 30_000).unwrap();
            for c in 0..clients {
                if !items[c].is_readable() {
                    continue;
                }
                while let Ok(reply) = self.sockets[c].recv_bytes(zmq::DONTWAIT) {
                    latencies.push(sent_at[c].elapsed());
                    check(latencies.len(), &reply);
                    if sent[c] < per {
                        sent_at[c] = Instant::now();
                        self.sockets[c].send(&reqs[c][sent[c]][..], 0).unwrap();
                        sent[c] += 1;
                    }
                }
            }
        }
        Wave { elapsed: t.elapsed(), latencies }
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

    fn run(&mut self, reqs: &[Vec<Vec<u8>>]) -> Wave {
        let framed: Vec<Vec<Vec<u8>>> = reqs.iter().map(|r| r.iter().map(|m| zmtp::frame(m)).collect()).collect();
        let dealers = std::mem::take(&mut self.dealers);
        let (elapsed, back) = self.rt.block_on(async move {
            let start = std::sync::Arc::new(tokio::sync::Barrier::new(dealers.len() + 1));
            let mut tasks = vec![];
            for (mut d, framed) in dealers.into_iter().zip(framed) {
                let start = start.clone();
                tasks.push(tokio::spawn(async move {
                    start.wait().await;
                    let mut latencies = Vec::with_capacity(framed.len());
                    for (k, f) in framed.iter().enumerate() {
                        let t = Instant::now();
                        d.send_framed(f).await.expect("send");
                        let frames = d.recv().await.expect("reply");
                        latencies.push(t.elapsed());
                        assert_eq!(frames.len(), 1, "a DEALER receives one frame per reply");
                        check(k, &frames[0]);
                    }
                    (d, latencies)
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
        let mut latencies = vec![];
        for (d, l) in back {
            self.dealers.push(d);
            latencies.extend(l);
        }
        Wave { elapsed, latencies }
    }
}

/// The two load generators.
#[derive(Clone, Copy, PartialEq)]
enum Generator {
    Libzmq,
    Zmtp,
}

impl Generator {
    fn id(self) -> &'static str {
        match self {
            Generator::Libzmq => "libzmq",
            Generator::Zmtp => "zmtp",
        }
    }
    fn description(self) -> &'static str {
        match self {
            Generator::Libzmq => "libzmq DEALERs, one polling thread",
            Generator::Zmtp => "minimal ZMTP DEALERs, one tokio thread",
        }
    }
}

/// Connected decoders of one generator.
enum Load {
    Libzmq(LibzmqLoad),
    Zmtp(ZmtpLoad),
}

impl Load {
    fn connect(g: Generator, endpoint: &str, k: usize) -> Load {
        match g {
            Generator::Libzmq => Load::Libzmq(LibzmqLoad::connect(endpoint, k)),
            Generator::Zmtp => Load::Zmtp(ZmtpLoad::connect(endpoint, k)),
        }
    }
    fn run(&mut self, reqs: &[Vec<Vec<u8>>]) -> Wave {
        match self {
            Load::Libzmq(l) => l.run(reqs),
            Load::Zmtp(l) => l.run(reqs),
        }
    }
}

fn python() -> Option<String> {
    let p = std::env::var("MOONCAKE_PYTHON")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python").into());
    std::path::Path::new(&p).exists().then_some(p)
}

/// One measured row: a server, a generator, a number of decoders.
#[derive(Clone, Copy)]
struct Row {
    round_trips: usize,
    rate: f64,
    cpu_us: f64,
    /// The load generator's CPU per round trip (this process).
    gen_cpu_us: f64,
    /// Time the server's threads were runnable but waiting for a CPU, per round trip: a stall that is the
    /// scheduler's (a woken thread not yet run), not the server's code.
    wait_us: f64,
    /// The same for the load generator.
    gen_wait_us: f64,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
}

/// The `q` quantile of sorted samples (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Pulls per decoder in a wave and in all, for `k` decoders and about `total` round trips.
fn plan(k: usize, total: usize) -> (usize, usize) {
    let wave = (READY_PER_WAVE / k).clamp(WAVE_MIN, WAVE_MAX);
    let per = total.div_ceil(k).div_ceil(wave).max(1) * wave;
    (wave, per)
}

/// What the scheduler reports of a process's threads, summed over `/proc/PID/task/*/schedstat` (`self` for
/// this process; no thread of a testee ends while it is measured).
#[derive(Clone, Copy, Default)]
struct Sched {
    /// CPU time used, user and system (the first field).
    cpu: Duration,
    /// Time runnable on a run queue but not running (the second field): how long wake-ups waited for a CPU.
    wait: Duration,
}

impl std::ops::Sub for Sched {
    type Output = Sched;
    fn sub(self, o: Sched) -> Sched {
        Sched { cpu: self.cpu.saturating_sub(o.cpu), wait: self.wait.saturating_sub(o.wait) }
    }
}

impl std::ops::AddAssign for Sched {
    fn add_assign(&mut self, o: Sched) {
        self.cpu += o.cpu;
        self.wait += o.wait;
    }
}

fn process_sched(pid: &str) -> Sched {
    let mut ns = [0u64; 2];
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let s = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        for (total, x) in ns.iter_mut().zip(s.split_whitespace()) {
            *total += x.parse::<u64>().unwrap_or(0);
        }
    }
    Sched { cpu: Duration::from_nanos(ns[0]), wait: Duration::from_nanos(ns[1]) }
}

/// A server under test as a testee process (`conformance/TESTEE.md`).
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

    fn sched(&self) -> Sched {
        process_sched(&self.child.id().to_string())
    }

    /// One level with one load generator, in waves: round trips per second and the server's CPU µs per round
    /// trip, both over the timed parts only, and the latency quantiles of every round trip.
    fn measure_one(&mut self, k: usize, g: Generator, total: usize, off: &mut usize) -> Row {
        let mut load = Load::connect(g, &self.endpoint, k);
        let (wave, per) = plan(k, total);
        let (mut busy, mut server, mut generator, mut latencies) =
            (Duration::ZERO, Sched::default(), Sched::default(), vec![]);
        for _ in 0..per / wave {
            let ids: Vec<usize> = (*off..*off + k * wave).collect();
            self.ready(&ids);
            let reqs: Vec<Vec<Vec<u8>>> =
                (0..k).map(|c| (0..wave).map(|j| request(*off + c * wave + j)).collect()).collect();
            *off += k * wave;
            let (before, gen_before) = (self.sched(), process_sched("self"));
            let w = load.run(&reqs);
            server += self.sched() - before;
            generator += process_sched("self") - gen_before;
            busy += w.elapsed;
            latencies.extend(w.latencies);
        }
        if let Ok(dir) = std::env::var("MOONCAKE_BENCH_DUMP") {
            let text: String = latencies.iter().map(|d| format!("{}\n", d.as_nanos())).collect();
            let _ = std::fs::write(format!("{dir}/{k}-{}-{}.txt", g.id(), self.child.id()), text);
        }
        latencies.sort_unstable();
        let n = latencies.len();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        Row {
            round_trips: n,
            rate: n as f64 / busy.as_secs_f64(),
            cpu_us: us(server.cpu) / n as f64,
            gen_cpu_us: us(generator.cpu) / n as f64,
            wait_us: us(server.wait) / n as f64,
            gen_wait_us: us(generator.wait) / n as f64,
            p50_us: us(quantile(&latencies, 0.5)),
            p99_us: us(quantile(&latencies, 0.99)),
            mean_us: us(latencies.iter().sum::<Duration>()) / n as f64,
        }
    }

    /// Every level with every load generator: `rows[generator][level]`.
    fn measure(&mut self, levels: &[usize], generators: &[Generator], total: usize, who: &str) -> Vec<Vec<Row>> {
        let mut off = 0;
        let mut out = vec![vec![]; generators.len()];
        for &k in levels {
            for (gi, &g) in generators.iter().enumerate() {
                let r = self.measure_one(k, g, total, &mut off);
                eprintln!(
                    "{who} {k} {}: {:.0}/s, p50 {:.1} µs, p99 {:.1} µs, mean {:.1} µs, {:.1} µs CPU each (generator {:.1} µs), \
                     {:.1} µs waiting for a CPU each (generator {:.1} µs)",
                    g.id(),
                    r.rate,
                    r.p50_us,
                    r.p99_us,
                    r.mean_us,
                    r.cpu_us,
                    r.gen_cpu_us,
                    r.wait_us,
                    r.gen_wait_us
                );
                out[gi].push(r);
            }
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

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The servers the bench knows, in the order they run.
const SERVERS: [(&str, &str); 3] =
    [("floor", "libzmq ROUTER floor"), ("rust", "Rust prefiller"), ("python", "Python test peer")];

fn cell(r: Option<&Row>) -> String {
    match r {
        Some(r) => format!("{:.0} | {:.1} | {:.1}", r.rate, r.p50_us, r.p99_us),
        None => "– | – | –".into(),
    }
}

fn main() {
    if std::env::var_os(floor::FLOOR_ENV).is_some() {
        return floor::serve();
    }
    let levels: Vec<usize> = env_list("MOONCAKE_BENCH_LEVELS", "1,8,64")
        .iter()
        .map(|x| x.parse().expect("MOONCAKE_BENCH_LEVELS: numbers"))
        .collect();
    let peers = env_list("MOONCAKE_BENCH_PEERS", "floor,rust,python");
    let generators: Vec<Generator> = env_list("MOONCAKE_BENCH_GENERATORS", "libzmq,zmtp")
        .iter()
        .map(|g| match g.as_str() {
            "libzmq" => Generator::Libzmq,
            "zmtp" => Generator::Zmtp,
            other => panic!("MOONCAKE_BENCH_GENERATORS: unknown generator {other} (libzmq, zmtp)"),
        })
        .collect();
    let total: usize = std::env::var("MOONCAKE_BENCH_PULLS").ok().map_or(16000, |v| v.parse().expect("a number"));
    // The load generator and the server under test each get a CPU of their own (`taskset`): CPU 0 and 1 by
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
    let load_start = loadavg();
    let started = Instant::now();
    // results[server][generator][level]
    let mut results: Vec<Option<Vec<Vec<Row>>>> = vec![None; SERVERS.len()];
    for (si, (id, _)) in SERVERS.iter().enumerate() {
        if !peers.iter().any(|p| p == id) {
            continue;
        }
        let cmd = match *id {
            "floor" => {
                let mut c = command(std::env::current_exe().expect("the bench binary").to_str().expect("UTF-8"));
                c.env(floor::FLOOR_ENV, "1");
                c
            }
            "rust" => {
                let mut c = command(env!("CARGO_BIN_EXE_mooncake-peer"));
                c.arg("testee");
                c
            }
            _ => match python() {
                Some(py) => {
                    let mut c = command(&py);
                    c.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/peer/mooncake_test_peer.py"));
                    c
                }
                None => {
                    eprintln!("python: not run (no venv: set MOONCAKE_PYTHON)");
                    continue;
                }
            },
        };
        let mut p = Peer::start(cmd);
        results[si] = Some(p.measure(&levels, &generators, total, id));
        p.stop();
    }
    let load_end = loadavg();
    let row = |s: usize, g: usize, l: usize| results[s].as_ref().map(|r| &r[g][l]);
    for (gi, g) in generators.iter().enumerate() {
        println!("\n{}:\n", g.description());
        println!("| Decoders | Floor (round trips/s, p50 µs, p99 µs) | | | Rust prefiller | | | Python test peer | | | Rust p50 ÷ floor p50 | Rust ÷ Python (round trips/s) | CPU per round trip, floor / Rust / Python |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for (li, k) in levels.iter().enumerate() {
            let (f, r, p) = (row(0, gi, li), row(1, gi, li), row(2, gi, li));
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => format!("{:.2}×", a / b),
                _ => "–".into(),
            };
            let cpu = [f, r, p].map(|x| x.map_or("–".into(), |x| format!("{:.1} µs", x.cpu_us))).join(" / ");
            println!(
                "| {k} | {} | {} | {} | {} | {} | {cpu} |",
                cell(f),
                cell(r),
                cell(p),
                ratio(r.map(|x| x.p50_us), f.map(|x| x.p50_us)),
                ratio(r.map(|x| x.rate), p.map(|x| x.rate)),
            );
        }
    }
    let placement = match &pin {
        Some(p) => {
            format!("load generator pinned to CPU {}, server to CPU {p}", pin_spec.split(':').next().unwrap_or("?"))
        }
        None => "not pinned".to_string(),
    };
    println!(
        "\nAbout {total} free-only pulls per level and generator (waves of ≤ {WAVE_MAX} per decoder, ~{READY_PER_WAVE} transfers ready per wave), one DEALER per decoder, 127.0.0.1; {cores} cores, {placement}; load average {load_start} at the start, {load_end} at the end; {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if let Ok(path) = std::env::var("MOONCAKE_BENCH_JSON") {
        let mut rows = vec![];
        for (si, (id, name)) in SERVERS.iter().enumerate() {
            for (gi, g) in generators.iter().enumerate() {
                for (li, k) in levels.iter().enumerate() {
                    if let Some(r) = row(si, gi, li) {
                        rows.push(json!({"server": id, "server_name": name, "generator": g.id(), "generator_name": g.description(),
                            "decoders": k, "round_trips": r.round_trips, "rate": r.rate, "cpu_us": r.cpu_us, "generator_cpu_us": r.gen_cpu_us,
                            "wait_us": r.wait_us, "generator_wait_us": r.gen_wait_us,
                            "p50_us": r.p50_us, "p99_us": r.p99_us, "mean_us": r.mean_us}));
                    }
                }
            }
        }
        let doc = json!({"rows": rows, "pulls_per_level": total, "cores": cores, "placement": placement,
            "load_start": load_start, "load_end": load_end, "seconds": started.elapsed().as_secs_f64(),
            "ready_per_wave": READY_PER_WAVE, "wave_max": WAVE_MAX});
        std::fs::write(&path, serde_json::to_string_pretty(&doc).expect("JSON")).expect("write MOONCAKE_BENCH_JSON");
    }
}
