//! vLLM's MooncakeStoreConnector key, typed, for every release 0.21.0 → 0.33.0
//! (`.../kv_connector/v1/mooncake/store/data.py`: `KeyMetadata`, `PoolKey.to_string`, from 0.25.0
//! `PoolKey.build_prefix` / `build_key_string`; `store/worker.py` `_make_mooncake_group_id`). The text of each
//! release comes from its grammar in `spec/store-keys/vllm.toml`; which parts a release has is data there.

use super::grammar::{FieldValue, Fields, KeyBuildError, KeyParseError};
use super::spec::{NoGrammar, StoreKeySpec};

/// `KeyMetadata` plus the chunk hash: every part a vLLM store key can have. A release without a part
/// (0.21.0 has no `group_id`, 0.21–0.23 no `cache_prefix`, before 0.30 no `store_namespace`) needs its
/// default value here; anything else is a build error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VllmStoreKey {
    /// `kv_connector_extra_config["cache_prefix"]` (0.24.0+); empty writes nothing.
    pub cache_prefix: String,
    /// The last path component of `model_config.model` ([`model_name_of`]).
    pub model_name: String,
    /// Empty, or one of the forms `_select_store_layout` produces (0.30.0+).
    pub store_namespace: String,
    /// Tensor-parallel rank (or store shard) of the namespace.
    pub tp_rank: i64,
    /// Prefill context-parallel rank.
    pub pcp_rank: i64,
    /// Decode context-parallel rank.
    pub dcp_rank: i64,
    /// Pipeline-parallel rank.
    pub pp_rank: i64,
    /// KV-cache group index (0.22.0+).
    pub group_id: i64,
    /// The block hash as lowercase hex (`BlockHash.hex()`).
    pub chunk_hash: String,
}

/// Known parts of a key, for parsing a key whose free text (cache prefix, model name) contains `@`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyHints {
    /// The key's cache prefix, when known.
    pub cache_prefix: Option<String>,
    /// The key's model name, when known.
    pub model_name: Option<String>,
}

impl KeyHints {
    fn fields(&self) -> Fields {
        let mut f = Fields::new();
        if let Some(p) = &self.cache_prefix {
            f.insert("cache_prefix".into(), FieldValue::Text(p.clone()));
        }
        if let Some(m) = &self.model_name {
            f.insert("model_name".into(), FieldValue::Text(m.clone()));
        }
        f
    }
}

/// vLLM's model name in keys: `model.rstrip("/").split("/")[-1]`.
pub fn model_name_of(model: &str) -> String {
    model.trim_end_matches('/').rsplit('/').next().unwrap_or("").to_string()
}

impl VllmStoreKey {
    /// The key's parts, by the grammar's field names.
    pub fn to_fields(&self) -> Fields {
        let t = |s: &str| FieldValue::Text(s.to_string());
        [
            ("cache_prefix", t(&self.cache_prefix)),
            ("model_name", t(&self.model_name)),
            ("store_namespace", t(&self.store_namespace)),
            ("tp_rank", FieldValue::Int(self.tp_rank)),
            ("pcp_rank", FieldValue::Int(self.pcp_rank)),
            ("dcp_rank", FieldValue::Int(self.dcp_rank)),
            ("pp_rank", FieldValue::Int(self.pp_rank)),
            ("group_id", FieldValue::Int(self.group_id)),
            ("chunk_hash", t(&self.chunk_hash)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// From parsed fields; parts the release lacks take their defaults.
    pub fn from_fields(f: &Fields) -> VllmStoreKey {
        let text = |k: &str| match f.get(k) {
            Some(FieldValue::Text(s)) => s.clone(),
            _ => String::new(),
        };
        let int = |k: &str| match f.get(k) {
            Some(FieldValue::Int(i)) => *i,
            _ => 0,
        };
        VllmStoreKey {
            cache_prefix: text("cache_prefix"),
            model_name: text("model_name"),
            store_namespace: text("store_namespace"),
            tp_rank: int("tp_rank"),
            pcp_rank: int("pcp_rank"),
            dcp_rank: int("dcp_rank"),
            pp_rank: int("pp_rank"),
            group_id: int("group_id"),
            chunk_hash: text("chunk_hash"),
        }
    }

    /// The key string vLLM `release` writes (`PoolKey.to_string`).
    pub fn build(&self, release: &str) -> Result<String, KeyError> {
        let g = StoreKeySpec::builtin().vllm_grammar(release).map_err(KeyError::Release)?;
        g.render(&self.to_fields()).map_err(KeyError::Build)
    }

    /// The key without `@{hash}` (`PoolKey.build_prefix`, 0.25.0+; the same text earlier).
    pub fn prefix(&self, release: &str) -> Result<String, KeyError> {
        let g = StoreKeySpec::builtin().vllm_grammar(release).map_err(KeyError::Release)?;
        g.render_prefix(&self.to_fields()).map_err(KeyError::Build)
    }

    /// Parses a key of `release`. With free text containing `@`, give the known parts in `hints`.
    pub fn parse(key: &str, release: &str, hints: &KeyHints) -> Result<VllmStoreKey, KeyError> {
        let g = StoreKeySpec::builtin().vllm_grammar(release).map_err(KeyError::Release)?;
        g.parse(key, &hints.fields()).map(|f| Self::from_fields(&f)).map_err(KeyError::Parse)
    }

    /// `_make_mooncake_group_id` (0.28.0+): `vllm-mooncake-store:[{cache_prefix}@]{model}{store_namespace}@{hash}`.
    pub fn mooncake_group_id(&self) -> String {
        let prefix = if self.cache_prefix.is_empty() { String::new() } else { format!("{}@", self.cache_prefix) };
        format!("vllm-mooncake-store:{prefix}{}{}@{}", self.model_name, self.store_namespace, self.chunk_hash)
    }
}

/// Why a key could not be built or parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The release has no key grammar.
    Release(NoGrammar),
    /// The store-key data has no grammar of this name.
    NoSuchGrammar(&'static str),
    /// The key cannot be built from these parts.
    Build(KeyBuildError),
    /// The text is not a key of the release.
    Parse(KeyParseError),
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::Release(e) => write!(f, "{e}"),
            KeyError::NoSuchGrammar(g) => write!(f, "no grammar {g}"),
            KeyError::Build(e) => write!(f, "{e}"),
            KeyError::Parse(e) => write!(f, "{e}"),
        }
    }
}
impl std::error::Error for KeyError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_keys() {
        // spec/README.md, "Store keys: a worked example".
        let h = "8be7aaa33831156d316f1f463ae57e643deb63f42e633e2d631df88815cc4629";
        let k = VllmStoreKey {
            model_name: model_name_of("Qwen/Qwen2.5-7B-Instruct"),
            chunk_hash: h.into(),
            ..Default::default()
        };
        assert_eq!(
            k.build("0.29.0").unwrap(),
            format!("Qwen2.5-7B-Instruct@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@{h}")
        );
        assert_eq!(k.build("0.21.0").unwrap(), format!("Qwen2.5-7B-Instruct@tp_rank:0@pcp0@dcp0@pp_rank:0@{h}"));
        let p = VllmStoreKey { cache_prefix: "teamA".into(), ..k.clone() };
        assert_eq!(
            p.build("0.24.0").unwrap(),
            format!("teamA@Qwen2.5-7B-Instruct@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@{h}")
        );
        assert!(
            matches!(p.build("0.23.0"), Err(KeyError::Build(KeyBuildError::NotInGrammar { .. }))),
            "0.23 has no cache prefix"
        );
        let g = VllmStoreKey { group_id: 2, ..k.clone() };
        assert!(g.build("0.21.0").is_err(), "0.21 has no group");
        // Round trip for every release.
        for r in StoreKeySpec::builtin().vllm_releases() {
            let key = k.build(r).unwrap();
            assert_eq!(VllmStoreKey::parse(&key, r, &KeyHints::default()).unwrap(), k, "{r}");
        }
        assert_eq!(model_name_of("/models/llama/"), "llama");
        assert_eq!(model_name_of("m"), "m");
        let ns = VllmStoreKey { store_namespace: "@store_tp:2@store_pp:1@store_format:bogus".into(), ..k };
        assert!(ns.build("0.33.0").is_err(), "a namespace vLLM cannot produce");
    }
}
