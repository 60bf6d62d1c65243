//! The generated artefacts under `schema/` (JSON Schemas, wire tables) are committed; this test fails when
//! they are stale. `BLESS=1 cargo test --test generated` regenerates them.

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
            if !want.contains_key(&rel) {
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
        assert!(stale.is_empty(), "generated files are stale; run `BLESS=1 cargo test --test generated` and commit:\n{}", stale.join("\n"));
    }
}
