//! `diff`: classifies every wire change between two revisions (or vLLM source) under msgspec's rules.

use std::io::Write;
use std::process::ExitCode;

use clap::ValueEnum;

use mooncake_conformance::report::write_json;
use mooncake_conformance::{spec_changes, spec_source};
use mooncake_wire::diff::{render, Report as DiffReport};
use mooncake_wire::spec::{Revision, Spec};

use super::error::{verdict, ArgError, CliError};
use super::output::out_with;

/// Classify every wire change between two revisions under msgspec's decoding rules: for each, whether an
/// old decoder reads new bytes and a new decoder reads old bytes (compatible / breaks only when sent /
/// breaks / review), and whether unchanged messages keep their bytes. A struct, enum, reply text,
/// kv_connector_extra_config key or environment variable of vLLM source that no spec revision describes is
/// shown as such and fails the diff like a break. Exits 1 on either unless --allow-breaking.
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = no change breaks a direction, and a source side adds nothing the spec lacks (or --allow-breaking; with --spec-changes, always unless a revision of the working tree does not load); 1 = a breaking change, or something in no spec revision; 2 = bad usage, an unknown revision, or (--spec-changes) a changed revision that does not load; 3 = the environment failed (git, or no Python to read a source side).", "\n\nExamples:\n  mooncake-conformance diff 0.32.0 0.33.0 --format summary\n  mooncake-conformance diff --spec-changes --base origin/main"))]
pub(crate) struct DiffArgs {
    /// The old side: a revision or release (vllm-0.32.0, 0.27.1, v0.27.1, vllm-0.27.1, ascend:0.18.0), a
    /// spec file, a spec directory (its newest revision), or git:REF (spec/ of this repository at REF);
    /// DIR#REV and git:REF#REV pick a revision. vLLM source — a checkout, the connector's package folder,
    /// a .py file or a wheel — is read as `extract` reads it.
    #[arg(required_unless_present = "spec_changes")]
    old: Option<String>,
    /// The new side, in the same forms as OLD (same protocol family).
    #[arg(required_unless_present = "spec_changes")]
    new: Option<String>,
    /// Instead of OLD and NEW: the diff of every revision file of spec/ (this repository, the current directory's)
    /// that changed since the merge base with --base — each against itself there, a new one against the revision
    /// it derives from. Informational (a breaking change exits 0): the review of a pull request to spec/.
    #[arg(long, conflicts_with_all = ["old", "new"])]
    spec_changes: bool,
    /// With --spec-changes: the branch to compare with; the first that exists is used (default: origin/main,
    /// then main).
    #[arg(long, value_name = "REF", requires = "spec_changes")]
    base: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Markdown)]
    format: DiffFormat,
    /// Exit 0 even when a change breaks a direction or adds something no spec revision describes (the
    /// change is announced).
    #[arg(long)]
    allow_breaking: bool,
    /// The Python that runs the extraction of a source side (default: $MOONCAKE_PYTHON, else python3).
    #[arg(long, value_name = "PY")]
    python: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DiffFormat {
    /// A table ready for a pull-request comment.
    Markdown,
    /// One JSON document.
    Json,
    /// One line.
    Summary,
}

impl DiffFormat {
    /// The diff on standard output, in this format.
    fn show(self, r: &DiffReport) {
        out_with(|w| match self {
            DiffFormat::Markdown => w.write_all(render::markdown(r).as_bytes()),
            DiffFormat::Json => write_json(w, &render::json(r)),
            DiffFormat::Summary => writeln!(w, "{}", r.summary),
        });
    }
}

/// `diff`: the classified changes between OLD and NEW; 1 when one breaks (or is in no spec revision).
pub(crate) fn exec(args: DiffArgs) -> Result<ExitCode, CliError> {
    let (Some(old_arg), Some(new_arg)) = (&args.old, &args.new) else {
        return spec_changes(&args);
    };
    let py = args.python.clone().unwrap_or_else(mooncake_conformance::extract::default_python);
    let old = spec_source::resolve_with(old_arg, &py)?;
    let new = spec_source::resolve_with(new_arg, &py)?;
    if old.family != new.family {
        return Err(ArgError::DiffFamilies {
            old: old.revision.clone(),
            old_family: old.family.clone(),
            new: new.revision.clone(),
            new_family: new.family.clone(),
        }
        .into());
    }
    let mut r = mooncake_wire::diff::diff(&old, &new);
    // What the spec describes: every bundled revision of the family, and a side given as a spec (its file or
    // directory is a revision too). A source side's own additions are what it adds beyond them.
    let family = Spec::builtin().family(&new.family);
    let mut known: Vec<&Revision> =
        family.map(|f| f.revisions.iter().map(|r| r.as_ref()).collect()).unwrap_or_default();
    for (arg, rev) in [(old_arg, &old), (new_arg, &new)] {
        if !spec_source::is_source_side(arg) {
            known.push(rev);
        }
    }
    mooncake_wire::diff::mark_unspecified(&mut r, &known);
    args.format.show(&r);
    Ok(verdict(!r.fails() || args.allow_breaking))
}

/// `diff --spec-changes`: each changed revision file's line (`spec-diff: …`) and its diff; exit 0 unless one does
/// not load.
fn spec_changes(args: &DiffArgs) -> Result<ExitCode, CliError> {
    let bases = if args.base.is_empty() { vec!["origin/main".into(), "main".into()] } else { args.base.clone() };
    let changes = match spec_changes::since(&bases).map_err(|e| CliError::Usage(e.to_string()))? {
        spec_changes::Outcome::Nothing(why) => {
            out_with(|w| writeln!(w, "spec-diff: {why}"));
            return Ok(verdict(true));
        }
        spec_changes::Outcome::Changes(c) => c,
    };
    let mut skipped = 0;
    for c in &changes {
        match c {
            spec_changes::Change::Compared { line, report } => {
                out_with(|w| writeln!(w, "spec-diff: {line}"));
                args.format.show(report);
                out_with(|w| writeln!(w));
            }
            spec_changes::Change::Note { line, skipped: s } => {
                skipped += usize::from(*s);
                out_with(|w| writeln!(w, "spec-diff: {line}"));
            }
        }
    }
    if skipped > 0 {
        let why = "the base's spec/ is of another format or does not load with this build";
        out_with(|w| writeln!(w, "spec-diff: {skipped} revision(s) not compared: {why}"));
    }
    Ok(verdict(true))
}
