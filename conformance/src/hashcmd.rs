//! `mooncake-conformance hash ...`: vLLM's `hash_factors` of a JSON file, the wire fingerprint of a revision,
//! and whether two revisions are wire-compatible.
//!
//! Exit codes: 0 = done / compatible; 1 = Python would raise for this value / incompatible; 2 = bad usage
//! or unreadable input.

use std::path::Path;

use serde_json::{json, Value as J};

use mooncake_wire::hash::fingerprint::{compare, wire_document, wire_fingerprint};
use mooncake_wire::hash::{self, tagged};
use mooncake_wire::spec::{Resolved, Revision, Spec};

use crate::outcome::{Outcome, AGREE, DISAGREE, USAGE};

/// A revision by any name the spec's resolver takes (`vllm-0.25.0..0.29.0`, `0.27.1`, `ascend:0.18.0`).
pub fn find_revision(name: &str) -> Result<Resolved, String> {
    Spec::builtin().resolve(name).map_err(|e| e.to_string())
}

/// A vLLM release for the per-release tables (store keys, NIXL hashes), named in any form the spec's resolver
/// takes (`0.33.0`, `v0.33.0`, `vllm-0.33.0`, `vllm:0.33.0`). `known` accepts a release the table has even
/// though no wire revision covers it.
pub fn vllm_release(name: &str, known: impl Fn(&str) -> bool) -> Result<String, String> {
    match Spec::builtin().resolve_release(name) {
        Ok((rev, rel)) if rev.project() == "vllm" => Ok(rel),
        Ok((rev, rel)) => Err(format!("`{name}` is {} {rel}, not a vLLM release", rev.project())),
        Err(_) if known(name) => Ok(name.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// `hash factors FILE.json` (`-` reads stdin).
pub fn factors(file: &Path, json_out: bool) -> Outcome {
    let mut o = Outcome::default();
    let text = if file == Path::new("-") {
        let mut s = String::new();
        match std::io::Read::read_to_string(&mut std::io::stdin(), &mut s) {
            Ok(_) => s,
            Err(e) => return Outcome::usage(format!("stdin: {e}")),
        }
    } else {
        match std::fs::read_to_string(file) {
            Ok(s) => s,
            Err(e) => return Outcome::usage(format!("{}: {e}", file.display())),
        }
    };
    // Integers beyond 64 bits stay exact (as Python's json.load keeps them).
    let text = tagged::tag_wide_integers(&text).unwrap_or(text);
    let value: J = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return Outcome::usage(format!("{}: not JSON: {e}", file.display())),
    };
    let py = match tagged::from_tagged_json(&value) {
        Ok(v) => v,
        Err(e) => return Outcome::usage(format!("{}: {e}", file.display())),
    };
    match hash::hash_factors(&py) {
        Ok(h) => {
            if json_out {
                o.json(&json!({ "digest": h.digest, "hashed_utf8": h.hashed, "hashed_hex": hex::encode(h.hashed.as_bytes()) }));
            } else {
                o.say(&h.digest);
                o.say(format!("hashed: {}", h.hashed));
            }
            o.done(AGREE)
        }
        Err(e) => {
            if json_out {
                o.json(&json!({ "error": e.to_string() }));
            } else {
                o.say(format!("Python raises {e}"));
            }
            o.done(DISAGREE)
        }
    }
}

/// `hash wire [--revision R]`: one revision's fingerprint, or every revision's.
pub fn wire(revision: Option<&str>, json_out: bool) -> Outcome {
    let mut o = Outcome::default();
    let revs: Vec<&Revision> = match revision {
        Some(r) => match find_revision(r) {
            Ok(r) => vec![Spec::builtin().revision(&r.revision.revision).expect("resolved").as_ref()],
            Err(e) => return Outcome::usage(e),
        },
        None => Spec::builtin().push().revisions.iter().map(|r| r.as_ref()).collect(),
    };
    let mut out = vec![];
    for r in &revs {
        let fp = match wire_fingerprint(r) {
            Ok(f) => f,
            Err(e) => return Outcome::usage(format!("{}: {e}", r.revision)),
        };
        let mut entry = json!({ "revision": r.revision, "releases": r.releases, "fingerprint": fp });
        if revision.is_some() {
            entry["document"] = tagged::to_tagged_json(&wire_document(r).expect("fingerprinted above"));
        }
        out.push(entry);
    }
    if json_out {
        o.json(&if revision.is_some() { out.remove(0) } else { J::Array(out) });
    } else {
        for e in &out {
            o.say(format!("{}  {}", e["fingerprint"].as_str().unwrap_or(""), e["revision"].as_str().unwrap_or("")));
        }
    }
    o.done(AGREE)
}

/// Sections of a resolved revision outside the fingerprint that still differ (bootstrap HTTP, transport,
/// behaviour, kv_transfer_params, env), as JSON paths; annotations (`since`, `doc`, `source`, …) ignored.
fn outside_fingerprint(a: &Revision, b: &Revision) -> Vec<String> {
    fn strip(v: &mut J) {
        match v {
            J::Object(m) => {
                m.retain(|k, _| !matches!(k.as_str(), "since" | "changed_in" | "source" | "doc" | "why"));
                m.values_mut().for_each(strip);
            }
            J::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    fn diff(x: &J, y: &J, path: &str, out: &mut Vec<String>) {
        match (x, y) {
            (J::Object(p), J::Object(q)) => {
                for (k, v) in p {
                    match q.get(k) {
                        Some(w) => diff(v, w, &format!("{path}.{k}"), out),
                        None => out.push(format!("{path}.{k}: only in the first")),
                    }
                }
                for k in q.keys().filter(|k| !p.contains_key(*k)) {
                    out.push(format!("{path}.{k}: only in the second"));
                }
            }
            _ if x == y => {}
            _ => out.push(format!("{path}: {x} → {y}")),
        }
    }
    let sections = ["generation", "transport", "behaviour", "bootstrap", "kv_transfer_params", "env"];
    let (mut ja, mut jb) = (serde_json::to_value(a).unwrap_or(J::Null), serde_json::to_value(b).unwrap_or(J::Null));
    strip(&mut ja);
    strip(&mut jb);
    let mut out = vec![];
    for s in sections {
        diff(&ja[s], &jb[s], s, &mut out);
    }
    out
}

fn effect_word(e: &mooncake_wire::diff::Effect) -> String {
    match e {
        mooncake_wire::diff::Effect::Breaks { .. } => "breaks".into(),
        mooncake_wire::diff::Effect::BreaksWhenSent { when } => format!("breaks when {when}"),
        mooncake_wire::diff::Effect::Review => "review".into(),
        mooncake_wire::diff::Effect::Compatible => "compatible".into(),
    }
}

/// `hash check A B`: compatible exactly when the wire fingerprints are equal and the spec diff of the two
/// revisions has no breaking row in either direction.
pub fn check(a: &str, b: &str, json_out: bool) -> Outcome {
    let mut o = Outcome::default();
    let (na, nb) = match (find_revision(a), find_revision(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => return Outcome::usage(e),
    };
    let (ra, rb) = (na.revision.as_ref(), nb.revision.as_ref());
    let (fa, fb, diffs) = match (wire_fingerprint(ra), wire_fingerprint(rb), compare(ra, rb)) {
        (Ok(x), Ok(y), Ok(d)) => (x, y, d),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return Outcome::usage(e.to_string()),
    };
    // Same wire is necessary, not sufficient: behaviour and bootstrap rows of the spec diff can break a mixed
    // pair too, and `hash check` must agree with `diff` (and with the observed compatibility matrix).
    let (old, new) = if mooncake_wire::spec::version_key(ra.first_release())
        <= mooncake_wire::spec::version_key(rb.first_release())
    {
        (ra, rb)
    } else {
        (rb, ra)
    };
    let arc = |r: &Revision| Spec::builtin().revision(&r.revision).cloned();
    let (Some(old), Some(new)) = (arc(old), arc(new)) else {
        return Outcome::usage("revision not in the built-in spec".to_string());
    };
    let report = mooncake_wire::diff::diff(&old, &new);
    let breaking: Vec<String> = report
        .changes
        .iter()
        .filter(|c| c.is_breaking())
        .map(|c| {
            format!(
                "{}: {} ({})",
                c.subject,
                c.what,
                [&c.old_reads_new, &c.new_reads_old]
                    .iter()
                    .filter(|v| v.effect.is_breaking())
                    .map(|v| format!("{}: {}", v.peers, effect_word(&v.effect)))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        })
        .collect();
    let compatible = fa == fb && breaking.is_empty();
    let other = outside_fingerprint(ra, rb);
    if json_out {
        o.json(&json!({
            "compatible": compatible,
            "a": { "revision": ra.revision, "fingerprint": fa },
            "b": { "revision": rb.revision, "fingerprint": fb },
            "differences": diffs.iter().map(|d| json!({ "item": d.item, "change": d.change })).collect::<Vec<_>>(),
            "breaking": breaking,
            "outside_fingerprint": other,
        }));
    } else {
        if compatible && ra.revision == rb.revision {
            o.say(format!(
                "compatible: {} and {} are the same revision (wire fingerprint {fa})",
                na.describe(),
                nb.describe()
            ));
        } else if compatible {
            o.say(format!(
                "compatible: {} and {} have the same wire fingerprint {fa} and the spec diff breaks nothing",
                na.describe(),
                nb.describe()
            ));
        } else if fa == fb {
            o.say(format!(
                "incompatible: {} and {} have the same wire fingerprint {fa}, but the spec diff breaks a mixed pair:",
                na.describe(),
                nb.describe()
            ));
        } else {
            o.say(format!(
                "incompatible: {} ({}) and {} ({}) differ on the msgspec wire:",
                na.describe(),
                &fa[..12],
                nb.describe(),
                &fb[..12]
            ));
            for d in &diffs {
                o.say(format!("  {}: {}", d.item, d.change));
            }
        }
        if !breaking.is_empty() {
            o.say(format!("breaking rows of `diff {} {}`:", old.revision, new.revision));
            for b in &breaking {
                o.say(format!("  {b}"));
            }
        }
        if !other.is_empty() {
            o.say("outside the fingerprint (bootstrap, transport, behaviour, parameters):");
            for x in &other {
                o.say(format!("  {x}"));
            }
        }
    }
    o.done(if compatible { AGREE } else { DISAGREE })
}

/// `hash nixl --release R CONFIG.json [--engine E]`: the NIXL compatibility hash of a release for the config
/// attributes in the file (the golden vectors' input shape), and the P2P wrapper's hash for a transfer engine.
pub fn nixl(release: &str, file: &Path, engine: Option<&str>, json_out: bool) -> Outcome {
    let mut o = Outcome::default();
    use mooncake_wire::hash::compat::{wrapper_hash, NixlConfig, NixlFactorSet};
    let release = match vllm_release(release, |r| NixlFactorSet::for_release(r).is_some()) {
        Ok(r) => r,
        Err(e) => return Outcome::usage(format!("--release {e}")),
    };
    let release = release.as_str();
    let Some(set) = NixlFactorSet::for_release(release) else {
        return Outcome::usage(format!("vLLM {release} has no NIXL compatibility hash in spec/compat-hash/nixl.toml"));
    };
    let text = match std::fs::read_to_string(file) {
        Ok(s) => s,
        Err(e) => return Outcome::usage(format!("{}: {e}", file.display())),
    };
    let cfg: NixlConfig = match serde_json::from_str(&text) {
        Ok(c) => c,
        Err(e) => return Outcome::usage(format!("{}: {e}", file.display())),
    };
    let result = set.factors(&cfg, release).and_then(|f| {
        let h = hash::hash_factors(&f)?;
        let wrapped = engine.map(|e| wrapper_hash(&h.digest, e)).transpose()?;
        Ok((f, h, wrapped))
    });
    match result {
        Ok((factors, h, wrapped)) => {
            if json_out {
                o.json(&json!({
                    "release": release,
                    "nixl_connector_version": set.connector_version,
                    "factors": tagged::to_output_json(&factors),
                    "hashed_utf8": h.hashed,
                    "hash": h.digest,
                    "engine": engine,
                    "wrapped_hash": wrapped,
                }));
            } else {
                o.say(wrapped.as_deref().unwrap_or(&h.digest));
                o.say(format!("nixl_connector_version {}; hashed: {}", set.connector_version, h.hashed));
            }
            o.done(AGREE)
        }
        Err(e) => {
            o.error(e.to_string());
            o.done(USAGE)
        }
    }
}
