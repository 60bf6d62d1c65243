//! How the conformance crate's source is built (issue 33), and the offline model's (`trace/`, mooncake-trace,
//! whose checks and findings the runner shares): one way to make a finding, a thin `main` over one file per
//! command, and an offline crate that stays free of the runtime, the sockets and the CLI. Each test names the
//! places that break its rule. (How long their functions may be is the wire crate's structure test, with the
//! workspace's one function scanner.)

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    use mooncake_trace::walk;
    out.extend(walk::files(dir, walk::MAX_DEPTH, &|p| walk::has_extension(p, "rs")).unwrap_or_else(|e| panic!("{e}")));
}

/// The offline model's crate (`trace/`), beside this one in the repository (and in the tarballs' workspace of
/// scripts/package-check.sh, where the crates are unpacked side by side under their versioned names).
fn offline_crate() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let beside = manifest.parent().expect("parent").join("trace");
    if beside.exists() {
        return beside;
    }
    let unpacked = manifest.parent().expect("parent").join(format!("mooncake-trace-{}", env!("CARGO_PKG_VERSION")));
    assert!(unpacked.exists(), "neither {} nor {} exists", beside.display(), unpacked.display());
    unpacked
}

/// Every source file of this crate and of the offline model's, with its text.
fn crate_sources() -> Vec<(PathBuf, String)> {
    let mut files = vec![];
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    let own = files.len();
    sources(&offline_crate().join("src"), &mut files);
    files.sort();
    assert!(own > 30 && files.len() > own + 10, "the crates' sources are found ({own} and {})", files.len() - own);
    files.into_iter().map(|f| (f.clone(), std::fs::read_to_string(&f).expect("source"))).collect()
}

#[test]
fn findings_are_made_in_one_place() {
    // `Finding::new(..).at(..).about(..)` (trace/src/finding.rs) is the one construction path.
    let mut literals = vec![];
    for (path, text) in crate_sources() {
        if path.ends_with("finding.rs") {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("Finding {") && !code.contains("-> Finding {") {
                literals.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(literals.is_empty(), "findings built by hand instead of with Finding::new:\n{}", literals.join("\n"));
}

#[test]
fn the_binary_is_a_thin_main_over_one_file_per_command() {
    // cargo's and ripgrep's shape: `main.rs` parses and dispatches, `cli/<command>.rs` holds each command's
    // `exec`.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let main = std::fs::read_to_string(root.join("main.rs")).expect("main.rs");
    assert!(main.lines().count() < 150, "conformance/src/main.rs is {} lines; keep it under 150", main.lines().count());
    let mut commands = vec![];
    for p in mooncake_trace::walk::entries(&root.join("cli")).unwrap_or_else(|e| panic!("{e}")) {
        let text = std::fs::read_to_string(&p).expect("cli file");
        if text.contains("fn exec(") {
            commands.push(p.file_name().expect("name").to_string_lossy().to_string());
        }
    }
    commands.sort();
    for c in ["diff.rs", "matrix.rs", "replay.rs", "run.rs", "tap.rs", "validate.rs", "vectors.rs"] {
        assert!(commands.iter().any(|x| x == c), "cli/{c} has no exec(): {commands:?}");
    }
}

#[test]
fn the_offline_model_needs_no_runtime_socket_or_cli() {
    // The fuzz harness and the benches build mooncake-trace alone: none of these may come back through it.
    const NOT_OFFLINE: &[&str] =
        &["tokio", "axum", "hyper", "mio", "clap", "zmq", "mooncake-io", "mooncake-conformance"];
    let manifest = std::fs::read_to_string(offline_crate().join("Cargo.toml")).expect("trace/Cargo.toml");
    let doc: toml::Table = toml::from_str(&manifest).expect("a manifest");
    let deps = doc.get("dependencies").and_then(|d| d.as_table()).expect("[dependencies]");
    assert!(deps.contains_key("mooncake-wire"), "the reader finds the dependencies: {deps:?}");
    for c in NOT_OFFLINE {
        assert!(!deps.contains_key(*c), "mooncake-trace depends on {c}");
    }
    // And the lockfiles of the fuzz and bench workspaces (refreshed with `cargo metadata`, committed) list none
    // of them: criterion, a dev-dependency of the benches, brings clap of its own, so only the others there.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repository");
    for (lock, allowed) in [("fuzz/Cargo.lock", &[][..]), ("bench/Cargo.lock", &["clap"][..])] {
        let Some(text) = std::fs::read_to_string(root.join(lock)).ok() else {
            let packaged = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml.orig").exists();
            assert!(packaged, "{lock} is missing from the repository");
            println!("SKIPPED: the {lock} check — {lock} is not beside the packaged crate");
            continue;
        };
        let names: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("name = \"")?.strip_suffix('"')).collect();
        assert!(names.contains(&"mooncake-trace"), "{lock} does not list mooncake-trace: {names:?}");
        for c in NOT_OFFLINE.iter().filter(|c| !allowed.contains(*c)) {
            assert!(!names.iter().any(|n| n == c || n.starts_with(&format!("{c}-"))), "{lock} lists {c}");
        }
    }
}
