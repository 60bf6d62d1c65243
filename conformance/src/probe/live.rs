//! The probe's I/O: the bootstrap server's `GET /query`, a TCP connect to each worker's ROUTER, one DEALER per
//! probe message (as a vLLM decoder opens one per pull), and the transfer engine's P2P handshake. Every step
//! is bounded by the one timeout given; workers are probed [`PARALLEL`] at a time.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value as J;

use mooncake_io::engine::client::EngineClient;
use mooncake_wire::spec::Revision;

use super::identify::{Answer, Plan};
use std::collections::BTreeMap;

use super::{pair_verdict, ProbeReport, Problem, Worker, WorkerReport};

/// Workers probed at once.
pub const PARALLEL: usize = 16;
/// The most workers one probe asks (a table larger than this is cut, and says so).
pub const MAX_WORKERS: usize = 4096;

/// Why the bootstrap server gave no table (the command exits 3).
#[derive(Debug, thiserror::Error)]
#[error("bootstrap server {url}: {why}")]
pub struct Unreachable {
    /// The URL asked.
    pub url: String,
    /// What failed.
    pub why: String,
}

/// `GET {url}/query`, bounded by `timeout`.
pub fn query(url: &str, timeout: Duration) -> Result<J, Unreachable> {
    let fail = |why: String| Unreachable { url: url.to_string(), why };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| fail(e.to_string()))?;
    rt.block_on(mooncake_io::http::query(url, timeout)).map_err(|e| fail(e.to_string()))
}

/// `host:port` of a `tcp://host:port` address (IPv6 literals bracketed).
fn host_port(addr: &str) -> Result<String, String> {
    let hp = addr.strip_prefix("tcp://").ok_or_else(|| format!("`{addr}` is not a tcp:// address"))?;
    if hp.rsplit_once(':').is_none_or(|(_, p)| p.parse::<u16>().is_err()) {
        return Err(format!("`{addr}` has no port"));
    }
    Ok(hp.to_string())
}

/// A TCP connection to `host:port` within `timeout` (closed at once): whether something listens there.
pub fn reach(hostport: &str, timeout: Duration) -> Result<(), String> {
    let addrs: Vec<SocketAddr> =
        hostport.to_socket_addrs().map_err(|e| format!("cannot resolve {hostport}: {e}"))?.collect();
    let mut last = format!("{hostport} resolves to no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("TCP connect to {a}: {e}"),
        }
    }
    Err(last)
}

/// Sends `payload` as one frame on a new DEALER to `addr` and returns the first frame back (`Err`: none within
/// `timeout`, or the socket failed).
pub fn ask(ctx: &zmq::Context, addr: &str, payload: &[u8], timeout: Duration) -> Result<Vec<u8>, String> {
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let s = ctx.socket(zmq::DEALER).map_err(|e| e.to_string())?;
    s.set_linger(0).map_err(|e| e.to_string())?;
    s.set_rcvtimeo(ms).map_err(|e| e.to_string())?;
    s.set_sndtimeo(ms).map_err(|e| e.to_string())?;
    s.set_ipv6(addr.contains('[')).map_err(|e| e.to_string())?;
    s.connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    s.send(payload, 0).map_err(|e| format!("send: {e}"))?;
    let mut frames = s.recv_multipart(0).map_err(|e| match e {
        zmq::Error::EAGAIN => format!("no reply within {:.1} s", timeout.as_secs_f64()),
        e => format!("receive: {e}"),
    })?;
    match frames.len() {
        1 => Ok(frames.remove(0)),
        n => Err(format!("a reply of {n} frames (a Mooncake prefiller answers with one)")),
    }
}

/// Probes one worker: reachability, then every message of `plan`, then the pair's verdict.
pub fn probe_worker(
    ctx: &zmq::Context,
    w: &Worker,
    plan: &Plan,
    decoder: Option<&Arc<Revision>>,
    timeout: Duration,
) -> WorkerReport {
    let mut r = WorkerReport {
        worker: w.clone(),
        unreachable: None,
        answers: vec![],
        no_answer: vec![],
        identification: None,
        pairing: None,
    };
    if let Err(e) = host_port(&w.addr).and_then(|hp| reach(&hp, timeout)) {
        r.unreachable = Some(e);
        return r;
    }
    for p in &plan.probes {
        let answer = ask(ctx, &w.addr, &p.payload, timeout).and_then(|b| {
            Answer::of_reply(&b)
                .ok_or_else(|| format!("a reply that is not a MooncakeXferResponse ({})", hex::encode(&b)))
        });
        match answer {
            Ok(a) => r.answers.push(Some(a)),
            Err(e) => {
                r.no_answer.push(format!("{}: {e}", p.label));
                r.answers.push(None);
            }
        }
    }
    if r.answers.iter().any(Option::is_some) {
        let id = plan.identify(&r.answers);
        r.pairing = decoder.and_then(|d| pair_verdict(d, &id));
        r.identification = Some(id);
    }
    r
}

/// Probes every worker, [`PARALLEL`] at a time, in table order.
pub fn probe_all(
    workers: &[Worker],
    plan: &Plan,
    decoder: Option<&Arc<Revision>>,
    timeout: Duration,
) -> Vec<WorkerReport> {
    let ctx = zmq::Context::new();
    let mut out = Vec::with_capacity(workers.len());
    for chunk in workers.chunks(PARALLEL) {
        let done: Vec<WorkerReport> = std::thread::scope(|s| {
            let hs: Vec<_> = chunk.iter().map(|w| s.spawn(|| probe_worker(&ctx, w, plan, decoder, timeout))).collect();
            hs.into_iter().map(|h| h.join().expect("a probe thread does not panic")).collect()
        });
        out.extend(done);
    }
    out
}

/// What `--engine` found about a transfer engine.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EngineReport {
    /// The session asked (`host:rpc_port`).
    pub session: String,
    /// Why no usable descriptor came (`None`: one did).
    pub error: Option<String>,
    /// The descriptor's `protocol`.
    pub protocol: Option<String>,
    /// Its buffers: (address, length) each.
    pub buffers: Vec<(u64, u64)>,
    /// `tcp_proto_version` (1 when absent).
    pub tcp_proto_version: Option<u32>,
    /// The data server's address (the session's host unless the descriptor names one, and `tcp_data_port`).
    pub data_addr: Option<String>,
    /// Why the data port cannot be reached (`None`: it can, or no descriptor).
    pub data_unreachable: Option<String>,
    /// How the descriptor differs from what a real engine target answers (the strict initiator's audit,
    /// `TE-DESCRIPTOR` in the runner).
    pub deviations: Vec<String>,
}

/// The P2P handshake with `session` (our descriptor offers no buffers), the descriptor's audit, and a TCP
/// connect to its data port; bounded by `timeout` each.
pub fn engine(session: &str, timeout: Duration) -> EngineReport {
    let mut r = EngineReport { session: session.to_string(), ..EngineReport::default() };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            r.error = Some(e.to_string());
            return r;
        }
    };
    let client = EngineClient::strict();
    let got = rt.block_on(async { tokio::time::timeout(timeout, client.segment(session)).await });
    r.deviations = client.issues().into_iter().filter(|i| !i.refused).map(|i| i.detail).collect();
    let desc = match got {
        Err(_) => {
            r.error = Some(format!("no handshake answer within {:.1} s", timeout.as_secs_f64()));
            return r;
        }
        Ok(Err(e)) => {
            r.error = Some(e.to_string());
            return r;
        }
        Ok(Ok(d)) => d,
    };
    r.protocol = Some(desc.protocol.clone());
    r.buffers = desc.buffers.iter().map(|b| (b.addr, b.length)).collect();
    r.tcp_proto_version = Some(desc.tcp_proto_version);
    let host = match &desc.tcp_data_host {
        Some(h) if !h.is_empty() => h.clone(),
        _ => session.rsplit_once(':').map_or(session, |(h, _)| h).to_string(),
    };
    let data = format!("{host}:{}", desc.tcp_data_port);
    r.data_unreachable = reach(&data, timeout).err();
    r.data_addr = Some(data);
    r
}

/// The problems of an engine report: no descriptor, a protocol other than `tcp`, no buffer, an unreachable data
/// port, a deviation from a real target's descriptor.
pub fn engine_problems(r: &EngineReport) -> Vec<Problem> {
    let p = |d: String| Problem::new("engine", format!("{}: {d}", r.session));
    let mut out = vec![];
    if let Some(e) = &r.error {
        out.push(p(e.clone()));
    }
    if let Some(proto) = r.protocol.as_deref().filter(|x| *x != "tcp") {
        out.push(p(format!("protocol {proto:?}: this probe checks the TCP transport's data port only")));
    }
    if r.error.is_none() && r.buffers.is_empty() {
        out.push(p("the descriptor lists no buffer: every write to it is refused".into()));
    }
    if let Some(e) = &r.data_unreachable {
        out.push(p(format!("data port: {e}")));
    }
    out.extend(r.deviations.iter().map(|d| p(d.clone())));
    out
}

/// The tables of every bootstrap server (one per prefill instance in a vLLM deployment), in order: the
/// workers of all of them, and what is wrong with each answer (`Err`: one gave no table, exit 3).
fn tables(
    urls: &[String],
    timeout: Duration,
) -> Result<(Vec<Worker>, BTreeMap<String, Vec<String>>, Vec<Problem>), Unreachable> {
    let (mut workers, mut fits, mut problems) = (vec![], BTreeMap::new(), vec![]);
    for url in urls {
        let table = query(url, timeout)?;
        match super::workers(url, &table) {
            Ok(w) => workers.extend(w),
            Err(e) => problems.push(Problem::new("query-shape", format!("{url}: {e}"))),
        }
        let f = super::query_fits(&table);
        if f.is_empty() {
            problems.push(Problem::new(
                "query-shape",
                format!("{url}: the GET /query answer fits no generation-2 revision's bootstrap model"),
            ));
        }
        fits.insert(url.clone(), f);
    }
    if workers.len() > MAX_WORKERS {
        problems.push(Problem::new(
            "query-shape",
            format!("{} workers listed; the first {MAX_WORKERS} probed", workers.len()),
        ));
        workers.truncate(MAX_WORKERS);
    }
    Ok((workers, fits, problems))
}

/// The whole probe: the tables, every worker, every engine, and what is wrong (`Err`: a bootstrap server gave
/// no table, exit 3).
pub fn run(
    urls: &[String],
    engines: &[String],
    plan: &Plan,
    decoder: Option<&Arc<Revision>>,
    timeout: Duration,
) -> Result<ProbeReport, Unreachable> {
    let (workers, query_fits, mut problems) = tables(urls, timeout)?;
    problems.extend(super::duplicates(&workers));
    problems.extend(super::gaps(&workers));
    let reports = probe_all(&workers, plan, decoder, timeout);
    problems.extend(super::worker_problems(&reports));
    let engines: Vec<EngineReport> = engines.iter().map(|e| engine(e, timeout)).collect();
    for e in &engines {
        problems.extend(engine_problems(e));
    }
    Ok(ProbeReport {
        bootstrap: urls.to_vec(),
        timeout_s: timeout.as_secs_f64(),
        query_fits,
        workers: reports,
        probes: plan.probes.clone(),
        indistinguishable: super::indistinguishable(plan),
        decoder_revision: decoder.map(|d| d.revision.clone()),
        engines,
        problems,
    })
}
