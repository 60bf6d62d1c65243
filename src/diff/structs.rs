//! Struct and field rules: fields added, removed, renamed, reordered; type, default and required-ness
//! changes; struct options; the map header width. Each rule states what a msgspec decoder of one revision does
//! with the bytes of the other (`/work/shared/reference/msgspec-encoding.md` §2–§5):
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
use super::types::{always_written, default_json, incompat, omits, resolve, same_encoding, Gen, Incompat, Typed};
use crate::spec::{FieldDef, Revision, StructDef, StructKind, Tag};

/// One revision's definition of a struct.
#[derive(Clone, Copy)]
pub struct Side<'a> {
    pub rev: &'a Revision,
    pub name: &'a str,
    pub def: &'a StructDef,
}

/// Who writes and who reads the struct, in each direction (`new D → old P`, `old D → new P`).
#[derive(Clone, Debug)]
pub struct Peers {
    pub old_reads_new: String,
    pub new_reads_old: String,
}

impl Peers {
    /// Peers of a message sent from role `from` to role `to`.
    pub fn of(from: &str, to: &str) -> Peers {
        let (f, t) = (abbr(from), abbr(to));
        Peers { old_reads_new: format!("new {f} → old {t}"), new_reads_old: format!("old {f} → new {t}") }
    }
}

/// `decoder` → `D`, `prefiller` → `P`.
pub fn abbr(role: &str) -> &str {
    match role {
        "decoder" => "D",
        "prefiller" => "P",
        other => other,
    }
}

pub struct Ctx<'a> {
    pub old: Side<'a>,
    pub new: Side<'a>,
    pub peers: Peers,
    /// Build witnesses (MessagePack structs of the revision's `structs`; not for JSON bodies).
    pub witnesses: bool,
    pub area: Area,
    /// How rows name the struct: `MooncakeXferMetadata`, `bootstrap.RegisterWorkerPayload`.
    pub prefix: String,
}

fn is_map(s: &StructDef) -> bool {
    !(s.kind == StructKind::MsgspecStruct && s.options.array_like)
}

fn forbids(s: &StructDef) -> bool {
    s.kind == StructKind::MsgspecStruct && s.options.forbid_unknown_fields
}

/// msgspec's tag: (tag field, tag value as Python repr).
fn tag(name: &str, s: &StructDef) -> Option<(String, String)> {
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
fn wire_name(s: &StructDef, f: &FieldDef) -> String {
    match (&s.kind, s.options.rename.as_deref()) {
        (StructKind::MsgspecStruct, Some(mode)) => crate::codec::rename(&f.name, mode).unwrap_or_else(|_| f.name.clone()),
        _ => f.name.clone(),
    }
}

fn declared(name: &str, s: &StructDef) -> usize {
    s.fields.len() + tag(name, s).is_some() as usize
}

/// `block_lens: list[int]`, `layout_id: int = 0`.
pub fn field_desc(f: &FieldDef) -> String {
    if f.required() {
        format!("`{}: {}`", f.name, f.ty.python())
    } else {
        format!("`{}: {} = {}`", f.name, f.ty.python(), f.default_display())
    }
}

fn position(s: &StructDef, i: usize) -> String {
    match s.fields.get(i + 1) {
        Some(next) => format!("at {} of {}, before `{}`", i + 1, s.fields.len(), next.name),
        None => format!("at {} of {}", i + 1, s.fields.len()),
    }
}

fn obj(m: Map<String, J>) -> J {
    J::Object(m)
}

fn with(mut m: Map<String, J>, k: &str, v: J) -> J {
    m.insert(k.to_string(), v);
    J::Object(m)
}

/// Whether every field after index `i` is also in `only` (the field is in the trailing block of `only`).
fn trailing(s: &StructDef, i: usize, only: &[&str]) -> bool {
    s.fields[i + 1..].iter().all(|f| only.contains(&f.name.as_str()))
}

impl Ctx<'_> {
    fn change(&self, kind: Kind, subject: &str, what: String, orn: (Effect, String), nro: (Effect, String), bytes: Bytes) -> Change {
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

    fn witness(&self, orn: Probe, nro: Probe, renames: Vec<(String, String)>) -> Option<super::model::Witness> {
        self.witnesses.then(|| Witness {
            old_struct: self.old.name.to_string(),
            new_struct: self.new.name.to_string(),
            renames,
            old_reads_new: orn,
            new_reads_old: nro,
        })
    }

    fn subject(&self, field: &str) -> String {
        format!("{}.{field}", self.prefix)
    }
}

/// Every row for one struct that exists in both revisions.
pub fn diff_struct(cx: &Ctx, out: &mut Vec<Change>) {
    let (so, sn) = (cx.old.def, cx.new.def);
    let (go, gn) = (Gen::new(cx.old.rev), Gen::new(cx.new.rev));
    let start = out.len();

    if so.kind != sn.kind {
        out.push(cx.change(
            Kind::StructKind,
            &cx.prefix,
            format!("{:?} → {:?}", so.kind, sn.kind),
            (Effect::Compatible, "both encode as a map of field names; the option rows below say what else changes".into()),
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
    let added: Vec<usize> = (0..sn.fields.len()).filter(|&i| !so.fields.iter().any(|f| f.name == sn.fields[i].name)).collect();
    let removed: Vec<usize> = (0..so.fields.len()).filter(|&i| !sn.fields.iter().any(|f| f.name == so.fields[i].name)).collect();
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
        field_only_in(cx, Which::New, j, map, trailing(sn, j, &added_names), out);
    }
    for &i in &removed {
        field_only_in(cx, Which::Old, i, map, trailing(so, i, &removed_names), out);
    }
    for &(i, j) in &renames {
        field_renamed(cx, &so.fields[i], &sn.fields[j], map, out);
    }
    reordered(cx, map, out);
    for fo in &so.fields {
        if let Some(fnew) = sn.fields.iter().find(|f| f.name == fo.name) {
            field_type(cx, fo, fnew, out);
            field_default(cx, fo, fnew, out);
        }
    }
    options(cx, map, out);
    if map {
        let (d_old, d_new) = (declared(cx.old.name, so), declared(cx.new.name, sn));
        if (d_old >= 16) != (d_new >= 16) {
            let w = cx.witness(Probe::plain(obj(gn.baseline(sn))), Probe::plain(obj(go.baseline(so))), vec![]);
            let (from, to) = if d_new >= 16 { ("fixmap (`8N`)", "map16 (`de 00 NN`)") } else { ("map16 (`de 00 NN`)", "fixmap (`8N`)") };
            out.push(
                cx.change(
                    Kind::MapHeader,
                    &cx.prefix,
                    format!("{d_old} → {d_new} declared map entries"),
                    (Effect::Compatible, "decoders accept any header width".into()),
                    (Effect::Compatible, "decoders accept any header width".into()),
                    Bytes::Differ(format!("msgspec sizes the header from the declared count: every message's header goes from {from} to {to}")),
                )
                .witness(w),
            );
        }
    }
    let _ = start;
}

#[derive(Clone, Copy, PartialEq)]
enum Which {
    Old,
    New,
}

/// A field only one revision declares (added when `which` is New, removed when Old).
fn field_only_in(cx: &Ctx, which: Which, idx: usize, map: bool, at_end: bool, out: &mut Vec<Change>) {
    let (present, absent) = match which {
        Which::New => (cx.new, cx.old),
        Which::Old => (cx.old, cx.new),
    };
    let f = &present.def.fields[idx];
    let key = wire_name(present.def, f);
    let g = Gen::new(present.rev);
    let ga = Gen::new(absent.rev);
    let sent = always_written(present.def, f);

    // The revision that has the field writes, the other reads.
    let present_writes: (Effect, String) = if map {
        if forbids(absent.def) {
            let e = if sent { Effect::always() } else { Effect::when(format!("`{}` is sent (not its default)", f.name)) };
            (e, format!("the decoder forbids unknown fields and `{key}` is unknown to it"))
        } else {
            (Effect::Compatible, format!("`{key}` is an unknown key to the decoder: ignored"))
        }
    } else if !at_end {
        (Effect::always(), "array positions of the following fields shift".into())
    } else if forbids(absent.def) {
        (Effect::always(), "the array has more elements than the decoder allows (forbid_unknown_fields)".into())
    } else {
        (Effect::Compatible, "the extra trailing array element is ignored".into())
    };
    // The revision without the field writes.
    let absent_writes: (Effect, String) = if map || at_end {
        if f.required() {
            (Effect::always(), format!("senders without `{}` never send it, and the decoder requires it", f.name))
        } else {
            (Effect::Compatible, format!("senders without `{}` never send it: the default `{}` is used", f.name, f.default_display()))
        }
    } else {
        (Effect::always(), "array positions of the following fields shift".into())
    };

    let bytes = if !map {
        Bytes::Differ("every message's array has a different length".into())
    } else if f.required() {
        Bytes::NotApplicable(format!("every message of the revision that declares it carries `{key}`"))
    } else if !omits(present.def) {
        Bytes::Differ(format!("every message of the revision that declares it carries `{key}` (defaults are written)"))
    } else {
        Bytes::Same
    };

    let base = g.baseline(present.def);
    let d = default_json(f);
    let avoid: Vec<&J> = d.iter().collect();
    let present_probe = if f.required() {
        Probe::plain(obj(base))
    } else {
        Probe::using(obj(base.clone()), with(base, &f.name, g.typical_not(&f.ty, &avoid)))
    };
    let absent_probe = Probe::plain(obj(ga.baseline(absent.def)));

    let (kind, what, orn, nro, w) = match which {
        Which::New => (
            Kind::FieldAdded,
            format!("added {}{}, {}", field_desc(f), if f.required() { ", required" } else { "" }, position(present.def, idx)),
            present_writes,
            absent_writes,
            cx.witness(present_probe, absent_probe, vec![]),
        ),
        Which::Old => (
            Kind::FieldRemoved,
            format!("removed {}{} (was {})", field_desc(f), if f.required() { ", required" } else { "" }, position(present.def, idx)),
            absent_writes,
            present_writes,
            cx.witness(absent_probe, present_probe, vec![]),
        ),
    };
    out.push(cx.change(kind, &cx.subject(&f.name), what, orn, nro, bytes).witness(w));
}

fn field_renamed(cx: &Ctx, a: &FieldDef, b: &FieldDef, map: bool, out: &mut Vec<Change>) {
    let (so, sn) = (cx.old.def, cx.new.def);
    let (ka, kb) = (wire_name(so, a), wire_name(sn, b));
    let what = format!("`{}` renamed to `{}` (same type and default)", a.name, b.name);
    let (go, gn) = (Gen::new(cx.old.rev), Gen::new(cx.new.rev));
    let d = default_json(a);
    let avoid: Vec<&J> = d.iter().collect();
    let probes = |g: &Gen, s: &StructDef, f: &FieldDef| {
        let base = g.baseline(s);
        if f.required() {
            Probe::plain(obj(base))
        } else {
            Probe::using(obj(base.clone()), with(base, &f.name, g.typical_not(&f.ty, &avoid)))
        }
    };
    let w = cx.witness(probes(&gn, sn, b), probes(&go, so, a), vec![(a.name.clone(), b.name.clone())]);
    if !map {
        out.push(
            cx.change(
                Kind::FieldRenamed,
                &cx.subject(&a.name),
                what,
                (Effect::Compatible, "array_like: fields travel by position, not by name".into()),
                (Effect::Compatible, "array_like: fields travel by position, not by name".into()),
                Bytes::Same,
            )
            .witness(w),
        );
        return;
    }
    let dir = |writer: &StructDef, wf: &FieldDef, wk: &str, reader: &StructDef, rf: &FieldDef, rk: &str| -> (Effect, String) {
        if rf.required() {
            (Effect::always(), format!("the decoder requires `{rk}`, which is now sent as `{wk}`"))
        } else if forbids(reader) && always_written(writer, wf) {
            (Effect::always(), format!("the decoder forbids the unknown key `{wk}`"))
        } else {
            (
                Effect::when(format!("`{wk}` holds a non-default value")),
                format!("`{wk}` is an unknown key to the decoder{}, which reads `{rk}` as its default", if forbids(reader) { " (forbidden)" } else { "" }),
            )
        }
    };
    let orn = dir(sn, b, &kb, so, a, &ka);
    let nro = dir(so, a, &ka, sn, b, &kb);
    let bytes = if always_written(sn, b) || always_written(so, a) {
        Bytes::Differ(format!("the key `{ka}` becomes `{kb}` in every message"))
    } else {
        Bytes::DifferWhen(format!("messages that carry `{ka}` / `{kb}`"))
    };
    out.push(cx.change(Kind::FieldRenamed, &cx.subject(&a.name), what, orn, nro, bytes).witness(w));
}

/// Common fields whose relative order changed (those outside the longest common subsequence).
fn reordered(cx: &Ctx, map: bool, out: &mut Vec<Change>) {
    let (so, sn) = (cx.old.def, cx.new.def);
    let old_order: Vec<&str> = so.fields.iter().map(|f| f.name.as_str()).filter(|n| sn.fields.iter().any(|f| f.name == *n)).collect();
    let new_order: Vec<&str> = sn.fields.iter().map(|f| f.name.as_str()).filter(|n| so.fields.iter().any(|f| f.name == *n)).collect();
    if old_order == new_order {
        return;
    }
    // Longest common subsequence; whatever is outside it moved.
    let (n, m) = (old_order.len(), new_order.len());
    let mut l = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            l[i][j] = if old_order[i] == new_order[j] { l[i + 1][j + 1] + 1 } else { l[i + 1][j].max(l[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut keep) = (0, 0, vec![]);
    while i < n && j < m {
        if old_order[i] == new_order[j] {
            keep.push(old_order[i]);
            i += 1;
            j += 1;
        } else if l[i + 1][j] >= l[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    let moved: Vec<&str> = new_order.iter().copied().filter(|x| !keep.contains(x)).collect();
    let what = format!("moved {} (order now {})", moved.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "), new_order.join(", "));
    let (go, gn) = (Gen::new(cx.old.rev), Gen::new(cx.new.rev));
    let w = cx.witness(
        Probe::using(obj(gn.baseline(sn)), obj(gn.full(sn))),
        Probe::using(obj(go.baseline(so)), obj(go.full(so))),
        vec![],
    );
    let (orn, nro, bytes) = if map {
        let always = |name: &str| {
            so.fields.iter().any(|f| f.name == name && always_written(so, f)) && sn.fields.iter().any(|f| f.name == name && always_written(sn, f))
        };
        let moved_always = moved.iter().any(|x| always(x));
        let others_always = new_order.iter().any(|x| !moved.contains(x) && always(x)) || moved.iter().filter(|x| always(x)).count() > 1;
        let bytes = if moved_always && others_always {
            Bytes::Differ("the key order of every message changes".into())
        } else {
            Bytes::DifferWhen("messages that carry a moved field together with a field it moved past".into())
        };
        let c = (Effect::Compatible, "decoders accept map keys in any order".to_string());
        (c.clone(), c, bytes)
    } else {
        let b = (Effect::always(), "array_like: the fields' positions change".to_string());
        (b.clone(), b, Bytes::Differ("array positions change".into()))
    };
    out.push(cx.change(Kind::FieldsReordered, &cx.prefix, what, orn, nro, bytes).witness(w));
}

/// `` `$.m` is empty ``, `` every `$.req_blocks[...][1]` is empty ``.
fn empty_text(key: &str, container: &str) -> String {
    if container.is_empty() {
        format!("`$.{key}` is empty")
    } else {
        format!("every `$.{key}{container}` is empty")
    }
}

/// The verdict of a type change in one direction, from the writer's point of view.
fn type_verdict(writer: &StructDef, wf: &FieldDef, key: &str, inc: &Option<Incompat>, wty: &str, rty: &str) -> (Effect, String) {
    match inc {
        None => (Effect::Compatible, format!("every `{wty}` value reads as `{rty}`")),
        Some(i) if i.shape && always_written(writer, wf) => (
            Effect::Breaks { except: i.container.as_ref().map(|c| empty_text(key, c)) },
            match i.arity {
                Some((a, b)) => format!("a {a}-tuple is sent where the decoder expects {b} elements"),
                None => format!("a `{wty}` value does not read as `{rty}`"),
            },
        ),
        Some(i) if i.shape => (Effect::when(format!("`{}` is sent (not its default)", wf.name)), format!("a `{wty}` value does not read as `{rty}`")),
        Some(i) => (Effect::when(format!("`$.{key}{}` {}", i.at, i.when)), format!("only some `{wty}` values read as `{rty}`")),
    }
}

fn type_probe(g: &Gen, s: &StructDef, f: &FieldDef, inc: &Option<Incompat>) -> Probe {
    let base = g.baseline(s);
    let d = default_json(f);
    let avoid: Vec<&J> = d.iter().collect();
    match inc {
        None => Probe::plain(with(base, &f.name, g.typical_not(&f.ty, &avoid))),
        Some(i) if i.shape && always_written(s, f) => Probe {
            plain: with(base.clone(), &f.name, i.value.clone()),
            using: None,
            exception: i.exception.clone().map(|e| with(base, &f.name, e)),
        },
        Some(i) if i.shape => Probe::using(obj(base.clone()), with(base, &f.name, i.value.clone())),
        Some(i) => {
            let safe = i.safe.clone().unwrap_or_else(|| g.typical_not(&f.ty, &avoid));
            Probe::using(with(base.clone(), &f.name, safe), with(base, &f.name, i.value.clone()))
        }
    }
}

fn field_type(cx: &Ctx, fo: &FieldDef, fnew: &FieldDef, out: &mut Vec<Change>) {
    let (ro, rn) = (resolve(cx.old.rev, &fo.ty), resolve(cx.new.rev, &fnew.ty));
    if ro == rn {
        return;
    }
    let (ko, kn) = (wire_name(cx.old.def, fo), wire_name(cx.new.def, fnew));
    let (to, tn) = (fo.ty.python(), fnew.ty.python());
    let orn_i = incompat(Typed { rev: cx.new.rev, ty: &fnew.ty }, Typed { rev: cx.old.rev, ty: &fo.ty });
    let nro_i = incompat(Typed { rev: cx.old.rev, ty: &fo.ty }, Typed { rev: cx.new.rev, ty: &fnew.ty });
    let orn = type_verdict(cx.new.def, fnew, &kn, &orn_i, &tn, &to);
    let nro = type_verdict(cx.old.def, fo, &ko, &nro_i, &to, &tn);
    let arity = orn_i.as_ref().and_then(|i| i.arity).or(nro_i.as_ref().and_then(|i| i.arity));
    let same = same_encoding(cx.old.rev, &fo.ty, cx.new.rev, &fnew.ty);
    let bytes = match (&orn_i, &nro_i) {
        (Some(a), Some(b)) if a.shape && b.shape => match (&a.container, &b.container) {
            (Some(c), _) | (_, Some(c)) => Bytes::NotApplicable(format!("only messages where {} mean the same under both; they encode identically", empty_text(&kn, c))),
            _ => Bytes::NotApplicable("no value of one type is a value of the other".into()),
        },
        _ if same => Bytes::Same,
        _ if always_written(cx.old.def, fo) && always_written(cx.new.def, fnew) => {
            Bytes::Differ(format!("every message carries `{kn}`, and the two types encode the same value differently (floats are always float64)"))
        }
        _ => Bytes::DifferWhen(format!("messages that carry `{kn}`: the two types encode the same value differently (floats are always float64)")),
    };
    let (go, gn) = (Gen::new(cx.old.rev), Gen::new(cx.new.rev));
    let w = cx.witness(type_probe(&gn, cx.new.def, fnew, &orn_i), type_probe(&go, cx.old.def, fo, &nro_i), vec![]);
    let (kind, what) = match arity {
        Some((a, b)) => (Kind::TupleArity, format!("`{}`: `{to}` → `{tn}` ({} → {} elements)", fo.name, if orn_i.is_some() { b } else { a }, if orn_i.is_some() { a } else { b })),
        None => (Kind::FieldType, format!("`{}`: `{to}` → `{tn}`", fo.name)),
    };
    out.push(cx.change(kind, &cx.subject(&fo.name), what, orn, nro, bytes).witness(w));
}

/// Default and required-ness changes of a field both revisions declare.
fn field_default(cx: &Ctx, fo: &FieldDef, fnew: &FieldDef, out: &mut Vec<Change>) {
    let (so, sn) = (cx.old.def, cx.new.def);
    let (go, gn) = (Gen::new(cx.old.rev), Gen::new(cx.new.rev));
    let same_type = resolve(cx.old.rev, &fo.ty) == resolve(cx.new.rev, &fnew.ty);
    let (d_old, d_new) = (default_json(fo), default_json(fnew));
    let key = wire_name(sn, fnew);
    match (fo.required(), fnew.required()) {
        (true, true) => {}
        (false, false) => {
            if d_old == d_new {
                return;
            }
            let (dd_old, dd_new) = (fo.default_display(), fnew.default_display());
            let orn = if omits(sn) {
                (Effect::when(format!("`{}` holds the new default `{dd_new}`", fnew.name)), format!("new senders omit it, and old decoders fill in `{dd_old}`"))
            } else {
                (Effect::Compatible, "new senders write every field".into())
            };
            let nro = if omits(so) {
                (Effect::when(format!("`{}` holds the old default `{dd_old}`", fo.name)), format!("old senders omit it, and new decoders fill in `{dd_new}`"))
            } else {
                (Effect::Compatible, "old senders write every field".into())
            };
            let bytes = if omits(so) || omits(sn) { Bytes::DifferWhen(format!("messages where `{key}` holds one of the two defaults")) } else { Bytes::Same };
            let avoid: Vec<&J> = d_old.iter().chain(d_new.iter()).collect();
            let w = if same_type {
                let probe = |g: &Gen, s: &StructDef, f: &FieldDef, d: &Option<J>| {
                    let base = g.baseline(s);
                    Probe::using(with(base.clone(), &f.name, g.typical_not(&f.ty, &avoid)), with(base, &f.name, d.clone().unwrap_or(J::Null)))
                };
                cx.witness(probe(&gn, sn, fnew, &d_new), probe(&go, so, fo, &d_old), vec![])
            } else {
                None
            };
            out.push(cx.change(Kind::FieldDefault, &cx.subject(&fo.name), format!("`{}` default `{dd_old}` → `{dd_new}`", fo.name), orn, nro, bytes).witness(w));
        }
        (true, false) => {
            let dd = fnew.default_display();
            let orn = if omits(sn) {
                (Effect::when(format!("`{}` holds its new default `{dd}`", fnew.name)), "new senders then omit it, and old decoders require it".to_string())
            } else {
                (Effect::Compatible, "new senders write every field".to_string())
            };
            let nro = (Effect::Compatible, "old senders always send it".to_string());
            let bytes = if omits(sn) { Bytes::DifferWhen(format!("messages where `{key}` holds its new default `{dd}`")) } else { Bytes::Same };
            let avoid: Vec<&J> = d_new.iter().collect();
            let w = same_type.then(|| {
                let base = gn.baseline(sn);
                let orn_p = Probe::using(with(base.clone(), &fnew.name, gn.typical_not(&fnew.ty, &avoid)), with(base, &fnew.name, d_new.clone().unwrap_or(J::Null)));
                cx.witness(orn_p, Probe::plain(obj(go.baseline(so))), vec![])
            });
            out.push(cx.change(Kind::FieldRequired, &cx.subject(&fo.name), format!("`{}` required → default `{dd}`", fo.name), orn, nro, bytes).witness(w.flatten()));
        }
        (false, true) => {
            let dd = fo.default_display();
            let orn = (Effect::Compatible, "new senders always send it".to_string());
            let nro = if omits(so) {
                (Effect::when(format!("`{}` holds its old default `{dd}`", fo.name)), "old senders then omit it, and new decoders require it".to_string())
            } else {
                (Effect::Compatible, "old senders write every field".to_string())
            };
            let bytes = if omits(so) { Bytes::DifferWhen(format!("messages where `{key}` holds its old default `{dd}`")) } else { Bytes::Same };
            let avoid: Vec<&J> = d_old.iter().collect();
            let w = same_type.then(|| {
                let base = go.baseline(so);
                let nro_p = Probe::using(with(base.clone(), &fo.name, go.typical_not(&fo.ty, &avoid)), with(base, &fo.name, d_old.clone().unwrap_or(J::Null)));
                cx.witness(Probe::plain(obj(gn.baseline(sn))), nro_p, vec![])
            });
            out.push(cx.change(Kind::FieldRequired, &cx.subject(&fo.name), format!("`{}` default `{dd}` → required", fo.name), orn, nro, bytes).witness(w.flatten()));
        }
    }
}

/// Struct option rows (the effective options: `omit_defaults` means nothing for `array_like` or a dataclass).
fn options(cx: &Ctx, map: bool, out: &mut Vec<Change>) {
    let (so, sn) = (cx.old.def, cx.new.def);
    let (go, gn) = (Gen::new(cx.old.rev), Gen::new(cx.new.rev));
    let plain = || cx.witness(Probe::plain(obj(gn.baseline(sn))), Probe::plain(obj(go.baseline(so))), vec![]);
    let subject = format!("{} (options)", cx.prefix);

    if map && omits(so) != omits(sn) {
        let has_defaults = so.fields.iter().chain(&sn.fields).any(|f| !f.required());
        let w = cx.witness(
            Probe::using(obj(gn.full(sn)), obj(gn.baseline(sn))),
            Probe::using(obj(go.full(so)), obj(go.baseline(so))),
            vec![],
        );
        let c = (Effect::Compatible, "a missing defaulted key reads as its default, a present one as its value".to_string());
        out.push(
            cx.change(
                Kind::StructOption,
                &subject,
                format!("omit_defaults: {} → {}", omits(so), omits(sn)),
                c.clone(),
                c,
                if has_defaults { Bytes::DifferWhen("messages where a defaulted field holds its default (written by one revision, omitted by the other)".into()) } else { Bytes::Same },
            )
            .witness(w),
        );
    }
    if forbids(so) != forbids(sn) {
        let mut ch = cx.change(
            Kind::StructOption,
            &subject,
            format!("forbid_unknown_fields: {} → {}", forbids(so), forbids(sn)),
            (Effect::Compatible, "senders write only fields both revisions declare (field rows list any others)".into()),
            (Effect::Compatible, "senders write only fields both revisions declare (field rows list any others)".into()),
            Bytes::Same,
        )
        .witness(plain());
        if forbids(sn) {
            ch = ch.note("from now on, any field a later revision adds breaks this decoder");
        }
        out.push(ch);
    }
    let (to, tn) = (tag(cx.old.name, so), tag(cx.new.name, sn));
    if to != tn {
        let show = |t: &Option<(String, String)>| t.as_ref().map(|(f, v)| format!("`{f}` = {v}")).unwrap_or_else(|| "none".into());
        let what = format!("tag: {} → {}", show(&to), show(&tn));
        let (orn, nro, bytes) = if !map {
            match (&to, &tn) {
                (Some((_, a)), Some((_, b))) if a == b => {
                    let c = (Effect::Compatible, "array_like: the tag field's name is not on the wire".to_string());
                    (c.clone(), c, Bytes::Same)
                }
                (Some(_), Some(_)) => {
                    let b = (Effect::always(), "the tag value at position 0 differs".to_string());
                    (b.clone(), b, Bytes::Differ("position 0 holds the tag".into()))
                }
                _ => {
                    let b = (Effect::always(), "array_like: the tag occupies position 0, shifting every field".to_string());
                    (b.clone(), b, Bytes::Differ("position 0 holds the tag".into()))
                }
            }
        } else {
            // A map decoder checks a tag key it knows, ignores one it does not (unless forbidden), and accepts a
            // message without its tag key.
            let dir = |wt: &Option<(String, String)>, rt: &Option<(String, String)>, reader: &StructDef| -> (Effect, String) {
                match (wt, rt) {
                    (Some((wf, wv)), Some((rf, rv))) if wf == rf && wv != rv => (Effect::always(), format!("the decoder checks `{rf}` and rejects {wv}")),
                    (Some((wf, _)), _) if forbids(reader) && rt.as_ref().is_none_or(|(rf, _)| rf != wf) => {
                        (Effect::always(), format!("the decoder forbids the unknown key `{wf}`"))
                    }
                    (Some((wf, _)), _) if rt.as_ref().is_none_or(|(rf, _)| rf != wf) => (Effect::Compatible, format!("the tag key `{wf}` is unknown to the decoder: ignored")),
                    (None, Some(_)) => (Effect::Compatible, "a message without the tag key is accepted".into()),
                    _ => (Effect::Compatible, "the tag matches".into()),
                }
            };
            (dir(&tn, &to, so), dir(&to, &tn, sn), Bytes::Differ("every message carries the tag".into()))
        };
        out.push(cx.change(Kind::StructOption, &subject, what, orn, nro, bytes).witness(plain()));
    }
    if so.kind == StructKind::MsgspecStruct && sn.kind == StructKind::MsgspecStruct && so.options.rename != sn.options.rename {
        let changed: Vec<(&FieldDef, &FieldDef)> = so
            .fields
            .iter()
            .filter_map(|a| sn.fields.iter().find(|b| b.name == a.name).map(|b| (a, b)))
            .filter(|(a, b)| wire_name(so, a) != wire_name(sn, b))
            .collect();
        let what = format!("rename: {} → {}", so.options.rename.as_deref().unwrap_or("none"), sn.options.rename.as_deref().unwrap_or("none"));
        let w = cx.witness(Probe::using(obj(gn.baseline(sn)), obj(gn.full(sn))), Probe::using(obj(go.baseline(so)), obj(go.full(so))), vec![]);
        let (orn, nro, bytes) = if !map || changed.is_empty() {
            let c = (Effect::Compatible, if map { "no key changes".to_string() } else { "array_like: keys are not on the wire".to_string() });
            (c.clone(), c, Bytes::Same)
        } else {
            let keys = changed.iter().map(|(a, b)| format!("`{}` → `{}`", wire_name(so, a), wire_name(sn, b))).collect::<Vec<_>>().join(", ");
            // `new_writes`: the new revision writes, the old one reads.
            let dir = |new_writes: bool| {
                let (writer, reader) = if new_writes { (sn, so) } else { (so, sn) };
                let any_required = changed.iter().any(|(a, b)| if new_writes { a.required() } else { b.required() });
                let any_always = changed.iter().any(|(a, b)| always_written(writer, if new_writes { b } else { a }));
                if any_required || (forbids(reader) && any_always) {
                    (Effect::always(), format!("keys change ({keys}): the decoder misses a required key or forbids the new ones"))
                } else {
                    (Effect::when("a field whose key changed holds a non-default value"), format!("keys change ({keys}): the decoder reads those fields as their defaults"))
                }
            };
            let orn = dir(true);
            let nro = dir(false);
            let any_always = changed.iter().any(|(a, b)| always_written(so, a) || always_written(sn, b));
            (orn, nro, if any_always { Bytes::Differ(format!("keys change: {keys}")) } else { Bytes::DifferWhen(format!("messages that carry a renamed key ({keys})")) })
        };
        out.push(cx.change(Kind::StructOption, &subject, what, orn, nro, bytes).witness(w));
    }
    for (opt, a, b) in [("dict", so.options.dict, sn.options.dict), ("frozen", so.options.frozen, sn.options.frozen)] {
        if a != b {
            let c = (Effect::Compatible, "no wire effect".to_string());
            out.push(cx.change(Kind::StructOption, &subject, format!("{opt}: {a} → {b}"), c.clone(), c, Bytes::Same).witness(plain()));
        }
    }
}

/// The worst effect of `rows` per direction: the verdict of replacing one message struct by another.
pub fn aggregate(rows: &[Change], prefix: &str, dir: impl Fn(&Change) -> &Verdict) -> (Effect, String) {
    let worst = rows.iter().map(|c| dir(c).effect.rank()).max();
    match rows.iter().find(|c| Some(dir(c).effect.rank()) == worst) {
        None => (Effect::Compatible, "the two structs declare the same fields".into()),
        Some(c) => {
            let v = dir(c);
            let what = c.subject.strip_prefix(prefix).and_then(|s| s.strip_prefix('.')).map(|f| format!("`{f}`")).unwrap_or_else(|| c.subject.clone());
            (v.effect.clone(), format!("{what} ({}): {}", c.kind.label(), v.reason))
        }
    }
}

/// Probes for cross-decoding two different structs: the baseline of each.
pub fn replacement_witness(old: Side, new: Side) -> Witness {
    let (go, gn) = (Gen::new(old.rev), Gen::new(new.rev));
    Witness {
        old_struct: old.name.to_string(),
        new_struct: new.name.to_string(),
        renames: vec![],
        old_reads_new: Probe::plain(obj(gn.baseline(new.def))),
        new_reads_old: Probe::plain(obj(go.baseline(old.def))),
    }
}
