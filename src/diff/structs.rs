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

use serde_json::{Map, Value as J};

use super::model::{Area, Bytes, Change, Effect, Kind, Probe, Verdict, Witness};
use super::types::{default_json, resolve, Gen};
use super::{fields, options};
use crate::spec::{FieldDef, Revision, StructDef, StructKind, Tag};

/// One revision's definition of a struct.
#[derive(Clone, Copy)]
pub(crate) struct Side<'a> {
    pub(crate) rev: &'a Revision,
    pub(crate) name: &'a str,
    pub(crate) def: &'a StructDef,
}

/// Who writes and who reads the struct, in each direction (`new D → old P`, `old D → new P`).
#[derive(Clone, Debug)]
pub(crate) struct Peers {
    pub(crate) old_reads_new: String,
    pub(crate) new_reads_old: String,
}

impl Peers {
    /// Peers of a message sent from role `from` to role `to`.
    pub(crate) fn of(from: &str, to: &str) -> Peers {
        let (f, t) = (abbr(from), abbr(to));
        Peers { old_reads_new: format!("new {f} → old {t}"), new_reads_old: format!("old {f} → new {t}") }
    }
}

/// `decoder` → `D`, `prefiller` → `P`.
pub(crate) fn abbr(role: &str) -> &str {
    match role {
        "decoder" => "D",
        "prefiller" => "P",
        other => other,
    }
}

pub(crate) struct Ctx<'a> {
    pub(crate) old: Side<'a>,
    pub(crate) new: Side<'a>,
    pub(crate) peers: Peers,
    /// Build witnesses (MessagePack structs of the revision's `structs`; not for JSON bodies).
    pub(crate) witnesses: bool,
    pub(crate) area: Area,
    /// How rows name the struct: `MooncakeXferMetadata`, `bootstrap.RegisterWorkerPayload`.
    pub(crate) prefix: String,
}

pub(super) fn is_map(s: &StructDef) -> bool {
    !(s.kind == StructKind::MsgspecStruct && s.options.array_like)
}

pub(super) fn forbids(s: &StructDef) -> bool {
    s.kind == StructKind::MsgspecStruct && s.options.forbid_unknown_fields
}

/// msgspec's tag: (tag field, tag value as Python repr).
pub(super) fn tag(name: &str, s: &StructDef) -> Option<(String, String)> {
    if s.kind != StructKind::MsgspecStruct {
        return None;
    }
    let v = match s.options.tag.as_ref()? {
        Tag::Bool(false) => return None,
        Tag::Bool(true) => format!("'{name}'"),
        Tag::Str(t) => format!("'{t}'"),
        Tag::Int(i) => i.to_string(),
    };
    Some((s.options.tag_field.clone().unwrap_or_else(|| "type".into()), v))
}

/// The MessagePack key of a field.
pub(super) fn wire_name(s: &StructDef, f: &FieldDef) -> String {
    match (&s.kind, s.options.rename.as_deref()) {
        (StructKind::MsgspecStruct, Some(mode)) => {
            crate::codec::rename(&f.name, mode).unwrap_or_else(|_| f.name.clone())
        }
        _ => f.name.clone(),
    }
}

pub(super) fn declared(name: &str, s: &StructDef) -> usize {
    s.fields.len() + tag(name, s).is_some() as usize
}

/// `block_lens: list[int]`, `layout_id: int = 0`.
pub(crate) fn field_desc(f: &FieldDef) -> String {
    if f.required() {
        format!("`{}: {}`", f.name, f.ty.python())
    } else {
        format!("`{}: {} = {}`", f.name, f.ty.python(), f.default_display())
    }
}

pub(super) fn position(s: &StructDef, i: usize) -> String {
    match s.fields.get(i + 1) {
        Some(next) => format!("at {} of {}, before `{}`", i + 1, s.fields.len(), next.name),
        None => format!("at {} of {}", i + 1, s.fields.len()),
    }
}

pub(super) fn obj(m: Map<String, J>) -> J {
    J::Object(m)
}

pub(super) fn with(mut m: Map<String, J>, k: &str, v: J) -> J {
    m.insert(k.to_string(), v);
    J::Object(m)
}

/// Whether every field after index `i` is also in `only` (the field is in the trailing block of `only`).
pub(super) fn trailing(s: &StructDef, i: usize, only: &[&str]) -> bool {
    s.fields[i + 1..].iter().all(|f| only.contains(&f.name.as_str()))
}

impl Ctx<'_> {
    pub(super) fn change(
        &self,
        kind: Kind,
        subject: &str,
        what: String,
        orn: (Effect, String),
        nro: (Effect, String),
        bytes: Bytes,
    ) -> Change {
        Change::new(
            self.area,
            kind,
            subject,
            what,
            Verdict::new(orn.0, &self.peers.old_reads_new, orn.1),
            Verdict::new(nro.0, &self.peers.new_reads_old, nro.1),
            bytes,
        )
    }

    pub(super) fn witness(
        &self,
        orn: Probe,
        nro: Probe,
        renames: Vec<(String, String)>,
    ) -> Option<super::model::Witness> {
        self.witnesses.then(|| Witness {
            old_struct: self.old.name.to_string(),
            new_struct: self.new.name.to_string(),
            renames,
            old_reads_new: orn,
            new_reads_old: nro,
        })
    }

    pub(super) fn subject(&self, field: &str) -> String {
        format!("{}.{field}", self.prefix)
    }
}

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
