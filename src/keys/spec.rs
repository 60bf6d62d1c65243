//! The built-in store-key data (`spec/store-keys/*.toml`), loaded once.

use std::sync::OnceLock;

use super::block_hash::BlockHashRules;
use super::grammar::{ChunkHashRule, Grammar, StoreKeysFile, FORMAT};
use super::KeysError;
use crate::spec::tree::data_format;
use crate::spec::Spec;

/// A vLLM release the store-key data has no key grammar for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no MooncakeStoreConnector key grammar for vLLM {release} (releases: {known})")]
pub struct NoGrammar {
    /// The release asked for.
    pub release: String,
    /// The releases that have one, `, `-joined.
    pub known: String,
}

/// Every store-key file and its compiled grammars.
pub struct StoreKeySpec {
    pub(crate) files: Vec<StoreKeysFile>,
    /// Every grammar of every file, in data order.
    pub grammars: Vec<Grammar>,
}

impl StoreKeySpec {
    /// The data embedded from `spec/store-keys/`, parsed once.
    pub fn builtin() -> &'static StoreKeySpec {
        static SPEC: OnceLock<StoreKeySpec> = OnceLock::new();
        SPEC.get_or_init(|| {
            let files: Vec<StoreKeysFile> = Spec::builtin_files()
                .iter()
                .filter(|(_, t)| data_format(t).as_deref() == Some(FORMAT))
                .map(|(p, t)| StoreKeysFile::parse(p, t).unwrap_or_else(|e| panic!("embedded spec: {e}")))
                .collect();
            let grammars = files.iter().flat_map(|f| f.grammars().expect("checked when parsed")).collect();
            StoreKeySpec { files, grammars }
        })
    }

    /// A grammar by name (`vllm-0.30`, `lmcache-key`, ...).
    pub fn grammar(&self, name: &str) -> Option<&Grammar> {
        self.grammars.iter().find(|g| g.name == name)
    }

    /// The grammar of vLLM's store keys in a release (0.21.0 … 0.33.0).
    pub fn vllm_grammar(&self, release: &str) -> Result<&Grammar, NoGrammar> {
        self.grammars
            .iter()
            .find(|g| g.family == "vllm" && g.releases.iter().any(|r| r == release))
            .ok_or_else(|| NoGrammar { release: release.to_string(), known: self.vllm_releases().join(", ") })
    }

    /// Every release with a vLLM key grammar, in data order.
    pub fn vllm_releases(&self) -> Vec<&str> {
        self.grammars
            .iter()
            .filter(|g| g.family == "vllm")
            .flat_map(|g| g.releases.iter().map(String::as_str))
            .collect()
    }

    fn vllm_file(&self) -> &StoreKeysFile {
        self.files.iter().find(|f| f.family == "vllm").expect("spec/store-keys/vllm.toml is embedded")
    }

    /// Whether vLLM `release` has a key helper (`PoolKey.build_prefix`, `_make_mooncake_group_id`, ...).
    pub fn has_api(&self, function: &str, release: &str) -> Result<bool, KeysError> {
        let since = self.vllm_file().api.get(function).ok_or_else(|| KeysError::UnknownApi(function.to_string()))?;
        Ok(crate::spec::version_key(release) >= crate::spec::version_key(since))
    }

    /// How the release derives the chunk hash of a store key from block hashes.
    pub fn chunk_hash_rule(&self, release: &str) -> Result<&ChunkHashRule, KeysError> {
        self.vllm_file()
            .chunk_hash
            .iter()
            .find(|r| r.releases.iter().any(|x| x == release))
            .ok_or_else(|| KeysError::NoChunkHashRule(release.to_string()))
    }

    /// How the release seeds its block-hash chain and shapes extra keys.
    pub fn block_hash_rules(&self, release: &str) -> Result<&BlockHashRules, KeysError> {
        self.vllm_file()
            .block_hash
            .iter()
            .find(|r| r.releases.iter().any(|x| x == release))
            .ok_or_else(|| KeysError::NoBlockHashRules(release.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_release_from_0_21_to_0_34_has_a_grammar_and_rules() {
        let s = StoreKeySpec::builtin();
        let releases = s.vllm_releases();
        assert_eq!(releases.first(), Some(&"0.21.0"));
        assert_eq!(releases.last(), Some(&"0.34.0"));
        for r in &releases {
            s.chunk_hash_rule(r).unwrap();
            s.block_hash_rules(r).unwrap();
        }
        let mut sorted = releases.clone();
        sorted.sort_by_key(|r| crate::spec::version_key(r));
        sorted.dedup();
        assert_eq!(sorted, releases, "each release once, in order");
        assert!(s.vllm_grammar("0.20.0").is_err());
        for name in [
            "ascend-mooncake-key",
            "ascend-mooncake-layer-key",
            "ascend-store-key",
            "ascend-store-layer-key",
            "lmcache-key",
            "lmcache-layer-key",
        ] {
            assert!(s.grammar(name).is_some(), "{name}");
        }
    }
}
