//! What the prefiller core asks of a transfer planner: admission of a pull (pairing, PP check, layout
//! preparation, validation) and copy descriptors per round. The core owns everything else (waiting,
//! counting, replying, the layout cache). [`crate::plan::Producer`] implements it as vLLM 0.33.0 does
//! (`vllm.rs`); tests may use simpler planners.

use crate::msgpack::WireInt;
pub use crate::plan::{Descriptor, TransferBatch};
use crate::typed::MooncakeXferMetadata;

/// A request whose prefiller blocks are ready, in the round being sent.
#[derive(Clone, Debug)]
pub struct ReadyReq<'a> {
    /// The decoder's request id.
    pub d_req_id: &'a str,
    /// The id the prefiller knows the transfer by.
    pub transfer_id: &'a str,
    /// The prefiller's block ids per KV group.
    pub local_blocks: &'a [Vec<u64>],
    /// The decoder's block ids per KV group (from `req_blocks`).
    pub remote_blocks: &'a [Vec<WireInt>],
}

/// Every method returning `Err` gives the `ERROR` reply's `err_msg`: the error's `Display`, byte for byte.
pub trait SenderPlanner {
    /// Why a pull is refused; its `Display` is the reply's exact `err_msg` (kept per layout with the
    /// preparations, hence `Clone`).
    type Error: std::fmt::Display + Clone;
    /// The pull as the planner reads it (converted once per message).
    type Pull;
    /// Aligned regions of both sides, kept per peer layout when layout caching is on.
    type Prepared: Clone;
    /// What [`SenderPlanner::prepare`] reads of a pull: pulls with equal keys prepare alike, so the core
    /// prepares each distinct layout once and reuses the result (bounded by
    /// [`crate::limits::MAX_PREPARED_LAYOUTS`]).
    type PrepareKey: Eq + std::hash::Hash;

    /// Reads what a pull asks for (its layout, ranks and blocks); an error is the reply's `err_msg`.
    fn pull(&self, meta: &MooncakeXferMetadata) -> Result<Self::Pull, Self::Error>;
    /// The decoder TP ranks this prefiller pairs with, after checking the pull's rank is one of them and
    /// that PP sizes allow alignment (vLLM's first two checks).
    fn check(&self, pull: &Self::Pull) -> Result<Vec<usize>, Self::Error>;
    /// The part of `pull` that [`SenderPlanner::prepare`] reads.
    fn prepare_key(&self, pull: &Self::Pull) -> Self::PrepareKey;
    /// Aligns the decoder's layout with ours.
    fn prepare(&self, pull: &Self::Pull) -> Result<Self::Prepared, Self::Error>;
    /// Region-length validation of prepared regions for this pull's TP pairing.
    fn validate(&self, pull: &Self::Pull, prepared: &Self::Prepared) -> Result<(), Self::Error>;
    /// Descriptors for the ready requests of one round. `Err` is an exception vLLM would raise mid-pull
    /// (answered `ERROR`).
    fn build(
        &self,
        pull: &Self::Pull,
        prepared: &Self::Prepared,
        ready: &[ReadyReq<'_>],
    ) -> Result<TransferBatch, Self::Error>;
    /// How many decoder workers must settle a request before it is freed (`resolve_need_send`).
    fn need_send(&self, target_ranks: &[usize], remote_pp_size: usize) -> usize;
}
