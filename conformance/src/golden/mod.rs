//! Checkers for `mooncake-golden` files: outputs of vLLM's own planning, hashing and key functions.
//! Each checker maps a case's `input` to our output, compared with the recorded `output` or `error`.

use serde_json::Value as J;

use crate::finding::FileReport;
use crate::jsonl;

mod hash;
mod keys;
mod plan;

/// Our implementation of one vLLM function, by the `function` named in the file header: maps a case's
/// `input` to the `output` vLLM produced, or to the error text vLLM raised (`"AssertionError: ..."`).
pub(crate) type Checker = fn(header: &J, input: &J) -> Result<J, String>;

/// The checker for a header's `function`: planning (`plan`), hashing (`hash`) or keys (`keys`).
fn checker(function: &str) -> Option<Checker> {
    plan::checker(function).or_else(|| hash::checker(function)).or_else(|| keys::checker(function))
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
            (Err(got), _, Some(want)) if got == want => None,
            (Err(got), _, Some(want)) => Some(format!("error differs: ours {got:?} vs vLLM {want:?}")),
            (Ok(got), None, Some(want)) => Some(format!("vLLM raised {want:?}, we returned {got}")),
            (Err(got), Some(_), _) => Some(format!("vLLM returned a value, we raised {got:?}")),
            (_, None, None) => Some("case has neither output nor error".into()),
        };
        match problem {
            None => rep.passed += 1,
            Some(p) => rep.failures.push(crate::finding::Failure { id, line: line.no, problem: p }),
        }
    }
}
