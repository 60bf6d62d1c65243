//! Pairing producer regions with consumer regions: vLLM 0.33.0 `_align_transfer_regions`
//! (`mooncake_connector.py`; `spec/PROTOCOL.md#alignment`).
//!
//! Regions are keyed by `(layer name, occurrence)`, so a layer registered several times (one region per K/V
//! half or per head) matches occurrence by occurrence, and PP stages that own different layers still line up.

use std::collections::HashMap;

use super::pyfmt::tuple_repr;
use super::region::TransferRegion;

/// Regions of both sides, paired index by index.
pub type AlignedRegions = (Vec<TransferRegion>, Vec<TransferRegion>);

/// Why the regions of both sides cannot be paired; the text is vLLM's `err_msg` (`spec/PROTOCOL.md#alignment`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlignError {
    /// A producer region whose (layer name, occurrence) the consumer did not register.
    #[error(
        "Mooncake producer registered layer has no matching consumer occurrence: {layer} occurrence {occurrence}."
    )]
    NoConsumerOccurrence {
        /// The layer name.
        layer: String,
        /// Which registration of that name (0 for the first).
        occurrence: usize,
    },
    /// Paired regions with different layer indices.
    #[error("Mooncake registered layer index mismatch for {layer}: producer={producer}, consumer={consumer}.")]
    LayerIndex {
        /// The layer name.
        layer: String,
        /// The producer's index.
        producer: i64,
        /// The consumer's index.
        consumer: i64,
    },
    /// Paired regions with different KV group indices.
    #[error("Mooncake registered group index mismatch for {layer}: producer={producer}, consumer={consumer}.")]
    GroupIndex {
        /// The layer name.
        layer: String,
        /// The producer's group index.
        producer: i64,
        /// The consumer's group index.
        consumer: i64,
    },
    /// Paired shared regions whose sharing groups differ (both sides gave them).
    #[error(
        "Mooncake shared-group set mismatch for {layer}: producer={}, consumer={}.",
        tuple_repr(producer),
        tuple_repr(consumer)
    )]
    SharedGroups {
        /// The layer name.
        layer: String,
        /// The producer's groups.
        producer: Vec<i64>,
        /// The consumer's groups.
        consumer: Vec<i64>,
    },
}

fn keyed(regions: &[TransferRegion]) -> Vec<((&str, usize), &TransferRegion)> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    regions
        .iter()
        .map(|r| {
            let n = seen.entry(r.layer_name.as_str()).or_insert(0);
            let key = (r.layer_name.as_str(), *n);
            *n += 1;
            (key, r)
        })
        .collect()
}

/// For each local region in order, the remote region with the same key. A local key without a remote match
/// is skipped only when `allow_partial_layers` (PP sizes differ) and the remote has no region of that name
/// at all; otherwise the first mismatch is returned as the error text vLLM sends as `err_msg`.
pub fn align_transfer_regions(
    local: &[TransferRegion],
    remote: &[TransferRegion],
    allow_partial_layers: bool,
) -> Result<AlignedRegions, AlignError> {
    let remote_by_key: HashMap<(&str, usize), &TransferRegion> = keyed(remote).into_iter().collect();
    let mut out_local = Vec::new();
    let mut out_remote = Vec::new();
    for ((name, occurrence), l) in keyed(local) {
        let Some(&r) = remote_by_key.get(&(name, occurrence)) else {
            if allow_partial_layers && !remote_by_key.contains_key(&(name, 0)) {
                continue;
            }
            return Err(AlignError::NoConsumerOccurrence { layer: name.to_string(), occurrence });
        };
        if l.layer_index != r.layer_index {
            return Err(AlignError::LayerIndex {
                layer: name.to_string(),
                producer: l.layer_index,
                consumer: r.layer_index,
            });
        }
        if l.group_index != r.group_index {
            return Err(AlignError::GroupIndex {
                layer: name.to_string(),
                producer: l.group_index,
                consumer: r.group_index,
            });
        }
        if !l.shared_group_ids.is_empty() && !r.shared_group_ids.is_empty() && l.shared_group_ids != r.shared_group_ids
        {
            return Err(AlignError::SharedGroups {
                layer: name.to_string(),
                producer: l.shared_group_ids.clone(),
                consumer: r.shared_group_ids.clone(),
            });
        }
        out_local.push(l.clone());
        out_remote.push(r.clone());
    }
    Ok((out_local, out_remote))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(name: &str, index: i64, addr: i64) -> TransferRegion {
        TransferRegion {
            layer_name: name.into(),
            layer_index: index,
            base_addr: addr,
            block_len: 64,
            kv_block_len: 64,
            group_index: 0,
            shared_group_ids: vec![],
            row_offset: 0,
        }
    }

    #[test]
    fn repeated_names_pair_by_occurrence_not_position() {
        // Local: a(K), a(V), b. Remote lists b first.
        let local = [region("a", 0, 1), region("a", 0, 2), region("b", 1, 3)];
        let remote = [region("b", 1, 30), region("a", 0, 10), region("a", 0, 20)];
        let (l, r) = align_transfer_regions(&local, &remote, false).unwrap();
        assert_eq!(l, local.to_vec());
        assert_eq!(r.iter().map(|x| x.base_addr).collect::<Vec<_>>(), [10, 20, 30]);
    }

    #[test]
    fn partial_layers_only_skip_names_the_peer_lacks_entirely() {
        let local = [region("a", 0, 1), region("a", 0, 2), region("c", 2, 3)];
        let remote = [region("a", 0, 10)];
        // "c" is absent remotely: skipped with PP mismatch. The second "a" is not: still an error.
        assert_eq!(
            align_transfer_regions(&local, &remote, true).unwrap_err().to_string(),
            "Mooncake producer registered layer has no matching consumer occurrence: a occurrence 1."
        );
        let (l, _) = align_transfer_regions(&local[..1], &remote, true).unwrap();
        assert_eq!(l.len(), 1);
        let (l, _) = align_transfer_regions(&[local[0].clone(), local[2].clone()], &remote, true).unwrap();
        assert_eq!(l.len(), 1);
        assert!(align_transfer_regions(&[local[0].clone(), local[2].clone()], &remote, false).is_err());
    }

    #[test]
    fn shared_group_sets_are_printed_as_python_tuples() {
        let mut l = region("a", 0, 1);
        let mut r = region("a", 0, 2);
        l.shared_group_ids = vec![0, 1];
        r.shared_group_ids = vec![1];
        assert_eq!(
            align_transfer_regions(&[l.clone()], &[r.clone()], false).unwrap_err().to_string(),
            "Mooncake shared-group set mismatch for a: producer=(0, 1), consumer=(1,)."
        );
        r.shared_group_ids.clear();
        assert!(align_transfer_regions(&[l], &[r], false).is_ok(), "an empty set is not compared");
    }
}
