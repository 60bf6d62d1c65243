//! Struct rules: matches the fields of a struct both revisions declare (by name; a removed and an added field
//! at the same index with the same type and default are a rename) and hands each difference to the field
//! rules ([`super::fields`]) and the option rules ([`super::options`]); also what replacing one message struct
//! by another does. Each rule states what a msgspec decoder of one revision does with the bytes of the other
//! (`spec/MSGSPEC.md` §2–§5):
//!
//! * map-encoded structs match keys by name, in any order; unknown keys are ignored unless
//!   `forbid_unknown_fields`; a missing required key fails, a missing defaulted key takes the reader's default;
//! * `omit_defaults` leaves out a defaulted field holding its default, so such a field is only *sent* when it
//!   holds something else;
//! * `array_like` structs match by position; trailing extra elements are ignored unless
//!   `forbid_unknown_fields`;
//! * the map header width comes from the declared field count (+1 for a tag): 16 or more → map16.

use super::ctx::{is_map, obj, trailing, Ctx, Side};
use super::model::{Bytes, Change, Effect, Kind, Probe, Verdict, Witness};
use super::types::{default_json, resolve, Gen};
use super::{fields, options};

/// Every row for one struct that exists in both revisions.
pub(crate) fn diff_struct(cx: &Ctx, out: &mut Vec<Change>) {
    let (so, sn) = (cx.old.def, cx.new.def);
    let (go, gn) = (Gen::new(cx.old.rev), Gen::new(cx.new.rev));

    if so.kind != sn.kind {
        out.push(cx.change(
            Kind::StructKind,
            &cx.prefix,
            format!("{:?} → {:?}", so.kind, sn.kind),
            (
                Effect::Compatible,
                "both encode as a map of field names; the option rows below say what else changes".into(),
            ),
            (Effect::Compatible, "both encode as a map of field names".into()),
            Bytes::Same,
        ));
    }
    if is_map(so) != is_map(sn) {
        let w = cx.witness(Probe::plain(obj(gn.baseline(sn))), Probe::plain(obj(go.baseline(so))), vec![]);
        out.push(
            cx.change(
                Kind::StructOption,
                &cx.prefix,
                format!("array_like: {} → {}", !is_map(so), !is_map(sn)),
                (Effect::always(), "one side writes an array, the other expects a map of field names".into()),
                (Effect::always(), "one side writes an array, the other expects a map of field names".into()),
                Bytes::Differ("map ↔ array".into()),
            )
            .note("field-level differences are moot while the encoding differs")
            .witness(w),
        );
        return;
    }
    let map = is_map(sn);

    // Match fields by name; a removed and an added field at the same index with the same type and default are
    // a rename.
    let added: Vec<usize> =
        (0..sn.fields.len()).filter(|&i| !so.fields.iter().any(|f| f.name == sn.fields[i].name)).collect();
    let removed: Vec<usize> =
        (0..so.fields.len()).filter(|&i| !sn.fields.iter().any(|f| f.name == so.fields[i].name)).collect();
    let mut renames: Vec<(usize, usize)> = vec![];
    for &i in &removed {
        let (a, b) = (&so.fields[i], sn.fields.get(i));
        if let Some(b) = b {
            if added.contains(&i)
                && resolve(cx.old.rev, &a.ty) == resolve(cx.new.rev, &b.ty)
                && a.required() == b.required()
                && default_json(a) == default_json(b)
            {
                renames.push((i, i));
            }
        }
    }
    let added: Vec<usize> = added.into_iter().filter(|j| !renames.iter().any(|r| r.1 == *j)).collect();
    let removed: Vec<usize> = removed.into_iter().filter(|i| !renames.iter().any(|r| r.0 == *i)).collect();
    let added_names: Vec<&str> = added.iter().map(|&j| sn.fields[j].name.as_str()).collect();
    let removed_names: Vec<&str> = removed.iter().map(|&i| so.fields[i].name.as_str()).collect();

    for &j in &added {
        fields::field_only_in(cx, fields::Which::New, j, map, trailing(sn, j, &added_names), out);
    }
    for &i in &removed {
        fields::field_only_in(cx, fields::Which::Old, i, map, trailing(so, i, &removed_names), out);
    }
    for &(i, j) in &renames {
        fields::field_renamed(cx, &so.fields[i], &sn.fields[j], map, out);
    }
    fields::reordered(cx, map, out);
    for fo in &so.fields {
        if let Some(fnew) = sn.fields.iter().find(|f| f.name == fo.name) {
            fields::field_type(cx, fo, fnew, out);
            fields::field_default(cx, fo, fnew, out);
        }
    }
    options::options(cx, map, out);
    if map {
        options::map_header(cx, out);
    }
}

/// The worst effect of `rows` per direction: the verdict of replacing one message struct by another.
pub(crate) fn aggregate(rows: &[Change], prefix: &str, dir: impl Fn(&Change) -> &Verdict) -> (Effect, String) {
    let worst = rows.iter().map(|c| dir(c).effect.rank()).max();
    match rows.iter().find(|c| Some(dir(c).effect.rank()) == worst) {
        None => (Effect::Compatible, "the two structs declare the same fields".into()),
        Some(c) => {
            let v = dir(c);
            let what = c
                .subject
                .strip_prefix(prefix)
                .and_then(|s| s.strip_prefix('.'))
                .map(|f| format!("`{f}`"))
                .unwrap_or_else(|| c.subject.clone());
            (v.effect.clone(), format!("{what} ({}): {}", c.kind.label(), v.reason))
        }
    }
}

/// Probes for cross-decoding two different structs: the baseline of each.
pub(crate) fn replacement_witness(old: Side, new: Side) -> Witness {
    let (go, gn) = (Gen::new(old.rev), Gen::new(new.rev));
    Witness {
        old_struct: old.name.to_string(),
        new_struct: new.name.to_string(),
        renames: vec![],
        old_reads_new: Probe::plain(obj(gn.baseline(new.def))),
        new_reads_old: Probe::plain(obj(go.baseline(old.def))),
    }
}
