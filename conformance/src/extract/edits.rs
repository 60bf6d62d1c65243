//! What the extracted facts change in a base revision, as the spec's `[[edit]]`s (spec/README.md, "Derived
//! revisions: edits"): `insert` / `remove` / `set` on named arrays (fields, members), `set` of whole tables
//! (a new struct, enum or alias, struct options, the bootstrap routes). Docs, `terminal` flags, `when` texts and
//! everything the source does not say are the base's; what could not be read keeps the base's value and is
//! reported.

use indexmap::IndexMap;
use mooncake_wire::spec::{text_shape, FieldDef, Literal, LiteralError, Revision, StructDef, StructOptions, TypeExpr};
use toml::{Table, Value};

use super::facts::{BootstrapFact, Facts, FieldFact, ResponseFact};

/// The edits on one base, with notes on what was kept from the base for want of a derivable fact.
#[derive(Clone, Debug, Default)]
pub struct EditList {
    /// The edits, each a TOML table.
    pub edits: Vec<Table>,
    /// What was kept from the base, one sentence each.
    pub notes: Vec<String>,
}

impl EditList {
    fn push(&mut self, op: &str, at: &str, f: impl FnOnce(&mut Table)) {
        let mut t = Table::new();
        t.insert("op".into(), Value::String(op.into()));
        t.insert("at".into(), Value::String(at.into()));
        f(&mut t);
        self.edits.push(t);
    }
    fn note(&mut self, n: String) {
        if !self.notes.contains(&n) {
            self.notes.push(n);
        }
    }
}

/// A typed spec item as a plain table, without what the loader adds (`since`, `changed_in`).
fn plain<T: serde::Serialize>(v: &T) -> Table {
    let mut t = match Value::try_from(v) {
        Ok(Value::Table(t)) => t,
        _ => Table::new(),
    };
    strip(&mut t);
    t
}

fn strip(t: &mut Table) {
    t.remove("since");
    t.remove("changed_in");
    for (_, v) in t.iter_mut() {
        match v {
            Value::Table(s) => strip(s),
            Value::Array(a) => a.iter_mut().filter_map(Value::as_table_mut).for_each(strip),
            _ => {}
        }
    }
}

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

/// Every edit from `base` to the facts. `source` is the provenance written on new items.
pub fn edits(facts: &Facts, base: &Revision, source: &str) -> EditList {
    let mut out = EditList::default();
    aliases(facts, base, &mut out);
    enums(facts, base, source, &mut out);
    structs(facts, base, source, &mut out);
    match (&facts.bootstrap, &base.bootstrap) {
        (Some(b), Some(_)) => bootstrap(b, base, source, &mut out),
        (None, Some(_)) if facts.generation != Some(1) => {
            out.note("[bootstrap]: no bootstrap server found in the files read; kept from the base".into())
        }
        (Some(_), None) => out.note(format!(
            "[bootstrap]: the source has a bootstrap server but {} has none (a generation change is not derived)",
            base.revision
        )),
        _ => {}
    }
    replies(facts, base, source, &mut out);
    extra_config(facts, base, source, &mut out);
    env(facts, base, source, &mut out);
    decoders(facts, base, &mut out);
    out
}

/// A short name for a reply text: its first literal words (`KV expired on P side…` → `kv_expired_on_p`).
fn reply_name(text: &str, taken: &[String]) -> String {
    let words: Vec<String> = text_shape(text)
        .replace("{}", " ")
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(4)
        .map(str::to_ascii_lowercase)
        .collect();
    let stem = if words.is_empty() { "reply".to_string() } else { words.join("_") };
    let mut name = stem.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{stem}_{n}");
        n += 1;
    }
    name
}

/// The reply texts: one per shape, its statuses the union over the call sites that send it.
fn replies(facts: &Facts, base: &Revision, source: &str, out: &mut EditList) {
    let Some(br) = &base.replies else {
        if !facts.replies.is_empty() {
            out.note(format!(
                "[replies]: the source sends {} literal error texts, but {} has no [replies] (generation 1): not derived",
                facts.replies.len(),
                base.revision
            ));
        }
        return;
    };
    // Shape → (text, statuses, where).
    let mut found: IndexMap<String, (String, Vec<String>, String)> = IndexMap::new();
    for r in &facts.replies {
        if r.message != br.message {
            out.note(format!(
                "reply text {:?} ({}): sent in `{}`, not in {}'s `{}`: not derived",
                r.text,
                r.site.describe(),
                r.message,
                base.revision,
                br.message
            ));
            continue;
        }
        let e = found.entry(text_shape(&r.text)).or_insert_with(|| (r.text.clone(), vec![], r.site.describe()));
        for st in &r.status {
            if !e.1.contains(st) {
                e.1.push(st.clone());
            }
        }
    }
    for t in &br.texts {
        match found.get(&t.shape()) {
            None => match behaviour_naming(base, |v| v.as_str().is_some_and(|x| text_shape(x) == t.shape())) {
                Some(item) => out.note(format!(
                    "reply text {:?}: not in the files read, but {}'s behaviour.{item} (not derived) names it: kept",
                    t.text, base.revision
                )),
                None => out.push("remove", &format!("replies.texts.{}", t.name), |_| {}),
            },
            Some((_, st, _)) => {
                let (mut a, mut b) = (st.clone(), t.status.clone());
                a.sort();
                b.sort();
                if a != b {
                    out.push("set", &format!("replies.texts.{}.status", t.name), |e| {
                        e.insert("value".into(), Value::Array(st.iter().map(|x| s(x)).collect()));
                    });
                }
            }
        }
    }
    let mut taken: Vec<String> = br.texts.iter().map(|t| t.name.clone()).collect();
    for (shape, (text, st, at)) in &found {
        if br.texts.iter().any(|t| &t.shape() == shape) {
            continue;
        }
        let name = reply_name(text, &taken);
        taken.push(name.clone());
        out.push("insert", "replies.texts", |e| {
            let mut item = Table::new();
            item.insert("name".into(), s(&name));
            item.insert("text".into(), s(text));
            item.insert("status".into(), Value::Array(st.iter().map(|x| s(x)).collect()));
            e.insert("item".into(), Value::Table(item));
            e.insert("source".into(), s(&format!("{source}, {at}")));
        });
        out.note(format!("reply text {text:?}: when it is sent is not derived"));
    }
}

/// The first behaviour item of `base` holding a value (at any depth) that `hit` accepts.
fn behaviour_naming(base: &Revision, hit: impl Fn(&serde_json::Value) -> bool) -> Option<&'static str> {
    fn any(v: &serde_json::Value, hit: &dyn Fn(&serde_json::Value) -> bool) -> bool {
        hit(v)
            || match v {
                serde_json::Value::Array(a) => a.iter().any(|x| any(x, hit)),
                serde_json::Value::Object(m) => m.values().any(|x| any(x, hit)),
                _ => false,
            }
    }
    base.behaviour.rows().into_iter().find(|(_, v, _)| any(v, &hit)).map(|(k, _, _)| k.name())
}

/// The type a literal default tells (`'x'` → `str`), `None` when it tells none.
fn literal_type(default: &str) -> Option<&'static str> {
    match Literal::parse(default).ok()? {
        Literal::Str(_) => Some("str"),
        Literal::Int(_) => Some("int"),
        Literal::Float(_) => Some("float"),
        Literal::Bool(_) => Some("bool"),
        _ => None,
    }
}

fn extra_config(facts: &Facts, base: &Revision, source: &str, out: &mut EditList) {
    // Key → (defaults read, where first read).
    let mut found: IndexMap<String, (Vec<Option<String>>, String)> = IndexMap::new();
    for c in &facts.extra_config {
        let e = found.entry(c.name.clone()).or_insert_with(|| (vec![], c.site.describe()));
        if !e.0.contains(&c.default) {
            e.0.push(c.default.clone());
        }
    }
    for name in base.extra_config.keys() {
        if !found.contains_key(name) {
            match behaviour_naming(base, |v| v.get("config_key").and_then(|k| k.as_str()) == Some(name.as_str())) {
                Some(item) => out.note(format!(
                    "kv_connector_extra_config key `{name}`: not read by the files read, but {}'s behaviour.{item} (not derived) names it: kept",
                    base.revision
                )),
                None => out.push("remove", &format!("extra_config.{name}"), |_| {}),
            }
        }
    }
    for (name, (defaults, at)) in &found {
        let default = match defaults.as_slice() {
            [Some(d)] => Some(d.clone()),
            [None] => None,
            _ => {
                out.note(format!(
                    "kv_connector_extra_config key `{name}`: read with different defaults ({}): the default is not derived",
                    defaults.iter().map(|d| d.clone().unwrap_or_else(|| "not a literal".into())).collect::<Vec<_>>().join(", ")
                ));
                None
            }
        };
        match base.extra_config.get(name) {
            Some(b) => {
                let same = match &default {
                    Some(d) => Literal::parse(d).ok() == Literal::parse(&b.default).ok(),
                    None => true,
                };
                if !same {
                    let d = default.clone().unwrap_or_default();
                    out.push("set", &format!("extra_config.{name}.default"), |e| {
                        e.insert("value".into(), s(&d));
                    });
                }
            }
            None => {
                let d = default.clone().unwrap_or_else(|| "None".into());
                let ty = match literal_type(&d) {
                    Some(t) => t.to_string(),
                    None => {
                        out.note(format!(
                            "kv_connector_extra_config key `{name}`: its type is not derived (written `any`)"
                        ));
                        "optional[any]".to_string()
                    }
                };
                out.push("set", &format!("extra_config.{name}"), |e| {
                    let mut v = Table::new();
                    v.insert("type".into(), s(&ty));
                    v.insert("default".into(), s(&d));
                    e.insert("value".into(), Value::Table(v));
                    e.insert("source".into(), s(&format!("{source}, {at}")));
                });
                out.note(format!("kv_connector_extra_config key `{name}`: what it sets (local or not, which behaviour) is not derived"));
            }
        }
    }
}

fn env(facts: &Facts, base: &Revision, source: &str, out: &mut EditList) {
    // Name → (type, default, where first read), from the first read that states them.
    let mut found: IndexMap<String, (Option<String>, Option<String>, String)> = IndexMap::new();
    for v in &facts.env {
        let e = found.entry(v.name.clone()).or_insert_with(|| (None, None, v.site.describe()));
        if e.0.is_none() {
            e.0 = v.ty.clone();
        }
        if e.1.is_none() {
            e.1 = v.default.clone();
        }
    }
    for name in base.env.keys() {
        if !found.contains_key(name) {
            out.push("remove", &format!("env.{name}"), |_| {});
        }
    }
    for (name, (ty, default, at)) in &found {
        match base.env.get(name) {
            Some(b) => {
                if let Some(t) = ty.as_deref().and_then(|t| TypeExpr::parse(t).ok()) {
                    if t != b.ty {
                        let t = ty.clone().unwrap_or_default();
                        out.push("set", &format!("env.{name}.type"), |e| {
                            e.insert("value".into(), s(&t));
                        });
                    }
                }
                if let Some(d) = default.as_ref().filter(|d| **d != b.default) {
                    out.push("set", &format!("env.{name}.default"), |e| {
                        e.insert("value".into(), s(d));
                    });
                }
                if ty.is_none() || default.is_none() {
                    out.note(format!(
                        "environment variable {name}: its type or default is not stated by the files read; {}'s kept",
                        base.revision
                    ));
                }
            }
            None => {
                let t = ty.clone().unwrap_or_else(|| "optional[str]".into());
                let d = default.clone().unwrap_or_else(|| "None".into());
                if ty.is_none() || default.is_none() {
                    out.note(format!(
                        "environment variable {name}: its type or default is not stated by the files read"
                    ));
                }
                out.push("set", &format!("env.{name}"), |e| {
                    let mut v = Table::new();
                    v.insert("type".into(), s(&t));
                    v.insert("default".into(), s(&d));
                    e.insert("value".into(), Value::Table(v));
                    e.insert("source".into(), s(&format!("{source}, {at}")));
                });
                out.note(format!("environment variable {name}: whether it is local is not derived"));
            }
        }
    }
}

/// What the decoders say about structs the base's transport does not carry.
fn decoders(facts: &Facts, base: &Revision, out: &mut EditList) {
    let received: Vec<&str> =
        base.transport.messages.iter().filter(|m| m.encoding == "msgpack").map(|m| m.name.as_str()).collect();
    for st in &facts.structs {
        if received.contains(&st.name.as_str()) || base.structs.contains_key(&st.name) {
            continue;
        }
        let decoded: Vec<String> = facts
            .decoders
            .iter()
            .filter(|d| d.strukt == st.name)
            .map(|d| {
                if d.used_in.is_empty() {
                    format!("built in {}", d.site.describe())
                } else {
                    format!("built in {}, used in {}", d.site.describe(), d.used_in.join(", "))
                }
            })
            .collect();
        out.note(if decoded.is_empty() {
            format!(
                "struct {}: no msgpack decoder is built for it in the files read, and no message of {} carries it: whether it is on the wire is not derived",
                st.name, base.revision
            )
        } else {
            format!(
                "struct {}: received (a decoder is {}), but no message of {} carries it: its socket, sender and answer are not derived",
                st.name,
                decoded.join("; "),
                base.revision
            )
        });
    }
}

fn aliases(facts: &Facts, base: &Revision, out: &mut EditList) {
    for (name, a) in &facts.aliases {
        let Ok(ty) = TypeExpr::parse(&a.ty) else {
            out.note(format!("alias {name}: `{}` does not parse in the type language; kept from the base", a.ty));
            continue;
        };
        match base.aliases.get(name) {
            Some(b) if b.ty == ty => {}
            Some(_) => out.push("set", &format!("aliases.{name}.type"), |t| {
                t.insert("value".into(), s(&a.ty));
            }),
            None => out.push("set", &format!("aliases.{name}"), |t| {
                let mut v = Table::new();
                v.insert("type".into(), s(&a.ty));
                t.insert("value".into(), Value::Table(v));
            }),
        }
    }
}

fn enums(facts: &Facts, base: &Revision, source: &str, out: &mut EditList) {
    for e in &facts.enums {
        let items: Vec<(String, Table)> = e
            .members
            .iter()
            .map(|m| {
                let mut t = Table::new();
                t.insert("name".into(), s(&m.name));
                t.insert("value".into(), Value::Integer(m.value));
                (m.name.clone(), t)
            })
            .collect();
        match base.enums.get(&e.name) {
            None => {
                out.push("set", &format!("enums.{}", e.name), |t| {
                    let mut v = Table::new();
                    v.insert("kind".into(), s("IntEnum"));
                    v.insert("source".into(), s(&format!("{source}, {}", e.file)));
                    v.insert(
                        "members".into(),
                        Value::Array(items.iter().map(|(_, t)| Value::Table(t.clone())).collect()),
                    );
                    t.insert("value".into(), Value::Table(v));
                });
                out.note(format!("enum {}: which members end a reply stream (`terminal`) is not derived", e.name));
            }
            Some(b) => {
                let base_items: Vec<(String, Table)> = b.members.iter().map(|m| (m.name.clone(), plain(m))).collect();
                let added = named_diff(&format!("enums.{}.members", e.name), &base_items, &items, member_changes, out);
                for m in added {
                    out.note(format!(
                        "enum {}.{m}: whether it ends a reply stream (`terminal`) is not derived",
                        e.name
                    ));
                }
            }
        }
    }
    for name in base.enums.keys() {
        if !facts.enums.iter().any(|e| &e.name == name) {
            out.push("remove", &format!("enums.{name}"), |_| {});
        }
    }
}

fn member_changes(base: &Table, new: &Table) -> Vec<(String, Option<Value>)> {
    if base.get("value") != new.get("value") {
        vec![("value".into(), new.get("value").cloned())]
    } else {
        vec![]
    }
}

fn structs(facts: &Facts, base: &Revision, source: &str, out: &mut EditList) {
    for st in &facts.structs {
        let at = format!("structs.{}", st.name);
        let options = options_of(&st.options, &st.name, out);
        let items: Vec<(String, Table)> = st.fields.iter().map(|f| (f.name.clone(), field_item(f))).collect();
        match base.structs.get(&st.name) {
            None => out.push("set", &at, |t| {
                let mut v = Table::new();
                v.insert("kind".into(), s("msgspec.Struct"));
                v.insert("options".into(), Value::Table(plain(&options)));
                v.insert("source".into(), s(&format!("{source}, {}", st.file)));
                v.insert("fields".into(), Value::Array(items.iter().map(|(_, t)| Value::Table(t.clone())).collect()));
                t.insert("value".into(), Value::Table(v));
            }),
            Some(b) => {
                if b.options != options {
                    out.push("set", &format!("{at}.options"), |t| {
                        t.insert("value".into(), Value::Table(plain(&options)));
                    });
                }
                fields(&format!("{at}.fields"), b, &st.fields, out);
            }
        }
    }
    for (name, d) in &base.structs {
        if d.kind == mooncake_wire::spec::StructKind::MsgspecStruct && !facts.structs.iter().any(|x| &x.name == name) {
            if base.message(name).is_some() {
                // The transport (not derived) names it: without it the revision would not load.
                out.note(format!(
                    "struct {name}: not in the files read, but {}'s transport sends it: kept from the base",
                    base.revision
                ));
            } else {
                out.push("remove", &format!("structs.{name}"), |_| {});
            }
        }
    }
}

fn options_of(map: &serde_json::Map<String, serde_json::Value>, name: &str, out: &mut EditList) -> StructOptions {
    let mut m = map.clone();
    m.remove("kw_only");
    match serde_json::from_value::<StructOptions>(serde_json::Value::Object(m.clone())) {
        Ok(o) => o,
        Err(e) => {
            out.note(format!(
                "struct {name}: options {} not read ({e}); the base's kept",
                serde_json::Value::Object(m)
            ));
            StructOptions::default()
        }
    }
}

fn field_item(f: &FieldFact) -> Table {
    let mut t = Table::new();
    t.insert("name".into(), s(&f.name));
    if let Some(ty) = &f.ty {
        t.insert("type".into(), s(ty));
    }
    if let Some(Some(d)) = &f.default {
        t.insert("default".into(), s(d));
    }
    if let Some(d) = &f.default_factory {
        t.insert("default_factory".into(), s(d));
    }
    t
}

/// A field's default as a literal: `None` required, `Some(Err)` present but not a spec literal.
fn default_of(t: &Table) -> Option<Result<Literal, LiteralError>> {
    match (t.get("default").and_then(Value::as_str), t.get("default_factory").and_then(Value::as_str)) {
        (Some(d), _) => Some(Literal::parse(d)),
        (None, Some(f)) => Some(Literal::from_factory(f)),
        (None, None) => None,
    }
}

fn field_changes(base: &Table, new: &Table) -> Vec<(String, Option<Value>)> {
    let mut ch = vec![];
    if let (Some(bt), Some(nt)) = (base.get("type").and_then(Value::as_str), new.get("type").and_then(Value::as_str)) {
        if TypeExpr::parse(bt).ok() != TypeExpr::parse(nt).ok() {
            ch.push(("type".into(), Some(s(nt))));
        }
    }
    let (bd, nd) = (default_of(base), default_of(new));
    let same = match (&bd, &nd) {
        (Some(Ok(a)), Some(Ok(b))) => a == b,
        (None, None) => true,
        _ => false,
    };
    if !same {
        for k in ["default", "default_factory"] {
            if base.get(k) != new.get(k) {
                ch.push((k.into(), new.get(k).cloned()));
            }
        }
    }
    ch
}

fn fields(at: &str, base: &StructDef, new: &[FieldFact], out: &mut EditList) {
    let base_items: Vec<(String, Table)> = base.fields.iter().map(|f| (f.name.clone(), plain(f))).collect();
    let mut items = vec![];
    for f in new {
        let mut t = field_item(f);
        let b = base.fields.iter().find(|x| x.name == f.name);
        // What the source does not say keeps the base's value (reported by the script).
        if let Some(b) = b {
            if f.ty.is_none() {
                t.insert("type".into(), s(&b.ty.to_string()));
            }
            if matches!(f.default, Some(None)) {
                keep_default(&mut t, b);
            }
        }
        items.push((f.name.clone(), t));
    }
    named_diff(at, &base_items, &items, field_changes, out);
}

fn keep_default(t: &mut Table, b: &FieldDef) {
    if let Some(d) = &b.default {
        t.insert("default".into(), s(d));
    }
    if let Some(d) = &b.default_factory {
        t.insert("default_factory".into(), s(d));
    }
}

/// Edits turning the named array `base` into `new` (names in order, attributes compared by `changes`):
/// removals, in-place `set`s, and inserts of added or moved items placed after their predecessor in `new`.
/// Returns the names added.
fn named_diff(
    at: &str,
    base: &[(String, Table)],
    new: &[(String, Table)],
    changes: fn(&Table, &Table) -> Vec<(String, Option<Value>)>,
    out: &mut EditList,
) -> Vec<String> {
    let pos_new = |n: &str| new.iter().position(|(x, _)| x == n);
    for (n, _) in base {
        if pos_new(n).is_none() {
            out.push("remove", &format!("{at}.{n}"), |_| {});
        }
    }
    // Common items in base order; those on the longest run that is also in `new`'s order stay in place.
    let common: Vec<(usize, &str)> = base.iter().filter_map(|(n, _)| pos_new(n).map(|p| (p, n.as_str()))).collect();
    let keep = lis(&common.iter().map(|(p, _)| *p).collect::<Vec<_>>());
    let kept: Vec<&str> = keep.iter().map(|&i| common[i].1).collect();
    let mut sim: Vec<String> = kept.iter().map(|s| s.to_string()).collect();
    let mut added = vec![];
    for (i, (name, item)) in new.iter().enumerate() {
        let b = base.iter().find(|(x, _)| x == name).map(|(_, t)| t);
        if kept.contains(&name.as_str()) {
            for (k, v) in changes(b.expect("kept items are in the base"), item) {
                match v {
                    Some(v) => out.push("set", &format!("{at}.{name}.{k}"), |t| {
                        t.insert("value".into(), v);
                    }),
                    None => out.push("remove", &format!("{at}.{name}.{k}"), |_| {}),
                }
            }
            continue;
        }
        let full = match b {
            Some(b) => {
                // A moved item: removed, then inserted where it now is, with its base doc.
                out.push("remove", &format!("{at}.{name}"), |_| {});
                let mut t = b.clone();
                t.remove("source");
                for (k, v) in changes(b, item) {
                    match v {
                        Some(v) => t.insert(k, v),
                        None => t.remove(&k),
                    };
                }
                t
            }
            None => {
                added.push(name.clone());
                item.clone()
            }
        };
        let prev = if i == 0 { None } else { Some(new[i - 1].0.clone()) };
        let first = sim.first().cloned();
        out.push("insert", at, |t| {
            match (&prev, &first) {
                (Some(p), _) => {
                    t.insert("after".into(), s(p));
                }
                (None, Some(f)) => {
                    t.insert("before".into(), s(f));
                }
                (None, None) => {}
            }
            t.insert("item".into(), Value::Table(full));
        });
        let idx = prev.and_then(|p| sim.iter().position(|x| *x == p)).map_or(0, |i| i + 1);
        sim.insert(idx, name.clone());
    }
    added
}

/// Indices of a longest strictly increasing subsequence of `v`.
fn lis(v: &[usize]) -> Vec<usize> {
    let n = v.len();
    let mut len = vec![1usize; n];
    let mut prev = vec![usize::MAX; n];
    for i in 0..n {
        for j in 0..i {
            if v[j] < v[i] && len[j] + 1 > len[i] {
                len[i] = len[j] + 1;
                prev[i] = j;
            }
        }
    }
    let Some(mut i) = (0..n).max_by_key(|&i| (len[i], std::cmp::Reverse(i))) else { return vec![] };
    let mut out = vec![i];
    while prev[i] != usize::MAX {
        i = prev[i];
        out.push(i);
    }
    out.reverse();
    out
}

fn bootstrap(b: &BootstrapFact, base: &Revision, source: &str, out: &mut EditList) {
    let bb = base.bootstrap.as_ref().expect("caller checked");
    if let Some(d) = &b.duplicate_registration {
        let cur = Value::try_from(bb.duplicate_registration).ok();
        if cur.as_ref().and_then(Value::as_str) != Some(d.as_str()) {
            out.push("set", "bootstrap.duplicate_registration", |t| {
                t.insert("value".into(), s(d));
            });
        }
    }
    for m in &b.models {
        let at = format!("bootstrap.models.{}", m.name);
        let items: Vec<(String, Table)> = m.fields.iter().map(|f| (f.name.clone(), field_item(f))).collect();
        match bb.models.get(&m.name) {
            None => out.push("set", &at, |t| {
                let mut v = Table::new();
                v.insert("kind".into(), s(&m.kind));
                v.insert("source".into(), s(&format!("{source}, {}", b.file)));
                v.insert("fields".into(), Value::Array(items.iter().map(|(_, t)| Value::Table(t.clone())).collect()));
                t.insert("value".into(), Value::Table(v));
            }),
            Some(bm) => {
                if Value::try_from(bm.kind).ok().as_ref().and_then(Value::as_str) != Some(m.kind.as_str()) {
                    out.push("set", &format!("{at}.kind"), |t| {
                        t.insert("value".into(), s(&m.kind));
                    });
                }
                fields(&format!("{at}.fields"), bm, &m.fields, out);
            }
        }
    }
    let base_routes: Vec<Value> = bb.routes.iter().map(|r| Value::Table(plain(r))).collect();
    let routes: Vec<Value> = b.routes.iter().map(|r| Value::Table(route(r, base, out))).collect();
    if routes != base_routes {
        out.push("set", "bootstrap.routes", |t| {
            t.insert("value".into(), Value::Array(routes));
        });
    }
}

/// `{…}` placeholders stand for values: two detail texts are the same when their literal text is.
fn shape(detail: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in detail.chars() {
        match c {
            '{' => {
                if depth == 0 {
                    out.push_str("{}");
                }
                depth += 1;
            }
            '}' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn route(r: &super::facts::RouteFact, base: &Revision, out: &mut EditList) -> Table {
    let bb = base.bootstrap.as_ref().expect("caller checked");
    let br = bb.routes.iter().find(|x| x.method == r.method && x.path == r.path);
    let base_resp: Vec<Table> = br.map(|x| x.responses.iter().map(plain).collect()).unwrap_or_default();
    let mut used = vec![false; base_resp.len()];
    let mut resp = vec![];
    let mut all_matched = true;
    for d in &r.responses {
        let found = (0..base_resp.len()).find(|&i| !used[i] && response_matches(d, &base_resp[i], base));
        match found {
            Some(i) => {
                used[i] = true;
                resp.push(base_resp[i].clone());
            }
            None => {
                all_matched = false;
                resp.push(new_response(d, r, base, out));
            }
        }
    }
    let mut t = match br {
        Some(x) => plain(x),
        None => Table::new(),
    };
    t.insert("method".into(), s(&r.method));
    t.insert("path".into(), s(&r.path));
    match &r.request {
        Some(q) => t.insert("request".into(), s(q)),
        None => t.remove("request"),
    };
    // The same responses in another order are the base's list: the order of `raise`s is not the wire's.
    let responses = if all_matched && used.iter().all(|u| *u) { base_resp } else { resp };
    t.insert("responses".into(), Value::Array(responses.into_iter().map(Value::Table).collect()));
    t
}

fn response_matches(d: &ResponseFact, b: &Table, base: &Revision) -> bool {
    if b.get("status").and_then(Value::as_integer) != Some(d.status as i64) {
        return false;
    }
    let bdetail = b.get("detail").and_then(Value::as_str);
    let bbody = b.get("body").and_then(Value::as_str);
    if d.framework {
        return bdetail.is_none() && bbody.is_none();
    }
    if d.error {
        return match (&d.detail, bdetail) {
            (Some(x), Some(y)) => shape(x) == shape(y),
            (None, None) => true,
            _ => false,
        };
    }
    if let Some(obj) = &d.json {
        // A literal dict answers with a JSON model whose fields are all `const`: the same keys and values.
        let Some(model) = bbody.and_then(|n| base.bootstrap.as_ref()?.models.get(n)) else { return false };
        return model.fields.len() == obj.len()
            && model.fields.iter().all(|f| {
                let want = obj.get(&f.name).and_then(|v| v.as_str());
                want.is_some() && f.const_value.as_deref() == want
            });
    }
    match (&d.body, bbody) {
        (Some(x), Some(y)) => TypeExpr::parse(x).ok().is_some() && TypeExpr::parse(x).ok() == TypeExpr::parse(y).ok(),
        (None, None) => true,
        _ => false,
    }
}

fn new_response(d: &ResponseFact, r: &super::facts::RouteFact, base: &Revision, out: &mut EditList) -> Table {
    let mut t = Table::new();
    t.insert("status".into(), Value::Integer(d.status as i64));
    let handler = r.handler.as_deref().unwrap_or("the handler");
    let has_model = |n: &str| base.bootstrap.as_ref().is_some_and(|b| b.models.contains_key(n));
    if d.framework {
        t.insert("when".into(), s("the body fails pydantic validation (FastAPI)"));
    } else if d.error {
        if has_model("HTTPError") {
            t.insert("body".into(), s("HTTPError"));
        }
        if let Some(x) = &d.detail {
            t.insert("detail".into(), s(x));
        }
        t.insert("when".into(), s(&format!("not derived: an HTTPException {} raised in {handler}", d.status)));
        out.note(format!("{} {}: when the new {} answer is given is not derived", r.method, r.path, d.status));
    } else if let Some(body) = &d.body {
        t.insert("body".into(), s(body));
    } else if let Some(obj) = &d.json {
        out.note(format!(
            "{} {}: the answer {} matches no JSON model of the base (a new model is not derived)",
            r.method,
            r.path,
            serde_json::Value::Object(obj.clone())
        ));
    }
    t
}
