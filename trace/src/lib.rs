//! The offline model of `mooncake-conformance`: what reads and checks recorded traffic with no peer to talk to.
//!
//! * [`jsonl`] — line-oriented JSON files with bounded lines and errors that name the line;
//! * [`trace::Trace`] — the recorded-trace format (`conformance/traces/README.md`), parsed into typed events;
//! * [`conversation::Conversation`] — a trace read as exchanges, each payload decoded once;
//! * [`checks`] — the protocol checks with stable ids (`conformance/CHECKS.md`) over exchanges, heartbeats and
//!   the bootstrap HTTP log, shared by `validate` here and by the live runner and the tap in
//!   `mooncake-conformance`; [`canonical`] and [`reply`] — how findings show non-canonical bytes and replies;
//! * [`validate`] — every check of a recorded trace, push or pull family, into a [`finding::TraceReport`];
//! * [`vectors::check_file`] — a vector file (msgspec encodings with verdicts, or golden outputs of vLLM's
//!   planning, hashing and key functions) against the codec;
//! * [`finding`] — what a check found, and the report of a trace and of a vector file;
//! * [`oracle::Oracle`] — the msgspec oracle: a Python process decoding and re-encoding with real msgspec
//!   structs (the fuzz harness's differential target and the conformance tests use it).
//!
//! What it does not hold: nothing here opens a socket, runs an async runtime or parses a command line. Playing a
//! side against a testee, the testee control protocol, the tap, the compatibility matrix, report writers and the
//! CLI are `mooncake-conformance`'s, which depends on this crate; the fuzz harness and the benches depend on this
//! crate alone, so their builds carry no tokio, axum, clap or ZeroMQ. Its file I/O is reading the files it is
//! given, and [`oracle`] starts a Python process.
//!
//! ## Example
//!
//! A recorded trace, parsed and validated against the spec revision its header names:
//!
//! ```
//! use mooncake_trace::trace::Trace;
//! use mooncake_trace::validate::validate;
//! use mooncake_trace::walk;
//!
//! let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/traces/vllm-0.33.0");
//! # if !dir.exists() { return Ok(()); } // the packaged crate has no traces
//! let jsonl = |p: &std::path::Path| walk::has_extension(p, "jsonl");
//! let first = walk::files(&dir, walk::MAX_DEPTH, &jsonl)?.into_iter().next().expect("a trace");
//! let trace = Trace::load(&first)?;
//! let report = validate(trace);
//! assert_eq!(report.revision.as_deref(), Some("vllm-0.33.0"));
//! assert!(report.ok(), "{:?}", report.findings);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod canonical;
pub mod checks;
pub mod conversation;
pub mod finding;
mod golden;
pub mod jsonl;
pub mod oracle;
pub mod reply;
pub mod trace;
pub mod validate;
mod validate_pull;
pub mod vectors;
pub mod walk;
