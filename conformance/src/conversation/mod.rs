//! The conversation of a trace: who registered where, which decoder sent what to which prefiller, and the
//! replies of each exchange ([`Exchange`], each payload decoded once, when it is built). The second layer of
//! the one-direction pipeline trace → conversation → checks → report → writers: it reads a [`Trace`] (a
//! recording, or the trace a tap wrote) and nothing above it; the checks, the players, `validate` and the
//! reports read it. A live conversation (a replay's, a tap's) is made of the same [`Exchange`]s, built by the
//! same constructors as the traffic arrives.

mod exchange;

use std::collections::BTreeMap;
use std::sync::Arc;

use mooncake_wire::proto::WireProfile;
use mooncake_wire::spec::{Revision, Spec};
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse};
use serde_json::Value as J;

use crate::trace::{Event, HttpDir, HttpEvent, Role, Trace, ZmqDir, ZmqEvent};
pub(crate) use exchange::decode_count;
#[cfg(test)]
pub(crate) use exchange::decodes;
pub use exchange::{ends_exchange, Exchange, Payload, Reply, Sent};

/// A prefiller worker of the trace.
#[derive(Clone, Debug)]
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
    /// (request, response) pairs in order.
    pub http: Vec<(HttpEvent, Option<HttpEvent>)>,
    /// The exchange (and reply, if it is one) each decoded ZeroMQ event's payload is in, by event seq.
    at_seq: BTreeMap<u64, (usize, Option<usize>)>,
}

/// The decode of one event's payload the conversation made: a request or a reply of an exchange.
#[derive(Clone, Copy, Debug)]
pub enum Decoded<'a> {
    /// The request of an exchange.
    Request(&'a Payload<MooncakeXferMetadata>),
    /// A reply of an exchange.
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
            Decoded::Reply(p) => &p.bytes,
        }
    }

    /// The message the payload was decoded as (`MooncakeXferMetadata`, `MooncakeXferResponse`).
    pub fn message(&self) -> &'static str {
        match self {
            Decoded::Request(_) => "MooncakeXferMetadata",
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
            Decoded::Reply(p) => of(p, |r| profile.encode_response(r).map_err(Into::into)),
        }
    }
}

/// Why a trace cannot be read as a push-family conversation.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The trace is of another family.
    #[error("a trace of the {0} family: the runner plays push-family traces only (`validate` checks it)")]
    OtherFamily(String),
    /// Its `vllm_version` names no push revision.
    #[error("vllm_version: {0}")]
    Revision(#[from] mooncake_wire::spec::ResolveError),
}

impl Conversation {
    /// The conversation of a push-family trace, read with the revision of its `vllm_version`.
    pub fn new(trace: Trace) -> Result<Conversation, ConversationError> {
        if let Some(f) = trace.header.family.as_deref().filter(|f| *f != "push") {
            return Err(ConversationError::OtherFamily(f.to_string()));
        }
        let revision = crate::trace::revision_for(Spec::builtin(), &trace.header.vllm_version)?;
        Ok(Conversation::with_revision(trace, revision))
    }

    /// The conversation of a push-family trace, read with `revision` (what its `vllm_version` resolves to).
    pub fn with_revision(trace: Trace, revision: Arc<Revision>) -> Conversation {
        let profile = WireProfile::new(
            revision.clone(),
            mooncake_wire::codec::Codec::builtin(&revision.revision).expect("built-in"),
        )
        .ok();
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
        // Prefillers: conns with the prefiller role, their endpoint, and their /register body (by address).
        let registers: Vec<&J> = http
            .iter()
            .filter(|(r, _)| r.method == "POST" && r.path == "/register")
            .filter_map(|(r, _)| r.body.as_ref())
            .collect();
        let mut prefillers = vec![];
        for (conn, role) in &trace.header.roles {
            if *role != Role::Prefiller {
                continue;
            }
            let endpoint = trace.header.conn_endpoints.get(conn).and_then(|e| e.first()).cloned().unwrap_or_default();
            let reg = registers
                .iter()
                .find(|b| b.get("addr").and_then(J::as_str) == Some(endpoint.as_str()))
                .map(|b| (*b).clone());
            let g = |k: &str| reg.as_ref().and_then(|b| b.get(k)).and_then(J::as_i64).unwrap_or(0);
            prefillers.push(PrefillerConn {
                conn: conn.clone(),
                endpoint,
                engine_id: reg.as_ref().and_then(|b| b.get("engine_id")).and_then(J::as_str).unwrap_or("").to_string(),
                dp_rank: g("dp_rank"),
                tp_rank: g("tp_rank"),
                pp_rank: g("pp_rank"),
                tp_size: 1,
                register: reg,
            });
        }
        // A recording with no ZeroMQ traffic names no endpoints: pair the remaining workers with the remaining
        // registrations in order (the recorder starts them in that order).
        let spare: Vec<&J> =
            registers.iter().copied().filter(|b| !prefillers.iter().any(|p| p.register.as_ref() == Some(*b))).collect();
        let mut spare = spare.into_iter();
        for p in prefillers.iter_mut().filter(|p| p.register.is_none() && p.endpoint.is_empty()) {
            let Some(reg) = spare.next() else { break };
            let g = |k: &str| reg.get(k).and_then(J::as_i64).unwrap_or(0);
            p.endpoint = reg.get("addr").and_then(J::as_str).unwrap_or("").to_string();
            p.engine_id = reg.get("engine_id").and_then(J::as_str).unwrap_or("").to_string();
            (p.dp_rank, p.tp_rank, p.pp_rank) = (g("dp_rank"), g("tp_rank"), g("pp_rank"));
            p.register = Some(reg.clone());
        }
        let tp_sizes: BTreeMap<String, i64> = prefillers.iter().fold(BTreeMap::new(), |mut m, p| {
            let e = m.entry(p.engine_id.clone()).or_insert(0);
            *e = (*e).max(p.tp_rank + 1);
            m
        });
        for p in &mut prefillers {
            p.tp_size = tp_sizes.get(&p.engine_id).copied().unwrap_or(1);
        }
        // Exchanges from the decoder's side, each payload decoded once; replies attach to the oldest unfinished
        // exchange of the same conn and endpoint.
        let mut exchanges: Vec<Exchange> = vec![];
        let mut open: Vec<usize> = vec![];
        for z in trace.zmq().filter(|z| z.side == Role::Decoder) {
            let bytes = z.frames.last().cloned().unwrap_or_default();
            match z.dir {
                ZmqDir::Send => {
                    let sent = Sent {
                        index: exchanges.len(),
                        decoder: z.conn.clone(),
                        endpoint: z.endpoint.clone(),
                        request: bytes,
                        seq: Some(z.seq),
                        line: Some(z.line),
                    };
                    let mut x = Exchange::new(profile.as_ref(), sent);
                    x.prefiller = prefillers.iter().find(|p| p.endpoint == z.endpoint).map(|p| p.conn.clone());
                    exchanges.push(x);
                    open.push(exchanges.len() - 1);
                }
                ZmqDir::Recv => {
                    let (seq, line) = (Some(z.seq), Some(z.line));
                    if let Some(pos) =
                        open.iter().position(|&i| exchanges[i].decoder == z.conn && exchanges[i].endpoint == z.endpoint)
                    {
                        let i = open[pos];
                        let r = exchanges[i].push_reply(profile.as_ref(), bytes, seq, line);
                        if ends_exchange(profile.as_ref(), &r.payload) {
                            open.remove(pos);
                        }
                    } else if let Some(x) =
                        exchanges.iter_mut().rev().find(|x| x.decoder == z.conn && x.endpoint == z.endpoint)
                    {
                        // A reply after the terminal one: keep it with its exchange so the checks see it.
                        x.push_reply(profile.as_ref(), bytes, seq, line);
                    }
                }
            }
        }
        // Routing ids: the ROUTER recv whose payload equals the request, in order, per prefiller.
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
        let decoders = trace
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
            .collect();
        let mut at_seq = BTreeMap::new();
        for (i, x) in exchanges.iter().enumerate() {
            at_seq.extend(x.seq.map(|s| (s, (i, None))));
            at_seq.extend(x.replies.iter().enumerate().filter_map(|(j, r)| Some((r.seq?, (i, Some(j))))));
        }
        Conversation { trace, revision, profile, prefillers, decoders, exchanges, http, at_seq }
    }

    /// The decode of the payload of ZeroMQ event `seq`, if the conversation made one (the requests and
    /// replies of its exchanges): what the per-event checks read instead of decoding the payload again.
    pub fn decoded_at(&self, seq: u64) -> Option<Decoded<'_>> {
        let &(i, reply) = self.at_seq.get(&seq)?;
        let x = &self.exchanges[i];
        Some(match reply {
            None => Decoded::Request(&x.request),
            Some(j) => Decoded::Reply(&x.replies[j].payload),
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
