//! Block ids a region copies, per KV transfer group: vLLM 0.33.0 `_block_ids_for_region`, the per-group
//! matching of `MooncakeConnectorWorker._build_transfer_params` (Mamba NULL blocks, prefix-cache hits) and
//! `MooncakeConnectorWorker._logical_to_kernel_block_ids` (`mooncake_connector.py`).

use super::error::PlanError;
use super::pyfmt::index;
use super::region::SHARED_REGION_GROUP_ID;

/// vLLM's `NULL_BLOCK_ID` (`v1/attention/backends/utils.py`): a Mamba placeholder that carries no state.
pub(crate) const NULL_BLOCK_ID: i64 = 0;

/// The kind of a KV transfer group, as far as block-id handling cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKind {
    /// Attention (full, sliding window, MLA, ...): ids are logical blocks, expanded to kernel blocks.
    Attention,
    /// Mamba/GDN state (`MambaSpec`): ids stay as they are and NULL blocks are dropped.
    Mamba,
}

/// The ids of a region: its group's ids, or for a shared region ([`SHARED_REGION_GROUP_ID`]) the ids of every
/// group in `shared_group_ids`, in that order (Python indexing: a negative group id counts from the end).
pub fn block_ids_for_region(
    by_group: &[Vec<i64>],
    group_index: i64,
    shared_group_ids: &[i64],
) -> Result<Vec<i64>, PlanError> {
    if group_index == SHARED_REGION_GROUP_ID {
        if shared_group_ids.is_empty() {
            return Err(PlanError::assertion("Shared packed region is missing its group ids."));
        }
        let mut out = Vec::new();
        for &g in shared_group_ids {
            out.extend_from_slice(index(by_group, g)?);
        }
        return Ok(out);
    }
    if group_index < 0 || group_index as u64 >= by_group.len() as u64 {
        return Err(PlanError::assertion("Transfer region references a missing KV group."));
    }
    Ok(by_group[group_index as usize].clone())
}

/// Why a request's blocks cannot be copied (vLLM's `err_msg` for the request, sent with `err_reqs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockMismatch {
    /// Producer and consumer have a different number of KV groups.
    GroupCount,
    /// In some group, the producer holds fewer blocks than the consumer asks for.
    ProducerHasFewer,
}

impl BlockMismatch {
    pub(crate) fn err_msg(self) -> &'static str {
        match self {
            BlockMismatch::GroupCount => "KV group count mismatch",
            BlockMismatch::ProducerHasFewer => "P num blocks less than D",
        }
    }
}

/// Block ids per KV group of the producer and of the consumer, group by group.
pub(crate) type PerGroupBlocks = (Vec<Vec<i64>>, Vec<Vec<i64>>);

/// Per-group (local, remote) ids to copy for one request: Mamba groups lose their NULL blocks on both sides;
/// when the producer has more blocks than the consumer wants (a prefix-cache hit on the consumer), only the
/// producer's last ones are sent. `kinds[g]` is looked up for every group (`IndexError` past the end).
pub(crate) fn match_request_blocks(
    kinds: &[GroupKind],
    local: &[Vec<i64>],
    remote: &[Vec<i64>],
) -> Result<Result<PerGroupBlocks, BlockMismatch>, PlanError> {
    if local.len() != remote.len() {
        return Ok(Err(BlockMismatch::GroupCount));
    }
    let mut out_local = Vec::with_capacity(local.len());
    let mut out_remote = Vec::with_capacity(local.len());
    for (g, (l, r)) in local.iter().zip(remote).enumerate() {
        let kind = *index(kinds, g as i64)?;
        let keep = |ids: &[i64]| -> Vec<i64> {
            match kind {
                GroupKind::Mamba => ids.iter().copied().filter(|&b| b != NULL_BLOCK_ID).collect(),
                GroupKind::Attention => ids.to_vec(),
            }
        };
        let (mut l, r) = (keep(l), keep(r));
        if l.len() < r.len() {
            return Ok(Err(BlockMismatch::ProducerHasFewer));
        }
        l.drain(..l.len() - r.len());
        out_local.push(l);
        out_remote.push(r);
    }
    Ok(Ok((out_local, out_remote)))
}

/// Logical → kernel block ids when one logical block spans `n` kernel blocks: attention block `k` becomes
/// `k*n .. k*n+n-1`; Mamba groups are unchanged. `n == 1` is the identity; `n <= 0` empties attention groups
/// (numpy's empty `arange`). int64 arithmetic wraps like numpy's.
pub(crate) fn logical_to_kernel_block_ids(
    kinds: &[GroupKind],
    by_group: Vec<Vec<i64>>,
    n: i64,
) -> Result<Vec<Vec<i64>>, PlanError> {
    if n == 1 {
        return Ok(by_group);
    }
    by_group
        .into_iter()
        .enumerate()
        .map(|(g, ids)| {
            Ok(match *index(kinds, g as i64)? {
                GroupKind::Mamba => ids,
                GroupKind::Attention => {
                    ids.iter().flat_map(|&k| (0..n.max(0)).map(move |j| k.wrapping_mul(n).wrapping_add(j))).collect()
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use GroupKind::{Attention, Mamba};

    #[test]
    fn shared_regions_concatenate_their_groups() {
        let by_group = vec![vec![1, 2], vec![7], vec![]];
        assert_eq!(block_ids_for_region(&by_group, -1, &[1, 0]).unwrap(), vec![7, 1, 2]);
        assert_eq!(block_ids_for_region(&by_group, -1, &[-3]).unwrap(), vec![1, 2]);
        assert_eq!(
            block_ids_for_region(&by_group, -1, &[3]).unwrap_err().to_string(),
            "IndexError: list index out of range"
        );
        assert_eq!(
            block_ids_for_region(&by_group, -1, &[]).unwrap_err().to_string(),
            "AssertionError: Shared packed region is missing its group ids."
        );
        assert_eq!(block_ids_for_region(&by_group, 1, &[0, 2]).unwrap(), vec![7], "shared ids ignored");
        assert!(block_ids_for_region(&by_group, 3, &[]).is_err());
        assert!(block_ids_for_region(&by_group, -2, &[]).is_err());
    }

    #[test]
    fn prefix_hits_send_the_tail_and_mamba_drops_null_blocks() {
        let (l, r) =
            match_request_blocks(&[Attention, Mamba], &[vec![1, 2, 3], vec![0, 4, 0, 5]], &[vec![9], vec![6, 0, 8]])
                .unwrap()
                .unwrap();
        assert_eq!(l, vec![vec![3], vec![4, 5]]);
        assert_eq!(r, vec![vec![9], vec![6, 8]]);
        // The consumer wants nothing from group 0: nothing is sent from it.
        let (l, _) = match_request_blocks(&[Attention], &[vec![1, 2]], &[vec![]]).unwrap().unwrap();
        assert_eq!(l, vec![Vec::<i64>::new()]);
        assert_eq!(
            match_request_blocks(&[Attention], &[vec![1]], &[vec![1, 2]]).unwrap(),
            Err(BlockMismatch::ProducerHasFewer)
        );
        assert_eq!(
            match_request_blocks(&[Attention], &[vec![1]], &[vec![1], vec![]]).unwrap(),
            Err(BlockMismatch::GroupCount)
        );
        assert!(
            match_request_blocks(&[Attention], &[vec![1], vec![2]], &[vec![1], vec![2]]).is_err(),
            "more groups than kinds"
        );
    }

    #[test]
    fn kernel_blocks_expand_attention_groups_only() {
        let out = logical_to_kernel_block_ids(&[Attention, Mamba], vec![vec![2, 5], vec![3]], 3).unwrap();
        assert_eq!(out, vec![vec![6, 7, 8, 15, 16, 17], vec![3]]);
        assert_eq!(logical_to_kernel_block_ids(&[], vec![vec![2]], 1).unwrap(), vec![vec![2]]);
    }
}
