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
mod strlist;

pub mod pull;

pub use blocks::{FlatReqBlocksOf, ReqBlocks, ReqBlocksOf, ReqBlocksRef};
pub use de::WireStr;
pub use generated::push::newest::{
    MooncakeXferMetadata, MooncakeXferMetadataOf, MooncakeXferMetadataRef, MooncakeXferResponse,
    MooncakeXferResponseOf, MooncakeXferResponseRef,
};
/// The reply status, an open newtype over every member any revision defines.
pub use generated::push::MooncakeXferResponseStatus as Status;
pub use strlist::{Iter as StrListIter, StrList};

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
