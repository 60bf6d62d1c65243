//! What the struct, field and option rules share: the two sides of a struct being compared and who reads
//! whom ([`Ctx`], [`Side`], [`Peers`]), and the facts of a struct definition the rules read (its wire keys,
//! tag, declared field count, positions). Below `structs`, `fields` and `options`, so that the struct rules
//! can hand each difference to the other two and they can read these without importing back.

use serde_json::{Map, Value as J};

use super::model::{Age, Area, Bytes, Change, Effect, Kind, PeerRole, Peers, Probe, Verdict, Witness};
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
pub(crate) struct BothWays {
    pub(crate) old_reads_new: Peers,
    pub(crate) new_reads_old: Peers,
}

impl BothWays {
    /// Peers of a message sent from role `from` to role `to`.
    pub(crate) fn of(from: &str, to: &str) -> BothWays {
        BothWays {
            old_reads_new: Peers::new(Age::New, PeerRole::of(from), PeerRole::of(to)),
            new_reads_old: Peers::new(Age::Old, PeerRole::of(from), PeerRole::of(to)),
        }
    }

    /// Peers whose roles are unknown (`new → old`, `old → new`).
    pub(crate) fn unnamed() -> BothWays {
        BothWays { old_reads_new: Peers::unnamed(Age::New), new_reads_old: Peers::unnamed(Age::Old) }
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
    pub(crate) peers: BothWays,
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
