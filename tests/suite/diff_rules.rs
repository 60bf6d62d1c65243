//! The diff classifier on the synthetic revision pair `conformance/tests/data/diff-rules/` (one rule per
//! struct): every rule fires, and every verdict agrees with what the codecs of both revisions do with its
//! witness messages. `conformance/tests/suite/diff_msgspec.rs` checks the same witnesses against msgspec itself.

use std::path::Path;

use mooncake_wire::diff::{diff, render, Effect, Kind, Report};
use mooncake_wire::spec::Spec;

/// The synthetic pair's directory (`None` from the packaged crate, where the conformance crate's data is absent).
fn rules_dir() -> Option<std::path::PathBuf> {
    crate::in_repository("conformance/tests/data/diff-rules", "the diff rules on the synthetic revision pair")
}

fn rules_report(dir: &Path) -> Report {
    let spec = Spec::load_dir(dir).unwrap();
    let f = spec.family("diff-rules").unwrap();
    diff(f.revision("rules-old").unwrap(), f.revision("rules-new").unwrap())
}

#[test]
fn every_rule_fires_and_is_confirmed_by_the_codecs() {
    let Some(spec_dir) = rules_dir() else { return };
    let r = rules_report(&spec_dir);
    println!("{}", render::markdown(&r));
    for c in &r.changes {
        assert_eq!(c.confirmed, Some(true), "{}: {}", c.subject, c.notes.join("; "));
    }
    for k in [
        Kind::FieldAdded,
        Kind::FieldRemoved,
        Kind::FieldRenamed,
        Kind::FieldsReordered,
        Kind::FieldType,
        Kind::TupleArity,
        Kind::FieldDefault,
        Kind::FieldRequired,
        Kind::StructOption,
        Kind::MapHeader,
        Kind::EnumValueAdded,
        Kind::EnumValueRemoved,
        Kind::EnumValueChanged,
        Kind::EnumMemberRenamed,
    ] {
        assert!(r.changes.iter().any(|c| c.kind == k), "no {k:?} row");
    }
    let effects = |c: &mooncake_wire::diff::Change| [c.old_reads_new.effect.clone(), c.new_reads_old.effect.clone()];
    assert!(r.changes.iter().flat_map(effects).any(|e| e == Effect::Compatible));
    assert!(r.changes.iter().flat_map(effects).any(|e| matches!(e, Effect::BreaksWhenSent { .. })));
    assert!(r.changes.iter().flat_map(effects).any(|e| matches!(e, Effect::Breaks { except: None })));
    assert!(r.changes.iter().flat_map(effects).any(|e| matches!(e, Effect::Breaks { except: Some(_) })));
    // One row per struct that changed, at least (every struct of old.toml changes).
    let spec = Spec::load_dir(&spec_dir).unwrap();
    let old = spec.family("diff-rules").unwrap().revision("rules-old").unwrap();
    for name in old.structs.keys().filter(|n| !n.starts_with("Uses")) {
        assert!(
            r.changes.iter().any(|c| c.subject.starts_with(&format!("{name}."))
                || c.subject.starts_with(&format!("{name} "))
                || &c.subject == name),
            "no row for {name}"
        );
    }
}
