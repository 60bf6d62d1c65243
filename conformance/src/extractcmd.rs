//! `mooncake-conformance extract`: the command around [`crate::extract`].

use std::path::PathBuf;

use crate::extract::{self, proof};
use crate::outcome::{Outcome, AGREE, DISAGREE, USAGE};

/// What `extract` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The spec file.
    Toml,
    /// One JSON document: revision, base, edits, fingerprint, not derived, the file.
    Json,
    /// One line per source.
    Summary,
}

/// `extract PATH`: the derived revision file (to `out`, or standard output), and the text for standard
/// error (the summary line and one "not derived: …" line per fact).
pub fn one(
    path: &std::path::Path,
    out: Option<&PathBuf>,
    base: Option<&str>,
    python: &str,
    fmt: Output,
) -> (Outcome, String) {
    let d = match extract::derive(path, python, base) {
        Ok(d) => d,
        Err(e) => {
            let o = Outcome {
                stdout: String::new(),
                errors: vec![format!("{}: {}", path.display(), e.message)],
                code: e.code,
            };
            return (o, String::new());
        }
    };
    let fp = mooncake_wire::hash::fingerprint::wire_fingerprint(&d.revision).unwrap_or_else(|e| format!("({e})"));
    let line = format!(
        "{}: {} — closest bundled revision {}, {} edit{}; wire fingerprint {}; {} fact{} not derived",
        path.display(),
        d.revision.revision,
        d.base,
        d.edits,
        if d.edits == 1 { "" } else { "s" },
        fp,
        d.not_derived.len(),
        if d.not_derived.len() == 1 { "" } else { "s" }
    );
    let mut notes = String::new();
    for n in &d.not_derived {
        notes.push_str(&format!("not derived: {n}\n"));
    }
    let stdout = match fmt {
        Output::Toml if out.is_some() => String::new(),
        Output::Toml => d.text.clone(),
        Output::Summary => format!("{line}\n"),
        Output::Json => crate::report::json_text(&serde_json::json!({
            "path": path.display().to_string(),
            "revision": d.revision.revision,
            "base": d.base,
            "edits": d.edits,
            "release": d.facts.release,
            "files": d.facts.files,
            "wire_fingerprint": fp,
            "not_derived": d.not_derived,
            "file": d.text,
        })),
    };
    if let Some(o) = out {
        if let Err(e) = std::fs::write(o, &d.text) {
            let o =
                Outcome { stdout, errors: vec![format!("{}: {e}", o.display())], code: crate::outcome::ENVIRONMENT };
            return (o, String::new());
        }
    }
    let stderr = match fmt {
        Output::Toml => format!("{line}\n{notes}"),
        Output::Summary => notes,
        Output::Json => String::new(),
    };
    (Outcome { stdout, errors: vec![], code: AGREE }, stderr)
}

/// `extract --proof [WHEEL...]`: the proof table over the wheels given, or every cached one.
pub fn proof(paths: &[PathBuf], out: Option<&PathBuf>, check: Option<&PathBuf>, python: &str) -> Outcome {
    let wheels = if paths.is_empty() { proof::cached_wheels(&proof::cache_dir()) } else { paths.to_vec() };
    if wheels.is_empty() {
        return Outcome::usage(format!(
            "--proof: no wheels given and none cached in {} (pip download --no-deps vllm==X -d that directory)",
            proof::cache_dir().display()
        ));
    }
    let mut rows = vec![];
    let mut skipped = String::new();
    for w in &wheels {
        match proof::row(w, python) {
            Ok(r) => rows.push(r),
            // A cached wheel of a release no revision covers (nothing to compare with) is named, not fatal.
            Err(e) if paths.is_empty() && e.code == USAGE && e.message.contains("is in no revision") => {
                skipped.push_str(&format!("skipped: {}\n", e.message));
            }
            Err(e) => {
                let errors = vec![format!("{}: {}", w.display(), e.message)];
                return Outcome { stdout: String::new(), errors, code: e.code };
            }
        }
    }
    if rows.is_empty() {
        return Outcome::usage(format!("--proof: no cached wheel of a release the spec covers\n{skipped}"));
    }
    let md = proof::markdown(&rows);
    let bad = rows.iter().filter(|r| !r.agrees()).count();
    let mut errors = vec![];
    let mut code = if bad == 0 { AGREE } else { DISAGREE };
    if let Some(o) = out {
        if let Err(e) = std::fs::write(o, &md) {
            return Outcome {
                stdout: String::new(),
                errors: vec![format!("{}: {e}", o.display())],
                code: crate::outcome::ENVIRONMENT,
            };
        }
    }
    if let Some(c) = check {
        match std::fs::read_to_string(c) {
            Ok(t) if t == md => {}
            Ok(_) => {
                errors.push(format!(
                    "{} is stale: regenerate with `mooncake-conformance extract --proof --out {}`",
                    c.display(),
                    c.display()
                ));
                code = DISAGREE;
            }
            Err(e) => {
                return Outcome { stdout: String::new(), errors: vec![format!("{}: {e}", c.display())], code: USAGE }
            }
        }
    }
    if bad > 0 {
        errors.push(format!("{bad} wheel(s) do not give the bundled fingerprint"));
    }
    Outcome { stdout: if out.is_some() { skipped } else { md + &skipped }, errors, code }
}
