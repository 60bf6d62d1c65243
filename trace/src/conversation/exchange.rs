//! The exchanges of a conversation: decoder exchanges (a pull request and the replies it got), each payload
//! decoded once, when the exchange is built, with the revision's profile. A recorded trace
//! ([`super::Conversation`]), the tap and the live runner build their exchanges here alike, so what the
//! protocol checks see was decoded the way every other reader of the conversation sees it, and only once.
//!
//! This module is a leaf: it imports nothing of the crate.

use mooncake_wire::codec::DecodeError;
use mooncake_wire::proto::WireProfile;
use mooncake_wire::typed::{MooncakeLeaseHeartbeat, MooncakeXferMetadata, MooncakeXferResponse};

/// A payload as it went over the wire and what the revision reads in it.
#[derive(Clone, Debug)]
pub struct Payload<T> {
    /// The payload frame's bytes.
    pub bytes: Vec<u8>,
    /// The decoded message; `None` when the conversation has no profile to read it with (generation 1, whose
    /// messages are not those of a pull).
    pub decoded: Option<Result<T, DecodeError>>,
}

impl<T> Payload<T> {
    /// The decoded message, if the bytes are one.
    pub fn value(&self) -> Option<&T> {
        self.decoded.as_ref()?.as_ref().ok()
    }
}

impl Payload<MooncakeXferMetadata> {
    /// A pull request, decoded with `profile` (when there is one); `seq`: the trace event it was seen as,
    /// when known.
    pub fn request(profile: Option<&WireProfile>, bytes: Vec<u8>, seq: Option<u64>) -> Self {
        let decoded = profile.map(|p| {
            decode_count::count(seq);
            p.decode_metadata(&bytes)
        });
        Payload { bytes, decoded }
    }
}

impl Payload<MooncakeXferResponse> {
    /// A reply, decoded with `profile` (when there is one); `seq` as for [`Payload::request`].
    pub fn reply(profile: Option<&WireProfile>, bytes: Vec<u8>, seq: Option<u64>) -> Self {
        let decoded = profile.map(|p| {
            decode_count::count(seq);
            p.decode_response(&bytes)
        });
        Payload { bytes, decoded }
    }
}

/// One reply of an exchange, and where it was seen (trace seq and line), when known.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The reply.
    pub payload: Payload<MooncakeXferResponse>,
    /// The trace event's `seq`.
    pub seq: Option<u64>,
    /// The trace file's line.
    pub line: Option<usize>,
}

/// One DEALER exchange: a request and its replies, as the decoder saw them.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// Its place among the conversation's exchanges (0-based).
    pub index: usize,
    /// The decoder connection that sent the request.
    pub decoder: String,
    /// The endpoint its DEALER connected to.
    pub endpoint: String,
    /// The prefiller conn the request went to, if known.
    pub prefiller: Option<String>,
    /// The pull request.
    pub request: Payload<MooncakeXferMetadata>,
    /// Replies as the decoder received them, in order.
    pub replies: Vec<Reply>,
    /// Where the request was seen (trace seq and line), when known: where a finding points.
    pub seq: Option<u64>,
    /// The trace file's line of the request.
    pub line: Option<usize>,
    /// The same exchange at the ROUTER: its routing id, when known.
    pub routing_id: Option<Vec<u8>>,
}

/// One lease heartbeat (0.34.0, `spec/PROTOCOL.md#kv-leases`) and the reply it got, as the decoder saw them: a
/// payload the revision's prefiller reads as a heartbeat ([`WireProfile::read_inbound`]), on a DEALER of its
/// own. Kept apart from the pull [`Exchange`]s, which the pull checks and players read.
#[derive(Clone, Debug)]
pub struct Heartbeat {
    /// Its place among the conversation's heartbeats (0-based).
    pub index: usize,
    /// The decoder connection that sent it.
    pub decoder: String,
    /// The endpoint its DEALER connected to.
    pub endpoint: String,
    /// The prefiller conn it went to, if known.
    pub prefiller: Option<String>,
    /// The heartbeat (decoded: it was classified by decoding it).
    pub payload: Payload<MooncakeLeaseHeartbeat>,
    /// Replies as the decoder received them (one is expected).
    pub replies: Vec<Reply>,
    /// Where it was seen (trace seq and line), when known.
    pub seq: Option<u64>,
    /// The trace file's line.
    pub line: Option<usize>,
    /// Seconds since the recording's start, when the trace says.
    pub t: Option<f64>,
}

impl Heartbeat {
    /// The transfer ids it renews.
    pub fn transfer_ids(&self) -> &[String] {
        self.payload.value().map(|h| h.lease_transfer_ids.as_slice()).unwrap_or_default()
    }
}

/// What an exchange starts from: the request a decoder sent, before it is decoded.
#[derive(Clone, Debug, Default)]
pub struct Sent {
    /// As [`Exchange::index`].
    pub index: usize,
    /// As [`Exchange::decoder`].
    pub decoder: String,
    /// As [`Exchange::endpoint`].
    pub endpoint: String,
    /// The request's bytes.
    pub request: Vec<u8>,
    /// As [`Exchange::seq`].
    pub seq: Option<u64>,
    /// As [`Exchange::line`].
    pub line: Option<usize>,
}

impl Exchange {
    /// The exchange of a request: the constructor, which decodes the request (once).
    pub fn new(profile: Option<&WireProfile>, sent: Sent) -> Exchange {
        let Payload { bytes, decoded } = Payload::request(profile, sent.request, sent.seq);
        Exchange::decoded(Sent { request: bytes, ..sent }, decoded)
    }

    /// The exchange of a request someone already decoded (the tap, which read the revision off it): that
    /// decode is the exchange's, the request is not decoded again.
    pub fn decoded(sent: Sent, decoded: Option<Result<MooncakeXferMetadata, DecodeError>>) -> Exchange {
        Exchange {
            index: sent.index,
            decoder: sent.decoder,
            endpoint: sent.endpoint,
            prefiller: None,
            request: Payload { bytes: sent.request, decoded },
            replies: vec![],
            seq: sent.seq,
            line: sent.line,
            routing_id: None,
        }
    }

    /// The next reply the decoder received, decoded (once); returns it.
    pub fn push_reply(
        &mut self,
        profile: Option<&WireProfile>,
        bytes: Vec<u8>,
        seq: Option<u64>,
        line: Option<usize>,
    ) -> &Reply {
        self.replies.push(Reply { payload: Payload::reply(profile, bytes, seq), seq, line });
        self.replies.last().expect("just pushed")
    }

    /// The request's seq in the trace (0 for an exchange that was not recorded).
    pub fn send_seq(&self) -> u64 {
        self.seq.unwrap_or(0)
    }

    /// The request's line in the trace (0 for an exchange that was not recorded).
    pub fn send_line(&self) -> usize {
        self.line.unwrap_or(0)
    }
}

/// Whether a decoded reply ends its exchange: a terminal status, or something that is no reply at all.
pub fn ends_exchange(profile: Option<&WireProfile>, reply: &Payload<MooncakeXferResponse>) -> bool {
    match (profile, &reply.decoded) {
        (Some(p), Some(Ok(r))) => p.is_terminal(r.status),
        _ => true,
    }
}

/// Counts payload decodes, typed and spec-driven, per trace event (`seq`; `None` for traffic no trace event
/// names), on the thread that makes them, in test builds only (this crate's unit tests, or the `testing`
/// feature; any other build counts nothing): what lets a test prove that every payload of a trace is decoded
/// once. Every decode of a payload in the pipeline calls [`decode_count::count`] (the tap's in
/// `mooncake-conformance` too).
pub mod decode_count {
    #[cfg(any(test, feature = "testing"))]
    thread_local! {
        static DECODES: std::cell::RefCell<std::collections::BTreeMap<Option<u64>, usize>> =
            const { std::cell::RefCell::new(std::collections::BTreeMap::new()) };
        static TOTAL: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// One decode of the payload of event `seq`.
    #[inline]
    pub fn count(seq: Option<u64>) {
        #[cfg(any(test, feature = "testing"))]
        {
            DECODES.with(|d| *d.borrow_mut().entry(seq).or_default() += 1);
            TOTAL.with(|t| t.set(t.get() + 1));
        }
        #[cfg(not(any(test, feature = "testing")))]
        let _ = seq;
    }

    /// Payloads this thread decoded so far, in all.
    #[cfg(any(test, feature = "testing"))]
    pub fn decodes() -> usize {
        TOTAL.with(|t| t.get())
    }

    /// Decodes per event since the last call, and forgets them.
    #[cfg(any(test, feature = "testing"))]
    pub fn take() -> std::collections::BTreeMap<Option<u64>, usize> {
        DECODES.with(|d| std::mem::take(&mut *d.borrow_mut()))
    }
}
