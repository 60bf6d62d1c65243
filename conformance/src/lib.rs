//! Library side of `mooncake-conformance`: replaying recorded traces against a testee, the tap, the
//! compatibility matrix, spec revisions derived from vLLM sources, and reports. The `mooncake-conformance` binary
//! is a thin CLI over it; each subcommand has its module here. The offline model it builds on — the trace
//! format, a trace's conversation, the protocol checks, trace validation, vector-file checks, findings and the
//! msgspec oracle — is the `mooncake-trace` crate, which needs no runtime, socket or CLI.
//!
//! * [`run::run`] — every case of every trace against a testee speaking the control protocol
//!   (`conformance/TESTEE.md`, [`testee`]), with [`play`] playing the other side of each case;
//! * [`tap::Tap`] — records and checks live traffic between real peers; [`matrix`] — the compatibility matrix
//!   observed between the reference peers of every pair of revisions;
//! * [`extract`], [`hashcmd`], [`keycmd`] — spec revisions derived from vLLM sources, hashes and store keys;
//! * [`bundled`] — the traces, scenarios and expected failures compiled into the binary;
//!   [`report`] — the writers of what every check reports.
//!
//! ## Example
//!
//! Every bundled trace of vLLM 0.33.0 validates against its spec revision:
//!
//! ```
//! use mooncake_conformance::bundled::Data;
//! use mooncake_trace::validate::validate_input;
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
pub mod capture;
pub mod case_id;
mod counterpart;
pub mod crossver;
pub mod derive;
pub mod dissector;
pub mod expected;
pub mod extract;
pub mod extractcmd;
pub mod hashcmd;
pub mod keycmd;
pub mod listing;
pub mod load_error;
pub mod matrix;
pub mod outcome;
pub mod play;
pub mod probe;
pub mod report;
pub mod role;
pub mod run;
pub mod scenarios;
pub mod setup;
pub mod spec_changes;
pub mod spec_source;
pub mod tap;
pub mod testee;
