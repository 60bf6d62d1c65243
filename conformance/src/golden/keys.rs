//! Checkers for vLLM's store key functions (keys/*.jsonl).

use super::Checker;

/// The checker for a fully qualified vLLM function name, if we implement it.
pub fn checker(function: &str) -> Option<Checker> {
    let _ = function;
    None
}
