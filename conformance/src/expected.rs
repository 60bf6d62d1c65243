//! Expected failures (`conformance/expected-failures.toml`): the cases an implementation is known to fail,
//! each with the check it fails and why.

use std::path::Path;

use crate::load_error::LoadError;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
/// One case expected to fail (`conformance/expected-failures.toml`, `[[case]]`).
pub struct ExpectedFailure {
    /// Case id (`vllm-0.33.0/h1_layout_reuse_and_miss/prefiller`).
    pub id: String,
    /// Only findings of this check are expected; others still fail the case.
    #[serde(default)]
    pub check: Option<String>,
    /// Why it fails (for the report).
    pub reason: String,
}

#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
/// The expected failures of a run: data, not code; a stale entry (the case passes) fails the run.
pub struct ExpectedFailures {
    /// The `[[case]]` entries.
    #[serde(default, rename = "case")]
    pub cases: Vec<ExpectedFailure>,
}

impl ExpectedFailures {
    /// Reads and parses the file at `p` (errors name it).
    pub fn load(p: &Path) -> Result<ExpectedFailures, LoadError> {
        let name = p.display().to_string();
        let text = std::fs::read_to_string(p).map_err(|source| LoadError::Read { name: name.clone(), source })?;
        Self::parse(&text).map_err(|source| LoadError::Expected { name, source })
    }
    /// Parses the file's text; an unknown key is an error.
    pub fn parse(text: &str) -> Result<ExpectedFailures, toml::de::Error> {
        toml::from_str(text)
    }
}
