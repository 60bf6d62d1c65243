//! Field rules: a field only one revision declares (added or removed), renamed, reordered, or whose type,
//! default or required-ness changed. msgspec matches map keys by name in any order, ignores unknown keys
//! unless `forbid_unknown_fields`, fails on a missing required key and fills in a missing defaulted one;
//! `array_like` structs match by position (`spec/MSGSPEC.md` §2, §4, §5).

use serde_json::Value as J;

use super::ctx::{field_desc, forbids, obj, position, wire_name, with, Ctx};
use super::model::{Bytes, Change, Effect, Kind, Probe};
use super::types::{always_written, default_json, incompat, omits, resolve, same_encoding, Gen, Incompat, Typed};
use crate::spec::{FieldDef, StructDef};

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Which {
    Old,
    New,
}

/// A field only one revision declares (added when `which` is New, removed when Old).
pub(super) fn field_only_in(cx: &Ctx, which: Which, idx: usize, map: bool, at_end: bool, out: &mut Vec<Change>) {
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
            let e =
                if sent { Effect::always() } else { Effect::when(format!("`{}` is sent (not its default)", f.name)) };
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
            (
                Effect::Compatible,
                format!("senders without `{}` never send it: the default `{}` is used", f.name, f.default_display()),
            )
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
            format!(
                "added {}{}, {}",
                field_desc(f),
                if f.required() { ", required" } else { "" },
                position(present.def, idx)
            ),
            present_writes,
            absent_writes,
            cx.witness(present_probe, absent_probe, vec![]),
        ),
        Which::Old => (
            Kind::FieldRemoved,
            format!(
                "removed {}{} (was {})",
                field_desc(f),
                if f.required() { ", required" } else { "" },
                position(present.def, idx)
            ),
            absent_writes,
            present_writes,
            cx.witness(absent_probe, present_probe, vec![]),
        ),
    };
    out.push(cx.change(kind, &cx.subject(&f.name), what, orn, nro, bytes).witness(w));
}

pub(super) fn field_renamed(cx: &Ctx, a: &FieldDef, b: &FieldDef, map: bool, out: &mut Vec<Change>) {
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
    let dir = |writer: &StructDef,
               wf: &FieldDef,
               wk: &str,
               reader: &StructDef,
               rf: &FieldDef,
               rk: &str|
     -> (Effect, String) {
        if rf.required() {
            (Effect::always(), format!("the decoder requires `{rk}`, which is now sent as `{wk}`"))
        } else if forbids(reader) && always_written(writer, wf) {
            (Effect::always(), format!("the decoder forbids the unknown key `{wk}`"))
        } else {
            (
                Effect::when(format!("`{wk}` holds a non-default value")),
                format!(
                    "`{wk}` is an unknown key to the decoder{}, which reads `{rk}` as its default",
                    if forbids(reader) { " (forbidden)" } else { "" }
                ),
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
pub(super) fn reordered(cx: &Ctx, map: bool, out: &mut Vec<Change>) {
    let (so, sn) = (cx.old.def, cx.new.def);
    let old_order: Vec<&str> =
        so.fields.iter().map(|f| f.name.as_str()).filter(|n| sn.fields.iter().any(|f| f.name == *n)).collect();
    let new_order: Vec<&str> =
        sn.fields.iter().map(|f| f.name.as_str()).filter(|n| so.fields.iter().any(|f| f.name == *n)).collect();
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
    let what = format!(
        "moved {} (order now {})",
        moved.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "),
        new_order.join(", ")
    );
    let (go, gn) = (Gen::new(cx.old.rev), Gen::new(cx.new.rev));
    let w = cx.witness(
        Probe::using(obj(gn.baseline(sn)), obj(gn.full(sn))),
        Probe::using(obj(go.baseline(so)), obj(go.full(so))),
        vec![],
    );
    let (orn, nro, bytes) = if map {
        let always = |name: &str| {
            so.fields.iter().any(|f| f.name == name && always_written(so, f))
                && sn.fields.iter().any(|f| f.name == name && always_written(sn, f))
        };
        let moved_always = moved.iter().any(|x| always(x));
        let others_always =
            new_order.iter().any(|x| !moved.contains(x) && always(x)) || moved.iter().filter(|x| always(x)).count() > 1;
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
fn type_verdict(
    writer: &StructDef,
    wf: &FieldDef,
    key: &str,
    inc: &Option<Incompat>,
    wty: &str,
    rty: &str,
) -> (Effect, String) {
    match inc {
        None => (Effect::Compatible, format!("every `{wty}` value reads as `{rty}`")),
        Some(i) if i.shape && always_written(writer, wf) => (
            Effect::Breaks { except: i.container.as_ref().map(|c| empty_text(key, c)) },
            match i.arity {
                Some((a, b)) => format!("a {a}-tuple is sent where the decoder expects {b} elements"),
                None => format!("a `{wty}` value does not read as `{rty}`"),
            },
        ),
        Some(i) if i.shape => (
            Effect::when(format!("`{}` is sent (not its default)", wf.name)),
            format!("a `{wty}` value does not read as `{rty}`"),
        ),
        Some(i) => {
            (Effect::when(format!("`$.{key}{}` {}", i.at, i.when)), format!("only some `{wty}` values read as `{rty}`"))
        }
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

pub(super) fn field_type(cx: &Ctx, fo: &FieldDef, fnew: &FieldDef, out: &mut Vec<Change>) {
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
        Some((a, b)) => (
            Kind::TupleArity,
            format!(
                "`{}`: `{to}` → `{tn}` ({} → {} elements)",
                fo.name,
                if orn_i.is_some() { b } else { a },
                if orn_i.is_some() { a } else { b }
            ),
        ),
        None => (Kind::FieldType, format!("`{}`: `{to}` → `{tn}`", fo.name)),
    };
    out.push(cx.change(kind, &cx.subject(&fo.name), what, orn, nro, bytes).witness(w));
}

/// Default and required-ness changes of a field both revisions declare.
pub(super) fn field_default(cx: &Ctx, fo: &FieldDef, fnew: &FieldDef, out: &mut Vec<Change>) {
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
                (
                    Effect::when(format!("`{}` holds the new default `{dd_new}`", fnew.name)),
                    format!("new senders omit it, and old decoders fill in `{dd_old}`"),
                )
            } else {
                (Effect::Compatible, "new senders write every field".into())
            };
            let nro = if omits(so) {
                (
                    Effect::when(format!("`{}` holds the old default `{dd_old}`", fo.name)),
                    format!("old senders omit it, and new decoders fill in `{dd_new}`"),
                )
            } else {
                (Effect::Compatible, "old senders write every field".into())
            };
            let bytes = if omits(so) || omits(sn) {
                Bytes::DifferWhen(format!("messages where `{key}` holds one of the two defaults"))
            } else {
                Bytes::Same
            };
            let avoid: Vec<&J> = d_old.iter().chain(d_new.iter()).collect();
            let w = if same_type {
                let probe = |g: &Gen, s: &StructDef, f: &FieldDef, d: &Option<J>| {
                    let base = g.baseline(s);
                    Probe::using(
                        with(base.clone(), &f.name, g.typical_not(&f.ty, &avoid)),
                        with(base, &f.name, d.clone().unwrap_or(J::Null)),
                    )
                };
                cx.witness(probe(&gn, sn, fnew, &d_new), probe(&go, so, fo, &d_old), vec![])
            } else {
                None
            };
            out.push(
                cx.change(
                    Kind::FieldDefault,
                    &cx.subject(&fo.name),
                    format!("`{}` default `{dd_old}` → `{dd_new}`", fo.name),
                    orn,
                    nro,
                    bytes,
                )
                .witness(w),
            );
        }
        (true, false) => {
            let dd = fnew.default_display();
            let orn = if omits(sn) {
                (
                    Effect::when(format!("`{}` holds its new default `{dd}`", fnew.name)),
                    "new senders then omit it, and old decoders require it".to_string(),
                )
            } else {
                (Effect::Compatible, "new senders write every field".to_string())
            };
            let nro = (Effect::Compatible, "old senders always send it".to_string());
            let bytes = if omits(sn) {
                Bytes::DifferWhen(format!("messages where `{key}` holds its new default `{dd}`"))
            } else {
                Bytes::Same
            };
            let avoid: Vec<&J> = d_new.iter().collect();
            let w = same_type.then(|| {
                let base = gn.baseline(sn);
                let orn_p = Probe::using(
                    with(base.clone(), &fnew.name, gn.typical_not(&fnew.ty, &avoid)),
                    with(base, &fnew.name, d_new.clone().unwrap_or(J::Null)),
                );
                cx.witness(orn_p, Probe::plain(obj(go.baseline(so))), vec![])
            });
            out.push(
                cx.change(
                    Kind::FieldRequired,
                    &cx.subject(&fo.name),
                    format!("`{}` required → default `{dd}`", fo.name),
                    orn,
                    nro,
                    bytes,
                )
                .witness(w.flatten()),
            );
        }
        (false, true) => {
            let dd = fo.default_display();
            let orn = (Effect::Compatible, "new senders always send it".to_string());
            let nro = if omits(so) {
                (
                    Effect::when(format!("`{}` holds its old default `{dd}`", fo.name)),
                    "old senders then omit it, and new decoders require it".to_string(),
                )
            } else {
                (Effect::Compatible, "old senders write every field".to_string())
            };
            let bytes = if omits(so) {
                Bytes::DifferWhen(format!("messages where `{key}` holds its old default `{dd}`"))
            } else {
                Bytes::Same
            };
            let avoid: Vec<&J> = d_old.iter().collect();
            let w = same_type.then(|| {
                let base = go.baseline(so);
                let nro_p = Probe::using(
                    with(base.clone(), &fo.name, go.typical_not(&fo.ty, &avoid)),
                    with(base, &fo.name, d_old.clone().unwrap_or(J::Null)),
                );
                cx.witness(Probe::plain(obj(gn.baseline(sn))), nro_p, vec![])
            });
            out.push(
                cx.change(
                    Kind::FieldRequired,
                    &cx.subject(&fo.name),
                    format!("`{}` default `{dd}` → required", fo.name),
                    orn,
                    nro,
                    bytes,
                )
                .witness(w.flatten()),
            );
        }
    }
}
