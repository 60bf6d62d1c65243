//! The conversation of a trace: who registered where, which decoder sent what to which prefiller, and the
//! replies of each exchange ([`Exchange`], each payload decoded once, when it is built). The second layer of
//! the one-direction pipeline trace → conversation → checks → report → writers: it reads a [`Trace`] (a
//! recording, or the trace a tap wrote) and nothing above it; the checks, the players, `validate` and the
//! reports read it. A live conversation (a replay's, a tap's) is made of the same [`Exchange`]s, built by the
//! same constructors as the traffic arrives.

mod exchange;

use std::collections::BTreeMap;
use std::sync::Arc;

use mooncake_wire::proto::{Inbound, WireProfile};
use mooncake_wire::spec::{Revision, Spec};
use mooncake_wire::typed::{MooncakeLeaseHeartbeat, MooncakeXferMetadata, MooncakeXferResponse};
use serde_json::Value as J;

use crate::trace::{Event, HttpDir, HttpEvent, Role, Trace, ZmqDir, ZmqEvent};
pub use exchange::decode_count;

/// The trace's HTTP events as (request, its response when one came).
fn pair_http(trace: &Trace) -> Vec<(HttpEvent, Option<HttpEvent>)> {
    let mut http = vec![];
    let mut pending: Option<HttpEvent> = None;
    for h in trace.http() {
        match h.dir {
            HttpDir::Request => {
                if let Some(p) = pending.take() {
                    http.push((p, None));
                }
                pending = Some(h.clone());
            }
            HttpDir::Response => http.push((pending.take().unwrap_or_else(|| h.clone()), Some(h.clone()))),
        }
    }
    if let Some(p) = pending {
        http.push((p, None));
    }
    http
}

/// Prefillers: conns with the prefiller role, their endpoint, and their /register body (by address). A
/// recording with no ZeroMQ traffic names no endpoints: the remaining workers are paired with the remaining
/// registrations in order (the recorder starts them in that order).
fn prefillers_of(trace: &Trace, http: &[(HttpEvent, Option<HttpEvent>)]) -> Vec<PrefillerConn> {
    let registers: Vec<&J> = http
        .iter()
        .filter(|(r, _)| r.method == "POST" && r.path == "/register")
        .filter_map(|(r, _)| r.body.as_ref())
        .collect();
    let mut prefillers = vec![];
    for (conn, _) in trace.header.roles.iter().filter(|(_, role)| **role == Role::Prefiller) {
        let endpoint = trace.header.conn_endpoints.get(conn).and_then(|e| e.first()).cloned().unwrap_or_default();
        let reg = registers.iter().find(|b| b.get("addr").and_then(J::as_str) == Some(endpoint.as_str()));
        let mut p = PrefillerConn { conn: conn.clone(), endpoint, tp_size: 1, ..PrefillerConn::default() };
        if let Some(reg) = reg {
            p.registered(reg);
        }
        prefillers.push(p);
    }
    let spare: Vec<&J> =
        registers.iter().copied().filter(|b| !prefillers.iter().any(|p| p.register.as_ref() == Some(*b))).collect();
    let mut spare = spare.into_iter();
    for p in prefillers.iter_mut().filter(|p| p.register.is_none() && p.endpoint.is_empty()) {
        let Some(reg) = spare.next() else { break };
        p.endpoint = reg.get("addr").and_then(J::as_str).unwrap_or("").to_string();
        p.registered(reg);
    }
    let tp_sizes: BTreeMap<String, i64> = prefillers.iter().fold(BTreeMap::new(), |mut m, p| {
        let e = m.entry(p.engine_id.clone()).or_insert(0);
        *e = (*e).max(p.tp_rank + 1);
        m
    });
    for p in &mut prefillers {
        p.tp_size = tp_sizes.get(&p.engine_id).copied().unwrap_or(1);
    }
    prefillers
}

impl PrefillerConn {
    /// What its `/register` body says: engine id and ranks.
    fn registered(&mut self, reg: &J) {
        let g = |k: &str| reg.get(k).and_then(J::as_i64).unwrap_or(0);
        self.engine_id = reg.get("engine_id").and_then(J::as_str).unwrap_or("").to_string();
        (self.dp_rank, self.tp_rank, self.pp_rank) = (g("dp_rank"), g("tp_rank"), g("pp_rank"));
        self.register = Some(reg.clone());
    }
}

/// The exchanges (and lease heartbeats) from the decoder's side, built event by event, each payload decoded
/// once, as the prefiller reads it; replies attach to the oldest unfinished one of the same conn and socket
/// (the endpoint, where the trace names no sockets).
#[derive(Default)]
struct Threads<'p> {
    profile: Option<&'p WireProfile>,
    exchanges: Vec<Exchange>,
    heartbeats: Vec<Heartbeat>,
    /// Unfinished exchanges and heartbeats, oldest first, with their (conn, socket).
    open: Vec<(Open, String, String)>,
    /// The last one sent on each (conn, socket).
    last: BTreeMap<(String, String), Open>,
}

impl Threads<'_> {
    fn key(z: &ZmqEvent) -> (String, String) {
        (z.conn.clone(), z.socket_id.map(|id| id.to_string()).unwrap_or_else(|| z.endpoint.clone()))
    }

    /// A decoder's send: a heartbeat or a pull.
    fn send(&mut self, z: &ZmqEvent, prefillers: &[PrefillerConn]) {
        let bytes = z.frames.last().cloned().unwrap_or_default();
        let (seq, line) = (Some(z.seq), Some(z.line));
        let prefiller = prefillers.iter().find(|p| p.endpoint == z.endpoint).map(|p| p.conn.clone());
        let reading = self.profile.map(|p| {
            decode_count::count(seq);
            p.read_inbound(&bytes)
        });
        let slot = match reading {
            Some(Inbound::Heartbeat(h)) => {
                self.heartbeats.push(Heartbeat {
                    index: self.heartbeats.len(),
                    decoder: z.conn.clone(),
                    endpoint: z.endpoint.clone(),
                    prefiller,
                    payload: Payload { bytes, decoded: Some(Ok(h)) },
                    replies: vec![],
                    seq,
                    line,
                    t: z.t,
                });
                Open::Beat(self.heartbeats.len() - 1)
            }
            reading => {
                let pull = match reading {
                    Some(Inbound::Pull(m)) => Some(m),
                    _ => None,
                };
                let index = self.exchanges.len();
                let sent =
                    Sent { index, decoder: z.conn.clone(), endpoint: z.endpoint.clone(), request: bytes, seq, line };
                let mut x = Exchange::decoded(sent, pull);
                x.prefiller = prefiller;
                self.exchanges.push(x);
                Open::Pull(index)
            }
        };
        let key = Self::key(z);
        self.open.push((slot, key.0.clone(), key.1.clone()));
        self.last.insert(key, slot);
    }

    /// A decoder's receive: the reply of the oldest unfinished exchange or heartbeat on its socket, or one
    /// after the terminal reply (kept with its exchange so the checks see it).
    fn recv(&mut self, z: &ZmqEvent) {
        let bytes = z.frames.last().cloned().unwrap_or_default();
        let (seq, line) = (Some(z.seq), Some(z.line));
        let key = Self::key(z);
        let profile = self.profile;
        if let Some(pos) = self.open.iter().position(|(_, c, s)| *c == key.0 && *s == key.1) {
            let ends = match self.open[pos].0 {
                Open::Pull(i) => {
                    let r = self.exchanges[i].push_reply(profile, bytes, seq, line);
                    ends_exchange(profile, &r.payload)
                }
                // A heartbeat is answered once.
                Open::Beat(i) => {
                    push_beat_reply(&mut self.heartbeats[i], profile, bytes, seq, line);
                    true
                }
            };
            if ends {
                self.open.remove(pos);
            }
            return;
        }
        match self.last.get(&key).copied() {
            Some(Open::Pull(i)) => {
                self.exchanges[i].push_reply(profile, bytes, seq, line);
            }
            Some(Open::Beat(i)) => push_beat_reply(&mut self.heartbeats[i], profile, bytes, seq, line),
            None => {}
        }
    }
}

/// Routing ids: the ROUTER recv whose payload equals the request, in order, per prefiller.
fn attach_routing_ids(trace: &Trace, exchanges: &mut [Exchange]) {
    let mut used = vec![false; exchanges.len()];
    for z in trace.zmq().filter(|z| z.side == Role::Prefiller && z.dir == ZmqDir::Recv) {
        let payload = z.frames.last();
        if let Some(i) = (0..exchanges.len()).find(|&i| {
            !used[i]
                && Some(&exchanges[i].request.bytes) == payload
                && exchanges[i].prefiller.as_deref() == Some(z.conn.as_str())
        }) {
            used[i] = true;
            exchanges[i].routing_id = z.frames.first().cloned();
        }
    }
}

/// Decoders: conns with the decoder role, each with the first request it sent that names its layout.
fn decoders_of(trace: &Trace, exchanges: &[Exchange]) -> Vec<DecoderConn> {
    trace
        .header
        .roles
        .iter()
        .filter(|(_, r)| **r == Role::Decoder)
        .map(|(conn, _)| DecoderConn {
            conn: conn.clone(),
            layout_request: exchanges
                .iter()
                .filter(|x| &x.decoder == conn)
                .filter_map(|x| x.request.value())
                .find(|m| !m.kv_caches_base_addr.is_empty())
                .cloned(),
        })
        .collect()
}

/// Where each ZeroMQ event's payload was decoded: (exchange or heartbeat, reply) by `seq`.
fn index_seqs(exchanges: &[Exchange], heartbeats: &[Heartbeat]) -> BTreeMap<u64, At> {
    let mut at_seq = BTreeMap::new();
    for (i, x) in exchanges.iter().enumerate() {
        at_seq.extend(x.seq.map(|s| (s, At::Pull(i, None))));
        at_seq.extend(x.replies.iter().enumerate().filter_map(|(j, r)| Some((r.seq?, At::Pull(i, Some(j))))));
    }
    for (i, h) in heartbeats.iter().enumerate() {
        at_seq.extend(h.seq.map(|s| (s, At::Beat(i, None))));
        at_seq.extend(h.replies.iter().enumerate().filter_map(|(j, r)| Some((r.seq?, At::Beat(i, Some(j))))));
    }
    at_seq
}

pub use exchange::{ends_exchange, Exchange, Heartbeat, Payload, Reply, Sent};

/// A prefiller worker of the trace.
#[derive(Clone, Debug, Default)]
pub struct PrefillerConn {
    /// Its connection id in the trace (`prefiller_tp0`).
    pub conn: String,
    /// Its ROUTER endpoint in the recording.
    pub endpoint: String,
    /// Its recorded `/register` body, if any.
    pub register: Option<J>,
    /// The engine id it registered under.
    pub engine_id: String,
    /// Its data-parallel rank, as registered.
    pub dp_rank: i64,
    /// Its tensor-parallel rank, as registered.
    pub tp_rank: i64,
    /// Its pipeline-parallel rank, as registered.
    pub pp_rank: i64,
    /// TP size of its engine (registered TP ranks of that engine).
    pub tp_size: i64,
}

/// A decoder worker of the trace.
#[derive(Clone, Debug)]
pub struct DecoderConn {
    /// Its connection id in the trace (`decoder0`).
    pub conn: String,
    /// Its first request that carries a layout (the layout the decoder registered).
    pub layout_request: Option<MooncakeXferMetadata>,
}

/// A trace as a conversation: its prefillers, decoders, decoder exchanges (each payload decoded once) and
/// bootstrap HTTP exchanges, with the revision (and, for generation 2, the profile) they were read with.
#[derive(Clone, Debug)]
pub struct Conversation {
    /// The trace it was read from.
    pub trace: Trace,
    /// The revision its messages were read with.
    pub revision: Arc<Revision>,
    /// The revision's wire profile (generation 2 only).
    pub profile: Option<WireProfile>,
    /// Its prefiller workers, in the order of the header's `roles`.
    pub prefillers: Vec<PrefillerConn>,
    /// Its decoder workers, in the order of the header's `roles`.
    pub decoders: Vec<DecoderConn>,
    /// Every decoder exchange, in the order the requests were sent.
    pub exchanges: Vec<Exchange>,
    /// Every lease heartbeat (0.34.0), in the order they were sent; not among `exchanges`.
    pub heartbeats: Vec<Heartbeat>,
    /// (request, response) pairs in order.
    pub http: Vec<(HttpEvent, Option<HttpEvent>)>,
    /// The exchange or heartbeat (and reply, if it is one) each decoded ZeroMQ event's payload is in, by seq.
    at_seq: BTreeMap<u64, At>,
}

/// Where a decoded payload is: the request (`None`) or a reply of a pull exchange or of a heartbeat.
#[derive(Clone, Copy, Debug)]
enum At {
    Pull(usize, Option<usize>),
    Beat(usize, Option<usize>),
}

/// An exchange or a heartbeat still waiting for replies while the conversation is built.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Open {
    Pull(usize),
    Beat(usize),
}

/// The decode of one event's payload the conversation made: a request or a reply of an exchange.
#[derive(Clone, Copy, Debug)]
pub enum Decoded<'a> {
    /// The request of an exchange.
    Request(&'a Payload<MooncakeXferMetadata>),
    /// A lease heartbeat (0.34.0).
    Heartbeat(&'a Payload<MooncakeLeaseHeartbeat>),
    /// A reply of an exchange (or of a heartbeat).
    Reply(&'a Payload<MooncakeXferResponse>),
}

/// What `ZMQ-DECODE` and `ZMQ-REENCODE` judge of a payload: the error that refused it, or its re-encoding
/// (or why it could not be re-encoded).
pub type Reading = Result<Result<Vec<u8>, EncodeFailure>, mooncake_wire::codec::DecodeError>;

/// Why a decoded payload could not be encoded again (the `ZMQ-REENCODE` check reports its text).
pub type EncodeFailure = Box<dyn std::error::Error + Send + Sync>;

impl Decoded<'_> {
    /// The payload's bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Decoded::Request(p) => &p.bytes,
            Decoded::Heartbeat(p) => &p.bytes,
            Decoded::Reply(p) => &p.bytes,
        }
    }

    /// The message the payload was decoded as (`MooncakeXferMetadata`, `MooncakeXferResponse`).
    pub fn message(&self) -> &'static str {
        match self {
            Decoded::Request(_) => "MooncakeXferMetadata",
            Decoded::Heartbeat(_) => "MooncakeLeaseHeartbeat",
            Decoded::Reply(_) => "MooncakeXferResponse",
        }
    }

    /// The decode's verdict and the re-encoding with `profile` (the profile it was decoded with); `None`
    /// when it was not decoded (no profile).
    pub fn reading(&self, profile: &WireProfile) -> Option<Reading> {
        fn of<T>(p: &Payload<T>, reencode: impl FnOnce(&T) -> Result<Vec<u8>, EncodeFailure>) -> Option<Reading> {
            match p.decoded.as_ref()? {
                Ok(v) => Some(Ok(reencode(v))),
                Err(e) => Some(Err(e.clone())),
            }
        }
        match self {
            Decoded::Request(p) => of(p, |m| profile.encode_metadata(m).map_err(Into::into)),
            Decoded::Heartbeat(p) => of(p, |h| profile.encode_heartbeat(h).map_err(Into::into)),
            Decoded::Reply(p) => of(p, |r| profile.encode_response(r).map_err(Into::into)),
        }
    }
}

/// Why a trace cannot be read as a push-family conversation.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The trace is of a family with no ZeroMQ conversation (neither push nor pull).
    #[error("a trace of the {0} family: the runner plays push- and pull-family traces only (`validate` checks it)")]
    OtherFamily(String),
    /// Its `vllm_version` (or `implementation`) names no revision of its family.
    #[error("trace header: {0}")]
    Revision(#[from] mooncake_wire::spec::ResolveError),
}

/// A heartbeat's reply, decoded (once).
fn push_beat_reply(
    h: &mut Heartbeat,
    profile: Option<&WireProfile>,
    bytes: Vec<u8>,
    seq: Option<u64>,
    line: Option<usize>,
) {
    h.replies.push(Reply { payload: Payload::reply(profile, bytes, seq), seq, line });
}

impl Conversation {
    /// The conversation of a push- or pull-family trace, read with the revision of its header (`vllm_version`,
    /// or the revision its `implementation` speaks) in its family.
    pub fn new(trace: Trace) -> Result<Conversation, ConversationError> {
        let family = trace.header.family.as_deref().unwrap_or("push");
        if family != "push" && family != "pull" {
            return Err(ConversationError::OtherFamily(family.to_string()));
        }
        let revision = crate::trace::revision_in(Spec::builtin(), family, &trace.header)?;
        Ok(Conversation::with_revision(trace, revision))
    }

    /// Whether the trace is of the pull family (vllm-ascend's pull connector: `spec/pull/`). Its exchanges are
    /// not decoded here (no wire profile): the pull players and `validate` read them with the revision's codec.
    pub fn is_pull(&self) -> bool {
        self.revision.family == "pull"
    }

    /// The conversation of a trace, read with `revision` (what its `vllm_version` resolves to).
    pub fn with_revision(trace: Trace, revision: Arc<Revision>) -> Conversation {
        let profile = WireProfile::new(
            revision.clone(),
            mooncake_wire::codec::Codec::builtin(&revision.revision).expect("built-in"),
        )
        .ok();
        let http = pair_http(&trace);
        let prefillers = prefillers_of(&trace, &http);
        let mut threads = Threads { profile: profile.as_ref(), ..Threads::default() };
        for z in trace.zmq().filter(|z| z.side == Role::Decoder) {
            match z.dir {
                ZmqDir::Send => threads.send(z, &prefillers),
                ZmqDir::Recv => threads.recv(z),
            }
        }
        let Threads { mut exchanges, heartbeats, .. } = threads;
        attach_routing_ids(&trace, &mut exchanges);
        let decoders = decoders_of(&trace, &exchanges);
        let at_seq = index_seqs(&exchanges, &heartbeats);
        Conversation { trace, revision, profile, prefillers, decoders, exchanges, heartbeats, http, at_seq }
    }

    /// The decode of the payload of ZeroMQ event `seq`, if the conversation made one (the requests and
    /// replies of its exchanges): what the per-event checks read instead of decoding the payload again.
    pub fn decoded_at(&self, seq: u64) -> Option<Decoded<'_>> {
        Some(match *self.at_seq.get(&seq)? {
            At::Pull(i, None) => Decoded::Request(&self.exchanges[i].request),
            At::Pull(i, Some(j)) => Decoded::Reply(&self.exchanges[i].replies[j].payload),
            At::Beat(i, None) => Decoded::Heartbeat(&self.heartbeats[i].payload),
            At::Beat(i, Some(j)) => Decoded::Reply(&self.heartbeats[i].replies[j].payload),
        })
    }

    /// The trace's scenario id.
    pub fn scenario(&self) -> &str {
        &self.trace.header.scenario
    }

    /// Decodes a request that is not one of the trace's own (those are decoded in [`Conversation::exchanges`]):
    /// what a live peer sent.
    pub fn decode_request(&self, b: &[u8]) -> Option<MooncakeXferMetadata> {
        let p = self.profile.as_ref()?;
        decode_count::count(None);
        p.decode_metadata(b).ok()
    }
    /// Decodes a reply that is not one of the trace's own: what a live peer sent.
    pub fn decode_reply(&self, b: &[u8]) -> Option<MooncakeXferResponse> {
        let p = self.profile.as_ref()?;
        decode_count::count(None);
        p.decode_response(b).ok()
    }

    /// ZMQ events of a conn, for checks on raw frames.
    pub fn zmq_of<'a>(&'a self, conn: &'a str) -> impl Iterator<Item = &'a ZmqEvent> {
        self.trace.zmq().filter(move |z| z.conn == conn)
    }

    /// The session (`host:port`) a decoder conn put on the wire.
    pub fn decoder_session(&self, conn: &str) -> Option<String> {
        let m = self.decoders.iter().find(|d| d.conn == conn)?.layout_request.as_ref()?;
        Some(format!("{}:{}", m.remote_hostname, m.remote_port))
    }

    /// The events in seq order (both kinds).
    pub fn events(&self) -> &[Event] {
        &self.trace.events
    }
}
