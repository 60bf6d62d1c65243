//! `mooncake-conformance hash ...`: vLLM's `hash_factors` of a JSON file, the wire fingerprint of a revision,
//! and whether two revisions are wire-compatible.
//!
//! Exit codes: 0 = done / compatible; 1 = Python would raise for this value / incompatible; 2 = bad usage
//! or unreadable input.

use std::path::Path;
use std::process::ExitCode;

use serde_json::{json, Value as J};

use mooncake_wire::hash::fingerprint::{compare, wire_document, wire_fingerprint};
use mooncake_wire::hash::{self, tagged};
use mooncake_wire::spec::{Revision, Spec};

use crate::report::{print_json, usage_error};

/// A revision by name (`vllm-0.25.0..0.29.0`) or by a vLLM release it covers (`0.27.1`).
pub fn find_revision(name: &str) -> Result<&'static Revision, String> {
    let spec = Spec::builtin();
    if let Some(r) = spec.revision(name) {
        return Ok(r);
    }
    let release = name.strip_prefix("vllm-").unwrap_or(name);
    spec.families.iter().find_map(|f| f.for_release(release)).map(|r| r.as_ref()).ok_or_else(|| {
        let known: Vec<&str> = spec.push().revisions.iter().map(|r| r.revision.as_str()).collect();
        format!("no revision or release {name:?}; revisions: {}", known.join(", "))
    })
}

/// `hash factors FILE.json` (`-` reads stdin).
pub fn factors(file: &Path, json_out: bool) -> ExitCode {
    let text = if file == Path::new("-") {
        let mut s = String::new();
        match std::io::Read::read_to_string(&mut std::io::stdin(), &mut s) {
            Ok(_) => s,
            Err(e) => return usage_error(&format!("stdin: {e}")),
        }
    } else {
        match std::fs::read_to_string(file) {
            Ok(s) => s,
            Err(e) => return usage_error(&format!("{}: {e}", file.display())),
        }
    };
    // Integers beyond 64 bits stay exact (as Python's json.load keeps them).
    let text = tagged::tag_wide_integers(&text).unwrap_or(text);
    let value: J = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return usage_error(&format!("{}: not JSON: {e}", file.display())),
    };
    let py = match tagged::from_tagged_json(&value) {
        Ok(v) => v,
        Err(e) => return usage_error(&format!("{}: {e}", file.display())),
    };
    match hash::hash_factors(&py) {
        Ok(h) => {
            if json_out {
                print_json(&json!({ "digest": h.digest, "hashed_utf8": h.hashed, "hashed_hex": hash::hex(h.hashed.as_bytes()) }));
            } else {
                println!("{}", h.digest);
                println!("hashed: {}", h.hashed);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if json_out {
                print_json(&json!({ "error": e.to_string() }));
            } else {
                println!("Python raises {e}");
            }
            ExitCode::from(1)
        }
    }
}

/// `hash wire [--revision R]`: one revision's fingerprint, or every revision's.
pub fn wire(revision: Option<&str>, json_out: bool) -> ExitCode {
    let revs: Vec<&Revision> = match revision {
        Some(r) => match find_revision(r) {
            Ok(r) => vec![r],
            Err(e) => return usage_error(&e),
        },
        None => Spec::builtin().push().revisions.iter().map(|r| r.as_ref()).collect(),
    };
    let mut out = vec![];
    for r in &revs {
        let fp = match wire_fingerprint(r) {
            Ok(f) => f,
            Err(e) => return usage_error(&format!("{}: {e}", r.revision)),
        };
        let mut entry = json!({ "revision": r.revision, "releases": r.releases, "fingerprint": fp });
        if revision.is_some() {
            entry["document"] = tagged::to_tagged_json(&wire_document(r).expect("fingerprinted above"));
        }
        out.push(entry);
    }
    if json_out {
        print_json(&if revision.is_some() { out.remove(0) } else { J::Array(out) });
    } else {
        for e in &out {
            println!("{}  {}", e["fingerprint"].as_str().unwrap_or(""), e["revision"].as_str().unwrap_or(""));
        }
    }
    ExitCode::SUCCESS
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

/// `hash check A B`: compatible exactly when the wire fingerprints are equal.
pub fn check(a: &str, b: &str, json_out: bool) -> ExitCode {
    let (ra, rb) = match (find_revision(a), find_revision(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => return usage_error(&e),
    };
    let (fa, fb, diffs) = match (wire_fingerprint(ra), wire_fingerprint(rb), compare(ra, rb)) {
        (Ok(x), Ok(y), Ok(d)) => (x, y, d),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return usage_error(&e),
    };
    let compatible = fa == fb;
    let other = outside_fingerprint(ra, rb);
    if json_out {
        print_json(&json!({
            "compatible": compatible,
            "a": { "revision": ra.revision, "fingerprint": fa },
            "b": { "revision": rb.revision, "fingerprint": fb },
            "differences": diffs.iter().map(|d| json!({ "item": d.item, "change": d.change })).collect::<Vec<_>>(),
            "outside_fingerprint": other,
        }));
    } else {
        if compatible {
            println!("compatible: {} and {} have the same wire fingerprint {fa}", ra.revision, rb.revision);
        } else {
            println!("incompatible: {} ({}) and {} ({}) differ on the msgspec wire:", ra.revision, &fa[..12], rb.revision, &fb[..12]);
            for d in &diffs {
                println!("  {}: {}", d.item, d.change);
            }
        }
        if !other.is_empty() {
            println!("outside the fingerprint (bootstrap, transport, behaviour, parameters):");
            for o in &other {
                println!("  {o}");
            }
        }
    }
    ExitCode::from(if compatible { 0 } else { 1 })
}

/// `hash nixl --release R CONFIG.json [--engine E]`: the NIXL compatibility hash of a release for the config
/// attributes in the file (the golden vectors' input shape), and the P2P wrapper's hash for a transfer engine.
pub fn nixl(release: &str, file: &Path, engine: Option<&str>, json_out: bool) -> ExitCode {
    use mooncake_wire::hash::compat::{wrapper_hash, NixlConfig, NixlFactorSet};
    let Some(set) = NixlFactorSet::for_release(release) else {
        return usage_error(&format!("vLLM {release} has no NIXL compatibility hash in spec/compat-hash/nixl.toml"));
    };
    let text = match std::fs::read_to_string(file) {
        Ok(s) => s,
        Err(e) => return usage_error(&format!("{}: {e}", file.display())),
    };
    let cfg: NixlConfig = match serde_json::from_str(&text) {
        Ok(c) => c,
        Err(e) => return usage_error(&format!("{}: {e}", file.display())),
    };
    let result = set.factors(&cfg, release).and_then(|f| {
        let h = hash::hash_factors(&f).map_err(|e| e.to_string())?;
        let wrapped = engine.map(|e| wrapper_hash(&h.digest, e)).transpose()?;
        Ok((f, h, wrapped))
    });
    match result {
        Ok((factors, h, wrapped)) => {
            if json_out {
                print_json(&json!({
                    "release": release,
                    "nixl_connector_version": set.connector_version,
                    "factors": tagged::to_output_json(&factors),
                    "hashed_utf8": h.hashed,
                    "hash": h.digest,
                    "engine": engine,
                    "wrapped_hash": wrapped,
                }));
            } else {
                println!("{}", wrapped.as_deref().unwrap_or(&h.digest));
                println!("nixl_connector_version {}; hashed: {}", set.connector_version, h.hashed);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
