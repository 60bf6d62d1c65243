//! Writing a derived revision as a spec file (format `mooncake-wire-spec/2`, a derived file: header, `base`,
//! `[[edit]]`s).
//!
//! An extracted revision is not a release of the spec: it is an unreleased revision (`releases = []`) named
//! `vllm-extracted@<9 hex digits>` after the commit it was read at — a wheel's build commit, a checkout's
//! `HEAD` — or, for files outside git, after the SHA-256 of the files read (`commit = "sources@<digest>"`).

use mooncake_wire::spec::Revision;
use toml::{Table, Value};

use super::edits::EditList;
use super::facts::Facts;

/// (commit key, hex digits naming the revision).
fn commit(f: &Facts) -> (String, String) {
    if let Some(c) = f.build_commit.as_deref().map(|c| c.trim_start_matches('g')).filter(|c| c.len() >= 9) {
        return (format!("vllm-project/vllm@{c}"), c.to_string());
    }
    if let Some(c) = &f.git_commit {
        return (format!("vllm-project/vllm@{c}"), c.clone());
    }
    (format!("sources@{}", f.sources_sha256), f.sources_sha256.clone())
}

/// The derived revision's name.
pub(crate) fn revision_name(f: &Facts) -> String {
    format!("vllm-extracted@{}", &commit(f).1[..9])
}

/// Where the facts come from, as the spec's `source` keys say it.
pub(crate) fn source_line(f: &Facts) -> String {
    let what = match f.input.kind.as_str() {
        "wheel" => format!("vLLM {} wheel", f.release.as_deref().unwrap_or("(unknown release)")),
        "checkout" => "vLLM source checkout".to_string(),
        "package" => "vLLM connector package folder".to_string(),
        _ => "vLLM source file".to_string(),
    };
    format!("{what} ({}), read by mooncake-conformance extract", f.input.path)
}

fn q(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// A TOML value on one line (inline tables and arrays).
pub(crate) fn inline(v: &Value) -> String {
    match v {
        Value::String(s) => q(s),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => d.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        Value::Table(t) if t.is_empty() => "{}".into(),
        Value::Table(t) => {
            format!(
                "{{ {} }}",
                t.iter().map(|(k, v)| format!("{} = {}", key(k), inline(v))).collect::<Vec<_>>().join(", ")
            )
        }
    }
}

fn key(k: &str) -> String {
    if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        k.to_string()
    } else {
        q(k)
    }
}

/// The file: header, then one `[[edit]]` per edit, keys in the order op, at, after/before, item/value.
pub(crate) fn render(f: &Facts, base: &Revision, list: &EditList, source: &str) -> String {
    let (commit, _) = commit(f);
    let mut out = String::new();
    out.push_str(&format!(
        "# Derived by `mooncake-conformance extract` from {} ({} file{} read{}).\n",
        f.input.path,
        f.files.len(),
        if f.files.len() == 1 { "" } else { "s" },
        if f.followed.is_empty() {
            String::new()
        } else {
            format!(", aliases followed into {}", f.followed.join(", "))
        }
    ));
    out.push_str(&format!(
        "# Structs, enums, aliases, the bootstrap routes and models, the literal reply texts, the kv_connector_extra_config keys and the\n# environment variables read are the source's; everything else (behaviour, transport, docs) is {}'s.\n",
        base.revision
    ));
    let summary = format!(
        "{} on {}{}",
        match list.edits.len() {
            0 => "no wire change".to_string(),
            1 => "1 edit".to_string(),
            n => format!("{n} edits"),
        },
        base.revision,
        f.release.as_deref().map(|r| format!(" (source: release {r})")).unwrap_or_default()
    );
    let header: Vec<(&str, Value)> = vec![
        ("format", Value::String("mooncake-wire-spec/2".into())),
        ("family", Value::String("push".into())),
        ("revision", Value::String(revision_name(f))),
        ("base", Value::String(base.revision.clone())),
        ("generation", Value::Integer(base.generation as i64)),
        ("releases", Value::Array(vec![])),
        ("commit", Value::String(commit)),
        ("source", Value::String(source.to_string())),
        ("summary", Value::String(summary)),
    ];
    for (k, v) in header {
        out.push_str(&format!("{k} = {}\n", inline(&v)));
    }
    for e in &list.edits {
        out.push_str("\n[[edit]]\n");
        let mut e: Table = e.clone();
        for k in ["op", "at", "after", "before", "item", "value"] {
            if let Some(v) = e.remove(k) {
                out.push_str(&format!("{k} = {}\n", inline(&v)));
            }
        }
        for (k, v) in e {
            out.push_str(&format!("{} = {}\n", key(&k), inline(&v)));
        }
    }
    out
}
