//! The generated artefacts under `schema/` (JSON Schemas, wire tables) are committed; this test fails when
//! they are stale. `BLESS=1 cargo test --test generated` regenerates them. The compatibility matrix beside them
//! is made and checked by `mooncake-conformance matrix` (see `OTHER_GENERATORS`).

use std::path::{Path, PathBuf};

use mooncake_wire::generate::artefacts;
use mooncake_wire::spec::Spec;

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Files under `schema/` made by another generator, with the check that keeps each fresh: the compatibility
/// matrix is observed by running reference peers against each other (`mooncake-conformance matrix`), which
/// this crate cannot do; `scripts/test.sh` runs `matrix --check` on it.
const OTHER_GENERATORS: [(&str, &str); 1] =
    [("schema/push/compat-matrix.md", "mooncake-conformance matrix --check (scripts/test.sh)")];

#[test]
fn generated_files_are_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let want = artefacts(Spec::builtin());
    let bless = std::env::var_os("BLESS").is_some();
    let mut stale = vec![];
    for (rel, text) in &want {
        let p = root.join(rel);
        if std::fs::read_to_string(&p).ok().as_deref() != Some(text.as_str()) {
            if bless {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, text).unwrap();
            }
            stale.push(format!("stale or missing: {rel}"));
        }
    }
    // Generated directories hold nothing else (a removed revision must disappear too).
    for fam in &Spec::builtin().families {
        let mut have = vec![];
        walk(&root.join("schema").join(&fam.name), &mut have);
        for p in have {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            if !want.contains_key(&rel) && !OTHER_GENERATORS.iter().any(|(f, _)| *f == rel) {
                if bless {
                    std::fs::remove_file(&p).unwrap();
                }
                stale.push(format!("not generated any more: {rel}"));
            }
        }
    }
    if bless {
        println!("regenerated {} files", stale.len());
    } else {
        assert!(
            stale.is_empty(),
            "generated files are stale; run `BLESS=1 cargo test --test generated` and commit:\n{}",
            stale.join("\n")
        );
    }
}

/// Each file another generator owns exists (a stale entry here would let a stray file through).
#[test]
fn files_of_other_generators_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (f, by) in OTHER_GENERATORS {
        assert!(
            root.join(f).is_file(),
            "{f} (made by {by}) is missing; remove it from OTHER_GENERATORS or regenerate it"
        );
        assert!(
            !artefacts(Spec::builtin()).contains_key(f),
            "{f} is generated from the spec now; drop it from OTHER_GENERATORS"
        );
    }
}
