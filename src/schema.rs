//! JSON Schema (2020-12) of every message, generated from the spec.
//!
//! The schema describes a message's JSON form (`msgspec.to_builtins`), which has the same keys, nesting and
//! value kinds as its MessagePack encoding. The body is shaped exactly as `msgspec.json.schema` shapes it for
//! the same class (a test compares the two); we add `description`s from the spec and an `x-mooncake` block.

use serde_json::{json, Map, Value as J};

use crate::codec::{Codec, Plan, Ty, TyId};
use crate::spec::Revision;

/// The schema of one message of a codec's revision.
pub fn message_schema(codec: &Codec, message: &str) -> Option<J> {
    let root = codec.message_type(message)?;
    let rev = codec.revision();
    let plan = codec.plan();
    let mut defs: Vec<(String, J)> = vec![];
    let mut g = Gen { plan, rev, defs: &mut defs };
    let r = g.ty(root);
    let mut top = Map::new();
    top.insert("$schema".into(), json!("https://json-schema.org/draft/2020-12/schema"));
    top.insert("$comment".into(), json!("Generated from spec/ by mooncake-wire. Do not edit: regenerate with `BLESS=1 cargo test --test generated`."));
    if let J::Object(m) = r {
        top.extend(m);
    }
    let mut d = Map::new();
    for (n, s) in defs {
        d.insert(n, s);
    }
    top.insert("$defs".into(), J::Object(d));
    let t = rev.message(message);
    top.insert(
        "x-mooncake".into(),
        json!({
            "family": rev.family,
            "revision": rev.revision,
            "releases": rev.releases,
            "message": message,
            "from": t.map(|t| t.from.as_str()),
            "to": t.map(|t| t.to.as_str()),
            "encoding": "msgpack (msgspec); this schema describes the msgspec.to_builtins JSON form",
            "source": rev.structs.get(message).map(|s| s.source.as_str()).or(rev.bootstrap.as_ref().map(|b| b.source.as_str())),
        }),
    );
    Some(J::Object(top))
}

struct Gen<'a> {
    plan: &'a Plan,
    rev: &'a Revision,
    defs: &'a mut Vec<(String, J)>,
}

impl Gen<'_> {
    fn doc_of_struct(&self, name: &str) -> Option<(&str, Vec<&str>)> {
        let s = self.rev.structs.get(name).or_else(|| self.rev.bootstrap.as_ref()?.models.get(name))?;
        Some((s.doc.as_str(), s.fields.iter().map(|f| f.doc.as_str()).collect()))
    }

    fn ty(&mut self, t: TyId) -> J {
        match &self.plan.types[t as usize] {
            Ty::Int => json!({"type": "integer"}),
            Ty::Str => json!({"type": "string"}),
            Ty::Bool => json!({"type": "boolean"}),
            Ty::Float => json!({"type": "number"}),
            Ty::Bytes => json!({"type": "string", "contentEncoding": "base64"}),
            Ty::List(e) | Ty::VarTuple(e) => json!({"type": "array", "items": self.ty(*e)}),
            Ty::Any => json!({}),
            Ty::Tuple(ts) => {
                let items: Vec<J> = ts.iter().map(|e| self.ty(*e)).collect();
                json!({"type": "array", "minItems": ts.len(), "maxItems": ts.len(), "prefixItems": items, "items": false})
            }
            Ty::Dict(_, v) => json!({"type": "object", "additionalProperties": self.ty(*v)}),
            Ty::Optional(inner) => json!({"anyOf": [self.ty(*inner), {"type": "null"}]}),
            Ty::Enum(e) => {
                let en = &self.plan.enums[*e as usize];
                if !self.defs.iter().any(|(n, _)| n == &en.name) {
                    let mut body =
                        json!({"title": en.name, "enum": en.members.iter().map(|(_, v)| *v).collect::<Vec<_>>()});
                    if let Some(d) = self.rev.enums.get(&en.name) {
                        let names: Vec<String> =
                            d.members.iter().map(|m| format!("{} = {}", m.name, m.value)).collect();
                        body["description"] =
                            json!(format!("{} Members: {}.", d.doc, names.join(", ")).trim().to_string());
                    }
                    self.defs.push((en.name.clone(), body));
                }
                json!({"$ref": format!("#/$defs/{}", en.name)})
            }
            Ty::Struct(s) => {
                let st = &self.plan.structs[*s as usize];
                let name = st.meta.name.clone();
                if !self.defs.iter().any(|(n, _)| *n == name) {
                    // Reserve the slot first: first-reference order, as msgspec lists $defs.
                    let slot = self.defs.len();
                    self.defs.push((name.clone(), J::Null));
                    let docs = self
                        .doc_of_struct(&name)
                        .map(|(d, f)| (d.to_string(), f.into_iter().map(str::to_string).collect::<Vec<_>>()));
                    let mut body = Map::new();
                    body.insert("title".into(), json!(name));
                    if let Some((d, _)) = &docs {
                        if !d.is_empty() {
                            body.insert("description".into(), json!(d));
                        }
                    }
                    let field_schema = |g: &mut Self, i: usize| {
                        let f = &st.fields[i];
                        let mut fs = g.ty(f.ty);
                        if let (J::Object(m), Some(d)) = (&mut fs, &f.default) {
                            m.insert("default".into(), crate::codec::Codec::to_json(d));
                        }
                        if let (J::Object(m), Some((_, fd))) = (&mut fs, &docs) {
                            if let Some(d) = fd.get(i).filter(|d| !d.is_empty()) {
                                m.insert("description".into(), json!(d));
                            }
                        }
                        fs
                    };
                    let tag = st.tag.as_ref().map(|(f, v)| {
                        let v = match v {
                            crate::codec::TagValue::Str(s) => json!(s),
                            crate::codec::TagValue::Int(i) => json!(i),
                        };
                        (f.clone(), json!({"enum": [v]}))
                    });
                    if st.array_like {
                        let mut items = vec![];
                        if let Some((_, t)) = &tag {
                            items.push(t.clone());
                        }
                        for i in 0..st.fields.len() {
                            items.push(field_schema(self, i));
                        }
                        body.insert("type".into(), json!("array"));
                        body.insert("prefixItems".into(), J::Array(items));
                        body.insert("minItems".into(), json!(st.min_array_len));
                        if st.forbid_unknown_fields {
                            body.insert("maxItems".into(), json!(st.declared));
                        }
                    } else {
                        let mut props = Map::new();
                        let mut required = vec![];
                        if let Some((f, t)) = &tag {
                            props.insert(f.clone(), t.clone());
                            required.push(json!(f));
                        }
                        for i in 0..st.fields.len() {
                            props.insert(st.fields[i].wire_name.clone(), field_schema(self, i));
                            if st.fields[i].default.is_none() {
                                required.push(json!(st.fields[i].wire_name));
                            }
                        }
                        body.insert("type".into(), json!("object"));
                        body.insert("properties".into(), J::Object(props));
                        body.insert("required".into(), J::Array(required));
                        if st.forbid_unknown_fields {
                            body.insert("additionalProperties".into(), json!(false));
                        }
                    }
                    self.defs[slot].1 = J::Object(body);
                }
                json!({"$ref": format!("#/$defs/{name}")})
            }
        }
    }
}
