//! `run`: every case of the bundled (or given) traces against a testee.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use mooncake_conformance::expected::ExpectedFailures;
use mooncake_conformance::listing::{self, Listed};
use mooncake_conformance::play::Role;
use mooncake_conformance::report::write_json;

use super::cases::{configure, execute, resolve_revisions, ReportFiles, RunOpts};
use super::error::{ArgError, CliError, AGREE};
use super::output::Report;
use super::{data_of, runtime, trace_inputs};

/// Run the conformance cases: each bundled (or given) trace, each role it exercises, played against a
/// testee. With no arguments: every bundled trace against the built-in reference peer.
///
/// A case `<revision>/<scenario>/prefiller` tests a prefiller: the runner plays the recorded decoder(s).
/// `…/decoder` tests a decoder: the runner plays the recorded prefiller(s). `…/bootstrap` tests a bootstrap
/// server. A testee speaks conformance/TESTEE.md on its standard input and output.
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = every case passes (or fails as expected); 1 = a case fails, or an expected failure is stale; 2 = bad usage or input, no case to run, or every case skipped; 3 = the environment failed (the testee died or never said hello).", "\n\nExample:\n  mooncake-conformance run --testee \"./my-peer --testee\" --junit report.xml --testee-log logs/"))]
pub(crate) struct RunArgs {
    /// Trace files or directories (default: the bundled traces).
    #[arg(value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Command line of the implementation to test, split as a shell would ("./peer --name 'a b'");
    /// default: the built-in reference peer, `mooncake-peer --log error testee` (the mooncake-peer next to
    /// this program, else on PATH).
    #[arg(long, value_name = "COMMAND")]
    testee: Option<String>,
    /// Only cases of these roles: prefiller, decoder, bootstrap (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "ROLE")]
    role: Vec<String>,
    /// Only cases whose id contains one of these texts (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "TEXT")]
    case: Vec<String>,
    /// Only cases of traces of these revisions (any name `--speaks` takes; comma-separated or repeated): with
    /// `--speaks` the same, a run of those revisions' own cases only.
    #[arg(long, value_delimiter = ',', value_name = "REVISION")]
    revision: Vec<String>,
    /// Print the cases that would run, under every filter above and --speaks, and run none: each id, what the
    /// run would do when it is not to play it at the trace's revision (cross-version, or skip and why), and a
    /// count of the skip reasons. Asks the testee for its hello, as the run does.
    #[arg(long)]
    list: bool,
    /// Expected failures (default: the bundled expected-failures.toml with the built-in peer, none otherwise).
    #[arg(long, value_name = "FILE")]
    expected_failures: Option<PathBuf>,
    #[command(flatten)]
    opts: RunOpts,
}

/// The case list of `run --list`.
impl Report for [Listed] {
    fn write_text(&self, w: &mut impl Write) -> std::io::Result<()> {
        listing::write_text(w, self)
    }
    fn write_json(&self, w: &mut impl Write) -> std::io::Result<()> {
        write_json(w, &listing::json(self))
    }
}

/// `run`: lists the cases (`--list`), or runs them and writes the reports; the exit code of the run.
pub(crate) fn exec(args: RunArgs) -> Result<ExitCode, CliError> {
    let RunArgs { paths, testee, role, case, revision, list, expected_failures, opts } = args;
    let data = data_of(&opts.data)?;
    let inputs = if paths.is_empty() {
        [data.traces("traces")?, data.traces("traces-pull")?].concat()
    } else {
        trace_inputs(&paths, opts.allow_empty)?
    };
    let mut cfg = configure(inputs, testee.as_deref(), &opts, &data)?;
    cfg.roles = role
        .iter()
        .map(|r| Role::parse(r.trim()).ok_or_else(|| ArgError::Role(r.clone())))
        .collect::<Result<_, _>>()?;
    cfg.cases = case.into_iter().map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
    cfg.revisions = resolve_revisions("--revision", &revision)?.unwrap_or_default();
    if list {
        let rt = runtime().map_err(|e| CliError::Environment(format!("starting the runtime: {e}")))?;
        let listed = rt.block_on(listing::list(&cfg))?;
        opts.format.show(listed.as_slice());
        return Ok(ExitCode::from(AGREE));
    }
    cfg.expected = match (&expected_failures, &testee) {
        (Some(p), _) => ExpectedFailures::load(p)?,
        (None, None) => {
            let mut e = data.expected_failures()?;
            if !paths.is_empty() {
                // Traces given: the bundled list concerns the bundled traces, so only its entries for cases of
                // these traces apply (the others would be reported stale, as cases that did not run).
                let ids: Vec<String> =
                    mooncake_conformance::run::select_cases(&cfg)?.into_iter().map(|c| c.id).collect();
                e.cases.retain(|x| ids.contains(&x.id));
            }
            e
        }
        (None, Some(_)) => ExpectedFailures::default(),
    };
    let files = ReportFiles::open(&opts)?;
    execute(cfg, opts.format, files)
}
