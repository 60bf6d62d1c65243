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
/// The extraction proof is made from released wheels (`mooncake-conformance extract --proof`), which the
/// default suite may not have; `conformance/tests/extract_proof.rs` checks it when they are cached.
const OTHER_GENERATORS: [(&str, &str); 2] = [
    ("schema/push/compat-matrix.md", "mooncake-conformance matrix --check (scripts/test.sh)"),
    (
        "schema/push/extract-proof.md",
        "mooncake-conformance extract --proof --check (conformance/tests/extract_proof.rs)",
    ),
];

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

/// The generated module of each revision in `src/typed/generated/push.rs`, by module name.
fn modules(text: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for part in text.split("\npub mod ").skip(1) {
        let name = part.split_whitespace().next().unwrap().to_string();
        let body = &part[..part.find("\n}\n").map_or(part.len(), |i| i + 3)];
        out.insert(name, body.to_string());
    }
    out
}

/// The text of `pub struct NAME… { … }` in a module.
fn struct_text<'a>(module: &'a str, name: &str) -> Option<&'a str> {
    let start = module.find(&format!("pub struct {name}<S> {{"))?;
    let end = module[start..].find("\n    }\n")? + start;
    Some(&module[start..end])
}

/// Issue 16: removing a field from a revision in `spec/` and regenerating is the only edit the typed layer
/// needs. The spec is edited in memory — 0.33.0 without the edit that adds `layout_id` to the reply — and the
/// generator run on it: the reply of 0.33.0 loses the field (struct, field list, encoder), and nothing else of
/// the generated layer changes.
#[test]
fn removing_a_field_from_the_spec_is_the_only_edit_the_typed_layer_needs() {
    use mooncake_wire::generate::typed_rs::{sources, PUSH_PATH};
    let drop_edit = |text: &str| -> String {
        let mut blocks: Vec<&str> = text.split("\n[[edit]]\n").collect();
        let before = blocks.len();
        blocks.retain(|b| {
            !(b.contains("at = \"structs.MooncakeXferResponse.fields\"") && b.contains("name = \"layout_id\""))
        });
        assert_eq!(blocks.len() + 1, before, "exactly one edit adds layout_id to the 0.33.0 reply");
        blocks.join("\n[[edit]]\n")
    };
    let files = Spec::builtin_files().iter().map(|(p, t)| {
        let t = if p.ends_with("push/vllm-0.33.0.toml") { drop_edit(t) } else { t.to_string() };
        (p.to_string(), t)
    });
    let edited = Spec::from_files(files).expect("the edited spec loads");
    let old = sources(Spec::builtin()).unwrap().remove(PUSH_PATH).unwrap();
    let new = sources(&edited).unwrap().remove(PUSH_PATH).unwrap();
    assert_ne!(old, new);
    let (old_m, new_m) = (modules(&old), modules(&new));
    assert_eq!(old_m.keys().collect::<Vec<_>>(), new_m.keys().collect::<Vec<_>>());
    assert!(old_m.len() >= 12, "{} modules: the split is broken", old_m.len());
    for (name, text) in &old_m {
        if name != "vllm_0_33_0" {
            assert_eq!(text, &new_m[name], "{name} changed although its spec did not");
        }
    }
    let (o, n) = (&old_m["vllm_0_33_0"], &new_m["vllm_0_33_0"]);
    let (o_reply, n_reply) =
        (struct_text(o, "MooncakeXferResponseOf").unwrap(), struct_text(n, "MooncakeXferResponseOf").unwrap());
    assert!(o_reply.contains("pub layout_id: WireInt"));
    assert!(!n_reply.contains("layout_id"), "the reply struct still has layout_id:\n{n_reply}");
    assert!(o.contains(r#"["status", "ok_reqs", "err_reqs", "err_msg", "layout_id"]"#));
    assert!(n.contains(r#"["status", "ok_reqs", "err_reqs", "err_msg"]"#));
    // The pull of the same revision keeps its layout_id.
    assert_eq!(struct_text(o, "MooncakeXferMetadataOf"), struct_text(n, "MooncakeXferMetadataOf"));
    // Nothing outside the revision modules (the status newtype, the revision table) changed either.
    let outside = |t: &str| t.split("\npub mod ").next().unwrap().to_string() + &t[t.rfind("\n}\n").unwrap()..];
    assert_eq!(outside(&old), outside(&new));
}

/// The generated directory holds only what the generator writes and its hand-written `mod.rs`.
#[test]
fn the_generated_typed_directory_holds_nothing_else() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let want = artefacts(Spec::builtin());
    let mut have = vec![];
    walk(&root.join("src/typed/generated"), &mut have);
    for p in have {
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        assert!(rel == "src/typed/generated/mod.rs" || want.contains_key(&rel), "{rel} is not generated any more");
    }
}
