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
mod implementations;
mod independent;
mod interop;
mod matrix;
mod mutation;
mod plan_vectors;
mod plan_vectors_regen;
mod probe;
mod pull_run;
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

/// This crate's directory: its traces, vectors and scenarios, there in the repository and in the packaged crate
/// alike.
pub(crate) fn here() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `rel`, a path from the repository's root, when the tests run in the repository. Run from the packaged crate
/// (`scripts/package-check.sh`), which holds only this crate's own files, a test that needs the rest of the
/// repository (its Python test environment and scripts, `schema/`, `tools/`, `spec/`, its git history) prints a
/// counted `SKIPPED` line and gets `None`; a repository that lacks `rel` fails the test.
pub(crate) fn in_repository(rel: &str, what: &str) -> Option<std::path::PathBuf> {
    let p = here().join("..").join(rel);
    if p.exists() {
        return Some(p);
    }
    assert!(here().join("Cargo.toml.orig").exists(), "{rel} is missing from the repository");
    println!("SKIPPED: {what} — {rel} is not in the packaged crate");
    None
}

/// Whether the repository's Python test environment (`.venv` from `tests/oracle/requirements.txt`, with the
/// repository's Python scripts) is in reach: always in the repository, never from the packaged crate (a counted
/// skip, see [`in_repository`]).
pub(crate) fn python_env(what: &str) -> bool {
    in_repository("tests/oracle/requirements.txt", what).is_some()
}
