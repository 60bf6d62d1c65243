//! Typed messages, generated from `spec/` (`src/typed/generated/`, made by `generate::typed_rs`, behind the
//! `generate` feature): for every revision of both families, one struct per MessagePack struct of the spec with its
//! field list, required mask, defaults, decoder and encoder, byte-identical to the spec-driven codec and as fast as
//! the hand-written 0.33.0 decoder they replace. `tests/suite/typed_contract.rs` checks the generated code of every
//! revision against the spec-driven codec.
//!
//! The crate root re-exports the newest revision (vLLM 0.34.0); every revision is in [`generated::push`]
//! (`generated::push::vllm_0_19_0_to_0_19_1::MooncakeXferMetadata`, …, with [`generated::push::REVISIONS`] to
//! iterate). Each message exists with owned strings (`MooncakeXferMetadata`) and with strings borrowed from the
//! decoded bytes (`MooncakeXferMetadataRef`); both are the one generic struct (`…Of<S>`).
//!
//! The pull family's typed messages (vllm-ascend) are in [`generated::pull`]; [`pull`] re-exports the newest
//! released revision.

mod blocks;
mod de;
pub mod generated;
mod untyped;

pub mod pull;

pub use crate::codec::{StrList, StrListIter};
pub use blocks::{FlatReqBlocksOf, ReqBlocks, ReqBlocksOf, ReqBlocksRef};
pub use de::WireStr;
pub use generated::push::newest::{
    MooncakeLeaseHeartbeat, MooncakeLeaseHeartbeatOf, MooncakeLeaseHeartbeatRef, MooncakeXferMetadata,
    MooncakeXferMetadataOf, MooncakeXferMetadataRef, MooncakeXferResponse, MooncakeXferResponseOf,
    MooncakeXferResponseRef,
};
/// The reply status, an open newtype over every member any revision defines.
pub use generated::push::MooncakeXferResponseStatus as Status;
pub use untyped::Untyped;

/// Wire names of the newest `MooncakeXferMetadata`, in declaration order.
pub const METADATA_FIELDS: &[&str] = &MooncakeXferMetadata::FIELDS;
/// Wire names of the newest `MooncakeXferResponse`, in declaration order.
pub const RESPONSE_FIELDS: &[&str] = &MooncakeXferResponse::FIELDS;

/// The spec revision the re-exported types implement (the newest).
pub const REVISION: &str = generated::push::newest::REVISION;

/// How strictly a typed decoder follows msgspec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strictness {
    /// Exactly msgspec: an enum value the revision does not define is an error.
    Msgspec,
    /// Keep an unknown status value (for reports about what a peer sent).
    OpenStatus,
}

/// One revision's message seen through the newest revision's struct, which is what the sans-IO cores hold:
/// that revision's generated decoder followed by `to_newest`, and `from_newest` followed by its generated
/// encoder. Generated for every revision and message the newest revision also has
/// (`generated::push::mooncake_xfer_metadata_via_newest`, …).
pub struct ViaNewest<N: 'static> {
    /// The spec revision.
    pub revision: &'static str,
    /// Decodes as that revision's msgspec class does.
    pub decode: fn(&[u8]) -> Result<N, crate::codec::DecodeError>,
    /// Encodes as that revision does; `Err` says what the revision cannot carry.
    pub encode: fn(&N) -> Result<Vec<u8>, crate::codec::convert::ConvertError>,
}

impl<N> Clone for ViaNewest<N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<N> Copy for ViaNewest<N> {}

impl<N> std::fmt::Debug for ViaNewest<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViaNewest").field("revision", &self.revision).finish_non_exhaustive()
    }
}

/// One generated revision of a family: its name, messages and entry points by message name
/// (`generated::push::REVISIONS`, `generated::pull::REVISIONS`).
#[derive(Clone, Copy, Debug)]
pub struct GeneratedRevision {
    /// The spec revision.
    pub revision: &'static str,
    /// Every struct of the revision: its MessagePack messages in transport order, then the structs they hold.
    pub messages: &'static [&'static str],
    /// Decodes `bytes` as the message and encodes the result again (`None`: no such message).
    pub round_trip: fn(&str, &[u8], Strictness) -> Option<Result<Vec<u8>, crate::codec::DecodeError>>,
    /// Decodes with owned (`false`) or borrowed (`true`) strings and drops the result (for benchmarks).
    pub decode_and_drop: fn(&str, &[u8], bool) -> Option<Result<(), crate::codec::DecodeError>>,
    /// The message's wire names in declaration order.
    pub fields: fn(&str) -> Option<&'static [&'static str]>,
    /// The message's required mask (bit `i` set: field `i` must be on the wire).
    pub required: fn(&str) -> Option<u64>,
}
