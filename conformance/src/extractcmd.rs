//! `mooncake-conformance extract`: the command around [`crate::extract`]. It returns the derived revision
//! (or the proof table) as a typed result; the writers write it to any `impl Write`, and the CLI writes the
//! files `--out` and `--check` name.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::extract::{self, proof, Derived};
use crate::outcome::{CmdError, ErrorKind};
use crate::report::write_json;

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

/// A revision derived from one vLLM source, with its wire fingerprint and the summary line.
#[derive(Clone, Debug)]
pub struct Extraction {
    /// The source it was read from.
    pub path: PathBuf,
    /// The derived revision.
    pub derived: Derived,
    /// The wire fingerprint, or why there is none (in parentheses).
    pub fingerprint: String,
    /// `PATH: REVISION — closest bundled revision …; N facts not derived`.
    pub line: String,
}

/// `extract PATH`: the revision derived from the source at `path` (a failure names the path).
pub fn one(path: &Path, base: Option<&str>, python: &str) -> Result<Extraction, CmdError> {
    let derived = extract::derive(path, python, base)
        .map_err(|e| CmdError { kind: e.kind, message: format!("{}: {}", path.display(), e.message) })?;
    let fingerprint =
        mooncake_wire::hash::fingerprint::wire_fingerprint(&derived.revision).unwrap_or_else(|e| format!("({e})"));
    let n = derived.not_derived.len();
    let line = format!(
        "{}: {} — closest bundled revision {}, {} edit{}; wire fingerprint {}; {} fact{} not derived",
        path.display(),
        derived.revision.revision,
        derived.base,
        derived.edits,
        if derived.edits == 1 { "" } else { "s" },
        fingerprint,
        n,
        if n == 1 { "" } else { "s" }
    );
    Ok(Extraction { path: path.to_path_buf(), derived, fingerprint, line })
}

/// Writes what `extract` prints on standard output: the spec file (nothing when it goes to a file,
/// `to_file`), the JSON document or the summary line.
pub fn write_extraction(w: &mut impl Write, x: &Extraction, fmt: Output, to_file: bool) -> io::Result<()> {
    let d = &x.derived;
    match fmt {
        Output::Toml if to_file => Ok(()),
        Output::Toml => w.write_all(d.text.as_bytes()),
        Output::Summary => writeln!(w, "{}", x.line),
        Output::Json => write_json(
            w,
            &serde_json::json!({
                "path": x.path.display().to_string(),
                "revision": d.revision.revision,
                "base": d.base,
                "edits": d.edits,
                "release": d.facts.release,
                "files": d.facts.files,
                "wire_fingerprint": x.fingerprint,
                "not_derived": d.not_derived,
                "file": d.text,
            }),
        ),
    }
}

/// Writes what `extract` says on standard error: the summary line (with the spec file) and one
/// "not derived: …" line per fact (not with JSON).
pub fn write_notes(w: &mut impl Write, x: &Extraction, fmt: Output) -> io::Result<()> {
    if fmt == Output::Json {
        return Ok(());
    }
    if fmt == Output::Toml {
        writeln!(w, "{}", x.line)?;
    }
    x.derived.not_derived.iter().try_for_each(|n| writeln!(w, "not derived: {n}"))
}

/// The proof on history: one row per wheel, the wheels skipped (cached ones of releases no revision covers).
#[derive(Clone, Debug)]
pub struct Proof {
    /// The Markdown table.
    pub markdown: String,
    /// `skipped: …` lines.
    pub skipped: String,
    /// Wheels whose fingerprint is not the bundled revision's.
    pub disagreeing: usize,
}

/// `extract --proof [WHEEL...]`: the proof table over the wheels given, or every cached one.
pub fn proof(paths: &[PathBuf], python: &str) -> Result<Proof, CmdError> {
    let wheels = if paths.is_empty() { proof::cached_wheels(&proof::cache_dir()) } else { paths.to_vec() };
    if wheels.is_empty() {
        return Err(CmdError::usage(format!(
            "--proof: no wheels given and none cached in {} (pip download --no-deps vllm==X -d that directory)",
            proof::cache_dir().display()
        )));
    }
    let mut rows = vec![];
    let mut skipped = String::new();
    for w in &wheels {
        match proof::row(w, python) {
            Ok(r) => rows.push(r),
            // A cached wheel of a release no revision covers (nothing to compare with) is named, not fatal.
            Err(e) if paths.is_empty() && e.kind == ErrorKind::Usage && e.message.contains("is in no revision") => {
                skipped.push_str(&format!("skipped: {}\n", e.message));
            }
            Err(e) => return Err(CmdError { kind: e.kind, message: format!("{}: {}", w.display(), e.message) }),
        }
    }
    if rows.is_empty() {
        return Err(CmdError::usage(format!("--proof: no cached wheel of a release the spec covers\n{skipped}")));
    }
    Ok(Proof { markdown: proof::markdown(&rows), skipped, disagreeing: rows.iter().filter(|r| !r.agrees()).count() })
}
