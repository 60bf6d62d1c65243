//! What `run` and `replay` share: their options ([`RunOpts`]), the run configuration made of them, the report
//! files, progress on standard error, and running the cases with the reports written.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use mooncake_conformance::bundled::Data;
use mooncake_conformance::play::Status;
use mooncake_conformance::report::{self, write_json};
use mooncake_conformance::run::{Progress, RunConfig, RunReport};
use mooncake_conformance::testee::{split_command, TesteeSpec};
use mooncake_trace::jsonl::Input;

use super::error::{ArgError, CliError, AGREE, DISAGREE, ENVIRONMENT, USAGE};
use super::output::{err, finish, Format, Report};
use super::{runtime, seconds};

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum ProgressMode {
    /// A bar when standard error is a terminal, one line per finished case otherwise.
    Auto,
    /// A bar on standard error.
    Bar,
    /// One line per finished case on standard error (CI logs).
    Lines,
    /// Nothing until the report.
    Off,
}

/// Options shared by `run` and `replay`.
#[derive(clap::Args)]
pub(crate) struct RunOpts {
    /// Output format of the report on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    /// Also write a JUnit XML report to this file (checked before anything runs).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Also write a Markdown report (for a PR comment) to this file (checked before anything runs).
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Also write the JSON report to this file (checked before anything runs).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Seconds to wait for a reply or an outcome beyond the scenario's own timeouts.
    #[arg(long, default_value_t = 3.0, value_name = "SECONDS")]
    slack: f64,
    /// Take the testee to speak only these revisions of those it declares (any name `hash wire` takes:
    /// vllm-0.33.0, 0.33.0, v0.32.0; comma-separated or repeated). This narrows the testee, not the cases:
    /// every trace still runs, those of other revisions as cross-version cases where the spec says the
    /// revisions interoperate, the rest skipped with the reason (`run --list` shows which). To run only the
    /// traces of some revisions, use `run --revision`.
    #[arg(long, value_delimiter = ',', value_name = "REVISION")]
    speaks: Vec<String>,
    /// Scenario setups to add to the bundled scenarios.toml (or --data's): its [scenario.NAME] entries are
    /// added, replacing bundled ones of the same name, and its [model], if any, replaces the model. A trace whose
    /// scenario has no entry has its setup derived from the trace; where the trace does not show something, its
    /// case fails with a CASE-SETUP finding that prints the entry to put here.
    #[arg(long, value_name = "FILE")]
    scenarios: Option<PathBuf>,
    /// A directory laid out like conformance/ (traces/, scenarios.toml, expected-failures.toml) instead of the
    /// data bundled into this binary.
    #[arg(long, value_name = "DIR")]
    pub(crate) data: Option<PathBuf>,
    /// Write each case's testee standard error to DIR/<case id with / as __>.log (the last lines of a failed
    /// case are shown in the report either way).
    #[arg(long, value_name = "DIR")]
    testee_log: Option<PathBuf>,
    /// Progress on standard error while cases run.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    progress: ProgressMode,
    /// Stop after the first case that fails (the report says how many were not run).
    #[arg(long)]
    fail_fast: bool,
    /// Cases run at once, each against a testee of its own; a new one starts as soon as any ends (default:
    /// 16 per CPU, at most 64, against the built-in peer — cases wait on timers, not the CPU; one per CPU
    /// against a --testee command; 1 runs them one after another; an already-running peer of `replay` always
    /// serves one case at a time). Reports list the cases in the same order whatever the number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Zero cases, or every case skipped, is not an error (exit 0 instead of 2).
    #[arg(long)]
    pub(crate) allow_empty: bool,
}

impl Report for RunReport {
    fn write_text(&self, w: &mut impl Write) -> std::io::Result<()> {
        report::write_run_text(w, self)
    }
    fn write_json(&self, w: &mut impl Write) -> std::io::Result<()> {
        write_json(w, &report::run_json(self))
    }
}

/// `--speaks` or `--revision` (`option`) names or releases → push revision names (`None` when not given),
/// through the spec's resolver.
pub(crate) fn resolve_revisions(option: &'static str, given: &[String]) -> Result<Option<Vec<String>>, ArgError> {
    if given.is_empty() {
        return Ok(None);
    }
    let spec = mooncake_wire::spec::Spec::builtin();
    given
        .iter()
        .map(|g| match spec.resolve(g) {
            Ok(r) if r.revision.family == "push" || r.revision.family == "pull" => Ok(r.revision.revision.clone()),
            Ok(r) => Err(ArgError::OtherFamily {
                option,
                given: g.clone(),
                revision: r.revision.revision.clone(),
                family: r.revision.family.clone(),
            }),
            Err(e) => Err(ArgError::Resolve(option, e)),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// What `run` and `replay` share: data, scenarios, testee, options → a run configuration.
pub(crate) fn configure(
    inputs: Vec<Input>,
    testee: Option<&str>,
    o: &RunOpts,
    data: &Data,
) -> Result<RunConfig, ArgError> {
    let speaks = resolve_revisions("--speaks", &o.speaks)?;
    let scenarios = match &o.scenarios {
        Some(p) => data.scenarios()?.overlay_file(p)?,
        None => data.scenarios()?,
    };
    let testee = match testee {
        Some(t) => {
            split_command(t)?;
            TesteeSpec::Command(t.to_string())
        }
        None => TesteeSpec::Builtin,
    };
    let mut cfg = RunConfig::new(inputs, testee);
    cfg.scenarios = scenarios;
    cfg.slack = seconds(o.slack, "--slack")?;
    cfg.speaks = speaks;
    cfg.fail_fast = o.fail_fast;
    cfg.jobs = o.jobs.map(usize::from).unwrap_or_else(|| mooncake_conformance::run::default_jobs(&cfg.testee));
    cfg.allow_empty = o.allow_empty;
    cfg.testee_log = o.testee_log.clone();
    if let Some(d) = &o.testee_log {
        if d.exists() && !d.is_dir() {
            return Err(ArgError::TesteeLogNotDirectory(d.clone()));
        }
    }
    cfg.progress = progress_printer(o.progress);
    Ok(cfg)
}

/// A report file of `--junit`, `--markdown` or `--json`: its writer.
type FileWriter = fn(&mut std::io::BufWriter<File>, &RunReport) -> std::io::Result<()>;

/// The report files, opened (created) before anything runs so that a bad path costs nothing; each with the
/// writer of its format.
pub(crate) struct ReportFiles(Vec<(PathBuf, File, FileWriter)>);

impl ReportFiles {
    pub(crate) fn open(o: &RunOpts) -> Result<ReportFiles, ArgError> {
        let wanted: [(&Option<PathBuf>, &'static str, FileWriter); 3] = [
            (&o.junit, "--junit", |w, r| report::write_run_junit(w, r)),
            (&o.markdown, "--markdown", |w, r| report::write_run_markdown(w, r)),
            (&o.json, "--json", |w, r| r.write_json(w)),
        ];
        let mut files: Vec<(PathBuf, File, FileWriter)> = vec![];
        for (p, option, write) in wanted {
            let Some(p) = p else { continue };
            if files.iter().any(|(seen, ..)| seen == p) {
                return Err(ArgError::SameReport { option, path: p.clone() });
            }
            if p.is_dir() {
                return Err(ArgError::ReportIsDirectory { option, path: p.clone() });
            }
            let f = File::create(p).map_err(|source| ArgError::ReportCreate { option, path: p.clone(), source })?;
            files.push((p.clone(), f, write));
        }
        Ok(ReportFiles(files))
    }

    /// Writes every report file; what could not be written, one message each.
    fn write(self, rep: &RunReport) -> Vec<String> {
        let mut errors = vec![];
        for (p, f, write) in self.0 {
            let mut w = std::io::BufWriter::new(f);
            if let Err(e) = write(&mut w, rep).and_then(|_| w.flush()) {
                errors.push(format!("{}: {e}", p.display()));
            }
        }
        errors
    }
}

/// Progress on standard error: a bar on a terminal, one line per finished case otherwise.
fn progress_printer(mode: ProgressMode) -> Option<Box<dyn FnMut(Progress<'_>) + Send>> {
    let bar = match mode {
        ProgressMode::Off => return None,
        ProgressMode::Bar => true,
        ProgressMode::Lines => false,
        ProgressMode::Auto => std::io::stderr().is_terminal(),
    };
    let mut failed_so_far = 0;
    Some(Box::new(move |p: Progress<'_>| match (bar, p) {
        (true, Progress::Started { index, total, id }) => {
            let done = index * 24 / total.max(1);
            err(&format!(
                "\r[{}{}] {:>3}/{total} {failed_so_far} failed  {:<56}",
                "#".repeat(done),
                "-".repeat(24 - done),
                index + 1,
                id
            ));
        }
        (true, Progress::Finished { index, total, failed, .. }) => {
            failed_so_far = failed;
            if index + 1 == total {
                err(&format!("\r{:<120}\r", ""));
            }
        }
        (false, Progress::Finished { index, total, result, failed }) => {
            let w = total.to_string().len();
            err(&format!(
                "[{:>w$}/{total}] {:<5} {} ({} ms){}\n",
                index + 1,
                result.status.word(),
                result.id,
                result.duration_ms,
                if failed > 0 { format!(" — {failed} failed so far") } else { String::new() }
            ));
        }
        _ => {}
    }))
}

/// 3 when the environment failed (a testee died), 1 on a failure or a stale expected failure, 2 when every
/// case was skipped (unless `allow_empty`), 0 otherwise.
fn run_code(r: &RunReport, allow_empty: bool) -> u8 {
    if r.count(Status::Error) > 0 {
        ENVIRONMENT
    } else if !r.ok() {
        DISAGREE
    } else if !allow_empty && r.nothing_checked() {
        USAGE
    } else {
        AGREE
    }
}

/// Runs the cases and writes the reports: the files, then standard output in `format`.
pub(crate) fn execute(cfg: RunConfig, format: Format, files: ReportFiles) -> Result<ExitCode, CliError> {
    let rt = runtime().map_err(|e| CliError::Environment(format!("starting the runtime: {e}")))?;
    let allow_empty = cfg.allow_empty;
    let rep = rt.block_on(mooncake_conformance::run::run(cfg))?;
    let mut errors = files.write(&rep);
    // A report file that could not be written after the run (a full disk): the environment failed.
    let code = if errors.is_empty() { run_code(&rep, allow_empty) } else { ENVIRONMENT };
    errors.extend(rep.problems(allow_empty));
    format.show(&rep);
    Ok(finish(&errors, code))
}
