//! Packed rows that lost their layer names: vLLM 0.33.0 `_has_opaque_packed_row` and
//! `_pp_mismatch_hides_packed_layers` (`mooncake_connector.py`; `spec/PROTOCOL.md#pp-mismatch`).
//!
//! A packed block row whose layer views are not page-contiguous is registered as one region the size of the
//! row, at row offset 0, named after its first layer. Such a layout cannot be aligned by layer name against
//! a peer with another PP size.

/// Whether some region is a whole row at offset 0 (`row_offset == 0 && kv_block_len == block_len`). Columns
/// of different lengths, or none, say nothing: `false`.
pub fn has_opaque_packed_row(row_offsets: &[i64], kv_block_lens: &[i64], block_lens: &[i64]) -> bool {
    if row_offsets.is_empty() || row_offsets.len() != kv_block_lens.len() || row_offsets.len() != block_lens.len() {
        return false;
    }
    row_offsets.iter().zip(kv_block_lens).zip(block_lens).any(|((&o, &l), &s)| o == 0 && l == s)
}

/// Whether a PP-size mismatch meets an opaque packed row on either side (the prefiller then refuses the pull).
pub fn pp_mismatch_hides_packed_layers(
    local_pp_size: i64,
    remote_pp_size: i64,
    local_has_opaque_row: bool,
    remote_row_offsets: &[i64],
    remote_kv_block_lens: &[i64],
    remote_block_lens: &[i64],
) -> bool {
    local_pp_size != remote_pp_size
        && (local_has_opaque_row || has_opaque_packed_row(remote_row_offsets, remote_kv_block_lens, remote_block_lens))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_full_row_at_offset_zero_is_opaque() {
        assert!(has_opaque_packed_row(&[64, 0], &[32, 128], &[128, 128]));
        assert!(!has_opaque_packed_row(&[0, 64], &[64, 64], &[128, 128]), "page-contiguous views");
        assert!(!has_opaque_packed_row(&[-1], &[128], &[128]), "not a packed view");
        assert!(!has_opaque_packed_row(&[0, 0], &[128], &[128, 128]), "ragged columns");
    }

    #[test]
    fn equal_pp_sizes_always_align() {
        assert!(!pp_mismatch_hides_packed_layers(2, 2, true, &[0], &[8], &[8]));
        assert!(pp_mismatch_hides_packed_layers(2, 1, true, &[], &[], &[]));
        assert!(pp_mismatch_hides_packed_layers(1, 2, false, &[0], &[8], &[8]));
        assert!(!pp_mismatch_hides_packed_layers(1, 2, false, &[0], &[4], &[8]));
    }
}
