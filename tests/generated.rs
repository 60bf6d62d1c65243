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
/// default suite may not have; `conformance/tests/suite/extract_proof.rs` checks it when they are cached.
const OTHER_GENERATORS: [(&str, &str); 2] = [
    ("schema/push/compat-matrix.md", "mooncake-conformance matrix --check (scripts/test.sh)"),
    (
        "schema/push/extract-proof.md",
        "mooncake-conformance extract --proof --check (conformance/tests/suite/extract_proof.rs)",
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

/// The generated module of each revision in a generated family file, by module name.
fn modules(text: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for part in text.split("\npub mod ").skip(1) {
        let name = part.split_whitespace().next().unwrap().to_string();
        let body = &part[..part.find("\n}\n").map_or(part.len(), |i| i + 3)];
        out.insert(name, body.to_string());
    }
    out
}

/// The generated code of one message in a module: from its `pub struct` to the next item of the module
/// (struct, impls, everything the generator writes for it).
fn message_section<'a>(module: &'a str, name: &str) -> Option<&'a str> {
    let start =
        module.find(&format!("pub struct {name}Of<S> {{")).or_else(|| module.find(&format!("pub struct {name} {{")))?;
    let rest = &module[start + 1..];
    let end = ["\n    pub struct ", "\n    /// Unchanged since", "\n    pub enum ", "\n    pub fn round_trip"]
        .iter()
        .filter_map(|m| rest.find(m))
        .min()
        .unwrap_or(rest.len());
    // Back up over the doc comment and attributes of the next item.
    let mut end = end;
    while let Some(line_start) = rest[..end].rfind('\n') {
        let line = rest[line_start + 1..end].trim_start();
        if !(line.starts_with("///") || line.starts_with("#[")) {
            break;
        }
        end = line_start;
    }
    Some(&module[start..start + 1 + end])
}

/// The built-in spec with `edit` applied to the file whose path ends with `file`.
fn edited_spec(file: &str, edit: impl Fn(&str) -> String) -> Spec {
    let mut hit = 0;
    let files = Spec::builtin_files().iter().map(|(p, t)| {
        let t = if p.ends_with(file) {
            hit += 1;
            edit(t)
        } else {
            t.to_string()
        };
        (p.to_string(), t)
    });
    let spec = Spec::from_files(files.collect::<Vec<_>>()).expect("the edited spec loads");
    assert_eq!(hit, 1, "one spec file ends with {file}");
    spec
}

/// Drops the one `[[edit]]` block of a revision file that contains every one of `needles`.
fn drop_edit(text: &str, needles: &[&str]) -> String {
    let mut blocks: Vec<&str> = text.split("\n[[edit]]\n").collect();
    let before = blocks.len();
    blocks.retain(|b| !needles.iter().all(|n| b.contains(n)));
    assert_eq!(blocks.len() + 1, before, "exactly one edit matches {needles:?}");
    blocks.join("\n[[edit]]\n")
}

/// Issue 16: removing a field from a revision in `spec/` and regenerating is the only edit the typed layer
/// needs. The generator runs on the built-in spec with one field removed, and the generated code of exactly
/// the revisions whose spec changed loses the field — struct, field list, required mask, decoder, encoder —
/// while every other module and everything outside the revision modules stays byte for byte the same.
/// (`the_hand_written_typed_layer_names_no_field` below is the other half: nothing else has to follow.)
fn removing_a_field(spec: &Spec, path: &str, revisions: &[&str], message: &str, field: &str) {
    use mooncake_wire::generate::typed_rs::{module_name, sources};
    let old = sources(Spec::builtin()).unwrap().remove(path).unwrap();
    let new = sources(spec).unwrap().remove(path).unwrap();
    let (old_m, new_m) = (modules(&old), modules(&new));
    assert_eq!(old_m.keys().collect::<Vec<_>>(), new_m.keys().collect::<Vec<_>>());
    assert!(old_m.len() >= 3, "{} modules: the split is broken", old_m.len());
    let changed: Vec<String> = revisions.iter().map(|r| module_name(r)).collect();
    for (name, text) in &old_m {
        if !changed.contains(name) {
            assert_eq!(text, &new_m[name], "{name} changed although its spec did not");
        }
    }
    for r in revisions {
        let m = module_name(r);
        let (o, n) = (message_section(&old_m[&m], message).unwrap(), message_section(&new_m[&m], message).unwrap());
        let def = &spec.revision(r).unwrap().structs[message];
        assert!(def.fields.iter().all(|f| f.name != field), "{r}: the edit did not remove {field}");
        for (what, text) in [("before", o), ("after", n)] {
            let names: Vec<String> = def.fields.iter().map(|f| format!("{:?}", f.name)).collect();
            let mask = def.fields.iter().enumerate().filter(|(_, f)| f.required()).fold(0u64, |a, (i, _)| a | 1 << i);
            // A needle not followed by more of an identifier (`self.block_size` is not `self.block_size_scale`).
            // Whitespace left out (the printer breaks long lists over lines, with a trailing comma).
            let squeezed = |t: &str| t.split_whitespace().collect::<String>().replace(",]", "]");
            let flat = squeezed(text);
            let has = |needle: &str| {
                let needle = squeezed(needle);
                let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
                flat.match_indices(&needle)
                    .any(|(i, _)| !needle.ends_with(ident) || !flat[i + needle.len()..].starts_with(ident))
            };
            let gone = [
                format!("pub {field}:"),
                format!("\"{field}\""),
                format!("v.{field} ="),
                format!("let {field} ="),
                format!("self.{field}"),
            ];
            if what == "before" {
                assert!(has(&gone[0]) && has(&gone[1]) && has(&gone[4]), "{r} {message}: the field was there before");
            } else {
                for g in &gone {
                    assert!(!has(g), "{r} {message}: `{g}` is still generated:\n{text}");
                }
                assert!(
                    has(&format!("FIELDS: [&'static str; {}] = [{}];", names.len(), names.join(", "))),
                    "{r} {message}: the field list is not the edited spec's:\n{text}"
                );
                assert!(
                    has(&format!("REQUIRED: u64 = {mask:#b};")),
                    "{r} {message}: the required mask is not {mask:#b}"
                );
            }
        }
    }
    // Nothing outside the revision modules (enums, tags, the revision table) changed either.
    let outside = |t: &str| t.split("\npub mod ").next().unwrap().to_string() + &t[t.rfind("\n}\n").unwrap()..];
    assert_eq!(outside(&old), outside(&new));
}

#[test]
fn removing_a_field_from_the_spec_is_the_only_edit_the_typed_layer_needs() {
    use mooncake_wire::generate::typed_rs::{PULL_PATH, PUSH_PATH};
    // An optional field added by an edit: 0.33.0's reply without `layout_id`.
    let spec = edited_spec("push/vllm-0.33.0.toml", |t| {
        drop_edit(t, &["at = \"structs.MooncakeXferResponse.fields\"", "name = \"layout_id\""])
    });
    removing_a_field(&spec, PUSH_PATH, &["vllm-0.33.0"], "MooncakeXferResponse", "layout_id");
    // A required field added by an edit: vllm-ascend 0.23.0.post1's metadata without `block_size` (the
    // required mask shrinks and shifts).
    let spec = edited_spec("pull/vllm-ascend-0.23.0.post1.toml", |t| {
        drop_edit(t, &["at = \"structs.MooncakeAgentMetadata.fields\"", "name = \"block_size\""])
    });
    removing_a_field(&spec, PULL_PATH, &["vllm-ascend-0.23.0.post1"], "MooncakeAgentMetadata", "block_size");
    // A field of a full revision file: vllm-ascend 0.18.0's `local_ip`, which 0.23.0.post1 inherits — both
    // revisions' structs lose it, main@'s (a full file of its own) keeps its own `local_ip`.
    let spec = edited_spec("pull/vllm-ascend-0.18.0.toml", |t| {
        let line = t.lines().find(|l| l.contains("{ name = \"local_ip\"")).expect("the local_ip line");
        t.replace(&format!("{line}\n"), "")
    });
    removing_a_field(
        &spec,
        PULL_PATH,
        &["vllm-ascend-0.18.0", "vllm-ascend-0.23.0.post1"],
        "MooncakeAgentMetadata",
        "local_ip",
    );
}

/// The other half of the claim: the hand-written typed layer — everything under `src/typed/` except the
/// generated files, and the spec-driven conversion `src/codec/convert.rs` — names no field of any message of
/// any revision (as an identifier or a string in code), so no hand edit follows a field's removal. Comments
/// may name fields; code may not.
#[test]
fn the_hand_written_typed_layer_names_no_field() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut fields = std::collections::BTreeSet::new();
    for fam in &Spec::builtin().families {
        for rev in &fam.revisions {
            for s in rev.structs.values() {
                fields.extend(s.fields.iter().map(|f| f.name.clone()));
            }
        }
    }
    assert!(fields.contains("remote_tp_rank") && fields.contains("kv_group2layeridx"), "{fields:?}");
    let mut files = vec![];
    walk(&root.join("src/typed"), &mut files);
    files.retain(|p| !p.starts_with(root.join("src/typed/generated")));
    files.push(root.join("src/codec/convert.rs"));
    for must in ["src/typed/de.rs", "src/typed/mod.rs", "src/typed/blocks.rs", "src/codec/convert.rs"] {
        assert!(files.contains(&root.join(must)), "{must} is not scanned: {files:?}");
    }
    let mut hits = vec![];
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (no, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            let words = code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            for w in words.filter(|w| fields.contains(*w)) {
                hits.push(format!("{}:{}: `{w}`", f.strip_prefix(root).unwrap().display(), no + 1));
            }
        }
    }
    assert!(hits.is_empty(), "the hand-written typed layer names message fields:\n{}", hits.join("\n"));
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

/// A spec the generator has no Rust for is an error naming the revision, struct and field (nothing is written):
/// an optional that is not `optional[str]` or `optional[list[str]]`, a dict with list keys, a `str` field whose
/// default is not `""`.
#[test]
fn a_type_the_generator_cannot_write_is_an_error_naming_the_field() {
    use mooncake_wire::generate::typed_rs::sources;
    let file = "push/vllm-0.16.0..0.18.1.toml";
    for (from, to, why) in [
        (
            r#"{ name = "err_msg", type = "optional[str]""#,
            r#"{ name = "err_msg", type = "optional[int]""#,
            "MooncakeXferResponse.err_msg: unsupported type optional[int]",
        ),
        (
            r#"{ name = "remote_port", type = "int""#,
            r#"{ name = "remote_port", type = "dict[list[int], int]""#,
            "MooncakeXferMetadata.remote_port: unsupported type dict[list[int], int] (dict keys are int or str)",
        ),
        (
            r#"{ name = "err_msg", type = "optional[str]", default = "None""#,
            r#"{ name = "err_msg", type = "str", default = "'x'""#,
            "MooncakeXferResponse.err_msg: unsupported default",
        ),
    ] {
        let spec = edited_spec(file, |t| {
            assert!(t.contains(from), "{from} is in {file}");
            t.replace(from, to)
        });
        let err = sources(&spec).expect_err(to).to_string();
        assert!(err.starts_with("vllm-0.16.0..0.18.1: ") && err.contains(why), "{to}: {err}");
    }
}

/// What `generated_files_are_fresh` compares follows the spec into the typed layer: with one field's doc edited
/// in a push revision, the generated push file (the field's doc comment in every revision that inherits it)
/// differs from the committed one, while the pull family's file does not.
#[test]
fn an_edited_spec_leaves_the_committed_typed_layer_stale() {
    use mooncake_wire::generate::typed_rs::{PULL_PATH, PUSH_PATH};
    let (from, to) = (r#"doc = "Free-text reason.""#, r#"doc = "Free-text reason, edited.""#);
    let spec = edited_spec("push/vllm-0.16.0..0.18.1.toml", |t| {
        assert!(t.contains(from), "{from} is in the file");
        t.replace(from, to)
    });
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let committed = |rel: &str| std::fs::read_to_string(root.join(rel)).expect("a committed generated file");
    let want = artefacts(&spec);
    assert_ne!(want[PUSH_PATH], committed(PUSH_PATH), "the push file does not follow the edit");
    assert!(want[PUSH_PATH].contains("/// Free-text reason, edited. Default `None`."), "the edited doc is written");
    assert_eq!(want[PULL_PATH], committed(PULL_PATH), "the pull file changed with a push edit");
}
