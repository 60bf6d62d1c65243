//! Markdown wire tables of a revision, generated from the spec and committed under `schema/`, so a pull
//! request that changes the wire shows a readable diff.

use std::fmt::Write;

use crate::spec::{FieldDef, Revision, StructDef};

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn code(s: &str) -> String {
    format!("`{}`", s.replace('|', "\\|"))
}

fn since(f_since: &str, changed: &[String], this: &str) -> String {
    let mut s = if f_since == this { "**this revision**".to_string() } else { f_since.to_string() };
    for c in changed {
        if c == this {
            s.push_str(", **changed here**");
        } else {
            let _ = write!(s, ", changed {c}");
        }
    }
    s
}

fn options(s: &StructDef) -> String {
    let o = &s.options;
    let mut v = vec![];
    if o.omit_defaults {
        v.push("omit_defaults".to_string());
    }
    if o.array_like {
        v.push("array_like".into());
    }
    if o.forbid_unknown_fields {
        v.push("forbid_unknown_fields".into());
    }
    if let Some(t) = &o.tag {
        v.push(format!("tag={t:?}"));
    }
    if let Some(t) = &o.tag_field {
        v.push(format!("tag_field={t}"));
    }
    if let Some(r) = &o.rename {
        v.push(format!("rename={r}"));
    }
    if o.dict {
        v.push("dict (no wire effect)".into());
    }
    if o.frozen {
        v.push("frozen (no wire effect)".into());
    }
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn field_rows(out: &mut String, fields: &[FieldDef], this: &str) {
    out.push_str("| # | Key | Type | Default | Since | Meaning |\n|---|---|---|---|---|---|\n");
    for (i, f) in fields.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            i + 1,
            code(&f.name),
            code(&f.ty.python()),
            if f.required() { "required".to_string() } else { code(&f.default_display()) },
            since(&f.since, &f.changed_in, this),
            esc(&f.doc)
        );
    }
}

/// The wire table of one revision.
pub(crate) fn revision_table(rev: &Revision) -> String {
    let this = rev.revision.as_str();
    let mut o = String::new();
    let _ = writeln!(o, "<!-- Generated from spec/ by mooncake-wire. Do not edit: regenerate with `BLESS=1 cargo test --test generated`. -->\n");
    let _ = writeln!(o, "# `{}` — {} wire, generation {}\n", rev.revision, rev.family, rev.generation);
    let _ = writeln!(o, "**Summary:** {}\n", esc(&rev.summary));
    let commits: Vec<String> = rev
        .releases
        .iter()
        .map(|r| match rev.build_commits.get(r) {
            Some(c) => format!("{r} (`{c}`)"),
            None => r.clone(),
        })
        .collect();
    match &rev.commit {
        Some(c) if rev.releases.is_empty() => {
            let _ = writeln!(o, "- **Releases:** none (unreleased; read at `{c}`)");
        }
        _ => {
            let _ = writeln!(o, "- **Releases:** {}", commits.join(", "));
        }
    }
    let _ = writeln!(o, "- **Source:** {}", rev.source);
    let _ = writeln!(o, "- **Spec file:** `spec/{}`", rev.path);
    match &rev.base {
        Some(b) => {
            let _ = writeln!(o, "- **Derived from:** `{b}`\n");
            let _ = writeln!(o, "## Changes from `{b}`\n");
            o.push_str("| Edit | At | Why |\n|---|---|---|\n");
            for e in &rev.edits {
                let what = match (e.op.as_str(), &e.item, &e.value) {
                    ("insert", Some(item), _) => format!(
                        "insert {}{}",
                        code(item.get("name").and_then(|n| n.as_str()).unwrap_or("?")),
                        e.after
                            .as_ref()
                            .map(|a| format!(" after {}", code(a)))
                            .or(e.before.as_ref().map(|b| format!(" before {}", code(b))))
                            .unwrap_or_else(|| " at the end".into())
                    ),
                    ("set", _, Some(v)) => format!("set to {}", code(&v.to_string())),
                    (op, _, _) => op.to_string(),
                };
                let _ = writeln!(o, "| {} | {} | {} |", esc(&what), code(&e.at), esc(e.why.as_deref().unwrap_or("")));
            }
            o.push('\n');
        }
        None => o.push_str("- **Full revision** (no base)\n\n"),
    }

    let t = &rev.transport;
    let _ = writeln!(o, "## Transport: {} ({})\n", esc(&t.pattern), t.kind);
    let _ = writeln!(o, "Codec: {}. Heartbeats: {}. Source: {}.\n", esc(&t.codec), esc(&t.heartbeats), t.source);
    o.push_str("| Role | Socket | Binds | Address | Options | Lifetime |\n|---|---|---|---|---|---|\n");
    for (role, s) in &t.sockets {
        let opts: Vec<String> = s.options.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            o,
            "| {role} | {} | {} | {} | {} | {} |",
            s.socket_type,
            if s.binds { "bind" } else { "connect" },
            esc(&s.address),
            if opts.is_empty() { "none set".into() } else { esc(&opts.join("; ")) },
            esc(&s.per)
        );
    }
    o.push_str("\n| Message | From → To | Encoding | Frames sent | Frames received | Sequence | Notes |\n|---|---|---|---|---|---|---|\n");
    for m in &t.messages {
        let _ = writeln!(
            o,
            "| {} | {} → {} | {} | `[{}]` | `[{}]` | {} | {} |",
            code(&m.name),
            m.from,
            m.to,
            m.encoding,
            m.frames_sent.join(", "),
            m.frames_received.join(", "),
            esc(m.sequence.as_deref().unwrap_or("")),
            esc(&m.doc)
        );
        for c in &m.constants {
            let _ = writeln!(o, "| ↳ {} | | raw bytes {} | | | | {} |", code(&c.name), code(&c.bytes), esc(&c.doc));
        }
    }
    o.push('\n');

    for (name, s) in &rev.structs {
        let _ = writeln!(
            o,
            "## `{name}` ({}; {} declared fields)\n",
            match s.kind {
                crate::spec::StructKind::MsgspecStruct => "msgspec.Struct",
                crate::spec::StructKind::Dataclass => "dataclass",
                crate::spec::StructKind::Tuple => "tuple",
                crate::spec::StructKind::Pydantic => "pydantic model",
                crate::spec::StructKind::Json => "JSON",
            },
            s.fields.len()
        );
        let _ = writeln!(o, "{}\n\nOptions: {}. Source: {}.\n", esc(&s.doc), options(s), s.source);
        if s.fields.len() >= 16 && s.kind == crate::spec::StructKind::MsgspecStruct {
            o.push_str("**16 or more declared fields: msgspec writes a `map16` header (`de 00 NN`).**\n\n");
        }
        field_rows(&mut o, &s.fields, this);
        o.push('\n');
    }
    for (name, e) in &rev.enums {
        let _ = writeln!(o, "## `{name}` ({})\n\n{}\n", e.kind, esc(&e.doc));
        o.push_str("| Member | Value | Ends the stream | Since | Meaning |\n|---|---|---|---|---|\n");
        for m in &e.members {
            let term = match m.terminal {
                Some(true) => "yes",
                Some(false) => "no",
                None => "",
            };
            let _ = writeln!(
                o,
                "| `{}` | {} | {term} | {} | {} |",
                m.name,
                m.value,
                since(&m.since, &m.changed_in, this),
                esc(&m.doc)
            );
        }
        o.push('\n');
    }
    if !rev.aliases.is_empty() {
        o.push_str("## Type aliases\n\n| Alias | Type | Meaning |\n|---|---|---|\n");
        for (n, a) in &rev.aliases {
            let _ = writeln!(o, "| `{n}` | {} | {} |", code(&a.ty.python()), esc(&a.doc));
        }
        o.push('\n');
    }

    let rows = rev.behaviour.rows();
    if !rows.is_empty() {
        o.push_str("## Behaviour visible on the wire\n\nEach item's values are the closed set of `src/spec/behaviour.rs`; prose in `spec/PROTOCOL.md`.\n\n| Item | This revision | Since | Source |\n|---|---|---|---|\n");
    }
    for (name, value, source) in rows {
        let since = rev.behaviour.item(name).map(|i| i.since.to_string()).unwrap_or_default();
        let _ = writeln!(
            o,
            "| `{name}` | {} | {} | {} |",
            esc(&behaviour_value(&value)),
            since_mark(&since, this),
            esc(&source)
        );
    }
    if !rev.behaviour.rows().is_empty() {
        o.push('\n');
    }

    if let Some(bs) = &rev.bootstrap {
        let _ = writeln!(o, "## Bootstrap HTTP ({})\n", bs.kind);
        let _ = writeln!(o, "- Server: {}\n- Bind: `{}` (default port {})\n- State: {}\n- Duplicate registration: **{}**\n- Source: {}\n", esc(&bs.server), bs.bind, bs.default_port, esc(&bs.state), bs.duplicate_registration.as_str(), bs.source);
        o.push_str("| Route | Request body | Status | Response body | When |\n|---|---|---|---|---|\n");
        for r in &bs.routes {
            for (i, resp) in r.responses.iter().enumerate() {
                let route = if i == 0 { format!("`{} {}`", r.method, r.path) } else { String::new() };
                let req = if i == 0 {
                    r.request.as_deref().map(code).unwrap_or_else(|| "none".into())
                } else {
                    String::new()
                };
                let body = match (&resp.body, &resp.detail) {
                    (Some(b), Some(d)) => format!("{} — detail {}", code(b), code(d)),
                    (Some(b), None) => code(b),
                    (None, _) => String::new(),
                };
                let _ = writeln!(o, "| {route} | {req} | {} | {body} | {} |", resp.status, esc(&resp.when));
            }
        }
        if !bs.framework_routes.is_empty() {
            let _ = writeln!(
                o,
                "\nAlso served by the framework: {}.",
                bs.framework_routes.iter().map(|r| code(r)).collect::<Vec<_>>().join(", ")
            );
        }
        o.push('\n');
        for (name, m) in &bs.models {
            let _ = writeln!(
                o,
                "### `{name}` ({})\n\n{}\n",
                match m.kind {
                    crate::spec::StructKind::Pydantic => "pydantic model",
                    crate::spec::StructKind::Dataclass => "dataclass",
                    _ => "JSON",
                },
                esc(&m.doc)
            );
            field_rows(&mut o, &m.fields, this);
            o.push('\n');
        }
    }
    if let Some(kv) = &rev.kv_transfer_params {
        let _ = writeln!(o, "## `kv_transfer_params`\n\n{}\n", esc(&kv.doc));
        o.push_str("| Key | Type | To | Since | Meaning |\n|---|---|---|---|---|\n");
        for k in &kv.keys {
            let _ = writeln!(
                o,
                "| `{}` | {} | {}{} | {} | {} |",
                k.name,
                code(&k.ty.python()),
                k.to,
                if k.internal { " (internal)" } else { "" },
                since(&k.since, &k.changed_in, this),
                esc(&k.doc)
            );
        }
        o.push('\n');
    }
    if let Some(rp) = &rev.replies {
        let _ = writeln!(
            o,
            "## Reply texts (`{}.{}`)\n\n{}\n\n| Name | Text | Status | Since | When |\n|---|---|---|---|---|",
            rp.message,
            rp.field,
            esc(&rp.doc)
        );
        for t in &rp.texts {
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} | {} |",
                t.name,
                code(&t.text),
                t.status.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "),
                since(&t.since, &t.changed_in, this),
                esc(&t.doc)
            );
        }
        o.push('\n');
    }
    if !rev.extra_config.is_empty() {
        o.push_str("## `kv_connector_extra_config` keys\n\n| Key | Type | Default | Local | Since | Meaning |\n|---|---|---|---|---|---|\n");
        for (n, k) in &rev.extra_config {
            let _ = writeln!(
                o,
                "| `{n}` | {} | `{}` | {} | {} | {} |",
                code(&k.ty.python()),
                k.default,
                if k.local { "yes" } else { "" },
                since_mark(&k.since, this),
                esc(&k.doc)
            );
        }
        o.push('\n');
    }
    if !rev.env.is_empty() {
        o.push_str("## Environment variables\n\n| Variable | Type | Default | Local | Since | Meaning |\n|---|---|---|---|---|---|\n");
        for (n, e) in &rev.env {
            let _ = writeln!(
                o,
                "| `{n}` | {} | `{}` | {} | {} | {} |",
                code(&e.ty.python()),
                e.default,
                if e.local { "yes" } else { "" },
                since_mark(&e.since, this),
                esc(&e.doc)
            );
        }
        o.push('\n');
    }
    o
}

/// The index of a family's revisions.
pub(crate) fn family_index(family: &crate::spec::Family) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "<!-- Generated from spec/ by mooncake-wire. Do not edit: regenerate with `BLESS=1 cargo test --test generated`. -->\n");
    let _ = writeln!(o, "# `{}` wire revisions\n", family.name);
    o.push_str("| Revision | Gen | Releases | Messages | Summary |\n|---|---|---|---|---|\n");
    for r in &family.revisions {
        let msgs: Vec<String> = r
            .structs
            .iter()
            .map(|(n, s)| format!("[`{n}`]({}/{n}.schema.json) ({})", r.revision, s.fields.len()))
            .collect();
        let _ = writeln!(
            o,
            "| [`{}`]({}.md) | {} | {} | {} | {} |",
            r.revision,
            r.revision,
            r.generation,
            if r.releases.is_empty() { "unreleased".to_string() } else { r.releases.join(", ") },
            msgs.join(", "),
            esc(&r.summary)
        );
    }
    if family.revisions.len() > 1 {
        o.push_str("\n## Wire diffs of consecutive revisions\n\nWhat each change does to mixed deployments under msgspec's decoding rules (`mooncake-conformance diff`):\n\n");
        for w in family.revisions.windows(2) {
            let r = crate::diff::diff(&w[0], &w[1]);
            let _ = writeln!(
                o,
                "- [`{}` → `{}`](diff/{}__{}.md): {}",
                r.old,
                r.new,
                r.old,
                r.new,
                esc(r.summary.split_once(": ").map_or(&r.summary, |(_, s)| s))
            );
        }
    }
    o
}

/// A behaviour value as a table cell: a variant as spelled in the spec, a list joined, a table as `key: value`.
fn behaviour_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => format!("`{s}`"),
        serde_json::Value::Bool(b) => format!("`{b}`"),
        serde_json::Value::Array(a) if a.is_empty() => "none".into(),
        serde_json::Value::Array(a) => a.iter().map(behaviour_value).collect::<Vec<_>>().join(", "),
        serde_json::Value::Object(m) => {
            m.iter().map(|(k, v)| format!("{k}: {}", behaviour_value(v))).collect::<Vec<_>>().join("; ")
        }
        other => format!("`{other}`"),
    }
}

/// The revision an item comes from, in bold when it is this one.
fn since_mark(since: &str, this: &str) -> String {
    if since == this {
        format!("**{since}**")
    } else {
        since.to_string()
    }
}
