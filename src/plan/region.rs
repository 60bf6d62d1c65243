//! `TransferRegion`: one registered KV buffer as the 0.33.0 prefiller plans copies over it
//! (`mooncake_connector.py`, dataclass `TransferRegion`; `spec/PROTOCOL.md#regions`).

use serde::{Deserialize, Serialize};

/// `group_index` of a region that several KV groups share (vLLM `_SHARED_REGION_GROUP_ID`): its block ids are
/// the concatenation of the ids of every group in `shared_group_ids`.
pub const SHARED_REGION_GROUP_ID: i64 = -1;

/// `row_offset` of a region that is not a view into a packed block row (or whose peer did not say), so a run
/// starting there is never widened to the full row.
pub const UNKNOWN_ROW_OFFSET: i64 = -1;

/// One registered region. Address of block `b` = `base_addr + b * block_len`; bytes per block =
/// `kv_block_len` (or a TP slice of it). Field order is vLLM's, and is the JSON order of the golden files.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TransferRegion {
    /// The layer's name (`model.layers.0.self_attn.attn`), as registered.
    pub layer_name: String,
    /// The layer's index.
    pub layer_index: i64,
    /// Address of block 0.
    pub base_addr: i64,
    /// Stride between consecutive blocks.
    pub block_len: i64,
    /// Bytes of this region's payload per block (at most `block_len` in a sane layout).
    pub kv_block_len: i64,
    /// KV transfer group, or [`SHARED_REGION_GROUP_ID`].
    pub group_index: i64,
    /// Groups sharing the allocation; empty unless the peer sent them.
    pub shared_group_ids: Vec<i64>,
    /// Byte offset of this view from the start of its block row, or [`UNKNOWN_ROW_OFFSET`].
    pub row_offset: i64,
}

impl TransferRegion {
    /// The same region with another payload length (vLLM's `span` helper of the coalescer).
    pub(crate) fn with_kv_block_len(&self, kv_block_len: i64) -> TransferRegion {
        TransferRegion { kv_block_len, ..self.clone() }
    }
}
