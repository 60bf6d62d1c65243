//! The Wireshark dissector (`mooncake-conformance dissector`): a Lua plugin generated from `spec/`. The spec's
//! part — every revision, every side-channel message with its fields, types, defaults and docs, the status
//! enums with their terminal flags, the reply texts with their statuses, the bootstrap routes and models, the
//! transfer engine's handshake types, opcodes and status codes — is written as Lua tables; the code that walks
//! them (`runtime.lua`: a MessagePack and a JSON reader, the type check that says which revisions a message
//! fits, ZMTP 3 framing, request/reply pairing, the transfer engine's framing, the bootstrap annotation) is the
//! same for every spec. The committed copy is [`PATH`]; `conformance/tests/suite/dissector.rs` fails when it is
//! stale (`BLESS=1` rewrites it), as `tests/generated.rs` does for `schema/`.
//!
//! Hooking: Wireshark before 4.2 has no ZMTP dissector (4.0.17, Debian 12: `tshark -G protocols` lists none),
//! so the plugin frames ZMTP 3 itself; where Wireshark has one, the plugin hands each connection to it and
//! registers its payload dissector in ZMTP's `zmtp.protocol` table (keyed by TCP port) for both ports of every
//! connection whose first bytes are a ZMTP greeting — a TCP heuristic finds them either way.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use indexmap::IndexMap;
use mooncake_wire::spec::{Literal, Revision, Spec, StructDef, StructKind, Tag, TypeExpr};

/// Where the generated plugin is committed, relative to the repository root.
pub const PATH: &str = "tools/wireshark/mooncake.lua";
/// The spec-independent code.
const RUNTIME: &str = include_str!("runtime.lua");
/// How deep a type may nest structs before the generator writes `any`.
const MAX_TYPE_DEPTH: usize = 8;

/// The Lua plugin for `spec`.
pub fn lua(spec: &Spec) -> String {
    let revs: Vec<&Revision> = spec.families.iter().flat_map(|f| f.revisions.iter().map(|r| r.as_ref())).collect();
    let mut out = String::from(HEADER);
    out += "local REVISIONS = {\n";
    for r in &revs {
        let _ = writeln!(
            out,
            "  {{ name = {}, family = {}, generation = {}, releases = {}, summary = {} }},",
            q(&r.revision),
            q(&r.family),
            r.generation,
            q(&r.releases.join(", ")),
            q(&r.summary)
        );
    }
    out += "}\n\n";
    out += &messages(&revs);
    out += &reply_texts(&revs);
    out += &routes(&revs);
    out += &directions(&revs);
    out += &id_fields(&revs);
    out += &te();
    let port = revs.iter().filter_map(|r| r.bootstrap.as_ref()).map(|b| b.default_port).next().unwrap_or(8998);
    let _ = writeln!(out, "local BOOTSTRAP_PORT = {port}\n");
    out += RUNTIME;
    out
}

const HEADER: &str =
    "-- @generated from spec/ by mooncake-conformance (conformance/src/dissector). Do not edit: change spec/ and
-- regenerate with `mooncake-conformance dissector --out tools/wireshark/mooncake.lua` (or
-- `BLESS=1 cargo test -p mooncake-conformance --test suite -- dissector`).
--
-- A Wireshark (4.0 or newer) plugin for vLLM's Mooncake KV-transfer traffic: the side channel's ZeroMQ
-- messages of every spec revision (field names, the revisions a message fits, status names, reply texts,
-- request/reply pairing), the transfer engine's P2P handshake and TCP data header, and the bootstrap server's
-- JSON. Use: tshark -X lua_script:mooncake.lua -r capture.pcapng, or copy it to ~/.local/lib/wireshark/plugins/.
-- Filters: mooncake, mooncake.message, mooncake.status, mooncake.revisions, mooncake.<Message>.<field>,
-- mooncake_te, mooncake_bootstrap.

";

/// A Lua string literal: printable ASCII as is, everything else as decimal escapes (bytes of UTF-8 kept).
fn q(s: &str) -> String {
    let mut o = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' => o += "\\\"",
            b'\\' => o += "\\\\",
            0x20..=0x7e => o.push(b as char),
            _ => {
                let _ = write!(o, "\\{b:03}");
            }
        }
    }
    o.push('"');
    o
}

/// A Lua pattern matching a reply or detail template: literal text, each `{…}` any text.
fn pattern(template: &str) -> String {
    let shape = mooncake_wire::spec::text_shape(template);
    let mut p = String::from("^");
    let mut rest = shape.as_str();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("{}") {
            p += ".-";
            rest = r;
        } else if let Some(r) = rest.strip_prefix("{{") {
            p += "{";
            rest = r;
        } else if let Some(r) = rest.strip_prefix("}}") {
            p += "}";
            rest = r;
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            if "^$()%.[]*+-?".contains(c) {
                p.push('%');
            }
            p.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    p + "$"
}

/// The names a type can refer to: the revision's aliases, enums and structs, and its bootstrap models.
struct Names<'a> {
    rev: &'a Revision,
    models: Option<&'a IndexMap<String, StructDef>>,
}

impl Names<'_> {
    /// A type as a Lua table (`{ k = "list", e = { k = "int" } }`), names resolved.
    fn ty(&self, t: &TypeExpr, depth: usize) -> String {
        match t {
            TypeExpr::Int => "{ k = \"int\" }".into(),
            TypeExpr::Str => "{ k = \"str\" }".into(),
            TypeExpr::Bool => "{ k = \"bool\" }".into(),
            TypeExpr::Float => "{ k = \"float\" }".into(),
            TypeExpr::Bytes => "{ k = \"bytes\" }".into(),
            TypeExpr::Any => "{ k = \"any\" }".into(),
            TypeExpr::List(e) => format!("{{ k = \"list\", e = {} }}", self.ty(e, depth)),
            TypeExpr::VarTuple(e) => format!("{{ k = \"vartuple\", e = {} }}", self.ty(e, depth)),
            TypeExpr::Optional(e) => format!("{{ k = \"opt\", e = {} }}", self.ty(e, depth)),
            TypeExpr::Dict(k, v) => {
                format!("{{ k = \"dict\", key = {}, val = {} }}", self.ty(k, depth), self.ty(v, depth))
            }
            TypeExpr::Tuple(items) => {
                let items: Vec<String> = items.iter().map(|i| self.ty(i, depth)).collect();
                format!("{{ k = \"tuple\", items = {{ {} }} }}", items.join(", "))
            }
            TypeExpr::Named(n) => self.named(n, depth),
        }
    }

    fn named(&self, n: &str, depth: usize) -> String {
        if let Some(a) = self.rev.aliases.get(n) {
            return self.ty(&a.ty, depth);
        }
        if let Some(e) = self.rev.enums.get(n) {
            let members: Vec<String> = e
                .members
                .iter()
                .map(|m| {
                    format!("[{}] = {{ name = {}, terminal = {} }}", m.value, q(&m.name), m.terminal.unwrap_or(false))
                })
                .collect();
            return format!("{{ k = \"enum\", name = {}, members = {{ {} }} }}", q(n), members.join(", "));
        }
        let s = self.rev.structs.get(n).or_else(|| self.models.and_then(|m| m.get(n)));
        match s {
            Some(s) if depth < MAX_TYPE_DEPTH => {
                format!("{{ k = \"struct\", s = {} }}", self.structure(n, s, depth + 1))
            }
            _ => "{ k = \"any\" }".into(),
        }
    }

    /// A struct as the runtime reads it: its name, encoding and fields.
    fn structure(&self, name: &str, s: &StructDef, depth: usize) -> String {
        let kind = if s.kind == StructKind::Tuple { "tuple" } else { "map" };
        let mut o = format!("{{ name = {}, kind = \"{kind}\", array_like = {}", q(name), s.options.array_like);
        if let Some(tag) = &s.options.tag {
            let value = match tag {
                Tag::Bool(false) => None,
                Tag::Bool(true) => Some(json_str(name)),
                Tag::Int(i) => Some(i.to_string()),
                Tag::Str(t) => Some(json_str(t)),
            };
            if let Some(v) = value {
                let field = s.options.tag_field.clone().unwrap_or_else(|| "type".into());
                let _ = write!(o, ", tag_field = {}, tag = {}", q(&field), q(&v));
            }
        }
        o += ", fields = {\n";
        for f in &s.fields {
            let _ = write!(
                o,
                "    {{ name = {}, ty = {}, req = {}, default = {}, doc = {}, type = {}",
                q(&f.name),
                q(&f.ty.to_string()),
                f.required(),
                q(&f.default_display()),
                q(&f.doc),
                self.ty(&f.ty, depth)
            );
            if let Some(c) = &f.const_value {
                let _ = write!(o, ", const = {}", q(&const_json(c)));
            }
            o += " },\n";
        }
        o + "  } }"
    }
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    serde_json::Value::String(s.into()).to_string()
}

/// A field's constant as the runtime's JSON text of the value: bytes as hex (as the recorder writes them).
fn const_json(c: &str) -> String {
    match Literal::parse(c) {
        Ok(Literal::Bytes(b)) => json_str(&hex::encode(b)),
        Ok(Literal::Str(s)) => json_str(&s),
        Ok(Literal::Int(i)) => i.to_string(),
        Ok(Literal::Bool(b)) => b.to_string(),
        _ => json_str(c),
    }
}

/// Every side-channel message of every revision, one entry per distinct definition with the revisions that
/// share it (their indices in `REVISIONS`, 1-based).
fn messages(revs: &[&Revision]) -> String {
    let mut shapes: IndexMap<String, Vec<usize>> = IndexMap::new();
    for (i, r) in revs.iter().enumerate() {
        let names = Names { rev: r, models: None };
        for m in &r.transport.messages {
            let mut o = format!(
                "name = {}, encoding = {}, from = {}, to = {}, answered_by = {}",
                q(&m.name),
                q(&m.encoding),
                q(&m.from),
                q(&m.to),
                m.answered_by.as_deref().map_or("nil".into(), q)
            );
            if let Some(s) = r.structs.get(&m.name).filter(|_| m.encoding == "msgpack") {
                let st = names.structure(&m.name, s, 1);
                // The struct's table minus its braces and its name (the message's): its keys join the message's.
                let inner = &st[2..st.len() - 2];
                let _ = write!(o, ", {}", inner.strip_prefix(&format!("name = {}, ", q(&m.name))).unwrap_or(inner));
            }
            if !m.constants.is_empty() {
                o += ", constants = {";
                for c in &m.constants {
                    let _ = write!(o, " {{ name = {}, bytes = {}, doc = {} }},", q(&c.name), q(&c.bytes), q(&c.doc));
                }
                o += " }";
            }
            shapes.entry(o).or_default().push(i + 1);
        }
    }
    let mut out = String::from("local MESSAGES = {\n");
    for (body, idx) in &shapes {
        let _ = writeln!(out, "{{ revs = {{ {} }}, {body} }},", join(idx));
    }
    out + "}\n\n"
}

fn join(idx: &[usize]) -> String {
    idx.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
}

/// The reply texts, one entry per (name, text, statuses) with its revisions, and which field carries them.
fn reply_texts(revs: &[&Revision]) -> String {
    let mut texts: IndexMap<String, Vec<usize>> = IndexMap::new();
    let mut carrier = None;
    for (i, r) in revs.iter().enumerate() {
        let Some(rep) = &r.replies else { continue };
        carrier.get_or_insert_with(|| format!("{{ message = {}, field = {} }}", q(&rep.message), q(&rep.field)));
        for t in &rep.texts {
            let status: Vec<String> = t.status.iter().map(|s| q(s)).collect();
            let key = format!(
                "name = {}, text = {}, pattern = {}, status = {{ {} }}",
                q(&t.name),
                q(&t.text),
                q(&pattern(&t.text)),
                status.join(", ")
            );
            texts.entry(key).or_default().push(i + 1);
        }
    }
    let mut out = format!("local REPLIES = {}\nlocal REPLY_TEXTS = {{\n", carrier.unwrap_or_else(|| "nil".into()));
    for (body, idx) in &texts {
        let _ = writeln!(out, "  {{ revs = {{ {} }}, {body} }},", join(idx));
    }
    out + "}\n\n"
}

/// The bootstrap routes with their request and response bodies as types, one entry per distinct definition.
fn routes(revs: &[&Revision]) -> String {
    let mut shapes: IndexMap<String, Vec<usize>> = IndexMap::new();
    for (i, r) in revs.iter().enumerate() {
        let Some(b) = &r.bootstrap else { continue };
        let names = Names { rev: r, models: Some(&b.models) };
        for route in &b.routes {
            let request = route.request.as_deref().map_or("nil".into(), |m| names.named(m, 0));
            let mut o = format!(
                "method = {}, path = {}, request = {request}, responses = {{\n",
                q(&route.method),
                q(&route.path)
            );
            for resp in &route.responses {
                let body = match resp.body.as_deref().map(TypeExpr::parse) {
                    Some(Ok(t)) => names.ty(&t, 0),
                    _ => "nil".into(),
                };
                let detail = resp.detail.as_deref().map_or("nil".into(), |d| q(&pattern(d)));
                let _ = writeln!(
                    o,
                    "    {{ status = {}, body = {body}, detail = {detail}, when = {} }},",
                    resp.status,
                    q(&resp.when)
                );
            }
            shapes.entry(o + "  }").or_default().push(i + 1);
        }
    }
    let mut out = String::from("local ROUTES = {\n");
    for (body, idx) in &shapes {
        let _ = writeln!(out, "{{ revs = {{ {} }}, {body} }},", join(idx));
    }
    out + "}\n\n"
}

/// Which roles a message between two socket types goes between: the pairs of the spec's sockets, where one pair
/// of socket types means one direction in every revision.
fn directions(revs: &[&Revision]) -> String {
    let mut pairs: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    for r in revs {
        for m in &r.transport.messages {
            let (Some(a), Some(b)) = (r.transport.sockets.get(&m.from), r.transport.sockets.get(&m.to)) else {
                continue;
            };
            let v = pairs.entry((a.socket_type.clone(), b.socket_type.clone())).or_default();
            if !v.contains(&(m.from.clone(), m.to.clone())) {
                v.push((m.from.clone(), m.to.clone()));
            }
        }
    }
    let mut out = String::from("local DIRECTIONS = {\n");
    for ((a, b), roles) in &pairs {
        if let [(from, to)] = roles.as_slice() {
            let _ =
                writeln!(out, "  {{ sender = {}, receiver = {}, from = {}, to = {} }},", q(a), q(b), q(from), q(to));
        }
    }
    out + "}\n\n"
}

/// The fields that name request ids (their type mentions the alias `ReqId`): in requests (a message another
/// answers) and in answers, for the pairing check.
fn id_fields(revs: &[&Revision]) -> String {
    let (mut req, mut rep) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for r in revs {
        for m in &r.transport.messages {
            let Some(s) = r.structs.get(&m.name) else { continue };
            for f in s.fields.iter().filter(|f| f.ty.to_string().contains("ReqId")) {
                if m.answered_by.is_some() {
                    req.insert(f.name.clone())
                } else {
                    rep.insert(f.name.clone())
                };
            }
        }
    }
    let set = |s: &std::collections::BTreeSet<String>| {
        s.iter().map(|n| format!("[{}] = true", q(n))).collect::<Vec<_>>().join(", ")
    };
    format!("local REQUEST_ID_FIELDS = {{ {} }}\nlocal REPLY_ID_FIELDS = {{ {} }}\n\n", set(&req), set(&rep))
}

/// The transfer engine's wire numbers from the built-in `spec/transfer-engine/mooncake.toml` (a spec read from a
/// directory carries push and pull revisions only).
fn te() -> String {
    let text = Spec::builtin_files()
        .iter()
        .find(|(p, _)| p.ends_with("transfer-engine/mooncake.toml"))
        .map(|(_, t)| *t)
        .unwrap_or("");
    let items: BTreeMap<String, (toml::Value, String)> = toml::from_str::<toml::Value>(text)
        .ok()
        .and_then(|v| v.get("items").and_then(|i| i.as_array()).cloned())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| {
            let name = i.get("name")?.as_str()?.to_string();
            Some((name, (i.get("value")?.clone(), i.get("doc")?.as_str()?.to_string())))
        })
        .collect();
    let int = |n: &str| items.get(n).and_then(|(v, _)| v.as_integer()).unwrap_or(0);
    let group = |prefix: &str| {
        let mut v: Vec<String> = items
            .iter()
            .filter_map(|(n, (val, _))| Some((n.strip_prefix(prefix)?, val.as_integer()?)))
            .filter(|(n, _)| !n.contains('.') && *n != "v2_flag" && *n != "magic")
            .map(|(n, val)| format!("[{val}] = {}", q(n)))
            .collect();
        v.sort();
        v.join(", ")
    };
    let segment: Vec<String> = items
        .iter()
        .filter_map(|(n, (_, doc))| Some(format!("{} = {}", n.strip_prefix("segment.")?, q(doc))))
        .filter(|s| !s.starts_with("json ="))
        .collect();
    let types = group("handshake.type.");
    let max_type = items
        .iter()
        .filter(|(n, _)| n.starts_with("handshake.type."))
        .filter_map(|(_, (v, _))| v.as_integer())
        .max()
        .unwrap_or(0);
    format!(
        "local TE = {{ max_length = {}, types = {{ {types} }}, max_type = {max_type}, header_length = {}, opcodes = {{ {} }}, write = {}, v2_flag = {}, statuses = {{ {} }}, segment = {{ {} }} }}\n\n",
        int("handshake.max_length"),
        int("data.header_length"),
        group("data.opcode."),
        int("data.opcode.write"),
        int("data.opcode.v2_flag"),
        group("data.status."),
        segment.join(", ")
    )
}
