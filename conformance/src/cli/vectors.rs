//! `vectors`: checks vector files (msgspec encodings with verdicts, golden outputs of vLLM's functions).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use mooncake_conformance::report::{self, write_json};
use mooncake_trace::finding::FileReport;
use mooncake_trace::vectors;

use super::error::{ArgError, CliError, AGREE, DISAGREE, USAGE};
use super::output::{finish, Format, Report};
use super::shown;

/// Check vector files: msgspec encodings with accept/reject verdicts (mooncake-vectors) and outputs of
/// vLLM's functions (mooncake-golden). Directories are searched for *.jsonl recursively.
///
/// For each msgspec case our decoder must give msgspec's verdict; for accepted cases the decoded value must
/// equal `value` and our re-encoding must equal `canonical_hex` (or `hex`).
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = every case agrees; 1 = a case disagrees or a file could not be checked; 2 = bad usage, a file that is not a vector file, or no case at all; 3 = the environment failed.", "\n\nExample:\n  mooncake-conformance vectors conformance/vectors"))]
pub(crate) struct VectorsArgs {
    /// Vector files or directories (the vector files are not bundled: name them).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// List every failing case, not just the first few per file.
    #[arg(long)]
    all: bool,
    /// Zero files or a file without cases is not an error.
    #[arg(long)]
    allow_empty: bool,
}

/// The report of `vectors`: every file's, and whether the text lists every failing case.
struct Vectors<'a> {
    reps: &'a [FileReport],
    all: bool,
}

impl Report for Vectors<'_> {
    fn write_text(&self, w: &mut impl Write) -> std::io::Result<()> {
        report::write_vectors_text(w, self.reps, self.all)
    }
    fn write_json(&self, w: &mut impl Write) -> std::io::Result<()> {
        write_json(w, &report::vectors_json(self.reps))
    }
}

/// 2 when a file is not a vector file, or holds no case (unless `allow_empty`); 1 when a case disagrees or a
/// file could not be checked; 0 otherwise.
fn vectors_code(reps: &[FileReport], allow_empty: bool) -> u8 {
    if reps.iter().any(|r| r.bad_input || (r.cases == 0 && r.not_checked.is_none() && !allow_empty)) {
        USAGE
    } else if reps.iter().all(|r| r.ok()) {
        AGREE
    } else {
        DISAGREE
    }
}

/// `vectors`: every vector file checked; the report, the files that are not vector files, the exit code.
pub(crate) fn exec(args: VectorsArgs) -> Result<ExitCode, CliError> {
    let VectorsArgs { paths, format, all, allow_empty } = args;
    let expanded = mooncake_trace::jsonl::expand_noting(&paths)?;
    expanded.skipped.iter().for_each(|s| eprintln!("note: {s}"));
    if expanded.files.is_empty() && !allow_empty {
        return Err(ArgError::NoVectorFiles(shown(&paths)).into());
    }
    let reps: Vec<_> = expanded.files.iter().map(|f| vectors::check_file(f)).collect();
    format.show(&Vectors { reps: &reps, all });
    Ok(finish(&vectors::input_problems(&reps, allow_empty), vectors_code(&reps, allow_empty)))
}
