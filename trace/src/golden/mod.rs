//! Checkers for `mooncake-golden` files: outputs of vLLM's own planning, hashing and key functions.
//! Each checker maps a case's `input` to our output, compared with the recorded `output` or `error`.

use serde_json::Value as J;

use crate::finding::FileReport;
use crate::jsonl;

mod hash;
mod keys;
mod lookup;
mod plan;

/// Our implementation of one vLLM function, by the `function` named in the file header: maps a case's
/// `input` to the `output` vLLM produced, or to an error whose text is the one vLLM raised (`"AssertionError: ..."`).
pub(crate) type Checker = fn(header: &J, input: &J) -> Result<J, GoldenError>;

/// Why a checker gave no output for a case. Only the text counts: it is compared with the `error` vLLM
/// recorded, so every variant's text is the one the checkers have always produced.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GoldenError {
    /// Our implementation refused, as the vLLM function raises (the wire crate's error; its text is vLLM's
    /// `"<ExceptionType>: <message>"` where vLLM raises too).
    #[error("{0}")]
    Ours(Box<dyn std::error::Error>),
    /// A planning case's input or header is malformed (`plan/`): a fault of the file, never vLLM's behaviour.
    #[error(transparent)]
    PlanInput(#[from] plan::BadInput),
    /// A hashing or key case's input or header is malformed (`hash/`, `keys/`).
    #[error(transparent)]
    Input(#[from] InputError),
    /// The planner refused at a stage where vLLM's pipeline raises no such refusal.
    #[error("unexpected refusal at this stage: {0:?}")]
    UnexpectedRefusal(mooncake_wire::plan::Refusal),
    /// Our key parser could not read back a key we built.
    #[error("our parser: {0}")]
    Parser(Box<dyn std::error::Error>),
    /// Our key parser read a key we built back as different parts.
    #[error("our parser read {key:?} back as {parsed:?}")]
    ParsedBack {
        /// The key we built.
        key: String,
        /// What our parser made of it.
        parsed: Box<mooncake_wire::keys::vllm_key::VllmStoreKey>,
    },
    /// The NONE_HASH seed we derive is not the one the vector recorded.
    #[error("we derive the NONE_HASH seed {ours:?}, the vector used {vector:?}")]
    SeedDiffers {
        /// Ours.
        ours: String,
        /// The vector's `none_hash_seed`, if any.
        vector: Option<J>,
    },
    /// Our serialization of the seed is not the one the vector recorded.
    #[error("seed serialization differs: ours {0}")]
    SeedSerializationDiffers(String),
}

impl GoldenError {
    /// An error of our implementation (see [`GoldenError::Ours`]).
    pub(crate) fn ours(e: impl std::error::Error + 'static) -> Self {
        Self::Ours(Box::new(e))
    }
}

/// A malformed `hash/` or `keys/` case: a field missing or of the wrong type, a name we do not know.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    /// The header names no vLLM release (`source_release` / `vllm_version`).
    #[error("header names no release")]
    NoRelease,
    /// The header has no `vllm_version`.
    #[error("header has no vllm_version")]
    NoVersion,
    /// We know no NIXL factor set for the header's release.
    #[error("no NIXL factor set for vLLM {0}")]
    NoFactorSet(String),
    /// The store-lookup spec covers no version of the header's release.
    #[error("no store lookup version for vLLM {0}")]
    NoLookupVersion(String),
    /// The input does not decode into the config the function reads.
    #[error("input: {0}")]
    Decode(serde_json::Error),
    /// A field is absent.
    #[error("input has no `{0}`")]
    Missing(String),
    /// A field is not an integer.
    #[error("`{0}` is not an integer")]
    NotInt(String),
    /// A count or size that would size an allocation is out of range (`keys::MAX_SIZE`).
    #[error("`{key}` = {value}: accepted 0 to {max}")]
    OutOfRange {
        /// The field.
        key: String,
        /// Its value.
        value: i64,
        /// The largest accepted.
        max: i64,
    },
    /// A field is not a string.
    #[error("`{0}` is not a string")]
    NotString(String),
    /// A field is not an array.
    #[error("`{0}` is not an array")]
    NotArray(String),
    /// A field is not an object.
    #[error("`{0}` is not an object")]
    NotObject(String),
    /// A token id is not a Python int.
    #[error("token {0:?} is not an int")]
    TokenNotInt(mooncake_wire::hash::PyValue),
    /// A text that should be hex is not.
    #[error("{0:?} is not hex")]
    NotHex(String),
    /// A rank namespace is not four integers.
    #[error("bad rank namespace {0}")]
    BadRankNamespace(J),
    /// A TP-sharded layout class we do not know.
    #[error("unknown layout class {0}")]
    UnknownLayoutClass(String),
}

/// The checker for a header's `function`: planning (`plan`), hashing (`hash`), keys (`keys`) or the store
/// lookup client (`lookup`).
fn checker(function: &str) -> Option<Checker> {
    plan::checker(function)
        .or_else(|| hash::checker(function))
        .or_else(|| keys::checker(function))
        .or_else(|| lookup::checker(function))
}

pub(crate) fn check_file(header: &J, cases: &[jsonl::Line], rep: &mut FileReport) {
    let function = header.get("function").and_then(J::as_str).unwrap_or("?");
    let kind = header.get("kind").and_then(J::as_str).unwrap_or("?");
    rep.subject = format!("{kind}: {}", function.rsplit('.').next().unwrap_or(function));
    let Some(check) = checker(function) else {
        rep.not_checked = Some(format!("no checker for {function} yet"));
        return;
    };
    for line in cases {
        let c = &line.value;
        let id = c.get("id").and_then(J::as_str).unwrap_or("?").to_string();
        let input = c.get("input").cloned().unwrap_or(J::Null);
        let problem = match (check(header, &input), c.get("output"), c.get("error").and_then(J::as_str)) {
            (Ok(got), Some(want), _) if jsonl::eq_ordered(&got, want) => None,
            (Ok(got), Some(want), _) => {
                Some(format!("output differs: {}", jsonl::first_difference(&got, want, "$").unwrap_or_default()))
            }
            (Err(got), _, Some(want)) if got.to_string() == want => None,
            (Err(got), _, Some(want)) => Some(format!("error differs: ours {:?} vs vLLM {want:?}", got.to_string())),
            (Ok(got), None, Some(want)) => Some(format!("vLLM raised {want:?}, we returned {got}")),
            (Err(got), Some(_), _) => Some(format!("vLLM returned a value, we raised {:?}", got.to_string())),
            (_, None, None) => Some("case has neither output nor error".into()),
        };
        match problem {
            None => rep.passed += 1,
            Some(p) => rep.failures.push(crate::finding::Failure { id, line: line.no, problem: p }),
        }
    }
}
