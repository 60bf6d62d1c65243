//! Checkers for vLLM's transfer planner (`plan/*.jsonl`, format in `vectors/GOLDEN.md` § plan/), each mapping a
//! case's JSON `input` onto [`mooncake_wire::plan`] and the result back to vLLM's JSON shape. Exceptions come
//! back as `"<ExceptionType>: <message>"`. The worker methods plan under the rules of the release the header's
//! `vllm_version` names (0.33.0's files and 0.34.0's differ in `paired_block_order`), read from the spec.

use std::collections::HashMap;

use mooncake_wire::plan::{
    self, GroupKind, LayerSpec, PlanError, PlanRules, Producer, ProducerConfig, RegisteredLayout, TransferRegion,
};
use mooncake_wire::proto::WireProfile;
use mooncake_wire::spec::behaviour::EqualLengthFields;
use mooncake_wire::spec::Spec;
use serde_json::{json, Value as J};

use super::{Checker, GoldenError};

const MC: &str = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector.";
const WORKER: &str =
    "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector.MooncakeConnectorWorker.";

/// The checker for a fully qualified vLLM function name, if we implement it.
pub(crate) fn checker(function: &str) -> Option<Checker> {
    if function == "vllm.distributed.kv_transfer.kv_connector.utils.TransferTopology" {
        return Some(transfer_topology);
    }
    if let Some(method) = function.strip_prefix(WORKER) {
        return match method {
            "_build_transfer_params" => Some(build_transfer_params),
            "_prepare_transfer_regions" => Some(sender_pipeline),
            _ => None,
        };
    }
    Some(match function.strip_prefix(MC)? {
        "_get_tp_ratio" => get_tp_ratio,
        "_compute_sender_transfer_plan" => compute_sender_transfer_plan,
        "_can_coalesce_block_transfers" => can_coalesce_block_transfers,
        "group_concurrent_contiguous" => group_concurrent_contiguous,
        "_contiguous_runs" => contiguous_runs,
        "_normalize_paired_block_order" => normalize_paired_block_order,
        "_block_ids_for_region" => block_ids_for_region,
        "_expand_transfer_regions" => expand_transfer_regions,
        "_validate_asymmetric_region_lengths" => validate_asymmetric_region_lengths,
        "_align_transfer_regions" => align_transfer_regions,
        "_coalesce_contiguous_transfer_regions" => coalesce_contiguous_transfer_regions,
        "_has_opaque_packed_row" => has_opaque_packed_row,
        "_pp_mismatch_hides_packed_layers" => pp_mismatch_hides_packed_layers,
        _ => return None,
    })
}

// ---- JSON input helpers (a malformed input is reported as such, never as vLLM's behaviour) ----

/// A malformed planning case (its input or the file's header); every text starts `bad input:` or `header:`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadInput {
    /// A field is absent.
    #[error("bad input: missing `{0}`")]
    Missing(String),
    /// A value is not a 64-bit integer.
    #[error("bad input: `{what}` is not a 64-bit integer: {value}")]
    NotInt {
        /// The field it belongs to.
        what: String,
        /// The value.
        value: J,
    },
    /// A field is not a bool.
    #[error("bad input: `{0}` is not a bool")]
    NotBool(String),
    /// A field is not a list.
    #[error("bad input: `{0}` is not a list")]
    NotList(String),
    /// A field is not an object.
    #[error("bad input: `{0}` is not an object")]
    NotObject(String),
    /// A list of strings holds something else.
    #[error("bad input: `{0}` holds a non-string")]
    NonString(String),
    /// A field does not decode as transfer regions.
    #[error("bad input: `{key}`: {source}")]
    Regions {
        /// The field.
        key: String,
        /// Why it does not decode.
        source: serde_json::Error,
    },
    /// A group kind other than `attn` / `mamba`.
    #[error("bad input: unknown group kind {0:?}")]
    UnknownGroupKind(String),
    /// A request's `d_req_id` is not a string.
    #[error("bad input: `d_req_id`")]
    DReqId,
    /// A `req_blocks` value is not a `[transfer_id, blocks]` pair.
    #[error("bad input: a `req_blocks` value is not a pair")]
    NotPair,
    /// A transfer id is not a string.
    #[error("bad input: transfer id")]
    TransferId,
    /// `producer_block_ids` has no entry for a request.
    #[error("bad input: no producer blocks for {0}")]
    NoProducerBlocks(String),
    /// The header's pipeline stages are not the ones this checker runs.
    #[error("header: unexpected pipeline stages {0:?}")]
    Stages(Vec<String>),
    /// The header names no release, or one no generation-2 revision of the spec covers.
    #[error("header: no planning rules for vllm_version {0:?}: {1}")]
    Release(String, String),
}

fn field<'a>(v: &'a J, k: &str) -> Result<&'a J, BadInput> {
    v.get(k).ok_or_else(|| BadInput::Missing(k.into()))
}
fn int_of(v: &J, what: &str) -> Result<i64, BadInput> {
    v.as_i64().ok_or_else(|| BadInput::NotInt { what: what.into(), value: v.clone() })
}
fn int(v: &J, k: &str) -> Result<i64, BadInput> {
    int_of(field(v, k)?, k)
}
fn opt_int(v: &J, k: &str) -> Result<Option<i64>, BadInput> {
    match v.get(k) {
        None | Some(J::Null) => Ok(None),
        Some(x) => int_of(x, k).map(Some),
    }
}
fn boolean(v: &J, k: &str) -> Result<bool, BadInput> {
    field(v, k)?.as_bool().ok_or_else(|| BadInput::NotBool(k.into()))
}
fn ints_of(v: &J, what: &str) -> Result<Vec<i64>, BadInput> {
    v.as_array().ok_or_else(|| BadInput::NotList(what.into()))?.iter().map(|x| int_of(x, what)).collect()
}
fn ints(v: &J, k: &str) -> Result<Vec<i64>, BadInput> {
    ints_of(field(v, k)?, k)
}
fn int_lists_of(v: &J, what: &str) -> Result<Vec<Vec<i64>>, BadInput> {
    v.as_array().ok_or_else(|| BadInput::NotList(what.into()))?.iter().map(|x| ints_of(x, what)).collect()
}
fn int_lists(v: &J, k: &str) -> Result<Vec<Vec<i64>>, BadInput> {
    int_lists_of(field(v, k)?, k)
}
fn strings(v: &J, k: &str) -> Result<Vec<String>, BadInput> {
    field(v, k)?
        .as_array()
        .ok_or_else(|| BadInput::NotList(k.into()))?
        .iter()
        .map(|x| x.as_str().map(String::from).ok_or_else(|| BadInput::NonString(k.into())))
        .collect()
}
/// An optional list argument: absent (or null) means Python `None`.
fn opt<T>(v: &J, k: &str, f: impl Fn(&J, &str) -> Result<T, BadInput>) -> Result<Option<T>, BadInput> {
    match v.get(k) {
        None | Some(J::Null) => Ok(None),
        Some(_) => f(v, k).map(Some),
    }
}
fn regions(v: &J, k: &str) -> Result<Vec<TransferRegion>, BadInput> {
    serde_json::from_value(field(v, k)?.clone()).map_err(|source| BadInput::Regions { key: k.into(), source })
}
fn regions_json(r: &[TransferRegion]) -> J {
    serde_json::to_value(r).expect("regions serialise")
}
fn raised(e: PlanError) -> GoldenError {
    GoldenError::ours(e)
}
fn group_kinds(w: &J) -> Result<Vec<GroupKind>, BadInput> {
    strings(w, "group_kinds")?
        .iter()
        .map(|k| match k.as_str() {
            "attn" => Ok(GroupKind::Attention),
            "mamba" => Ok(GroupKind::Mamba),
            other => Err(BadInput::UnknownGroupKind(other.into())),
        })
        .collect()
}

// ---- module-level functions ----

fn get_tp_ratio(_: &J, i: &J) -> Result<J, GoldenError> {
    plan::tp_ratio(int(i, "local_tp_size")?, int(i, "remote_tp_size")?).map(J::from).map_err(raised)
}

fn compute_sender_transfer_plan(_: &J, i: &J) -> Result<J, GoldenError> {
    let p = plan::compute_sender_transfer_plan(&plan::SenderPlanInput {
        local_tp_rank: int(i, "local_tp_rank")?,
        local_tp_size: int(i, "local_tp_size")?,
        remote_tp_rank: int(i, "remote_tp_rank")?,
        remote_tp_size: int(i, "remote_tp_size")?,
        local_kv_block_len: int(i, "local_kv_block_len")?,
        remote_kv_block_len: int(i, "remote_kv_block_len")?,
        producer_cache_replicated: boolean(i, "producer_cache_replicated")?,
        total_num_kv_heads: opt_int(i, "total_num_kv_heads")?,
    })
    .map_err(raised)?;
    Ok(json!([p.should_transfer, p.src_offset, p.dst_offset, p.transfer_len]))
}

fn can_coalesce_block_transfers(_: &J, i: &J) -> Result<J, GoldenError> {
    Ok(J::Bool(plan::can_coalesce_block_transfers(
        int(i, "local_region_block_len")?,
        int(i, "remote_region_block_len")?,
        int(i, "src_region_offset")?,
        int(i, "dst_region_offset")?,
        int(i, "transfer_len")?,
    )))
}

fn contiguous_runs(_: &J, i: &J) -> Result<J, GoldenError> {
    let (starts, lens) = plan::contiguous_runs(&ints(i, "src_ids")?, &ints(i, "dst_ids")?).map_err(raised)?;
    Ok(json!([starts, lens]))
}

fn normalize_paired_block_order(_: &J, i: &J) -> Result<J, GoldenError> {
    let (s, d) = plan::normalize_paired_block_order(&ints(i, "src_ids")?, &ints(i, "dst_ids")?).map_err(raised)?;
    Ok(json!([s, d]))
}

fn group_concurrent_contiguous(_: &J, i: &J) -> Result<J, GoldenError> {
    let (s, d) =
        plan::group_concurrent_contiguous(&ints(i, "src_indices")?, &ints(i, "dst_indices")?).map_err(raised)?;
    Ok(json!([s, d]))
}

fn block_ids_for_region(_: &J, i: &J) -> Result<J, GoldenError> {
    plan::block_ids_for_region(
        &int_lists(i, "block_ids_by_group")?,
        int(i, "group_index")?,
        &ints(i, "shared_group_ids")?,
    )
    .map(|v| json!(v))
    .map_err(raised)
}

fn expand_transfer_regions(_: &J, i: &J) -> Result<J, GoldenError> {
    let (base_addrs, block_lens, kv_block_lens) =
        (ints(i, "base_addrs")?, ints(i, "block_lens")?, ints(i, "kv_block_lens")?);
    let (layer_names, layer_indices) = (strings(i, "layer_names")?, ints(i, "layer_indices")?);
    let group_indices = opt(i, "group_indices", ints)?;
    let shared_group_ids = opt(i, "shared_group_ids", int_lists)?;
    let row_offsets = opt(i, "row_offsets", ints)?;
    plan::expand_transfer_regions(&plan::RegionColumns {
        base_addrs: &base_addrs,
        block_lens: &block_lens,
        kv_block_lens: &kv_block_lens,
        layer_names: &layer_names,
        layer_indices: &layer_indices,
        group_indices: group_indices.as_deref(),
        shared_group_ids: shared_group_ids.as_deref(),
        row_offsets: row_offsets.as_deref(),
    })
    .map(|r| regions_json(&r))
    .map_err(raised)
}

fn validate_asymmetric_region_lengths(_: &J, i: &J) -> Result<J, GoldenError> {
    plan::validate_asymmetric_region_lengths(
        &regions(i, "local_regions")?,
        &regions(i, "remote_regions")?,
        int(i, "local_tp_size")?,
        int(i, "remote_tp_size")?,
        boolean(i, "producer_cache_replicated")?,
        opt_int(i, "total_num_kv_heads")?,
    )
    .map(|e| json!(e))
    .map_err(raised)
}

fn align_transfer_regions(_: &J, i: &J) -> Result<J, GoldenError> {
    let r = plan::align_transfer_regions(
        &regions(i, "local_regions")?,
        &regions(i, "remote_regions")?,
        boolean(i, "allow_partial_layers")?,
    );
    Ok(match r {
        Ok((l, r)) => json!([regions_json(&l), regions_json(&r), null]),
        Err(e) => json!([[], [], e.to_string()]),
    })
}

fn coalesce_contiguous_transfer_regions(_: &J, i: &J) -> Result<J, GoldenError> {
    let (l, r) = plan::coalesce_contiguous_transfer_regions(
        &regions(i, "local_regions")?,
        &regions(i, "remote_regions")?,
        boolean(i, "promote_full_row")?,
    )
    .map_err(raised)?;
    Ok(json!([regions_json(&l), regions_json(&r)]))
}

fn has_opaque_packed_row(_: &J, i: &J) -> Result<J, GoldenError> {
    Ok(J::Bool(plan::has_opaque_packed_row(
        &ints(i, "row_offsets")?,
        &ints(i, "kv_block_lens")?,
        &ints(i, "block_lens")?,
    )))
}

fn pp_mismatch_hides_packed_layers(_: &J, i: &J) -> Result<J, GoldenError> {
    Ok(J::Bool(plan::pp_mismatch_hides_packed_layers(
        int(i, "local_pp_size")?,
        int(i, "remote_pp_size")?,
        boolean(i, "local_has_opaque_row")?,
        &ints(i, "remote_row_offsets")?,
        &ints(i, "remote_kv_block_lens")?,
        &ints(i, "remote_block_lens")?,
    )))
}

// ---- TransferTopology: one object per case, each method's result or {"error": ...} ----

fn transfer_topology(_: &J, i: &J) -> Result<J, GoldenError> {
    let topo = plan::TransferTopology::new(
        int(i, "tp_rank")?,
        int(i, "tp_size")?,
        int(i, "total_num_kv_heads")?,
        boolean(i, "is_mla")?,
        int(i, "dcp_size")?,
    )
    .map_err(raised)?;
    let (remote_tp, remote_dcp) = (int(i, "remote_tp_size")?, int(i, "remote_dcp_size")?);
    let each = |r: Result<J, PlanError>| r.unwrap_or_else(|e| json!({ "error": e.to_string() }));
    Ok(json!({
        "tp_ratio": each(topo.tp_ratio(remote_tp).map(J::from)),
        "handshake_target_ranks": each(topo.handshake_target_ranks(remote_tp, remote_dcp).map(|v| json!(v))),
        "local_replicates_kv_cache": topo.local_replicates_kv_cache(),
        "dcp_consumer_count": each(topo.dcp_consumer_count(remote_tp, remote_dcp).map(J::from)),
        "local_physical_heads": topo.local_physical_heads,
    }))
}

// ---- the worker methods, on a producer built from the case's `worker`/`producer` object ----

fn producer_config(w: &J) -> Result<ProducerConfig, BadInput> {
    Ok(ProducerConfig {
        tp_rank: int(w, "tp_rank")?,
        tp_size: int(w, "tp_size")?,
        pp_size: opt_int(w, "pp_size")?.unwrap_or(1),
        total_num_kv_heads: int(w, "total_num_kv_heads")?,
        use_mla: boolean(w, "use_mla")?,
        groups: group_kinds(w)?,
        physical_blocks_per_logical: opt_int(w, "physical_blocks_per_logical")?.unwrap_or(1),
        blocks_first: false,
    })
}

fn batch_json(b: &plan::TransferBatch) -> J {
    json!({
        "src_ptrs": b.descriptors.iter().map(|d| d.src).collect::<Vec<_>>(),
        "dst_ptrs": b.descriptors.iter().map(|d| d.dst).collect::<Vec<_>>(),
        "lengths": b.descriptors.iter().map(|d| d.len).collect::<Vec<_>>(),
        "err_reqs": b.err_reqs,
        "err_msg": b.err_msg,
    })
}

/// The planning rules and layout column check of the release that made the file (`vllm_version`).
fn release_rules(header: &J) -> Result<(PlanRules, Option<EqualLengthFields>), BadInput> {
    let release = header.get("vllm_version").and_then(J::as_str).unwrap_or_default();
    let fail = |why: String| BadInput::Release(release.to_string(), why);
    let rev = Spec::builtin().push().for_release(release).ok_or_else(|| fail("not a release of the spec".into()))?;
    let profile = WireProfile::builtin(&rev.revision).map_err(|e| fail(e.to_string()))?;
    Ok((profile.rules.plan, profile.rules.equal_length))
}

fn build_transfer_params(header: &J, i: &J) -> Result<J, GoldenError> {
    let (rules, _) = release_rules(header)?;
    let config = producer_config(field(i, "worker")?)?;
    let reqs = field(i, "reqs")?
        .as_array()
        .ok_or_else(|| BadInput::NotList("reqs".into()))?
        .iter()
        .map(|r| {
            Ok(plan::ReadyRequest {
                d_req_id: field(r, "d_req_id")?.as_str().ok_or(BadInput::DReqId)?.to_string(),
                local_block_ids: int_lists(r, "local_block_ids")?,
                remote_block_ids: int_lists(r, "remote_block_ids")?,
            })
        })
        .collect::<Result<Vec<_>, BadInput>>()?;
    let batch = plan::build_transfer_params_by(
        &config,
        &rules,
        &regions(i, "local_regions")?,
        &regions(i, "remote_regions")?,
        int(i, "remote_tp_rank")?,
        int(i, "remote_tp_size")?,
        &reqs,
    )
    .map_err(raised)?;
    Ok(batch_json(&batch))
}

/// Columns of a registered layout; the optional ones may be absent (an empty column, as on the wire).
fn layout(v: &J) -> Result<RegisteredLayout, BadInput> {
    let or_empty = |k: &str| -> Result<Vec<i64>, BadInput> { Ok(opt(v, k, ints)?.unwrap_or_default()) };
    Ok(RegisteredLayout {
        kv_caches_base_addr: ints(v, "kv_caches_base_addr")?,
        block_lens: ints(v, "block_lens")?,
        kv_block_lens: ints(v, "kv_block_lens")?,
        registered_layer_names: opt(v, "registered_layer_names", strings)?.unwrap_or_default(),
        registered_layer_indices: or_empty("registered_layer_indices")?,
        registered_group_indices: or_empty("registered_group_indices")?,
        registered_shared_group_ids: opt(v, "registered_shared_group_ids", int_lists)?.unwrap_or_default(),
        registered_row_offsets: or_empty("registered_row_offsets")?,
    })
}

/// The producer vLLM's bare worker stands for: its layout, a spec per registered layer (padded pages when
/// `padded_pages`), each layer's transfer group from its registered group index. vLLM's worker records opaque
/// rows while registering; the layout given here carries no such flag, so it is derived from the layout by
/// the rule vLLM applies to a peer's layout (`_has_opaque_packed_row`).
fn producer(p: &J, (rules, column_check): (PlanRules, Option<EqualLengthFields>)) -> Result<Producer, BadInput> {
    let config = producer_config(p)?;
    let layout = layout(field(p, "layout")?)?;
    let padded = opt(p, "padded_pages", boolean)?.unwrap_or(false);
    let spec = LayerSpec::Attention { padded, nvfp4: false };
    let layer_specs = layout.registered_layer_names.iter().map(|n| (n.clone(), spec)).collect();
    let layer_groups: HashMap<String, i64> = layout
        .registered_layer_names
        .iter()
        .zip(&layout.registered_group_indices)
        .filter(|(_, &g)| g >= 0)
        .map(|(n, &g)| (n.clone(), g))
        .collect();
    let has_opaque_packed_row =
        plan::has_opaque_packed_row(&layout.registered_row_offsets, &layout.kv_block_lens, &layout.block_lens);
    Ok(Producer { config, layout, has_opaque_packed_row, layer_groups, layer_specs, rules, column_check })
}

fn pull(x: &J) -> Result<plan::Pull, BadInput> {
    let req_blocks = field(x, "req_blocks")?
        .as_object()
        .ok_or_else(|| BadInput::NotObject("req_blocks".into()))?
        .iter()
        .map(|(d_req_id, v)| {
            let pair = v.as_array().filter(|a| a.len() == 2).ok_or(BadInput::NotPair)?;
            Ok(plan::PullRequest {
                d_req_id: d_req_id.clone(),
                transfer_id: pair[0].as_str().ok_or(BadInput::TransferId)?.to_string(),
                blocks: int_lists_of(&pair[1], "req_blocks")?,
            })
        })
        .collect::<Result<Vec<_>, BadInput>>()?;
    Ok(plan::Pull {
        remote_tp_size: int(x, "remote_tp_size")?,
        remote_tp_rank: int(x, "remote_tp_rank")?,
        remote_pp_size: opt_int(x, "remote_pp_size")?.unwrap_or(1),
        req_blocks,
        layout: layout(x)?.into(),
    })
}

const PIPELINE_STAGES: [&str; 5] = [
    "vllm.distributed.kv_transfer.kv_connector.utils.TransferTopology.handshake_target_ranks",
    "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector._pp_mismatch_hides_packed_layers",
    "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector.MooncakeConnectorWorker._prepare_transfer_regions",
    "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector._validate_asymmetric_region_lengths",
    "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector.MooncakeConnectorWorker._build_transfer_params",
];

/// `sender_pipeline.jsonl`: every stage's result as the generator recorded it. Unlike
/// [`Producer::admit`], an unpaired rank or a PP mismatch does not stop the run (GOLDEN.md); a prepare or
/// validation error does, and an exception fails the whole case.
fn sender_pipeline(header: &J, i: &J) -> Result<J, GoldenError> {
    let stages: Vec<&str> = header
        .get("stages")
        .and_then(J::as_array)
        .map(|a| a.iter().filter_map(J::as_str).collect())
        .unwrap_or_default();
    if stages != PIPELINE_STAGES {
        return Err(BadInput::Stages(stages.iter().map(|s| s.to_string()).collect()).into());
    }
    let p = producer(field(i, "producer")?, release_rules(header)?)?;
    let pull = pull(field(i, "xfer_metadata")?)?;
    let ready_blocks =
        field(i, "producer_block_ids")?.as_object().ok_or_else(|| BadInput::NotObject("producer_block_ids".into()))?;

    let targets = p.handshake_target_ranks(pull.remote_tp_size).map_err(raised)?;
    let mut out = serde_json::Map::new();
    out.insert("handshake_target_ranks".into(), json!(targets));
    out.insert("paired".into(), json!(targets.contains(&pull.remote_tp_rank)));
    out.insert("pp_mismatch_hides_packed_layers".into(), json!(p.pp_mismatch_hides_packed_layers(&pull)));
    let prepared = match p.prepare(&pull) {
        Ok(r) => r,
        Err(plan::Refusal::Layout(msg)) => {
            out.insert("prepare".into(), json!({ "local_regions": [], "remote_regions": [], "error": msg }));
            return Ok(J::Object(out));
        }
        Err(other) => return Err(refusal_as_exception(other)),
    };
    out.insert(
        "prepare".into(),
        json!({ "local_regions": regions_json(&prepared.local), "remote_regions": regions_json(&prepared.remote), "error": null }),
    );
    out.insert("validation_total_num_kv_heads".into(), json!(p.config.known_kv_heads()));
    out.insert("producer_cache_replicated".into(), json!(p.config.cache_replicated()));
    match p.validate(&prepared, pull.remote_tp_size) {
        Ok(()) => {
            out.insert("validation_error".into(), J::Null);
        }
        Err(plan::Refusal::RegionLengths(msg)) => {
            out.insert("validation_error".into(), json!(msg));
            return Ok(J::Object(out));
        }
        Err(other) => return Err(refusal_as_exception(other)),
    }
    let mut ready = Vec::new();
    for r in &pull.req_blocks {
        let blocks = ready_blocks.get(&r.d_req_id).ok_or_else(|| BadInput::NoProducerBlocks(r.d_req_id.clone()))?;
        ready.extend(pull.ready_request(&r.d_req_id, int_lists_of(blocks, "producer_block_ids")?));
    }
    let batch = p.build(&prepared, &pull, &ready).map_err(raised)?;
    out.insert("build".into(), batch_json(&batch));
    Ok(J::Object(out))
}

fn refusal_as_exception(r: plan::Refusal) -> GoldenError {
    match r {
        plan::Refusal::Exception(e) => GoldenError::ours(e),
        other => GoldenError::UnexpectedRefusal(other),
    }
}
