//! Tensor-parallel topology of the prefiller: vLLM 0.33.0 `_get_tp_ratio` (`mooncake_connector.py`) and the
//! parts of `TransferTopology` (`kv_connector/utils.py`) the Mooncake prefiller uses: TP ratio, the decoder
//! ranks it pairs with (`handshake_target_ranks`), KV replication, DCP reader count, physical heads.
//! Push-protocol §11.

use super::error::{ExceptionKind, PlanError};
use super::pyfmt::{floordiv, modulo, to_i64};
use crate::limits::MAX_PLAN_RANKS;

/// TP ratio between this side and the peer: `local / remote` when `local >= remote`, else
/// `-(remote / local)`. The larger size must divide by the smaller (`AssertionError` with vLLM's text);
/// a size of 0 divides by zero (`ZeroDivisionError`), exactly as Python does.
pub fn tp_ratio(local_tp_size: i64, remote_tp_size: i64) -> Result<i64, PlanError> {
    let (l, r) = (local_tp_size as i128, remote_tp_size as i128);
    if l >= r {
        if modulo(l, r)? != 0 {
            return Err(PlanError::assertion(format!(
                "Local tensor parallel size {l} is not divisible by remote tensor parallel size {r}."
            )));
        }
        return to_i64(floordiv(l, r)?, "tp ratio");
    }
    if modulo(r, l)? != 0 {
        return Err(PlanError::assertion(format!(
            "Remote tensor parallel size {r} is not divisible by local tensor parallel size {l}."
        )));
    }
    to_i64(-floordiv(r, l)?, "tp ratio")
}

/// The local identity of `TransferTopology` (a worker's TP rank and size, model facts, DCP size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransferTopology {
    pub(crate) tp_rank: i64,
    pub(crate) tp_size: i64,
    pub(crate) total_num_kv_heads: i64,
    pub(crate) is_mla: bool,
    /// Decode context parallel size; the Mooncake worker leaves vLLM's default of 1.
    pub(crate) dcp_size: i64,
    /// `max(1, total_num_kv_heads // tp_size)`, computed on construction as vLLM's `__post_init__` does.
    pub local_physical_heads: i64,
}

impl TransferTopology {
    /// Fails like vLLM's constructor when `tp_size` is 0.
    pub fn new(
        tp_rank: i64,
        tp_size: i64,
        total_num_kv_heads: i64,
        is_mla: bool,
        dcp_size: i64,
    ) -> Result<Self, PlanError> {
        let heads = floordiv(total_num_kv_heads as i128, tp_size as i128)?.max(1);
        Ok(TransferTopology {
            tp_rank,
            tp_size,
            total_num_kv_heads,
            is_mla,
            dcp_size,
            local_physical_heads: to_i64(heads, "local physical heads")?,
        })
    }

    /// [`tp_ratio`] of this side against `remote_tp_size`.
    pub fn tp_ratio(&self, remote_tp_size: i64) -> Result<i64, PlanError> {
        tp_ratio(self.tp_size, remote_tp_size)
    }

    /// Whether every local rank holds the whole KV cache: MLA, or more TP ranks than KV heads.
    pub fn local_replicates_kv_cache(&self) -> bool {
        self.is_mla || self.tp_size > self.total_num_kv_heads
    }

    /// `tp_rank % dcp_size`.
    pub(crate) fn dcp_rank(&self) -> Result<i64, PlanError> {
        to_i64(modulo(self.tp_rank as i128, self.dcp_size as i128)?, "dcp rank")
    }

    /// Remote ranks whose DCP slice overlaps this rank's (`TransferTopology.dcp_source_ranks`).
    pub(crate) fn dcp_source_ranks(&self, remote_tp_size: i64, remote_dcp_size: i64) -> Result<Vec<i64>, PlanError> {
        let local_rank = self.dcp_rank()?;
        if self.dcp_size <= remote_dcp_size {
            // The remote ranks r in 0..remote_tp_size with r % dcp_size == local_rank: one residue class.
            let step = (self.dcp_size as i128).abs();
            let first = modulo(local_rank as i128, step)?;
            // `local_rank` is already reduced by `dcp_size`; a residue outside the class's range matches nothing.
            let matches_class = modulo(first, self.dcp_size as i128)? == local_rank as i128;
            let end = remote_tp_size as i128;
            let count = if matches_class && end > first { (end - first + step - 1) / step } else { 0 };
            check_rank_count(count)?;
            return Ok((0..count).map(|k| (first + k * step) as i64).collect());
        }
        Ok(vec![to_i64(modulo(local_rank as i128, remote_dcp_size as i128)?, "dcp source rank")?])
    }

    /// The decoder (remote) TP ranks this rank pairs with. A prefiller accepts a pull only from these ranks
    /// (`send_kv_to_decode`), and a decoder pulls from exactly these prefiller ranks.
    pub fn handshake_target_ranks(&self, remote_tp_size: i64, remote_dcp_size: i64) -> Result<Vec<i64>, PlanError> {
        if remote_dcp_size > 1 {
            return self.dcp_source_ranks(remote_tp_size, remote_dcp_size);
        }
        let ratio = self.tp_ratio(remote_tp_size)? as i128;
        if ratio > 0 {
            return Ok(vec![to_i64(floordiv(self.tp_rank as i128, ratio)?, "target rank")?]);
        }
        let abs = -ratio;
        check_rank_count(abs)?;
        let first = self.tp_rank as i128 * abs;
        (0..abs).map(|i| to_i64(first + i, "target rank")).collect()
    }

    /// How many local ranks read from one remote rank (`TransferTopology.dcp_consumer_count`).
    pub fn dcp_consumer_count(&self, remote_tp_size: i64, remote_dcp_size: i64) -> Result<i64, PlanError> {
        if remote_dcp_size > 1 {
            if self.dcp_size == 1 {
                return Ok(self.tp_size);
            }
            return to_i64(floordiv(self.dcp_size as i128, remote_dcp_size as i128)?.max(1), "dcp consumer count");
        }
        Ok(self.tp_ratio(remote_tp_size)?.max(1))
    }
}

fn check_rank_count(count: i128) -> Result<(), PlanError> {
    if count > MAX_PLAN_RANKS as i128 {
        return Err(PlanError::new(
            ExceptionKind::LimitExceeded,
            format!("{count} target ranks exceed the limit of {MAX_PLAN_RANKS}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_sign_says_which_side_is_wider() {
        assert_eq!(tp_ratio(8, 2), Ok(4));
        assert_eq!(tp_ratio(2, 8), Ok(-4));
        assert_eq!(tp_ratio(3, 3), Ok(1));
        assert_eq!(
            tp_ratio(6, 4).unwrap_err().to_string(),
            "AssertionError: Local tensor parallel size 6 is not divisible by remote tensor parallel size 4."
        );
        assert_eq!(
            tp_ratio(4, 6).unwrap_err().to_string(),
            "AssertionError: Remote tensor parallel size 6 is not divisible by local tensor parallel size 4."
        );
        // 0 >= 0 takes the first branch: 0 % 0.
        assert_eq!(tp_ratio(0, 0).unwrap_err().kind, ExceptionKind::ZeroDivisionError);
        assert_eq!(tp_ratio(0, 3).unwrap_err().message, "integer modulo by zero");
    }

    #[test]
    fn prefiller_pairs_with_one_or_several_decoder_ranks() {
        // P tp 4 rank 3, D tp 2: ratio 2, D rank 3 // 2 = 1.
        let t = TransferTopology::new(3, 4, 8, false, 1).unwrap();
        assert_eq!(t.handshake_target_ranks(2, 1).unwrap(), vec![1]);
        // D tp 8: ratio -2, D ranks 6 and 7.
        assert_eq!(t.handshake_target_ranks(8, 1).unwrap(), vec![6, 7]);
        assert_eq!(t.dcp_consumer_count(2, 1).unwrap(), 2);
        assert_eq!(t.dcp_consumer_count(8, 1).unwrap(), 1);
        assert!(!t.local_replicates_kv_cache());
        assert_eq!(t.local_physical_heads, 2);
        // A sharded remote DCP: every remote rank in this rank's residue class (local dcp 1 → all).
        assert_eq!(t.handshake_target_ranks(4, 4).unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(t.dcp_consumer_count(4, 4).unwrap(), 4);
        let sharded = TransferTopology::new(3, 4, 8, true, 4).unwrap();
        assert_eq!(sharded.handshake_target_ranks(8, 8).unwrap(), vec![3, 7]);
        // Equal DCP sizes: still the residue class (remote tp 8 has two ranks per DCP slice).
        assert_eq!(sharded.handshake_target_ranks(8, 4).unwrap(), vec![3, 7]);
        assert_eq!(sharded.handshake_target_ranks(2, 2).unwrap(), vec![1]);
        assert_eq!(sharded.dcp_consumer_count(2, 2).unwrap(), 2);
        assert!(sharded.local_replicates_kv_cache());
    }

    #[test]
    fn fan_out_is_bounded() {
        let t = TransferTopology::new(0, 1, 8, false, 1).unwrap();
        assert_eq!(t.handshake_target_ranks(1 << 40, 1).unwrap_err().kind, ExceptionKind::LimitExceeded);
    }
}
