//! The target side: the handshake server on the RPC port and the data server on the data port.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use mooncake_wire::limits;
use mooncake_wire::te::data::{range_allowed, Header, Opcode, Status, HEADER_LEN};
use mooncake_wire::te::handshake::{encode, FrameDecoder, FrameError, MsgType};
use mooncake_wire::te::{BufferDesc, SegmentDesc, SegmentError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::SharedMemory;
use super::{timestamp, HANDSHAKE_TIMEOUT, IDLE_TIMEOUT, REQUEST_TIMEOUT};
use crate::admission::{Occupancy, Slot};

/// What initiators said about themselves in their handshakes: their segment descriptor, or why it is unusable
/// (the engine ignores it; a replay uses it to reach the initiator's engine).
pub type PeerLog = Arc<Mutex<Vec<Result<SegmentDesc, HandshakeError>>>>;

/// A deliberate change to the handshake answer of a target (tests of the conformance runner only): the
/// descriptor's JSON and the answer's frame type (that of the initiator's frame), edited in place.
pub type AnswerEdit = Arc<dyn Fn(&mut serde_json::Value, &mut MsgType) + Send + Sync>;

/// Why an initiator's handshake gave no usable segment descriptor (an entry of a [`PeerLog`]). Cloneable, as
/// the log is read by copying it; the OS errors are shared.
#[derive(Clone, Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The initiator's frame is not a handshake frame (empty, too long, or cut short by the end of the stream).
    #[error("{0}")]
    Frame(#[from] FrameError),
    /// No complete frame arrived within the handshake timeout.
    #[error("handshake: no frame within the timeout")]
    NoFrame,
    /// Reading the frame, writing the answer or shutting the write side down failed.
    #[error("{0}")]
    Io(#[source] Arc<io::Error>),
    /// The whole exchange did not finish within its bound.
    #[error("the handshake did not finish in time")]
    Unfinished,
    /// The frame's body is not a segment descriptor.
    #[error("{0}")]
    Descriptor(#[from] SegmentError),
}

impl From<io::Error> for HandshakeError {
    fn from(e: io::Error) -> Self {
        HandshakeError::Io(Arc::new(e))
    }
}

/// A running target: both servers, and every data connection they accepted, stop when it is dropped (as when
/// an engine process exits).
pub struct EngineTarget {
    /// The handshake (RPC) address; its `host:port` is the segment name initiators use.
    pub rpc: SocketAddr,
    /// The data server's address, which the descriptor advertises.
    pub data: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    /// The most data connections open at once so far (counted as each is accepted).
    peak: Arc<std::sync::atomic::AtomicUsize>,
}

impl Drop for EngineTarget {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        for c in self.connections.lock().expect("connections").drain(..) {
            c.abort();
        }
    }
}

impl EngineTarget {
    /// Serves `mem` with `rpc` as the handshake listener and `data` as the data listener.
    pub fn start(rpc: TcpListener, data: TcpListener, mem: SharedMemory) -> io::Result<EngineTarget> {
        EngineTarget::start_logged(rpc, data, mem, PeerLog::default())
    }

    /// [`EngineTarget::start`], keeping every initiator's descriptor in `peers` (at most 64 entries).
    pub fn start_logged(
        rpc: TcpListener,
        data: TcpListener,
        mem: SharedMemory,
        peers: PeerLog,
    ) -> io::Result<EngineTarget> {
        EngineTarget::start_edited(rpc, data, mem, peers, None)
    }

    /// [`EngineTarget::start_logged`], answering handshakes as `edit` changes them (tests only).
    pub fn start_edited(
        rpc: TcpListener,
        data: TcpListener,
        mem: SharedMemory,
        peers: PeerLog,
        edit: Option<AnswerEdit>,
    ) -> io::Result<EngineTarget> {
        let (rpc_addr, data_addr) = (rpc.local_addr()?, data.local_addr()?);
        let name = format!("{}:{}", rpc_addr.ip(), rpc_addr.port());
        let host = data_addr.ip().to_string();
        let (m1, m2) = (mem.clone(), mem);
        let hs = tokio::spawn(async move {
            // Handshakes run side by side (the engine's daemon takes one at a time, so one initiator that never
            // finishes would hold up every other), each bounded in time, at most so many at once and per host.
            let occupancy = Occupancy::shared();
            loop {
                let (s, peer) = accept(&rpc).await;
                let slot = match Slot::take(&occupancy, peer.ip(), MAX_HANDSHAKES, MAX_HANDSHAKES_PER_HOST) {
                    Ok(slot) => slot,
                    Err(why) => {
                        tracing::warn!(%peer, why, "engine target: handshake refused");
                        continue;
                    }
                };
                let desc = descriptor(&name, &host, data_addr.port(), &m1);
                let (peers, edit) = (peers.clone(), edit.clone());
                tokio::spawn(async move {
                    let _slot = slot;
                    let got = tokio::time::timeout(HANDSHAKE_TIMEOUT * 2, answer_handshake(s, desc, edit)).await;
                    let mut log = peers.lock().expect("peer log");
                    if log.len() < 64 {
                        log.push(match got {
                            Ok(Ok(body)) => SegmentDesc::parse(&body).map_err(HandshakeError::from),
                            Ok(Err(e)) => Err(e),
                            Err(_) => Err(HandshakeError::Unfinished),
                        });
                    }
                });
            }
        });
        let connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (conns, peak) = (connections.clone(), Arc::new(std::sync::atomic::AtomicUsize::new(0)));
        let most = peak.clone();
        let ds = tokio::spawn(async move {
            loop {
                let (s, _) = accept(&data).await;
                let mut c = conns.lock().expect("connections");
                c.retain(|h| !h.is_finished());
                if c.len() >= limits::MAX_SERVER_CONNECTIONS {
                    tracing::warn!(open = c.len(), "engine target: data connection refused (limits)");
                    continue;
                }
                let _ = s.set_nodelay(true);
                let h = tokio::spawn(serve_data(s, m2.clone()));
                c.push(h.abort_handle());
                most.fetch_max(c.len(), std::sync::atomic::Ordering::Relaxed);
            }
        });
        Ok(EngineTarget { rpc: rpc_addr, data: data_addr, tasks: vec![hs, ds], connections, peak })
    }

    /// Binds both listeners on `host` (`rpc_port` 0: any) and serves `mem`.
    pub async fn bind(host: &str, rpc_port: u16, data_port: u16, mem: SharedMemory) -> io::Result<EngineTarget> {
        let rpc = TcpListener::bind((host, rpc_port)).await?;
        let data = TcpListener::bind((host, data_port)).await?;
        EngineTarget::start(rpc, data, mem)
    }

    /// The segment (session) name: `host:rpc_port`.
    pub fn session(&self) -> String {
        format!("{}:{}", self.rpc.ip(), self.rpc.port())
    }

    /// The most data connections that were open at once so far (a connection counts until the target sees it
    /// closed).
    pub fn peak_data_connections(&self) -> usize {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Serves `mem` with `rpc` as the handshake listener, and a data listener on the same IP (any port), until
/// the future is dropped.
pub async fn serve(rpc: TcpListener, mem: SharedMemory) {
    serve_logged(rpc, mem, PeerLog::default()).await
}

/// [`serve`], keeping the initiators' descriptors in `peers`.
pub async fn serve_logged(rpc: TcpListener, mem: SharedMemory, peers: PeerLog) {
    serve_edited(rpc, mem, peers, None).await
}

/// [`serve_logged`], answering handshakes as `edit` changes them (tests of the conformance runner only).
pub async fn serve_edited(rpc: TcpListener, mem: SharedMemory, peers: PeerLog, edit: Option<AnswerEdit>) {
    let ip = match rpc.local_addr() {
        Ok(a) => a.ip(),
        Err(_) => return,
    };
    let Ok(data) = TcpListener::bind((ip, 0)).await else { return };
    let Ok(t) = EngineTarget::start_edited(rpc, data, mem, peers, edit) else { return };
    // Keep the target (its tasks) alive for as long as this future is.
    std::future::pending::<()>().await;
    drop(t);
}

/// The descriptor of `mem`: one buffer per registered region, at the addresses the decoder advertises.
pub fn descriptor(name: &str, host: &str, data_port: u16, mem: &SharedMemory) -> SegmentDesc {
    let buffers = mem
        .lock()
        .expect("memory")
        .regions()
        .map(|(addr, length)| BufferDesc { name: name.to_string(), addr, length })
        .collect();
    SegmentDesc {
        name: name.to_string(),
        protocol: "tcp".into(),
        buffers,
        tcp_data_host: Some(host.to_string()),
        tcp_data_port: data_port,
        tcp_proto_version: 2,
        rdma_server_name: String::new(),
        timestamp: timestamp(),
    }
}

/// One handshake: read a frame, answer with our descriptor in a frame of the same type, shut down the write
/// side, wait (bounded) for the initiator to close. Returns the initiator's frame body (its descriptor).
async fn answer_handshake(
    mut s: TcpStream,
    desc: SegmentDesc,
    edit: Option<AnswerEdit>,
) -> Result<Vec<u8>, HandshakeError> {
    let mut dec = FrameDecoder::new();
    let frame = loop {
        if let Some(f) = dec.poll()? {
            break f;
        }
        let mut buf = vec![0u8; dec.wanted().min(64 * 1024)];
        let n =
            tokio::time::timeout(HANDSHAKE_TIMEOUT, s.read(&mut buf)).await.map_err(|_| HandshakeError::NoFrame)??;
        if n == 0 {
            return Err(dec.at_eof().into());
        }
        dec.feed(&buf[..n]);
    };
    s.write_all(&answer(frame.ty, &desc, edit.as_ref())).await?;
    s.shutdown().await?;
    let mut one = [0u8; 1];
    let _ = tokio::time::timeout(HANDSHAKE_TIMEOUT, s.read(&mut one)).await;
    Ok(frame.body)
}

/// The answer frame to a frame of type `ty`: `desc` as the engine writes it, or as `edit` changes it.
fn answer(ty: MsgType, desc: &SegmentDesc, edit: Option<&AnswerEdit>) -> Vec<u8> {
    let Some(edit) = edit else { return encode(ty, desc.to_json().as_bytes()) };
    let (mut v, mut ty) = (serde_json::from_str(&desc.to_json()).unwrap_or_default(), ty);
    edit(&mut v, &mut ty);
    let body = match &v {
        serde_json::Value::String(raw) => format!("{raw}\n"),
        other => format!("{other}\n"),
    };
    encode(ty, body.as_bytes())
}

/// Handshakes answered at once, in all and from one host: each may hold up to
/// `limits::MAX_TE_HANDSHAKE_BYTES` while its frame arrives.
const MAX_HANDSHAKES: usize = 64;
const MAX_HANDSHAKES_PER_HOST: usize = 16;

/// How much of a write's payload is read before it is copied into memory.
const WRITE_SLICE: usize = 1 << 20;

/// The next connection; after a failed accept (out of fds, a transient error) it waits 10 ms instead of
/// spinning on it.
async fn accept(l: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match l.accept().await {
            Ok(x) => return x,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}

/// Requests on one data connection, one after the other, until it closes, idles or misbehaves.
async fn serve_data(mut s: TcpStream, mem: SharedMemory) {
    loop {
        let mut hb = [0u8; HEADER_LEN];
        match tokio::time::timeout(IDLE_TIMEOUT, s.read_exact(&mut hb)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let Ok(h) = Header::decode(&hb) else { return };
        match tokio::time::timeout(REQUEST_TIMEOUT, one_request(&mut s, h, &mem)).await {
            Ok(Ok(true)) => {}
            _ => return,
        }
    }
}

/// Serves one request; `Ok(false)` when the connection must close (a refused range).
async fn one_request(s: &mut TcpStream, h: Header, mem: &SharedMemory) -> io::Result<bool> {
    let allowed = range_allowed(mem.lock().expect("memory").regions(), h.addr, h.size);
    if !allowed {
        if h.v2 {
            s.write_all(&Status::AddrRejected.encode()).await?;
        }
        return Ok(false);
    }
    let len = h.size as usize;
    match h.op {
        Opcode::Write => {
            // The range lies inside a registered region (checked above); the payload goes into it slice by
            // slice as it arrives (as the engine's own server does), so no buffer of the declared size is made.
            let mut buf = vec![0u8; len.min(WRITE_SLICE)];
            let mut done = 0usize;
            while done < len {
                let n = (len - done).min(WRITE_SLICE);
                s.read_exact(&mut buf[..n]).await?;
                if !mem.lock().expect("memory").write(h.addr + done as u64, &buf[..n]) {
                    return Ok(false);
                }
                done += n;
            }
            if h.v2 {
                s.write_all(&Status::Ok.encode()).await?;
            }
        }
        Opcode::Read => {
            if mem.lock().expect("memory").read(h.addr, h.size).is_none() {
                return Ok(false);
            }
            if h.v2 {
                s.write_all(&Status::Ok.encode()).await?;
            }
            // Slice by slice, as writes are read: a connection holds at most one slice of a large range.
            let mut done = 0usize;
            while done < len {
                let n = (len - done).min(WRITE_SLICE);
                let slice = match mem.lock().expect("memory").read(h.addr + done as u64, n as u64) {
                    Some(d) => d.to_vec(),
                    None => return Ok(false),
                };
                s.write_all(&slice).await?;
                done += n;
            }
        }
    }
    Ok(true)
}
