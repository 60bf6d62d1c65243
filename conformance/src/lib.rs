//! Library side of `mooncake-conformance`: vector checking, trace model and validation, reports.

pub mod checks;
pub mod crossver;
pub mod golden;
pub mod hashcmd;
pub mod jsonl;
pub mod keycmd;
pub mod oracle;
pub mod play;
pub mod report;
pub mod run;
pub mod scenarios;
pub mod spec_source;
pub mod testee;
pub mod trace;
pub mod trace_model;
pub mod validate;
pub mod vectors;
