//! What a check found, the report of one trace and of one vector file: the leaf every layer of the pipeline shares (trace →
//! conversation → checks → report → writers); of this crate it uses only the exit codes of `outcome`.
//!
//! Check ids are documented in `conformance/CHECKS.md`.

use serde::Serialize;

/// One finding of a check, where it was seen (event `seq`, line of the file) and what it says.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub check: &'static str,
    pub seq: Option<u64>,
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct TraceReport {
    pub path: String,
    pub scenario: String,
    /// The project `vllm_version` is a release (or commit) of: `vLLM`, or for a pull trace its revision's
    /// project (`vllm-ascend`).
    pub project: String,
    pub vllm_version: String,
    pub revision: Option<String>,
    pub zmq_payloads: usize,
    pub http_events: usize,
    /// What the recording could not observe (header `unobserved`; a tap's trace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unobserved: Vec<String>,
    pub findings: Vec<Finding>,
}

impl TraceReport {
    pub fn ok(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Checks whose findings mean the file could not be checked at all (bad input: exit 2, not 1).
pub const INPUT_CHECKS: [&str; 3] = ["TRACE-FORMAT", "TRACE-EMPTY", "TRACE-REVISION"];

/// The exit code of a validation: 2 when some file is not a checkable trace (an empty trace only without
/// `allow_empty`), 1 when some trace has findings, 0 otherwise.
pub fn exit_code(reps: &[TraceReport], allow_empty: bool) -> u8 {
    let input = |f: &Finding| INPUT_CHECKS.contains(&f.check) && (f.check != "TRACE-EMPTY" || !allow_empty);
    if reps.iter().any(|r| r.findings.iter().any(input)) {
        crate::outcome::USAGE
    } else if reps.iter().any(|r| r.findings.iter().any(|f| f.check != "TRACE-EMPTY")) {
        crate::outcome::DISAGREE
    } else {
        crate::outcome::AGREE
    }
}

/// A case of a vector file that did not agree.
#[derive(Debug, Serialize)]
pub struct Failure {
    pub id: String,
    pub line: usize,
    pub problem: String,
}

/// The result of checking one vector file (`vectors`).
#[derive(Debug, Serialize)]
pub struct FileReport {
    pub path: String,
    /// What the file holds: `vllm-0.33.0 MooncakeXferMetadata`, `plan: _get_tp_ratio`, ...
    pub subject: String,
    pub cases: usize,
    pub passed: usize,
    pub failures: Vec<Failure>,
    /// Rejected cases whose error text differs from msgspec's (informational: the verdict is what must agree).
    pub error_text_differs: usize,
    /// Informational remarks that do not fail the file.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Why the file could not be checked at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_checked: Option<String>,
    /// The file is not a vector file this tool reads (unreadable, empty, no or an unknown `format`): bad input.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub bad_input: bool,
}

impl FileReport {
    pub fn ok(&self) -> bool {
        self.not_checked.is_none() && self.failures.is_empty() && self.passed == self.cases
    }
}
