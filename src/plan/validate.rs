//! Checks the prefiller makes on a paired layout before copying anything (vLLM 0.33.0
//! `mooncake_connector.py`): region lengths against the TP ratio (`_validate_asymmetric_region_lengths`) and
//! the layouts that cannot be re-sharded by KV head (`MooncakeConnectorWorker._validate_head_resharding_layout`).
//! Push-protocol §11 "Region-length validation". Every `Ok(Some(text))` is an `err_msg` vLLM replies with.

use super::error::{ExceptionKind, PlanError};
use super::pyfmt::str_repr;
use super::region::TransferRegion;
use super::topology::tp_ratio;

/// Whether region lengths fit the TP ratio: equal counts; ratio 1 ⇒ equal lengths; ratio > 0 (producer has
/// more ranks) ⇒ remote = local × ratio; ratio < 0 ⇒ local = remote × |ratio|. With `total_num_kv_heads`
/// known, both TP sizes are first clamped to it (ranks beyond the head count replicate); unknown heads and a
/// replicated producer skip the length checks. `Err` is an exception vLLM raises (TP sizes not dividing).
pub fn validate_asymmetric_region_lengths(
    local: &[TransferRegion],
    remote: &[TransferRegion],
    local_tp_size: i64,
    remote_tp_size: i64,
    producer_cache_replicated: bool,
    total_num_kv_heads: Option<i64>,
) -> Result<Option<String>, PlanError> {
    if local.len() != remote.len() {
        return Ok(Some(
            "Mooncake asymmetric TP requires matching KV region counts between producer and consumer.".into(),
        ));
    }
    let (local_tp, remote_tp) = match total_num_kv_heads {
        Some(h) => (local_tp_size.min(h), remote_tp_size.min(h)),
        None if producer_cache_replicated => return Ok(None),
        None => (local_tp_size, remote_tp_size),
    };
    let ratio = tp_ratio(local_tp, remote_tp)?;
    for (idx, (l, r)) in local.iter().zip(remote).enumerate() {
        let (lk, rk) = (l.kv_block_len, r.kv_block_len);
        if ratio == 1 {
            if lk != rk {
                return Ok(Some(format!(
                    "Mooncake KV region length mismatch for homogeneous TP at region {idx}: local={lk}, remote={rk}."
                )));
            }
        } else if ratio > 0 {
            if rk as i128 != lk as i128 * ratio as i128 {
                return Ok(Some(format!(
                    "Mooncake destination KV region length does not match the producer TP ratio at region {idx}: \
                     local={lk}, remote={rk}, tp_ratio={ratio}."
                )));
            }
        } else if lk as i128 != rk as i128 * -(ratio as i128) {
            return Ok(Some(format!(
                "Mooncake source KV region length does not match the consumer TP ratio at region {idx}: \
                 local={lk}, remote={rk}, tp_ratio={ratio}."
            )));
        }
    }
    Ok(None)
}

/// What the head re-sharding check needs to know about a local layer's KV-cache spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerSpec {
    /// An `AttentionSpec`: `padded` when its page size exceeds the unpadded page size, `nvfp4` when its KV
    /// quantisation mode is NVFP4.
    Attention {
        /// The page size exceeds the unpadded page size.
        padded: bool,
        /// The KV quantisation mode is NVFP4.
        nvfp4: bool,
    },
    /// Any other spec (Mamba, ...): never blocks re-sharding.
    Other,
}

/// Refuses padded pages and NVFP4 caches when the producer and consumer split KV heads differently
/// (`min(tp, heads)` differs). Skipped for MLA and for models with Mamba layers (`skip`). The first region
/// (in order) whose spec forbids it gives the message. A region whose layer has no spec is a `KeyError`.
pub(crate) fn validate_head_resharding_layout<'s>(
    local_tp_size: i64,
    remote_tp_size: i64,
    total_num_kv_heads: i64,
    skip: bool,
    local: &[TransferRegion],
    spec_of: impl Fn(&str) -> Option<&'s LayerSpec>,
) -> Result<Option<String>, PlanError> {
    if skip || local_tp_size.min(total_num_kv_heads) == remote_tp_size.min(total_num_kv_heads) {
        return Ok(None);
    }
    for region in local {
        match spec_of(&region.layer_name).ok_or_else(|| key_error(&region.layer_name))? {
            LayerSpec::Other => {}
            LayerSpec::Attention { padded: true, .. } => {
                return Ok(Some(format!(
                    "Mooncake KV-head re-sharding is not supported for padded KV pages (layer {}).",
                    region.layer_name
                )))
            }
            LayerSpec::Attention { nvfp4: true, .. } => {
                return Ok(Some("Mooncake KV-head re-sharding is not supported for NVFP4 KV cache.".into()))
            }
            LayerSpec::Attention { .. } => {}
        }
    }
    Ok(None)
}

/// Python's `KeyError(key)` for a string key: the message is the key's `repr`.
fn key_error(key: &str) -> PlanError {
    PlanError::new(ExceptionKind::KeyError, str_repr(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions(lens: &[i64]) -> Vec<TransferRegion> {
        lens.iter()
            .enumerate()
            .map(|(i, &kv)| TransferRegion {
                layer_name: format!("l{i}"),
                layer_index: i as i64,
                base_addr: 0,
                block_len: kv,
                kv_block_len: kv,
                group_index: 0,
                shared_group_ids: vec![],
                row_offset: -1,
            })
            .collect()
    }

    #[test]
    fn lengths_follow_the_clamped_ratio() {
        // P tp 2 → D tp 4 with 8 heads: ratio -2, so P regions are twice D's.
        assert_eq!(
            validate_asymmetric_region_lengths(&regions(&[200]), &regions(&[100]), 2, 4, false, Some(8)),
            Ok(None)
        );
        assert_eq!(
            validate_asymmetric_region_lengths(&regions(&[200, 200]), &regions(&[100, 90]), 2, 4, false, Some(8)).unwrap().unwrap(),
            "Mooncake source KV region length does not match the consumer TP ratio at region 1: local=200, remote=90, tp_ratio=-2."
        );
        // Only 2 heads: both sides clamp to 2, so lengths must be equal.
        assert_eq!(
            validate_asymmetric_region_lengths(&regions(&[200]), &regions(&[100]), 2, 4, false, Some(2))
                .unwrap()
                .unwrap(),
            "Mooncake KV region length mismatch for homogeneous TP at region 0: local=200, remote=100."
        );
        // P tp 4 → D tp 1: D regions are 4× P's.
        assert_eq!(
            validate_asymmetric_region_lengths(&regions(&[100]), &regions(&[300]), 4, 1, false, None).unwrap().unwrap(),
            "Mooncake destination KV region length does not match the producer TP ratio at region 0: local=100, remote=300, tp_ratio=4."
        );
        // Unknown heads and a replicated producer: only the count matters.
        assert_eq!(validate_asymmetric_region_lengths(&regions(&[100]), &regions(&[7]), 4, 1, true, None), Ok(None));
        assert!(validate_asymmetric_region_lengths(&regions(&[100]), &regions(&[]), 4, 1, true, None)
            .unwrap()
            .is_some());
        assert_eq!(
            validate_asymmetric_region_lengths(&regions(&[1]), &regions(&[1]), 3, 2, false, None)
                .unwrap_err()
                .to_string(),
            "AssertionError: Local tensor parallel size 3 is not divisible by remote tensor parallel size 2."
        );
    }

    #[test]
    fn padded_pages_block_head_resharding_only_when_heads_split_differently() {
        let padded = LayerSpec::Attention { padded: true, nvfp4: false };
        let r = regions(&[10, 10]);
        assert_eq!(
            validate_head_resharding_layout(2, 1, 8, false, &r, |_| Some(&padded)).unwrap().unwrap(),
            "Mooncake KV-head re-sharding is not supported for padded KV pages (layer l0)."
        );
        // 2 heads: min(4, 2) == min(2, 2), nothing is re-sharded.
        assert_eq!(validate_head_resharding_layout(4, 2, 2, false, &r, |_| Some(&padded)), Ok(None));
        assert_eq!(validate_head_resharding_layout(2, 1, 8, true, &r, |_| Some(&padded)), Ok(None));
        let nvfp4 = LayerSpec::Attention { padded: false, nvfp4: true };
        assert_eq!(
            validate_head_resharding_layout(2, 1, 8, false, &r, |_| Some(&nvfp4)).unwrap().unwrap(),
            "Mooncake KV-head re-sharding is not supported for NVFP4 KV cache."
        );
        assert_eq!(
            validate_head_resharding_layout(2, 1, 8, false, &r, |_| None).unwrap_err().to_string(),
            "KeyError: 'l0'"
        );
    }
}
