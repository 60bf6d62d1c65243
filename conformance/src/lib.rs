//! Library side of `mooncake-conformance`: vector checking, trace model and validation, replaying recorded
//! traces against a testee, the tap, the compatibility matrix, and reports. The `mooncake-conformance` binary
//! is a thin CLI over it; each subcommand has its module here.
//!
//! * [`vectors::check_file`] — checks a vector file (msgspec encodings with verdicts, or golden outputs of
//!   vLLM's planning, hashing and key functions) against the codec;
//! * [`trace::Trace`] and [`validate`] — the recorded-trace format and the checks of every event against the
//!   spec (`conformance/CHECKS.md`); [`conversation::Conversation`] reads a trace as exchanges;
//! * [`run::run`] — every case of every trace against a testee speaking the control protocol
//!   (`conformance/TESTEE.md`, [`testee`]), with [`play`] playing the other side of each case;
//! * [`tap::Tap`] — records and checks live traffic between real peers; [`matrix`] — the compatibility matrix
//!   observed between the reference peers of every pair of revisions;
//! * [`extract`], [`hashcmd`], [`keycmd`] — spec revisions derived from vLLM sources, hashes and store keys;
//! * [`bundled`] — the traces, scenarios and expected failures compiled into the binary;
//!   [`finding`] and [`report`] — what every check reports, and the writers.
//!
//! ## Example
//!
//! Every bundled trace of vLLM 0.33.0 validates against its spec revision:
//!
//! ```
//! use mooncake_conformance::bundled::Data;
//! use mooncake_conformance::validate::validate_input;
//!
//! let traces = Data::Embedded.traces("traces")?;
//! let of_0_33: Vec<_> = traces.iter().filter(|t| t.name().contains("vllm-0.33.0/")).collect();
//! assert!(!of_0_33.is_empty());
//! for t in of_0_33 {
//!     let report = validate_input(t);
//!     assert_eq!(report.revision.as_deref(), Some("vllm-0.33.0"));
//!     assert!(report.ok(), "{}: {:?}", report.path, report.findings);
//! }
//! # Ok::<(), mooncake_conformance::load_error::LoadError>(())
//! ```

pub mod bundled;
mod canonical;
pub mod capture;
pub mod case_id;
mod checks;
pub mod conversation;
mod counterpart;
pub mod crossver;
pub mod derive;
pub mod dissector;
pub mod expected;
pub mod extract;
pub mod extractcmd;
pub mod finding;
mod golden;
pub mod hashcmd;
pub mod jsonl;
pub mod keycmd;
pub mod listing;
pub mod load_error;
pub mod matrix;
pub mod oracle;
pub mod outcome;
pub mod play;
pub mod probe;
mod reply;
pub mod report;
pub mod role;
pub mod run;
pub mod scenarios;
pub mod setup;
pub mod spec_changes;
pub mod spec_source;
pub mod tap;
pub mod testee;
pub mod trace;
pub mod validate;
mod validate_pull;
pub mod vectors;
pub mod walk;
