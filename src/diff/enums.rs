//! Enum rules. An IntEnum travels as its integer value, so member names are not on the wire; a decoder rejects
//! a value that is not one of its members (``Invalid enum value 3 - at `$.status` ``), and reads a value that
//! names another member as that member. `terminal` flags end reply streams (spec `enums`, `terminal`).

use serde_json::{Map, Value as J};

use super::ctx::BothWays;
use super::model::{Area, Bytes, Change, Effect, Kind, Probe, Verdict, Witness};
use super::types::{mentions, Gen};
use crate::spec::{EnumDef, Revision};

/// A struct field (in the writer revision, also declared by the reader's struct of the same name) whose
/// type mentions the enum: where a witness carries the member.
fn site<'a>(writer: &'a Revision, reader: &Revision, enum_name: &str) -> Option<(&'a str, &'a str)> {
    for (sname, s) in &writer.structs {
        let Some(rs) = reader.structs.get(sname) else { continue };
        for f in &s.fields {
            let mut names = vec![];
            f.ty.names(&mut names);
            let hit = names
                .iter()
                .any(|n| n == enum_name || writer.aliases.get(n).is_some_and(|a| a.ty.to_string().contains(enum_name)));
            if hit && rs.fields.iter().any(|g| g.name == f.name) {
                return Some((sname, &f.name));
            }
        }
    }
    None
}

/// Writer values with the enum field holding a common member (plain) and `value` (using).
fn probe(
    writer: &Revision,
    reader: &Revision,
    enum_name: &str,
    common: Option<i64>,
    value: i64,
) -> Option<(String, Probe)> {
    let (sname, field) = site(writer, reader, enum_name)?;
    let s = &writer.structs[sname];
    let f = s.fields.iter().find(|f| f.name == field)?;
    let g = Gen::new(writer);
    let mut base: Map<String, J> = g.baseline(s);
    let plain = {
        let gp = Gen { rev: writer, pick: common.map(|c| (enum_name, c)) };
        base.insert(field.to_string(), gp.typical(&f.ty));
        J::Object(base.clone())
    };
    let gu = Gen { rev: writer, pick: Some((enum_name, value)) };
    base.insert(field.to_string(), gu.typical(&f.ty));
    Some((sname.to_string(), Probe::using(plain, J::Object(base))))
}

/// The message (transport `from`, `to`) that carries the enum, in the new revision or else the old.
fn peers(old: &Revision, new: &Revision, enum_name: &str) -> BothWays {
    for rev in [new, old] {
        for m in &rev.transport.messages {
            if m.encoding == "msgpack" && mentions(rev, &m.name, enum_name) {
                return BothWays::of(&m.from, &m.to);
            }
        }
    }
    BothWays::of("sender", "receiver")
}

pub(crate) fn diff_enum(name: &str, old: &Revision, eo: &EnumDef, new: &Revision, en: &EnumDef, out: &mut Vec<Change>) {
    let p = peers(old, new, name);
    let common: Option<i64> =
        eo.members.iter().find(|m| en.members.iter().any(|n| n.value == m.value && n.name == m.name)).map(|m| m.value);
    let row = |kind, subject: String, what: String, orn: (Effect, String), nro: (Effect, String), bytes| {
        Change::new(
            Area::Enum,
            kind,
            subject,
            what,
            Verdict::new(orn.0, &p.old_reads_new, orn.1),
            Verdict::new(nro.0, &p.new_reads_old, nro.1),
            bytes,
        )
    };
    // A witness where `writer` sends `value`.
    let wit = |orn: Option<i64>, nro: Option<i64>| -> Option<Witness> {
        let a = orn.map_or_else(|| probe(new, old, name, common, common?), |v| probe(new, old, name, common, v))?;
        let b = nro.map_or_else(|| probe(old, new, name, common, common?), |v| probe(old, new, name, common, v))?;
        (a.0 == b.0).then(|| Witness {
            old_struct: a.0.clone(),
            new_struct: a.0,
            renames: vec![],
            old_reads_new: a.1,
            new_reads_old: b.1,
        })
    };

    for m in &en.members {
        let subject = format!("{name}.{}", m.name);
        match eo.members.iter().find(|o| o.name == m.name) {
            Some(o) if o.value != m.value => {
                let reads = |v: i64, other: &EnumDef| match other.members.iter().find(|x| x.value == v) {
                    Some(x) => format!("decoders read {v} as `{}`", x.name),
                    None => format!("decoders reject {v} (``Invalid enum value {v}``)"),
                };
                out.push(
                    row(
                        Kind::EnumValueChanged,
                        subject,
                        format!("`{}` = {} → {}", m.name, o.value, m.value),
                        (
                            Effect::when(format!("`{}` ({}) is sent", m.name, m.value)),
                            format!("old {}", reads(m.value, eo)),
                        ),
                        (
                            Effect::when(format!("`{}` ({}) is sent", o.name, o.value)),
                            format!("new {}", reads(o.value, en)),
                        ),
                        Bytes::DifferWhen(format!("messages that carry `{}`", m.name)),
                    )
                    .witness(wit(Some(m.value), Some(o.value))),
                );
            }
            Some(o) => {
                if o.terminal != m.terminal {
                    let show = |t: Option<bool>| match t {
                        Some(true) => "terminal",
                        Some(false) => "non-terminal",
                        None => "unspecified",
                    };
                    let e = Effect::when(format!("`{}` is sent", m.name));
                    out.push(row(
                        Kind::EnumTerminal,
                        subject,
                        format!("`{}`: {} → {}", m.name, show(o.terminal), show(m.terminal)),
                        (
                            e.clone(),
                            "the old decoder and the new sender disagree on whether the reply stream ends there".into(),
                        ),
                        (
                            e,
                            "the new decoder and the old sender disagree on whether the reply stream ends there".into(),
                        ),
                        Bytes::Same,
                    ));
                }
            }
            None => {
                match eo.members.iter().find(|o| o.value == m.value && !en.members.iter().any(|n| n.name == o.name)) {
                    Some(o) => {
                        let c = (
                            Effect::Compatible,
                            "IntEnum members travel as their values; names are not on the wire".to_string(),
                        );
                        out.push(
                            row(
                                Kind::EnumMemberRenamed,
                                subject,
                                format!("`{}` ({}) renamed to `{}`", o.name, o.value, m.name),
                                c.clone(),
                                c,
                                Bytes::Same,
                            )
                            .witness(wit(Some(m.value), Some(o.value))),
                        );
                    }
                    None => out.push(
                        row(
                            Kind::EnumValueAdded,
                            subject,
                            format!("added `{}` = {}", m.name, m.value),
                            (
                                Effect::when(format!("`{}` ({}) is sent", m.name, m.value)),
                                format!("{} is not a member of the old enum", m.value),
                            ),
                            (Effect::Compatible, "old senders never send it".into()),
                            Bytes::Same,
                        )
                        .witness(wit(Some(m.value), None)),
                    ),
                }
            }
        }
    }
    for o in &eo.members {
        let renamed = en.members.iter().any(|n| n.value == o.value && !eo.members.iter().any(|x| x.name == n.name));
        if en.members.iter().any(|n| n.name == o.name) || renamed {
            continue;
        }
        out.push(
            row(
                Kind::EnumValueRemoved,
                format!("{name}.{}", o.name),
                format!("removed `{}` = {}", o.name, o.value),
                (Effect::Compatible, "new senders never send it".into()),
                (
                    Effect::when(format!("`{}` ({}) is sent", o.name, o.value)),
                    format!("{} is not a member of the new enum", o.value),
                ),
                Bytes::Same,
            )
            .witness(wit(None, Some(o.value))),
        );
    }
}
