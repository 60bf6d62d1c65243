//! Expected failures (`conformance/expected-failures.toml`): the cases an implementation is known to fail,
//! each with the check it fails and why.

use std::path::Path;

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
    pub reason: String,
}

#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
/// The expected failures of a run: data, not code; a stale entry (the case passes) fails the run.
pub struct ExpectedFailures {
    #[serde(default, rename = "case")]
    pub cases: Vec<ExpectedFailure>,
}

impl ExpectedFailures {
    pub fn load(p: &Path) -> Result<ExpectedFailures, String> {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", p.display()))
    }
    pub fn parse(text: &str) -> Result<ExpectedFailures, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }
}
