//! The conformance crate's integration tests, in one test binary (one link instead of one per file, and
//! the files' tests run side by side): each module is what was a file of its own under `tests/`; `common`
//! and `extract_src` are what several of them share. `cargo test -p mooncake-conformance --test suite
//! <module>::` runs one module's tests.

mod any_map_keys;
mod check_ids;
mod cli;
mod cli_edges;
mod cli_hash_keys;
mod common;
mod crossver_matrix;
mod derive;
mod diff_cli;
mod diff_msgspec;
mod differential_msgspec;
mod differential_python;
mod dissector;
mod extract;
mod extract_proof;
mod extract_review;
mod extract_src;
mod independent;
mod interop;
mod matrix;
mod mutation;
mod plan_vectors;
mod plan_vectors_regen;
mod probe;
mod pull_traces;
mod pull_vectors;
mod push_vectors_regen;
mod replay;
mod reports;
mod run;
mod store_lookup;
mod structure;
mod tap;
mod trace_schema;
mod typed_pull;
mod wire_fingerprint;
