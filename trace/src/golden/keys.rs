//! Checkers for vLLM's store key functions (keys/*.jsonl).

use serde_json::{json, Map, Value as J};

use hex::encode as hex;
use mooncake_wire::hash::{tagged, PyInt, PyValue};
use mooncake_wire::keys::block_hash::{self, HashAlgo, TextRequest};
use mooncake_wire::keys::spec::StoreKeySpec;
use mooncake_wire::keys::store_layout::v034;
use mooncake_wire::keys::store_layout::{
    self as sl, GroupKind, RankNamespace, StoreLayout, TokenDatabase, TpSharedFormat, WorkerConfig,
};
use mooncake_wire::keys::vllm_key::{KeyHints, VllmStoreKey};

use super::{Checker, GoldenError, InputError};

const STORE: &str = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store";

/// The checker for a fully qualified vLLM function name, if we implement it.
pub(crate) fn checker(function: &str) -> Option<Checker> {
    Some(match function.strip_prefix(STORE).map(|f| f.trim_start_matches('.')) {
        Some("data.PoolKey.to_string") => pool_key,
        Some("layout.PoolKey.to_string") => pool_key_034,
        Some("data.TPShardedStoreLayout") => tp_sharded_layout,
        Some("layout.AttentionStoreLayout") => attention_store_layout_034,
        Some("data.ChunkedTokenDatabase.process_tokens") => process_tokens,
        Some("worker.MooncakeStoreWorker._select_store_layout") => store_worker_keys,
        Some("worker._resolve_cache_prefix") => cache_prefix_034,
        _ => match function {
            "vllm.v1.core.kv_cache_utils.get_request_block_hasher" => block_hash_chain,
            "vllm.v1.core.kv_cache_utils.hash_block_tokens" => hash_block_tokens,
            _ => return None,
        },
    })
}

fn release(header: &J) -> Result<String, InputError> {
    header
        .get("source_release")
        .or_else(|| header.get("vllm_version"))
        .and_then(J::as_str)
        .map(str::to_string)
        .ok_or(InputError::NoRelease)
}

fn get<'a>(v: &'a J, k: &str) -> Result<&'a J, InputError> {
    v.get(k).ok_or_else(|| InputError::Missing(k.into()))
}
fn int(v: &J, k: &str) -> Result<i64, InputError> {
    get(v, k)?.as_i64().ok_or_else(|| InputError::NotInt(k.into()))
}
/// The largest count or size a keys golden case may give (hashes to build, TP/PP/PCP sizes): they size
/// allocations, and a file is input.
pub(crate) const MAX_SIZE: i64 = 1 << 16;

/// A count or size: an integer from 0 to [`MAX_SIZE`].
fn size(v: &J, k: &str) -> Result<i64, InputError> {
    let n = int(v, k)?;
    if (0..=MAX_SIZE).contains(&n) {
        Ok(n)
    } else {
        Err(InputError::OutOfRange { key: k.into(), value: n, max: MAX_SIZE })
    }
}
/// The TP × PP × PCP ranks a case names, at most [`MAX_SIZE`]: the key plans are built for every rank.
fn ranks(input: &J) -> Result<(i64, i64, i64), InputError> {
    let (tp, pp, pcp) = (size(input, "tp_size")?, size(input, "pp_size")?, size(input, "pcp_size")?);
    let all = tp * pp * pcp; // each at most 2^16: no overflow
    if all > MAX_SIZE {
        return Err(InputError::OutOfRange { key: "tp_size × pp_size × pcp_size".into(), value: all, max: MAX_SIZE });
    }
    Ok((tp, pp, pcp))
}
fn text(v: &J, k: &str) -> Result<String, InputError> {
    get(v, k)?.as_str().map(str::to_string).ok_or_else(|| InputError::NotString(k.into()))
}
fn tokens(v: &J) -> Result<Vec<PyInt>, GoldenError> {
    get(v, "token_ids")?
        .as_array()
        .ok_or_else(|| InputError::NotArray("token_ids".into()))?
        .iter()
        .map(|t| match tagged::from_tagged_json(t).map_err(GoldenError::ours)? {
            PyValue::Int(i) => Ok(i),
            other => Err(InputError::TokenNotInt(other).into()),
        })
        .collect()
}
fn unhex(s: &str) -> Result<Vec<u8>, InputError> {
    hex::decode(s).map_err(|_| InputError::NotHex(s.into()))
}

/// `KeyMetadata` from the vectors' `key_metadata` (only the fields the release has).
fn metadata(v: &J) -> Result<VllmStoreKey, InputError> {
    let m = get(v, "key_metadata")?;
    let opt_text = |k: &str| m.get(k).and_then(J::as_str).unwrap_or("").to_string();
    let opt_int = |k: &str| m.get(k).and_then(J::as_i64).unwrap_or(0);
    Ok(VllmStoreKey {
        cache_prefix: opt_text("cache_prefix"),
        model_name: text(m, "model_name")?,
        store_namespace: opt_text("store_namespace"),
        tp_rank: int(m, "tp_rank")?,
        pcp_rank: int(m, "pcp_rank")?,
        dcp_rank: int(m, "dcp_rank")?,
        pp_rank: int(m, "pp_rank")?,
        group_id: opt_int("group_id"),
        chunk_hash: String::new(),
    })
}

fn rank_namespaces(v: &J) -> Result<Vec<RankNamespace>, InputError> {
    get(v, "lookup_rank_namespaces")?
        .as_array()
        .ok_or_else(|| InputError::NotArray("lookup_rank_namespaces".into()))?
        .iter()
        .map(|n| match n.as_array().map(|a| a.iter().filter_map(J::as_i64).collect::<Vec<_>>()).as_deref() {
            Some([t, c, d, p]) => Ok((*t, *c, *d, *p)),
            _ => Err(InputError::BadRankNamespace(n.clone())),
        })
        .collect()
}

/// `PoolKey.to_string` of the header's release (+ `build_prefix` where it exists); for 0.33.0 inputs that ask
/// for them, also the overridden prefix, `build_key_string`, the rank-local layout and the group id. Every
/// key is parsed back (with the known cache prefix and model name as hints) and must give the same parts.
fn pool_key(header: &J, input: &J) -> Result<J, GoldenError> {
    let release = release(header)?;
    let spec = StoreKeySpec::builtin();
    let hash_hex = text(input, "hash_hex")?;
    let key = VllmStoreKey { chunk_hash: hash_hex.clone(), ..metadata(input)? };
    let to_string = key.build(&release).map_err(GoldenError::ours)?;
    let hints = KeyHints { cache_prefix: Some(key.cache_prefix.clone()), model_name: Some(key.model_name.clone()) };
    let parsed = VllmStoreKey::parse(&to_string, &release, &hints).map_err(|e| GoldenError::Parser(Box::new(e)))?;
    if parsed != key {
        return Err(GoldenError::ParsedBack { key: to_string, parsed: Box::new(parsed) });
    }
    let mut out = Map::new();
    out.insert("to_string".into(), json!(to_string));
    if spec.has_api("PoolKey.build_prefix", &release).map_err(GoldenError::ours)? {
        out.insert("build_prefix".into(), json!(key.prefix(&release).map_err(GoldenError::ours)?));
    }
    if let Some(ov) = input.get("build_prefix_overrides") {
        let o = |k: &str| ov.get(k).and_then(J::as_i64);
        let meta = VllmStoreKey { chunk_hash: String::new(), ..key.clone() };
        let prefix = sl::build_prefix(&meta, (None, None, None, None)).map_err(GoldenError::ours)?;
        out.insert(
            "build_prefix_overridden".into(),
            json!(sl::build_prefix(&meta, (o("tp_rank"), o("pcp_rank"), o("dcp_rank"), o("pp_rank")))
                .map_err(GoldenError::ours)?),
        );
        out.insert("build_key_string".into(), json!(sl::build_key_string(&prefix, &hash_hex)));
        let layout = StoreLayout::RankLocal { metadata: meta };
        out.insert(
            "rank_local_key_for".into(),
            json!(layout.key_for(0, &hex(&unhex(&hash_hex)?)).map_err(GoldenError::ours)?),
        );
        out.insert(
            "rank_local_lookup_prefixes".into(),
            json!(layout.lookup_key_prefixes(&rank_namespaces(input)?).map_err(GoldenError::ours)?),
        );
        if spec.has_api("_make_mooncake_group_id", &release).map_err(GoldenError::ours)? {
            out.insert("mooncake_group_id".into(), json!(key.mooncake_group_id()));
        }
    }
    Ok(J::Object(out))
}

/// `LBHNCStoreLayout` / `LBNHCStoreLayout`: namespace, shard ids, head split, keys and lookup prefixes.
fn tp_sharded_layout(_header: &J, input: &J) -> Result<J, GoldenError> {
    let class = text(input, "class")?;
    let format = TpSharedFormat::from_class(&class).ok_or_else(|| InputError::UnknownLayoutClass(class.clone()))?;
    let store_tp = size(input, "store_tp_size")?;
    let layout = StoreLayout::tp_sharded(
        metadata(input)?,
        format,
        int(input, "local_tp_size")?,
        store_tp,
        int(input, "tp_rank")?,
        int(input, "num_kv_heads")?,
    )
    .map_err(GoldenError::ours)?;
    let StoreLayout::TpSharded { heads_per_store_shard, local_num_kv_heads, .. } = &layout else { unreachable!() };
    let hash_hex = hex(&unhex(&text(input, "hash_hex")?)?);
    let mut key_for = Map::new();
    for shard in layout.local_shard_ids() {
        key_for.insert(shard.to_string(), json!(layout.key_for(shard, &hash_hex).map_err(GoldenError::ours)?));
    }
    Ok(json!({
        "shared_namespace": format.shared_namespace(store_tp, size(input, "pp_size")?),
        "local_shard_ids": layout.local_shard_ids(),
        "heads_per_store_shard": heads_per_store_shard,
        "local_num_kv_heads": local_num_kv_heads,
        "key_for": key_for,
        "lookup_key_prefixes": layout.lookup_key_prefixes(&rank_namespaces(input)?).map_err(GoldenError::ours)?,
    }))
}

/// `ChunkedTokenDatabase.process_tokens` over synthetic hashes `bytes([i % 256]) * 32`.
fn process_tokens(header: &J, input: &J) -> Result<J, GoldenError> {
    if release(header)? == v034::RELEASE {
        return process_tokens_034(input);
    }
    let block_size = int(input, "block_size")?;
    let hbs = input.get("hash_block_size").and_then(J::as_i64);
    let db = TokenDatabase::new(StoreLayout::RankLocal { metadata: metadata(input)? }, block_size, hbs)
        .map_err(GoldenError::ours)?;
    let hashes: Vec<Vec<u8>> = (0..size(input, "num_block_hashes")?).map(|i| vec![(i % 256) as u8; 32]).collect();
    let mask: Option<Vec<bool>> = match input.get("chunk_mask") {
        None | Some(J::Null) => None,
        Some(m) => Some(
            m.as_array()
                .ok_or_else(|| InputError::NotArray("chunk_mask".into()))?
                .iter()
                .map(|b| b.as_bool().unwrap_or(false))
                .collect(),
        ),
    };
    let chunks = db
        .process_tokens(
            int(input, "token_len")?,
            &hashes,
            int(input, "mask_num")?,
            mask.as_deref(),
            int(input, "put_step")?,
            int(input, "put_step_rank")?,
        )
        .map_err(GoldenError::ours)?;
    let chunks: Vec<J> = chunks
        .iter()
        .map(|c| Ok(json!({"start": c.start, "end": c.end, "hash": hex(&c.hash), "key": db.key_for(&hex(&c.hash)).map_err(GoldenError::ours)?})))
        .collect::<Result<_, GoldenError>>()?;
    let compact =
        sl::chunk_hashes_for_block_size(&hashes, db.hash_block_size, block_size).map_err(GoldenError::ours)?;
    Ok(json!({ "chunks": chunks, "chunk_hashes_for_block_size": compact.iter().map(hex).collect::<Vec<_>>() }))
}

/// The store worker's stages: store TP, layout and namespace, replication factors, lookup prefixes, keys.
fn store_worker_keys(header: &J, input: &J) -> Result<J, GoldenError> {
    if release(header)? == v034::RELEASE {
        return store_worker_keys_034(input);
    }
    let (tp_size, pp_size, pcp_size) = ranks(input)?;
    let cfg = WorkerConfig {
        extra_config: get(input, "extra_config")?
            .as_object()
            .cloned()
            .ok_or_else(|| InputError::NotObject("extra_config".into()))?,
        tp_size,
        tp_rank: int(input, "tp_rank")?,
        pp_size,
        pp_rank: int(input, "pp_rank")?,
        pcp_size,
        pcp_rank: int(input, "pcp_rank")?,
        dcp_size: int(input, "dcp_size")?,
        dcp_rank: int(input, "dcp_rank")?,
        num_kv_heads: int(input, "num_kv_heads")?,
        kv_cache_layout: text(input, "kv_cache_layout")?,
        groups: get(input, "group_kinds")?
            .as_array()
            .ok_or_else(|| InputError::NotArray("group_kinds".into()))?
            .iter()
            .map(|g| GroupKind::parse(g.as_str().unwrap_or("")))
            .collect::<Result<_, _>>()
            .map_err(GoldenError::ours)?,
        model_name: text(input, "model_name")?,
        block_size: int(input, "block_size")?,
        hash_block_size: int(input, "hash_block_size")?,
    };
    let w = sl::worker_keys(&cfg).map_err(GoldenError::ours)?;
    let hash_hex = hex(&unhex(&text(input, "hash_hex")?)?);
    let keys: Vec<J> = w
        .databases
        .iter()
        .map(|db| {
            let mut m = Map::new();
            for shard in db.layout.local_shard_ids() {
                m.insert(shard.to_string(), json!(db.layout.key_for(shard, &hash_hex).map_err(GoldenError::ours)?));
            }
            Ok(J::Object(m))
        })
        .collect::<Result<_, GoldenError>>()?;
    Ok(json!({
        "resolve_store_tp_size": sl::resolve_store_tp_size(&cfg.extra_config),
        "select_store_layout": {
            "store_tp_size": w.store_tp_size,
            "store_namespace": w.store_namespace,
            "layout_cls": w.format.map(|f| f.class_name()),
        },
        "group_tp_replication_factors": w.replication_factors,
        "lookup_key_prefixes": w.lookup_key_prefixes,
        "keys": keys,
    }))
}

/// `get_request_block_hasher` over a text request: NONE_HASH from the seed, then every full block.
fn block_hash_chain(header: &J, input: &J) -> Result<J, GoldenError> {
    let release = release(header)?;
    let rules = StoreKeySpec::builtin().block_hash_rules(&release).map_err(GoldenError::ours)?;
    let algo = HashAlgo::parse(&text(input, "algo")?).map_err(GoldenError::ours)?;
    let pyhashseed = input.get("pythonhashseed").and_then(J::as_str);
    let seed = rules.seed(pyhashseed).map_err(GoldenError::ours)?;
    // The vectors also record the seed vLLM used and its serialization: ours must agree.
    if input.get("none_hash_seed").and_then(J::as_str) != Some(seed) {
        return Err(GoldenError::SeedDiffers { ours: seed.into(), vector: input.get("none_hash_seed").cloned() });
    }
    let serialized_seed = hex(&algo.serialize(&PyValue::str(seed)).map_err(GoldenError::ours)?);
    if input.get("none_hash_seed_serialized_hex").and_then(J::as_str) != Some(serialized_seed.as_str()) {
        return Err(GoldenError::SeedSerializationDiffers(serialized_seed));
    }
    let none_hash = block_hash::none_hash(algo, seed).map_err(GoldenError::ours)?;
    let lora = match input.get("lora") {
        None | Some(J::Null) => None,
        Some(l) => Some((text(l, "lora_name")?, text(l, "lora_path")?)),
    };
    let req = TextRequest {
        token_ids: tokens(input)?,
        lora,
        cache_salt: input.get("cache_salt").and_then(J::as_str).map(str::to_string),
    };
    let blocks = block_hash::request_block_hashes(rules, algo, &none_hash, int(input, "block_size")? as usize, &req)
        .map_err(GoldenError::ours)?;
    Ok(json!({
        "none_hash": hex(none_hash),
        "blocks": blocks.iter().map(|b| json!({
            "tokens_start": b.tokens_start,
            "tokens_end": b.tokens_end,
            "extra_keys": tagged::to_tagged_json(&b.extra_keys),
            "serialized_hex": hex(&b.hashed.serialized),
            "hash": hex(b.hashed.hash),
        })).collect::<Vec<_>>(),
    }))
}

/// `hash_block_tokens(hash_fn, parent, token_ids, extra_keys)`.
fn hash_block_tokens(_header: &J, input: &J) -> Result<J, GoldenError> {
    let algo = HashAlgo::parse(&text(input, "algo")?).map_err(GoldenError::ours)?;
    let none_hash = unhex(&text(input, "none_hash")?)?;
    let parent = match input.get("parent") {
        None | Some(J::Null) => None,
        Some(p) => Some(unhex(p.as_str().ok_or_else(|| InputError::NotString("parent".into()))?)?),
    };
    let extra = tagged::from_tagged_json(input.get("extra_keys").unwrap_or(&J::Null)).map_err(GoldenError::ours)?;
    let b = block_hash::hash_block_tokens(algo, &none_hash, parent.as_deref(), &tokens(input)?, &extra)
        .map_err(GoldenError::ours)?;
    Ok(json!({ "serialized_hex": hex(&b.serialized), "hash": hex(b.hash) }))
}

// ------------------------------------------------------------------------------------------------------------
// vLLM 0.34.0 (store/layout.py, data.py, worker.py).

fn opt_int(v: &J, k: &str) -> Result<Option<i64>, InputError> {
    match v.get(k) {
        None | Some(J::Null) => Ok(None),
        Some(x) => x.as_i64().map(Some).ok_or_else(|| InputError::NotInt(k.into())),
    }
}

fn specs(v: &J, k: &str) -> Result<Vec<v034::LayerSpec>, InputError> {
    serde_json::from_value(get(v, k)?.clone()).map_err(InputError::Decode)
}

fn mask(input: &J) -> Result<Option<Vec<bool>>, InputError> {
    match input.get("chunk_mask") {
        None | Some(J::Null) => Ok(None),
        Some(m) => Ok(Some(
            m.as_array()
                .ok_or_else(|| InputError::NotArray("chunk_mask".into()))?
                .iter()
                .map(|b| b.as_bool().unwrap_or(false))
                .collect(),
        )),
    }
}

/// 0.34.0 `PoolKey` (moved to layout.py), the rank-local layout and the group id, parsed back like 0.33.0's.
fn pool_key_034(header: &J, input: &J) -> Result<J, GoldenError> {
    let release = release(header)?;
    let hash_hex = text(input, "hash_hex")?;
    let key = VllmStoreKey { chunk_hash: hash_hex.clone(), ..metadata(input)? };
    let to_string = key.build(&release).map_err(GoldenError::ours)?;
    let hints = KeyHints { cache_prefix: Some(key.cache_prefix.clone()), model_name: Some(key.model_name.clone()) };
    let parsed = VllmStoreKey::parse(&to_string, &release, &hints).map_err(|e| GoldenError::Parser(Box::new(e)))?;
    if parsed != key {
        return Err(GoldenError::ParsedBack { key: to_string, parsed: Box::new(parsed) });
    }
    let ov = get(input, "build_prefix_overrides")?;
    let o = |k: &str| ov.get(k).and_then(J::as_i64);
    let meta = VllmStoreKey { chunk_hash: String::new(), ..key.clone() };
    let prefix = v034::build_prefix(&meta, (None, None, None, None)).map_err(GoldenError::ours)?;
    let layout = v034::StoreLayout::RankLocal { metadata: meta.clone() };
    Ok(json!({
        "to_string": to_string,
        "build_prefix": key.prefix(&release).map_err(GoldenError::ours)?,
        "build_prefix_overridden": v034::build_prefix(&meta, (o("tp_rank"), o("pcp_rank"), o("dcp_rank"), o("pp_rank"))).map_err(GoldenError::ours)?,
        "build_key_string": sl::build_key_string(&prefix, &hash_hex),
        "rank_local_key_for": layout.key_for(0, &hex(&unhex(&hash_hex)?)).map_err(GoldenError::ours)?,
        "rank_local_lookup_prefixes": layout.lookup_key_prefixes(&rank_namespaces(input)?).map_err(GoldenError::ours)?,
        "mooncake_group_id": key.mooncake_group_id(),
    }))
}

/// `HeadMajorStoreLayout` / `TokenMajorStoreLayout` with the shard count and chunk size they resolve, the
/// schema fingerprint (and the `repr` it hashes), keys and lookup prefixes.
fn attention_store_layout_034(_header: &J, input: &J) -> Result<J, GoldenError> {
    let class = text(input, "class")?;
    let format =
        v034::AttentionFormat::from_class(&class).ok_or_else(|| InputError::UnknownLayoutClass(class.clone()))?;
    let layer_specs = specs(input, "layer_specs")?;
    let refs: Vec<&v034::LayerSpec> = layer_specs.iter().collect();
    let local_tp = int(input, "local_tp_size")?;
    let mut out = Map::new();
    out.insert("spec_num_heads".into(), json!(refs.iter().map(|s| s.num_heads()).collect::<Vec<_>>()));
    out.insert(
        "spec_state_content_size_bytes".into(),
        json!(refs
            .iter()
            .map(|s| s.state_content_size_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(GoldenError::ours)?),
    );
    out.insert(
        "spec_tokens_per_state".into(),
        json!(refs.iter().map(|s| s.tokens_per_state.to_string()).collect::<Vec<_>>()),
    );
    let count = v034::resolve_store_shard_count(&refs, local_tp, int(input, "requested_store_tp_size")?)
        .map_err(GoldenError::ours)?;
    out.insert("resolve_store_shard_count".into(), json!(count));
    let chunk = v034::resolve_store_chunk_size(&refs, opt_int(input, "requested_store_chunk_size")?)
        .map_err(GoldenError::ours)?;
    out.insert("resolve_store_chunk_size".into(), json!(chunk));
    let (Some(count), Some(chunk)) = (count, chunk) else { return Ok(J::Object(out)) };
    let parts = v034::attention_schema_parts_repr(&refs, local_tp, count, chunk).map_err(GoldenError::ours)?;
    out.insert("schema_fingerprint".into(), json!(v034::schema_fingerprint_of_repr(&parts)));
    out.insert("schema_parts_repr".into(), json!(parts));
    let layout = v034::StoreLayout::attention(
        metadata(input)?,
        format,
        int(input, "block_size")?,
        local_tp,
        count,
        int(input, "tp_rank")?,
        &refs,
        Some(chunk),
    )
    .map_err(GoldenError::ours)?;
    let v034::StoreLayout::Attention { heads_per_store_shard, chunks_per_block, store_chunk_size, .. } = &layout else {
        unreachable!("StoreLayout::attention builds an attention layout")
    };
    let hash_hex = hex(&unhex(&text(input, "hash_hex")?)?);
    let mut key_for = Map::new();
    for shard in layout.local_shard_ids() {
        key_for.insert(shard.to_string(), json!(layout.key_for(shard, &hash_hex).map_err(GoldenError::ours)?));
    }
    out.insert("store_format".into(), json!(format.store_format()));
    out.insert("local_shard_ids".into(), json!(layout.local_shard_ids()));
    out.insert("heads_per_store_shard".into(), json!(heads_per_store_shard));
    out.insert("chunks_per_block".into(), json!(chunks_per_block));
    out.insert("store_chunk_size".into(), json!(store_chunk_size));
    out.insert("key_for".into(), J::Object(key_for));
    out.insert(
        "lookup_key_prefixes".into(),
        json!(layout.lookup_key_prefixes(&rank_namespaces(input)?).map_err(GoldenError::ours)?),
    );
    Ok(J::Object(out))
}

/// 0.34.0 `ChunkedTokenDatabase(metadata, chunk_size, hash_block_size).process_tokens(..., tail_key_boundary=)`.
fn process_tokens_034(input: &J) -> Result<J, GoldenError> {
    let chunk_size = int(input, "chunk_size")?;
    let hbs = opt_int(input, "hash_block_size")?;
    let db = v034::TokenDatabase::new(v034::StoreLayout::RankLocal { metadata: metadata(input)? }, chunk_size, hbs)
        .map_err(GoldenError::ours)?;
    let hashes: Vec<Vec<u8>> = (0..size(input, "num_block_hashes")?).map(|i| vec![(i % 256) as u8; 32]).collect();
    let mask = mask(input)?;
    let chunks = db
        .process_tokens(
            int(input, "token_len")?,
            &hashes,
            int(input, "mask_num")?,
            mask.as_deref(),
            opt_int(input, "tail_key_boundary")?,
            int(input, "put_step")?,
            int(input, "put_step_rank")?,
        )
        .map_err(GoldenError::ours)?;
    let chunks: Vec<J> = chunks
        .iter()
        .map(|c| Ok(json!({"start": c.start, "end": c.end, "hash": hex(&c.hash), "key": db.layout.key_for(0, &hex(&c.hash)).map_err(GoldenError::ours)?})))
        .collect::<Result<_, GoldenError>>()?;
    let compact =
        sl::chunk_hashes_for_block_size(&hashes, db.hash_block_size, chunk_size).map_err(GoldenError::ours)?;
    Ok(json!({ "chunks": chunks, "chunk_hashes_for_block_size": compact.iter().map(hex).collect::<Vec<_>>() }))
}

/// The 0.34.0 worker's stages (`pp_rank` from the global rank when the input gives `rank`).
fn store_worker_keys_034(input: &J) -> Result<J, GoldenError> {
    let extra =
        get(input, "extra_config")?.as_object().cloned().ok_or_else(|| InputError::NotObject("extra_config".into()))?;
    let (tp_size, pp_size, pcp_size) = ranks(input)?;
    let pp_rank = match opt_int(input, "pp_rank")? {
        Some(p) => p,
        None => v034::pp_rank_of(int(input, "rank")?, tp_size, pcp_size, pp_size).map_err(GoldenError::ours)?,
    };
    let cfg = v034::WorkerConfig {
        cache_prefix: v034::configured_cache_prefix(&extra),
        extra_config: extra,
        tp_size,
        tp_rank: int(input, "tp_rank")?,
        pp_size,
        pp_rank,
        pcp_size,
        pcp_rank: int(input, "pcp_rank")?,
        dcp_size: int(input, "dcp_size")?,
        dcp_rank: int(input, "dcp_rank")?,
        num_kv_heads: int(input, "num_kv_heads")?,
        kv_cache_layout: text(input, "kv_cache_layout")?,
        prefix_match_unit: opt_int(input, "prefix_match_unit")?,
        hisparse: get(input, "hisparse")?.as_bool().unwrap_or(false),
        hash_block_size: int(input, "hash_block_size")?,
        groups: serde_json::from_value(get(input, "groups")?.clone()).map_err(InputError::Decode)?,
        model_name: text(input, "model_name")?,
    };
    let w = v034::worker_keys(&cfg).map_err(GoldenError::ours)?;
    let hash_hex = hex(&unhex(&text(input, "hash_hex")?)?);
    let keys: Vec<J> = w
        .databases
        .iter()
        .map(|db| {
            let mut m = Map::new();
            for shard in db.layout.local_shard_ids() {
                m.insert(shard.to_string(), json!(db.layout.key_for(shard, &hash_hex).map_err(GoldenError::ours)?));
            }
            Ok(J::Object(m))
        })
        .collect::<Result<_, GoldenError>>()?;
    let plans = w.plans.as_ref().map(|ps| {
        ps.iter()
            .map(|p| {
                p.as_ref().map(|p| {
                    json!({
                        "layout_cls": p.format.class_name(), "local_block_size": p.local_block_size,
                        "logical_tp_size": p.logical_tp_size, "store_shard_count": p.store_shard_count, "tp_rank": p.tp_rank,
                        "schema_fingerprint": p.schema_fingerprint, "store_chunk_size": p.store_chunk_size,
                    })
                })
            })
            .collect::<Vec<_>>()
    });
    let dbs: Vec<J> = w
        .databases
        .iter()
        .map(|db| {
            let m = db.layout.metadata();
            json!({
                "chunk_size": db.chunk_size, "hash_block_size": db.hash_block_size, "store_layout": db.layout.class_name(),
                "key_metadata": {
                    "model_name": m.model_name, "tp_rank": m.tp_rank, "pcp_rank": m.pcp_rank, "dcp_rank": m.dcp_rank,
                    "pp_rank": m.pp_rank, "group_id": m.group_id, "cache_prefix": m.cache_prefix, "store_namespace": m.store_namespace,
                },
            })
        })
        .collect();
    Ok(json!({
        "pp_rank": pp_rank,
        "resolve_store_tp_size": sl::resolve_store_tp_size(&cfg.extra_config),
        "resolve_store_chunk_size": v034::resolve_store_chunk_size_config(&cfg.extra_config),
        "group_tp_replication_factors": w.replication_factors,
        "select_store_layout": { "store_tp_size": w.store_tp_size, "store_namespace": w.store_namespace, "plans": plans },
        "token_databases": dbs,
        "lookup_key_prefixes": w.lookup_key_prefixes,
        "keys": keys,
    }))
}

/// `_resolve_cache_prefix`: the model and cache config hashes are `hash_factors` of the input's compile factors.
fn cache_prefix_034(_header: &J, input: &J) -> Result<J, GoldenError> {
    let extra =
        get(input, "extra_config")?.as_object().cloned().ok_or_else(|| InputError::NotObject("extra_config".into()))?;
    let digest = |k: &str| -> Result<String, GoldenError> {
        let v = tagged::from_tagged_json(get(input, k)?).map_err(GoldenError::ours)?;
        Ok(mooncake_wire::hash::hash_factors(&v).map_err(GoldenError::ours)?.digest)
    };
    let env = |k: &str, unset: &str| input.get(k).and_then(J::as_str).unwrap_or(unset).to_string();
    let i = v034::CachePrefixInputs {
        configured: v034::configured_cache_prefix(&extra),
        image_tag: env("VLLM_IMAGE_TAG", ""),
        build_commit: env("VLLM_BUILD_COMMIT", "unknown"),
        model_hash: digest("model_compile_factors")?,
        hf_commit: input.get("hf_commit").and_then(J::as_str).map(str::to_string),
        cache_hash: digest("cache_compile_factors")?,
    };
    Ok(json!(v034::resolve_cache_prefix(&i).map_err(GoldenError::ours)?))
}
