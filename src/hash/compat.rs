//! The NIXL compatibility hash of every vLLM release and the P2P wrapper that carries it for other transfer
//! engines, driven by `spec/compat-hash/*.toml` (format `mooncake-compat-hash/1`, documented in
//! `spec/README.md`, "Compatibility hashes").
//!
//! The spec says which factors each release hashes, in vLLM's order, and which connector version it reports;
//! this module knows how to compute each named factor from a [`NixlConfig`] (the config attributes vLLM
//! reads). A factor name the code does not know fails the spec check, so a new factor is a visible change.

use std::sync::OnceLock;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::pyvalue::PyValue;
use super::tagged;
use super::HashError;
use crate::spec::Spec;

/// The `format` of compatibility-hash data files.
pub(crate) const FORMAT: &str = "mooncake-compat-hash/1";

/// One `spec/compat-hash/*.toml` file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompatHashSpec {
    pub(crate) format: String,
    pub(crate) name: String,
    pub(crate) function: String,
    /// `hash_factors`: SHA-256 over `json.dumps(factors, sort_keys=True)`.
    pub(crate) algorithm: String,
    pub(crate) doc: String,
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) no_hash_releases: Vec<String>,
    pub(crate) factors: IndexMap<String, FactorDef>,
    pub(crate) speculative: SpeculativeDef,
    pub(crate) versions: Vec<NixlFactorSet>,
    #[serde(default)]
    pub(crate) wrapper: Option<WrapperDef>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FactorDef {
    /// The Python expression vLLM evaluates.
    pub(crate) python: String,
    #[serde(rename = "type")]
    pub(crate) ty: String,
    #[serde(default)]
    pub(crate) doc: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpeculativeDef {
    pub(crate) source: String,
    pub(crate) keys: Vec<NamedExpr>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NamedExpr {
    pub(crate) name: String,
    pub(crate) python: String,
}

/// The factors of one run of releases.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NixlFactorSet {
    /// The vLLM releases whose `compute_nixl_compatibility_hash` builds this factor dict.
    pub releases: Vec<String>,
    /// `NIXL_CONNECTOR_VERSION` of these releases.
    pub connector_version: i64,
    /// The file in the wheel that defines the function.
    pub file: String,
    /// The function's signature in those releases.
    pub signature: String,
    /// The factor names, in the order vLLM builds the dict.
    pub keys: Vec<String>,
    /// The keys of the `speculative_config` factor's dict in these releases, when not every key of
    /// `[speculative]` (0.34.0 drops `parallel_drafting`).
    #[serde(default)]
    pub speculative_keys: Option<Vec<String>>,
    /// What makes the `speculative_config` factor a dict rather than `None`: `use_eagle` (`use_eagle()`,
    /// 0.28.0 – 0.33.0, the default) or `uses_target_hidden_states` (0.34.0).
    #[serde(default)]
    pub speculative_gate: Option<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WrapperDef {
    pub(crate) name: String,
    pub(crate) function: String,
    pub(crate) source: String,
    /// The engine for which the wrapper returns the inner hash unchanged.
    pub(crate) passthrough_engine: String,
    pub(crate) keys: Vec<WrapperKey>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WrapperKey {
    pub(crate) name: String,
    /// `inner_hash` or `engine`; absent for a constant.
    #[serde(default)]
    pub(crate) from: Option<String>,
    /// A constant (integer).
    #[serde(default)]
    pub(crate) value: Option<i64>,
    #[serde(default)]
    pub(crate) doc: String,
}

/// The config attributes `compute_nixl_compatibility_hash` reads (the golden vectors' input shape).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NixlConfig {
    /// `model_config.model`: the model as given (hub id or path).
    pub model: String,
    /// `str(model_config.dtype)`, e.g. `torch.bfloat16`.
    pub dtype: String,
    /// `model_config.get_total_num_kv_heads()`.
    pub num_kv_heads: i64,
    /// `model_config.get_head_size()`.
    pub head_size: i64,
    /// `model_config.get_total_num_hidden_layers()`.
    pub num_hidden_layers: i64,
    /// `str(cache_config.cache_dtype)`.
    pub cache_dtype: String,
    /// `scheduler_config.disable_hybrid_kv_cache_manager` (the `is_hma_enabled` factor is its negation).
    #[serde(default)]
    pub disable_hybrid_kv_cache_manager: bool,
    /// The worker's attention backend name (0.33.0: the comma-joined sorted names for packed PP+HMA caches).
    pub attn_backend_name: String,
    /// `None` means the function's default, `"pull"`.
    #[serde(default)]
    pub transfer_mode: Option<String>,
    /// The speculative-decoding inputs; `None` without speculative decoding.
    #[serde(default)]
    pub speculative_config: Option<SpeculativeInput>,
    /// The `cross_layers_blocks` argument (0.16.0 … 0.28.0, required there).
    #[serde(default)]
    pub cross_layers_blocks: Option<bool>,
    /// `vllm.__version__`; defaults to the release whose factor set is used.
    #[serde(default)]
    pub vllm_version: Option<String>,
}

/// What `_get_speculative_compatibility_factors` reads from the speculative and draft-model configs.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SpeculativeInput {
    /// `speculative_config.use_eagle()`; when false the factor is `None` (0.28.0 – 0.33.0).
    #[serde(default)]
    pub use_eagle: bool,
    /// `speculative_config.uses_target_hidden_states`; when false the factor is `None` (0.34.0).
    #[serde(default)]
    pub uses_target_hidden_states: bool,
    /// Values passed through as they are (tagged JSON, see [`super::tagged`]).
    #[serde(default)]
    pub method: serde_json::Value,
    /// `draft_model_config.model`.
    #[serde(default)]
    pub model: serde_json::Value,
    /// `draft_model_config.revision`.
    #[serde(default)]
    pub revision: serde_json::Value,
    /// `draft_model_config.code_revision`.
    #[serde(default)]
    pub code_revision: serde_json::Value,
    /// `speculative_config.parallel_drafting`.
    #[serde(default)]
    pub parallel_drafting: serde_json::Value,
    /// The speculative override; `None` or empty inherits the target's `cache_dtype`.
    #[serde(default)]
    pub kv_cache_dtype: Option<String>,
    /// `eagle_aux_hidden_state_layer_ids` of the draft model's HF config (absent or `None` → `None`).
    #[serde(default)]
    pub aux: Option<Vec<serde_json::Value>>,
}

/// Factor names this module can compute.
const KNOWN_FACTORS: &[&str] = &[
    "vllm_version",
    "nixl_connector_version",
    "model",
    "dtype",
    "num_kv_heads",
    "head_size",
    "num_hidden_layers",
    "attn_backend_name",
    "cache_dtype",
    "cross_layers_blocks",
    "is_hma_enabled",
    "speculative_config",
    "transfer_mode",
];
const KNOWN_SPECULATIVE: &[&str] =
    &["method", "model", "revision", "code_revision", "parallel_drafting", "kv_cache_dtype", "auxiliary_layer_ids"];

/// Why a compatibility-hash data file fails its checks ([`CompatHashSpec::parse`]); its text becomes the
/// [`crate::spec::SpecError`]'s message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CompatSpecError {
    /// A `format` other than this module's.
    #[error("format must be {:?}", FORMAT)]
    Format,
    /// An `algorithm` other than `hash_factors`.
    #[error("unknown algorithm {0:?}")]
    Algorithm(String),
    /// A factor no code here computes.
    #[error("factor `{0}`: no implementation computes it (src/hash/compat.rs)")]
    UnknownFactor(String),
    /// A speculative-config key no code here computes.
    #[error("speculative key `{0}`: no implementation computes it")]
    UnknownSpeculativeKey(String),
    /// Versions not in connector-version order.
    #[error("versions: connector_version {0} goes backwards")]
    VersionBackwards(i64),
    /// A release listed by two versions (or also as a release without the hash).
    #[error("release {0} is listed twice")]
    ReleaseTwice(String),
    /// A version's key that `[factors]` does not define.
    #[error("releases {releases:?}: key `{key}` is not defined under [factors]")]
    UndefinedKey {
        /// The version's releases.
        releases: Vec<String>,
        /// The key.
        key: String,
    },
    /// A `speculative_gate` other than `use_eagle` and `uses_target_hidden_states`.
    #[error("speculative_gate {0:?}: use_eagle or uses_target_hidden_states")]
    SpeculativeGate(String),
    /// A wrapper key with neither (or both) of `from` and `value`, or an unknown `from`.
    #[error("wrapper key `{0}`: needs `from` (inner_hash or engine) or `value`")]
    WrapperKey(String),
}

impl CompatHashSpec {
    /// Parses and checks one data file.
    pub(crate) fn parse(path: &str, text: &str) -> Result<CompatHashSpec, crate::spec::SpecError> {
        let spec: CompatHashSpec =
            toml::from_str(text).map_err(|e| crate::spec::SpecError::new(path, e.to_string()))?;
        spec.check().map_err(|e| crate::spec::SpecError::new(path, e.to_string()))?;
        Ok(spec)
    }

    fn check(&self) -> Result<(), CompatSpecError> {
        if self.format != FORMAT {
            return Err(CompatSpecError::Format);
        }
        if self.algorithm != "hash_factors" {
            return Err(CompatSpecError::Algorithm(self.algorithm.clone()));
        }
        for name in self.factors.keys() {
            if !KNOWN_FACTORS.contains(&name.as_str()) {
                return Err(CompatSpecError::UnknownFactor(name.clone()));
            }
        }
        for k in &self.speculative.keys {
            if !KNOWN_SPECULATIVE.contains(&k.name.as_str()) {
                return Err(CompatSpecError::UnknownSpeculativeKey(k.name.clone()));
            }
        }
        let mut seen = std::collections::HashSet::new();
        let mut last_version = i64::MIN;
        for v in &self.versions {
            if v.connector_version < last_version {
                return Err(CompatSpecError::VersionBackwards(v.connector_version));
            }
            last_version = v.connector_version;
            for r in &v.releases {
                if !seen.insert(r.clone()) || self.no_hash_releases.contains(r) {
                    return Err(CompatSpecError::ReleaseTwice(r.clone()));
                }
            }
            for k in &v.keys {
                if !self.factors.contains_key(k) {
                    return Err(CompatSpecError::UndefinedKey { releases: v.releases.clone(), key: k.clone() });
                }
            }
            for k in v.speculative_keys.iter().flatten() {
                if !self.speculative.keys.iter().any(|d| &d.name == k) {
                    return Err(CompatSpecError::UnknownSpeculativeKey(k.clone()));
                }
            }
            if !matches!(v.speculative_gate.as_deref(), None | Some("use_eagle" | "uses_target_hidden_states")) {
                return Err(CompatSpecError::SpeculativeGate(v.speculative_gate.clone().unwrap_or_default()));
            }
        }
        if let Some(w) = &self.wrapper {
            for k in &w.keys {
                match (k.from.as_deref(), k.value) {
                    (Some("inner_hash" | "engine"), None) | (None, Some(_)) => {}
                    _ => return Err(CompatSpecError::WrapperKey(k.name.clone())),
                }
            }
        }
        Ok(())
    }

    /// Every compatibility-hash file of the built-in spec.
    pub(crate) fn builtin() -> &'static [CompatHashSpec] {
        static ALL: OnceLock<Vec<CompatHashSpec>> = OnceLock::new();
        ALL.get_or_init(|| {
            Spec::builtin_files()
                .iter()
                .filter(|(_, text)| crate::spec::tree::data_format(text).as_deref() == Some(FORMAT))
                .map(|(path, text)| CompatHashSpec::parse(path, text).unwrap_or_else(|e| panic!("embedded spec: {e}")))
                .collect()
        })
    }

    /// The built-in NIXL file.
    pub(crate) fn nixl() -> &'static CompatHashSpec {
        Self::builtin().iter().find(|s| s.name == "nixl").expect("spec/compat-hash/nixl.toml is embedded")
    }
}

impl NixlFactorSet {
    /// The factor set of a vLLM release (`None` for releases without the hash, or not covered).
    pub fn for_release(release: &str) -> Option<&'static NixlFactorSet> {
        CompatHashSpec::nixl().versions.iter().find(|v| v.releases.iter().any(|r| r == release))
    }

    /// The factors dict vLLM hashes for this config, in vLLM's key order. `release` gives `vllm_version`
    /// unless the config sets it.
    pub fn factors(&self, cfg: &NixlConfig, release: &str) -> Result<PyValue, HashError> {
        let spec = CompatHashSpec::nixl();
        let mut items = Vec::with_capacity(self.keys.len());
        for key in &self.keys {
            let v = match key.as_str() {
                "vllm_version" => PyValue::str(cfg.vllm_version.clone().unwrap_or_else(|| release.to_string())),
                "nixl_connector_version" => PyValue::int(self.connector_version),
                "model" => PyValue::str(&cfg.model),
                "dtype" => PyValue::str(&cfg.dtype),
                "num_kv_heads" => PyValue::int(cfg.num_kv_heads),
                "head_size" => PyValue::int(cfg.head_size),
                "num_hidden_layers" => PyValue::int(cfg.num_hidden_layers),
                "attn_backend_name" => PyValue::str(&cfg.attn_backend_name),
                "cache_dtype" => PyValue::str(&cfg.cache_dtype),
                "cross_layers_blocks" => PyValue::Bool(cfg.cross_layers_blocks.ok_or_else(|| {
                    HashError::MissingArgument { signature: self.signature.clone(), argument: "cross_layers_blocks" }
                })?),
                "is_hma_enabled" => PyValue::Bool(!cfg.disable_hybrid_kv_cache_manager),
                "speculative_config" => speculative_factors(&spec.speculative, self, cfg)?,
                "transfer_mode" => PyValue::str(cfg.transfer_mode.clone().unwrap_or_else(|| "pull".into())),
                other => return Err(HashError::Unimplemented { what: "factor", name: other.to_string() }),
            };
            items.push((PyValue::str(key.as_str()), v));
        }
        Ok(PyValue::Dict(items))
    }

    /// `compute_nixl_compatibility_hash` of this release.
    pub fn hash(&self, cfg: &NixlConfig, release: &str) -> Result<String, HashError> {
        let f = self.factors(cfg, release)?;
        Ok(super::hash_factors(&f)?.digest)
    }
}

fn speculative_factors(def: &SpeculativeDef, set: &NixlFactorSet, cfg: &NixlConfig) -> Result<PyValue, HashError> {
    let gate = |s: &&SpeculativeInput| match set.speculative_gate.as_deref() {
        Some("uses_target_hidden_states") => s.uses_target_hidden_states,
        _ => s.use_eagle,
    };
    let Some(s) = cfg.speculative_config.as_ref().filter(gate) else {
        return Ok(PyValue::None);
    };
    let conv = |v: &serde_json::Value| tagged::from_tagged_json(v);
    let mut items = Vec::new();
    let keys = def.keys.iter().filter(|k| set.speculative_keys.as_ref().is_none_or(|ks| ks.contains(&k.name)));
    for k in keys {
        let v = match k.name.as_str() {
            "method" => conv(&s.method)?,
            "model" => conv(&s.model)?,
            "revision" => conv(&s.revision)?,
            "code_revision" => conv(&s.code_revision)?,
            "parallel_drafting" => conv(&s.parallel_drafting)?,
            // `speculative_config.kv_cache_dtype or cache_config.cache_dtype`: None and "" are falsy.
            "kv_cache_dtype" => PyValue::str(
                s.kv_cache_dtype.clone().filter(|d| !d.is_empty()).unwrap_or_else(|| cfg.cache_dtype.clone()),
            ),
            "auxiliary_layer_ids" => match &s.aux {
                None => PyValue::None,
                Some(ids) => PyValue::Tuple(ids.iter().map(conv).collect::<Result<_, _>>()?),
            },
            other => return Err(HashError::Unimplemented { what: "speculative key", name: other.to_string() }),
        };
        items.push((PyValue::str(k.name.as_str()), v));
    }
    Ok(PyValue::Dict(items))
}

/// The P2P wrapper's hash over an inner (NIXL) hash for a transfer engine (`mooncake`): the inner hash for
/// the pass-through engine, else `hash_factors` of the wrapper's dict.
pub fn wrapper_hash(inner_hash: &str, engine: &str) -> Result<String, HashError> {
    let w = CompatHashSpec::nixl().wrapper.as_ref().ok_or(HashError::NoWrapper)?;
    if engine == w.passthrough_engine {
        return Ok(inner_hash.to_string());
    }
    let items = w
        .keys
        .iter()
        .map(|k| {
            let v = match (k.from.as_deref(), k.value) {
                (Some("inner_hash"), _) => PyValue::str(inner_hash),
                (Some("engine"), _) => PyValue::str(engine),
                (_, Some(c)) => PyValue::int(c),
                _ => unreachable!("checked when the spec was loaded"),
            };
            (PyValue::str(k.name.as_str()), v)
        })
        .collect();
    Ok(super::hash_factors(&PyValue::Dict(items))?.digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qwen() -> NixlConfig {
        NixlConfig {
            model: "Qwen/Qwen3-0.6B".into(),
            dtype: "torch.bfloat16".into(),
            num_kv_heads: 8,
            head_size: 128,
            num_hidden_layers: 28,
            cache_dtype: "auto".into(),
            attn_backend_name: "FLASH_ATTN".into(),
            ..Default::default()
        }
    }

    #[test]
    fn reference_vectors() {
        // spec/README.md, "Compatibility hashes: reference vectors".
        let set = NixlFactorSet::for_release("0.33.0").unwrap();
        assert_eq!(set.connector_version, 15);
        assert_eq!(
            set.hash(&qwen(), "0.33.0").unwrap(),
            "cde24c489ad71bfdbccb1b829551f03719b0fe359a22fe635ec9986a6f36e549"
        );
        let push = NixlConfig { transfer_mode: Some("push".into()), ..qwen() };
        assert_eq!(
            set.hash(&push, "0.33.0").unwrap(),
            "f6ec60046eb1686a44b0b27f624a8997cdd33753b2c1be52faae80f42c236cbc"
        );
        let old = NixlFactorSet::for_release("0.15.0").unwrap();
        let cfg = NixlConfig { vllm_version: Some("0.15.0".into()), ..qwen() };
        assert_eq!(
            old.hash(&cfg, "0.15.0").unwrap(),
            "bc8921256fe8081bc30ea08fdf3a5dd3f0a7f92a8d8c93e2affc742794fa7174"
        );
        // Vector 7: the fork's Mooncake wrapper over vector 1.
        assert_eq!(
            wrapper_hash("391ee869bad56b408c8ac3d1e21c06df90b0c5a61bbed8b524bba8b168d1d863", "mooncake").unwrap(),
            "29f4e060bc192eb8fff5ca7326e82b66a6467c1267b11f437ee4a5549d2fbac3"
        );
        assert_eq!(wrapper_hash("abc", "nixl").unwrap(), "abc");
        assert!(NixlFactorSet::for_release("0.12.0").is_none());
        let needs_cross = NixlFactorSet::for_release("0.24.0").unwrap();
        assert!(needs_cross.hash(&qwen(), "0.24.0").unwrap_err().to_string().contains("cross_layers_blocks"));
    }

    #[test]
    fn spec_check_rejects_unknown_factors() {
        let text = Spec::builtin_files().iter().find(|(p, _)| *p == "compat-hash/nixl.toml").unwrap().1;
        assert!(CompatHashSpec::parse("x", text).is_ok());
        let bad = text.replace("\"cache_dtype\", \"is_hma_enabled\", \"speculative_config\", \"transfer_mode\"]\n\n[[versions]]\nreleases = [\"0.33.0\"]", "\"cache_dtype\", \"bogus\"]\n\n[[versions]]\nreleases = [\"0.33.0\"]");
        assert!(CompatHashSpec::parse("x", &bad).unwrap_err().msg.contains("bogus"));
        let bad = text.replace("[factors.transfer_mode]", "[factors.transfer_mode2]");
        assert!(CompatHashSpec::parse("x", &bad).is_err());
    }
}
