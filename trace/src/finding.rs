//! What a check found, the report of one trace and of one vector file: the leaf every layer of the pipeline
//! shares (trace → conversation → checks → report → writers); it imports nothing of the crate.
//!
//! Check ids are a closed list, [`CheckId`], each documented in `conformance/CHECKS.md`
//! (`conformance/tests/suite/check_ids.rs` holds the enum and the document to each other).

use serde::Serialize;

/// Declares [`CheckId`]: each variant with its stable id string.
macro_rules! check_ids {
    ($($variant:ident => $id:literal,)*) => {
        /// The id of a check: one variant per id of `conformance/CHECKS.md` (a test holds the two to each
        /// other), written as its id string (`TRACE-FORMAT`) in every output.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum CheckId {
            $(
                #[doc = concat!("`", $id, "` (`conformance/CHECKS.md`).")]
                $variant,
            )*
        }

        impl CheckId {
            /// Every check, in the order of `conformance/CHECKS.md`.
            pub const ALL: &'static [CheckId] = &[$(CheckId::$variant,)*];

            /// The stable id string (`ZMQ-DECODE`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(CheckId::$variant => $id,)*
                }
            }
        }
    };
}

check_ids! {
    TraceFormat => "TRACE-FORMAT",
    TraceEmpty => "TRACE-EMPTY",
    TraceRevision => "TRACE-REVISION",
    ZmqSocket => "ZMQ-SOCKET",
    ZmqFrames => "ZMQ-FRAMES",
    ZmqDecode => "ZMQ-DECODE",
    ZmqReencode => "ZMQ-REENCODE",
    ZmqRaw => "ZMQ-RAW",
    PullPairing => "PULL-PAIRING",
    ZmqConnect => "ZMQ-CONNECT",
    WireCanonical => "WIRE-CANONICAL",
    ReplyDecode => "REPLY-DECODE",
    RequestDecode => "REQUEST-DECODE",
    SeqTerminal => "SEQ-TERMINAL",
    ReqsSubset => "REQS-SUBSET",
    ReqsOnce => "REQS-ONCE",
    ErrorShape => "ERROR-SHAPE",
    LayoutEcho => "LAYOUT-ECHO",
    LayoutMissCause => "LAYOUT-MISS-CAUSE",
    LayoutMissResend => "LAYOUT-MISS-RESEND",
    LayoutLessAfterAck => "LAYOUT-LESS-AFTER-ACK",
    EmptyLists => "EMPTY-LISTS",
    FanOutSameBytes => "FAN-OUT-SAME-BYTES",
    LeaseReply => "LEASE-REPLY",
    HttpRoute => "HTTP-ROUTE",
    HttpBody => "HTTP-BODY",
    HttpBodyRaw => "HTTP-BODY-RAW",
    RegisterStatus => "REGISTER-STATUS",
    QueryReflectsRegister => "QUERY-REFLECTS-REGISTER",
    RegisterBody => "REGISTER-BODY",
    BootStatus => "BOOT-STATUS",
    BootBody => "BOOT-BODY",
    BootReply => "BOOT-REPLY",
    ReplyDiff => "REPLY-DIFF",
    ReplyMissing => "REPLY-MISSING",
    ReplyExtra => "REPLY-EXTRA",
    TeCalls => "TE-CALLS",
    TeDescriptor => "TE-DESCRIPTOR",
    TeHandshake => "TE-HANDSHAKE",
    PFinishedSending => "P-FINISHED-SENDING",
    PStateLeak => "P-STATE-LEAK",
    RequestCount => "REQUEST-COUNT",
    RequestDiff => "REQUEST-DIFF",
    RequestSession => "REQUEST-SESSION",
    DSettle => "D-SETTLE",
    DOutcome => "D-OUTCOME",
    LeaseRenewal => "LEASE-RENEWAL",
    DStateLeak => "D-STATE-LEAK",
    Landed => "LANDED",
    CaseSetup => "CASE-SETUP",
    RunnerDeviation => "RUNNER-DEVIATION",
}

impl CheckId {
    /// The check of an id string, if it is one.
    pub fn parse(id: &str) -> Option<CheckId> {
        CheckId::ALL.iter().copied().find(|c| c.as_str() == id)
    }
}

impl std::fmt::Display for CheckId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CheckId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One finding of a check, where it was seen (event `seq`, line of the file) and what it says.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The check that found it.
    pub check: CheckId,
    /// The `seq` of the trace event it concerns, if one.
    pub seq: Option<u64>,
    /// The line of the file it concerns, if one.
    pub line: Option<usize>,
    /// Which message or exchange it concerns (`POST /register`, `exchange 2 (...)`), printed before the detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What is wrong.
    pub detail: String,
}

impl Finding {
    /// A finding of `check` that says `detail`; where it was seen and what it concerns are added with
    /// [`Finding::at`] and [`Finding::about`]. The one way the crate makes a finding.
    pub fn new(check: CheckId, detail: impl Into<String>) -> Finding {
        Finding { check, seq: None, line: None, message: None, detail: detail.into() }
    }

    /// Seen at trace event `seq`, on line `line` of the file (either may be unknown).
    pub fn at(mut self, seq: Option<u64>, line: Option<usize>) -> Finding {
        self.seq = seq;
        self.line = line;
        self
    }

    /// Seen on line `line` of the file, at no event (a header's finding).
    pub fn at_line(self, line: usize) -> Finding {
        self.at(None, Some(line))
    }

    /// Concerning `message` (`POST /register`, `exchange 2 reply 1`), printed before the detail.
    pub fn about(mut self, message: impl Into<String>) -> Finding {
        self.message = Some(message.into());
        self
    }
}

/// The result of validating one trace (`validate`).
#[derive(Debug, Default, Serialize)]
pub struct TraceReport {
    /// The trace's path (or bundled name).
    pub path: String,
    /// Its header's scenario id.
    pub scenario: String,
    /// The project `vllm_version` is a release (or commit) of: `vLLM`, for a pull trace its revision's
    /// project (`vllm-ascend`), for another implementation's recording that implementation (`mooncake`).
    pub project: String,
    /// The header's `vllm_version`, or the recorded implementation's release (`implementation_version`).
    pub vllm_version: String,
    /// The spec revision it was checked against; `None` when none covers its release.
    pub revision: Option<String>,
    /// ZeroMQ events checked.
    pub zmq_payloads: usize,
    /// HTTP events checked.
    pub http_events: usize,
    /// What the recording could not observe (header `unobserved`; a tap's trace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unobserved: Vec<String>,
    /// Every finding, in the order the checks ran.
    pub findings: Vec<Finding>,
}

impl TraceReport {
    /// Whether nothing was found.
    pub fn ok(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Checks whose findings mean the file could not be checked at all (bad input, not a disagreement).
pub const INPUT_CHECKS: [CheckId; 3] = [CheckId::TraceFormat, CheckId::TraceEmpty, CheckId::TraceRevision];

/// A case of a vector file that did not agree.
#[derive(Debug, Serialize)]
pub struct Failure {
    /// The case's id.
    pub id: String,
    /// Its line in the file.
    pub line: usize,
    /// What disagreed.
    pub problem: String,
}

/// The result of checking one vector file (`vectors`).
#[derive(Debug, Serialize)]
pub struct FileReport {
    /// The file's path (or bundled name).
    pub path: String,
    /// What the file holds: `vllm-0.33.0 MooncakeXferMetadata`, `plan: _get_tp_ratio`, ...
    pub subject: String,
    /// Cases in the file.
    pub cases: usize,
    /// Cases that agreed.
    pub passed: usize,
    /// Cases that did not.
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
    /// Whether the file was checked and every case agreed.
    pub fn ok(&self) -> bool {
        self.not_checked.is_none() && self.failures.is_empty() && self.passed == self.cases
    }
}

/// `text` cut to at most `max` characters for a message, saying how much was left out: an input can be
/// megabytes long, and an error or a finding that repeats it whole buries what it says.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}… ({} bytes more)", &text[..at], text.len() - at),
    }
}

#[cfg(test)]
mod clip_tests {
    use super::clip;

    #[test]
    fn long_text_is_cut_and_says_how_much_is_missing() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("abcdefghij", 10), "abcdefghij");
        assert_eq!(clip("abcdefghijkl", 10), "abcdefghij… (2 bytes more)");
        // Never inside a character.
        assert_eq!(clip("ééé", 2), "éé… (2 bytes more)");
    }
}
