//! Library side of `mooncake-conformance`: vector checking, trace model and validation, reports.

pub mod bundled;
pub mod checks;
pub mod crossver;
pub mod derive;
pub mod extract;
pub mod extractcmd;
pub mod finding;
pub mod golden;
pub mod hashcmd;
pub mod jsonl;
pub mod keycmd;
pub mod matrix;
pub mod oracle;
pub mod outcome;
pub mod play;
pub mod report;
pub mod run;
pub mod scenarios;
pub mod spec_source;
pub mod tap;
pub mod testee;
pub mod trace;
pub mod trace_model;
pub mod validate;
pub mod validate_pull;
pub mod vectors;
