//! The wire crate's integration tests, in one test binary: each module is what was a file of its own under
//! `tests/`. Two stay binaries of their own: `generated` (the freshness check of the generated code, named
//! by every generated file's header) and `hardening` (it installs a counting global allocator). `cargo test
//! -p mooncake-wire --test suite <module>::` runs one module's tests.

mod codec_properties;
mod decoder_core_regressions;
mod diff_rules;
mod module_cycles;
mod plan_sender;
mod proto_gen1;
mod proto_pair;
mod proto_pull;
mod protocol_doc;
mod public_api;
mod sans_io_boundary;
mod store_keys;
mod structure;
mod typed_contract;
mod via_newest;

/// A path of this repository outside the wire crate's package (another crate's sources or data). From the packaged
/// crate (`scripts/package-check.sh` runs its tests from the tarball) it is absent: `None`, after a counted
/// `SKIPPED` line. In the repository a missing path is a failure.
pub(crate) fn in_repository(rel: &str, what: &str) -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let p = root.join(rel);
    if p.exists() {
        return Some(p);
    }
    assert!(root.join("Cargo.toml.orig").exists(), "{rel} is missing from the repository");
    println!("SKIPPED: {what} — {rel} is not in the packaged crate");
    None
}
