//! Typed messages of the newest revision (vLLM 0.33.0), hand-written for speed and byte-identical to the
//! spec-driven codec. `tests/typed_contract.rs` checks them against `spec/` row by row. The pull family's
//! typed messages (vllm-ascend 0.23.0.post1) are in [`pull`].

mod convert;
mod de;
mod metadata;
mod response;
mod status;

pub mod pull;

pub use metadata::{MooncakeXferMetadata, ReqBlocks, FIELDS as METADATA_FIELDS};
pub use response::{MooncakeXferResponse, FIELDS as RESPONSE_FIELDS};
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
