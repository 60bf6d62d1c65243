//! Merging aligned regions that are adjacent on both sides: vLLM 0.33.0
//! `_coalesce_contiguous_transfer_regions` (`mooncake_connector.py`; `spec/PROTOCOL.md#coalescing`).
//!
//! Per-layer views of one packed block row are registered separately (so PP can align them by name), but copy
//! as one span. A run may skip page padding between views, never leave the row its first view began, and
//! never mix KV groups. With `promote_full_row`, a region (or run) starting at row offset 0 on both sides,
//! with equal stride, is widened to the whole row so that consecutive blocks coalesce into one copy.

use super::align::AlignedRegions;
use super::error::PlanError;
use super::pyfmt::to_i64;
use super::region::TransferRegion;

/// `nxt` may extend the run that began at `start` and currently ends with `prev`.
fn adjacent(start: &TransferRegion, prev: &TransferRegion, nxt: &TransferRegion) -> bool {
    let i = |v: i64| v as i128;
    prev.group_index == nxt.group_index
        && prev.shared_group_ids == nxt.shared_group_ids
        && prev.block_len == nxt.block_len
        && i(prev.base_addr) + i(prev.kv_block_len) <= i(nxt.base_addr)
        && i(nxt.base_addr) + i(nxt.kv_block_len) <= i(start.base_addr) + i(start.block_len)
}

/// One region covering a run: the first region, lengthened to the end of the last.
fn span(run: &[&TransferRegion]) -> Result<TransferRegion, PlanError> {
    let (first, last) = (run[0], run[run.len() - 1]);
    if run.len() == 1 {
        return Ok(first.clone());
    }
    let len = last.base_addr as i128 + last.kv_block_len as i128 - first.base_addr as i128;
    Ok(first.with_kv_block_len(to_i64(len, "coalesced region length")?))
}

fn promote(local: Vec<TransferRegion>, remote: Vec<TransferRegion>) -> AlignedRegions {
    local
        .into_iter()
        .zip(remote)
        .map(|(l, r)| {
            let widen = l.row_offset == 0
                && r.row_offset == 0
                && l.block_len == r.block_len
                && l.kv_block_len <= l.block_len
                && r.kv_block_len <= r.block_len;
            if widen {
                let (ll, rl) = (l.block_len, r.block_len);
                (l.with_kv_block_len(ll), r.with_kv_block_len(rl))
            } else {
                (l, r)
            }
        })
        .unzip()
}

/// Merges runs of regions adjacent on both sides, then (with `promote_full_row`) widens row-start regions.
/// Inputs of unequal length come back unchanged, as in vLLM. Fails only when a merged length leaves `i64`.
pub fn coalesce_contiguous_transfer_regions(
    local: &[TransferRegion],
    remote: &[TransferRegion],
    promote_full_row: bool,
) -> Result<AlignedRegions, PlanError> {
    if local.len() != remote.len() {
        return Ok((local.to_vec(), remote.to_vec()));
    }
    let finish = |l: Vec<TransferRegion>, r: Vec<TransferRegion>| if promote_full_row { promote(l, r) } else { (l, r) };
    if local.len() <= 1 {
        return Ok(finish(local.to_vec(), remote.to_vec()));
    }
    let mut merged_local = Vec::new();
    let mut merged_remote = Vec::new();
    let mut run_local = vec![&local[0]];
    let mut run_remote = vec![&remote[0]];
    for (l, r) in local[1..].iter().zip(&remote[1..]) {
        let extends = adjacent(run_local[0], run_local[run_local.len() - 1], l)
            && adjacent(run_remote[0], run_remote[run_remote.len() - 1], r);
        if extends {
            run_local.push(l);
            run_remote.push(r);
            continue;
        }
        merged_local.push(span(&run_local)?);
        merged_remote.push(span(&run_remote)?);
        run_local = vec![l];
        run_remote = vec![r];
    }
    merged_local.push(span(&run_local)?);
    merged_remote.push(span(&run_remote)?);
    Ok(finish(merged_local, merged_remote))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view at `offset` into a packed row of 1000 bytes starting at `row`.
    fn view(name: &str, row: i64, offset: i64, len: i64) -> TransferRegion {
        TransferRegion {
            layer_name: name.into(),
            layer_index: 0,
            base_addr: row + offset,
            block_len: 1000,
            kv_block_len: len,
            group_index: 0,
            shared_group_ids: vec![],
            row_offset: offset,
        }
    }

    #[test]
    fn views_of_one_row_merge_across_padding_then_widen() {
        // Three 300-byte views with 20 bytes of padding after each, on both sides.
        let local: Vec<_> = (0..3).map(|i| view(&format!("l{i}"), 5000, i * 320, 300)).collect();
        let remote: Vec<_> = (0..3).map(|i| view(&format!("l{i}"), 9000, i * 320, 300)).collect();
        let (l, r) = coalesce_contiguous_transfer_regions(&local, &remote, false).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].layer_name.as_str(), l[0].base_addr, l[0].kv_block_len), ("l0", 5000, 940));
        assert_eq!((r[0].base_addr, r[0].kv_block_len), (9000, 940));
        let (l, r) = coalesce_contiguous_transfer_regions(&local, &remote, true).unwrap();
        assert_eq!((l[0].kv_block_len, r[0].kv_block_len), (1000, 1000));
    }

    #[test]
    fn a_run_never_leaves_the_row_it_started_in() {
        // 400 + 400 fit in the 1000-byte row; a third 400-byte view would end at 1200.
        let local: Vec<_> = (0..3).map(|i| view("x", 0, i * 400, 400)).collect();
        let remote = local.clone();
        let (l, _) = coalesce_contiguous_transfer_regions(&local, &remote, false).unwrap();
        assert_eq!(l.iter().map(|x| (x.base_addr, x.kv_block_len)).collect::<Vec<_>>(), [(0, 800), (800, 400)]);
    }

    #[test]
    fn each_side_is_bounded_by_its_own_first_row() {
        // Local rows are 1000 bytes, remote rows 5000: the remote could take the third view, the local cannot.
        let local: Vec<_> = (0..3).map(|i| view("x", 0, i * 400, 400)).collect();
        let remote: Vec<_> = local.iter().map(|v| TransferRegion { block_len: 5000, ..v.clone() }).collect();
        let (l, r) = coalesce_contiguous_transfer_regions(&local, &remote, false).unwrap();
        assert_eq!(l.iter().map(|x| x.kv_block_len).collect::<Vec<_>>(), [800, 400]);
        assert_eq!(r.iter().map(|x| x.kv_block_len).collect::<Vec<_>>(), [800, 400]);
        let (l, _) = coalesce_contiguous_transfer_regions(&remote, &local, false).unwrap();
        assert_eq!(l.len(), 2, "and the other way round");
    }

    #[test]
    fn both_sides_must_be_adjacent_and_groups_never_mix() {
        let local = vec![view("a", 0, 0, 100), view("b", 0, 100, 100)];
        let mut remote = local.clone();
        remote[1].base_addr = 50; // overlaps the first remote view
        let (l, _) = coalesce_contiguous_transfer_regions(&local, &remote, false).unwrap();
        assert_eq!(l.len(), 2);
        let mut local2 = local.clone();
        local2[1].group_index = 1;
        let mut remote2 = local.clone();
        remote2[1].group_index = 1;
        let (l, _) = coalesce_contiguous_transfer_regions(&local2, &remote2, false).unwrap();
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn promotion_needs_row_start_on_both_sides_and_equal_strides() {
        let l = view("a", 0, 0, 100);
        let mut r = view("a", 0, 0, 100);
        r.row_offset = -1;
        let (pl, _) =
            coalesce_contiguous_transfer_regions(std::slice::from_ref(&l), std::slice::from_ref(&r), true).unwrap();
        assert_eq!(pl[0].kv_block_len, 100);
        r.row_offset = 0;
        r.block_len = 2000;
        let (pl, _) = coalesce_contiguous_transfer_regions(std::slice::from_ref(&l), &[r], true).unwrap();
        assert_eq!(pl[0].kv_block_len, 100);
        // Unequal counts: returned untouched, even with promotion requested.
        let (pl, pr) = coalesce_contiguous_transfer_regions(std::slice::from_ref(&l), &[], true).unwrap();
        assert_eq!((pl, pr.len()), (vec![l], 0));
    }
}
