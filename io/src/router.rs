//! A ZeroMQ ROUTER served by one thread of its own: ZMTP 3 (RFC 23 and 37, NULL mechanism) over non-blocking
//! TCP, with no libzmq I/O thread in between. A decoder's pull is read, handed to the [`RouterHandler`] and
//! answered by the same thread in one wake-up; with libzmq the same round trip wakes its I/O thread, the
//! socket's user and the I/O thread again (the floor measured in BENCHMARKS.md).
//!
//! What a decoder sees is what a libzmq ROUTER (vLLM's prefiller) shows it: the greeting (ZMTP 3.1, NULL), a
//! READY with `Socket-Type: ROUTER`, and replies as whole messages. Peers may be DEALER, REQ or ROUTER sockets;
//! a peer's `Identity` property becomes its routing id, otherwise it gets five bytes (a zero, then a counter)
//! as libzmq makes them; a second peer with an identity already in use is refused. Like vLLM's ROUTER, a
//! message to a routing id that is not connected is dropped. Frames over [`limits::MAX_FRAME_BYTES`] close the
//! connection (libzmq's ZMQ_MAXMSGSIZE), and so do messages whose frames sum to more than
//! [`limits::MAX_MESSAGE_BYTES`] (frames with the MORE flag are held until the last one); so do peers that do
//! not speak ZMTP 3 with the NULL mechanism.
//! A PING (ZMTP 3.1 heartbeat) is answered with a PONG.
//!
//! Its resource budget ([`RouterLimits`], defaults in `mooncake_wire::limits`, RELIABILITY.md): a peer must
//! finish its greeting and READY within the handshake timeout, and a message once begun must be complete within
//! the stall timeout (an idle connection between messages is kept, as vLLM's DEALERs idle between pulls); at
//! most so many connections in all and from one IP address — beyond, a new connection is closed at once and
//! logged, and everyone connected is still served.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use mooncake_wire::limits;

use mooncake_wire::zmtp::server::{Event, FramingError, ServerFramer};
use mooncake_wire::zmtp::{self, FLAG_MORE};

use crate::admission::{Occupancy, Slot};
use crate::lock;

/// Handles one message (`[routing_id, frames...]`) on the router's thread and returns the messages to send
/// in answer, each `[routing_id, frames...]`.
pub type RouterHandler = Box<dyn FnMut(Vec<Vec<u8>>) -> Vec<Vec<Vec<u8>>> + Send>;

/// Why a router could not start.
#[derive(Debug)]
pub enum RouterError {
    /// Not a `tcp://host:port` endpoint (`*` for any host or a free port).
    Endpoint(String),
    /// Binding or starting the thread failed.
    Io {
        /// The step that failed (`bind tcp://...`, `poll`, ...).
        what: String,
        /// The operating system's error.
        source: io::Error,
    },
}

impl std::fmt::Display for RouterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouterError::Endpoint(e) => write!(f, "endpoint {e}: not tcp://HOST:PORT (HOST or PORT may be *)"),
            RouterError::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for RouterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RouterError::Endpoint(_) => None,
            RouterError::Io { source, .. } => Some(source),
        }
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> RouterError {
    let what = what.into();
    move |source| RouterError::Io { what, source }
}

/// The router's resource budget. [`RouterLimits::default`] is the one documented in `mooncake_wire::limits`
/// and RELIABILITY.md; tests scale it down.
#[derive(Clone, Copy, Debug)]
pub struct RouterLimits {
    /// How long a new connection has to send its greeting and READY.
    pub handshake: Duration,
    /// How long a message may stay incomplete (a frame or frames with MORE received, the rest not).
    pub stall: Duration,
    /// Connections open at once, in all.
    pub max_connections: usize,
    /// Connections open at once from one IP address.
    pub max_per_host: usize,
    /// Bytes held for all connections together: input not yet a whole message, and output not yet written. A
    /// connection whose input or output takes the sum over it is closed.
    pub max_buffered: usize,
}

impl Default for RouterLimits {
    fn default() -> Self {
        RouterLimits {
            handshake: Duration::from_secs(limits::HANDSHAKE_TIMEOUT_SECS),
            stall: Duration::from_secs(limits::STALLED_MESSAGE_TIMEOUT_SECS),
            max_connections: limits::MAX_SERVER_CONNECTIONS,
            max_per_host: limits::MAX_SERVER_CONNECTIONS_PER_HOST,
            max_buffered: limits::MAX_SERVER_BUFFERED_BYTES,
        }
    }
}

/// A bound ROUTER and its thread; dropping it closes every connection.
pub struct Router {
    endpoint: String,
    /// The routing ids of the peers connected now (kept by the router's thread).
    connected: Arc<Mutex<std::collections::HashSet<Vec<u8>>>>,
    outbox: Arc<Mutex<Vec<Vec<Vec<u8>>>>>,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
}

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONN: usize = 2;

/// The address a `tcp://` endpoint names, as libzmq reads it for a bind (`*` = any address, any port).
fn parse_endpoint(endpoint: &str) -> Result<SocketAddr, RouterError> {
    let bad = || RouterError::Endpoint(endpoint.to_string());
    let rest = endpoint.strip_prefix("tcp://").ok_or_else(bad)?;
    let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = if port == "*" { 0 } else { port.parse().map_err(|_| bad())? };
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let host = if host == "*" { "0.0.0.0" } else { host };
    (host, port).to_socket_addrs().map_err(|_| bad())?.next().ok_or_else(bad)
}

fn endpoint_of(addr: SocketAddr) -> String {
    format!("tcp://{addr}")
}

impl Router {
    /// Binds `endpoint` (`tcp://127.0.0.1:*` picks a free port, as vLLM's `bind_to_random_port`) and serves it
    /// on a new thread, every message going to `handler`.
    pub fn bind(endpoint: &str, handler: RouterHandler) -> Result<Router, RouterError> {
        Router::bind_with(endpoint, handler, RouterLimits::default())
    }

    /// [`Router::bind`] with a resource budget of its own.
    pub fn bind_with(endpoint: &str, handler: RouterHandler, budget: RouterLimits) -> Result<Router, RouterError> {
        let addr = parse_endpoint(endpoint)?;
        let mut listener = TcpListener::bind(addr).map_err(io_err(format!("bind {endpoint}")))?;
        let bound = listener.local_addr().map_err(io_err("local address"))?;
        let poll = Poll::new().map_err(io_err("poll"))?;
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE).map_err(io_err("register"))?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(io_err("waker"))?);
        let (outbox, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let connected = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let mut server = Server {
            poll,
            listener,
            handler,
            outbox: outbox.clone(),
            stop: stop.clone(),
            conns: HashMap::new(),
            routes: HashMap::new(),
            next_token: FIRST_CONN,
            next_id: first_routing_id(),
            dirty: vec![],
            backlog: vec![],
            budget,
            occupancy: Occupancy::shared(),
            buffered: 0,
            connected: connected.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("mooncake-router".into())
            .spawn(move || server.run())
            .map_err(io_err("start the router thread"))?;
        Ok(Router { endpoint: endpoint_of(bound), connected, outbox, stop, waker, thread: Some(thread) })
    }

    /// The bound endpoint, `tcp://IP:PORT` (libzmq's ZMQ_LAST_ENDPOINT).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Whether a peer is connected under this routing id now (a message to it may still find it gone: libzmq's
    /// ROUTER_MANDATORY answers the same question at send time).
    pub fn is_connected(&self, id: &[u8]) -> bool {
        lock(&self.connected).contains(id)
    }

    /// Sends these messages (each `[routing_id, frames...]`) with one wake-up of the thread.
    pub fn send_batch(&self, messages: Vec<Vec<Vec<u8>>>) {
        if messages.is_empty() {
            return;
        }
        lock(&self.outbox).extend(messages);
        let _ = self.waker.wake();
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// libzmq starts its generated routing ids at a random number.
fn first_routing_id() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.finish() as u32
}

// ---- connections ---------------------------------------------------------------------------------------

/// Bytes queued for one peer beyond which further messages to it are dropped, as a libzmq ROUTER drops at its
/// send high-water mark.
const MAX_QUEUED_BYTES: usize = 64 * 1024 * 1024;
/// Bytes read from one connection per wake-up before the others get their turn.
const READ_BUDGET: usize = 1024 * 1024;

/// Why a connection is closed.
#[derive(Debug)]
enum ConnError {
    Framing(FramingError),
    DuplicateIdentity,
    HandshakeTimeout(Duration),
    Stalled(Duration),
    OverBuffered(usize),
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnError::Framing(e) => write!(f, "{e}"),
            ConnError::DuplicateIdentity => write!(f, "another peer already uses this identity"),
            ConnError::HandshakeTimeout(d) => write!(f, "no greeting and READY within {d:?}"),
            ConnError::Stalled(d) => write!(f, "a message begun and not finished within {d:?}"),
            ConnError::OverBuffered(n) => {
                write!(f, "its input and output took the bytes held for all connections over {n} (limits)")
            }
        }
    }
}

struct Conn {
    stream: TcpStream,
    peer: Option<SocketAddr>,
    /// The ZMTP framing of its input (sans-IO).
    framer: ServerFramer,
    /// Its routing id, once its handshake is accepted.
    id: Option<Vec<u8>>,
    /// Bytes to write from `wpos` on.
    wbuf: Vec<u8>,
    wpos: usize,
    /// When the connection was accepted (the handshake's deadline runs from here).
    since: Instant,
    /// Since when part of a message has been waiting for the rest (`None`: nothing partial).
    partial_since: Option<Instant>,
    /// What [`Conn::buffered`] was when the server last added it to its total.
    accounted: usize,
    /// Its place in the server's connection budget, given back when the connection is dropped.
    _slot: Slot,
}

impl Conn {
    fn queue(&mut self, message: &[Vec<u8>]) {
        if self.wbuf.len() - self.wpos > MAX_QUEUED_BYTES {
            return;
        }
        for (i, f) in message.iter().enumerate() {
            zmtp::put_frame(&mut self.wbuf, if i + 1 < message.len() { FLAG_MORE } else { 0 }, f);
        }
    }

    /// Writes what is queued; `Ok(false)`: the peer is gone.
    fn flush(&mut self) -> io::Result<bool> {
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Ok(false),
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
        }
        Ok(true)
    }

    /// Reads what is there, up to the budget; `Ok((open, more))`: whether the peer is still there and whether
    /// there may be more to read. A read that fills less than `scratch` took all there was: data that arrives
    /// later raises a new edge (Linux calls the epoll callback on every arrival), so the read that would only
    /// say "would block" is saved — one system call of three on a round trip.
    fn fill(&mut self, scratch: &mut [u8]) -> io::Result<(bool, bool)> {
        let mut taken = 0;
        while taken < READ_BUDGET {
            match self.stream.read(scratch) {
                Ok(0) => return Ok((false, false)),
                Ok(n) => {
                    self.framer.feed(&scratch[..n]);
                    taken += n;
                    if n < scratch.len() {
                        return Ok((true, false));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((true, false)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok((true, true))
    }

    /// Bytes held for this connection: input not parsed or not yet a whole message, output not yet written.
    fn buffered(&self) -> usize {
        self.framer.buffered() + (self.wbuf.len() - self.wpos)
    }

    /// Why the connection is over its time budget at `now`, if it is.
    fn overdue(&self, now: Instant, budget: &RouterLimits) -> Option<ConnError> {
        if self.framer.is_open() {
            let since = self.partial_since?;
            (now.duration_since(since) > budget.stall).then_some(ConnError::Stalled(budget.stall))
        } else {
            (now.duration_since(self.since) > budget.handshake).then_some(ConnError::HandshakeTimeout(budget.handshake))
        }
    }

    /// Notes whether part of a message is waiting for the rest, and since when.
    fn note_partial(&mut self, now: Instant) {
        if self.framer.buffered() == 0 {
            self.partial_since = None;
        } else if self.partial_since.is_none() {
            self.partial_since = Some(now);
        }
    }
}

struct Server {
    poll: Poll,
    listener: TcpListener,
    handler: RouterHandler,
    outbox: Arc<Mutex<Vec<Vec<Vec<u8>>>>>,
    stop: Arc<AtomicBool>,
    conns: HashMap<Token, Conn>,
    routes: HashMap<Vec<u8>, Token>,
    next_token: usize,
    next_id: u32,
    /// Connections with output queued since the last flush.
    dirty: Vec<Token>,
    /// Connections that had more to read when their budget ran out.
    backlog: Vec<Token>,
    budget: RouterLimits,
    /// Open connections, in all and per peer IP address.
    occupancy: Arc<Mutex<Occupancy>>,
    /// The sum of every connection's [`Conn::buffered`], as last accounted.
    buffered: usize,
    /// The routing ids of open connections, shared with [`Router::is_connected`].
    connected: Arc<Mutex<std::collections::HashSet<Vec<u8>>>>,
}

impl Server {
    fn run(&mut self) {
        let mut events = Events::with_capacity(256);
        let mut scratch = vec![0u8; 64 * 1024];
        let mut parsed = vec![];
        let tick = (self.budget.handshake.min(self.budget.stall) / 4).max(Duration::from_millis(10));
        let mut next_sweep = Instant::now() + tick;
        loop {
            let now = Instant::now();
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + tick;
            }
            // Wake for the next sweep only while a connection could be overdue.
            let sweep_in = (!self.conns.is_empty()).then(|| next_sweep.saturating_duration_since(now));
            let timeout = if self.backlog.is_empty() { sweep_in } else { Some(Duration::ZERO) };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(error = %e, "router poll failed; the router stops");
                return;
            }
            let mut ready: Vec<(Token, bool, bool)> =
                events.iter().map(|e| (e.token(), e.is_readable() || e.is_read_closed(), e.is_writable())).collect();
            ready.extend(std::mem::take(&mut self.backlog).into_iter().map(|t| (t, true, false)));
            for (token, readable, writable) in ready {
                match token {
                    LISTENER => self.accept(),
                    WAKER => {
                        if self.stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let batch = std::mem::take(&mut *lock(&self.outbox));
                        for m in batch {
                            self.route(&m);
                        }
                    }
                    t => {
                        if writable {
                            self.dirty.push(t);
                        }
                        if readable {
                            self.read(t, &mut scratch, &mut parsed);
                        }
                        // Answer now, not after the other connections of this wake-up: the decoder gets its
                        // reply while the rest are served.
                        self.flush_dirty();
                    }
                }
            }
            self.flush_dirty();
        }
    }

    /// Brings the server's total of buffered bytes up to date with this connection's; a connection that takes it
    /// over the budget is closed. `false`: it was closed.
    fn account(&mut self, token: Token) -> bool {
        let Some(conn) = self.conns.get_mut(&token) else { return false };
        let now = conn.buffered();
        self.buffered = self.buffered - conn.accounted + now;
        conn.accounted = now;
        if self.buffered <= self.budget.max_buffered {
            return true;
        }
        let e = ConnError::OverBuffered(self.budget.max_buffered);
        tracing::warn!(peer = ?conn.peer, error = %e, "router: connection closed");
        self.close(token);
        false
    }

    /// Closes the connections over their time budget.
    fn sweep(&mut self, now: Instant) {
        let overdue: Vec<(Token, ConnError)> =
            self.conns.iter().filter_map(|(t, c)| c.overdue(now, &self.budget).map(|e| (*t, e))).collect();
        for (token, e) in overdue {
            let peer = self.conns.get(&token).and_then(|c| c.peer);
            tracing::warn!(?peer, error = %e, "router: connection closed");
            self.close(token);
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    let (all, per_host) = (self.budget.max_connections, self.budget.max_per_host);
                    let slot = match Slot::take(&self.occupancy, peer.ip(), all, per_host) {
                        Ok(slot) => slot,
                        Err(why) => {
                            tracing::warn!(%peer, why, "router: connection refused");
                            continue;
                        }
                    };
                    let _ = stream.set_nodelay(true);
                    let token = Token(self.next_token);
                    self.next_token += 1;
                    if let Err(e) =
                        self.poll.registry().register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
                    {
                        tracing::warn!(error = %e, "router: could not register a connection");
                        continue;
                    }
                    let mut framer = ServerFramer::new();
                    let conn = Conn {
                        stream,
                        peer: Some(peer),
                        wbuf: framer.take_output(),
                        framer,
                        id: None,
                        wpos: 0,
                        since: Instant::now(),
                        partial_since: None,
                        accounted: 0,
                        _slot: slot,
                    };
                    self.conns.insert(token, conn);
                    self.dirty.push(token);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors, say: the connection waits in the backlog until one is closed.
                    tracing::warn!(error = %e, "router: accept failed");
                    return;
                }
            }
        }
    }

    fn read(&mut self, token: Token, scratch: &mut [u8], parsed: &mut Vec<Event>) {
        let Some(conn) = self.conns.get_mut(&token) else { return };
        // A read error closes the connection like an end of stream: (false, false).
        let (open, more) = conn.fill(scratch).unwrap_or_default();
        loop {
            let Some(conn) = self.conns.get_mut(&token) else { return };
            let peer = conn.peer;
            let polled = conn.framer.poll(parsed);
            conn.wbuf.extend(conn.framer.take_output());
            if let Err(e) = polled {
                tracing::warn!(?peer, error = %ConnError::Framing(e), "router: connection closed");
                return self.close(token);
            }
            conn.note_partial(Instant::now());
            if parsed.is_empty() {
                break;
            }
            let mut again = false;
            for p in parsed.drain(..) {
                match p {
                    Event::Ready(identity) => {
                        let id = match identity {
                            Some(id) if self.routes.contains_key(&id) => {
                                let e = ConnError::DuplicateIdentity;
                                tracing::warn!(?peer, error = %e, "router: connection closed");
                                return self.close(token);
                            }
                            Some(id) => id,
                            None => {
                                self.next_id = self.next_id.wrapping_add(1);
                                let mut id = vec![0];
                                id.extend(self.next_id.to_be_bytes());
                                id
                            }
                        };
                        let conn = self.conns.get_mut(&token).expect("present");
                        conn.framer.open();
                        conn.id = Some(id.clone());
                        lock(&self.connected).insert(id.clone());
                        self.routes.insert(id, token);
                        // The rest of the input is parsed now that the routing id is known.
                        again = true;
                    }
                    Event::Message(frames) => {
                        let Some(id) = self.conns.get(&token).and_then(|c| c.id.clone()) else { continue };
                        let mut message = Vec::with_capacity(frames.len() + 1);
                        message.push(id);
                        message.extend(frames);
                        for reply in (self.handler)(message) {
                            self.route(&reply);
                        }
                    }
                }
            }
            self.dirty.push(token);
            if !again {
                break;
            }
        }
        if !self.account(token) {
            return;
        }
        if !open {
            // Send what is queued for it first (a peer may shut its side down and still read).
            if let Some(c) = self.conns.get_mut(&token) {
                let _ = c.flush();
            }
            return self.close(token);
        }
        if more {
            self.backlog.push(token);
        }
    }

    /// Queues `[routing_id, frames...]` for its peer; an unknown routing id is dropped.
    fn route(&mut self, message: &[Vec<u8>]) {
        let Some((id, frames)) = message.split_first() else { return };
        let Some(&token) = self.routes.get(id) else { return };
        if let Some(conn) = self.conns.get_mut(&token) {
            conn.queue(frames);
            self.dirty.push(token);
            self.account(token);
        }
    }

    fn flush_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for token in dirty.drain(..) {
            let Some(conn) = self.conns.get_mut(&token) else { continue };
            match conn.flush() {
                Ok(true) => {
                    self.account(token);
                }
                Ok(false) => self.close(token),
                Err(e) => {
                    tracing::debug!(peer = ?conn.peer, error = %e, "router: write failed");
                    self.close(token);
                }
            }
        }
        self.dirty = dirty;
    }

    fn close(&mut self, token: Token) {
        if let Some(mut conn) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            self.buffered -= conn.accounted;
            if let Some(id) = conn.id {
                if self.routes.get(&id) == Some(&token) {
                    lock(&self.connected).remove(&id);
                    self.routes.remove(&id);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(parse_endpoint("tcp://127.0.0.1:*").unwrap(), "127.0.0.1:0".parse().unwrap());
        assert_eq!(parse_endpoint("tcp://*:5555").unwrap(), "0.0.0.0:5555".parse().unwrap());
        assert_eq!(parse_endpoint("tcp://[::1]:7").unwrap(), "[::1]:7".parse().unwrap());
        for bad in ["ipc:///tmp/x", "tcp://127.0.0.1", "tcp://127.0.0.1:x", "127.0.0.1:5"] {
            assert!(matches!(parse_endpoint(bad), Err(RouterError::Endpoint(_))), "{bad}");
        }
    }
}
