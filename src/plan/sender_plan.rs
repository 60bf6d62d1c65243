//! Which bytes of a block one producer rank copies to one consumer rank: vLLM 0.33.0
//! `_compute_sender_transfer_plan` and `_can_coalesce_block_transfers` (`mooncake_connector.py`;
//! `spec/PROTOCOL.md#byte-plan`).

use super::error::PlanError;
use super::pyfmt::{floordiv, modulo, to_i64};
use super::topology::tp_ratio;

/// The producer/consumer pair and the per-block payload lengths of one aligned region pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderPlanInput {
    /// The prefiller's TP rank.
    pub local_tp_rank: i64,
    /// The prefiller's TP size.
    pub local_tp_size: i64,
    /// The decoder's TP rank.
    pub remote_tp_rank: i64,
    /// The decoder's TP size.
    pub remote_tp_size: i64,
    /// The prefiller region's payload bytes per block.
    pub local_kv_block_len: i64,
    /// The decoder region's payload bytes per block.
    pub remote_kv_block_len: i64,
    /// The producer's KV cache is replicated (MLA, or more TP ranks than KV heads).
    pub producer_cache_replicated: bool,
    /// Known for non-MLA models without Mamba layers; `None` otherwise.
    pub total_num_kv_heads: Option<i64>,
}

/// The copy of one block: whether this producer rank sends it at all, where the slice starts in the local
/// and in the remote block, and its length (vLLM's tuple `(should_transfer, src, dst, len)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderPlan {
    /// Whether this rank sends the block at all (false for all but one rank of a replica group).
    pub should_transfer: bool,
    /// Offset of the slice in the prefiller's block.
    pub src_offset: i64,
    /// Offset of the slice in the decoder's block.
    pub dst_offset: i64,
    /// Length of the slice.
    pub transfer_len: i64,
}

/// The byte plan (`spec/PROTOCOL.md#byte-plan`). When heads are known and producer and consumer disagree on
/// replication, the copy is per KV head: only the first rank of each replica group sends, one head's bytes,
/// shifted by the head distance between the two ranks.
pub fn compute_sender_transfer_plan(p: &SenderPlanInput) -> Result<SenderPlan, PlanError> {
    let ratio = tp_ratio(p.local_tp_size, p.remote_tp_size)? as i128;
    let (ltr, lts, rtr, rts) =
        (p.local_tp_rank as i128, p.local_tp_size as i128, p.remote_tp_rank as i128, p.remote_tp_size as i128);
    let (lkv, rkv) = (p.local_kv_block_len as i128, p.remote_kv_block_len as i128);
    let plan = |send: bool, src: i128, dst: i128, len: i128| -> Result<SenderPlan, PlanError> {
        Ok(SenderPlan {
            should_transfer: send,
            src_offset: to_i64(src, "source offset")?,
            dst_offset: to_i64(dst, "destination offset")?,
            transfer_len: to_i64(len, "transfer length")?,
        })
    };
    if ratio == 1 {
        return plan(true, 0, 0, lkv);
    }
    if let Some(heads) = p.total_num_kv_heads {
        let heads = heads as i128;
        let consumer_cache_replicated = rts > heads;
        if p.producer_cache_replicated != consumer_cache_replicated {
            let local_head_count = floordiv(heads, lts)?.max(1);
            let local_replica_count = floordiv(lts, heads)?.max(1);
            let local_head = floordiv(ltr * heads, lts)?;
            let remote_head = floordiv(rtr * heads, rts)?;
            let bytes_per_head = floordiv(lkv, local_head_count)?;
            return plan(
                modulo(ltr, local_replica_count)? == 0,
                (remote_head - local_head).max(0) * bytes_per_head,
                (local_head - remote_head).max(0) * bytes_per_head,
                bytes_per_head,
            );
        }
    }
    if ratio > 0 {
        if p.producer_cache_replicated {
            return plan(modulo(ltr, ratio)? == 0, 0, 0, lkv);
        }
        return plan(true, 0, modulo(ltr, ratio)? * lkv, lkv);
    }
    if p.producer_cache_replicated {
        return plan(true, 0, 0, lkv);
    }
    plan(true, modulo(rtr, -ratio)? * rkv, 0, rkv)
}

/// Whether a run of consecutive blocks can go as one copy: the plan moves whole blocks (no offsets, length
/// equal to both strides).
pub fn can_coalesce_block_transfers(
    local_region_block_len: i64,
    remote_region_block_len: i64,
    src_region_offset: i64,
    dst_region_offset: i64,
    transfer_len: i64,
) -> bool {
    src_region_offset == 0
        && dst_region_offset == 0
        && transfer_len == local_region_block_len
        && transfer_len == remote_region_block_len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(should_transfer: bool, src_offset: i64, dst_offset: i64, transfer_len: i64) -> SenderPlan {
        SenderPlan { should_transfer, src_offset, dst_offset, transfer_len }
    }

    fn input(ltr: i64, lts: i64, rtr: i64, rts: i64, rep: bool, heads: Option<i64>) -> SenderPlanInput {
        SenderPlanInput {
            local_tp_rank: ltr,
            local_tp_size: lts,
            remote_tp_rank: rtr,
            remote_tp_size: rts,
            local_kv_block_len: 1024,
            remote_kv_block_len: 512,
            producer_cache_replicated: rep,
            total_num_kv_heads: heads,
        }
    }

    #[test]
    fn wider_producer_writes_its_shard_at_its_offset() {
        // P tp 4 → D tp 2: P rank 3 is the second of D rank 1's two sources.
        assert_eq!(compute_sender_transfer_plan(&input(3, 4, 1, 2, false, None)), Ok(plan(true, 0, 1024, 1024)));
        // Replicated P: only even ranks send.
        assert_eq!(compute_sender_transfer_plan(&input(3, 4, 1, 2, true, None)), Ok(plan(false, 0, 0, 1024)));
    }

    #[test]
    fn narrower_producer_sends_the_slice_the_consumer_rank_owns() {
        // P tp 1 → D tp 2: D rank 1 gets the second half of P's block.
        assert_eq!(compute_sender_transfer_plan(&input(0, 1, 1, 2, false, None)), Ok(plan(true, 512, 0, 512)));
        assert_eq!(compute_sender_transfer_plan(&input(0, 1, 1, 2, true, None)), Ok(plan(true, 0, 0, 1024)));
    }

    #[test]
    fn replication_mismatch_copies_one_head() {
        // 2 heads. P tp 2 (one head per rank, not replicated) → D tp 4 (replicated: 2 ranks per head).
        // P rank 1 holds head 1; D rank 2 holds head 1 too: one head's bytes, no offsets.
        assert_eq!(compute_sender_transfer_plan(&input(1, 2, 2, 4, false, Some(2))), Ok(plan(true, 0, 0, 1024)));
        // D rank 0 holds head 0: P rank 1 is one head past it, so it writes at +1 head.
        assert_eq!(compute_sender_transfer_plan(&input(1, 2, 0, 4, false, Some(2))), Ok(plan(true, 0, 1024, 1024)));
        // P tp 4 replicated (2 ranks per head) → D tp 1 (both heads): only ranks 0 and 2 send.
        assert_eq!(compute_sender_transfer_plan(&input(2, 4, 0, 1, true, Some(2))), Ok(plan(true, 0, 1024, 1024)));
        assert!(!compute_sender_transfer_plan(&input(3, 4, 0, 1, true, Some(2))).unwrap().should_transfer);
        // Same replication on both sides falls through to the ratio rules.
        assert_eq!(compute_sender_transfer_plan(&input(0, 1, 1, 2, false, Some(8))), Ok(plan(true, 512, 0, 512)));
    }

    #[test]
    fn coalescing_needs_whole_blocks() {
        assert!(can_coalesce_block_transfers(64, 64, 0, 0, 64));
        assert!(!can_coalesce_block_transfers(64, 128, 0, 0, 64));
        assert!(!can_coalesce_block_transfers(64, 64, 0, 32, 64));
        assert!(!can_coalesce_block_transfers(64, 64, 0, 0, 32));
    }
}
