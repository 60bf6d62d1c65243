//! The order in which a prefiller plans a KV group's (local, remote) block pairs (behaviour item
//! `paired_block_order`): as the request lists them, or with every run that descends by one on both sides
//! reversed first — vLLM 0.34.0 `_normalize_paired_block_order` (`mooncake_connector.py`), which
//! `MooncakeConnectorWorker._build_transfer_params` applies to each group before the logical → kernel block
//! expansion, so that such a run becomes one ascending run and one descriptor.
//!
//! vLLM computes the mask with numpy (`np.diff(...) == -1` on both sides, int64 with wrap-around). It only ever
//! passes lists of equal length; [`normalize_paired_block_order`] also reproduces what numpy does with unequal
//! ones (broadcasting a side whose `diff` has one element, `ValueError` for shapes that cannot broadcast, Python
//! slice clamping), as the golden vectors record it.

use super::error::{ExceptionKind, PlanError};
use crate::spec::behaviour::PairedBlockOrder;

/// `np.diff(ids)[k] == -1` at position `k` of a broadcast mask (a `diff` with one element applies everywhere).
fn steps_down(ids: &[i64], k: usize) -> bool {
    let k = if ids.len() == 2 { 0 } else { k };
    ids[k + 1].wrapping_sub(ids[k]) == -1
}

/// Reverses `ids[start..=stop]`, clamped to the list like a Python slice.
fn reverse_clamped(ids: &mut [i64], start: usize, stop: usize) {
    let n = ids.len();
    let (a, b) = (start.min(n), stop.saturating_add(1).min(n));
    if a < b {
        ids[a..b].reverse();
    }
}

/// The pairs `(src[i], dst[i])` with every run that steps by −1 on both sides reversed, everything else in
/// place: `[9, 8, 7, 1, 2]`, `[29, 28, 27, 11, 12]` → `[7, 8, 9, 1, 2]`, `[27, 28, 29, 11, 12]`. A run that
/// descends on one side only, or by more than one, stays; fewer than two ids stay.
///
/// Lists of unequal length (never passed by vLLM) behave as under numpy: a side with exactly two ids has one
/// step, applied at every position; other shapes that differ raise numpy's `ValueError`.
pub fn normalize_paired_block_order(src: &[i64], dst: &[i64]) -> Result<(Vec<i64>, Vec<i64>), PlanError> {
    let (mut s, mut d) = (src.to_vec(), dst.to_vec());
    if src.len() < 2 {
        return Ok((s, d));
    }
    let (a, b) = (src.len() - 1, dst.len().saturating_sub(1));
    if a != b && a != 1 && b != 1 {
        return Err(PlanError::new(
            ExceptionKind::ValueError,
            format!("operands could not be broadcast together with shapes ({a},) ({b},) "),
        ));
    }
    let m = if a == 1 { b } else { a };
    let mask: Vec<bool> = (0..m).map(|k| steps_down(src, k) && steps_down(dst, k)).collect();
    // Each maximal run of descending steps k in start..stop covers the ids start..=stop.
    let mut k = 0;
    while k < m {
        if !mask[k] {
            k += 1;
            continue;
        }
        let start = k;
        while k < m && mask[k] {
            k += 1;
        }
        reverse_clamped(&mut s, start, k);
        reverse_clamped(&mut d, start, k);
    }
    Ok((s, d))
}

/// One KV group's pairs put in the order `order` plans them. Lists of unequal length are not pairs (a group
/// whose consumer side is empty under `block_groups = flattened`) and stay as they are.
pub(crate) fn order_pairs(order: PairedBlockOrder, local: &mut Vec<i64>, remote: &mut Vec<i64>) {
    match order {
        PairedBlockOrder::AsGiven => {}
        PairedBlockOrder::DescendingRunsReversed => {
            if local.len() != remote.len() {
                return;
            }
            if let Ok((l, r)) = normalize_paired_block_order(local, remote) {
                *local = l;
                *remote = r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &[i64], d: &[i64]) -> (Vec<i64>, Vec<i64>) {
        normalize_paired_block_order(s, d).unwrap()
    }

    #[test]
    fn runs_descending_on_both_sides_are_reversed_with_their_pairs() {
        assert_eq!(norm(&[4, 3, 2, 1], &[13, 12, 11, 10]), (vec![1, 2, 3, 4], vec![10, 11, 12, 13]));
        // Mixed: a descending run, then an ascending one; and the other way round.
        assert_eq!(
            norm(&[9, 8, 7, 1, 2, 3], &[29, 28, 27, 11, 12, 13]),
            (vec![7, 8, 9, 1, 2, 3], vec![27, 28, 29, 11, 12, 13])
        );
        assert_eq!(norm(&[1, 2, 9, 8], &[11, 12, 29, 28]), (vec![1, 2, 8, 9], vec![11, 12, 28, 29]));
        // Two runs with a jump between them are reversed each in place.
        assert_eq!(norm(&[5, 4, 9, 8], &[15, 14, 19, 18]), (vec![4, 5, 8, 9], vec![14, 15, 18, 19]));
        // Every pair survives: the multiset of (src, dst) pairs is unchanged.
        let (s, d) = norm(&[6, 5, 4, 40, 8, 7], &[16, 15, 14, 50, 18, 17]);
        let mut pairs: Vec<_> = s.iter().zip(&d).collect();
        pairs.sort();
        assert_eq!(pairs, vec![(&4, &14), (&5, &15), (&6, &16), (&7, &17), (&8, &18), (&40, &50)]);
    }

    #[test]
    fn a_run_descending_on_one_side_only_or_by_more_than_one_stays() {
        assert_eq!(norm(&[4, 3, 2, 1], &[10, 11, 12, 13]), (vec![4, 3, 2, 1], vec![10, 11, 12, 13]));
        assert_eq!(norm(&[1, 2, 3], &[13, 12, 11]), (vec![1, 2, 3], vec![13, 12, 11]));
        assert_eq!(norm(&[8, 6, 4], &[18, 16, 14]), (vec![8, 6, 4], vec![18, 16, 14]));
        assert_eq!(norm(&[4, 3, 2], &[14, 12, 10]), (vec![4, 3, 2], vec![14, 12, 10]));
        // One pass, as vLLM: reversing [3, 2, 1] makes the step from 3 to the next 2 descend on both sides, and
        // that step stays.
        assert_eq!(norm(&[3, 2, 1, 2], &[13, 12, 11, 12]), (vec![1, 2, 3, 2], vec![11, 12, 13, 12]));
        // Only the part that descends on both sides: the last step descends on the remote side only.
        assert_eq!(norm(&[3, 2, 1, 2], &[13, 12, 11, 10]), (vec![1, 2, 3, 2], vec![11, 12, 13, 10]));
    }

    #[test]
    fn fewer_than_two_pairs_stay_and_two_may_turn() {
        assert_eq!(norm(&[], &[]), (vec![], vec![]));
        assert_eq!(norm(&[7], &[3]), (vec![7], vec![3]));
        assert_eq!(norm(&[8, 7], &[4, 3]), (vec![7, 8], vec![3, 4]));
        assert_eq!(norm(&[8, 7], &[3, 4]), (vec![8, 7], vec![3, 4]));
    }

    #[test]
    fn steps_are_int64_with_wrap_around_and_unequal_lengths_follow_numpy() {
        // MAX - MIN wraps to -1: numpy sees a descending step.
        assert_eq!(norm(&[i64::MIN, i64::MAX], &[7, 6]), (vec![i64::MAX, i64::MIN], vec![6, 7]));
        assert_eq!(norm(&[i64::MAX, i64::MIN], &[7, 6]), (vec![i64::MAX, i64::MIN], vec![7, 6]));
        // A two-id side broadcasts its one step; the slices clamp to each list.
        assert_eq!(norm(&[5, 4], &[9, 8, 7]), (vec![4, 5], vec![7, 8, 9]));
        assert_eq!(norm(&[5, 4], &[]), (vec![5, 4], vec![]), "(1,) and (0,) broadcast to an empty mask");
        assert_eq!(
            normalize_paired_block_order(&[5, 4, 3], &[]).unwrap_err().to_string(),
            "ValueError: operands could not be broadcast together with shapes (2,) (0,) "
        );
        assert_eq!(
            normalize_paired_block_order(&[5, 4, 3], &[9, 8, 7, 6]).unwrap_err().to_string(),
            "ValueError: operands could not be broadcast together with shapes (2,) (3,) "
        );
    }

    #[test]
    fn any_input_keeps_its_pairs_and_lengths_and_never_panics() {
        // A small linear congruential generator: lists of runs in every direction, equal and unequal lengths.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        for _ in 0..5000 {
            let (n, m) = (next(9) as usize, next(9) as usize);
            let m = if next(4) == 0 { m } else { n };
            let mut list = |len: usize| -> Vec<i64> {
                let mut v = vec![next(20) as i64 - 10];
                while v.len() < len {
                    let step = [-1, -1, 1, 3, i64::MAX][next(5) as usize];
                    v.push(v[v.len() - 1].wrapping_add(step));
                }
                v.truncate(len);
                v
            };
            let (src, dst) = (list(n), list(m));
            let Ok((s, d)) = normalize_paired_block_order(&src, &dst) else { continue };
            assert_eq!((s.len(), d.len()), (src.len(), dst.len()));
            if n == m {
                let mut before: Vec<_> = src.iter().zip(&dst).collect();
                let mut after: Vec<_> = s.iter().zip(&d).collect();
                before.sort();
                after.sort();
                assert_eq!(before, after, "{src:?} {dst:?}");
            }
        }
    }

    #[test]
    fn the_rule_value_decides() {
        let (mut l, mut r) = (vec![5, 4], vec![9, 8]);
        order_pairs(PairedBlockOrder::AsGiven, &mut l, &mut r);
        assert_eq!((&l, &r), (&vec![5, 4], &vec![9, 8]));
        order_pairs(PairedBlockOrder::DescendingRunsReversed, &mut l, &mut r);
        assert_eq!((l, r), (vec![4, 5], vec![8, 9]));
        // Not pairs: left alone (no broadcasting inside the planner).
        let (mut l, mut r) = (vec![5, 4, 3], vec![]);
        order_pairs(PairedBlockOrder::DescendingRunsReversed, &mut l, &mut r);
        assert_eq!(l, vec![5, 4, 3]);
    }
}
