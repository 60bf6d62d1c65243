//! What the prefiller (producer) knows about itself when it plans: its parallel identity and model facts
//! ([`ProducerConfig`]), its registered layout ([`RegisteredLayout`], the same columns it would send), and
//! the per-layer facts vLLM 0.33.0's `MooncakeConnectorWorker` keeps (`transfer_group_index_by_layer`,
//! `_layer_specs`, `opaque_packed_storages`), as plain data.

use std::collections::HashMap;

use super::blocks::GroupKind;
use super::error::PlanError;
use super::rules::PlanRules;
use super::topology::TransferTopology;
use super::validate::LayerSpec;
use crate::spec::behaviour::{EqualLengthFields, ReplicatedProducer};

/// The producer worker's identity and model facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerConfig {
    /// This worker's tensor-parallel rank.
    pub tp_rank: i64,
    /// The prefiller's tensor-parallel size.
    pub tp_size: i64,
    /// The prefiller's pipeline-parallel size.
    pub pp_size: i64,
    /// `model_config.get_total_num_kv_heads()`.
    pub total_num_kv_heads: i64,
    /// Whether the model uses MLA (one latent KV cache, replicated on every TP rank).
    pub use_mla: bool,
    /// Kind of each KV transfer group, in group order (`kv_cache_config.transfer_groups`).
    pub groups: Vec<GroupKind>,
    /// Kernel blocks per logical block (vLLM `_physical_blocks_per_logical_kv_block`, normally 1).
    pub physical_blocks_per_logical: i64,
    /// The attention KV cache is blocks-first (`[blocks, 2, ...]` or `[blocks, heads, ...]`), which is what
    /// decides K/V halves where the revision's `kv_half_split` is `when-blocks-first`.
    pub blocks_first: bool,
}

impl ProducerConfig {
    /// Whether some transfer group holds Mamba state (vLLM `kv_cache_config.has_mamba_layers`).
    pub(crate) fn has_mamba_layers(&self) -> bool {
        self.groups.contains(&GroupKind::Mamba)
    }

    /// The head count the TP byte plan and the length validation use: known for non-MLA models without Mamba
    /// layers, `None` otherwise.
    pub fn known_kv_heads(&self) -> Option<i64> {
        (!self.use_mla && !self.has_mamba_layers()).then_some(self.total_num_kv_heads)
    }

    /// Whether every producer rank holds the whole KV cache (`TransferTopology.local_replicates_kv_cache`).
    pub fn cache_replicated(&self) -> bool {
        self.use_mla || self.tp_size > self.total_num_kv_heads
    }

    /// The same, by a revision's rule (0.19.x counted a TP size equal to the head count as replicated).
    pub(crate) fn cache_replicated_by(&self, rule: ReplicatedProducer) -> bool {
        match rule {
            ReplicatedProducer::NotConsidered => false,
            ReplicatedProducer::TpAtLeastHeads => self.use_mla || self.tp_size >= self.total_num_kv_heads,
            ReplicatedProducer::TpAboveHeads | ReplicatedProducer::ClampedToHeads => self.cache_replicated(),
        }
    }

    /// The worker's `TransferTopology` (DCP size 1, as the Mooncake worker builds it).
    pub(crate) fn topology(&self) -> Result<TransferTopology, PlanError> {
        TransferTopology::new(self.tp_rank, self.tp_size, self.total_num_kv_heads, self.use_mla, 1)
    }
}

/// One side's registered layout as the parallel columns of `MooncakeXferMetadata` (fields 6–13,
/// `spec/PROTOCOL.md#regions`). The first five columns must have equal lengths (else vLLM's `AssertionError`).
/// Group indices may be empty (then looked up per layer), otherwise they must match too. Shared group ids and
/// row offsets of any other length than the layer names count as not sent (except that a producer with a
/// shared region, group `-1`, then refuses the pull).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RegisteredLayout {
    /// Base address of each region.
    pub kv_caches_base_addr: Vec<i64>,
    /// Stride between consecutive blocks of each region.
    pub block_lens: Vec<i64>,
    /// Payload bytes per block of each region.
    pub kv_block_lens: Vec<i64>,
    /// The layer each region belongs to, by name.
    pub registered_layer_names: Vec<String>,
    /// The layer each region belongs to, by index.
    pub registered_layer_indices: Vec<i64>,
    /// Empty: every region's group comes from the producer's `layer_groups`.
    pub registered_group_indices: Vec<i64>,
    /// The KV groups sharing each region whose group index is `-1`.
    pub registered_shared_group_ids: Vec<Vec<i64>>,
    /// Each region's byte offset in its packed block row, `-1` when it is not such a view.
    pub registered_row_offsets: Vec<i64>,
}

/// Everything the producer side of the planner needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Producer {
    /// The worker's identity and model facts.
    pub config: ProducerConfig,
    /// This worker's own registered layout.
    pub layout: RegisteredLayout,
    /// Some region was registered as a whole non-page-contiguous row (vLLM: `opaque_packed_storages` is not
    /// empty). Such rows keep only their first layer name.
    pub has_opaque_packed_row: bool,
    /// Transfer group of each layer (`kv_cache_config.transfer_group_index_by_layer`); used for a layout that
    /// carries no group indices, with 0 for a layer not listed.
    pub layer_groups: HashMap<String, i64>,
    /// KV-cache spec of each local layer, for the head re-sharding check.
    pub layer_specs: HashMap<String, LayerSpec>,
    /// The revision's planning rules.
    pub rules: PlanRules,
    /// The layout columns that must have equal lengths, and the error otherwise (`behaviour.equal_length_fields`;
    /// `None` before 0.19.0, when only base addresses travel).
    pub column_check: Option<EqualLengthFields>,
}
