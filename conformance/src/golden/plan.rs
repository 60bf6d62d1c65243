//! Checkers for vLLM's planning functions (plan/*.jsonl).

use super::Checker;

/// The checker for a fully qualified vLLM function name, if we implement it.
pub fn checker(function: &str) -> Option<Checker> {
    let _ = function;
    None
}
