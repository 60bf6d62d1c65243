//! Checkers for vLLM's store key functions (keys/*.jsonl).

use serde_json::{json, Map, Value as J};

use hex::encode as hex;
use mooncake_wire::hash::{tagged, PyInt, PyValue};
use mooncake_wire::keys::block_hash::{self, HashAlgo, TextRequest};
use mooncake_wire::keys::spec::StoreKeySpec;
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
        Some("data.TPShardedStoreLayout") => tp_sharded_layout,
        Some("data.ChunkedTokenDatabase.process_tokens") => process_tokens,
        Some("worker.MooncakeStoreWorker._select_store_layout") => store_worker_keys,
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
    let store_tp = int(input, "store_tp_size")?;
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
        "shared_namespace": format.shared_namespace(store_tp, int(input, "pp_size")?),
        "local_shard_ids": layout.local_shard_ids(),
        "heads_per_store_shard": heads_per_store_shard,
        "local_num_kv_heads": local_num_kv_heads,
        "key_for": key_for,
        "lookup_key_prefixes": layout.lookup_key_prefixes(&rank_namespaces(input)?).map_err(GoldenError::ours)?,
    }))
}

/// `ChunkedTokenDatabase.process_tokens` over synthetic hashes `bytes([i % 256]) * 32`.
fn process_tokens(_header: &J, input: &J) -> Result<J, GoldenError> {
    let block_size = int(input, "block_size")?;
    let hbs = input.get("hash_block_size").and_then(J::as_i64);
    let db = TokenDatabase::new(StoreLayout::RankLocal { metadata: metadata(input)? }, block_size, hbs)
        .map_err(GoldenError::ours)?;
    let hashes: Vec<Vec<u8>> = (0..int(input, "num_block_hashes")?).map(|i| vec![(i % 256) as u8; 32]).collect();
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
fn store_worker_keys(_header: &J, input: &J) -> Result<J, GoldenError> {
    let cfg = WorkerConfig {
        extra_config: get(input, "extra_config")?
            .as_object()
            .cloned()
            .ok_or_else(|| InputError::NotObject("extra_config".into()))?,
        tp_size: int(input, "tp_size")?,
        tp_rank: int(input, "tp_rank")?,
        pp_size: int(input, "pp_size")?,
        pp_rank: int(input, "pp_rank")?,
        pcp_size: int(input, "pcp_size")?,
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
