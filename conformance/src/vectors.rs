//! `mooncake-conformance vectors`: checks vector files against the codec.
//!
//! Two formats (see `vectors/README.md` and `vectors/GOLDEN.md` in the repository):
//! * `mooncake-vectors` — msgspec encodings of one revision's message with accept/reject verdicts;
//! * `mooncake-golden` — outputs of vLLM's planning, hashing and key functions, checked by [`crate::golden`].

use std::path::Path;

use mooncake_wire::codec::Codec;
use serde::Serialize;
use serde_json::Value as J;

use crate::{golden, jsonl};

#[derive(Debug, Serialize)]
pub struct Failure {
    pub id: String,
    pub line: usize,
    pub problem: String,
}

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
    /// Why the file could not be checked at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_checked: Option<String>,
}

impl FileReport {
    pub fn ok(&self) -> bool {
        self.not_checked.is_none() && self.failures.is_empty() && self.passed == self.cases
    }
}

fn s<'a>(v: &'a J, k: &str) -> Option<&'a str> {
    v.get(k).and_then(J::as_str)
}

pub fn check_file(path: &Path) -> FileReport {
    let mut rep = FileReport {
        path: path.display().to_string(),
        subject: String::new(),
        cases: 0,
        passed: 0,
        failures: vec![],
        error_text_differs: 0,
        not_checked: None,
    };
    let lines = match jsonl::read(path) {
        Ok(l) => l,
        Err(e) => {
            rep.not_checked = Some(e);
            return rep;
        }
    };
    let Some((header, cases)) = lines.split_first() else {
        rep.not_checked = Some("empty file".into());
        return rep;
    };
    rep.cases = cases.len();
    match s(&header.value, "format") {
        Some("mooncake-vectors") => check_codec_vectors(&header.value, cases, &mut rep),
        Some("mooncake-golden") => golden::check_file(&header.value, cases, &mut rep),
        other => rep.not_checked = Some(format!("unknown format {other:?} (expected mooncake-vectors or mooncake-golden)")),
    }
    rep
}

fn check_codec_vectors(header: &J, cases: &[jsonl::Line], rep: &mut FileReport) {
    let (Some(revision), Some(message)) = (s(header, "revision"), s(header, "message")) else {
        rep.not_checked = Some("header lacks `revision` or `message`".into());
        return;
    };
    rep.subject = format!("{revision} {message}");
    let Some(codec) = Codec::builtin(revision) else {
        rep.not_checked = Some(format!("revision {revision} is not in the spec"));
        return;
    };
    if codec.message_type(message).is_none() {
        rep.not_checked = Some(format!("{revision} has no message {message} in the spec"));
        return;
    }
    for line in cases {
        let c = &line.value;
        let id = s(c, "id").unwrap_or("?").to_string();
        let fail = |rep: &mut FileReport, problem: String| rep.failures.push(Failure { id: id.clone(), line: line.no, problem });
        let Some(bytes) = s(c, "hex").and_then(|h| hex::decode(h).ok()) else {
            fail(rep, "missing or malformed `hex`".into());
            continue;
        };
        let got = codec.decode(message, &bytes);
        match (s(c, "expect"), got) {
            (Some("accept"), Ok(v)) => {
                let json = Codec::to_json(&v);
                if let Some(want) = c.get("value") {
                    if !jsonl::eq_ordered(&json, want) {
                        let d = jsonl::first_difference(&json, want, "$").unwrap_or_default();
                        fail(rep, format!("decoded value differs (ours vs msgspec): {d}"));
                        continue;
                    }
                }
                let want_hex = s(c, "canonical_hex").or(s(c, "hex")).unwrap_or_default();
                match codec.encode(message, &v) {
                    Ok(b) if hex::encode(&b) == want_hex => rep.passed += 1,
                    Ok(b) => fail(rep, format!("re-encoding differs: ours {} vs msgspec {want_hex}", hex::encode(b))),
                    Err(e) => fail(rep, format!("re-encoding failed: {e}")),
                }
            }
            (Some("accept"), Err(e)) => fail(rep, format!("msgspec accepts, we reject: {}", e.msgspec_message())),
            (Some("reject"), Ok(v)) => fail(rep, format!("msgspec rejects ({}), we accept: {v}", s(c, "error").unwrap_or("?"))),
            (Some("reject"), Err(e)) => {
                rep.passed += 1;
                if s(c, "error").is_some_and(|want| want != e.msgspec_message()) {
                    rep.error_text_differs += 1;
                }
            }
            (other, _) => fail(rep, format!("bad `expect` {other:?}")),
        }
    }
}
