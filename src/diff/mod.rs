//! Wire-aware diff of two spec revisions: every change, and its effect in both directions of a mixed
//! deployment under msgspec's decoding rules — *old decoder reads new bytes* and *new decoder reads old bytes*:
//! compatible, breaks always, or breaks only when the new field or value is actually sent — plus whether
//! messages that did not change keep their bytes.
//!
//! ```
//! use mooncake_wire::diff::diff;
//! use mooncake_wire::spec::Spec;
//! let push = Spec::builtin().push();
//! let r = diff(push.revision("vllm-0.24.0").unwrap(), push.revision("vllm-0.25.0..0.25.1").unwrap());
//! let c = r.changes.iter().find(|c| c.subject == "MooncakeXferMetadata.kv_block_lens").unwrap();
//! assert_eq!(c.new_reads_old.example.as_deref(), Some("Object missing required field `kv_block_lens`"));
//! ```
//!
//! The rules live in one file per area (`structs`, `fields`, `options`, `types`, `enums`, `transport`,
//! `bootstrap`, `params`, `behaviour`); `model` is what they produce ([`Report`], [`Change`]); `witness`
//! confirms each schema verdict by encoding a witness message with one revision's codec and decoding it with
//! the other's; [`render`] writes the Markdown, JSON and one-line reports.

pub(crate) mod behaviour;
pub(crate) mod bootstrap;
pub(crate) mod ctx;
pub(crate) mod enums;
pub(crate) mod fields;
pub(crate) mod model;
pub(crate) mod options;
pub(crate) mod params;
pub mod render;
pub(crate) mod replies;
pub(crate) mod structs;
pub(crate) mod transport;
pub(crate) mod types;
/// The witness runs behind each verdict; public only with the `testing` feature, for
/// `conformance/tests/suite/diff_msgspec.rs`.
#[cfg(feature = "testing")]
pub mod witness;
#[cfg(not(feature = "testing"))]
mod witness;

pub use model::{Area, Bytes};

pub(crate) use model::Added;
pub use model::{Age, Change, Counts, Effect, Kind, PeerEnd, PeerRole, Peers, Probe, Report, Verdict, Witness};

use std::sync::Arc;

use crate::codec::Codec;
use crate::spec::{Revision, StructKind};
use ctx::{BothWays, Ctx, Side};
use types::{incompat, mentions, Typed};

/// The peers of a struct: the transport message that is it or contains it (new revision first).
pub(crate) fn struct_peers(old: &Revision, new: &Revision, name: &str) -> BothWays {
    for rev in [new, old] {
        for m in &rev.transport.messages {
            if m.encoding == "msgpack" && rev.structs.contains_key(&m.name) && mentions(rev, &m.name, name) {
                return BothWays::of(&m.from, &m.to);
            }
        }
    }
    BothWays::of("sender", "receiver")
}

/// Classifies every difference between two resolved revisions (any two: consecutive or not, of one family
/// or another).
pub fn diff(old: &Arc<Revision>, new: &Arc<Revision>) -> Report {
    let mut changes: Vec<Change> = vec![];
    let mut notes: Vec<String> = vec![];

    if old.generation != new.generation {
        let why = format!(
            "generation {} and generation {} peers share no socket pattern, message or rendezvous (rows below)",
            old.generation, new.generation
        );
        changes.push(Change::new(
            Area::Generation,
            Kind::Generation,
            "generation",
            format!("connector generation {} → {}", old.generation, new.generation),
            Verdict::new(Effect::always(), &Peers::unnamed(Age::New), why.clone()),
            Verdict::new(Effect::always(), &Peers::unnamed(Age::Old), why),
            Bytes::NotApplicable("different protocols".into()),
        ));
    }
    for (name, so) in &old.structs {
        if let Some(sn) = new.structs.get(name) {
            let cx = Ctx {
                old: Side { rev: old, name, def: so },
                new: Side { rev: new, name, def: sn },
                peers: struct_peers(old, new, name),
                witnesses: true,
                area: Area::Struct,
                prefix: name.clone(),
            };
            structs::diff_struct(&cx, &mut changes);
        }
    }
    for (name, ao) in &old.aliases {
        let Some(an) = new.aliases.get(name) else { continue };
        if types::resolve(old, &ao.ty) == types::resolve(new, &an.ty) {
            continue;
        }
        let dir = |w: Typed, r: Typed| match incompat(w, r) {
            None => (Effect::Compatible, "every value reads as the other type".to_string()),
            Some(i) if i.shape => (
                Effect::always(),
                "values do not read as the other type (the field rows say when they are sent)".into(),
            ),
            Some(i) => (
                Effect::when(format!("a `{name}`{} {}", i.at, i.when)),
                "only some values read as the other type".into(),
            ),
        };
        let orn = dir(Typed { rev: new, ty: &an.ty }, Typed { rev: old, ty: &ao.ty });
        let nro = dir(Typed { rev: old, ty: &ao.ty }, Typed { rev: new, ty: &an.ty });
        changes.push(Change::new(
            Area::Alias,
            Kind::AliasType,
            format!("alias {name}"),
            format!("`{name}` = `{}` → `{}`", ao.ty.python(), an.ty.python()),
            Verdict::new(orn.0, &Peers::unnamed(Age::New), orn.1),
            Verdict::new(nro.0, &Peers::unnamed(Age::Old), nro.1),
            Bytes::NotApplicable("see the fields that use it".into()),
        ));
    }
    for (name, eo) in &old.enums {
        if let Some(en) = new.enums.get(name) {
            enums::diff_enum(name, old, eo, new, en, &mut changes);
        }
    }
    if old.generation == new.generation {
        uncarried(old, new, &mut changes);
    }
    let codecs = (Codec::new(old.clone()), Codec::new(new.clone()));
    let pair = match &codecs {
        (Ok(a), Ok(b)) => Some((a, b)),
        _ => None,
    };
    transport::diff_transport(old, new, pair, &mut changes);
    bootstrap::diff_bootstrap(old, new, &mut changes);
    params::diff_params(old, new, &mut changes);
    params::diff_extra_config(old, new, &mut changes);
    if old.generation == new.generation {
        replies::diff_replies(old, new, &mut changes);
        behaviour::diff_behaviour(old, new, &mut changes);
        behaviour::unclassified(old, new, &mut changes);
    } else {
        notes.push(
            "Behaviour is not compared across generations: no message of one generation reaches the other's logic."
                .into(),
        );
    }
    if new.base.as_deref() == Some(old.revision.as_str()) {
        attach_why(new, &mut changes);
    }
    match codecs {
        (Ok(co), Ok(cn)) => {
            let skips = witness::confounded(&changes);
            for (c, skip) in changes.iter_mut().zip(skips) {
                witness::confirm(&co, &cn, c, skip);
            }
        }
        (a, b) => notes.push(format!(
            "witnesses not run: {}",
            [a.err(), b.err()].into_iter().flatten().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")
        )),
    }
    for (name, s) in &new.structs {
        let tagged = s.options.tag.as_ref().is_some_and(|t| !matches!(t, crate::spec::Tag::Bool(false)));
        let declared = s.fields.len() + tagged as usize;
        if s.kind == StructKind::MsgspecStruct && !s.options.array_like && declared == 15 && new.message(name).is_some()
        {
            notes.push(format!(
                "`{name}` declares 15 map entries: one more and msgspec writes every {name} header as map16 (`de 00 NN`) instead of fixmap (`8N`)."
            ));
        }
    }
    let counts = count(&changes);
    let mut r = Report {
        old: old.revision.clone(),
        new: new.revision.clone(),
        old_generation: old.generation,
        new_generation: new.generation,
        summary: String::new(),
        counts,
        changes,
        notes,
    };
    r.summary = render::summary(&r);
    r
}

/// Whether a message of `rev` carries struct `name` (is it, or holds it in a field).
fn carried(rev: &Revision, name: &str) -> bool {
    rev.transport
        .messages
        .iter()
        .any(|m| m.encoding == "msgpack" && rev.structs.contains_key(&m.name) && mentions(rev, &m.name, name))
}

/// Structs and enums only one revision has that no message carries: a message, a field type or an enum
/// member row covers every other one. Such a struct is on no socket the spec knows, so who sends it and what
/// the other side does with it are for review.
fn uncarried(old: &Revision, new: &Revision, out: &mut Vec<Change>) {
    let any = (Peers::unnamed(Age::New), Peers::unnamed(Age::Old));
    let row = |area, kind, subject: &str, what: String, e: (Effect, String)| {
        Change::new(
            area,
            kind,
            subject,
            what,
            Verdict::new(e.0.clone(), &any.0, e.1.clone()),
            Verdict::new(e.0, &any.1, e.1),
            Bytes::NotApplicable("carried by no message the spec knows".into()),
        )
    };
    for (name, s) in
        new.structs.iter().filter(|(n, s)| !old.structs.contains_key(*n) && s.kind == StructKind::MsgspecStruct)
    {
        if carried(new, name) {
            continue;
        }
        let fields: Vec<String> = s.fields.iter().map(|f| format!("`{}: {}`", f.name, f.ty.python())).collect();
        out.push(
            row(
                Area::Struct,
                Kind::StructAdded,
                name,
                format!("`{name}` ({}) added", if fields.is_empty() { "no fields".into() } else { fields.join(", ") }),
                (
                    Effect::Review,
                    format!("no message of {} carries it: which socket sends it, and what an old peer does with it, the spec does not say", new.revision),
                ),
            )
            .adds(Added::Struct(name.clone())),
        );
    }
    for name in old
        .structs
        .iter()
        .filter(|(n, s)| !new.structs.contains_key(*n) && s.kind == StructKind::MsgspecStruct)
        .map(|(n, _)| n)
    {
        if carried(old, name) {
            continue;
        }
        out.push(row(
            Area::Struct,
            Kind::StructRemoved,
            name,
            format!("`{name}` removed"),
            (Effect::Compatible, format!("no message of {} carried it", old.revision)),
        ));
    }
    for name in new.enums.keys().filter(|n| !old.enums.contains_key(*n)) {
        if new.structs.keys().any(|s| mentions(new, s, name)) {
            continue;
        }
        out.push(
            row(
                Area::Enum,
                Kind::EnumAdded,
                name,
                format!("`{name}` added"),
                (
                    Effect::Review,
                    format!("no struct of {} uses it: where it travels, the spec does not say", new.revision),
                ),
            )
            .adds(Added::Enum(name.clone())),
        );
    }
}

/// Marks the rows of `r` that add something none of `known` describes — a struct, enum, reply text,
/// `kv_connector_extra_config` key or environment variable of vLLM source (`extract`) that no spec revision has:
/// the row is shown with why, a direction the rules found compatible becomes `review` (the spec cannot say what
/// it means to the other side), and [`Report::fails`] holds until a revision describes it or the change is
/// announced. `known` is every revision the caller takes as described (the bundled family; a spec file given
/// on the command line is one too).
pub fn mark_unspecified(r: &mut Report, known: &[&Revision]) {
    let names = |f: &dyn Fn(&Revision) -> bool| known.iter().any(|rev| f(rev));
    for c in &mut r.changes {
        let Some(a) = &c.adds else { continue };
        let (described, what) = match a {
            Added::Struct(n) => (names(&|rev| rev.structs.contains_key(n)), format!("struct `{n}`")),
            Added::Enum(n) => (names(&|rev| rev.enums.contains_key(n)), format!("enum `{n}`")),
            Added::Reply(shape) => (
                names(&|rev| rev.replies.as_ref().is_some_and(|rp| rp.texts.iter().any(|t| &t.shape() == shape))),
                format!("reply text {:?}", c.what.split('"').nth(1).unwrap_or(shape)),
            ),
            Added::ConfigKey(k) => {
                (names(&|rev| rev.extra_config.contains_key(k)), format!("kv_connector_extra_config key `{k}`"))
            }
            Added::Env(n) => (names(&|rev| rev.env.contains_key(n)), format!("environment variable `{n}`")),
        };
        if described {
            continue;
        }
        let why = format!("the {what} is in no revision of the spec: what it means to the other side is not described");
        for v in [&mut c.old_reads_new, &mut c.new_reads_old] {
            if v.effect == Effect::Compatible {
                v.effect = Effect::Review;
                v.reason = format!("{}; {why}", v.reason);
            }
        }
        c.unspecified = Some(why);
    }
    r.counts = count(&r.changes);
    r.summary = render::summary(r);
}

fn count(changes: &[Change]) -> Counts {
    let mut c = Counts { changes: changes.len(), ..Default::default() };
    for ch in changes {
        match ch.worst() {
            Effect::Breaks { .. } => c.breaks += 1,
            Effect::BreaksWhenSent { .. } => c.breaks_when_sent += 1,
            Effect::Review => c.review += 1,
            Effect::Compatible => c.compatible += 1,
        }
        if matches!(ch.bytes, Bytes::Differ(_) | Bytes::DifferWhen(_)) {
            c.bytes_change += 1;
        }
        if ch.unspecified.is_some() {
            c.unspecified += 1;
        }
    }
    c
}

/// The spec path an edit of a derived revision touches, in the form change subjects use
/// (`structs.X.fields.y.type` → `X.y.type`).
fn edit_subject(e: &crate::spec::Edit) -> String {
    let mut at = e.at.clone();
    if e.op == "insert" {
        if let Some(n) = e.item.as_ref().and_then(|i| i.get("name")).and_then(|n| n.as_str()) {
            at = format!("{at}.{n}");
        }
    }
    let at =
        at.strip_prefix("structs.").or_else(|| at.strip_prefix("enums.")).map(str::to_string).unwrap_or(at.clone());
    at.replace(".fields.", ".")
        .replace(".members.", ".")
        .replace("kv_transfer_params.keys.", "kv_transfer_params.")
        .replace("replies.texts.", "replies.")
}

/// Notes from the `why` of the edits that made each change (derived revisions only).
fn attach_why(new: &Revision, changes: &mut [Change]) {
    for e in &new.edits {
        let Some(why) = &e.why else { continue };
        let target = edit_subject(e);
        if let Some(c) =
            changes.iter_mut().find(|c| target == c.subject || target.starts_with(&format!("{}.", c.subject)))
        {
            c.notes.push(format!("spec: {why}"));
        }
    }
}

/// Every pair of consecutive revisions of a family, diffed.
#[cfg(test)]
fn consecutive(family: &crate::spec::Family) -> Vec<Report> {
    family.revisions.windows(2).map(|w| diff(&w[0], &w[1])).collect()
}

#[cfg(test)]
mod tests;
