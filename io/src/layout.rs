//! What a worker builds from the layout and model of its role configuration (the `config` of the testee
//! protocol's `start`, `mooncake_testee_protocol::LayoutConfig` and `ModelConfig`): the memory it registers
//! with its transfer engine, the layout a decoder core sends, and a prefiller's planner. The reference peer
//! builds its workers with it, and the conformance runner its own side of a case, from the same
//! configuration types and without linking the peer.

use mooncake_wire::plan::{has_opaque_packed_row, GroupKind, LayerSpec, Producer, ProducerConfig, RegisteredLayout};
use mooncake_wire::proto::memory::{provenance_bytes, Memory};
use mooncake_wire::proto::{DecoderLayout, WireProfile};

pub use mooncake_testee_protocol::{LayoutConfig, ModelConfig};

/// Why a layout or model configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// The per-region columns have different lengths.
    #[error("layout: kv_caches_base_addr, block_lens, kv_block_lens, registered_layer_names and registered_layer_indices need {regions} entries each")]
    Columns {
        /// The number of regions (`kv_caches_base_addr`'s length).
        regions: usize,
    },
    /// `num_blocks` or a block length is zero.
    #[error("layout: num_blocks and every block length must be positive")]
    Empty,
    /// More registered memory than the reference peer allocates ([`mooncake_wire::limits::MAX_TRANSFER_BYTES`]).
    #[error("layout: {total} bytes of registered memory is more than the reference peer allocates")]
    TooLarge {
        /// The bytes the layout registers.
        total: u64,
    },
    /// `model.group_kinds` names a kind other than `attn` (`attention`) or `mamba`.
    #[error("model.group_kinds: unknown kind {0:?} (attn or mamba)")]
    GroupKind(String),
}

/// What a worker builds from a [`LayoutConfig`] (the type is the testee protocol's).
pub trait LayoutExt {
    /// Refuses columns of different lengths, empty regions, and more memory than the peer allocates.
    fn check(&self) -> Result<(), LayoutError>;
    /// Registered memory: a prefiller's regions hold the provenance pattern, a decoder's are zeroed. Regions
    /// whose ranges coincide (packed views of one row) are registered once.
    fn memory(&self, provenance: bool) -> Memory;
    /// The layout as the planner reads it.
    fn registered(&self) -> RegisteredLayout;
    /// The layout as a decoder core sends it.
    fn decoder_layout(&self) -> DecoderLayout;
}

impl LayoutExt for LayoutConfig {
    fn check(&self) -> Result<(), LayoutError> {
        let n = self.kv_caches_base_addr.len();
        if self.block_lens.len() != n
            || self.kv_block_lens.len() != n
            || self.registered_layer_names.len() != n
            || self.registered_layer_indices.len() != n
        {
            return Err(LayoutError::Columns { regions: n });
        }
        if self.num_blocks == 0 || self.block_lens.contains(&0) {
            return Err(LayoutError::Empty);
        }
        let total: u64 = self.block_lens.iter().map(|b| b.saturating_mul(self.num_blocks)).sum();
        if total > mooncake_wire::limits::MAX_TRANSFER_BYTES as u64 {
            return Err(LayoutError::TooLarge { total });
        }
        Ok(())
    }

    fn memory(&self, provenance: bool) -> Memory {
        let mut m = Memory::default();
        for (i, (&base, &bl)) in self.kv_caches_base_addr.iter().zip(&self.block_lens).enumerate() {
            let len = (bl * self.num_blocks) as usize;
            if m.locate(base, 1).is_some() {
                continue;
            }
            if provenance {
                let bytes = provenance_bytes(i as u64, bl, len);
                m.register(base, len, |k| bytes[k]);
            } else {
                m.register(base, len, |_| 0);
            }
        }
        m
    }

    fn registered(&self) -> RegisteredLayout {
        RegisteredLayout {
            kv_caches_base_addr: self.kv_caches_base_addr.iter().map(|x| *x as i64).collect(),
            block_lens: self.block_lens.iter().map(|x| *x as i64).collect(),
            kv_block_lens: self.kv_block_lens.iter().map(|x| *x as i64).collect(),
            registered_layer_names: self.registered_layer_names.clone(),
            registered_layer_indices: self.registered_layer_indices.clone(),
            registered_group_indices: self.registered_group_indices.clone(),
            registered_shared_group_ids: self.registered_shared_group_ids.clone(),
            registered_row_offsets: self.registered_row_offsets.clone(),
        }
    }

    fn decoder_layout(&self) -> DecoderLayout {
        let w = |v: &[i64]| v.iter().map(|x| (*x).into()).collect();
        DecoderLayout {
            kv_caches_base_addr: self.kv_caches_base_addr.iter().map(|x| (*x).into()).collect(),
            block_lens: self.block_lens.iter().map(|x| (*x).into()).collect(),
            kv_block_lens: self.kv_block_lens.iter().map(|x| (*x).into()).collect(),
            registered_layer_names: self.registered_layer_names.clone(),
            registered_layer_indices: w(&self.registered_layer_indices),
            registered_group_indices: w(&self.registered_group_indices),
            registered_shared_group_ids: self.registered_shared_group_ids.iter().map(|g| w(g)).collect(),
            registered_row_offsets: w(&self.registered_row_offsets),
        }
    }
}

/// The prefiller's planner for its identity, model and layout.
pub fn producer(
    tp_rank: i64,
    tp_size: i64,
    pp_size: i64,
    model: &ModelConfig,
    layout: &LayoutConfig,
    profile: &WireProfile,
) -> Result<Producer, LayoutError> {
    producer_with(tp_rank, tp_size, pp_size, model, layout, profile.rules.plan, profile.rules.equal_length.clone())
}

/// The same with the planning rules given (a generation-1 revision has no [`WireProfile`]).
pub fn producer_with(
    tp_rank: i64,
    tp_size: i64,
    pp_size: i64,
    model: &ModelConfig,
    layout: &LayoutConfig,
    rules: mooncake_wire::plan::PlanRules,
    column_check: Option<mooncake_wire::spec::behaviour::EqualLengthFields>,
) -> Result<Producer, LayoutError> {
    layout.check()?;
    let groups_seen =
        layout.registered_group_indices.iter().copied().filter(|g| *g >= 0).max().map(|m| m + 1).unwrap_or(1);
    let kinds: Vec<GroupKind> = if model.group_kinds.is_empty() {
        vec![GroupKind::Attention; groups_seen as usize]
    } else {
        model
            .group_kinds
            .iter()
            .map(|k| match k.as_str() {
                "attn" | "attention" => Ok(GroupKind::Attention),
                "mamba" => Ok(GroupKind::Mamba),
                other => Err(LayoutError::GroupKind(other.to_string())),
            })
            .collect::<Result<_, _>>()?
    };
    let reg = layout.registered();
    let mut layer_groups = model.layer_groups.clone();
    if layer_groups.is_empty() {
        for (name, g) in reg.registered_layer_names.iter().zip(&reg.registered_group_indices) {
            if *g >= 0 {
                layer_groups.entry(name.clone()).or_insert(*g);
            }
        }
    }
    let spec = if kinds.contains(&GroupKind::Mamba) {
        LayerSpec::Other
    } else {
        LayerSpec::Attention { padded: model.padded_pages, nvfp4: false }
    };
    let layer_specs = reg.registered_layer_names.iter().map(|n| (n.clone(), spec)).collect();
    Ok(Producer {
        config: ProducerConfig {
            tp_rank,
            tp_size,
            pp_size,
            total_num_kv_heads: model.total_num_kv_heads,
            use_mla: model.use_mla,
            groups: kinds,
            physical_blocks_per_logical: model.physical_blocks_per_logical,
            blocks_first: model.blocks_first,
        },
        rules,
        column_check,
        has_opaque_packed_row: has_opaque_packed_row(&reg.registered_row_offsets, &reg.kv_block_lens, &reg.block_lens),
        layout: reg,
        layer_groups,
        layer_specs,
    })
}
