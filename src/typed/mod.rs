//! Typed messages of the newest revision (vLLM 0.33.0), hand-written for speed and byte-identical to the
//! spec-driven codec. `tests/typed_contract.rs` checks them against `spec/` row by row.
//!
//! Each message exists with owned strings (`MooncakeXferMetadata`, `MooncakeXferResponse`) and with strings
//! borrowed from the decoded bytes (`MooncakeXferMetadataRef`, `MooncakeXferResponseRef`); both are the one
//! generic struct (`…Of<S>`) decoded and encoded by the same code.
//!
//! The pull family's typed messages (vllm-ascend 0.23.0.post1) are in [`pull`].

mod convert;
mod de;
mod metadata;
mod response;
mod status;

pub mod pull;

pub use de::WireStr;
pub use metadata::{
    MooncakeXferMetadata, MooncakeXferMetadataOf, MooncakeXferMetadataRef, ReqBlocks, ReqBlocksOf, ReqBlocksRef,
    FIELDS as METADATA_FIELDS,
};
pub use response::{MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef, FIELDS as RESPONSE_FIELDS};
pub use status::Status;

/// The spec revision these types implement.
pub const REVISION: &str = "vllm-0.33.0";

/// How strictly a typed decoder follows msgspec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strictness {
    /// Exactly msgspec: an unknown status value is an error.
    Msgspec,
    /// Keep an unknown status value (for reports about what a peer sent).
    OpenStatus,
}
