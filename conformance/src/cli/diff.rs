//! `diff`: classifies every wire change between two revisions (or vLLM source) under msgspec's rules.

use std::io::Write;
use std::process::ExitCode;

use clap::ValueEnum;

use mooncake_conformance::report::write_json;
use mooncake_conformance::spec_source;
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
#[command(after_help = concat!("Exit codes: 0 = no change breaks a direction, and a source side adds nothing the spec lacks (or --allow-breaking); 1 = a breaking change, or something in no spec revision; 2 = bad usage or an unknown revision; 3 = the environment failed (git, or no Python to read a source side).", "\n\nExample:\n  mooncake-conformance diff 0.32.0 0.33.0 --format summary"))]
pub(crate) struct DiffArgs {
    /// The old side: a revision or release (vllm-0.32.0, 0.27.1, v0.27.1, vllm-0.27.1, ascend:0.18.0), a
    /// spec file, a spec directory (its newest revision), or git:REF (spec/ of this repository at REF);
    /// DIR#REV and git:REF#REV pick a revision. vLLM source — a checkout, the connector's package folder,
    /// a .py file or a wheel — is read as `extract` reads it.
    old: String,
    /// The new side, in the same forms as OLD (same protocol family).
    new: String,
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
    let py = args.python.unwrap_or_else(mooncake_conformance::extract::default_python);
    let old = spec_source::resolve_with(&args.old, &py)?;
    let new = spec_source::resolve_with(&args.new, &py)?;
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
    for (arg, rev) in [(&args.old, &old), (&args.new, &new)] {
        if !spec_source::is_source_side(arg) {
            known.push(rev);
        }
    }
    mooncake_wire::diff::mark_unspecified(&mut r, &known);
    args.format.show(&r);
    Ok(verdict(!r.fails() || args.allow_breaking))
}
