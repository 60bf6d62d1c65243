//! Implementations of a family's wire other than vLLM's own connector (`spec/implementations/*.toml`, format
//! `mooncake-implementation/1`; `spec/README.md`, "Implementations"): which revision's wire each speaks, what it
//! reads around the wire, and the differences a peer can observe.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::model::{ConfigKey, EnvVar, KvTransferParams};
use super::{Family, SpecError};

/// The data format of an implementation file.
pub(crate) const FORMAT: &str = "mooncake-implementation/1";

/// Another project's connector that speaks one of the spec's revisions (Mooncake's `mooncake_connector_v1`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Implementation {
    /// Always `mooncake-implementation/1`.
    pub format: String,
    /// Its short name, as trace headers (`implementation`) and case ids (`…@mooncake-0.3.13.post1/…`) write it.
    pub name: String,
    /// What it is, in a few words.
    pub title: String,
    /// The protocol family whose wire it speaks.
    pub family: String,
    /// The revision of that family whose wire and behaviour it speaks.
    pub speaks: String,
    /// The package it ships in (`mooncake-transfer-engine-non-cuda`).
    pub package: String,
    /// The connector's file in that package.
    pub module: String,
    /// The package releases covered.
    pub releases: Vec<String>,
    /// The vLLM releases it runs on (documentation).
    pub hosts: String,
    /// Where the facts come from: package release and file.
    pub source: String,
    /// One line: what it speaks and where it differs.
    pub summary: String,
    /// The keys of `kv_transfer_params` it sets and reads, in the revisions' syntax.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_transfer_params: Option<KvTransferParams>,
    /// Every environment variable it reads, by name.
    #[serde(default)]
    pub env: IndexMap<String, EnvVar>,
    /// Every `kv_connector_extra_config` key it reads, by name.
    #[serde(default)]
    pub extra_config: IndexMap<String, ConfigKey>,
    /// What a peer can observe that differs from the revision it speaks.
    #[serde(default)]
    pub differences: Vec<Difference>,
}

/// One observable difference from the revision an implementation speaks.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Difference {
    /// What differs: `kv_transfer_params`, `env`, `extra_config` or `behaviour.<item>`.
    pub item: String,
    /// Where it was read: release, file and function.
    pub source: String,
    /// What a peer sees.
    pub doc: String,
}

impl Implementation {
    /// Reads one implementation file's table and checks it against the families it may name.
    pub(crate) fn parse(path: &str, table: toml::Table, families: &[Family]) -> Result<Implementation, SpecError> {
        let imp: Implementation =
            toml::Value::Table(table).try_into().map_err(|e| SpecError::new(path, format!("{e}")))?;
        imp.check(families).map_err(|m| SpecError::new(path, m))?;
        Ok(imp)
    }

    fn check(&self, families: &[Family]) -> Result<(), String> {
        if self.format != FORMAT {
            return Err(format!("format must be {FORMAT:?}"));
        }
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
            return Err(format!("name {:?}: lowercase letters and `-` only (it goes into case ids)", self.name));
        }
        let family = families
            .iter()
            .find(|f| f.name == self.family)
            .ok_or_else(|| format!("family `{}`: the spec has no such family", self.family))?;
        if family.revision(&self.speaks).is_none() {
            return Err(format!("speaks `{}`: no revision of that name in family `{}`", self.speaks, self.family));
        }
        if self.releases.is_empty() {
            return Err("releases: at least one package release".into());
        }
        for d in &self.differences {
            let known = match d.item.split_once('.') {
                Some(("behaviour", key)) => super::BehaviourKey::ALL.iter().any(|k| k.name() == key),
                None => ["kv_transfer_params", "env", "extra_config"].contains(&d.item.as_str()),
                Some(_) => false,
            };
            if !known {
                return Err(format!(
                    "difference `{}`: not kv_transfer_params, env, extra_config or behaviour.<item>",
                    d.item
                ));
            }
        }
        Ok(())
    }

    /// `<name>-<release>` (`mooncake-0.3.13.post1`): how case ids and bundled directories name a recording of it.
    pub fn label(name: &str, release: &str) -> String {
        format!("{name}-{release}")
    }

    /// Whether `release` is one of its package releases.
    pub fn covers_release(&self, release: &str) -> bool {
        self.releases.iter().any(|r| r == release)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    fn text() -> &'static str {
        Spec::builtin_files().iter().find(|(p, _)| *p == "implementations/mooncake.toml").unwrap().1
    }

    #[test]
    fn the_bundled_implementation_speaks_a_known_revision() {
        let spec = Spec::builtin();
        let imp = spec.implementation("mooncake").expect("mooncake is bundled");
        assert_eq!(spec.revision(&imp.speaks).unwrap().generation, 1);
        assert!(imp.covers_release("0.3.13.post1"));
        assert!(!imp.covers_release("0.3.14"));
    }

    #[test]
    fn a_wrong_revision_item_or_name_is_refused() {
        let families = &Spec::builtin().families;
        let cases = [
            ("speaks = \"vllm-0.13.0..0.15.1\"", "speaks = \"vllm-0.12.0\"", "no revision of that name"),
            ("item = \"env\"", "item = \"behaviour.kv_half_spilt\"", "difference `behaviour.kv_half_spilt`"),
            ("name = \"mooncake\"", "name = \"Mooncake V1\"", "lowercase letters"),
            ("family = \"push\"", "family = \"store\"", "no such family"),
        ];
        for (from, to, want) in cases {
            let edited = text().replacen(from, to, 1);
            assert_ne!(edited, text(), "{from} is in the file");
            let e = Implementation::parse("implementations/x.toml", toml::from_str(&edited).unwrap(), families)
                .unwrap_err();
            assert!(e.to_string().contains(want), "{from} → {to}: {e}");
        }
    }
}
