//! Typed messages, generated from `spec/` (`src/typed/generated/`, made by [`crate::generate::typed_rs`]):
//! for every push revision, both generations, one struct per side-channel message with its field list,
//! required mask, defaults, decoder and encoder, byte-identical to the spec-driven codec and as fast as the
//! hand-written 0.33.0 decoder they replace. `tests/typed_contract.rs` checks the generated decoders of every
//! revision against the spec-driven codec.
//!
//! The crate root re-exports the newest revision (vLLM 0.33.0); every revision is in [`generated::push`]
//! (`generated::push::vllm_0_19_0_to_0_19_1::MooncakeXferMetadata`, …, with [`generated::push::REVISIONS`] to
//! iterate). Each message exists with owned strings (`MooncakeXferMetadata`) and with strings borrowed from the
//! decoded bytes (`MooncakeXferMetadataRef`); both are the one generic struct (`…Of<S>`).
//!
//! The pull family's typed messages (vllm-ascend 0.23.0.post1) are in [`pull`] (hand-written).

mod blocks;
mod convert;
mod de;
mod ext;
pub mod generated;

pub mod pull;

pub use crate::codec::{StrList, StrListIter};
pub use blocks::{FlatReqBlocksOf, ReqBlocks, ReqBlocksOf, ReqBlocksRef};
pub use de::WireStr;
pub use generated::push::newest::{
    MooncakeXferMetadata, MooncakeXferMetadataOf, MooncakeXferMetadataRef, MooncakeXferResponse,
    MooncakeXferResponseOf, MooncakeXferResponseRef,
};
/// The reply status, an open newtype over every member any revision defines.
pub use generated::push::MooncakeXferResponseStatus as Status;

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
    pub encode: fn(&N) -> Result<Vec<u8>, String>,
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
