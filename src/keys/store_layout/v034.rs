//! Which keys a vLLM 0.34.0 MooncakeStoreConnector rank writes and probes.
//!
//! 0.34.0 moved the key types and store layouts to `.../mooncake/store/layout.py` and replaced the
//! TP-shared layouts of 0.30.0 – 0.33.0 (`LBHNCStoreLayout`, `LBNHCStoreLayout`, the `tp_shared_mqa`
//! namespace): every prefix-cacheable KV-cache group gets a plan of its own (`_make_store_group_plan`), keyed
//! in a per-group namespace `@store_tp:{T}@store_pp:{P}@store_format:{fmt}@store_schema:{16 hex}` whose last
//! part fingerprints the group's layer specs (`AttentionStoreLayout.schema_fingerprint`). Attention groups
//! split each block into Store chunks of `store_chunk_size` tokens and shard the head slots
//! (`HeadMajorStoreLayout` / `TokenMajorStoreLayout`); lookups probe only the worker's own PP stage and gather
//! the other stages' prefixes (`_init_lookup_key_prefixes`). Reproduced here (facts: vLLM 0.34.0 wheel,
//! `.../mooncake/store/layout.py`, `data.py` `ChunkedTokenDatabase`, `worker.py` `resolve_store_tp_size`,
//! `resolve_store_chunk_size`, `_resolve_attention_store_chunk`, `_resolve_cache_prefix`,
//! `MooncakeStoreWorker._select_store_layout`, `_make_store_group_plan`, `_spec_tp_replication_factor`,
//! `_build_token_databases`, `_init_lookup_key_prefixes`), except `MambaStoreLayout.schema_fingerprint`,
//! whose state segments come from `derive_mamba_conv_split` (`ssm_conv_transfer_utils.py`): a Mamba group that
//! reaches group planning is reported as [`KeysError::Unsupported`].

use serde::Deserialize;
use serde_json::Value as J;
use sha2::{Digest, Sha256};

use super::{build_key_string, cdiv, floordiv, py_str, pymod, resolve_store_tp_size, Chunk, RankNamespace};
use crate::hash::{PyError, PyValue};
use crate::keys::vllm_key::VllmStoreKey;
use crate::keys::KeysError;

/// The release these functions reproduce.
pub const RELEASE: &str = "0.34.0";

/// `PoolKey.build_prefix(meta, tp_rank=..., ...)` with the 0.34.0 grammar.
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

/// A rational number as Python's `fractions.Fraction` (normalized, positive denominator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fraction {
    /// Numerator.
    pub num: i64,
    /// Denominator, > 0.
    pub den: i64,
}

impl Fraction {
    /// `Fraction(num, den)`; a zero denominator raises `ZeroDivisionError` as Python does.
    pub fn new(num: i64, den: i64) -> Result<Fraction, KeysError> {
        if den == 0 {
            return Err(PyError::new("ZeroDivisionError", format!("Fraction({num}, 0)")).into());
        }
        let (n, d) = (i128::from(num), i128::from(den));
        let g = gcd(n.unsigned_abs(), d.unsigned_abs()).max(1) as i128;
        let s = if d < 0 { -1 } else { 1 };
        match (i64::try_from(s * n / g), i64::try_from(s * d / g)) {
            (Ok(num), Ok(den)) => Ok(Fraction { num, den }),
            _ => Err(overflow()),
        }
    }
    /// `Fraction(a, 1) / self`.
    pub fn divide_int(self, a: i64) -> Result<Fraction, KeysError> {
        if self.num == 0 {
            return Err(PyError::new("ZeroDivisionError", format!("Fraction({a}, 0)")).into());
        }
        Fraction::new(a.checked_mul(self.den).ok_or_else(overflow)?, self.num)
    }
}

impl std::fmt::Display for Fraction {
    /// `str(Fraction)`: `3` or `3/2`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

fn overflow() -> KeysError {
    PyError::new("OverflowError", "integer result beyond 64 bits").into()
}

use super::enumerable;
pub use super::MAX_RANKS;

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl<'de> Deserialize<'de> for Fraction {
    /// An integer, or `"a/b"` text (`str(Fraction)`).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Fraction, D::Error> {
        use serde::de::Error;
        match J::deserialize(d)? {
            J::Number(n) => {
                n.as_i64().map(|v| Fraction { num: v, den: 1 }).ok_or_else(|| D::Error::custom("not an integer"))
            }
            J::String(s) => {
                let (a, b) = s.split_once('/').unwrap_or((s.as_str(), "1"));
                let (a, b) = (a.trim().parse::<i64>(), b.trim().parse::<i64>());
                match (a, b) {
                    (Ok(a), Ok(b)) => Fraction::new(a, b).map_err(|e| D::Error::custom(e.to_string())),
                    _ => Err(D::Error::custom(format!("{s:?} is not a fraction"))),
                }
            }
            other => Err(D::Error::custom(format!("{other} is not a fraction"))),
        }
    }
}

fn one() -> Fraction {
    Fraction { num: 1, den: 1 }
}

/// One layer's `KVCacheSpec`, as the 0.34.0 store layouts read it (the attributes of vLLM's spec dataclasses;
/// `vllm/v1/kv_cache_interface.py`).
#[derive(Clone, Debug, Deserialize)]
pub struct LayerSpec {
    /// The spec class (`FullAttentionSpec`, `SlidingWindowSpec`, `MLAAttentionSpec`, `MambaSpec`, ...).
    #[serde(rename = "class")]
    pub class: String,
    /// Tokens per block.
    pub block_size: i64,
    /// KV heads on this rank (attention).
    #[serde(default)]
    pub num_kv_heads: i64,
    /// Head size (attention).
    #[serde(default)]
    pub head_size: i64,
    /// V head size; `None`: 0 for the MLA specs, else `head_size`.
    #[serde(default)]
    pub head_size_v: Option<i64>,
    /// `str(torch dtype)`, e.g. `torch.bfloat16` (attention).
    #[serde(default)]
    pub dtype: Option<String>,
    /// `KVQuantMode` value (0 = NONE).
    #[serde(default)]
    pub kv_quant_mode: i64,
    /// Head slots of a packed page; `None`: one per KV head.
    #[serde(default)]
    pub num_head_slots: Option<i64>,
    /// Bytes per (head slot, state) cell when packed; `None`: `(head_size + head_size_v) * dtype size`.
    #[serde(default)]
    pub state_content_bytes: Option<i64>,
    /// Tokens per stored state (default 1).
    #[serde(default = "one")]
    pub tokens_per_state: Fraction,
    /// The MLA specs' `cache_dtype_str`.
    #[serde(default)]
    pub cache_dtype_str: Option<String>,
    /// `SlidingWindowMLASpec.bounded_replay` (not prefix-cacheable when set).
    #[serde(default)]
    pub bounded_replay: bool,
    /// Other attributes (`sliding_window`, a Mamba spec's `shapes`, ...): not read by the key functions.
    #[serde(flatten)]
    pub other: serde_json::Map<String, J>,
}

/// The family `_store_spec_family` gives a spec class (its first `AttentionSpec` / `MambaSpec` base).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecFamily {
    /// An `AttentionSpec` subclass.
    Attention,
    /// `MambaSpec`.
    Mamba,
}

/// Every `KVCacheSpec` class of vLLM 0.34.0: (name, family, MLA-replicated, prefix-cacheable by class).
const CLASSES: &[(&str, Option<SpecFamily>, bool, bool)] = &[
    ("AttentionSpec", Some(SpecFamily::Attention), false, true),
    ("FullAttentionSpec", Some(SpecFamily::Attention), false, true),
    ("MLAAttentionSpec", Some(SpecFamily::Attention), true, true),
    ("HiddenStateCacheSpec", Some(SpecFamily::Attention), true, true),
    ("RSWASpec", Some(SpecFamily::Attention), false, true),
    ("ChunkedLocalAttentionSpec", Some(SpecFamily::Attention), false, true),
    ("SlidingWindowSpec", Some(SpecFamily::Attention), false, true),
    ("CircularBufferSpec", Some(SpecFamily::Attention), false, false),
    ("SlidingWindowMLASpec", Some(SpecFamily::Attention), true, true),
    ("EncoderOnlyAttentionSpec", Some(SpecFamily::Attention), false, true),
    ("CrossAttentionSpec", Some(SpecFamily::Attention), false, true),
    ("SinkFullAttentionSpec", Some(SpecFamily::Attention), false, true),
    ("MambaSpec", Some(SpecFamily::Mamba), false, true),
    ("HiSparseHotSpec", None, false, false),
    ("HiSparseResidentSpec", None, false, false),
];

fn dtype_size(dtype: &str) -> Option<i64> {
    Some(match dtype.strip_prefix("torch.").unwrap_or(dtype) {
        "float64" | "int64" | "complex64" => 8,
        "float32" | "int32" => 4,
        "float16" | "bfloat16" | "int16" => 2,
        "uint8" | "int8" | "float8_e4m3fn" | "float8_e5m2" | "float8_e4m3fnuz" | "float8_e5m2fnuz" | "bool" => 1,
        _ => return None,
    })
}

impl LayerSpec {
    fn class_row(&self) -> Result<&'static (&'static str, Option<SpecFamily>, bool, bool), KeysError> {
        CLASSES.iter().find(|c| c.0 == self.class).ok_or_else(|| KeysError::UnknownSpecClass(self.class.clone()))
    }
    /// `_store_spec_family(spec)`.
    pub fn family(&self) -> Result<Option<SpecFamily>, KeysError> {
        Ok(self.class_row()?.1)
    }
    /// Whether TP replicates it like MLA (`MLAAttentionSpec`, `SlidingWindowMLASpec` and subclasses).
    pub fn is_mla(&self) -> Result<bool, KeysError> {
        Ok(self.class_row()?.2)
    }
    /// `spec.prefix_cacheable`.
    pub fn prefix_cacheable(&self) -> Result<bool, KeysError> {
        Ok(self.class_row()?.3 && !(self.class == "SlidingWindowMLASpec" && self.bounded_replay))
    }
    /// `AttentionSpec.num_heads`: the head slots of a packed page, else the KV heads.
    pub fn num_heads(&self) -> i64 {
        self.num_head_slots.unwrap_or(self.num_kv_heads)
    }
    /// `AttentionSpec.state_content_size_bytes`.
    pub fn state_content_size_bytes(&self) -> Result<i64, KeysError> {
        if let Some(b) = self.state_content_bytes {
            return Ok(b);
        }
        let dtype = self.dtype.as_deref().unwrap_or("");
        let size = dtype_size(dtype).ok_or_else(|| KeysError::UnknownDtype(dtype.to_string()))?;
        // The MLA specs default head_size_v to 0 (one latent vector per state), the others to head_size.
        let v = self.head_size_v.unwrap_or(if self.is_mla()? { 0 } else { self.head_size });
        self.head_size.checked_add(v).and_then(|b| b.checked_mul(size)).ok_or_else(overflow)
    }
    /// `str(getattr(spec, "cache_dtype_str", None))`.
    fn cache_dtype_str_text(&self) -> String {
        self.cache_dtype_str.clone().unwrap_or_else(|| "None".into())
    }
}

/// One KV-cache group (`KVCacheGroupSpec`): one spec for every layer, or (`uniform`,
/// `UniformTypeKVCacheSpecs`) one spec per layer.
#[derive(Clone, Debug, Deserialize)]
pub struct GroupSpec {
    /// Layers in the group.
    pub num_layers: usize,
    /// `UniformTypeKVCacheSpecs`: `layers` has one spec per layer.
    #[serde(default)]
    pub uniform: bool,
    /// The group's spec (one), or every layer's (uniform).
    pub layers: Vec<LayerSpec>,
}

impl GroupSpec {
    fn first(&self) -> Result<&LayerSpec, KeysError> {
        self.layers.first().ok_or(KeysError::EmptyGroup)
    }
    /// `_group_layer_specs(group)`.
    pub fn layer_specs(&self) -> Result<Vec<&LayerSpec>, KeysError> {
        if self.uniform {
            if self.layers.len() != self.num_layers {
                return Err(KeysError::EmptyGroup);
            }
            Ok(self.layers.iter().collect())
        } else {
            Ok(vec![self.first()?; self.num_layers])
        }
    }
    /// The specs `_spec_tp_replication_factor` looks at (`kv_cache_specs.values()` or the spec).
    fn inner_specs(&self) -> Result<Vec<&LayerSpec>, KeysError> {
        if self.uniform {
            Ok(self.layers.iter().collect())
        } else {
            Ok(vec![self.first()?])
        }
    }
    /// `group.kv_cache_spec.block_size`.
    pub fn block_size(&self) -> Result<i64, KeysError> {
        Ok(self.first()?.block_size)
    }
    /// `group.kv_cache_spec.prefix_cacheable`.
    pub fn prefix_cacheable(&self) -> Result<bool, KeysError> {
        for s in self.inner_specs()? {
            if !s.prefix_cacheable()? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Python `repr` of a str.
fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::from(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python `repr` of a tuple of str/int values (a one-element tuple ends in `,`).
fn py_repr_tuple(items: &[String]) -> String {
    if items.len() == 1 {
        format!("({},)", items[0])
    } else {
        format!("({})", items.join(", "))
    }
}

/// `_schema_fingerprint(parts)`: the first 16 hex digits of `sha256(repr(parts))`, given `repr(parts)`.
pub fn schema_fingerprint_of_repr(parts_repr: &str) -> String {
    hex::encode(Sha256::digest(parts_repr.as_bytes()))[..16].to_string()
}

/// The layout classes of TP-shared attention groups (`ATTENTION_STORE_LAYOUTS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionFormat {
    /// `HeadMajorStoreLayout` (`attention_head_major`): LBHNC, BLHNC, LHBNC, BHLNC caches.
    HeadMajor,
    /// `TokenMajorStoreLayout` (`attention_token_major`): LBNHC, BLNHC caches.
    TokenMajor,
}

impl AttentionFormat {
    /// `ATTENTION_STORE_LAYOUTS[KVCacheLayout[name]]`.
    pub fn for_cache_layout(layout: &str) -> Option<AttentionFormat> {
        match layout {
            "LBHNC" | "BLHNC" | "LHBNC" | "BHLNC" => Some(AttentionFormat::HeadMajor),
            "LBNHC" | "BLNHC" => Some(AttentionFormat::TokenMajor),
            _ => None,
        }
    }
    /// The class by name.
    pub fn from_class(name: &str) -> Option<AttentionFormat> {
        match name {
            "HeadMajorStoreLayout" => Some(AttentionFormat::HeadMajor),
            "TokenMajorStoreLayout" => Some(AttentionFormat::TokenMajor),
            _ => None,
        }
    }
    /// The class name.
    pub fn class_name(self) -> &'static str {
        match self {
            AttentionFormat::HeadMajor => "HeadMajorStoreLayout",
            AttentionFormat::TokenMajor => "TokenMajorStoreLayout",
        }
    }
    /// `store_format`.
    pub fn store_format(self) -> &'static str {
        match self {
            AttentionFormat::HeadMajor => "attention_head_major",
            AttentionFormat::TokenMajor => "attention_token_major",
        }
    }
}

/// `AttentionStoreLayout.resolve_store_shard_count(layer_specs, local_tp_size, requested_store_tp_size)`.
pub fn resolve_store_shard_count(
    specs: &[&LayerSpec],
    local_tp: i64,
    requested: i64,
) -> Result<Option<i64>, KeysError> {
    let mut slots: Vec<i64> = specs.iter().map(|s| s.num_heads().saturating_mul(local_tp)).collect();
    slots.sort_unstable();
    slots.dedup();
    let [slots] = slots[..] else { return Ok(None) };
    let (smaller, larger) = (requested.min(slots), requested.max(slots));
    if pymod(larger, smaller)? != 0 || smaller < local_tp || pymod(smaller, local_tp)? != 0 {
        return Ok(None);
    }
    Ok(Some(smaller))
}

/// `AttentionStoreLayout.resolve_store_chunk_size(layer_specs, requested_store_chunk_size)`.
pub fn resolve_store_chunk_size(specs: &[&LayerSpec], requested: Option<i64>) -> Result<Option<i64>, KeysError> {
    if let Some(r) = requested {
        for s in specs {
            let states = s.tokens_per_state.divide_int(r)?;
            if pymod(s.block_size, r)? != 0 || states.den != 1 {
                return Ok(None);
            }
        }
        return Ok(Some(r));
    }
    let mut sizes: Vec<i64> = specs.iter().map(|s| s.block_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    Ok(if let [b] = sizes[..] { Some(b) } else { None })
}

/// The tuple `AttentionStoreLayout.schema_fingerprint` hashes, as Python's `repr`.
pub fn attention_schema_parts_repr(
    specs: &[&LayerSpec],
    local_tp: i64,
    shard_count: i64,
    chunk: i64,
) -> Result<String, KeysError> {
    let first = specs.first().ok_or_else(|| KeysError::from(PyError::new("IndexError", "tuple index out of range")))?;
    let heads = floordiv(first.num_heads().saturating_mul(local_tp), shard_count)?;
    let layers = specs
        .iter()
        .map(|s| {
            Ok(py_repr_tuple(&[
                py_repr_str(&s.class),
                chunk.to_string(),
                py_repr_str(&s.tokens_per_state.divide_int(chunk)?.to_string()),
                s.state_content_size_bytes()?.to_string(),
                heads.to_string(),
                py_repr_str(s.dtype.as_deref().unwrap_or("None")),
                py_repr_str(&s.kv_quant_mode.to_string()),
                py_repr_str(&s.cache_dtype_str_text()),
                py_repr_str(&s.tokens_per_state.to_string()),
            ]))
        })
        .collect::<Result<Vec<_>, KeysError>>()?;
    Ok(py_repr_tuple(&layers))
}

/// `AttentionStoreLayout.schema_fingerprint(layer_specs, local_tp_size, store_shard_count, store_chunk_size)`.
pub fn attention_schema_fingerprint(
    specs: &[&LayerSpec],
    local_tp: i64,
    shard_count: i64,
    chunk: i64,
) -> Result<String, KeysError> {
    Ok(schema_fingerprint_of_repr(&attention_schema_parts_repr(specs, local_tp, shard_count, chunk)?))
}

/// One KV-cache group's store layout on one local TP rank (0.34.0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLayout {
    /// `RankLocalStoreLayout`: one object per (rank namespace, chunk), shard id 0.
    RankLocal {
        /// The key parts shared by every key of the rank.
        metadata: VllmStoreKey,
    },
    /// `HeadMajorStoreLayout` / `TokenMajorStoreLayout`: one object per (Store chunk, store shard).
    Attention {
        /// The key parts shared by every key of the rank (with the group's namespace).
        metadata: VllmStoreKey,
        /// Which class.
        format: AttentionFormat,
        /// The store shard count (`store_tp_size` of the layout).
        store_tp_size: i64,
        /// The shards this rank writes.
        shard_ids: Vec<i64>,
        /// Head slots per store shard.
        heads_per_store_shard: i64,
        /// Tokens per Store chunk.
        store_chunk_size: i64,
        /// Store chunks per local block.
        chunks_per_block: i64,
    },
}

impl StoreLayout {
    /// `AttentionStoreLayout.__init__` (with `TPShardedStoreLayout.__init__`).
    #[allow(clippy::too_many_arguments)]
    pub fn attention(
        metadata: VllmStoreKey,
        format: AttentionFormat,
        block_size: i64,
        local_tp_size: i64,
        store_tp_size: i64,
        tp_rank: i64,
        specs: &[&LayerSpec],
        store_chunk_size: Option<i64>,
    ) -> Result<StoreLayout, KeysError> {
        let chunk = store_chunk_size.filter(|c| *c != 0).unwrap_or(block_size);
        if pymod(block_size, chunk)? != 0 {
            return Err(PyError::value_error("Store chunk size must divide the local block size").into());
        }
        let per_rank = enumerable(floordiv(store_tp_size, local_tp_size)?, "store shards per rank")?;
        enumerable(store_tp_size, "store shards")?;
        let first = tp_rank.checked_mul(per_rank).ok_or_else(overflow)?;
        let shard_ids: Vec<i64> = (first..first.checked_add(per_rank).ok_or_else(overflow)?).collect();
        for &s in &shard_ids {
            build_prefix(&metadata, (Some(s), None, None, None))?;
        }
        let chunks_per_block = floordiv(block_size, chunk)?;
        let mut slots: Vec<i64> = specs.iter().map(|s| s.num_heads().saturating_mul(local_tp_size)).collect();
        slots.sort_unstable();
        slots.dedup();
        let [slots] = slots[..] else {
            return Err(PyError::value_error("Attention layers in a Store group need equal head slots").into());
        };
        if pymod(slots, store_tp_size)? != 0 {
            return Err(PyError::value_error("Attention head slots must be divisible by the Store shard count").into());
        }
        Ok(StoreLayout::Attention {
            metadata,
            format,
            store_tp_size,
            shard_ids,
            heads_per_store_shard: floordiv(slots, store_tp_size)?,
            store_chunk_size: chunk,
            chunks_per_block,
        })
    }

    /// The shards this layout's rank writes (`[0]` for the rank-local layout).
    pub fn local_shard_ids(&self) -> Vec<i64> {
        match self {
            StoreLayout::RankLocal { .. } => vec![0],
            StoreLayout::Attention { shard_ids, .. } => shard_ids.clone(),
        }
    }

    /// The class name.
    pub fn class_name(&self) -> &'static str {
        match self {
            StoreLayout::RankLocal { .. } => "RankLocalStoreLayout",
            StoreLayout::Attention { format, .. } => format.class_name(),
        }
    }

    /// The key parts shared by every key.
    pub fn metadata(&self) -> &VllmStoreKey {
        match self {
            StoreLayout::RankLocal { metadata } | StoreLayout::Attention { metadata, .. } => metadata,
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
            StoreLayout::Attention { metadata, shard_ids, .. } => {
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
            StoreLayout::Attention { metadata, store_tp_size, .. } => {
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

/// `ChunkedTokenDatabase(metadata, chunk_size, hash_block_size, store_layout)` (0.34.0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenDatabase {
    /// Tokens per Store chunk (0.33.0: `block_size`).
    pub chunk_size: i64,
    /// Tokens per block hash (divides `chunk_size`).
    pub hash_block_size: i64,
    /// How the chunk's keys are formed.
    pub layout: StoreLayout,
}

impl TokenDatabase {
    /// `hash_block_size` of `None` or 0 means `chunk_size`; a chunk size that is not a multiple raises.
    pub fn new(layout: StoreLayout, chunk_size: i64, hash_block_size: Option<i64>) -> Result<TokenDatabase, KeysError> {
        let hbs = match hash_block_size {
            Some(h) if h != 0 => h,
            _ => chunk_size,
        };
        if pymod(chunk_size, hbs)? != 0 {
            return Err(PyError::value_error(format!(
                "chunk_size ({chunk_size}) must be a multiple of hash_block_size ({hbs})"
            ))
            .into());
        }
        Ok(TokenDatabase { chunk_size, hash_block_size: hbs, layout })
    }

    /// `process_tokens(token_len, block_hashes, mask_num, chunk_mask=, tail_key_boundary=, put_step=,
    /// put_step_rank=)`, fully consumed: the request's last chunk is keyed by the hash at `tail_key_boundary`
    /// when one is given.
    #[allow(clippy::too_many_arguments)]
    pub fn process_tokens(
        &self,
        token_len: i64,
        block_hashes: &[Vec<u8>],
        mask_num: i64,
        chunk_mask: Option<&[bool]>,
        tail_key_boundary: Option<i64>,
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
        let start_chunk = cdiv(mask_num, self.chunk_size)?.max(0);
        let mut max_chunks = cdiv(token_len, self.chunk_size)?;
        if let Some(m) = chunk_mask {
            max_chunks = max_chunks.min(start_chunk.saturating_add(m.len() as i64));
        }
        // One chunk per block hash at most yields a hash; more chunks than that raise IndexError in vLLM too.
        if max_chunks.saturating_sub(start_chunk) > (block_hashes.len() as i64).saturating_mul(4).max(MAX_RANKS) {
            return Err(KeysError::TooMany { what: "chunks", n: max_chunks });
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
            let start = chunk_id.checked_mul(self.chunk_size).ok_or_else(overflow)?;
            let end = start.checked_add(self.chunk_size).ok_or_else(overflow)?.min(token_len);
            let key_end = match tail_key_boundary {
                Some(t) if end == token_len => t,
                _ => end,
            };
            let idx = floordiv(key_end, self.hash_block_size)?.saturating_sub(1);
            let idx = if idx < 0 { idx.saturating_add(block_hashes.len() as i64) } else { idx };
            let hash = usize::try_from(idx)
                .ok()
                .and_then(|i| block_hashes.get(i))
                .ok_or_else(|| PyError::new("IndexError", "list index out of range"))?;
            out.push(Chunk { start, end, hash: hash.clone() });
        }
        Ok(out)
    }
}

/// `resolve_store_chunk_size(extra_config)`: a positive int (not a bool), else `None`.
pub fn resolve_store_chunk_size_config(extra: &serde_json::Map<String, J>) -> Option<i64> {
    extra.get("store_chunk_size").filter(|v| v.is_i64() || v.is_u64()).and_then(J::as_i64).filter(|v| *v > 0)
}

/// The worker's `pp_rank` (0.34.0: workers are laid out PP × PCP × TP, TP innermost):
/// `(rank // (tp_size * pcp_size)) % pp_size`. 0.33.0 divided by `tp_size` only.
pub fn pp_rank_of(rank: i64, tp_size: i64, pcp_size: i64, pp_size: i64) -> Result<i64, KeysError> {
    pymod(floordiv(rank, tp_size.saturating_mul(pcp_size))?, pp_size)
}

/// `_resolve_cache_prefix`'s inputs.
#[derive(Clone, Debug, Default)]
pub struct CachePrefixInputs {
    /// `str(kv_connector_extra_config.get("cache_prefix", ""))`.
    pub configured: String,
    /// `VLLM_IMAGE_TAG` (unset: empty).
    pub image_tag: String,
    /// `VLLM_BUILD_COMMIT` (unset: `unknown`).
    pub build_commit: String,
    /// `hash_config(model_config)`: `hash_factors(model_config.compile_factors())`.
    pub model_hash: String,
    /// `model_config.hf_config._commit_hash` (absent: `None`).
    pub hf_commit: Option<String>,
    /// `hash_config(cache_config)`.
    pub cache_hash: String,
}

/// `_resolve_cache_prefix`: the configured prefix, or for `"auto"`
/// `"auto-" + hash_factors({"build", "model", "hf_commit", "cache"})`, where `build` is `VLLM_IMAGE_TAG`
/// (stripped; `local/vllm-openai:dev` does not count) or else `VLLM_BUILD_COMMIT` (stripped; `unknown` does
/// not count); neither raises `ValueError`.
pub fn resolve_cache_prefix(i: &CachePrefixInputs) -> Result<String, KeysError> {
    if i.configured != "auto" {
        return Ok(i.configured.clone());
    }
    let tag = i.image_tag.trim();
    let commit = i.build_commit.trim();
    let build = if !tag.is_empty() && tag != "local/vllm-openai:dev" {
        tag
    } else if commit != "unknown" {
        commit
    } else {
        ""
    };
    if build.is_empty() {
        return Err(PyError::value_error(
            "MooncakeStore cache_prefix='auto' requires VLLM_IMAGE_TAG or VLLM_BUILD_COMMIT to identify the deployed code.",
        )
        .into());
    }
    let factors = PyValue::Dict(vec![
        (PyValue::str("build"), PyValue::str(build)),
        (PyValue::str("model"), PyValue::str(&i.model_hash)),
        (PyValue::str("hf_commit"), i.hf_commit.as_ref().map_or(PyValue::None, PyValue::str)),
        (PyValue::str("cache"), PyValue::str(&i.cache_hash)),
    ]);
    Ok(format!("auto-{}", crate::hash::hash_factors(&factors).map_err(|e| KeysError::Serialize(e.to_string()))?.digest))
}

/// `str(kv_connector_extra_config.get("cache_prefix", ""))`.
pub fn configured_cache_prefix(extra: &serde_json::Map<String, J>) -> String {
    extra.get("cache_prefix").map(py_str).unwrap_or_default()
}

/// The topology and config a 0.34.0 store worker derives its keys from.
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
    /// This worker's pipeline-parallel rank ([`pp_rank_of`]).
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
    /// `cache_config.prefix_match_unit`.
    pub prefix_match_unit: Option<i64>,
    /// `kv_cache_config.hisparse_host_num_blocks is not None`.
    pub hisparse: bool,
    /// Tokens per block hash.
    pub hash_block_size: i64,
    /// The KV-cache groups, in group order.
    pub groups: Vec<GroupSpec>,
    /// The model name in keys.
    pub model_name: String,
    /// The resolved cache prefix ([`resolve_cache_prefix`]).
    pub cache_prefix: String,
}

/// `_StoreGroupPlan`: how one group is shared across TP sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPlan {
    /// The layout class.
    pub format: AttentionFormat,
    /// The group's block size.
    pub local_block_size: i64,
    /// TP size after removing the group's replication.
    pub logical_tp_size: i64,
    /// Store shards.
    pub store_shard_count: i64,
    /// This rank's logical TP rank.
    pub tp_rank: i64,
    /// `@store_schema:` value.
    pub schema_fingerprint: String,
    /// Tokens per Store chunk.
    pub store_chunk_size: Option<i64>,
}

/// What [`worker_keys`] derives.
#[derive(Clone, Debug)]
pub struct WorkerKeys {
    /// `resolve_store_chunk_size(extra_config)`.
    pub requested_store_chunk_size: Option<i64>,
    /// Byte-identical TP replicas per group.
    pub replication_factors: Vec<i64>,
    /// The requested Store TP size when shared, `None` for rank-local keys.
    pub store_tp_size: Option<i64>,
    /// The fallback namespace, or empty.
    pub store_namespace: String,
    /// One plan per group (`None`: not prefix-cacheable) when shared.
    pub plans: Option<Vec<Option<GroupPlan>>>,
    /// One token database per group.
    pub databases: Vec<TokenDatabase>,
    /// The key prefixes a lookup probes, per group, every PP stage's.
    pub lookup_key_prefixes: Vec<Vec<String>>,
}

/// `_spec_tp_replication_factor(group.kv_cache_spec)` for every group.
pub fn group_tp_replication_factors(cfg: &WorkerConfig) -> Result<Vec<i64>, KeysError> {
    cfg.groups
        .iter()
        .map(|g| {
            if cfg.dcp_size > 1 {
                return Ok(1);
            }
            let inner = g.inner_specs()?;
            let mut factors = vec![];
            for s in &inner {
                if s.family()? == Some(SpecFamily::Mamba) {
                    return Ok(1);
                }
                factors.push(if s.is_mla()? { cfg.tp_size } else { floordiv(cfg.tp_size, cfg.num_kv_heads)?.max(1) });
            }
            Ok(factors.into_iter().min().unwrap_or(1))
        })
        .collect()
}

fn make_plan(
    cfg: &WorkerConfig,
    group: &GroupSpec,
    requested_tp: i64,
    format: AttentionFormat,
    factor: i64,
    requested_chunk: Option<i64>,
) -> Result<Option<GroupPlan>, KeysError> {
    let specs = group.layer_specs()?;
    let mut families = vec![];
    for s in &specs {
        let f = s.family()?;
        if !families.contains(&f) {
            families.push(f);
        }
    }
    match families[..] {
        [Some(SpecFamily::Attention)] => {}
        [Some(SpecFamily::Mamba)] => return Err(KeysError::Unsupported(
            "a MambaSpec group in a TP-shared Store layout (MambaStoreLayout.schema_fingerprint derives its segments with derive_mamba_conv_split, which is not reproduced)",
        )),
        _ => return Ok(None),
    }
    // _resolve_attention_store_chunk
    if pymod(cfg.tp_size, factor)? != 0 {
        return Ok(None);
    }
    let logical = floordiv(cfg.tp_size, factor)?;
    let Some(count) = resolve_store_shard_count(&specs, logical, requested_tp)? else { return Ok(None) };
    let hybrid = cfg.groups.len() > 1;
    let chunk_request = requested_chunk.or(if hybrid { Some(cfg.hash_block_size) } else { None });
    let Some(chunk) = resolve_store_chunk_size(&specs, chunk_request)? else { return Ok(None) };
    if pymod(chunk, cfg.hash_block_size)? != 0 {
        return Ok(None);
    }
    Ok(Some(GroupPlan {
        format,
        local_block_size: group.block_size()?,
        logical_tp_size: logical,
        store_shard_count: count,
        tp_rank: floordiv(cfg.tp_rank, factor)?,
        schema_fingerprint: attention_schema_fingerprint(&specs, logical, count, chunk)?,
        store_chunk_size: Some(chunk),
    }))
}

/// Why `_select_store_layout` keeps rank-local keys before planning any group (its `fallback_reason`s, in
/// vLLM's order), or `None`.
fn fallback_reason(
    cfg: &WorkerConfig,
    requested_tp: Option<i64>,
    requested_chunk: Option<i64>,
    chunk_requested: bool,
    known_layout: bool,
) -> Result<Option<&'static str>, KeysError> {
    let hybrid = cfg.groups.len() > 1;
    let cross_layers =
        cfg.extra_config.get("enable_cross_layers_blocks").map(py_str).unwrap_or_else(|| "False".into()).to_lowercase()
            == "true";
    let misaligned = match requested_chunk {
        Some(c) if hybrid => pymod(c, cfg.hash_block_size)? != 0,
        _ => false,
    };
    Ok(Some(match requested_tp {
        None => "invalid Store TP configuration",
        _ if cfg.hisparse => "HiSparse host cache registration requires rank-local layout",
        _ if hybrid && cfg.prefix_match_unit.is_none() => "Hybrid Store TP sharing requires prefix_match_unit",
        _ if chunk_requested && requested_chunk.is_none() => "invalid Store chunk size",
        _ if misaligned => "Store chunk size is not aligned to prefix_match_unit",
        _ if !known_layout => "unsupported KV cache layout",
        _ if cfg.pcp_size != 1 || cfg.dcp_size != 1 => "PCP or DCP is enabled",
        _ if cross_layers => "cross-layer KV blocks are enabled",
        Some(t) if t < cfg.tp_size || pymod(t, cfg.tp_size)? != 0 => "Store TP is not divisible by local TP",
        Some(_) => return Ok(None),
    }))
}

/// `_select_store_layout`: `(store_tp_size, fallback namespace, plans)` and the requested chunk size.
#[allow(clippy::type_complexity)]
pub fn select_store_layout(
    cfg: &WorkerConfig,
    factors: &[i64],
) -> Result<(Option<i64>, String, Option<Vec<Option<GroupPlan>>>, Option<i64>), KeysError> {
    let extra = &cfg.extra_config;
    let lcm_enabled = extra.get("enable_store_tp_lcm") == Some(&J::Bool(true));
    let requested = lcm_enabled || extra.get("store_tp_size").is_some_and(|v| !v.is_null());
    let mut requested_chunk = resolve_store_chunk_size_config(extra);
    if !requested {
        return Ok((None, String::new(), None, requested_chunk));
    }
    let requested_tp = resolve_store_tp_size(extra);
    let chunk_requested = extra.get("store_chunk_size").is_some_and(|v| !v.is_null());
    let hybrid = cfg.groups.len() > 1;
    if hybrid && cfg.prefix_match_unit.is_some() && !chunk_requested {
        requested_chunk = cfg.prefix_match_unit;
    }
    let format = AttentionFormat::for_cache_layout(&cfg.kv_cache_layout);
    let mut fallback =
        fallback_reason(cfg, requested_tp, requested_chunk, chunk_requested, format.is_some())?.is_some();
    let mut plans = vec![];
    if let (false, Some(t), Some(f)) = (fallback, requested_tp, format) {
        for (group, &factor) in cfg.groups.iter().zip(factors) {
            if !group.prefix_cacheable()? {
                plans.push(None);
                continue;
            }
            match make_plan(cfg, group, t, f, factor, requested_chunk)? {
                Some(p) => plans.push(Some(p)),
                None => {
                    fallback = true;
                    break;
                }
            }
        }
    }
    if !fallback {
        return Ok((requested_tp, String::new(), Some(plans), requested_chunk));
    }
    Ok((
        None,
        format!("@store_pp:{}@store_format:rank_local_tp{}_layout_{}", cfg.pp_size, cfg.tp_size, cfg.kv_cache_layout),
        None,
        requested_chunk,
    ))
}

/// The stage-local part of `_init_lookup_key_prefixes` (before the PP gather).
fn local_lookup_prefixes(
    cfg: &WorkerConfig,
    factors: &[i64],
    dbs: &[TokenDatabase],
) -> Result<Vec<Vec<String>>, KeysError> {
    enumerable(cfg.tp_size.saturating_mul(cfg.pcp_size), "TP x PCP ranks")?;
    let mut out = vec![];
    for (db, &factor) in dbs.iter().zip(factors) {
        let mut ns: Vec<RankNamespace> = vec![];
        if cfg.dcp_size > 1 {
            for pcp in 0..cfg.pcp_size {
                for tp in 0..cfg.tp_size {
                    ns.push((tp, pcp, pymod(tp, cfg.dcp_size)?, cfg.pp_rank));
                }
            }
        } else {
            for pcp in 0..cfg.pcp_size {
                for shard in 0..floordiv(cfg.tp_size, factor)? {
                    ns.push((shard, pcp, 0, cfg.pp_rank));
                }
            }
        }
        out.push(db.layout.lookup_key_prefixes(&ns)?);
    }
    Ok(out)
}

/// Every stage up to the token databases: plans, key metadata, databases.
fn stage(cfg: &WorkerConfig) -> Result<(WorkerKeys, Vec<Vec<String>>), KeysError> {
    let factors = group_tp_replication_factors(cfg)?;
    let (store_tp_size, store_namespace, plans, requested_chunk) = select_store_layout(cfg, &factors)?;
    let metadata = VllmStoreKey {
        cache_prefix: cfg.cache_prefix.clone(),
        model_name: cfg.model_name.clone(),
        store_namespace: store_namespace.clone(),
        tp_rank: cfg.tp_rank,
        pcp_rank: if cfg.pcp_size > 1 { cfg.pcp_rank } else { 0 },
        dcp_rank: if cfg.dcp_size > 1 { cfg.dcp_rank } else { 0 },
        pp_rank: cfg.pp_rank,
        group_id: 0,
        chunk_hash: String::new(),
    };
    let mut databases = vec![];
    for (idx, group) in cfg.groups.iter().enumerate() {
        let hbs = if group.prefix_cacheable()? { cfg.hash_block_size } else { group.block_size()? };
        let plan = plans.as_ref().and_then(|p| p.get(idx).cloned().flatten());
        let Some(plan) = plan else {
            let meta = VllmStoreKey {
                group_id: idx as i64,
                tp_rank: floordiv(cfg.tp_rank, factors[idx])?,
                ..metadata.clone()
            };
            databases.push(TokenDatabase::new(
                StoreLayout::RankLocal { metadata: meta },
                group.block_size()?,
                Some(hbs),
            )?);
            continue;
        };
        let ns = format!(
            "@store_tp:{}@store_pp:{}@store_format:{}@store_schema:{}",
            store_tp_size.unwrap_or_default(),
            cfg.pp_size,
            plan.format.store_format(),
            plan.schema_fingerprint
        );
        let meta =
            VllmStoreKey { group_id: idx as i64, tp_rank: plan.tp_rank, store_namespace: ns, ..metadata.clone() };
        let specs = group.layer_specs()?;
        let layout = StoreLayout::attention(
            meta,
            plan.format,
            plan.local_block_size,
            plan.logical_tp_size,
            plan.store_shard_count,
            plan.tp_rank,
            &specs,
            plan.store_chunk_size,
        )?;
        databases.push(TokenDatabase::new(layout, plan.store_chunk_size.unwrap_or(plan.local_block_size), Some(hbs))?);
    }
    let local = local_lookup_prefixes(cfg, &factors, &databases)?;
    Ok((
        WorkerKeys {
            requested_store_chunk_size: requested_chunk,
            replication_factors: factors,
            store_tp_size,
            store_namespace,
            plans,
            databases,
            lookup_key_prefixes: vec![],
        },
        local,
    ))
}

/// `__init__`'s layout stages and `_init_lookup_key_prefixes`, the PP gather included (every stage's
/// prefixes, computed with the same groups and that stage's `pp_rank`, concatenated per group).
pub fn worker_keys(cfg: &WorkerConfig) -> Result<WorkerKeys, KeysError> {
    enumerable(cfg.pp_size.saturating_mul(cfg.tp_size.saturating_mul(cfg.pcp_size)), "ranks")?;
    let (mut keys, local) = stage(cfg)?;
    keys.lookup_key_prefixes = if cfg.pp_size > 1 {
        let mut per_group: Vec<Vec<String>> = vec![vec![]; keys.databases.len()];
        for s in 0..cfg.pp_size {
            let stage_prefixes =
                if s == cfg.pp_rank { local.clone() } else { stage(&WorkerConfig { pp_rank: s, ..cfg.clone() })?.1 };
            for (g, p) in stage_prefixes.into_iter().enumerate() {
                if let Some(v) = per_group.get_mut(g) {
                    v.extend(p);
                }
            }
        }
        per_group
    } else {
        local
    };
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_reprs() {
        assert_eq!(py_repr_tuple(&["1".into()]), "(1,)");
        assert_eq!(py_repr_str("it's"), "\"it's\"");
        assert_eq!(py_repr_str("a'\""), "'a\\'\"'");
        assert_eq!(Fraction::new(2, -4).unwrap().to_string(), "-1/2");
        assert_eq!(Fraction::new(1, 4).unwrap().divide_int(16).unwrap().to_string(), "64");
        assert!(Fraction { num: 0, den: 1 }.divide_int(3).is_err());
    }

    #[test]
    fn cache_prefix_auto() {
        let i = CachePrefixInputs { configured: "auto".into(), build_commit: "unknown".into(), ..Default::default() };
        assert!(resolve_cache_prefix(&i)
            .unwrap_err()
            .to_string()
            .starts_with("ValueError: MooncakeStore cache_prefix='auto'"));
        let ok =
            CachePrefixInputs { image_tag: " local/vllm-openai:dev ".into(), build_commit: " c0ffee ".into(), ..i };
        let p = resolve_cache_prefix(&ok).unwrap();
        assert!(p.starts_with("auto-") && p.len() == 5 + 64, "{p}");
        let x = CachePrefixInputs { configured: "teamA".into(), ..Default::default() };
        assert_eq!(resolve_cache_prefix(&x).unwrap(), "teamA");
    }

    fn spec(class: &str, heads: i64) -> LayerSpec {
        serde_json::from_value(serde_json::json!({"class": class, "block_size": 16, "num_kv_heads": heads,
            "head_size": 128, "dtype": "torch.bfloat16"}))
        .unwrap()
    }

    #[test]
    fn extreme_inputs_are_errors_not_panics() {
        let db = TokenDatabase::new(StoreLayout::RankLocal { metadata: VllmStoreKey::default() }, i64::MAX, Some(1))
            .unwrap();
        let hashes = vec![vec![1u8; 32]; 4];
        for (len, mask) in [(4, 0), (i64::MAX, i64::MIN), (0, i64::MAX)] {
            let _ = db.process_tokens(len, &hashes, mask, None, Some(i64::MIN), 1, 0);
        }
        let s = spec("FullAttentionSpec", i64::MAX);
        let _ = resolve_store_shard_count(&[&s], i64::MAX, i64::MIN);
        let _ = attention_schema_parts_repr(&[&s], i64::MAX, -1, i64::MIN);
        let _ = StoreLayout::attention(
            VllmStoreKey::default(),
            AttentionFormat::HeadMajor,
            16,
            1,
            i64::MAX,
            3,
            &[&s],
            None,
        );
        let cfg = WorkerConfig {
            extra_config: serde_json::json!({"store_tp_size": i64::MAX}).as_object().unwrap().clone(),
            tp_size: i64::MAX,
            tp_rank: i64::MIN,
            pp_size: i64::MAX,
            pp_rank: 0,
            pcp_size: 1,
            pcp_rank: 0,
            dcp_size: 1,
            dcp_rank: 0,
            num_kv_heads: -1,
            kv_cache_layout: "LBHNC".into(),
            prefix_match_unit: None,
            hisparse: false,
            hash_block_size: 0,
            groups: vec![GroupSpec { num_layers: 2, uniform: false, layers: vec![s.clone()] }],
            model_name: "m".into(),
            cache_prefix: String::new(),
        };
        assert!(worker_keys(&cfg).is_err());
        let small = WorkerConfig { tp_size: 2, tp_rank: 1, pp_size: 1, num_kv_heads: 8, hash_block_size: 16, ..cfg };
        let w = worker_keys(&small).unwrap();
        assert_eq!(w.store_tp_size, None, "8 head slots and a store TP of i64::MAX divide neither way: rank-local");
    }

    #[test]
    fn pp_rank_counts_pcp() {
        assert_eq!(pp_rank_of(5, 2, 2, 2).unwrap(), 1);
        assert!(pp_rank_of(5, 0, 2, 2).is_err());
    }
}
