//! `diff --spec-changes`: the wire diff of every revision file of `spec/` that changed since the merge base with
//! the main branch — what a reviewer of a pull request to this repository wants to see (the CI step of
//! `scripts/test.sh`). A changed revision is compared with itself at the merge base; a new one with the revision
//! it derives from (`base = …`), else with the newest revision at the merge base. Informational: what cannot be
//! compared (no history, no main branch, a base of another spec format) is said, not failed; only a revision of
//! the working tree that does not load is an error.

use std::path::Path;
use std::sync::Arc;

use mooncake_wire::diff::{diff, Report};
use mooncake_wire::spec::Revision;

use crate::spec_source::{self, git};

/// The spec format this build reads (the `format` key of a revision file).
const FORMAT: &str = "mooncake-wire-spec/2";

/// What was found, in order.
pub enum Outcome {
    /// Nothing to compare, and why (no history, no main branch, no common history, spec/ unchanged).
    Nothing(String),
    /// The changed revision files, each with its report or why it has none.
    Changes(Vec<Change>),
}

/// One changed file of `spec/`.
pub enum Change {
    /// A revision compared: the file, a line saying with what, and the classified diff.
    Compared {
        /// What was compared, for the heading line (`spec/push/x.toml: vllm-0.35.0 (new, derived from …)`).
        line: String,
        /// The diff.
        report: Box<Report>,
    },
    /// A line to show and nothing to compare (a removed revision, a file that is no revision, a base of another
    /// format or that does not load with this build); `skipped` counts it as not compared.
    Note {
        /// The line.
        line: String,
        /// Whether a revision went uncompared.
        skipped: bool,
    },
}

/// A revision of the working tree did not load (the only failure).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SpecChangesError(pub String);

/// The changes of `spec/` (in the repository the current directory is in) since the merge base with the first of
/// `bases` that exists.
pub fn since(bases: &[String]) -> Result<Outcome, SpecChangesError> {
    let here = Path::new(".");
    if git(here, &["rev-parse", "--verify", "-q", "HEAD"]).is_err() {
        return Ok(Outcome::Nothing("no git history; nothing to compare".into()));
    }
    let Some(base) =
        bases.iter().find(|b| git(here, &["rev-parse", "--verify", "-q", &format!("{b}^{{commit}}")]).is_ok())
    else {
        return Ok(Outcome::Nothing("no main branch; nothing to compare".into()));
    };
    let Ok(mb) = git(here, &["merge-base", base, "HEAD"]).map(|o| String::from_utf8_lossy(&o).trim().to_string())
    else {
        return Ok(Outcome::Nothing(format!("no history in common with {base} (shallow clone?); nothing to compare")));
    };
    let files = changed_files(&mb)?;
    if files.is_empty() {
        let short = &mb[..mb.len().min(7)];
        return Ok(Outcome::Nothing(format!("spec/ unchanged since {base} ({short}); nothing to report")));
    }
    let mut out = vec![];
    for f in files {
        out.push(compare(&f, &mb, base)?);
    }
    Ok(Outcome::Changes(out))
}

/// A changed `.toml` file under `spec/`: its status letter (A, M, D, R), its path now and at the merge base.
struct Changed {
    status: char,
    path: String,
    old_path: String,
}

fn changed_files(mb: &str) -> Result<Vec<Changed>, SpecChangesError> {
    let run = |args: &[&str]| {
        git(Path::new("."), args)
            .map(|o| String::from_utf8_lossy(&o).to_string())
            .map_err(|e| SpecChangesError(e.to_string()))
    };
    let mut out = vec![];
    for line in run(&["diff", "--name-status", "-M", mb, "--", "spec/"])?.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        let status = cols[0].chars().next().unwrap_or('M');
        let (old_path, path) = match (status, cols.as_slice()) {
            ('R', [_, old, new, ..]) => (old.to_string(), new.to_string()),
            (_, [_, p, ..]) => (p.to_string(), p.to_string()),
            _ => continue,
        };
        out.push(Changed { status, path, old_path });
    }
    for p in run(&["ls-files", "--others", "--exclude-standard", "--", "spec/"])?.lines() {
        out.push(Changed { status: 'A', path: p.into(), old_path: p.into() });
    }
    out.retain(|c| c.path.ends_with(".toml"));
    Ok(out)
}

/// A revision file's top-level string `key`, from its text.
fn key(text: &str, key: &str) -> Option<String> {
    let t: toml::Table = toml::from_str(text).ok()?;
    t.get(key)?.as_str().map(str::to_string)
}

fn at_base(mb: &str, path: &str) -> Option<String> {
    git(Path::new("."), &["show", &format!("{mb}:{path}")]).ok().map(|o| String::from_utf8_lossy(&o).to_string())
}

fn note(line: String, skipped: bool) -> Result<Change, SpecChangesError> {
    Ok(Change::Note { line, skipped })
}

fn compare(f: &Changed, mb: &str, base: &str) -> Result<Change, SpecChangesError> {
    let old_text = at_base(mb, &f.old_path);
    if f.status == 'D' {
        let rev = old_text.as_deref().and_then(|t| key(t, "revision")).unwrap_or_default();
        return note(format!("revision {rev} removed ({})", f.old_path), false);
    }
    let text = std::fs::read_to_string(&f.path).map_err(|e| SpecChangesError(format!("{}: {e}", f.path)))?;
    if key(&text, "format").as_deref() != Some(FORMAT) {
        return note(format!("{} is not a wire revision file; skipped", f.path), false);
    }
    let rev = key(&text, "revision").unwrap_or_default();
    let old_format = old_text.as_deref().and_then(|t| key(t, "format"));
    if let Some(of) = old_format.as_deref().filter(|of| *of != FORMAT) {
        let why = format!("it is in spec format {of} at {base}, {FORMAT} here (this build reads only the latter)");
        return note(format!("{}: {rev} — not compared: {why}", f.path), true);
    }
    let (old, what) = match (old_format.is_some(), key(&text, "base")) {
        (true, _) => {
            let old_rev = old_text.as_deref().and_then(|t| key(t, "revision")).unwrap_or_default();
            (format!("git:{mb}#{old_rev}"), format!("changed since {base}"))
        }
        (false, Some(b)) => (format!("spec#{b}"), format!("new, derived from {b}")),
        (false, None) => (format!("git:{mb}"), "new full revision, against the newest revision of the base".into()),
    };
    let new = load(&format!("spec#{rev}"))?;
    let Ok(old) = load(&old) else {
        let short = &mb[..mb.len().min(7)];
        return note(
            format!("cannot compare {rev} with {base}: its spec/ at {short} does not load with this build; skipped"),
            true,
        );
    };
    let line = format!("{}: {rev} ({what})", f.path);
    Ok(Change::Compared { line, report: Box::new(diff(&old, &new)) })
}

fn load(side: &str) -> Result<Arc<Revision>, SpecChangesError> {
    spec_source::resolve(side).map_err(|e| SpecChangesError(format!("{side}: {}", e.message)))
}
