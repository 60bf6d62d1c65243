//! `validate`: checks recorded traces against the spec (conformance/CHECKS.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use mooncake_conformance::report::{self, write_json};
use mooncake_trace::finding::{CheckId, Finding, TraceReport, INPUT_CHECKS};
use mooncake_trace::validate;

use super::error::{CliError, AGREE, DISAGREE, USAGE};
use super::output::{finish, Format, Report};
use super::{data_of, trace_inputs};

/// Validate recorded traces: every ZMQ payload decodes as the message its direction implies under the
/// revision of the header's vllm_version and re-encodes to the recorded bytes; bootstrap HTTP bodies match
/// the spec; protocol checks hold (see conformance/CHECKS.md). With no path: the bundled traces.
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = every trace holds; 1 = a finding; 2 = bad usage, a file that is not a trace (or has no events), or no trace at all; 3 = the environment failed.", "\n\nExample:\n  mooncake-conformance validate conformance/traces/vllm-0.33.0/a_single_success.jsonl"))]
pub(crate) struct ValidateArgs {
    /// Trace files or directories (default: the bundled push and pull traces).
    #[arg(value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// With no path: read the bundled traces from DIR/traces and DIR/traces-pull instead.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Zero traces, or a trace with no events, is not an error.
    #[arg(long)]
    allow_empty: bool,
}

impl Report for [TraceReport] {
    fn write_text(&self, w: &mut impl Write) -> std::io::Result<()> {
        report::write_validate_text(w, self)
    }
    fn write_json(&self, w: &mut impl Write) -> std::io::Result<()> {
        write_json(w, &report::validate_json(self))
    }
}

/// A finding that says the file is not a checkable trace (an empty trace only without `allow_empty`).
fn is_input_problem(f: &Finding, allow_empty: bool) -> bool {
    INPUT_CHECKS.contains(&f.check) && (f.check != CheckId::TraceEmpty || !allow_empty)
}

/// 2 when some file is not a checkable trace, 1 when some trace has findings, 0 otherwise.
fn validate_code(reps: &[TraceReport], allow_empty: bool) -> u8 {
    if reps.iter().any(|r| r.findings.iter().any(|f| is_input_problem(f, allow_empty))) {
        USAGE
    } else if reps.iter().any(|r| r.findings.iter().any(|f| f.check != CheckId::TraceEmpty)) {
        DISAGREE
    } else {
        AGREE
    }
}

/// The input problems, one message each naming its file.
fn input_problems(reps: &[TraceReport], allow_empty: bool) -> Vec<String> {
    let named = |r: &TraceReport, f: &Finding| {
        if f.detail.starts_with(&r.path) {
            f.detail.clone()
        } else {
            format!("{}: {}", r.path, f.detail)
        }
    };
    reps.iter()
        .flat_map(|r| r.findings.iter().filter(|f| is_input_problem(f, allow_empty)).map(move |f| named(r, f)))
        .collect()
}

/// `validate`: every trace validated; the report, the files that are not traces, the exit code.
pub(crate) fn exec(args: ValidateArgs) -> Result<ExitCode, CliError> {
    let ValidateArgs { paths, format, data, allow_empty } = args;
    let inputs = if paths.is_empty() {
        let d = data_of(&data)?;
        [d.traces("traces")?, d.traces("traces-pull")?].concat()
    } else {
        trace_inputs(&paths, allow_empty)?
    };
    let reps: Vec<_> = inputs.iter().map(validate::validate_input).collect();
    format.show(reps.as_slice());
    Ok(finish(&input_problems(&reps, allow_empty), validate_code(&reps, allow_empty)))
}
