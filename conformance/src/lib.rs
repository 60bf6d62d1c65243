//! Library side of `mooncake-conformance`: vector checking, trace model and validation, reports.

pub mod golden;
pub mod jsonl;
pub mod oracle;
pub mod report;
pub mod spec_source;
pub mod trace;
pub mod validate;
pub mod vectors;
