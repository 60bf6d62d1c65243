//! The protocol cores are sans-IO: no sockets, runtime, clock, thread, file or randomness inside the
//! `mooncake-wire` library's `proto` and `plan` modules, and no I/O crate among the library's dependencies.
//! Only `io/` (mooncake-io) and `reference-impl/` touch those.

use std::path::Path;

const FORBIDDEN_IN_SOURCE: &[&str] = &[
    "std::net",
    "tokio",
    "zmq",
    "Instant::now",
    "SystemTime",
    "std::thread",
    "std::fs",
    "std::process",
    "rand::",
    "getrandom",
    "std::env",
];
const FORBIDDEN_CRATES: &[&str] =
    &["tokio", "zmq", "zeromq", "axum", "hyper", "mio", "async-std", "rand", "getrandom", "reqwest", "socket2"];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().and_then(|x| x.to_str()) == Some("rs") {
            out.push(p);
        }
    }
}

#[test]
fn protocol_cores_do_no_io() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![];
    for m in ["src/proto", "src/plan"] {
        if root.join(m).exists() {
            sources(&root.join(m), &mut files);
        }
    }
    assert!(files.len() >= 5, "the core modules exist");
    let mut hits = vec![];
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for pat in FORBIDDEN_IN_SOURCE {
                if code.contains(pat) {
                    hits.push(format!("{}:{}: `{pat}` in {}", f.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(hits.is_empty(), "I/O inside the sans-IO cores:\n{}", hits.join("\n"));
}

#[test]
fn the_library_depends_on_no_io_crate() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let doc: toml::Table = toml::from_str(&manifest).unwrap();
    let deps = doc.get("dependencies").and_then(|d| d.as_table()).cloned().unwrap_or_default();
    for c in FORBIDDEN_CRATES {
        assert!(!deps.contains_key(*c), "mooncake-wire must not depend on {c}");
    }
}
