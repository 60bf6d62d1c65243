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
use super::descriptors::{build_transfer_params_by, build_whole_blocks, ReadyRequest, TransferBatch};
use super::error::PlanError;
use super::expand::{expand_transfer_regions, RegionColumns};
use super::packed::pp_mismatch_hides_packed_layers;
use super::producer::{Producer, RegisteredLayout};
use super::pull::Pull;
use super::pyfmt::list_repr;
use super::region::{TransferRegion, SHARED_REGION_GROUP_ID};
use super::topology::tp_ratio;
use super::validate::{validate_asymmetric_region_lengths, validate_head_resharding_layout};
use crate::spec::behaviour::{
    DestinationStride, NeedSend, PairingCheck, RegionAlignment, RegionCoalescing, ReplicatedProducer, TpBytePlan,
};

/// Producer and consumer regions paired index by index, ready for [`Producer::build`]. They depend only on
/// the two layouts, so a caller may keep them per peer layout (vLLM does, keyed by the layout fields and by
/// `layout_id`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreparedRegions {
    /// The prefiller's regions.
    pub local: Vec<TransferRegion>,
    /// The decoder's regions, `remote[i]` paired with `local[i]`.
    pub remote: Vec<TransferRegion>,
}

/// A pull the producer accepted: the decoder ranks it pairs with and the regions to copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// The decoder TP ranks this prefiller rank writes to.
    pub target_ranks: Vec<i64>,
    /// The paired regions.
    pub regions: PreparedRegions,
}

/// Why the producer answers a pull with `ERROR`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The decoder's TP rank is not one this producer rank pairs with.
    NotPaired {
        /// The decoder's TP rank.
        remote_tp_rank: i64,
        /// This producer's TP rank.
        local_tp_rank: i64,
        /// The decoder ranks it pairs with.
        expected: Vec<i64>,
    },
    /// This producer rank is not among the ranks it computes for the decoder's TP size (`pairing_check = own`).
    NotPairedOwn {
        /// This producer's TP rank.
        local_tp_rank: i64,
        /// The producer ranks it computes for the decoder's TP size.
        expected: Vec<i64>,
    },
    /// PP sizes differ and a packed row on one side kept only its first layer name.
    PpMismatchHidesPackedLayers {
        /// The producer's PP size.
        local_pp_size: i64,
        /// The decoder's PP size.
        remote_pp_size: i64,
    },
    /// The layouts cannot be paired (shared-group metadata, alignment, head re-sharding).
    Layout(String),
    /// Paired regions have lengths the TP ratio does not allow.
    RegionLengths(String),
    /// vLLM raised; its generic handler replies with `str(exception)`.
    Exception(PlanError),
    /// An int of the pull is outside the planner's 64-bit signed range (vLLM's Python ints have no such
    /// limit; the text is ours).
    OutOfRange(super::WireRangeError),
}

/// The `err_msg` of the `ERROR` reply ([`Refusal::err_msg`]).
impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.err_msg())
    }
}
impl std::error::Error for Refusal {}

impl Refusal {
    /// The `err_msg` of the `ERROR` reply, byte for byte as vLLM 0.33.0 sends it.
    pub fn err_msg(&self) -> String {
        match self {
            Refusal::NotPaired { remote_tp_rank, local_tp_rank, expected } => format!(
                "This D tp_rank {remote_tp_rank} is not paired with P tp_rank {local_tp_rank}; expected one of {}.",
                list_repr(expected)
            ),
            Refusal::NotPairedOwn { local_tp_rank, expected } => {
                format!("This P tp_rank {local_tp_rank} not in remote D target ranks {}", list_repr(expected))
            }
            Refusal::PpMismatchHidesPackedLayers { local_pp_size, remote_pp_size } => format!(
                "Mooncake non-page-contiguous packed regions keep only the first layer name, so they cannot be \
                 aligned across PP sizes {local_pp_size} and {remote_pp_size}."
            ),
            Refusal::Layout(m) | Refusal::RegionLengths(m) => m.clone(),
            Refusal::Exception(e) => e.err_msg().to_string(),
            Refusal::OutOfRange(e) => e.to_string(),
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
        fallback =
            layout.registered_layer_names.iter().map(|n| producer.layer_groups.get(n).copied().unwrap_or(0)).collect();
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
        match self.rules.pairing_check {
            PairingCheck::Remote if !expected.contains(&pull.remote_tp_rank) => Err(Refusal::NotPaired {
                remote_tp_rank: pull.remote_tp_rank,
                local_tp_rank: self.config.tp_rank,
                expected,
            }),
            PairingCheck::Own if !expected.contains(&self.config.tp_rank) => {
                Err(Refusal::NotPairedOwn { local_tp_rank: self.config.tp_rank, expected })
            }
            _ => Ok(expected),
        }
    }

    /// Step 2's condition: PP sizes differ and either side has an opaque packed row.
    pub fn pp_mismatch_hides_packed_layers(&self, pull: &Pull) -> bool {
        // The check arrived with packed rows (0.32.0), together with skipping layers whenever PP sizes differ.
        if self.rules.region_alignment != RegionAlignment::ByLayerNamePartialAcrossPp {
            return false;
        }
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
        match self.rules.region_alignment {
            RegionAlignment::Zip => return Ok(self.prepare_zip(pull)),
            RegionAlignment::ByPosition => return self.prepare_by_position(pull),
            _ => {}
        }
        let own = &self.layout;
        let own_shared = per_layer(&own.registered_shared_group_ids, own);
        if own_shared.is_none() && own.registered_group_indices.contains(&SHARED_REGION_GROUP_ID) {
            return Err(Refusal::Layout(
                "Mooncake shared-group metadata does not match registered layers, so a shared packed region \
                 cannot be transferred."
                    .into(),
            ));
        }
        self.check_columns(own)?;
        let local = self.halves(regions_of(
            self,
            &self.with_kv_lens(own),
            own_shared,
            per_layer(&own.registered_row_offsets, own),
        )?);
        self.check_columns(&pull.layout)?;
        let peer = &self.with_kv_lens(&pull.layout);
        let remote = self.halves(regions_of(
            self,
            peer,
            per_layer(&peer.registered_shared_group_ids, peer),
            per_layer(&peer.registered_row_offsets, peer),
        )?);
        let (local_count, remote_count) = (local.len(), remote.len());
        let partial = self.rules.partial_layers(self.config.pp_size, pull.remote_pp_size);
        let (local, remote) =
            align_transfer_regions(&local, &remote, partial).map_err(|e| Refusal::Layout(e.to_string()))?;
        let cfg = &self.config;
        // Head re-sharding arrived in 0.30.0, region coalescing in 0.32.0.
        if self.rules.tp_byte_plan == TpBytePlan::SenderPlanHeadResharding {
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
        }
        if self.rules.region_coalescing == RegionCoalescing::AdjacentInRow
            && (tp_ratio(cfg.tp_size, pull.remote_tp_size)? == 1 || cfg.cache_replicated())
        {
            let covered_both_sides = local.len() == local_count && remote.len() == remote_count;
            let (local, remote) = coalesce_contiguous_transfer_regions(&local, &remote, covered_both_sides)?;
            return Ok(PreparedRegions { local, remote });
        }
        Ok(PreparedRegions { local, remote })
    }

    /// Step 4 (`_validate_asymmetric_region_lengths` with this producer's TP size, replication and heads).
    pub fn validate(&self, regions: &PreparedRegions, remote_tp_size: i64) -> Result<(), Refusal> {
        let cfg = &self.config;
        if self.rules.region_alignment == RegionAlignment::Zip {
            // Before 0.19.0 nothing is checked: the lists are zipped.
            return Ok(());
        }
        let heads = if self.rules.replicated_producer == ReplicatedProducer::ClampedToHeads {
            cfg.known_kv_heads()
        } else {
            None
        };
        match validate_asymmetric_region_lengths(
            &regions.local,
            &regions.remote,
            cfg.tp_size,
            remote_tp_size,
            cfg.cache_replicated_by(self.rules.replicated_producer),
            heads,
        )? {
            Some(msg) => Err(Refusal::RegionLengths(msg)),
            None => Ok(()),
        }
    }

    fn admit_with(
        &self,
        pull: &Pull,
        prepare: impl FnOnce() -> Result<PreparedRegions, Refusal>,
    ) -> Result<Admission, Refusal> {
        let target_ranks = self.check_pairing(pull)?;
        if self.pp_mismatch_hides_packed_layers(pull) {
            return Err(Refusal::PpMismatchHidesPackedLayers {
                local_pp_size: self.config.pp_size,
                remote_pp_size: pull.remote_pp_size,
            });
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
    pub fn build(
        &self,
        regions: &PreparedRegions,
        pull: &Pull,
        ready: &[ReadyRequest],
    ) -> Result<TransferBatch, PlanError> {
        if self.rules.destination_stride == DestinationStride::ProducerBlockLen {
            return Ok(build_whole_blocks(self.rules.paired_block_order, &regions.local, &regions.remote, ready));
        }
        build_transfer_params_by(
            &self.config,
            &self.rules,
            &regions.local,
            &regions.remote,
            pull.remote_tp_rank,
            pull.remote_tp_size,
            ready,
        )
    }

    /// How many decoder workers must settle a request before the producer may free it (`resolve_need_send`):
    /// one per paired TP rank, times the decoder's PP size when that differs from ours and exceeds 1.
    pub fn need_send(&self, target_ranks: &[i64], remote_pp_size: i64) -> i64 {
        let n = target_ranks.len() as i64;
        if self.rules.need_send == NeedSend::TpTargetsTimesDecoderPp
            && remote_pp_size > 1
            && remote_pp_size != self.config.pp_size
        {
            n.saturating_mul(remote_pp_size)
        } else {
            n
        }
    }
}

/// The columns a revision's layout check names, by field name.
fn column_len(layout: &RegisteredLayout, field: &str) -> usize {
    match field {
        "kv_caches_base_addr" => layout.kv_caches_base_addr.len(),
        "block_lens" => layout.block_lens.len(),
        "kv_block_lens" => layout.kv_block_lens.len(),
        "registered_layer_names" => layout.registered_layer_names.len(),
        "registered_layer_indices" => layout.registered_layer_indices.len(),
        "registered_group_indices" => layout.registered_group_indices.len(),
        "registered_shared_group_ids" => layout.registered_shared_group_ids.len(),
        "registered_row_offsets" => layout.registered_row_offsets.len(),
        _ => 0,
    }
}

/// Older revisions' layout handling (`region_alignment` `zip` and `by-position`, K/V halves).
impl Producer {
    /// The revision's equal-length check on one side's columns (`behaviour.equal_length_fields`).
    fn check_columns(&self, layout: &RegisteredLayout) -> Result<(), Refusal> {
        let Some(check) = &self.column_check else { return Ok(()) };
        let lens: Vec<usize> = check.fields.iter().map(|f| column_len(layout, f)).collect();
        if lens.iter().any(|&l| l != lens[0]) {
            return Err(Refusal::Exception(PlanError::assertion(check.message_for(&lens))));
        }
        Ok(())
    }

    /// A layout whose revision carries no `kv_block_lens` moves whole blocks: its block lengths stand in.
    fn with_kv_lens(&self, layout: &RegisteredLayout) -> RegisteredLayout {
        let mut l = layout.clone();
        let stated = self.column_check.as_ref().is_some_and(|c| c.fields.iter().any(|f| f == "kv_block_lens"));
        if !stated {
            l.kv_block_lens = l.block_lens.clone();
        }
        l
    }

    /// Regions split into K and V halves where the revision and this producer's layout say so: each attention
    /// region becomes two, the second `kv` bytes further, each carrying `kv` bytes per block — `kv` being the
    /// stated `kv_block_len` where the revision carries one, else half the block.
    fn halves(&self, regions: Vec<TransferRegion>) -> Vec<TransferRegion> {
        let cfg = &self.config;
        if cfg.use_mla || !self.rules.splits_halves(cfg.blocks_first, cfg.has_mamba_layers()) {
            return regions;
        }
        let stated = self.column_check.as_ref().is_some_and(|c| c.fields.iter().any(|f| f == "kv_block_lens"));
        let mut out = Vec::with_capacity(regions.len() * 2);
        for r in regions {
            let mamba = usize::try_from(r.group_index).ok().and_then(|g| cfg.groups.get(g))
                == Some(&super::blocks::GroupKind::Mamba);
            if mamba {
                out.push(r);
                continue;
            }
            let kv = if stated { r.kv_block_len } else { r.block_len / 2 };
            let mut v = r.clone();
            v.base_addr = r.base_addr.wrapping_add(kv);
            v.kv_block_len = kv;
            out.push(TransferRegion { kv_block_len: kv, ..r });
            out.push(v);
        }
        out
    }

    /// Regions of one side by position (0.19.0-0.23.0: no layer names travel).
    fn positional(&self, layout: &RegisteredLayout) -> Vec<TransferRegion> {
        let regions = (0..layout.kv_caches_base_addr.len())
            .map(|i| TransferRegion {
                layer_name: format!("#{i}"),
                layer_index: i as i64,
                base_addr: layout.kv_caches_base_addr[i],
                block_len: layout.block_lens.get(i).copied().unwrap_or(0),
                kv_block_len: layout.block_lens.get(i).copied().unwrap_or(0),
                group_index: 0,
                shared_group_ids: vec![],
                row_offset: super::region::UNKNOWN_ROW_OFFSET,
            })
            .collect();
        self.halves(regions)
    }

    /// `region_alignment = by-position`: both sides' regions in order; the counts are checked with the lengths.
    fn prepare_by_position(&self, pull: &Pull) -> Result<PreparedRegions, Refusal> {
        self.check_columns(&self.layout)?;
        self.check_columns(&pull.layout)?;
        Ok(PreparedRegions { local: self.positional(&self.layout), remote: self.positional(&pull.layout) })
    }

    /// `region_alignment = zip`: the producer's regions and the decoder's base addresses, truncated to the
    /// shorter list; every block placed by the producer's own block length.
    fn prepare_zip(&self, pull: &Pull) -> PreparedRegions {
        let block_len = self.layout.block_lens.first().copied().unwrap_or(0);
        let region = |i: usize, base: i64| TransferRegion {
            layer_name: format!("#{i}"),
            layer_index: i as i64,
            base_addr: base,
            block_len,
            kv_block_len: block_len,
            group_index: 0,
            shared_group_ids: vec![],
            row_offset: super::region::UNKNOWN_ROW_OFFSET,
        };
        let n = self.layout.kv_caches_base_addr.len().min(pull.layout.kv_caches_base_addr.len());
        PreparedRegions {
            local: (0..n).map(|i| region(i, self.layout.kv_caches_base_addr[i])).collect(),
            remote: (0..n).map(|i| region(i, pull.layout.kv_caches_base_addr[i])).collect(),
        }
    }
}
