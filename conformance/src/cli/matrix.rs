//! `matrix`: the compatibility matrix observed between the reference peers of every pair of revisions,
//! written as a Markdown table or checked against a committed one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use mooncake_conformance::matrix::{render, Matrix, MatrixConfig};
use mooncake_conformance::report::write_json;
use mooncake_conformance::testee::TesteeSpec;

use super::error::{ArgError, CliError, AGREE, DISAGREE};
use super::output::{finish, Format, Report};
use super::{data_of, runtime, trace_inputs};

/// The compatibility matrix, observed: the reference decoder at each revision against the reference
/// prefiller at each other revision, over real ZeroMQ, HTTP and TCP on 127.0.0.1, for every recorded
/// scenario both have; each cell compared with what `diff` predicts for that direction. Writes the Markdown
/// table (`--out`), or checks a committed one (`--check`).
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = every cell agrees with `diff` (and --check matches); 1 = a cell disagrees, or --check differs; 2 = bad usage or input; 3 = the environment failed.", "\n\nExample:\n  mooncake-conformance matrix --out schema/push/compat-matrix.md"))]
pub(crate) struct MatrixArgs {
    /// Trace files or directories (default: the bundled recordings); the newest release of each revision is used.
    paths: Vec<PathBuf>,
    /// Write the Markdown table to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Compare the Markdown table with this file instead (stale: exit 1).
    #[arg(long)]
    check: Option<PathBuf>,
    /// Only these revisions (names or releases; repeatable, comma-separated).
    #[arg(long, value_delimiter = ',')]
    revision: Vec<String>,
    /// Abort timeout every peer runs with, in milliseconds (it only sets the pace of timeouts).
    #[arg(long, default_value_t = 400)]
    abort_ms: u64,
    /// Runs at once (default: 16 per CPU, at most 64: each plays a scenario between two built-in peers and
    /// waits on its timers; 32 finish the 156 pairs in about 70 s on 2 cores, 3 took 330 s).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Output format on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// A directory laid out like conformance/ instead of the bundled data.
    #[arg(long)]
    data: Option<PathBuf>,
}

/// The matrix as shown: its Markdown table and a summary line as text, or its JSON document.
struct Shown<'a> {
    matrix: &'a Matrix,
    markdown: &'a str,
    summary: String,
}

impl Report for Shown<'_> {
    fn write_text(&self, w: &mut impl Write) -> std::io::Result<()> {
        write!(w, "{}\n{}\n", self.markdown, self.summary)
    }
    fn write_json(&self, w: &mut impl Write) -> std::io::Result<()> {
        write_json(w, &render::json(self.matrix))
    }
}

/// The configuration of a matrix run: the scenarios of the data, the revisions asked for, the pace and jobs.
fn config(a: &MatrixArgs, scenarios: mooncake_conformance::scenarios::Scenarios) -> Result<MatrixConfig, ArgError> {
    let mut only = vec![];
    for r in &a.revision {
        let x = mooncake_wire::spec::Spec::builtin().resolve(r).map_err(ArgError::Revision)?;
        only.push(x.revision.revision.clone());
    }
    Ok(MatrixConfig {
        scenarios: Arc::new(scenarios),
        abort: std::time::Duration::from_millis(a.abort_ms.max(50)),
        jobs: a.jobs.map(usize::from).unwrap_or_else(|| mooncake_conformance::run::default_jobs(&TesteeSpec::Builtin)),
        only,
        progress: Some(Arc::new(|l: &str| eprintln!("{l}"))),
    })
}

/// `--check FILE`: whether the file holds the table (an unreadable file is bad input).
fn is_current(check: &Path, markdown: &str) -> Result<bool, CliError> {
    match std::fs::read_to_string(check) {
        Ok(t) => Ok(t == markdown),
        Err(e) => Err(CliError::Usage(format!("--check {}: {e}", check.display()))),
    }
}

/// The summary line under the table.
fn summary(m: &Matrix, code: u8) -> String {
    let pairs = || m.cells.iter().filter(|c| c.decoder != c.prefiller);
    format!(
        "matrix: {} revisions, {} ordered pairs, {} work, {} break in some scenario, {} disagreements with diff — {}",
        m.revisions.len(),
        pairs().count(),
        pairs().filter(|c| !c.scenarios.is_empty() && c.works()).count(),
        pairs().filter(|c| !c.works()).count(),
        m.disagreements().len(),
        if code == AGREE { "OK" } else { "FAILED" }
    )
}

/// `matrix`: the observed matrix, written (`--out`) or checked (`--check`), and shown.
pub(crate) fn exec(args: MatrixArgs) -> Result<ExitCode, CliError> {
    let data = data_of(&args.data)?;
    let inputs = if args.paths.is_empty() { data.traces("traces")? } else { trace_inputs(&args.paths, false)? };
    let scenarios = data.scenarios()?;
    let traces = mooncake_conformance::matrix::load_traces(&inputs)?;
    let cfg = config(&args, scenarios)?;
    let rt = runtime().map_err(|e| CliError::Environment(e.to_string()))?;
    // The workers are `mooncake-peer testee` processes: a missing program is said once, up front.
    rt.block_on(mooncake_conformance::matrix::preflight()).map_err(|e| {
        if e.environment {
            CliError::Environment(e.message)
        } else {
            CliError::Usage(e.message)
        }
    })?;
    let m = rt.block_on(mooncake_conformance::matrix::build(&traces, &cfg));
    let markdown = render::markdown(&m);
    let mut code = if m.disagreements().is_empty() { AGREE } else { DISAGREE };
    let mut errors = vec![];
    if let Some(f) = &args.out {
        std::fs::write(f, &markdown).map_err(|e| CliError::Usage(format!("--out {}: {e}", f.display())))?;
    }
    if let Some(f) = &args.check {
        if !is_current(f, &markdown)? {
            let shown = f.display();
            errors.push(format!("{shown} is stale: regenerate it with `mooncake-conformance matrix --out {shown}`"));
            code = DISAGREE;
        }
    }
    args.format.show(&Shown { matrix: &m, markdown: &markdown, summary: summary(&m, code) });
    Ok(finish(&errors, code))
}
