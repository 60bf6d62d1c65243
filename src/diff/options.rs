//! Struct option rules (`omit_defaults`, `forbid_unknown_fields`, `tag` / `tag_field`, `rename`, `dict`,
//! `frozen`) and the map header width. Options are compared as they take effect: `omit_defaults` means nothing
//! for an `array_like` struct or a dataclass (msgspec issue #720; `spec/MSGSPEC.md`
//! §2–§3).

use super::ctx::{declared, forbids, obj, tag, wire_name, Ctx};
use super::model::{Bytes, Change, Effect, Kind, Probe};
use super::types::{always_written, omits, Gen};
use crate::spec::{FieldDef, StructDef, StructKind};

/// Struct option rows (the effective options: `omit_defaults` means nothing for `array_like` or a dataclass).
pub(super) fn options(cx: &Ctx, map: bool, out: &mut Vec<Change>) {
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
        let c = (
            Effect::Compatible,
            "a missing defaulted key reads as its default, a present one as its value".to_string(),
        );
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
        let mut ch = cx
            .change(
                Kind::StructOption,
                &subject,
                format!("forbid_unknown_fields: {} → {}", forbids(so), forbids(sn)),
                (
                    Effect::Compatible,
                    "senders write only fields both revisions declare (field rows list any others)".into(),
                ),
                (
                    Effect::Compatible,
                    "senders write only fields both revisions declare (field rows list any others)".into(),
                ),
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
        let show = |t: &Option<(String, String)>| {
            t.as_ref().map(|(f, v)| format!("`{f}` = {v}")).unwrap_or_else(|| "none".into())
        };
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
                    let b =
                        (Effect::always(), "array_like: the tag occupies position 0, shifting every field".to_string());
                    (b.clone(), b, Bytes::Differ("position 0 holds the tag".into()))
                }
            }
        } else {
            // A map decoder checks a tag key it knows, ignores one it does not (unless forbidden), and accepts a
            // message without its tag key.
            let dir = |wt: &Option<(String, String)>,
                       rt: &Option<(String, String)>,
                       reader: &StructDef|
             -> (Effect, String) {
                match (wt, rt) {
                    (Some((wf, wv)), Some((rf, rv))) if wf == rf && wv != rv => {
                        (Effect::always(), format!("the decoder checks `{rf}` and rejects {wv}"))
                    }
                    (Some((wf, _)), _) if forbids(reader) && rt.as_ref().is_none_or(|(rf, _)| rf != wf) => {
                        (Effect::always(), format!("the decoder forbids the unknown key `{wf}`"))
                    }
                    (Some((wf, _)), _) if rt.as_ref().is_none_or(|(rf, _)| rf != wf) => {
                        (Effect::Compatible, format!("the tag key `{wf}` is unknown to the decoder: ignored"))
                    }
                    (None, Some(_)) => (Effect::Compatible, "a message without the tag key is accepted".into()),
                    _ => (Effect::Compatible, "the tag matches".into()),
                }
            };
            (dir(&tn, &to, so), dir(&to, &tn, sn), Bytes::Differ("every message carries the tag".into()))
        };
        out.push(cx.change(Kind::StructOption, &subject, what, orn, nro, bytes).witness(plain()));
    }
    if so.kind == StructKind::MsgspecStruct
        && sn.kind == StructKind::MsgspecStruct
        && so.options.rename != sn.options.rename
    {
        let changed: Vec<(&FieldDef, &FieldDef)> = so
            .fields
            .iter()
            .filter_map(|a| sn.fields.iter().find(|b| b.name == a.name).map(|b| (a, b)))
            .filter(|(a, b)| wire_name(so, a) != wire_name(sn, b))
            .collect();
        let what = format!(
            "rename: {} → {}",
            so.options.rename.as_deref().unwrap_or("none"),
            sn.options.rename.as_deref().unwrap_or("none")
        );
        let w = cx.witness(
            Probe::using(obj(gn.baseline(sn)), obj(gn.full(sn))),
            Probe::using(obj(go.baseline(so)), obj(go.full(so))),
            vec![],
        );
        let (orn, nro, bytes) = if !map || changed.is_empty() {
            let c = (
                Effect::Compatible,
                if map { "no key changes".to_string() } else { "array_like: keys are not on the wire".to_string() },
            );
            (c.clone(), c, Bytes::Same)
        } else {
            let keys = changed
                .iter()
                .map(|(a, b)| format!("`{}` → `{}`", wire_name(so, a), wire_name(sn, b)))
                .collect::<Vec<_>>()
                .join(", ");
            // `new_writes`: the new revision writes, the old one reads.
            let dir = |new_writes: bool| {
                let (writer, reader) = if new_writes { (sn, so) } else { (so, sn) };
                let any_required = changed.iter().any(|(a, b)| if new_writes { a.required() } else { b.required() });
                let any_always = changed.iter().any(|(a, b)| always_written(writer, if new_writes { b } else { a }));
                if any_required || (forbids(reader) && any_always) {
                    (
                        Effect::always(),
                        format!("keys change ({keys}): the decoder misses a required key or forbids the new ones"),
                    )
                } else {
                    (
                        Effect::when("a field whose key changed holds a non-default value"),
                        format!("keys change ({keys}): the decoder reads those fields as their defaults"),
                    )
                }
            };
            let orn = dir(true);
            let nro = dir(false);
            let any_always = changed.iter().any(|(a, b)| always_written(so, a) || always_written(sn, b));
            (
                orn,
                nro,
                if any_always {
                    Bytes::Differ(format!("keys change: {keys}"))
                } else {
                    Bytes::DifferWhen(format!("messages that carry a renamed key ({keys})"))
                },
            )
        };
        out.push(cx.change(Kind::StructOption, &subject, what, orn, nro, bytes).witness(w));
    }
    for (opt, a, b) in [("dict", so.options.dict, sn.options.dict), ("frozen", so.options.frozen, sn.options.frozen)] {
        if a != b {
            let c = (Effect::Compatible, "no wire effect".to_string());
            out.push(
                cx.change(Kind::StructOption, &subject, format!("{opt}: {a} → {b}"), c.clone(), c, Bytes::Same)
                    .witness(plain()),
            );
        }
    }
}

/// The map header: msgspec writes it for the declared entry count (fields + tag), fixmap below 16, map16 from
/// 16 (`spec/MSGSPEC.md` §3), so crossing 16 changes the bytes of every message.
pub(super) fn map_header(cx: &Ctx, out: &mut Vec<Change>) {
    let (so, sn) = (cx.old.def, cx.new.def);
    let (go, gn) = (Gen::new(cx.old.rev), Gen::new(cx.new.rev));
    let (d_old, d_new) = (declared(cx.old.name, so), declared(cx.new.name, sn));
    if (d_old >= 16) != (d_new >= 16) {
        let w = cx.witness(Probe::plain(obj(gn.baseline(sn))), Probe::plain(obj(go.baseline(so))), vec![]);
        let (from, to) =
            if d_new >= 16 { ("fixmap (`8N`)", "map16 (`de 00 NN`)") } else { ("map16 (`de 00 NN`)", "fixmap (`8N`)") };
        out.push(
            cx.change(
                Kind::MapHeader,
                &cx.prefix,
                format!("{d_old} → {d_new} declared map entries"),
                (Effect::Compatible, "decoders accept any header width".into()),
                (Effect::Compatible, "decoders accept any header width".into()),
                Bytes::Differ(format!(
                    "msgspec sizes the header from the declared count: every message's header goes from {from} to {to}"
                )),
            )
            .witness(w),
        );
    }
}
