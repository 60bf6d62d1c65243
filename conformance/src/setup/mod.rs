//! What a case derives from a trace and its scenario: the prefiller's layout (from the recorded model and the
//! decoder's registered layers), the decoder's layout (as it sent it), and the check of landed bytes.

pub mod gen1;
pub(crate) mod pull;

use mooncake_io::layout::producer;
use mooncake_testee_protocol::{LayoutConfig, ModelConfig, PrefillerConfig};
use mooncake_wire::plan::Producer;
use mooncake_wire::proto::memory::decode_provenance;
use mooncake_wire::proto::WireProfile;
use mooncake_wire::spec::behaviour::BlockGroups;
use mooncake_wire::typed::MooncakeXferMetadata;

use crate::scenarios::{Model, Scenario};
use mooncake_trace::conversation::{Conversation, PrefillerConn};

/// Why a case's setup cannot be read off its trace and scenario (what the player, its dry run and the matrix
/// need before anything starts).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// No decoder request of the trace carries a layout to derive the prefiller's from.
    #[error("the trace has no layout-carrying request")]
    NoLayoutRequest,
    /// The reference planner refuses the layout or the model.
    #[error(transparent)]
    Planner(#[from] mooncake_io::layout::LayoutError),
    /// The reference cores cannot speak the trace's revision.
    #[error(transparent)]
    Profile(#[from] mooncake_wire::proto::ProfileError),
    /// A pull trace's scenario has no `[pull_scenario.NAME]` entry.
    #[error("no [pull_scenario.{0}] entry in the scenarios file: the block ids of a pull recording never travel on its side channel (give one with --scenarios FILE)")]
    NoPullScenario(String),
    /// A pull trace lacks what a case needs.
    #[error("the pull trace cannot be played: {0}")]
    PullTrace(&'static str),
    /// A recorded generation-1 request does not decode.
    #[error("line {line}: the recorded request does not decode: {source}")]
    Undecodable {
        /// Its line in the trace.
        line: usize,
        /// Why it does not decode.
        source: mooncake_wire::proto::gen1::RequestError,
    },
}

/// Base of the prefiller's (synthetic) region addresses.
pub(crate) const P_BASE: u64 = 0x7100_0000_0000;
/// Base of a (synthetic) decoder's region addresses, where the runner or the matrix makes one up.
pub(crate) const D_BASE: u64 = 0x5100_0000_0000;

/// The reference planner's view of the recorded model: no MLA, one physical block per logical one, no padding.
pub fn model_config(model: &Model) -> ModelConfig {
    ModelConfig { blocks_first: model.blocks_first, ..ModelConfig::new(model.total_num_kv_heads as i64) }
}

/// The layout ([`prefiller_layout`]) and planner of a prefiller standing in for recorded worker `p` (the
/// runner's own, or a dry run's).
pub fn prefiller_planner(
    t: &Conversation,
    p: &PrefillerConn,
    model: &Model,
    profile: &WireProfile,
) -> Result<(LayoutConfig, Producer), SetupError> {
    let layout = prefiller_layout(t, p, model)?;
    let planner = producer(p.tp_rank, p.tp_size, 1, &model_config(model), &layout, profile)?;
    Ok((layout, planner))
}

/// The layout columns of a layout-carrying request, completed for revisions that send fewer of them: block
/// lengths from the recorded model (the decoder's TP size), `kv_block_lens` = `block_lens`, layer names and
/// indices by position.
pub struct Columns {
    /// `kv_caches_base_addr`.
    pub base: Vec<u64>,
    /// `block_lens`, in bytes.
    pub block_lens: Vec<u64>,
    /// `kv_block_lens`, in bytes.
    pub kv_block_lens: Vec<u64>,
    /// `registered_layer_names`.
    pub names: Vec<String>,
    /// `registered_layer_indices`.
    pub indices: Vec<i64>,
    /// `registered_group_indices`.
    pub groups: Vec<i64>,
    /// `registered_shared_group_ids`.
    pub shared: Vec<Vec<i64>>,
    /// `registered_row_offsets`.
    pub rows: Vec<i64>,
}

impl Columns {
    /// The columns as a registered layout of `num_blocks` blocks per region.
    pub fn into_layout(self, num_blocks: u64) -> LayoutConfig {
        LayoutConfig {
            kv_caches_base_addr: self.base,
            block_lens: self.block_lens,
            kv_block_lens: self.kv_block_lens,
            registered_layer_names: self.names,
            registered_layer_indices: self.indices,
            registered_group_indices: self.groups,
            registered_shared_group_ids: self.shared,
            registered_row_offsets: self.rows,
            num_blocks,
        }
    }
}

/// The columns of `req`, completed as [`Columns`] says with `model`.
pub fn columns(req: &MooncakeXferMetadata, model: &Model) -> Columns {
    let u = |v: &[mooncake_wire::msgpack::WireInt]| v.iter().map(|x| x.as_u64().unwrap_or(0)).collect::<Vec<_>>();
    let i = |v: &[mooncake_wire::msgpack::WireInt]| v.iter().map(|x| x.as_i64().unwrap_or(0)).collect::<Vec<_>>();
    let base = u(&req.kv_caches_base_addr);
    let n = base.len();
    let block_lens = if req.block_lens.len() == n {
        u(&req.block_lens)
    } else {
        vec![model.block_bytes(req.remote_tp_size.as_u64().unwrap_or(1)); n]
    };
    let kv_block_lens = if req.kv_block_lens.len() == n { u(&req.kv_block_lens) } else { block_lens.clone() };
    let names = if req.registered_layer_names.len() == n {
        req.registered_layer_names.clone()
    } else {
        (0..n).map(|k| format!("region.{k}")).collect()
    };
    let indices = if req.registered_layer_indices.len() == n {
        i(&req.registered_layer_indices)
    } else {
        (0..n as i64).collect()
    };
    Columns {
        base,
        block_lens,
        kv_block_lens,
        names,
        indices,
        groups: i(&req.registered_group_indices),
        shared: req.registered_shared_group_ids.iter().map(|g| i(g)).collect(),
        rows: i(&req.registered_row_offsets),
    }
}

/// The decoder's registered layout as its layout-carrying request states it.
pub fn decoder_layout(req: &MooncakeXferMetadata, model: &Model) -> LayoutConfig {
    columns(req, model).into_layout(model.num_blocks)
}

/// The prefiller worker's layout: the decoder's layers, with the prefiller's own bytes per block for its TP
/// size (the recorded model; the payload share of a block as the decoder states it), at synthetic addresses.
pub fn prefiller_layout(t: &Conversation, p: &PrefillerConn, model: &Model) -> Result<LayoutConfig, SetupError> {
    let req = t.decoders.iter().find_map(|d| d.layout_request.clone()).ok_or(SetupError::NoLayoutRequest)?;
    let c = columns(&req, model);
    let n = c.base.len();
    let bytes = model.block_bytes(p.tp_size as u64);
    let span = (bytes * model.num_blocks).next_power_of_two();
    let kv: Vec<u64> =
        c.block_lens.iter().zip(&c.kv_block_lens).map(|(b, k)| if *b == 0 { bytes } else { bytes * k / b }).collect();
    Ok(LayoutConfig {
        kv_caches_base_addr: (0..n as u64).map(|r| P_BASE + (p.tp_rank as u64) * span * 64 + r * span).collect(),
        block_lens: vec![bytes; n],
        kv_block_lens: kv,
        ..c.into_layout(model.num_blocks)
    })
}

/// The `start` configuration of a prefiller testee standing in for recorded worker `p`.
pub fn prefiller_config(
    t: &Conversation,
    p: &PrefillerConn,
    model: &Model,
    bootstrap: &str,
) -> Result<PrefillerConfig, SetupError> {
    Ok(prefiller_config_with(p, model, prefiller_layout(t, p, model)?, bootstrap))
}

/// [`prefiller_config`] with the layout given.
pub(crate) fn prefiller_config_with(
    p: &PrefillerConn,
    model: &Model,
    layout: LayoutConfig,
    bootstrap: &str,
) -> PrefillerConfig {
    let mut c = PrefillerConfig::new(model_config(model), layout);
    c.engine_id = p.engine_id.clone();
    c.dp_rank = p.dp_rank;
    c.tp_rank = p.tp_rank;
    c.tp_size = p.tp_size;
    c.pp_rank = p.pp_rank;
    c.bootstrap = Some(bootstrap.to_string());
    c.abort_timeout_s = Some(model.abort_timeout_s);
    c
}

/// What should have landed for one request: destination blocks per region and the prefiller block each
/// one comes from.
pub struct Expected {
    /// (region, destination block, source block)
    pub blocks: Vec<(usize, u64, u64)>,
}

/// Destination/source block pairs of a request, region by region: a region of group `g` receives the
/// request's group-`g` blocks, the i-th destination block from the i-th source block.
/// `layout` is the decoder's registered layout (a layout-less pull does not repeat it).
pub fn expected_blocks(
    layout: &MooncakeXferMetadata,
    req: &MooncakeXferMetadata,
    d_req_id: &str,
    scenario: &Scenario,
    groups: BlockGroups,
) -> Option<Expected> {
    expected_blocks_scaled(layout, req, d_req_id, scenario, groups, 1)
}

/// As [`expected_blocks`], for a prefiller that places blocks by its own block length (`destination_stride =
/// producer-block-len`) `scale` times the decoder's: decoder block `b` of the request then receives into
/// blocks `b·scale … b·scale+scale-1` (what vLLM 0.16.0-0.18.1 do when TP sizes differ).
pub fn expected_blocks_scaled(
    layout: &MooncakeXferMetadata,
    req: &MooncakeXferMetadata,
    d_req_id: &str,
    scenario: &Scenario,
    groups: BlockGroups,
    scale: u64,
) -> Option<Expected> {
    let mut e = expected_blocks_of(layout, req, d_req_id, scenario, groups)?;
    if scale > 1 {
        e.blocks = e.blocks.into_iter().flat_map(|(r, d, p)| (0..scale).map(move |j| (r, d * scale + j, p))).collect();
    }
    Some(e)
}

fn expected_blocks_of(
    layout: &MooncakeXferMetadata,
    req: &MooncakeXferMetadata,
    d_req_id: &str,
    scenario: &Scenario,
    groups: BlockGroups,
) -> Option<Expected> {
    let (_, rb) = req.req_blocks.iter().find(|(k, _)| k == d_req_id)?;
    let t = scenario.transfers.iter().find(|t| t.transfer_id == rb.transfer_id)?;
    let mut blocks = vec![];
    if groups == BlockGroups::Flattened {
        // Every region receives every group's blocks of the request (vLLM 0.20.0-0.24.0).
        let d: Vec<u64> = rb.blocks.iter().flatten().map(|b| b.as_u64().unwrap_or(0)).collect();
        let p: Vec<u64> = rb
            .blocks
            .iter()
            .enumerate()
            .flat_map(|(g, dg)| {
                let pg = t.blocks.get(g).cloned().unwrap_or_default();
                if dg.is_empty() {
                    pg
                } else {
                    pg[pg.len().saturating_sub(dg.len())..].to_vec()
                }
            })
            .collect();
        for r in 0..layout.kv_caches_base_addr.len() {
            for (db, pb) in d.iter().zip(&p) {
                blocks.push((r, *db, *pb));
            }
        }
        return Some(Expected { blocks });
    }
    for r in 0..layout.kv_caches_base_addr.len() {
        let g = layout.registered_group_indices.get(r).and_then(|g| g.as_i64()).unwrap_or(0).max(0) as usize;
        let (Some(d), Some(p)) = (rb.blocks.get(g), t.blocks.get(g)) else { continue };
        for (db, pb) in d.iter().zip(p) {
            blocks.push((r, db.as_u64().unwrap_or(0), *pb));
        }
    }
    Some(Expected { blocks })
}

/// Checks a decoder's memory (read with `read(region, block) -> bytes of that block`) against the provenance
/// pattern: each expected block carries only words of its source region and block (and, with the same TP on
/// both sides, at the same offsets); every other block of the regions is still zero.
pub fn check_landed_regions(
    regions: usize,
    num_blocks: u64,
    expected: &[(usize, u64, u64)],
    same_tp: bool,
    mut read: impl FnMut(usize, u64) -> Option<Vec<u8>>,
) -> Vec<String> {
    let mut problems = vec![];
    // A later pull may write a block an earlier one wrote: the last write is what must be there.
    let mut last: std::collections::HashMap<(usize, u64), u64> = std::collections::HashMap::new();
    for (r, b, src) in expected {
        last.insert((*r, *b), *src);
    }
    for r in 0..regions {
        for b in 0..num_blocks {
            let Some(bytes) = read(r, b) else {
                problems.push(format!("region {r} block {b}: cannot read the decoder's memory"));
                continue;
            };
            let words: Vec<u64> = bytes
                .chunks(8)
                .filter(|c| c.len() == 8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            match last.get(&(r, b)).map(|src| (r, b, *src)).as_ref() {
                None => {
                    if bytes.iter().any(|x| *x != 0) {
                        problems.push(format!("region {r} block {b}: written, but no successful request targets it"));
                    }
                }
                Some((_, _, src)) => {
                    for (k, w) in words.iter().enumerate() {
                        match decode_provenance(*w) {
                            Some((sr, sb, so))
                                if sr as usize == r && sb == *src && (!same_tp || so == k as u64 * 8) => {}
                            Some((sr, sb, so)) => {
                                problems.push(format!("region {r} block {b} word {k}: holds source region {sr} block {sb} offset {so}, expected region {r} block {src}{}", if same_tp { format!(" offset {}", k * 8) } else { String::new() }));
                                break;
                            }
                            None => {
                                problems.push(format!(
                                    "region {r} block {b} word {k}: not written (expected source block {src})"
                                ));
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
    problems
}

/// How many decoder blocks one prefiller block covers when the revision places blocks by the prefiller's block
/// length (`destination_stride = producer-block-len`); 1 otherwise.
pub fn stride_scale(
    profile: &mooncake_wire::proto::WireProfile,
    req: &MooncakeXferMetadata,
    model: &Model,
    t: &Conversation,
) -> u64 {
    use mooncake_wire::spec::behaviour::DestinationStride;
    if profile.rules.plan.destination_stride != DestinationStride::ProducerBlockLen {
        return 1;
    }
    let p_tp = t.prefillers.first().map(|p| p.tp_size as u64).unwrap_or(1);
    let p_bl = model.block_bytes(p_tp);
    let d_bl = columns(req, model).block_lens.first().copied().unwrap_or(p_bl);
    if d_bl == 0 || p_bl <= d_bl {
        1
    } else {
        p_bl / d_bl
    }
}

/// [`check_landed_regions`] over a decoder's registered layout (its request's regions).
pub fn check_landed(
    layout: &MooncakeXferMetadata,
    num_blocks: u64,
    expected: &[(usize, u64, u64)],
    same_tp: bool,
    read: impl FnMut(usize, u64) -> Option<Vec<u8>>,
) -> Vec<String> {
    check_landed_regions(layout.kv_caches_base_addr.len(), num_blocks, expected, same_tp, read)
}

/// [`check_landed_regions`] over a layout's columns.
pub fn check_landed_columns(
    cols: &Columns,
    num_blocks: u64,
    expected: &[(usize, u64, u64)],
    same_tp: bool,
    read: impl FnMut(usize, u64) -> Option<Vec<u8>>,
) -> Vec<String> {
    check_landed_regions(cols.base.len(), num_blocks, expected, same_tp, read)
}
