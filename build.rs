//! Embeds every file under `spec/` into the library, so `Spec::builtin()` needs no files at run time.
use std::{env, fs, path::Path};

fn collect(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = fs::read_dir(dir).expect("read spec dir").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, root, out);
        } else if path.extension().and_then(|e| e.to_str()) == Some("toml") {
            let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.push((rel, path.canonicalize().unwrap().to_string_lossy().into_owned()));
        }
    }
}

fn main() {
    // Read when the script runs, not when it is compiled: `cargo install --path <copy>` (scripts/install-check.sh)
    // may compile this script into the same artifact, and a path baked in would point at the deleted copy.
    let root = Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("spec");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    for (_, abs) in &files {
        println!("cargo:rerun-if-changed={abs}");
    }
    let mut code = String::from("pub(crate) static FILES: &[(&str, &str)] = &[\n");
    for (rel, abs) in &files {
        code.push_str(&format!("    ({rel:?}, include_str!({abs:?})),\n"));
    }
    code.push_str("];\n");
    fs::write(Path::new(&env::var("OUT_DIR").unwrap()).join("embedded_spec.rs"), code).unwrap();
}
