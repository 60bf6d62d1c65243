//! The prefiller's handling of one pull, up to the descriptors, in vLLM 0.33.0 `send_kv_to_decode` order
//! (`mooncake_connector.py`): pairing check → PP-mismatch check → layout preparation
//! (`_prepare_transfer_regions`: expand, align, head re-sharding check, coalesce) → region-length validation
//! → descriptors per round (`_build_transfer_params`). Push-protocol §5, §6.5, §7, §11.
//!
//! Every refusal maps to an `ERROR` reply whose `err_msg` is [`Refusal::err_msg`]. Not modelled here: the
//! `layout_id` cache and `LAYOUT_MISS` (state of the caller; see [`Producer::admit_stored`]), waiting for
//! producer blocks, and the transfer itself.

use super::align::align_transfer_regions;
use super::coalesce::coalesce_contiguous_transfer_regions;
use super::descriptors::{build_transfer_params, ReadyRequest, TransferBatch};
use super::error::PlanError;
use super::expand::{expand_transfer_regions, RegionColumns};
use super::packed::pp_mismatch_hides_packed_layers;
use super::producer::{Producer, RegisteredLayout};
use super::pull::Pull;
use super::pyfmt::list_repr;
use super::region::{TransferRegion, SHARED_REGION_GROUP_ID};
use super::topology::tp_ratio;
use super::validate::{validate_asymmetric_region_lengths, validate_head_resharding_layout};

/// Producer and consumer regions paired index by index, ready for [`Producer::build`]. They depend only on
/// the two layouts, so a caller may keep them per peer layout (vLLM does, keyed by the layout fields and by
/// `layout_id`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreparedRegions {
    pub local: Vec<TransferRegion>,
    pub remote: Vec<TransferRegion>,
}

/// A pull the producer accepted: the decoder ranks it pairs with and the regions to copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    pub target_ranks: Vec<i64>,
    pub regions: PreparedRegions,
}

/// Why the producer answers a pull with `ERROR`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The decoder's TP rank is not one this producer rank pairs with.
    NotPaired { remote_tp_rank: i64, local_tp_rank: i64, expected: Vec<i64> },
    /// PP sizes differ and a packed row on one side kept only its first layer name.
    PpMismatchHidesPackedLayers { local_pp_size: i64, remote_pp_size: i64 },
    /// The layouts cannot be paired (shared-group metadata, alignment, head re-sharding).
    Layout(String),
    /// Paired regions have lengths the TP ratio does not allow.
    RegionLengths(String),
    /// vLLM raised; its generic handler replies with `str(exception)`.
    Exception(PlanError),
}

impl Refusal {
    /// The `err_msg` of the `ERROR` reply, byte for byte as vLLM 0.33.0 sends it.
    pub fn err_msg(&self) -> String {
        match self {
            Refusal::NotPaired { remote_tp_rank, local_tp_rank, expected } => format!(
                "This D tp_rank {remote_tp_rank} is not paired with P tp_rank {local_tp_rank}; expected one of {}.",
                list_repr(expected)
            ),
            Refusal::PpMismatchHidesPackedLayers { local_pp_size, remote_pp_size } => format!(
                "Mooncake non-page-contiguous packed regions keep only the first layer name, so they cannot be \
                 aligned across PP sizes {local_pp_size} and {remote_pp_size}."
            ),
            Refusal::Layout(m) | Refusal::RegionLengths(m) => m.clone(),
            Refusal::Exception(e) => e.err_msg().to_string(),
        }
    }
}

impl From<PlanError> for Refusal {
    fn from(e: PlanError) -> Self {
        Refusal::Exception(e)
    }
}

/// A layout's columns as vLLM's `_get_transfer_regions` receives them, then expanded. Group indices fall
/// back to `layer_groups` when the layout has none.
fn regions_of(
    producer: &Producer,
    layout: &RegisteredLayout,
    shared: Option<&[Vec<i64>]>,
    rows: Option<&[i64]>,
) -> Result<Vec<TransferRegion>, PlanError> {
    let fallback: Vec<i64>;
    let groups = if layout.registered_group_indices.is_empty() {
        fallback = layout.registered_layer_names.iter().map(|n| producer.layer_groups.get(n).copied().unwrap_or(0)).collect();
        &fallback[..]
    } else {
        &layout.registered_group_indices[..]
    };
    expand_transfer_regions(&RegionColumns {
        base_addrs: &layout.kv_caches_base_addr,
        block_lens: &layout.block_lens,
        kv_block_lens: &layout.kv_block_lens,
        layer_names: &layout.registered_layer_names,
        layer_indices: &layout.registered_layer_indices,
        group_indices: Some(groups),
        shared_group_ids: shared,
        row_offsets: rows,
    })
}

/// An optional column, or `None` when its length is not one per registered layer.
fn per_layer<'a, T>(column: &'a [T], layout: &RegisteredLayout) -> Option<&'a [T]> {
    (column.len() == layout.registered_layer_names.len()).then_some(column)
}

impl Producer {
    /// Decoder TP ranks this producer rank serves (`TransferTopology.handshake_target_ranks`, no remote DCP).
    pub fn handshake_target_ranks(&self, remote_tp_size: i64) -> Result<Vec<i64>, PlanError> {
        self.config.topology()?.handshake_target_ranks(remote_tp_size, 1)
    }

    /// Step 1: the pull's rank must be one of [`Self::handshake_target_ranks`]; returns them.
    pub fn check_pairing(&self, pull: &Pull) -> Result<Vec<i64>, Refusal> {
        let expected = self.handshake_target_ranks(pull.remote_tp_size)?;
        if !expected.contains(&pull.remote_tp_rank) {
            return Err(Refusal::NotPaired { remote_tp_rank: pull.remote_tp_rank, local_tp_rank: self.config.tp_rank, expected });
        }
        Ok(expected)
    }

    /// Step 2's condition: PP sizes differ and either side has an opaque packed row.
    pub fn pp_mismatch_hides_packed_layers(&self, pull: &Pull) -> bool {
        pp_mismatch_hides_packed_layers(
            self.config.pp_size,
            pull.remote_pp_size,
            self.has_opaque_packed_row,
            &pull.layout.registered_row_offsets,
            &pull.layout.kv_block_lens,
            &pull.layout.block_lens,
        )
    }

    /// Step 3 (`_prepare_transfer_regions`): both layouts expanded to regions, aligned by layer name (layers the
    /// decoder lacks are skipped when PP sizes differ), checked for head re-sharding, and — when the TP ratio
    /// is 1 or the producer cache is replicated — coalesced, widened to full rows only if alignment dropped
    /// nothing on either side.
    pub fn prepare(&self, pull: &Pull) -> Result<PreparedRegions, Refusal> {
        let own = &self.layout;
        let own_shared = per_layer(&own.registered_shared_group_ids, own);
        if own_shared.is_none() && own.registered_group_indices.contains(&SHARED_REGION_GROUP_ID) {
            return Err(Refusal::Layout(
                "Mooncake shared-group metadata does not match registered layers, so a shared packed region \
                 cannot be transferred."
                    .into(),
            ));
        }
        let local = regions_of(self, own, own_shared, per_layer(&own.registered_row_offsets, own))?;
        let peer = &pull.layout;
        let remote = regions_of(
            self,
            peer,
            per_layer(&peer.registered_shared_group_ids, peer),
            per_layer(&peer.registered_row_offsets, peer),
        )?;
        let (local_count, remote_count) = (local.len(), remote.len());
        let (local, remote) =
            align_transfer_regions(&local, &remote, pull.remote_pp_size != self.config.pp_size).map_err(Refusal::Layout)?;
        let cfg = &self.config;
        if let Some(msg) = validate_head_resharding_layout(
            cfg.tp_size,
            pull.remote_tp_size,
            cfg.total_num_kv_heads,
            cfg.use_mla || cfg.has_mamba_layers(),
            &local,
            |name| self.layer_specs.get(name),
        )? {
            return Err(Refusal::Layout(msg));
        }
        if tp_ratio(cfg.tp_size, pull.remote_tp_size)? == 1 || cfg.cache_replicated() {
            let covered_both_sides = local.len() == local_count && remote.len() == remote_count;
            let (local, remote) = coalesce_contiguous_transfer_regions(&local, &remote, covered_both_sides)?;
            return Ok(PreparedRegions { local, remote });
        }
        Ok(PreparedRegions { local, remote })
    }

    /// Step 4 (`_validate_asymmetric_region_lengths` with this producer's TP size, replication and heads).
    pub fn validate(&self, regions: &PreparedRegions, remote_tp_size: i64) -> Result<(), Refusal> {
        let cfg = &self.config;
        match validate_asymmetric_region_lengths(
            &regions.local,
            &regions.remote,
            cfg.tp_size,
            remote_tp_size,
            cfg.cache_replicated(),
            cfg.known_kv_heads(),
        )? {
            Some(msg) => Err(Refusal::RegionLengths(msg)),
            None => Ok(()),
        }
    }

    fn admit_with(&self, pull: &Pull, prepare: impl FnOnce() -> Result<PreparedRegions, Refusal>) -> Result<Admission, Refusal> {
        let target_ranks = self.check_pairing(pull)?;
        if self.pp_mismatch_hides_packed_layers(pull) {
            return Err(Refusal::PpMismatchHidesPackedLayers { local_pp_size: self.config.pp_size, remote_pp_size: pull.remote_pp_size });
        }
        let regions = prepare()?;
        self.validate(&regions, pull.remote_tp_size)?;
        Ok(Admission { target_ranks, regions })
    }

    /// Steps 1–4 for a pull that carries its layout.
    pub fn admit(&self, pull: &Pull) -> Result<Admission, Refusal> {
        self.admit_with(pull, || self.prepare(pull))
    }

    /// Steps 1–4 for a layout-less pull (nonzero `layout_id`, no base addresses) whose layout the caller found
    /// in its cache: the stored regions replace step 3 and are validated again, as vLLM does. (When the cache
    /// misses, vLLM replies `LAYOUT_MISS` after steps 1–2.)
    pub fn admit_stored(&self, pull: &Pull, stored: &PreparedRegions) -> Result<Admission, Refusal> {
        self.admit_with(pull, || Ok(stored.clone()))
    }

    /// Descriptors for one round of ready requests (`_build_transfer_params`).
    pub fn build(&self, regions: &PreparedRegions, pull: &Pull, ready: &[ReadyRequest]) -> Result<TransferBatch, PlanError> {
        build_transfer_params(&self.config, &regions.local, &regions.remote, pull.remote_tp_rank, pull.remote_tp_size, ready)
    }

    /// How many decoder workers must settle a request before the producer may free it (`resolve_need_send`):
    /// one per paired TP rank, times the decoder's PP size when that differs from ours and exceeds 1.
    pub fn need_send(&self, target_ranks: &[i64], remote_pp_size: i64) -> i64 {
        let n = target_ranks.len() as i64;
        if remote_pp_size > 1 && remote_pp_size != self.config.pp_size {
            n.saturating_mul(remote_pp_size)
        } else {
            n
        }
    }
}
