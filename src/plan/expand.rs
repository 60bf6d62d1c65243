//! Registered-layout columns → [`TransferRegion`]s: vLLM 0.33.0 `_expand_transfer_regions`
//! (`mooncake_connector.py`). The layout travels as parallel arrays (fields 6–13 of `MooncakeXferMetadata`,
//! `spec/PROTOCOL.md#regions`); this zips them after the same length checks, with the same assertion texts.

use super::error::PlanError;
use super::region::{TransferRegion, UNKNOWN_ROW_OFFSET};

/// The parallel columns of one side's registered layout. `None` for an optional column means "not given":
/// group 0, no shared groups, [`UNKNOWN_ROW_OFFSET`] for every region.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegionColumns<'a> {
    /// `kv_caches_base_addr`: each region's base address.
    pub base_addrs: &'a [i64],
    /// `block_lens`: each region's stride between blocks.
    pub block_lens: &'a [i64],
    /// `kv_block_lens`: each region's payload bytes per block.
    pub kv_block_lens: &'a [i64],
    /// `registered_layer_names`.
    pub layer_names: &'a [String],
    /// `registered_layer_indices`.
    pub layer_indices: &'a [i64],
    /// `registered_group_indices`: each region's KV group, or `-1` for a shared region.
    pub group_indices: Option<&'a [i64]>,
    /// `registered_shared_group_ids`: the groups sharing each region.
    pub shared_group_ids: Option<&'a [Vec<i64>]>,
    /// `registered_row_offsets`: each region's offset in its packed block row, or `-1`.
    pub row_offsets: Option<&'a [i64]>,
}

/// One region per index of the columns. Unequal columns fail with vLLM's `AssertionError` texts (the shared
/// group and row offset checks are asserts without a message).
pub fn expand_transfer_regions(c: &RegionColumns<'_>) -> Result<Vec<TransferRegion>, PlanError> {
    let n = c.layer_names.len();
    let lens = [c.base_addrs.len(), c.block_lens.len(), c.kv_block_lens.len(), n, c.layer_indices.len()];
    if lens.iter().any(|&l| l != lens[0]) {
        return Err(PlanError::assertion(format!(
            "Mooncake transfer regions require matching metadata lengths, got base_addrs={}, block_lens={}, \
             kv_block_lens={}, layer_names={}, layer_indices={}.",
            lens[0], lens[1], lens[2], lens[3], lens[4]
        )));
    }
    if let Some(g) = c.group_indices {
        if g.len() != n {
            return Err(PlanError::assertion(format!(
                "Mooncake transfer regions require matching group metadata lengths, got group_indices={}, layer_names={n}.",
                g.len()
            )));
        }
    }
    if c.shared_group_ids.is_some_and(|s| s.len() != n) || c.row_offsets.is_some_and(|r| r.len() != n) {
        return Err(PlanError::assertion(""));
    }
    Ok((0..n)
        .map(|i| TransferRegion {
            layer_name: c.layer_names[i].clone(),
            layer_index: c.layer_indices[i],
            base_addr: c.base_addrs[i],
            block_len: c.block_lens[i],
            kv_block_len: c.kv_block_lens[i],
            group_index: c.group_indices.map_or(0, |g| g[i]),
            shared_group_ids: c.shared_group_ids.map_or_else(Vec::new, |s| s[i].clone()),
            row_offset: c.row_offsets.map_or(UNKNOWN_ROW_OFFSET, |r| r[i]),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("layers.{i}")).collect()
    }

    #[test]
    fn missing_columns_take_their_defaults() {
        let ln = names(2);
        let c = RegionColumns {
            base_addrs: &[100, 200],
            block_lens: &[16, 16],
            kv_block_lens: &[8, 8],
            layer_names: &ln,
            layer_indices: &[0, 1],
            ..Default::default()
        };
        let r = expand_transfer_regions(&c).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[1].base_addr, r[1].group_index, r[1].row_offset), (200, 0, -1));
        assert!(r[1].shared_group_ids.is_empty());
    }

    #[test]
    fn column_lengths_are_checked_in_vllm_order() {
        let ln = names(2);
        let c = RegionColumns {
            base_addrs: &[100, 200],
            block_lens: &[16],
            kv_block_lens: &[8, 8],
            layer_names: &ln,
            layer_indices: &[0, 1],
            group_indices: Some(&[0]),
            ..Default::default()
        };
        let e = expand_transfer_regions(&c).unwrap_err().to_string();
        assert!(e.ends_with("got base_addrs=2, block_lens=1, kv_block_lens=2, layer_names=2, layer_indices=2."), "{e}");
        let c = RegionColumns { block_lens: &[16, 16], ..c };
        assert_eq!(
            expand_transfer_regions(&c).unwrap_err().to_string(),
            "AssertionError: Mooncake transfer regions require matching group metadata lengths, got group_indices=1, layer_names=2."
        );
        let c = RegionColumns { group_indices: None, row_offsets: Some(&[0]), ..c };
        assert_eq!(expand_transfer_regions(&c).unwrap_err().to_string(), "AssertionError: ");
    }
}
