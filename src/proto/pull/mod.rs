//! The pull family, generation 1 (vllm-ascend's Mooncake connector: `spec/pull/vllm-ascend-0.18.0.toml` and
//! `vllm-ascend-0.23.0.post1.toml`) as sans-IO state machines. The decoder **reads** the prefiller's blocks with
//! the transfer engine; the side channel (decoder REQ → prefiller ROUTER) carries a metadata query
//! (`(b"get_meta_msg", "")`, answered with the prefiller's `MooncakeAgentMetadata`) and a completion
//! (`(b"done_recving_msg", request id, port table)`, answered with the raw `ACK`), after which the prefiller
//! frees the request.
//!
//! What varies between the revisions is read from the spec: the tags and the `ACK` constant from the
//! transport, the abort timeout from `[env]`, the metadata's shape from its struct's fields (one flat list of
//! regions, or per-layer lists with block lengths and strides), and what a decoder reports after a failed read
//! from `behaviour.failed_read`. Protocol prose: `spec/PROTOCOL.md`, "The pull family".

mod decoder;
mod layout;
mod prefiller;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use super::profile::{need, ProfileError};
use crate::codec::{Codec, DecodeError, TyId, Value};
use crate::spec::behaviour::FailedRead;
use crate::spec::{Revision, Spec};

pub use decoder::{PullDecoder, PullDecoderEvent, PullDecoderStats, PullRead, ReadDescriptor, ReadId};
pub use layout::{MetadataError, PullLayout, PullPrefillerConfig};
pub use prefiller::PullPrefiller;

/// The metadata reply's struct.
pub const METADATA: &str = "MooncakeAgentMetadata";
/// The metadata query's struct.
pub const GET_META: &str = "GetMetaMsg";
/// The completion's struct.
pub const DONE_RECVING: &str = "DoneRecvingMsg";

/// How a revision lays out the regions in its `MooncakeAgentMetadata`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataShape {
    /// One base address per region, flat (vllm-ascend 0.18.0); the decoder pairs regions by position and places
    /// the prefiller's blocks with its own block length.
    Flat,
    /// Per layer `[K, V]` lists with block lengths and strides, the layer table and the handshake port
    /// (0.23.0.post1); the decoder walks its own layers per KV group and places the prefiller's blocks with the
    /// prefiller's strides.
    PerLayer,
}

/// What a pull-family core needs to know about its revision, from the spec.
#[derive(Clone, Debug)]
pub struct PullProfile {
    /// The revision.
    pub revision: Arc<Revision>,
    codec: Arc<Codec>,
    /// `tuple[any, ...]`: how the prefiller decodes what it receives (msgspec `Decoder(type=tuple)`).
    untyped: TyId,
    /// The metadata query's tag (`b"get_meta_msg"`).
    pub get_meta_tag: Vec<u8>,
    /// The completion's tag (`b"done_recving_msg"`).
    pub done_tag: Vec<u8>,
    /// The raw acknowledgement of a completion (`ACK`).
    pub ack: Vec<u8>,
    /// Default of `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`: a request nobody completes is freed after it.
    pub abort_timeout: Duration,
    /// How long a decoder waits for each reply: the release polls 1 s, three times, 0.1 s apart.
    pub reply_timeout: Duration,
    /// What a decoder reports after a failed read (`behaviour.failed_read`).
    pub failed_read: FailedRead,
    /// The metadata's layout of regions.
    pub shape: MetadataShape,
}

/// The constant tag of a tuple message (`b'get_meta_msg'` in the spec).
fn tag(rev: &Revision, message: &'static str) -> Result<Vec<u8>, ProfileError> {
    let missing = || ProfileError::MissingMessage { revision: rev.revision.clone(), message };
    let field = rev.structs.get(message).and_then(|s| s.fields.first()).ok_or_else(missing)?;
    let lit = field.const_value.as_deref().ok_or_else(missing)?;
    let inner = lit.strip_prefix("b'").and_then(|s| s.strip_suffix('\'')).ok_or_else(missing)?;
    Ok(inner.as_bytes().to_vec())
}

impl PullProfile {
    /// The profile of a built-in pull revision of generation 1, by name.
    pub fn builtin(revision: &str) -> Result<PullProfile, ProfileError> {
        let rev =
            Spec::builtin().revision(revision).ok_or_else(|| ProfileError::UnknownRevision(revision.into()))?.clone();
        Self::new(rev)
    }

    /// The profile of a pull revision of generation 1 (an error names what the spec lacks).
    pub fn new(rev: Arc<Revision>) -> Result<PullProfile, ProfileError> {
        if rev.family != "pull" {
            return Err(ProfileError::WrongFamily { revision: rev.revision.clone(), family: rev.family.clone() });
        }
        if rev.generation != 1 {
            let (revision, generation) = (rev.revision.clone(), rev.generation);
            return Err(ProfileError::WrongGeneration { revision, generation, expected: 1 });
        }
        let mut codec = Codec::new(rev.clone()).map_err(|e| ProfileError::Compile(e.to_string()))?;
        let untyped = codec.type_of("tuple[any, ...]").map_err(|e| ProfileError::Compile(e.to_string()))?;
        let meta = rev
            .structs
            .get(METADATA)
            .ok_or_else(|| ProfileError::MissingMessage { revision: rev.revision.clone(), message: METADATA })?;
        let shape = if meta.fields.iter().any(|f| f.name == "block_strides") {
            MetadataShape::PerLayer
        } else {
            MetadataShape::Flat
        };
        let ack = rev
            .transport
            .messages
            .iter()
            .flat_map(|m| &m.constants)
            .find(|c| c.name == "ACK")
            .map(|c| c.bytes.as_bytes().to_vec())
            .ok_or_else(|| ProfileError::MissingConstant { revision: rev.revision.clone(), name: "ACK" })?;
        let abort = rev
            .env
            .get("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT")
            .and_then(|e| e.default.parse::<u64>().ok())
            .ok_or_else(|| ProfileError::NoAbortTimeout(rev.revision.clone()))?;
        Ok(PullProfile {
            get_meta_tag: tag(&rev, GET_META)?,
            done_tag: tag(&rev, DONE_RECVING)?,
            ack,
            abort_timeout: Duration::from_secs(abort),
            reply_timeout: Duration::from_millis(3200),
            failed_read: need(&rev.behaviour.failed_read, &rev.revision, "failed_read")?,
            shape,
            codec: Arc::new(codec),
            untyped,
            revision: rev,
        })
    }

    /// The revision's codec (msgspec-exact).
    pub fn codec(&self) -> &Codec {
        &self.codec
    }

    /// A received payload as the prefiller reads it: an untyped tuple (any array), or why not.
    pub fn decode_untyped(&self, payload: &[u8]) -> Result<Vec<Value>, DecodeError> {
        match self.codec.decode_type(self.untyped, payload)? {
            Value::List(xs) | Value::Tuple(xs) => Ok(xs),
            // `tuple[any, ...]` decodes only arrays.
            _ => Ok(vec![]),
        }
    }

    /// A tuple message's bytes from its non-constant fields (the tag is the spec's constant).
    fn encode_tuple(&self, message: &str, fields: serde_json::Value) -> Vec<u8> {
        let v = self.codec.from_json(message, &fields).map_err(|e| e.to_string());
        v.and_then(|v| self.codec.encode(message, &v).map_err(|e| e.to_string())).unwrap_or_default()
    }

    /// The metadata query's bytes: `[bin tag, ""]`.
    pub fn encode_get_meta(&self) -> Vec<u8> {
        self.encode_tuple(GET_META, serde_json::json!({"unused": ""}))
    }

    /// A completion's bytes: `[bin tag, request id, {}]` (no port table: one prefiller worker per request).
    pub fn encode_done(&self, request_id: &str) -> Vec<u8> {
        self.encode_tuple(DONE_RECVING, serde_json::json!({"request_id": request_id, "remote_port_send_num": {}}))
    }
}
