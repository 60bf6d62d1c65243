//! The fuzz targets of mooncake-wire, as plain functions: each takes the fuzzer's bytes, runs one decoder or
//! state machine, and asserts its round-trip and state invariants (a violated invariant panics, which the
//! fuzzer reports as a crash). Two drivers share them:
//!
//! * `fuzz/fuzz_targets/*.rs` — thin cargo-fuzz (libFuzzer) wrappers, for coverage-guided runs;
//! * `fuzz/harness/tests/suite/smoke.rs` — the normal test suite, over the seed corpora plus generated inputs.
//!
//! [`seeds`] builds the seed corpora from `conformance/vectors` and `conformance/traces`; [`mutate`] is a
//! libFuzzer-style mutator (byte-level and MessagePack-aware) used by the smoke runs and by [`diff`], the
//! differential fuzzer against msgspec. `FUZZING.md` in the repository root documents how to run everything.

pub mod catalog;
pub mod diff;
pub mod mutate;
pub mod seeds;
pub mod targets;
pub mod valeq;
