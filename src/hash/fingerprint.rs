//! The wire fingerprint of a spec revision: SHA-256 over a canonical document of everything that decides the
//! bytes of its msgspec messages — each struct's options and fields in order (Python name, wire name, type
//! with aliases resolved, required or default) and each enum's members. Defined in `spec/README.md`, "Wire
//! fingerprint"; `tests/hash/wire_fingerprint.py` computes the same digest from live msgspec classes with
//! `msgspec.inspect`, and `conformance/tests/suite/wire_fingerprint.rs` shows both agree for every revision.
//!
//! The document is a Python value hashed with [`super::hash_factors`] (`json.dumps(doc, sort_keys=True)`),
//! so the Python side needs nothing but the standard library to reproduce it.

use std::collections::BTreeSet;

use super::pyvalue::PyValue;
use super::tagged::to_tagged_json;
use super::HashError;
use crate::spec::{Literal, Revision, StructKind, Tag, TypeExpr};

/// Version of the document layout, part of the document.
pub(crate) const FORMAT: &str = "mooncake-wire-fingerprint/1";

/// The canonical document of a revision's wire.
pub fn wire_document(rev: &Revision) -> Result<PyValue, HashError> {
    let mut structs = Vec::new();
    let mut dataclasses = Vec::new();
    for (name, def) in &rev.structs {
        if def.kind == StructKind::Dataclass {
            // A dataclass: every field, always written; no options.
            dataclasses.push((
                name.as_str(),
                PyValue::str_dict([("fields", PyValue::List(field_entries(name, def, rev, None)?))]),
            ));
            continue;
        }
        if def.kind != StructKind::MsgspecStruct {
            continue;
        }
        let o = &def.options;
        let (tag_field, tag) = match &o.tag {
            None | Some(Tag::Bool(false)) => (PyValue::None, PyValue::None),
            Some(t) => (
                PyValue::str(o.tag_field.clone().unwrap_or_else(|| "type".into())),
                match t {
                    Tag::Bool(_) => PyValue::str(name.as_str()),
                    Tag::Str(s) => PyValue::str(s.as_str()),
                    Tag::Int(i) => PyValue::int(*i),
                },
            ),
        };
        let fields = field_entries(name, def, rev, o.rename.as_deref())?;
        structs.push((
            name.as_str(),
            PyValue::str_dict([
                ("omit_defaults", PyValue::Bool(o.omit_defaults)),
                ("array_like", PyValue::Bool(o.array_like)),
                ("forbid_unknown_fields", PyValue::Bool(o.forbid_unknown_fields)),
                ("tag_field", tag_field),
                ("tag", tag),
                ("fields", PyValue::List(fields)),
            ]),
        ));
    }
    let enums = rev
        .enums
        .iter()
        .map(|(name, e)| {
            let members = e
                .members
                .iter()
                .map(|m| PyValue::List(vec![PyValue::str(m.name.as_str()), PyValue::int(m.value)]))
                .collect();
            (
                name.as_str(),
                PyValue::str_dict([("kind", PyValue::str(e.kind.as_str())), ("members", PyValue::List(members))]),
            )
        })
        .collect::<Vec<_>>();
    let mut doc = vec![
        ("format", PyValue::str(FORMAT)),
        ("structs", PyValue::str_dict(structs)),
        ("enums", PyValue::str_dict(enums)),
    ];
    // Only revisions with dataclass messages (the pull family) have this key, so every push fingerprint is
    // what it was before dataclasses were covered.
    if !dataclasses.is_empty() {
        doc.push(("dataclasses", PyValue::str_dict(dataclasses)));
    }
    Ok(PyValue::str_dict(doc))
}

/// The `fields` list of a struct or dataclass entry.
fn field_entries(
    name: &str,
    def: &crate::spec::StructDef,
    rev: &Revision,
    rename: Option<&str>,
) -> Result<Vec<PyValue>, HashError> {
    let mut fields = Vec::new();
    for f in &def.fields {
        let encode_name = match rename {
            Some(mode) => crate::codec::rename_field(&f.name, mode).map_err(HashError::Rename)?,
            None => f.name.clone(),
        };
        let mut entry = vec![
            ("name", PyValue::str(f.name.as_str())),
            ("encode_name", PyValue::str(encode_name)),
            ("type", PyValue::str(type_text(&f.ty, rev)?)),
            ("required", PyValue::Bool(f.required())),
        ];
        if let Some(l) = f
            .default_literal()
            .map_err(|e| HashError::Default { field: format!("{name}.{}", f.name), message: e.to_string() })?
        {
            entry.push(("default", json_to_py(&to_tagged_json(&literal_value(&l)))));
        }
        fields.push(PyValue::str_dict(entry));
    }
    Ok(fields)
}

/// The wire fingerprint: 64 hex digits.
pub fn wire_fingerprint(rev: &Revision) -> Result<String, HashError> {
    Ok(super::hash_factors(&wire_document(rev)?)?.digest)
}

/// A default as the Python value the class holds (`[]` and `{}` come from `default_factory`).
fn literal_value(l: &Literal) -> PyValue {
    match l {
        Literal::None => PyValue::None,
        Literal::Bool(b) => PyValue::Bool(*b),
        Literal::Int(i) => PyValue::int(*i),
        Literal::Float(f) => PyValue::Float(*f),
        Literal::Str(s) => PyValue::str(s.as_str()),
        Literal::Bytes(b) => PyValue::Bytes(b.clone()),
        Literal::EmptyList => PyValue::List(vec![]),
        Literal::EmptyDict => PyValue::Dict(vec![]),
        Literal::EmptyTuple => PyValue::Tuple(vec![]),
    }
}

/// Plain JSON (the tagged form of a default) as a Python value, so the document holds it as data.
fn json_to_py(j: &serde_json::Value) -> PyValue {
    use serde_json::Value as J;
    match j {
        J::Null => PyValue::None,
        J::Bool(b) => PyValue::Bool(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => PyValue::int(i),
            (_, Some(u)) => PyValue::int(u),
            _ => PyValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => PyValue::str(s.as_str()),
        J::Array(a) => PyValue::List(a.iter().map(json_to_py).collect()),
        J::Object(m) => PyValue::Dict(m.iter().map(|(k, v)| (PyValue::str(k.as_str()), json_to_py(v))).collect()),
    }
}

/// A type with aliases resolved, in the fingerprint's type grammar (`spec/README.md`).
pub(crate) fn type_text(t: &TypeExpr, rev: &Revision) -> Result<String, HashError> {
    type_text_in(t, rev, &mut BTreeSet::new())
}

fn type_text_in(t: &TypeExpr, rev: &Revision, seen: &mut BTreeSet<String>) -> Result<String, HashError> {
    Ok(match t {
        TypeExpr::Int => "int".into(),
        TypeExpr::Str => "str".into(),
        TypeExpr::Bool => "bool".into(),
        TypeExpr::Float => "float".into(),
        TypeExpr::Bytes => "bytes".into(),
        TypeExpr::List(x) => format!("list[{}]", type_text_in(x, rev, seen)?),
        TypeExpr::Dict(k, v) => format!("dict[{}, {}]", type_text_in(k, rev, seen)?, type_text_in(v, rev, seen)?),
        TypeExpr::Tuple(xs) => {
            format!(
                "tuple[{}]",
                xs.iter().map(|x| type_text_in(x, rev, seen)).collect::<Result<Vec<_>, _>>()?.join(", ")
            )
        }
        TypeExpr::Optional(x) => format!("optional[{}]", type_text_in(x, rev, seen)?),
        TypeExpr::VarTuple(x) => format!("tuple[{}, ...]", type_text_in(x, rev, seen)?),
        TypeExpr::Any => "any".into(),
        TypeExpr::Named(n) => {
            if let Some(a) = rev.aliases.get(n) {
                if !seen.insert(n.clone()) {
                    return Err(HashError::SelfAlias(n.clone()));
                }
                let out = type_text_in(&a.ty, rev, seen)?;
                seen.remove(n);
                out
            } else if rev.enums.contains_key(n) {
                format!("enum:{n}")
            } else if rev.structs.contains_key(n) {
                format!("struct:{n}")
            } else {
                return Err(HashError::UnknownType(n.clone()));
            }
        }
    })
}

/// One way two revisions' wires differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireDifference {
    /// `struct MooncakeXferMetadata`, `struct MooncakeXferMetadata field layout_id`, `enum Status`.
    pub item: String,
    /// What differs, e.g. `only in vllm-0.33.0`, `type: list[int] → optional[list[int]]`.
    pub change: String,
}

/// Every difference between the wire documents of `a` and `b` (empty exactly when the fingerprints agree).
pub fn compare(a: &Revision, b: &Revision) -> Result<Vec<WireDifference>, HashError> {
    let (da, db) = (wire_document(a)?, wire_document(b)?);
    let mut out = Vec::new();
    let section =
        |d: &PyValue, name: &str| -> Vec<(String, PyValue)> { get(d, name).map(dict_entries).unwrap_or_default() };
    for (kind, sec) in [("struct", "structs"), ("enum", "enums"), ("dataclass", "dataclasses")] {
        let (sa, sb) = (section(&da, sec), section(&db, sec));
        for (name, va) in &sa {
            let item = format!("{kind} {name}");
            match sb.iter().find(|(n, _)| n == name) {
                None => out.push(WireDifference { item, change: format!("only in {}", a.revision) }),
                Some((_, vb)) if kind == "struct" || kind == "dataclass" => {
                    compare_struct(&item, va, vb, a, b, &mut out)
                }
                Some((_, vb)) => {
                    let (ma, mb) = (get(va, "members").map(show), get(vb, "members").map(show));
                    if ma != mb {
                        out.push(WireDifference {
                            item,
                            change: format!("members: {} → {}", ma.unwrap_or_default(), mb.unwrap_or_default()),
                        });
                    }
                }
            }
        }
        for (name, _) in &sb {
            if !sa.iter().any(|(n, _)| n == name) {
                out.push(WireDifference { item: format!("{kind} {name}"), change: format!("only in {}", b.revision) });
            }
        }
    }
    Ok(out)
}

fn compare_struct(item: &str, va: &PyValue, vb: &PyValue, a: &Revision, b: &Revision, out: &mut Vec<WireDifference>) {
    for opt in ["omit_defaults", "array_like", "forbid_unknown_fields", "tag_field", "tag"] {
        let (x, y) = (get(va, opt).map(show), get(vb, opt).map(show));
        if x != y {
            out.push(WireDifference {
                item: item.to_string(),
                change: format!("option {opt}: {} → {}", x.unwrap_or_default(), y.unwrap_or_default()),
            });
        }
    }
    let fields = |v: &PyValue| -> Vec<PyValue> {
        match get(v, "fields") {
            Some(PyValue::List(f)) => f.clone(),
            _ => vec![],
        }
    };
    let (fa, fb) = (fields(va), fields(vb));
    let name_of = |f: &PyValue| get(f, "name").map(show).unwrap_or_default();
    let names_a: Vec<String> = fa.iter().map(name_of).collect();
    let names_b: Vec<String> = fb.iter().map(name_of).collect();
    for (i, f) in fa.iter().enumerate() {
        let n = &names_a[i];
        let field_item = format!("{item} field {n}");
        match names_b.iter().position(|m| m == n) {
            None => out.push(WireDifference { item: field_item, change: format!("only in {}", a.revision) }),
            Some(j) => {
                for key in ["encode_name", "type", "required", "default"] {
                    let (x, y) = (get(f, key).map(show), get(&fb[j], key).map(show));
                    if x != y {
                        let s = |v: Option<String>| v.unwrap_or_else(|| "(none)".into());
                        out.push(WireDifference {
                            item: field_item.clone(),
                            change: format!("{key}: {} → {}", s(x), s(y)),
                        });
                    }
                }
            }
        }
    }
    for n in &names_b {
        if !names_a.contains(n) {
            out.push(WireDifference { item: format!("{item} field {n}"), change: format!("only in {}", b.revision) });
        }
    }
    let common_a: Vec<&String> = names_a.iter().filter(|n| names_b.contains(n)).collect();
    let common_b: Vec<&String> = names_b.iter().filter(|n| names_a.contains(n)).collect();
    if common_a != common_b {
        out.push(WireDifference {
            item: item.to_string(),
            change: format!("field order: {common_a:?} → {common_b:?}"),
        });
    }
}

fn get<'a>(d: &'a PyValue, key: &str) -> Option<&'a PyValue> {
    match d {
        PyValue::Dict(items) => items.iter().find(|(k, _)| matches!(k, PyValue::Str(s) if s == key)).map(|(_, v)| v),
        _ => None,
    }
}

fn dict_entries(d: &PyValue) -> Vec<(String, PyValue)> {
    match d {
        PyValue::Dict(items) => items
            .iter()
            .filter_map(|(k, v)| if let PyValue::Str(s) = k { Some((s.clone(), v.clone())) } else { None })
            .collect(),
        _ => vec![],
    }
}

/// A document value as compact JSON text, for reports.
fn show(v: &PyValue) -> String {
    match v {
        PyValue::Str(s) => s.clone(),
        other => super::pyjson::dumps_sorted(other).unwrap_or_else(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    #[test]
    fn every_revision_has_a_fingerprint_and_neighbours_differ_where_the_wire_changed() {
        let revs = &Spec::builtin().push().revisions;
        let prints: Vec<String> = revs.iter().map(|r| wire_fingerprint(r).unwrap()).collect();
        for (pair, fp) in revs.windows(2).zip(prints.windows(2)) {
            let diff = compare(&pair[0], &pair[1]).unwrap();
            assert_eq!(diff.is_empty(), fp[0] == fp[1], "{} vs {}: {diff:?}", pair[0].revision, pair[1].revision);
        }
        let newest = revs.last().unwrap();
        assert!(compare(newest, newest).unwrap().is_empty());
        let push = Spec::builtin().push();
        let (prev, newest) = (push.revision("vllm-0.32.0").unwrap(), push.revision("vllm-0.33.0").unwrap());
        let diff = compare(prev, newest).unwrap();
        assert!(
            diff.iter().any(|d| d.item == "struct MooncakeXferMetadata field layout_id"
                && d.change == format!("only in {}", newest.revision)),
            "{diff:?}"
        );
        assert!(
            diff.iter().any(|d| d.item == "enum MooncakeXferResponseStatus" && d.change.contains("LAYOUT_MISS")),
            "{diff:?}"
        );
        let diff = compare(newest, push.revision("vllm-0.34.0").unwrap()).unwrap();
        assert_eq!(
            diff.iter().map(|d| (d.item.as_str(), d.change.as_str())).collect::<Vec<_>>(),
            [("struct MooncakeLeaseHeartbeat", "only in vllm-0.34.0")]
        );
    }

    #[test]
    fn document_resolves_aliases_and_defaults() {
        let rev = Spec::builtin().revision("vllm-0.16.0..0.18.1").unwrap();
        let text = crate::hash::pyjson::dumps_sorted(&wire_document(rev).unwrap()).unwrap();
        assert!(text.contains(r#"{"encode_name": "req_blocks", "name": "req_blocks", "required": true, "type": "dict[str, tuple[str, list[int]]]"}"#), "{text}");
        assert!(text.contains(r#"{"default": null, "encode_name": "ok_reqs", "name": "ok_reqs", "required": false, "type": "optional[list[str]]"}"#), "{text}");
        assert!(text.contains(r#""type": "enum:MooncakeXferResponseStatus""#), "{text}");
    }
}
