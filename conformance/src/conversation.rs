//! The conversation the checks read: decoder exchanges (a pull request and the replies it got), each payload
//! decoded once, when the exchange is built, with the revision's profile. A recorded trace
//! ([`crate::trace_model`]), the tap and the live runner build their exchanges here alike, so what the
//! protocol checks see was decoded the way every other reader of the conversation sees it, and only once.
//!
//! This module is a leaf of the pipeline (trace → conversation → checks → report): it imports nothing of the
//! crate.

use mooncake_wire::codec::DecodeError;
use mooncake_wire::proto::WireProfile;
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse};

/// A payload as it went over the wire and what the revision reads in it.
#[derive(Clone, Debug)]
pub struct Payload<T> {
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
    /// A pull request, decoded with `profile` (when there is one).
    pub fn request(profile: Option<&WireProfile>, bytes: Vec<u8>) -> Self {
        let decoded = profile.map(|p| {
            counter::count();
            p.decode_metadata(&bytes)
        });
        Payload { bytes, decoded }
    }
}

impl Payload<MooncakeXferResponse> {
    /// A reply, decoded with `profile` (when there is one).
    pub fn reply(profile: Option<&WireProfile>, bytes: Vec<u8>) -> Self {
        let decoded = profile.map(|p| {
            counter::count();
            p.decode_response(&bytes)
        });
        Payload { bytes, decoded }
    }
}

/// One reply of an exchange, and where it was seen (trace seq and line), when known.
#[derive(Clone, Debug)]
pub struct Reply {
    pub payload: Payload<MooncakeXferResponse>,
    pub seq: Option<u64>,
    pub line: Option<usize>,
}

/// One DEALER exchange: a request and its replies, as the decoder saw them.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub index: usize,
    pub decoder: String,
    pub endpoint: String,
    /// The prefiller conn the request went to, if known.
    pub prefiller: Option<String>,
    pub request: Payload<MooncakeXferMetadata>,
    /// Replies as the decoder received them, in order.
    pub replies: Vec<Reply>,
    /// Where the request was seen (trace seq and line), when known: where a finding points.
    pub seq: Option<u64>,
    pub line: Option<usize>,
    /// The same exchange at the ROUTER: its routing id, when known.
    pub routing_id: Option<Vec<u8>>,
}

/// What an exchange starts from: the request a decoder sent, before it is decoded.
#[derive(Clone, Debug, Default)]
pub struct Sent {
    pub index: usize,
    pub decoder: String,
    pub endpoint: String,
    pub request: Vec<u8>,
    pub seq: Option<u64>,
    pub line: Option<usize>,
}

impl Exchange {
    /// The exchange of a request: the one constructor, which decodes the request (once).
    pub fn new(profile: Option<&WireProfile>, sent: Sent) -> Exchange {
        Exchange {
            index: sent.index,
            decoder: sent.decoder,
            endpoint: sent.endpoint,
            prefiller: None,
            request: Payload::request(profile, sent.request),
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
        self.replies.push(Reply { payload: Payload::reply(profile, bytes), seq, line });
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

/// Counts the payload decodes of this module, on the thread that makes them, in the crate's unit tests only
/// (a production build has no counter): what lets a test prove each payload is decoded once.
mod counter {
    #[cfg(test)]
    thread_local! {
        static DECODES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    #[inline]
    pub(super) fn count() {
        #[cfg(test)]
        DECODES.with(|d| d.set(d.get() + 1));
    }

    /// Payloads this thread decoded so far.
    #[cfg(test)]
    pub(crate) fn decodes() -> usize {
        DECODES.with(|d| d.get())
    }
}

#[cfg(test)]
pub(crate) use counter::decodes;
