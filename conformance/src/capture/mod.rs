//! A trace as a packet capture (`mooncake-conformance pcap`): the recorded ZeroMQ messages on TCP connections
//! carrying ZMTP 3.1 (greeting, NULL handshake, READY with the socket types, then the frames as they cross the
//! wire), and the bootstrap HTTP exchanges, all on 127.0.0.1, written as pcapng ([`pcapng`]).
//!
//! What goes on the wire: every **send** event of the trace, once (a receive is the other end of a send). Each
//! DEALER or REQ socket is one connection (its `socket_id`, else its conn and endpoint; a new one when the
//! ROUTER saw its routing id change, a reconnection), to the ROUTER's port of its endpoint. A ROUTER's reply goes
//! to the connection its routing id came in on: the ROUTER's receive of a payload is paired with the first
//! unpaired send of the same bytes to that endpoint. A routing id with no such send (a recording of the
//! prefiller side only) gets a connection of its own. Frames as libzmq writes them: a
//! ROUTER's routing-id frame is not on the wire; a REQ's message and its answer carry the empty delimiter frame.
//! A reply the trace says was sent is written even when its receiver had gone (the recording cannot tell whether
//! libzmq still wrote it). Each HTTP request and its response (paired in order by method and path) is one
//! connection to the bootstrap server's default port from `spec/` (8998); headers are not recorded, so minimal
//! ones are written (`content-type: application/json`, `content-length`).
//!
//! Times: the header's `recorded_at_unix` plus each event's `t` (the sequence number in milliseconds where the
//! recording has no `t`), kept increasing.

pub mod pcapng;

use std::collections::{BTreeMap, HashMap, VecDeque};

use mooncake_wire::zmtp;

use mooncake_trace::trace::{Event, HttpDir, HttpEvent, Trace, ZmqDir, ZmqEvent};
use pcapng::{flags, End, Pcapng, Segment, MAX_SEGMENT};

/// The bootstrap server's port in a capture: `spec/`'s default (`bootstrap.default_port`).
pub const BOOTSTRAP_PORT: u16 = 8998;
/// Loopback.
const LOCALHOST: [u8; 4] = [127, 0, 0, 1];
/// The first client port handed out (ports a ROUTER of the trace uses are skipped).
const FIRST_CLIENT_PORT: u16 = 50_000;

/// Why a trace cannot be written as a capture; each text names the trace and the line.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// An endpoint is not `tcp://host:port`.
    #[error("{path}:{line}: endpoint {endpoint:?} is not tcp://host:port")]
    Endpoint {
        /// The trace.
        path: String,
        /// The event's line.
        line: usize,
        /// The endpoint.
        endpoint: String,
    },
    /// A ROUTER event without its routing-id frame, or a message without frames.
    #[error("{path}:{line}: a {socket} message with {frames} frames")]
    Frames {
        /// The trace.
        path: String,
        /// The event's line.
        line: usize,
        /// The socket type.
        socket: String,
        /// How many frames it has.
        frames: usize,
    },
    /// More connections than there are client ports.
    #[error("{path}: more than {} connections", u16::MAX - FIRST_CLIENT_PORT)]
    TooManyConnections {
        /// The trace.
        path: String,
    },
}

/// What a capture holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// TCP connections carrying ZMTP.
    pub zmq_connections: usize,
    /// ZeroMQ messages on them (send events of the trace).
    pub zmq_messages: usize,
    /// Of those, the ones whose last frame the trace decoded as MessagePack (`decoded`).
    pub zmq_decoded: usize,
    /// HTTP requests (one connection each).
    pub http_requests: usize,
    /// HTTP responses.
    pub http_responses: usize,
    /// Packets written.
    pub packets: usize,
    /// The frame number of its first packet in the file (1-based); its packets follow one another.
    pub first_packet: usize,
}

/// The capture of `trace`: the pcapng bytes and what they hold.
pub fn capture(trace: &Trace) -> Result<(Vec<u8>, Summary), CaptureError> {
    let (bytes, mut sums) = capture_all(std::slice::from_ref(trace))?;
    Ok((bytes, sums.remove(0)))
}

/// One capture of several traces, one after the other (each starts a second after the last packet of the one
/// before; client ports are never reused, so no two connections share their addresses): the pcapng bytes and
/// what each trace's part holds, with its packets' frame numbers.
pub fn capture_all(traces: &[Trace]) -> Result<(Vec<u8>, Vec<Summary>), CaptureError> {
    let mut router_ports = vec![BOOTSTRAP_PORT];
    for t in traces {
        for z in t.zmq() {
            router_ports.push(endpoint_port(t, z)?);
        }
    }
    let mut shared =
        Shared { pcap: Pcapng::new(), last_micros: 0, next_port: FIRST_CLIENT_PORT, router_ports, packets: 0 };
    let mut sums = vec![];
    for t in traces {
        let first = shared.packets + 1;
        let mut w = Writer::new(t, &mut shared);
        let links = router_links(t)?;
        let mut pending: HashMap<(String, String), VecDeque<usize>> = HashMap::new();
        for e in &t.events {
            match e {
                Event::Zmq(z) if z.dir == ZmqDir::Send => w.zmq_send(z, &links)?,
                Event::Zmq(_) => {}
                Event::Http(h) => w.http(h, &mut pending)?,
            }
        }
        w.close_all();
        let mut sum = w.summary;
        sum.packets = shared.packets + 1 - first;
        sum.first_packet = first;
        sums.push(sum);
    }
    Ok((shared.pcap.into_bytes(), sums))
}

/// How the ROUTERs' routing ids and the client sockets' sends correspond.
#[derive(Default)]
struct Links {
    /// The client socket behind each (endpoint, routing id).
    by_id: HashMap<(String, Vec<u8>), ClientKey>,
    /// The routing id each client send arrived with (by the send's seq).
    id_of_send: HashMap<u64, Vec<u8>>,
}

/// Every receive of a ROUTER paired with the first unpaired send of the same bytes to that endpoint before it.
fn router_links(trace: &Trace) -> Result<Links, CaptureError> {
    let mut sends: Vec<(&ZmqEvent, bool)> =
        trace.zmq().filter(|z| !z.bound && z.dir == ZmqDir::Send).map(|z| (z, false)).collect();
    let mut links = Links::default();
    for r in trace.zmq().filter(|z| z.bound && z.dir == ZmqDir::Recv) {
        let id = routing_id(trace, r)?;
        let found = sends.iter_mut().find(|(s, used)| {
            !*used && s.seq < r.seq && s.endpoint == r.endpoint && s.frames.last() == r.frames.last()
        });
        if let Some((s, used)) = found {
            *used = true;
            links.id_of_send.insert(s.seq, id.clone());
            links.by_id.entry((r.endpoint.clone(), id)).or_insert_with(|| client_key(s));
        }
    }
    Ok(links)
}

/// A ROUTER event's routing id (frame 0).
fn routing_id(trace: &Trace, z: &ZmqEvent) -> Result<Vec<u8>, CaptureError> {
    match z.frames.first() {
        Some(id) if z.frames.len() >= 2 => Ok(id.clone()),
        _ => Err(CaptureError::Frames {
            path: trace.path.clone(),
            line: z.line,
            socket: z.socket.clone(),
            frames: z.frames.len(),
        }),
    }
}

/// A client socket: its `socket_id`, else its conn and endpoint; or a routing id seen only at the ROUTER.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum ClientKey {
    Socket(u64),
    Conn(String, String),
    Routed(String, Vec<u8>),
}

/// A connection: its client socket, and the routing id the ROUTER gave it where the trace shows it.
type ConnKey = (ClientKey, Option<Vec<u8>>);

fn client_key(z: &ZmqEvent) -> ClientKey {
    match z.socket_id {
        Some(id) => ClientKey::Socket(id),
        None => ClientKey::Conn(z.conn.clone(), z.endpoint.clone()),
    }
}

/// One TCP connection: its ends and the next sequence number of each direction.
struct Conn {
    client: End,
    server: End,
    client_seq: u32,
    server_seq: u32,
    open: bool,
}

/// What the traces of one capture share: the file, its clock and the ports handed out.
struct Shared {
    pcap: Pcapng,
    last_micros: u64,
    next_port: u16,
    router_ports: Vec<u16>,
    packets: usize,
}

/// One trace's part of the capture being written.
struct Writer<'t, 's> {
    trace: &'t Trace,
    s: &'s mut Shared,
    base_micros: u64,
    zmq: BTreeMap<ConnKey, Conn>,
    last_id: HashMap<ClientKey, Vec<u8>>,
    http: Vec<Conn>,
    summary: Summary,
}

impl<'t, 's> Writer<'t, 's> {
    /// Its clock starts at the header's `recorded_at_unix`, and a second after what the capture holds already.
    fn new(trace: &'t Trace, s: &'s mut Shared) -> Writer<'t, 's> {
        let recorded = trace.header.recorded_at_unix.unwrap_or(0).max(0) as u64 * 1_000_000 + 60_000_000;
        let after = if s.last_micros == 0 { 0 } else { s.last_micros + 1_000_000 + 60_000_000 };
        Writer {
            trace,
            base_micros: recorded.max(after),
            s,
            zmq: BTreeMap::new(),
            last_id: HashMap::new(),
            http: vec![],
            summary: Summary::default(),
        }
    }

    /// The time of an event: the start plus its `t` (or its seq in milliseconds), after the previous packet.
    fn clock(&mut self, seq: u64, t: Option<f64>) -> u64 {
        let offset = match t {
            Some(t) => (t * 1e6) as i64,
            None => seq as i64 * 1000,
        };
        let at = (self.base_micros as i64 + offset).max(0) as u64;
        self.s.last_micros = at.max(self.s.last_micros + 1);
        self.s.last_micros
    }

    fn client_port(&mut self) -> Result<u16, CaptureError> {
        while self.s.router_ports.contains(&self.s.next_port) {
            self.s.next_port = self
                .s
                .next_port
                .checked_add(1)
                .ok_or_else(|| CaptureError::TooManyConnections { path: self.trace.path.clone() })?;
        }
        let p = self.s.next_port;
        self.s.next_port = self
            .s
            .next_port
            .checked_add(1)
            .ok_or_else(|| CaptureError::TooManyConnections { path: self.trace.path.clone() })?;
        Ok(p)
    }

    /// Writes one segment; `from_client` says the direction.
    fn put(&mut self, at: u64, c: &mut Conn, from_client: bool, fl: u8, payload: &[u8]) {
        let (src, dst, seq, ack) = if from_client {
            (c.client, c.server, c.client_seq, c.server_seq)
        } else {
            (c.server, c.client, c.server_seq, c.client_seq)
        };
        self.s.pcap.segment(at, &Segment { src, dst, seq, ack, flags: fl, payload });
        self.s.packets += 1;
        let used = payload.len() as u32 + u32::from(fl & (flags::SYN | flags::FIN) != 0);
        if from_client {
            c.client_seq = c.client_seq.wrapping_add(used);
        } else {
            c.server_seq = c.server_seq.wrapping_add(used);
        }
    }

    /// Writes `data` in segments of at most [`MAX_SEGMENT`] bytes.
    fn send(&mut self, at: u64, c: &mut Conn, from_client: bool, data: &[u8]) {
        for chunk in data.chunks(MAX_SEGMENT) {
            self.put(at, c, from_client, flags::ACK | flags::PSH, chunk);
        }
    }

    /// A new connection to `server_port`: the handshake.
    fn open(&mut self, at: u64, server_port: u16) -> Result<Conn, CaptureError> {
        let client = End { ip: LOCALHOST, port: self.client_port()? };
        let server = End { ip: LOCALHOST, port: server_port };
        let n = self.zmq.len() + self.http.len();
        let mut c = Conn { client, server, client_seq: 1000 + n as u32 * 7919, server_seq: 5000, open: true };
        self.put(at, &mut c, true, flags::SYN, b"");
        self.put(at, &mut c, false, flags::SYN | flags::ACK, b"");
        self.put(at, &mut c, true, flags::ACK, b"");
        Ok(c)
    }

    /// A ZeroMQ connection from a `client_type` socket to a ROUTER: the TCP and ZMTP handshakes.
    fn open_zmq(&mut self, at: u64, port: u16, client_type: &str) -> Result<Conn, CaptureError> {
        let mut c = self.open(at, port)?;
        let g = zmtp::greeting();
        self.send(at, &mut c, true, &g);
        self.send(at, &mut c, false, &g);
        self.send(at, &mut c, true, &zmtp::ready(client_type, &[("Identity", b"")]));
        self.send(at, &mut c, false, &zmtp::ready("ROUTER", &[("Identity", b"")]));
        self.summary.zmq_connections += 1;
        Ok(c)
    }

    /// The connection a send goes on: its client socket and the routing id the ROUTER knows it by (a socket
    /// whose routing id changes reconnected: a new connection, as h1's resend on a new DEALER).
    fn conn_key(&mut self, z: &ZmqEvent, links: &Links) -> Result<ConnKey, CaptureError> {
        if z.bound {
            let id = routing_id(self.trace, z)?;
            let ck = links.by_id.get(&(z.endpoint.clone(), id.clone())).cloned();
            return Ok((ck.unwrap_or_else(|| ClientKey::Routed(z.endpoint.clone(), id.clone())), Some(id)));
        }
        let ck = client_key(z);
        let id = links.id_of_send.get(&z.seq).or_else(|| self.last_id.get(&ck)).cloned();
        if let Some(id) = &id {
            self.last_id.insert(ck.clone(), id.clone());
        }
        Ok((ck, id))
    }

    fn zmq_send(&mut self, z: &ZmqEvent, links: &Links) -> Result<(), CaptureError> {
        let at = self.clock(z.seq, z.t);
        let port = endpoint_port(self.trace, z)?;
        let key = self.conn_key(z, links)?;
        let (from_client, wire) = if z.bound {
            (false, z.frames[1..].to_vec())
        } else if z.socket == "REQ" {
            (true, [vec![vec![]], z.frames.clone()].concat())
        } else {
            (true, z.frames.clone())
        };
        if wire.is_empty() {
            return Err(CaptureError::Frames {
                path: self.trace.path.clone(),
                line: z.line,
                socket: z.socket.clone(),
                frames: z.frames.len(),
            });
        }
        let mut c = match self.zmq.remove(&key) {
            Some(c) => c,
            None => {
                let client_type = if z.bound { self.client_type_of(&key.0) } else { z.socket.clone() };
                self.open_zmq(at, port, &client_type)?
            }
        };
        let mut bytes = vec![];
        for (i, f) in wire.iter().enumerate() {
            zmtp::put_frame(&mut bytes, if i + 1 < wire.len() { zmtp::FLAG_MORE } else { 0 }, f);
        }
        self.send(at, &mut c, from_client, &bytes);
        self.zmq.insert(key, c);
        self.summary.zmq_messages += 1;
        self.summary.zmq_decoded += usize::from(z.decoded.is_some());
        Ok(())
    }

    /// The socket type of the client behind a key a ROUTER sends to: the type its sends name (REQ for a
    /// generation-1 trace's ROUTER that saw an empty delimiter).
    fn client_type_of(&self, key: &ClientKey) -> String {
        let of = |z: &&ZmqEvent| !z.bound && client_key(z) == *key;
        match self.trace.zmq().find(of) {
            Some(z) => z.socket.clone(),
            None if self.trace.header.generation() == 1 => "REQ".into(),
            None => "DEALER".into(),
        }
    }

    fn http(
        &mut self,
        h: &HttpEvent,
        pending: &mut HashMap<(String, String), VecDeque<usize>>,
    ) -> Result<(), CaptureError> {
        let at = self.clock(h.seq, h.t);
        let key = (h.method.clone(), h.path.clone());
        match h.dir {
            HttpDir::Request => {
                let mut c = self.open(at, BOOTSTRAP_PORT)?;
                let mut text = format!("{} {} HTTP/1.1\r\nhost: 127.0.0.1:{BOOTSTRAP_PORT}\r\n", h.method, h.path);
                if !h.body_raw.is_empty() {
                    text += &format!("content-type: application/json\r\ncontent-length: {}\r\n", h.body_raw.len());
                }
                text += "\r\n";
                text += &h.body_raw;
                self.send(at, &mut c, true, text.as_bytes());
                self.http.push(c);
                pending.entry(key).or_default().push_back(self.http.len() - 1);
                self.summary.http_requests += 1;
            }
            HttpDir::Response => {
                let status = h.status.unwrap_or(200);
                let text = format!(
                    "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{}",
                    reason(status),
                    h.body_raw.len(),
                    h.body_raw
                );
                let mut c = match pending.get_mut(&key).and_then(VecDeque::pop_front) {
                    Some(i) => std::mem::replace(&mut self.http[i], closed()),
                    None => self.open(at, BOOTSTRAP_PORT)?,
                };
                self.send(at, &mut c, false, text.as_bytes());
                self.fin(at, &mut c);
                self.summary.http_responses += 1;
            }
        }
        Ok(())
    }

    /// Both sides close: FIN, FIN, ACK.
    fn fin(&mut self, at: u64, c: &mut Conn) {
        if !c.open {
            return;
        }
        self.put(at, c, true, flags::FIN | flags::ACK, b"");
        self.put(at, c, false, flags::FIN | flags::ACK, b"");
        self.put(at, c, true, flags::ACK, b"");
        c.open = false;
    }

    fn close_all(&mut self) {
        let at = self.s.last_micros + 1000;
        for mut c in std::mem::take(&mut self.zmq).into_values() {
            self.fin(at, &mut c);
        }
        for i in 0..self.http.len() {
            let mut c = std::mem::replace(&mut self.http[i], closed());
            self.fin(at, &mut c);
        }
    }
}

/// A placeholder for a connection already closed.
fn closed() -> Conn {
    let e = End { ip: LOCALHOST, port: 0 };
    Conn { client: e, server: e, client_seq: 0, server_seq: 0, open: false }
}

/// The reason phrase of the statuses a bootstrap server sends.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        422 => "Unprocessable Entity",
        500 => "Internal Server Error",
        _ => "",
    }
}

/// The port of a `tcp://host:port` endpoint.
fn endpoint_port(trace: &Trace, z: &ZmqEvent) -> Result<u16, CaptureError> {
    let bad = || CaptureError::Endpoint { path: trace.path.clone(), line: z.line, endpoint: z.endpoint.clone() };
    let rest = z.endpoint.strip_prefix("tcp://").ok_or_else(bad)?;
    let (_, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    port.parse().map_err(|_| bad())
}
