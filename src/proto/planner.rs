//! What the prefiller core asks of a transfer planner. The planner turns the decoder's layout and block ids
//! into copy descriptors; the core owns everything else (waiting, counting, replying).
//! `plan::Planner` is the implementation that reproduces vLLM 0.33.0.

use crate::msgpack::WireInt;
use crate::typed::MooncakeXferMetadata;

/// One copy: `len` bytes from the prefiller's address `src` to the decoder's address `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub src: u64,
    pub dst: u64,
    pub len: u64,
}

/// A request whose prefiller blocks are ready, in the round being sent.
#[derive(Clone, Debug)]
pub struct ReadyReq<'a> {
    pub d_req_id: &'a str,
    pub transfer_id: &'a str,
    /// The prefiller's block ids per KV group.
    pub local_blocks: &'a [Vec<u64>],
    /// The decoder's block ids per KV group (from `req_blocks`).
    pub remote_blocks: &'a [Vec<WireInt>],
}

/// Descriptors for one round, and the requests that cannot be sent (with the reason).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Built {
    pub descriptors: Vec<Descriptor>,
    pub err_reqs: Vec<String>,
    pub err_msg: Option<String>,
}

pub trait SenderPlanner {
    /// Aligned regions of both sides, kept per peer layout when layout caching is on.
    type Prepared: Clone;

    /// The decoder TP ranks this prefiller serves for a decoder TP size (`handshake_target_ranks`); an error
    /// text when the sizes cannot pair.
    fn target_ranks(&self, remote_tp_size: usize) -> Result<Vec<usize>, String>;
    /// This prefiller's TP rank (for the pairing error text).
    fn tp_rank(&self) -> usize;
    /// The prefiller's PP size.
    fn pp_size(&self) -> usize;
    /// An error when PP sizes differ and packed rows make alignment impossible.
    fn pp_mismatch(&self, meta: &MooncakeXferMetadata) -> Option<String>;
    /// Aligns the decoder's layout with ours (an ERROR text on failure).
    fn prepare(&self, meta: &MooncakeXferMetadata) -> Result<Self::Prepared, String>;
    /// Region-length validation of prepared regions for this TP pairing.
    fn validate(&self, meta: &MooncakeXferMetadata, prepared: &Self::Prepared) -> Option<String>;
    /// Descriptors for the ready requests of one round.
    fn build(&self, meta: &MooncakeXferMetadata, prepared: &Self::Prepared, ready: &[ReadyReq<'_>]) -> Built;
}
