//! `mooncake-conformance hash ...`: vLLM's `hash_factors` of a JSON file, the wire fingerprint of a revision,
//! and whether two revisions are wire-compatible. Each command returns its typed result (or a
//! [`CmdError`]: bad usage or input); the writers write a result as text or JSON to any `impl Write`.

use std::io::{self, Write};
use std::path::Path;

use serde_json::{json, Value as J};

use mooncake_wire::hash::fingerprint::{compare, wire_document, wire_fingerprint};
use mooncake_wire::hash::{self, tagged};
use mooncake_wire::spec::{Resolved, Revision, Spec};

use crate::outcome::CmdError;
use crate::report::write_json;

/// A revision by any name the spec's resolver takes (`vllm-0.25.0..0.29.0`, `0.27.1`, `ascend:0.18.0`).
pub fn find_revision(name: &str) -> Result<Resolved, CmdError> {
    Spec::builtin().resolve(name).map_err(|e| CmdError::usage(e.to_string()))
}

/// A vLLM release for the per-release tables (store keys, NIXL hashes), named in any form the spec's resolver
/// takes (`0.33.0`, `v0.33.0`, `vllm-0.33.0`, `vllm:0.33.0`). `known` accepts a release the table has even
/// though no wire revision covers it.
pub fn vllm_release(name: &str, known: impl Fn(&str) -> bool) -> Result<String, ReleaseError> {
    match Spec::builtin().resolve_release(name) {
        Ok((rev, rel)) if rev.project() == "vllm" => Ok(rel),
        Ok((rev, release)) => {
            Err(ReleaseError::NotVllm { name: name.to_string(), project: rev.project().to_string(), release })
        }
        Err(_) if known(name) => Ok(name.to_string()),
        Err(e) => Err(ReleaseError::Resolve(e)),
    }
}

/// Why a name is not a vLLM release ([`vllm_release`]).
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// The name is a release of another project (vllm-ascend).
    #[error("`{name}` is {project} {release}, not a vLLM release")]
    NotVllm {
        /// The name as given.
        name: String,
        /// The project it is a release of.
        project: String,
        /// The release it names.
        release: String,
    },
    /// The spec's resolver knows no such name.
    #[error(transparent)]
    Resolve(#[from] mooncake_wire::spec::ResolveError),
}

/// What `hash factors` gives: the hash, or the exception Python's `hash_factors` would raise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Factors {
    /// The digest, and the text that was hashed.
    Hashed {
        /// The hex digest.
        digest: String,
        /// The text that was hashed.
        hashed: String,
    },
    /// Python would raise this.
    Raises(String),
}

/// `hash factors FILE.json` (`-` reads stdin).
pub fn factors(file: &Path) -> Result<Factors, CmdError> {
    let text = if file == Path::new("-") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| format!("stdin: {e}"))?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?
    };
    // Integers beyond 64 bits stay exact (as Python's json.load keeps them).
    let text = tagged::tag_wide_integers(&text).unwrap_or(text);
    let value: J = serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", file.display()))?;
    let py = tagged::from_tagged_json(&value).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(match hash::hash_factors(&py) {
        Ok(h) => Factors::Hashed { digest: h.digest, hashed: h.hashed },
        Err(e) => Factors::Raises(e.to_string()),
    })
}

/// Writes a `hash factors` result, as text or JSON.
pub fn write_factors(w: &mut impl Write, f: &Factors, json_out: bool) -> io::Result<()> {
    match (f, json_out) {
        (Factors::Hashed { digest, hashed }, true) => write_json(
            w,
            &json!({ "digest": digest, "hashed_utf8": hashed, "hashed_hex": hex::encode(hashed.as_bytes()) }),
        ),
        (Factors::Hashed { digest, hashed }, false) => writeln!(w, "{digest}\nhashed: {hashed}"),
        (Factors::Raises(e), true) => write_json(w, &json!({ "error": e })),
        (Factors::Raises(e), false) => writeln!(w, "Python raises {e}"),
    }
}

/// The wire fingerprint of one revision (`hash wire`); with its fingerprinted document when one revision
/// was asked for.
#[derive(Debug, Clone)]
pub struct WireEntry {
    /// The revision's name.
    pub revision: String,
    /// The vLLM releases it covers.
    pub releases: Vec<String>,
    /// Its wire fingerprint.
    pub fingerprint: String,
    /// The document the fingerprint hashes (tagged JSON), for `--revision`.
    pub document: Option<J>,
}

/// `hash wire [--revision R]`: one revision's fingerprint (with its document), or every revision's.
pub fn wire(revision: Option<&str>) -> Result<Vec<WireEntry>, CmdError> {
    let revs: Vec<&Revision> = match revision {
        Some(r) => vec![Spec::builtin().revision(&find_revision(r)?.revision.revision).expect("resolved").as_ref()],
        None => Spec::builtin().push().revisions.iter().map(|r| r.as_ref()).collect(),
    };
    revs.into_iter()
        .map(|r| {
            let fingerprint = wire_fingerprint(r).map_err(|e| format!("{}: {e}", r.revision))?;
            Ok(WireEntry {
                revision: r.revision.clone(),
                releases: r.releases.clone(),
                fingerprint,
                document: revision.map(|_| tagged::to_tagged_json(&wire_document(r).expect("fingerprinted above"))),
            })
        })
        .collect()
}

/// Writes `hash wire`: one line per revision, or JSON (one object for `--revision`, else an array).
pub fn write_wire(w: &mut impl Write, entries: &[WireEntry], json_out: bool) -> io::Result<()> {
    if !json_out {
        for e in entries {
            writeln!(w, "{}  {}", e.fingerprint, e.revision)?;
        }
        return Ok(());
    }
    let one = |e: &WireEntry| {
        let mut v = json!({ "revision": e.revision, "releases": e.releases, "fingerprint": e.fingerprint });
        if let Some(d) = &e.document {
            v["document"] = d.clone();
        }
        v
    };
    match entries {
        [e] if e.document.is_some() => write_json(w, &one(e)),
        _ => write_json(w, &J::Array(entries.iter().map(one).collect())),
    }
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
    let sections =
        ["generation", "transport", "behaviour", "bootstrap", "kv_transfer_params", "env", "extra_config", "replies"];
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

/// What `hash check A B` found: compatible exactly when the spec diff of the two revisions has no breaking row
/// in either direction — the verdict `diff` gives. Equal wire fingerprints mean the msgspec classes are the
/// same; different ones are listed, and `diff` has classified each difference (a struct only the newer revision
/// sends on its own message is not a break by itself).
#[derive(Debug, Clone)]
pub struct Compatibility {
    /// The verdict.
    pub compatible: bool,
    /// Each side: the revision, how it was named, its fingerprint.
    pub a: (String, String, String),
    /// As `a`, for B.
    pub b: (String, String, String),
    /// Struct and field differences on the msgspec wire (item, change).
    pub differences: Vec<(String, String)>,
    /// The breaking rows of `diff OLD NEW`, and the two revisions in that order.
    pub breaking: Vec<String>,
    /// The (OLD, NEW) revisions that diff compared.
    pub diffed: (String, String),
    /// Differences outside the fingerprint (bootstrap, transport, behaviour, parameters), as paths.
    pub outside_fingerprint: Vec<String>,
}

/// `hash check A B`: compatible exactly when the spec diff of the two revisions has no breaking row in either
/// direction (what `diff` exits 0 on); the fingerprints and their differences are reported beside it.
pub fn check(a: &str, b: &str) -> Result<Compatibility, CmdError> {
    let (na, nb) = (find_revision(a)?, find_revision(b)?);
    let (ra, rb) = (na.revision.as_ref(), nb.revision.as_ref());
    let (fa, fb, diffs) = match (wire_fingerprint(ra), wire_fingerprint(rb), compare(ra, rb)) {
        (Ok(x), Ok(y), Ok(d)) => (x, y, d),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return Err(CmdError::usage(e.to_string())),
    };
    // The verdict is the spec diff's: behaviour and bootstrap rows can break a mixed pair on one wire, and a
    // new message that old peers answer with an error they tolerate changes the wire without breaking it;
    // `hash check` agrees with `diff` (and with the observed compatibility matrix).
    let (old, new) = if mooncake_wire::spec::version_key(ra.first_release())
        <= mooncake_wire::spec::version_key(rb.first_release())
    {
        (ra, rb)
    } else {
        (rb, ra)
    };
    let arc = |r: &Revision| Spec::builtin().revision(&r.revision).cloned();
    let (Some(old), Some(new)) = (arc(old), arc(new)) else {
        return Err(CmdError::usage("revision not in the built-in spec"));
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
    Ok(Compatibility {
        compatible: breaking.is_empty(),
        a: (ra.revision.clone(), na.describe(), fa),
        b: (rb.revision.clone(), nb.describe(), fb),
        differences: diffs.into_iter().map(|d| (d.item, d.change)).collect(),
        breaking,
        diffed: (old.revision.clone(), new.revision.clone()),
        outside_fingerprint: outside_fingerprint(ra, rb),
    })
}

/// Writes a `hash check` result, as text or JSON.
pub fn write_check(w: &mut impl Write, c: &Compatibility, json_out: bool) -> io::Result<()> {
    let ((ra, da, fa), (rb, db, fb)) = (&c.a, &c.b);
    if json_out {
        return write_json(
            w,
            &json!({
                "compatible": c.compatible,
                "a": { "revision": ra, "fingerprint": fa },
                "b": { "revision": rb, "fingerprint": fb },
                "differences": c.differences.iter().map(|(item, change)| json!({ "item": item, "change": change })).collect::<Vec<_>>(),
                "breaking": c.breaking,
                "outside_fingerprint": c.outside_fingerprint,
            }),
        );
    }
    if c.compatible && ra == rb {
        writeln!(w, "compatible: {da} and {db} are the same revision (wire fingerprint {fa})")?;
    } else if c.compatible && fa == fb {
        writeln!(w, "compatible: {da} and {db} have the same wire fingerprint {fa} and the spec diff breaks nothing")?;
    } else if c.compatible {
        writeln!(
            w,
            "compatible: {da} ({}) and {db} ({}) differ on the msgspec wire, and the spec diff breaks no direction:",
            &fa[..12],
            &fb[..12]
        )?;
    } else if fa == fb {
        writeln!(
            w,
            "incompatible: {da} and {db} have the same wire fingerprint {fa}, but the spec diff breaks a mixed pair:"
        )?;
    } else {
        writeln!(
            w,
            "incompatible: {da} ({}) and {db} ({}) differ on the msgspec wire, and the spec diff breaks a mixed pair:",
            &fa[..12],
            &fb[..12]
        )?;
    }
    if fa != fb {
        writeln!(w, "msgspec wire differences (each classified by `diff {} {}`):", c.diffed.0, c.diffed.1)?;
        for (item, change) in &c.differences {
            writeln!(w, "  {item}: {change}")?;
        }
    }
    if !c.breaking.is_empty() {
        writeln!(w, "breaking rows of `diff {} {}`:", c.diffed.0, c.diffed.1)?;
        for b in &c.breaking {
            writeln!(w, "  {b}")?;
        }
    }
    if !c.outside_fingerprint.is_empty() {
        writeln!(
            w,
            "outside the fingerprint (bootstrap, transport, behaviour, parameters, config keys, reply texts):"
        )?;
        for x in &c.outside_fingerprint {
            writeln!(w, "  {x}")?;
        }
    }
    Ok(())
}

/// NIXL's compatibility hash of a release for a config (`hash nixl`), and the P2P wrapper's for an engine.
#[derive(Debug, Clone)]
pub struct NixlHash {
    /// The vLLM release.
    pub release: String,
    /// NIXL's connector version in that release (one of the factors).
    pub connector_version: i64,
    /// The factors hashed, as output JSON.
    pub factors: J,
    /// The text `hash_factors` hashes.
    pub hashed: String,
    /// The NIXL compatibility hash (hex).
    pub digest: String,
    /// The transfer engine of the P2P wrapper, when one was asked for.
    pub engine: Option<String>,
    /// The wrapper's hash over `digest` for that engine.
    pub wrapped: Option<String>,
}

/// `hash nixl --release R CONFIG.json [--engine E]`: the NIXL compatibility hash of a release for the config
/// attributes in the file (the golden vectors' input shape), and the P2P wrapper's hash for a transfer engine.
pub fn nixl(release: &str, file: &Path, engine: Option<&str>) -> Result<NixlHash, CmdError> {
    use mooncake_wire::hash::compat::{wrapper_hash, NixlConfig, NixlFactorSet};
    let release = vllm_release(release, |r| NixlFactorSet::for_release(r).is_some())
        .map_err(|e| CmdError::usage(format!("--release {e}")))?;
    let release = release.as_str();
    let set = NixlFactorSet::for_release(release).ok_or_else(|| {
        CmdError::usage(format!("vLLM {release} has no NIXL compatibility hash in spec/compat-hash/nixl.toml"))
    })?;
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let cfg: NixlConfig = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let factors = set.factors(&cfg, release)?;
    let h = hash::hash_factors(&factors).map_err(|e| e.to_string())?;
    let wrapped = engine.map(|e| wrapper_hash(&h.digest, e)).transpose()?;
    Ok(NixlHash {
        release: release.to_string(),
        connector_version: set.connector_version,
        factors: tagged::to_output_json(&factors),
        hashed: h.hashed,
        digest: h.digest,
        engine: engine.map(str::to_string),
        wrapped,
    })
}

/// Writes a `hash nixl` result, as text or JSON.
pub fn write_nixl(w: &mut impl Write, n: &NixlHash, json_out: bool) -> io::Result<()> {
    if json_out {
        return write_json(
            w,
            &json!({
                "release": n.release,
                "nixl_connector_version": n.connector_version,
                "factors": n.factors,
                "hashed_utf8": n.hashed,
                "hash": n.digest,
                "engine": n.engine,
                "wrapped_hash": n.wrapped,
            }),
        );
    }
    writeln!(w, "{}", n.wrapped.as_deref().unwrap_or(&n.digest))?;
    writeln!(w, "nixl_connector_version {}; hashed: {}", n.connector_version, n.hashed)
}
