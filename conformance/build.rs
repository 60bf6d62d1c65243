//! Embeds the bundled ground truth — the recorded traces (`traces/`, `traces-pull/`), `scenarios.toml` and
//! `expected-failures.toml` — into the binary, so an installed `mooncake-conformance` (`cargo install --path
//! conformance`) runs the same cases from any directory, without the source tree it was built from.
//! The vector files (28 MB) are not embedded: `vectors` takes them as arguments.
use std::{env, fs, path::Path};

fn collect(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = fs::read_dir(dir).expect("read data dir").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, root, out);
        } else if path.extension().and_then(|e| e.to_str()) == Some("jsonl") {
            let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.push((rel, path.canonicalize().unwrap().to_string_lossy().into_owned()));
        }
    }
}

fn main() {
    // Read when the script runs, not when it is compiled (see the wire crate's build.rs).
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest_dir);
    let mut files = Vec::new();
    for dir in ["traces", "traces-pull"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
        collect(&root.join(dir), root, &mut files);
    }
    for f in ["scenarios.toml", "expected-failures.toml"] {
        let p = root.join(f);
        println!("cargo:rerun-if-changed={}", p.display());
        files.push((f.to_string(), p.canonicalize().unwrap().to_string_lossy().into_owned()));
    }
    let mut code = String::from("/// (path relative to `conformance/`, contents) of every bundled data file.\npub(crate) static FILES: &[(&str, &str)] = &[\n");
    for (rel, abs) in &files {
        code.push_str(&format!("    ({rel:?}, include_str!({abs:?})),\n"));
    }
    code.push_str("];\n");
    fs::write(Path::new(&env::var("OUT_DIR").unwrap()).join("bundled.rs"), code).unwrap();
}
