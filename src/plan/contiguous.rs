//! Splitting paired block-id lists into runs that are consecutive on both sides: vLLM 0.33.0
//! `group_concurrent_contiguous` (`mooncake_connector.py`), which is written with numpy.
//!
//! The numpy behaviour is reproduced exactly, including for lists of unequal length (which vLLM never passes
//! itself): the break mask is `diff(src) != 1 | diff(dst) != 1` under numpy broadcasting, so a side whose
//! `diff` has one element applies it to every position, shapes that cannot broadcast raise numpy's
//! `ValueError`, and `np.split` cuts each list at the break positions with slice clamping (a shorter list
//! yields empty tail groups). `diff` is computed in int64 with numpy's wrap-around.
//!
//! vLLM 0.34.0 replaced it with `_contiguous_runs` ([`contiguous_runs`]: each run's start index and length, and an
//! assertion instead of broadcasting when the lengths differ). `_build_transfer_params` only ever passes lists
//! of equal length, where both cut the same runs, so the planner keeps [`group_concurrent_contiguous`] for every
//! revision; the golden vectors of 0.34.0 (`plan/contiguous_runs_0.34.0.jsonl`,
//! `plan/build_transfer_params_0.34.0.jsonl`) check both.

use super::error::{ExceptionKind, PlanError};

/// Runs of `src` and `dst` (as two parallel lists of groups) that step by one on both sides.
pub type BlockRuns = (Vec<Vec<i64>>, Vec<Vec<i64>>);

fn diff_len(n: usize) -> usize {
    n.saturating_sub(1)
}

/// `np.diff(ids) != 1` at position `k` of a broadcast mask (`len == 1` broadcasts its single element).
fn breaks_at(ids: &[i64], k: usize) -> bool {
    let k = if diff_len(ids.len()) == 1 { 0 } else { k };
    ids[k + 1].wrapping_sub(ids[k]) != 1
}

/// `np.split(ids, cuts)`: pieces `ids[start:end]` between consecutive cut points, clamped like slicing.
fn split(ids: &[i64], cuts: &[usize]) -> Vec<Vec<i64>> {
    let n = ids.len();
    let mut points = Vec::with_capacity(cuts.len() + 2);
    points.push(0);
    points.extend_from_slice(cuts);
    points.push(n);
    points
        .windows(2)
        .map(|w| {
            let (start, end) = (w[0].min(n), w[1].min(n));
            if start < end {
                ids[start..end].to_vec()
            } else {
                Vec::new()
            }
        })
        .collect()
}

/// Groups consecutive runs. Empty `src` gives no groups at all, whatever `dst` holds.
pub fn group_concurrent_contiguous(src: &[i64], dst: &[i64]) -> Result<BlockRuns, PlanError> {
    if src.is_empty() {
        return Ok((vec![], vec![]));
    }
    let (a, b) = (diff_len(src.len()), diff_len(dst.len()));
    if a != b && a != 1 && b != 1 {
        return Err(PlanError::new(
            ExceptionKind::ValueError,
            format!("operands could not be broadcast together with shapes ({a},) ({b},) "),
        ));
    }
    let mask_len = if a == 1 { b } else { a };
    let cuts: Vec<usize> = (0..mask_len).filter(|&k| breaks_at(src, k) || breaks_at(dst, k)).map(|k| k + 1).collect();
    Ok((split(src, &cuts), split(dst, &cuts)))
}

/// Start index and length of each run that steps by +1 on both sides: vLLM 0.34.0 `_contiguous_runs`.
/// Lists of unequal length raise vLLM's `AssertionError`.
pub fn contiguous_runs(src: &[i64], dst: &[i64]) -> Result<(Vec<usize>, Vec<usize>), PlanError> {
    if src.len() != dst.len() {
        return Err(PlanError::assertion("Source and destination ids must pair up."));
    }
    if src.is_empty() {
        return Ok((vec![], vec![]));
    }
    let starts: Vec<usize> = std::iter::once(0)
        .chain((1..src.len()).filter(|&k| src[k].wrapping_sub(src[k - 1]) != 1 || dst[k].wrapping_sub(dst[k - 1]) != 1))
        .collect();
    let lens =
        starts.iter().zip(starts.iter().skip(1).chain(std::iter::once(&src.len()))).map(|(a, b)| b - a).collect();
    Ok((starts, lens))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_break_where_either_side_jumps() {
        let (s, d) = group_concurrent_contiguous(&[1, 2, 3, 7, 8], &[10, 11, 20, 21, 22]).unwrap();
        assert_eq!(s, vec![vec![1, 2], vec![3], vec![7, 8]]);
        assert_eq!(d, vec![vec![10, 11], vec![20], vec![21, 22]]);
        let (s, _) = group_concurrent_contiguous(&[5, 4, 4], &[1, 2, 3]).unwrap();
        assert_eq!(s, vec![vec![5], vec![4], vec![4]], "descending and repeated ids are breaks");
    }

    #[test]
    fn a_single_step_broadcasts_over_the_other_side() {
        // dst diff is [2] (one element): every position breaks, and dst runs out of ids.
        let (s, d) = group_concurrent_contiguous(&[1, 2, 3], &[5, 7]).unwrap();
        assert_eq!(s, vec![vec![1], vec![2], vec![3]]);
        assert_eq!(d, vec![vec![5], vec![7], vec![]]);
        // src diff has one element [1]; dst has three steps of one: no breaks, dst kept whole.
        let (s, d) = group_concurrent_contiguous(&[4, 5], &[0, 1, 2, 3]).unwrap();
        assert_eq!((s, d), (vec![vec![4, 5]], vec![vec![0, 1, 2, 3]]));
        // One src id and an empty dst: both diffs are empty.
        let (s, d) = group_concurrent_contiguous(&[9], &[]).unwrap();
        assert_eq!((s, d), (vec![vec![9]], vec![vec![]]));
    }

    #[test]
    fn shapes_that_do_not_broadcast_raise_numpys_error() {
        assert_eq!(
            group_concurrent_contiguous(&[1, 2, 3, 4], &[1, 2, 3]).unwrap_err().to_string(),
            "ValueError: operands could not be broadcast together with shapes (3,) (2,) "
        );
        assert!(group_concurrent_contiguous(&[], &[1, 2, 3]).unwrap().0.is_empty());
    }

    #[test]
    fn contiguous_runs_cut_where_group_concurrent_contiguous_does() {
        let (src, dst) = ([1, 2, 3, 7, 8, 5, 4], [10, 11, 20, 21, 22, 9, 8]);
        assert_eq!(contiguous_runs(&src, &dst).unwrap(), (vec![0, 2, 3, 5, 6], vec![2, 1, 2, 1, 1]));
        let (s, _) = group_concurrent_contiguous(&src, &dst).unwrap();
        assert_eq!(s.iter().map(Vec::len).collect::<Vec<_>>(), vec![2, 1, 2, 1, 1]);
        assert_eq!(contiguous_runs(&[], &[]).unwrap(), (vec![], vec![]));
        assert_eq!(contiguous_runs(&[i64::MAX, i64::MIN], &[0, 1]).unwrap(), (vec![0], vec![2]), "wraps to +1");
        assert_eq!(
            contiguous_runs(&[1, 2], &[1]).unwrap_err().to_string(),
            "AssertionError: Source and destination ids must pair up."
        );
    }

    #[test]
    fn int64_steps_wrap_like_numpy() {
        // i64::MAX - i64::MIN wraps to -1 in int64: a break, not a step of one.
        let (s, _) = group_concurrent_contiguous(&[i64::MIN, i64::MAX], &[0, 1]).unwrap();
        assert_eq!(s.len(), 2);
        // i64::MIN - i64::MAX wraps to +1: numpy sees a step of one.
        let (s, _) = group_concurrent_contiguous(&[i64::MAX, i64::MIN], &[0, 1]).unwrap();
        assert_eq!(s.len(), 1);
    }
}
