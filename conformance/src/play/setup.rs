//! What a case derives from a trace and its scenario: the prefiller's layout (from the recorded model and the
//! decoder's registered layers), the decoder's layout (as it sent it), and the check of landed bytes.

use mooncake_wire::proto::memory::decode_provenance;
use mooncake_wire::typed::MooncakeXferMetadata;
use serde_json::{json, Value as J};

use crate::scenarios::{Model, Scenario};
use crate::trace_model::{PrefillerConn, TraceModel};

/// Base of the prefiller's (synthetic) region addresses.
const P_BASE: u64 = 0x7100_0000_0000;

/// The decoder's registered layout as its layout-carrying request states it.
pub fn decoder_layout(req: &MooncakeXferMetadata, model: &Model) -> J {
    let u = |v: &[mooncake_wire::msgpack::WireInt]| v.iter().map(|x| x.as_u64().unwrap_or(0)).collect::<Vec<_>>();
    let i = |v: &[mooncake_wire::msgpack::WireInt]| v.iter().map(|x| x.as_i64().unwrap_or(0)).collect::<Vec<_>>();
    json!({
        "kv_caches_base_addr": u(&req.kv_caches_base_addr),
        "block_lens": u(&req.block_lens),
        "kv_block_lens": u(&req.kv_block_lens),
        "registered_layer_names": req.registered_layer_names,
        "registered_layer_indices": i(&req.registered_layer_indices),
        "registered_group_indices": i(&req.registered_group_indices),
        "registered_shared_group_ids": req.registered_shared_group_ids.iter().map(|g| i(g)).collect::<Vec<_>>(),
        "registered_row_offsets": i(&req.registered_row_offsets),
        "num_blocks": model.num_blocks,
    })
}

/// The prefiller worker's layout: the decoder's layers, with the prefiller's own bytes per block for its TP
/// size (the recorded model), at synthetic addresses.
pub fn prefiller_layout(t: &TraceModel, p: &PrefillerConn, model: &Model) -> Result<J, String> {
    let req = t.decoders.iter().find_map(|d| d.layout_request.clone()).ok_or("the trace has no layout-carrying request")?;
    let n = req.registered_layer_names.len();
    let bytes = model.block_bytes(p.tp_size as u64);
    let span = (bytes * model.num_blocks).next_power_of_two();
    let i = |v: &[mooncake_wire::msgpack::WireInt]| v.iter().map(|x| x.as_i64().unwrap_or(0)).collect::<Vec<_>>();
    Ok(json!({
        "kv_caches_base_addr": (0..n as u64).map(|r| P_BASE + (p.tp_rank as u64) * span * 64 + r * span).collect::<Vec<_>>(),
        "block_lens": vec![bytes; n],
        "kv_block_lens": vec![bytes; n],
        "registered_layer_names": req.registered_layer_names,
        "registered_layer_indices": i(&req.registered_layer_indices),
        "registered_group_indices": i(&req.registered_group_indices),
        "registered_shared_group_ids": req.registered_shared_group_ids.iter().map(|g| i(g)).collect::<Vec<_>>(),
        "registered_row_offsets": i(&req.registered_row_offsets),
        "num_blocks": model.num_blocks,
    }))
}

pub fn prefiller_config(t: &TraceModel, p: &PrefillerConn, model: &Model, bootstrap: &str) -> Result<J, String> {
    Ok(json!({
        "engine_id": p.engine_id, "dp_rank": p.dp_rank, "tp_rank": p.tp_rank, "tp_size": p.tp_size,
        "pp_rank": p.pp_rank, "pp_size": 1, "bootstrap": bootstrap, "abort_timeout_s": model.abort_timeout_s,
        "model": {"total_num_kv_heads": model.total_num_kv_heads},
        "layout": prefiller_layout(t, p, model)?,
    }))
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
pub fn expected_blocks(layout: &MooncakeXferMetadata, req: &MooncakeXferMetadata, d_req_id: &str, scenario: &Scenario) -> Option<Expected> {
    let (_, rb) = req.req_blocks.iter().find(|(k, _)| k == d_req_id)?;
    let t = scenario.transfers.iter().find(|t| t.transfer_id == rb.transfer_id)?;
    let mut blocks = vec![];
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
pub fn check_landed(
    layout: &MooncakeXferMetadata,
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
    for r in 0..layout.kv_caches_base_addr.len() {
        for b in 0..num_blocks {
            let Some(bytes) = read(r, b) else {
                problems.push(format!("region {r} block {b}: cannot read the decoder's memory"));
                continue;
            };
            let words: Vec<u64> = bytes.chunks(8).filter(|c| c.len() == 8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
            match last.get(&(r, b)).map(|src| (r, b, *src)).as_ref() {
                None => {
                    if bytes.iter().any(|x| *x != 0) {
                        problems.push(format!("region {r} block {b}: written, but no successful request targets it"));
                    }
                }
                Some((_, _, src)) => {
                    for (k, w) in words.iter().enumerate() {
                        match decode_provenance(*w) {
                            Some((sr, sb, so)) if sr as usize == r && sb == *src && (!same_tp || so == k as u64 * 8) => {}
                            Some((sr, sb, so)) => {
                                problems.push(format!("region {r} block {b} word {k}: holds source region {sr} block {sb} offset {so}, expected region {r} block {src}{}", if same_tp { format!(" offset {}", k * 8) } else { String::new() }));
                                break;
                            }
                            None => {
                                problems.push(format!("region {r} block {b} word {k}: not written (expected source block {src})"));
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
