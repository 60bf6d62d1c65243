//! `mooncake-conformance`: checks implementations of the vLLM Mooncake wire against the spec, vLLM's own
//! vectors and recorded vLLM traffic.
//!
//! Exit codes: 0 = everything checked agrees; 1 = at least one disagreement; 2 = bad usage or unreadable input.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use mooncake_conformance::{report, spec_source, validate, vectors};

#[derive(Parser)]
#[command(name = "mooncake-conformance", version, about = "Conformance tooling for the vLLM Mooncake KV-transfer wire", long_about = LONG_ABOUT)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

const LONG_ABOUT: &str = "Conformance tooling for the vLLM Mooncake KV-transfer wire.

Exit codes: 0 = everything agrees, 1 = at least one case disagrees (diff: a breaking change), 2 = bad usage or unreadable input.";

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check vector files: msgspec encodings with accept/reject verdicts (mooncake-vectors) and outputs of
    /// vLLM's functions (mooncake-golden). Directories are searched for *.jsonl recursively.
    ///
    /// For each msgspec case our decoder must give msgspec's verdict; for accepted cases the decoded value must
    /// equal `value` and our re-encoding must equal `canonical_hex` (or `hex`).
    Vectors {
        /// Vector files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// List every failing case, not just the first few per file.
        #[arg(long)]
        all: bool,
    },
    /// Validate recorded traces: every ZMQ payload decodes as the message its direction implies under the
    /// revision of the header's vllm_version and re-encodes to the recorded bytes; bootstrap HTTP bodies match
    /// the spec; protocol checks hold (see conformance/CHECKS.md).
    Validate {
        /// Trace files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Classify every wire change between two revisions under msgspec's decoding rules: for each, whether an
    /// old decoder reads new bytes and a new decoder reads old bytes (compatible / breaks only when sent /
    /// breaks), and whether unchanged messages keep their bytes. Exits 1 on a breaking change unless
    /// --allow-breaking.
    ///
    /// OLD and NEW: a revision or release (`vllm-0.32.0`, `0.27.1`), a spec file, a spec directory (its newest
    /// revision), or `git:REF` (spec/ of this repository at REF); `DIR#REV` and `git:REF#REV` pick a revision.
    Diff {
        old: String,
        new: String,
        #[arg(long, value_enum, default_value_t = DiffFormat::Markdown)]
        format: DiffFormat,
        /// Exit 0 even when a change breaks a direction.
        #[arg(long)]
        allow_breaking: bool,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum DiffFormat {
    /// A table ready for a pull-request comment.
    Markdown,
    Json,
    /// One line.
    Summary,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Vectors { paths, format, all } => {
            let files = match mooncake_conformance::jsonl::expand(&paths) {
                Ok(f) => f,
                Err(e) => return report::usage_error(&e),
            };
            let reps: Vec<_> = files.iter().map(|f| vectors::check_file(f)).collect();
            let ok = reps.iter().all(|r| r.ok());
            match format {
                Format::Json => report::print_json(&report::vectors_json(&reps)),
                Format::Text => report::vectors_text(&reps, all),
            }
            ExitCode::from(if ok { 0 } else { 1 })
        }
        Cmd::Validate { paths, format } => {
            let files = match mooncake_conformance::jsonl::expand(&paths) {
                Ok(f) => f,
                Err(e) => return report::usage_error(&e),
            };
            let reps: Vec<_> = files.iter().map(|f| validate::validate_file(f)).collect();
            let ok = reps.iter().all(|r| r.ok());
            match format {
                Format::Json => report::print_json(&report::validate_json(&reps)),
                Format::Text => report::validate_text(&reps),
            }
            ExitCode::from(if ok { 0 } else { 1 })
        }
        Cmd::Diff { old, new, format, allow_breaking } => {
            let (old, new) = match (spec_source::resolve(&old), spec_source::resolve(&new)) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => return report::usage_error(&e),
            };
            let r = mooncake_wire::diff::diff(&old, &new);
            match format {
                DiffFormat::Markdown => print!("{}", mooncake_wire::diff::render::markdown(&r)),
                DiffFormat::Json => report::print_json(&mooncake_wire::diff::render::json(&r)),
                DiffFormat::Summary => println!("{}", r.summary),
            }
            ExitCode::from(if r.is_breaking() && !allow_breaking { 1 } else { 0 })
        }
    }
}
