//! The initiator side: handshake with a segment (cached), then requests over a pool of data connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mooncake_wire::limits::{MAX_TE_CONNECTIONS_PER_PEER, MAX_TE_REQUEST_BYTES};
use mooncake_wire::te::data::{Header, Opcode, Status};
use mooncake_wire::te::handshake::{encode, FrameDecoder, MsgType};
use mooncake_wire::te::SegmentDesc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OnceCell, Semaphore};

use super::strict::{Issue, Issues, Step, REAL_ON_DESCRIPTOR, REAL_ON_HANDSHAKE};
use super::{timestamp, HANDSHAKE_TIMEOUT, REQUEST_TIMEOUT};

/// Connections kept per peer (the engine's default lanes per peer).
pub const LANES_PER_PEER: usize = 4;

/// Why a transfer failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransferError {
    /// The target refused the range (status "address rejected"): nothing was written.
    Rejected {
        /// The target address of the refused range.
        addr: u64,
        /// The length of the refused range, in bytes.
        size: u64,
    },
    /// The handshake failed or the descriptor is unusable.
    Handshake(String),
    /// A connection failed or the peer broke the protocol.
    Io(String),
    /// A request the client refuses to send (larger than the limit).
    Invalid(String),
    /// (A strict client) no buffer the target advertised covers the range: nothing was sent.
    Uncovered(String),
}

impl std::fmt::Display for TransferError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransferError::Rejected { addr, size } => {
                write!(f, "the target refused {size} bytes at {addr:#x} (outside its registered memory)")
            }
            TransferError::Handshake(m) => write!(f, "handshake: {m}"),
            TransferError::Io(m) => write!(f, "transfer: {m}"),
            TransferError::Invalid(m) => write!(f, "transfer: {m}"),
            TransferError::Uncovered(m) => write!(f, "transfer refused: the descriptor's {m}"),
        }
    }
}
impl std::error::Error for TransferError {}

/// One request: write `data` at the target's `addr`, or read `len` bytes from it.
#[derive(Clone, Debug)]
pub enum Request {
    /// Writes `data` into the target's memory.
    Write {
        /// The target address of the first byte (an address inside a buffer the target registered).
        addr: u64,
        /// The bytes to write.
        data: Vec<u8>,
    },
    /// Reads bytes from the target's memory.
    Read {
        /// The target address of the first byte.
        addr: u64,
        /// How many bytes to read.
        len: u64,
    },
}

/// An initiator. Cheap to clone (shared caches); descriptors are cached per segment name, idle data
/// connections per data address (at most [`LANES_PER_PEER`]). Like the real engine's, it writes whatever the
/// target's registered memory accepts; a [strict](EngineClient::strict) one writes only inside the buffers the
/// target advertised and records every difference from a real engine target ([`EngineClient::issues`]).
#[derive(Clone, Default)]
pub struct EngineClient {
    segments: Arc<Mutex<HashMap<String, Arc<SegmentDesc>>>>,
    /// `Some` for a strict client.
    issues: Option<Issues>,
    idle: Arc<Mutex<HashMap<String, Vec<TcpStream>>>>,
    /// The handshake in flight per segment: callers that arrive while it runs share its result (a burst of
    /// writes to a new decoder handshakes once, not once per write, which a target refuses beyond a few).
    handshakes: Arc<Mutex<HashMap<String, Arc<Handshake>>>>,
    /// Lanes (data connections in use) per data address: at most [`MAX_TE_CONNECTIONS_PER_PEER`].
    lanes: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    /// Whether the task that prunes the idle pool every [`PRUNE_EVERY`] runs (started with the first pooled
    /// connection; it ends with the last clone of the client).
    sweeping: Arc<std::sync::atomic::AtomicBool>,
}

/// One handshake's result, shared by every caller that waited for it.
type Handshake = OnceCell<Result<Arc<SegmentDesc>, TransferError>>;

fn budget() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(MAX_TE_CONNECTIONS_PER_PEER))
}

/// How often idle connections are checked for a target that closed them, transfers or not.
const PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl EngineClient {
    /// A client with empty caches; nothing connects until the first transfer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A strict client (the conformance runner's): it writes only inside the buffers a target advertised and
    /// records what differs from a real engine target's handshake and descriptor ([`EngineClient::issues`]).
    pub fn strict() -> Self {
        EngineClient { issues: Some(Issues::default()), ..Self::default() }
    }

    /// What a strict client found wrong so far, each once, in order (empty for a client that is not strict).
    pub fn issues(&self) -> Vec<Issue> {
        self.issues.as_ref().map(Issues::all).unwrap_or_default()
    }

    fn note(&self, session: &str, step: Step, detail: String, refused: bool) {
        if let Some(i) = &self.issues {
            i.note(session, step, detail, refused);
        }
    }

    /// The target's descriptor (handshake on first use; callers that ask while it runs wait for it).
    pub async fn segment(&self, session: &str) -> Result<Arc<SegmentDesc>, TransferError> {
        if let Some(d) = self.segments.lock().expect("segments").get(session) {
            return Ok(d.clone());
        }
        let cell = self.handshakes.lock().expect("handshakes").entry(session.to_string()).or_default().clone();
        let got = cell.get_or_init(|| self.handshake_once(session)).await.clone();
        // The next caller after this one finds the descriptor cached, or (it failed) handshakes afresh.
        let mut inflight = self.handshakes.lock().expect("handshakes");
        if inflight.get(session).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            inflight.remove(session);
        }
        got
    }

    async fn handshake_once(&self, session: &str) -> Result<Arc<SegmentDesc>, TransferError> {
        let body = handshake(session).await.inspect_err(|e| {
            self.note(session, Step::Handshake, format!("{e} ({REAL_ON_HANDSHAKE})"), true);
        })?;
        let d = SegmentDesc::parse(&body).map_err(|e| {
            // A body that is not JSON fails the real engine's handshake step; a JSON one its descriptor decoding.
            match serde_json::from_slice::<serde_json::Value>(&body) {
                Ok(_) => self.note(session, Step::Descriptor, format!("{e} ({REAL_ON_DESCRIPTOR})"), true),
                Err(_) => self.note(session, Step::Handshake, format!("{e} ({REAL_ON_HANDSHAKE})"), true),
            }
            TransferError::Handshake(format!("{session}: {e}"))
        })?;
        for dev in mooncake_wire::te::audit::audit(&body, session) {
            self.note(session, Step::Descriptor, dev.to_string(), false);
        }
        let d = Arc::new(d);
        self.segments.lock().expect("segments").insert(session.to_string(), d.clone());
        Ok(d)
    }

    /// (A strict client) refuses the batch when a request lies outside every buffer `seg` advertised.
    fn check_covered(&self, session: &str, seg: &SegmentDesc, reqs: &[Request]) -> Result<(), TransferError> {
        if self.issues.is_none() {
            return Ok(());
        }
        for r in reqs {
            let (addr, size) = match r {
                Request::Write { addr, data } => (*addr, data.len() as u64),
                Request::Read { addr, len } => (*addr, *len),
            };
            if size == 0 {
                continue;
            }
            if let Some(dev) = mooncake_wire::te::audit::uncovered(seg, addr, size) {
                self.note(session, Step::Descriptor, dev.to_string(), true);
                return Err(TransferError::Uncovered(dev.to_string()));
            }
        }
        Ok(())
    }

    /// How many data connections sit idle in the pool (every peer together).
    pub fn idle_connections(&self) -> usize {
        self.idle.lock().expect("pool").values().map(Vec::len).sum()
    }

    /// Forgets the descriptor and the idle connections of a segment (the next transfer handshakes again).
    pub fn forget(&self, session: &str) {
        if let Some(d) = self.segments.lock().expect("segments").remove(session) {
            let addr = data_addr(&d, session);
            self.idle.lock().expect("pool").remove(&addr);
            // Only a budget nobody holds a lane of goes; a transfer still running keeps its own.
            let mut lanes = self.lanes.lock().expect("lanes");
            if lanes.get(&addr).is_some_and(|l| Arc::strong_count(l) == 1) {
                lanes.remove(&addr);
            }
        }
    }

    /// Runs `reqs` against `session`, spread over up to [`LANES_PER_PEER`] connections; returns the data of
    /// the reads in request order (empty for writes). On a connection failure the descriptor is dropped and
    /// the whole batch retried once (requests are idempotent: same bytes at the same addresses).
    pub async fn transfer(&self, session: &str, reqs: Vec<Request>) -> Result<Vec<Vec<u8>>, TransferError> {
        for r in &reqs {
            let n = match r {
                Request::Write { data, .. } => data.len() as u64,
                Request::Read { len, .. } => *len,
            };
            if n > MAX_TE_REQUEST_BYTES as u64 {
                return Err(TransferError::Invalid(format!("a request of {n} bytes is above the limit")));
            }
        }
        let reqs = Arc::new(reqs);
        match self.transfer_once(session, reqs.clone()).await {
            Err(TransferError::Io(_)) => {
                self.forget(session);
                self.transfer_once(session, reqs).await
            }
            other => other,
        }
    }

    async fn transfer_once(&self, session: &str, reqs: Arc<Vec<Request>>) -> Result<Vec<Vec<u8>>, TransferError> {
        let seg = self.segment(session).await?;
        self.check_covered(session, &seg, &reqs)?;
        let addr = data_addr(&seg, session);
        let lanes = reqs.len().clamp(1, LANES_PER_PEER);
        // Held until every lane is done: at most MAX_TE_CONNECTIONS_PER_PEER connections in use towards `addr`.
        let budget = self.lanes.lock().expect("lanes").entry(addr.clone()).or_insert_with(budget).clone();
        let _lanes = budget.acquire_many_owned(lanes as u32).await.map_err(|e| TransferError::Io(e.to_string()))?;
        // Every lane's connection is taken before any request goes out, so a batch of N requests always holds
        // min(N, 4) connections (a lane that finished early would otherwise lend its connection to a later
        // one, and the pool would fill only over many transfers, which on the fd count looks like a leak).
        let conns = self.connections(&addr, lanes).await?;
        let mut set = tokio::task::JoinSet::new();
        for (lane, mut s) in conns.into_iter().enumerate() {
            let (me, reqs, addr, v2) = (self.clone(), reqs.clone(), addr.clone(), seg.acknowledged());
            set.spawn(async move {
                let mut out = vec![];
                for i in (lane..reqs.len()).step_by(lanes) {
                    let r = tokio::time::timeout(REQUEST_TIMEOUT, request(&mut s, &reqs[i], v2))
                        .await
                        .map_err(|_| TransferError::Io("no answer within the request timeout".into()))??;
                    out.push((i, r));
                }
                me.give_back(&addr, s);
                Ok::<_, TransferError>(out)
            });
        }
        let mut results = vec![Vec::new(); reqs.len()];
        let mut first_err = None;
        while let Some(j) = set.join_next().await {
            match j.map_err(|e| TransferError::Io(e.to_string())).and_then(|r| r) {
                Ok(v) => v.into_iter().for_each(|(i, d)| results[i] = d),
                // A rejection outranks an I/O error (the latter is retried, the former must not be).
                Err(e @ TransferError::Rejected { .. }) => first_err = Some(e),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(results),
        }
    }

    /// `n` connections to `addr`: idle ones from the pool (pruned first, so a connection its target closed is
    /// not handed out), the rest opened at once; on a failure the ones obtained go back to the pool.
    async fn connections(&self, addr: &str, n: usize) -> Result<Vec<TcpStream>, TransferError> {
        let mut conns: Vec<TcpStream> = {
            let mut idle = self.idle.lock().expect("pool");
            prune(&mut idle);
            match idle.get_mut(addr) {
                Some(v) => v.drain(v.len().saturating_sub(n)..).collect(),
                None => vec![],
            }
        };
        let mut connecting = tokio::task::JoinSet::new();
        for _ in conns.len()..n {
            connecting.spawn(connect(addr.to_string()));
        }
        let mut err = None;
        while let Some(j) = connecting.join_next().await {
            match j.map_err(|e| TransferError::Io(e.to_string())).and_then(|r| r) {
                Ok(s) => conns.push(s),
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        match err {
            None => Ok(conns),
            Some(e) => {
                conns.into_iter().for_each(|s| self.give_back(addr, s));
                Err(e)
            }
        }
    }

    fn give_back(&self, addr: &str, s: TcpStream) {
        if !self.sweeping.swap(true, std::sync::atomic::Ordering::Relaxed) {
            let pool = Arc::downgrade(&self.idle);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(PRUNE_EVERY).await;
                    let Some(pool) = pool.upgrade() else { break };
                    prune(&mut pool.lock().expect("pool"));
                }
            });
        }
        let mut idle = self.idle.lock().expect("pool");
        let v = idle.entry(addr.to_string()).or_default();
        if v.len() < LANES_PER_PEER {
            v.push(s);
        }
    }
}

/// Drops the idle connections whose target closed them or sent something unasked (a target that exited, one
/// that closed an idle connection), and the entries left empty: without it, the pool keeps a dead socket for
/// every peer that went away, forever. Runs before connections are taken and every [`PRUNE_EVERY`].
fn prune(idle: &mut HashMap<String, Vec<TcpStream>>) {
    idle.retain(|_, conns| {
        conns.retain(still_open);
        !conns.is_empty()
    });
}

/// An idle connection is usable while reading it would block: no end of stream, no error, no unasked bytes.
fn still_open(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// A new data connection to `addr`, bounded by the handshake timeout.
async fn connect(addr: String) -> Result<TcpStream, TransferError> {
    let s = tokio::time::timeout(HANDSHAKE_TIMEOUT, TcpStream::connect(&addr))
        .await
        .map_err(|_| TransferError::Io(format!("connecting to {addr} timed out")))?
        .map_err(|e| TransferError::Io(format!("connecting to {addr}: {e}")))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// Where the data server is: `tcp_data_host`, else the host of the segment name the initiator opened (measured:
/// the real engine connects there whatever the descriptor's own `name` says).
fn data_addr(d: &SegmentDesc, session: &str) -> String {
    let host = match &d.tcp_data_host {
        Some(h) if !h.is_empty() => h.as_str(),
        _ => session.rsplit_once(':').map_or(session, |(h, _)| h),
    };
    format!("{host}:{}", d.tcp_data_port)
}

fn io(e: std::io::Error) -> TransferError {
    TransferError::Io(e.to_string())
}

/// One request on a connection. Version 1 targets get no status (a write is done once it is sent).
async fn request(s: &mut TcpStream, r: &Request, v2: bool) -> Result<Vec<u8>, TransferError> {
    let (addr, size, op) = match r {
        Request::Write { addr, data } => (*addr, data.len() as u64, Opcode::Write),
        Request::Read { addr, len } => (*addr, *len, Opcode::Read),
    };
    if size == 0 {
        return Ok(vec![]); // never on the wire
    }
    s.write_all(&Header { size, addr, op, v2 }.encode()).await.map_err(io)?;
    match r {
        Request::Write { data, .. } if v2 => {
            // The target may refuse before reading the payload: send it and watch for the status at once.
            let mut b = [0u8; 8];
            let (mut rd, mut wr) = s.split();
            let send = wr.write_all(data);
            let recv = rd.read_exact(&mut b);
            tokio::pin!(send, recv);
            let (mut sent, mut send_failed) = (false, false);
            let got = loop {
                tokio::select! {
                    r = &mut send, if !sent && !send_failed => match r {
                        Ok(()) => sent = true,
                        Err(_) => send_failed = true,
                    },
                    r = &mut recv => break r,
                }
            };
            got.map_err(io)?;
            match decode_status(b, addr, size)? {
                () if sent => Ok(vec![]),
                () => Err(TransferError::Io("acknowledged before the payload was sent".into())),
            }
        }
        Request::Write { data, .. } => {
            s.write_all(data).await.map_err(io)?;
            Ok(vec![])
        }
        Request::Read { .. } => {
            if v2 {
                let mut b = [0u8; 8];
                s.read_exact(&mut b).await.map_err(io)?;
                decode_status(b, addr, size)?;
            }
            let mut data = vec![0u8; size as usize];
            s.read_exact(&mut data).await.map_err(io)?;
            Ok(data)
        }
    }
}

fn decode_status(b: [u8; 8], addr: u64, size: u64) -> Result<(), TransferError> {
    match Status::decode(b) {
        Some(Status::Ok) => Ok(()),
        Some(Status::AddrRejected) => Err(TransferError::Rejected { addr, size }),
        Some(Status::Other(c)) => Err(TransferError::Io(format!("unknown status code {c}"))),
        None => Err(TransferError::Io(format!("not a status frame: {}", hex::encode(b)))),
    }
}

/// Connects to the segment's RPC port, sends a Metadata frame with an (empty) descriptor of ours, reads the
/// target's (the body of its answer).
async fn handshake(session: &str) -> Result<Vec<u8>, TransferError> {
    let hs = |m: String| TransferError::Handshake(format!("{session}: {m}"));
    let exchange = async {
        let mut s = TcpStream::connect(session).await.map_err(|e| hs(format!("connect: {e}")))?;
        let local = s.local_addr().map_err(|e| hs(e.to_string()))?;
        let mine = SegmentDesc {
            name: format!("{}:{}", local.ip(), local.port()),
            protocol: "tcp".into(),
            buffers: vec![],
            tcp_data_host: None,
            tcp_data_port: 0,
            tcp_proto_version: 2,
            rdma_server_name: String::new(),
            timestamp: timestamp(),
        };
        s.write_all(&encode(MsgType::Metadata, mine.to_json().as_bytes())).await.map_err(|e| hs(e.to_string()))?;
        let mut dec = FrameDecoder::new();
        loop {
            if let Some(f) = dec.poll().map_err(|e| hs(e.to_string()))? {
                if f.ty != MsgType::Metadata {
                    return Err(hs(format!("answered with a {:?} frame", f.ty)));
                }
                return Ok(f.body);
            }
            let mut buf = vec![0u8; dec.wanted().min(64 * 1024)];
            let n = s.read(&mut buf).await.map_err(|e| hs(e.to_string()))?;
            if n == 0 {
                return Err(hs(dec.at_eof().to_string()));
            }
            dec.feed(&buf[..n]);
        }
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, exchange).await.map_err(|_| hs("no answer within 5 s".into()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Measured (`tests/engine/descriptor_probe.py`, `name_other_host_no_data_host`): without `tcp_data_host` the
    /// real initiator connects to the host of the session it opened, whatever the descriptor's `name` says.
    #[test]
    fn the_data_host_is_the_sessions_when_the_descriptor_names_none() {
        let body = br#"{"buffers":[],"name":"127.0.0.9:1","protocol":"tcp","tcp_data_port":16000}"#;
        let d = SegmentDesc::parse(body).unwrap();
        assert_eq!(data_addr(&d, "127.0.0.1:15001"), "127.0.0.1:16000");
        let with_host = SegmentDesc { tcp_data_host: Some("10.0.0.2".into()), ..d };
        assert_eq!(data_addr(&with_host, "127.0.0.1:15001"), "10.0.0.2:16000");
    }
}
