//! Library side of `mooncake-conformance`: vector checking, trace model and validation, reports.

pub mod golden;
pub mod hashcmd;
pub mod jsonl;
pub mod keycmd;
pub mod oracle;
pub mod report;
pub mod trace;
pub mod validate;
pub mod vectors;
