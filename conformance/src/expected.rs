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
    pub fn load(p: &Path) -> Result<ExpectedFailures, String> {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", p.display()))
    }
    /// Parses the file's text; an unknown key is an error.
    pub fn parse(text: &str) -> Result<ExpectedFailures, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }
}
