//! Which keys a vLLM 0.33.0 MooncakeStoreConnector rank writes and probes: the store layouts and the token
//! database (`.../mooncake/store/data.py`: `RankLocalStoreLayout`, `TPShardedStoreLayout` and its
//! `LBHNCStoreLayout` / `LBNHCStoreLayout`, `ChunkedTokenDatabase.process_tokens`,
//! `chunk_hashes_for_block_size`) and the worker's layout selection (`.../store/worker.py`:
//! `resolve_store_tp_size`, `MooncakeStoreWorker._select_store_layout`,
//! `_compute_group_tp_replication_factors`, `_build_token_databases`, `_init_lookup_key_prefixes`).
//! Integer arithmetic follows Python (floor division; division by zero raises `ZeroDivisionError`).

use serde_json::Value as J;

pub mod v034;

use super::vllm_key::VllmStoreKey;
use super::KeysError;
use crate::hash::PyError;

/// The release these functions reproduce.
pub(crate) const RELEASE: &str = "0.33.0";

/// `(tp_rank, pcp_rank, dcp_rank, pp_rank)` encoded in a rank-local key.
pub type RankNamespace = (i64, i64, i64, i64);

pub(crate) fn floordiv(a: i64, b: i64) -> Result<i64, KeysError> {
    if b == 0 {
        return Err(PyError::new("ZeroDivisionError", "integer division or modulo by zero").into());
    }
    // In i128: `i64::MIN // -1` is a Python int beyond i64, reported rather than overflowing.
    let (a, b) = (i128::from(a), i128::from(b));
    let q = a.div_euclid(b) - if b < 0 && a.rem_euclid(b) != 0 { 1 } else { 0 };
    i64::try_from(q).map_err(|_| PyError::new("OverflowError", "integer result beyond 64 bits").into())
}

pub(crate) fn pymod(a: i64, b: i64) -> Result<i64, KeysError> {
    if b == 0 {
        return Err(PyError::new("ZeroDivisionError", "integer division or modulo by zero").into());
    }
    // Python's `a % b` has the sign of `b` and |a % b| < |b|, so it always fits (`i64::MIN % -1 == 0`).
    let (a, b) = (i128::from(a), i128::from(b));
    let r = a.rem_euclid(b);
    Ok(i64::try_from(if b < 0 && r != 0 { r + b } else { r }).unwrap_or_default())
}

fn cdiv(a: i64, b: i64) -> Result<i64, KeysError> {
    let overflow = || KeysError::from(PyError::new("OverflowError", "integer result beyond 64 bits"));
    floordiv(a, b.checked_neg().ok_or_else(overflow)?)?.checked_neg().ok_or_else(overflow)
}

/// `PoolKey.build_prefix(meta, tp_rank=..., pcp_rank=..., dcp_rank=..., pp_rank=...)`.
pub fn build_prefix(
    meta: &VllmStoreKey,
    ns: (Option<i64>, Option<i64>, Option<i64>, Option<i64>),
) -> Result<String, KeysError> {
    let m = VllmStoreKey {
        tp_rank: ns.0.unwrap_or(meta.tp_rank),
        pcp_rank: ns.1.unwrap_or(meta.pcp_rank),
        dcp_rank: ns.2.unwrap_or(meta.dcp_rank),
        pp_rank: ns.3.unwrap_or(meta.pp_rank),
        ..meta.clone()
    };
    Ok(m.prefix(RELEASE)?)
}

/// `PoolKey.build_key_string(prefix, chunk_hash)`.
pub fn build_key_string(prefix: &str, chunk_hash: &str) -> String {
    format!("{prefix}@{chunk_hash}")
}

/// The TP-shared store formats of 0.30.0+ (`TPShardedStoreLayout` subclasses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TpSharedFormat {
    /// `LBHNCStoreLayout`: head-major, one segment per layer.
    Lbhnc,
    /// `LBNHCStoreLayout`: token-major, `block_size` segments per layer.
    Lbnhc,
}

impl TpSharedFormat {
    /// The format of a store-layout class name (`LBHNCStoreLayout`).
    pub fn from_class(name: &str) -> Option<TpSharedFormat> {
        match name {
            "LBHNCStoreLayout" => Some(TpSharedFormat::Lbhnc),
            "LBNHCStoreLayout" => Some(TpSharedFormat::Lbnhc),
            _ => None,
        }
    }
    /// The class name.
    pub fn class_name(self) -> &'static str {
        match self {
            TpSharedFormat::Lbhnc => "LBHNCStoreLayout",
            TpSharedFormat::Lbnhc => "LBNHCStoreLayout",
        }
    }
    /// `store_format` (the namespace's last part).
    pub(crate) fn store_format(self) -> &'static str {
        match self {
            TpSharedFormat::Lbhnc => "tp_shared_lbhnc",
            TpSharedFormat::Lbnhc => "tp_shared_lbnhc",
        }
    }
    /// The KV-cache layout that selects it.
    pub(crate) fn for_cache_layout(layout: &str) -> Option<TpSharedFormat> {
        match layout {
            "LBHNC" => Some(TpSharedFormat::Lbhnc),
            "LBNHC" => Some(TpSharedFormat::Lbnhc),
            _ => None,
        }
    }
    /// `shared_namespace(store_tp_size, pp_size)`.
    pub fn shared_namespace(self, store_tp_size: i64, pp_size: i64) -> String {
        format!("@store_tp:{store_tp_size}@store_pp:{pp_size}@store_format:{}", self.store_format())
    }
}

/// One KV-cache group's store layout on one local TP rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLayout {
    /// The historical layout: one object per (rank namespace, block), shard id 0.
    RankLocal {
        /// The key parts shared by every key of the rank.
        metadata: VllmStoreKey,
    },
    /// One object per (block, store shard), shared by every local TP size that divides `store_tp_size`.
    TpSharded {
        /// The key parts shared by every key of the rank.
        metadata: VllmStoreKey,
        /// How the shards are laid out.
        format: TpSharedFormat,
        /// Number of store shards.
        store_tp_size: i64,
        /// The shards this rank writes.
        shard_ids: Vec<i64>,
        /// KV heads per store shard.
        heads_per_store_shard: i64,
        /// KV heads on this rank.
        local_num_kv_heads: i64,
    },
}

impl StoreLayout {
    /// `TPShardedStoreLayout.__init__`.
    pub fn tp_sharded(
        metadata: VllmStoreKey,
        format: TpSharedFormat,
        local_tp_size: i64,
        store_tp_size: i64,
        tp_rank: i64,
        num_kv_heads: i64,
    ) -> Result<StoreLayout, KeysError> {
        let overflow = || KeysError::from(PyError::new("OverflowError", "integer result beyond 64 bits"));
        let per_rank = enumerable(floordiv(store_tp_size, local_tp_size)?, "store shards per rank")?;
        enumerable(store_tp_size, "store shards")?;
        let first = tp_rank.checked_mul(per_rank).ok_or_else(overflow)?;
        Ok(StoreLayout::TpSharded {
            metadata,
            format,
            store_tp_size,
            shard_ids: (first..first.checked_add(per_rank).ok_or_else(overflow)?).collect(),
            heads_per_store_shard: floordiv(num_kv_heads, store_tp_size)?,
            local_num_kv_heads: floordiv(num_kv_heads, local_tp_size)?,
        })
    }

    /// The store shards this layout's rank writes (`[0]` for the rank-local layout).
    pub fn local_shard_ids(&self) -> Vec<i64> {
        match self {
            StoreLayout::RankLocal { .. } => vec![0],
            StoreLayout::TpSharded { shard_ids, .. } => shard_ids.clone(),
        }
    }

    /// `key_for(shard_id, chunk_hash)` with the hash as hex.
    pub fn key_for(&self, shard_id: i64, hash_hex: &str) -> Result<String, KeysError> {
        match self {
            StoreLayout::RankLocal { metadata } => {
                if shard_id != 0 {
                    return Err(PyError::new("AssertionError", "").into());
                }
                Ok(build_key_string(&build_prefix(metadata, (None, None, None, None))?, hash_hex))
            }
            StoreLayout::TpSharded { metadata, shard_ids, .. } => {
                if !shard_ids.contains(&shard_id) {
                    return Err(PyError::new("KeyError", shard_id.to_string()).into());
                }
                Ok(build_key_string(&build_prefix(metadata, (Some(shard_id), None, None, None))?, hash_hex))
            }
        }
    }

    /// `lookup_key_prefixes(rank_namespaces)`.
    pub fn lookup_key_prefixes(&self, namespaces: &[RankNamespace]) -> Result<Vec<String>, KeysError> {
        match self {
            StoreLayout::RankLocal { metadata } => namespaces
                .iter()
                .map(|&(t, c, d, p)| build_prefix(metadata, (Some(t), Some(c), Some(d), Some(p))))
                .collect(),
            StoreLayout::TpSharded { metadata, store_tp_size, .. } => {
                let mut pp: Vec<i64> = namespaces.iter().map(|n| n.3).collect();
                pp.sort_unstable();
                pp.dedup();
                let mut out = vec![];
                let shards = enumerable(*store_tp_size, "store shards")?;
                enumerable(shards.saturating_mul(pp.len() as i64), "store shards × PP stages")?;
                for shard in 0..shards {
                    for &p in &pp {
                        out.push(build_prefix(metadata, (Some(shard), None, None, Some(p)))?);
                    }
                }
                Ok(out)
            }
        }
    }
}

/// `chunk_hashes_for_block_size`: the hash keying each `block_size` chunk (the chunk's last sub-hash).
pub fn chunk_hashes_for_block_size(
    block_hashes: &[Vec<u8>],
    hash_block_size: i64,
    block_size: i64,
) -> Result<Vec<Vec<u8>>, KeysError> {
    if block_size == hash_block_size {
        return Ok(block_hashes.to_vec());
    }
    if pymod(block_size, hash_block_size)? != 0 {
        return Err(PyError::new("AssertionError", "").into());
    }
    let scale = floordiv(block_size, hash_block_size)?;
    let n = floordiv(block_hashes.len() as i64, scale)?;
    (0..n.max(0)).map(|i| Ok(block_hashes[(i * scale + scale - 1) as usize].clone())).collect()
}

/// One chunk `process_tokens` yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Index of the chunk's first token.
    pub start: i64,
    /// Index after its last token.
    pub end: i64,
    /// The hash that keys it.
    pub hash: Vec<u8>,
}

/// `ChunkedTokenDatabase(metadata, block_size, hash_block_size)` with a rank-local layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenDatabase {
    /// Tokens per stored chunk.
    pub block_size: i64,
    /// Tokens per block hash (divides `block_size`).
    pub hash_block_size: i64,
    /// How the chunk's keys are formed.
    pub layout: StoreLayout,
}

impl TokenDatabase {
    /// `hash_block_size` of `None` or 0 means `block_size`; a block size that is not a multiple raises.
    pub fn new(layout: StoreLayout, block_size: i64, hash_block_size: Option<i64>) -> Result<TokenDatabase, KeysError> {
        let hbs = match hash_block_size {
            Some(h) if h != 0 => h,
            _ => block_size,
        };
        if pymod(block_size, hbs)? != 0 {
            return Err(PyError::value_error(format!(
                "block_size ({block_size}) must be a multiple of hash_block_size ({hbs})"
            ))
            .into());
        }
        Ok(TokenDatabase { block_size, hash_block_size: hbs, layout })
    }

    /// `ChunkedTokenDatabase.key_for(chunk_hash)` (rank-local layouts only).
    pub fn key_for(&self, hash_hex: &str) -> Result<String, KeysError> {
        match &self.layout {
            StoreLayout::RankLocal { .. } => self.layout.key_for(0, hash_hex),
            StoreLayout::TpSharded { .. } => {
                Err(PyError::new("RuntimeError", "This operation requires a rank-local Store layout").into())
            }
        }
    }

    /// `process_tokens(token_len, block_hashes, mask_num, chunk_mask=, put_step=, put_step_rank=)`, fully
    /// consumed.
    pub fn process_tokens(
        &self,
        token_len: i64,
        block_hashes: &[Vec<u8>],
        mask_num: i64,
        chunk_mask: Option<&[bool]>,
        put_step: i64,
        put_step_rank: i64,
    ) -> Result<Vec<Chunk>, KeysError> {
        let assertion = || KeysError::from(PyError::new("AssertionError", ""));
        if put_step <= 0 {
            return Err(assertion());
        }
        if block_hashes.is_empty() {
            return Ok(vec![]);
        }
        if pymod(token_len, self.hash_block_size)? != 0
            || floordiv(token_len, self.hash_block_size)? > block_hashes.len() as i64
        {
            return Err(assertion());
        }
        let start_chunk = cdiv(mask_num, self.block_size)?.max(0);
        let mut max_chunks = cdiv(token_len, self.block_size)?;
        if let Some(m) = chunk_mask {
            max_chunks = max_chunks.min(start_chunk + m.len() as i64);
        }
        let mut out = vec![];
        for chunk_id in start_chunk..max_chunks {
            if let Some(m) = chunk_mask {
                if !m[(chunk_id - start_chunk) as usize] {
                    continue;
                }
            }
            if pymod(chunk_id, put_step)? != put_step_rank {
                continue;
            }
            let start = chunk_id * self.block_size;
            let end = (start + self.block_size).min(token_len);
            let idx = floordiv(end, self.hash_block_size)?.saturating_sub(1);
            let idx = if idx < 0 { idx.saturating_add(block_hashes.len() as i64) } else { idx };
            let hash =
                block_hashes.get(idx as usize).ok_or_else(|| PyError::new("IndexError", "list index out of range"))?;
            out.push(Chunk { start, end, hash: hash.clone() });
        }
        Ok(out)
    }
}

/// The kind of a KV-cache group as the store worker sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKind {
    /// `FullAttentionSpec`.
    Attention,
    /// `MLAAttentionSpec` (replicated on every TP rank).
    Mla,
    /// `MambaSpec` (rank-specific state).
    Mamba,
}

impl GroupKind {
    /// `attn`, `mla` or `mamba`.
    pub fn parse(s: &str) -> Result<GroupKind, KeysError> {
        match s {
            "attn" => Ok(GroupKind::Attention),
            "mla" => Ok(GroupKind::Mla),
            "mamba" => Ok(GroupKind::Mamba),
            other => Err(KeysError::UnknownGroupKind(other.to_string())),
        }
    }
}

/// The topology and config a store worker derives its keys from.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// `kv_connector_extra_config`.
    pub extra_config: serde_json::Map<String, J>,
    /// Tensor-parallel size.
    pub tp_size: i64,
    /// This worker's tensor-parallel rank.
    pub tp_rank: i64,
    /// Pipeline-parallel size.
    pub pp_size: i64,
    /// This worker's pipeline-parallel rank.
    pub pp_rank: i64,
    /// Prefill context-parallel size.
    pub pcp_size: i64,
    /// This worker's prefill context-parallel rank.
    pub pcp_rank: i64,
    /// Decode context-parallel size.
    pub dcp_size: i64,
    /// This worker's decode context-parallel rank.
    pub dcp_rank: i64,
    /// The model's KV heads in total.
    pub num_kv_heads: i64,
    /// `KVCacheLayout` member name (`LBHNC`, ...).
    pub kv_cache_layout: String,
    /// The kind of each KV-cache group, in group order.
    pub groups: Vec<GroupKind>,
    /// The model name in keys ([`super::vllm_key::model_name_of`]).
    pub model_name: String,
    /// Tokens per stored chunk.
    pub block_size: i64,
    /// Tokens per block hash.
    pub hash_block_size: i64,
}

/// `resolve_store_tp_size(extra_config)`.
pub fn resolve_store_tp_size(extra: &serde_json::Map<String, J>) -> Option<i64> {
    let exact_int = |v: &J| v.as_i64().filter(|_| v.is_i64() || v.is_u64());
    if extra.get("enable_store_tp_lcm") == Some(&J::Bool(true)) {
        let sizes = extra.get("prefill_tp_sizes")?.as_array().filter(|a| !a.is_empty())?;
        let ints: Option<Vec<i64>> = sizes.iter().map(|v| exact_int(v).filter(|i| *i > 0)).collect();
        return ints?.into_iter().try_fold(1, lcm);
    }
    extra.get("store_tp_size").and_then(exact_int).filter(|v| *v > 0)
}

/// `math.lcm` of two positive sizes; `None` beyond 64 bits (Python's int would hold it; no real deployment has
/// such a store TP size, and one that large selects no TP-shared layout unless the model has no KV heads).
fn lcm(a: i64, b: i64) -> Option<i64> {
    fn gcd(a: i64, b: i64) -> i64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    (a / gcd(a, b)).checked_mul(b)
}

/// Rank counts, shard counts and PP stages this module enumerates at most (a larger value is refused rather
/// than building millions of prefixes).
pub const MAX_RANKS: i64 = 1 << 16;

/// `n` if it is at most [`MAX_RANKS`] (negative counts enumerate nothing); else [`KeysError::TooMany`].
pub(crate) fn enumerable(n: i64, what: &'static str) -> Result<i64, KeysError> {
    if n > MAX_RANKS {
        return Err(KeysError::TooMany { what, n });
    }
    Ok(n.max(0))
}

/// Python `str(value)` of a JSON value from the extra config.
fn py_str(v: &J) -> String {
    match v {
        J::String(s) => s.clone(),
        J::Bool(b) => if *b { "True" } else { "False" }.into(),
        J::Null => "None".into(),
        J::Number(n) => {
            n.as_f64().filter(|_| n.is_f64()).map(crate::hash::pyfloat::float_repr).unwrap_or_else(|| n.to_string())
        }
        other => other.to_string(),
    }
}

/// `_select_store_layout`: `(store_tp_size, store_namespace, TP-shared format)`.
pub(crate) fn select_store_layout(cfg: &WorkerConfig) -> (Option<i64>, String, Option<TpSharedFormat>) {
    let extra = &cfg.extra_config;
    let lcm_enabled = extra.get("enable_store_tp_lcm") == Some(&J::Bool(true));
    let requested = lcm_enabled || extra.get("store_tp_size").is_some_and(|v| !v.is_null());
    if !requested {
        return (None, String::new(), None);
    }
    let store_tp = resolve_store_tp_size(extra);
    let format = TpSharedFormat::for_cache_layout(&cfg.kv_cache_layout);
    let cross_layers =
        extra.get("enable_cross_layers_blocks").map(py_str).unwrap_or_else(|| "False".into()).to_lowercase() == "true";
    let supports = format.is_some()
        && cfg.pcp_size == 1
        && cfg.dcp_size == 1
        && cfg.groups.len() == 1
        && cfg.groups[0] == GroupKind::Attention
        && !cross_layers;
    if let (Some(s), Some(fmt)) = (store_tp, format) {
        if s >= cfg.tp_size && cfg.tp_size != 0 && s % cfg.tp_size == 0 && supports {
            if cfg.num_kv_heads.rem_euclid(s) == 0 {
                return (Some(s), fmt.shared_namespace(s, cfg.pp_size), Some(fmt));
            }
            if cfg.num_kv_heads == 1 {
                return (None, format!("@store_pp:{}@store_format:tp_shared_mqa", cfg.pp_size), None);
            }
        }
    }
    (
        None,
        format!("@store_pp:{}@store_format:rank_local_tp{}_layout_{}", cfg.pp_size, cfg.tp_size, cfg.kv_cache_layout),
        None,
    )
}

/// `_compute_group_tp_replication_factors`: byte-identical TP replicas per group.
pub(crate) fn group_tp_replication_factors(cfg: &WorkerConfig) -> Result<Vec<i64>, KeysError> {
    cfg.groups
        .iter()
        .map(|g| {
            Ok(if cfg.dcp_size > 1 || *g == GroupKind::Mamba {
                1
            } else if *g == GroupKind::Mla {
                cfg.tp_size
            } else {
                floordiv(cfg.tp_size, cfg.num_kv_heads)?.max(1)
            })
        })
        .collect()
}

/// What a store worker derives: its layouts, the prefixes it probes, and its keys for one hash.
#[derive(Clone, Debug)]
pub struct WorkerKeys {
    /// The store TP size of a TP-shared layout, `None` for rank-local keys.
    pub store_tp_size: Option<i64>,
    /// The namespace written into every key (empty for rank-local keys).
    pub store_namespace: String,
    /// The TP-shared format, if any.
    pub format: Option<TpSharedFormat>,
    /// How many TP ranks hold each group's data.
    pub replication_factors: Vec<i64>,
    /// One token database per KV-cache group.
    pub databases: Vec<TokenDatabase>,
    /// The key prefixes a lookup probes, per group.
    pub lookup_key_prefixes: Vec<Vec<String>>,
}

/// `_select_store_layout` → `KeyMetadata` → `_compute_group_tp_replication_factors` →
/// `_build_token_databases` → `_init_lookup_key_prefixes`.
pub fn worker_keys(cfg: &WorkerConfig) -> Result<WorkerKeys, KeysError> {
    let (store_tp_size, store_namespace, format) = select_store_layout(cfg);
    let cache_prefix = cfg.extra_config.get("cache_prefix").map(py_str).unwrap_or_default();
    let metadata = VllmStoreKey {
        cache_prefix,
        model_name: cfg.model_name.clone(),
        store_namespace: store_namespace.clone(),
        tp_rank: cfg.tp_rank,
        pcp_rank: cfg.pcp_rank,
        dcp_rank: cfg.dcp_rank,
        pp_rank: cfg.pp_rank,
        group_id: 0,
        chunk_hash: String::new(),
    };
    let factors = group_tp_replication_factors(cfg)?;
    let mut databases = vec![];
    for (idx, _) in cfg.groups.iter().enumerate() {
        let mut tp_rank = cfg.tp_rank;
        if format.is_none() {
            tp_rank = floordiv(tp_rank, factors[idx])?;
        }
        let meta = VllmStoreKey { group_id: idx as i64, tp_rank, ..metadata.clone() };
        let layout = match (format, store_tp_size) {
            (Some(f), Some(s)) => StoreLayout::tp_sharded(meta, f, cfg.tp_size, s, cfg.tp_rank, cfg.num_kv_heads)?,
            _ => StoreLayout::RankLocal { metadata: meta },
        };
        databases.push(TokenDatabase::new(layout, cfg.block_size, Some(cfg.hash_block_size))?);
    }
    let mut lookup = vec![];
    for (idx, db) in databases.iter().enumerate() {
        let mut ns: Vec<RankNamespace> = vec![];
        if cfg.dcp_size > 1 {
            for pcp in 0..cfg.pcp_size {
                for tp in 0..cfg.tp_size {
                    for pp in 0..cfg.pp_size {
                        ns.push((tp, pcp, pymod(tp, cfg.dcp_size)?, pp));
                    }
                }
            }
        } else {
            for pcp in 0..cfg.pcp_size {
                for shard in 0..floordiv(cfg.tp_size, factors[idx])? {
                    for pp in 0..cfg.pp_size {
                        ns.push((shard, pcp, 0, pp));
                    }
                }
            }
        }
        lookup.push(db.layout.lookup_key_prefixes(&ns)?);
    }
    Ok(WorkerKeys {
        store_tp_size,
        store_namespace,
        format,
        replication_factors: factors,
        databases,
        lookup_key_prefixes: lookup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_integer_semantics() {
        assert_eq!(floordiv(-7, 2).unwrap(), -4);
        assert_eq!(floordiv(7, -2).unwrap(), -4);
        assert_eq!(floordiv(-7, -2).unwrap(), 3);
        assert_eq!(pymod(-7, 2).unwrap(), 1);
        assert_eq!(cdiv(17, 16).unwrap(), 2);
        assert!(floordiv(1, 0).unwrap_err().to_string().starts_with("ZeroDivisionError"));
        assert!(floordiv(i64::MIN, -1).unwrap_err().to_string().starts_with("OverflowError"));
        assert_eq!(pymod(i64::MIN, -1).unwrap(), 0);
        assert_eq!(pymod(7, -2).unwrap(), -1);
        assert_eq!(pymod(-7, -2).unwrap(), -1);
    }

    #[test]
    fn store_tp_resolution() {
        let m = |v: J| v.as_object().unwrap().clone();
        assert_eq!(resolve_store_tp_size(&m(serde_json::json!({"store_tp_size": 4}))), Some(4));
        assert_eq!(resolve_store_tp_size(&m(serde_json::json!({"store_tp_size": "4"}))), None);
        assert_eq!(resolve_store_tp_size(&m(serde_json::json!({"store_tp_size": true}))), None);
        assert_eq!(
            resolve_store_tp_size(&m(serde_json::json!({"enable_store_tp_lcm": true, "prefill_tp_sizes": [4, 6]}))),
            Some(12)
        );
        assert_eq!(
            resolve_store_tp_size(&m(serde_json::json!({"enable_store_tp_lcm": true, "prefill_tp_sizes": [2, 0]}))),
            None
        );
        assert_eq!(
            resolve_store_tp_size(&m(serde_json::json!({"enable_store_tp_lcm": 1, "store_tp_size": 2}))),
            Some(2)
        );
        // An lcm beyond 64 bits is not resolved (it used to overflow: a panic in a debug build).
        let huge = serde_json::json!({"enable_store_tp_lcm": true, "prefill_tp_sizes": [i64::MAX, i64::MAX - 1]});
        assert_eq!(resolve_store_tp_size(&m(huge)), None);
    }

    /// A store TP size from a configuration sizes the shards a rank writes and the prefixes a lookup builds:
    /// beyond [`MAX_RANKS`] it is refused by name instead of enumerating (2^40 shards took all memory).
    #[test]
    fn store_shard_counts_from_a_configuration_are_bounded() {
        let meta = || VllmStoreKey { ..Default::default() };
        for (store_tp, tp) in [(1i64 << 40, 1), (MAX_RANKS + 1, 1), (1 << 40, 1 << 20)] {
            let e = StoreLayout::tp_sharded(meta(), TpSharedFormat::Lbhnc, tp, store_tp, 0, 0).unwrap_err();
            assert!(matches!(e, KeysError::TooMany { .. }), "{store_tp}/{tp}: {e}");
        }
        let e = StoreLayout::tp_sharded(meta(), TpSharedFormat::Lbhnc, 1, 4, i64::MAX, 0).unwrap_err();
        assert!(e.to_string().starts_with("OverflowError"), "{e}");
        let layout = StoreLayout::tp_sharded(meta(), TpSharedFormat::Lbhnc, 1, MAX_RANKS, 0, 0).unwrap();
        let many: Vec<RankNamespace> = (0..4).map(|p| (0, 0, 0, p)).collect();
        let e = layout.lookup_key_prefixes(&many).unwrap_err();
        assert!(matches!(e, KeysError::TooMany { what: "store shards × PP stages", .. }), "{e}");
    }
}
