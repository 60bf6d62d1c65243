//! `mooncake-conformance run`: every case of every given trace against a testee, with expected failures,
//! progress, and reports.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::expected::{ExpectedFailure, ExpectedFailures};
use crate::play::{cases_named, play, CaseResult, PlayOptions, Role, Status};
use crate::scenarios::Scenarios;
use crate::testee::{Testee, TesteeSpec};
use mooncake_trace::conversation::Conversation;
use mooncake_trace::jsonl::Input;
use mooncake_trace::trace::Trace;

/// One step of a run, for progress output (the library prints nothing itself).
pub enum Progress<'a> {
    /// Case `index` (0-based) of `total` is about to run.
    Started {
        /// The case's place.
        index: usize,
        /// Cases in the run.
        total: usize,
        /// The case's id.
        id: &'a str,
    },
    /// It finished; `failed` counts the failed cases so far.
    Finished {
        /// The case's place.
        index: usize,
        /// Cases in the run.
        total: usize,
        /// Its result.
        result: &'a CaseResult,
        /// Failed cases so far.
        failed: usize,
    },
}

/// What `run` runs, against what, and how.
pub struct RunConfig {
    /// The traces (files on disk or bundled).
    pub inputs: Vec<Input>,
    /// How to start the testee.
    pub testee: TesteeSpec,
    /// Only cases of these roles (none: every role).
    pub roles: Vec<Role>,
    /// Only cases whose id contains one of these texts (none: every case).
    pub cases: Vec<String>,
    /// Only cases of traces of these revisions (`--revision`; none: every revision).
    pub revisions: Vec<String>,
    /// The scenarios (setups of the traces' scenarios).
    pub scenarios: Scenarios,
    /// Cases expected to fail (`expected-failures.toml`).
    pub expected: ExpectedFailures,
    /// How long to wait for any one reply or outcome beyond the scenario's own timeouts.
    pub slack: Duration,
    /// Called before and after each case (progress bars, one line per case).
    pub progress: Option<Box<dyn FnMut(Progress<'_>) + Send>>,
    /// An implementation that is already running (`replay --peer` / `--listen`), instead of a testee.
    pub external: crate::play::External,
    /// Take the testee to speak only these of the revisions it declares (`--speaks`): the others' traces
    /// run as cross-version cases or are skipped.
    pub speaks: Option<Vec<String>>,
    /// Stop after the first case that fails or errs (cases already running finish and are reported).
    pub fail_fast: bool,
    /// Cases run at once, each against its own testee (an already-running implementation: always one).
    pub jobs: usize,
    /// Zero cases, or every case skipped, is not an error.
    pub allow_empty: bool,
    /// Write each case's testee standard error to `DIR/<case id>.log`.
    pub testee_log: Option<PathBuf>,
}

impl RunConfig {
    /// Every case of `inputs` against `testee`, with the bundled scenarios and nothing else set.
    pub fn new(inputs: Vec<Input>, testee: TesteeSpec) -> RunConfig {
        RunConfig {
            inputs,
            testee,
            roles: vec![],
            cases: vec![],
            revisions: vec![],
            scenarios: crate::bundled::scenarios(),
            expected: ExpectedFailures::default(),
            slack: Duration::from_secs(3),
            progress: None,
            external: crate::play::External::None,
            speaks: None,
            fail_fast: false,
            jobs: 1,
            allow_empty: false,
            testee_log: None,
        }
    }
    /// The traces under these paths (files, or directories searched for `*.jsonl`).
    pub fn paths(paths: &[PathBuf], testee: TesteeSpec) -> Result<RunConfig, mooncake_trace::jsonl::JsonlError> {
        Ok(RunConfig::new(Input::files(paths)?, testee))
    }
}

/// Why a run could not produce a report: bad usage or input, or the environment failed.
pub type RunError = crate::outcome::CmdError;

/// What a run found.
pub struct RunReport {
    /// The testee's name, from its hello.
    pub testee: String,
    /// One result per case that ran, in case order.
    pub results: Vec<CaseResult>,
    /// Expected-failure entries whose case passed or does not exist (they fail the run).
    pub stale: Vec<String>,
    /// Cases left out by `--fail-fast` after the first failure.
    pub not_run: usize,
}

impl RunReport {
    /// Whether no case failed or broke and no expected failure is stale.
    pub fn ok(&self) -> bool {
        self.stale.is_empty() && self.results.iter().all(|r| r.status != Status::Fail && r.status != Status::Error)
    }
    /// Cases that ended with `s`.
    pub fn count(&self, s: Status) -> usize {
        self.results.iter().filter(|r| r.status == s).count()
    }
    /// Checks left out of the cases that ran because their traces could not observe what they compare with.
    pub fn not_applicable(&self) -> usize {
        self.results.iter().filter(|r| !matches!(r.status, Status::Skip)).map(|r| r.not_applicable.len()).sum()
    }
    /// Every case was skipped: nothing was checked.
    pub fn nothing_checked(&self) -> bool {
        self.count(Status::Skip) == self.results.len()
    }
    /// What went wrong besides failed cases, for standard error: a testee died, every case skipped (unless
    /// `allow_empty`).
    pub fn problems(&self, allow_empty: bool) -> Vec<String> {
        let mut out = vec![];
        if let Some(e) = self.results.iter().find(|r| r.status == Status::Error) {
            out.push(format!("{}: {}", e.id, e.reason.as_deref().unwrap_or("the environment failed")));
        }
        if !allow_empty && !self.results.is_empty() && self.count(Status::Skip) == self.results.len() {
            let why = self.results[0].reason.as_deref().unwrap_or("");
            out.push(format!(
                "every case was skipped, nothing was checked (the first: {why}); --allow-empty accepts that"
            ));
        }
        out
    }
}

/// Why the cases of the given traces could not be loaded: bad input.
#[derive(Debug, thiserror::Error)]
pub enum CasesError {
    /// A file is not a valid trace.
    #[error(transparent)]
    Trace(#[from] mooncake_trace::trace::TraceError),
    /// A trace has no events after its header (without `--allow-empty`).
    #[error("{0}: no events after the header line: nothing to play (--allow-empty accepts that)")]
    NoEvents(String),
    /// A trace does not pass `validate`.
    #[error(transparent)]
    Invalid(#[from] mooncake_trace::validate::InvalidTrace),
    /// Two traces of the same revision, scenario and release: their cases would share ids.
    #[error("{first} and {second} both make the case id {id} (same revision, scenario and release): give one of them a scenario name of its own in its header")]
    DuplicateId {
        /// The id.
        id: String,
        /// One trace.
        first: String,
        /// The other.
        second: String,
    },
    /// A trace's conversation cannot be read with its revision.
    #[error("{name}: {source}")]
    Conversation {
        /// How the trace is named.
        name: String,
        /// Why.
        source: mooncake_trace::conversation::ConversationError,
    },
}

/// The cases of the traces (each trace: one case per role it exercises), sorted by id; ids are unique
/// ([`crate::case_id`]). A trace with no events after its header yields none, which is an error unless
/// `allow_empty`.
pub fn load_cases(inputs: &[Input], allow_empty: bool) -> Result<Vec<crate::play::Case>, CasesError> {
    let mut models = vec![];
    for f in inputs {
        let trace = Trace::load_input(f)?;
        if trace.events.is_empty() && !allow_empty {
            return Err(CasesError::NoEvents(f.name()));
        }
        let model = Conversation::new(trace).map_err(|source| CasesError::Conversation { name: f.name(), source })?;
        mooncake_trace::validate::must_validate(&f.name(), &model)?;
        models.push(Arc::new(model));
    }
    let keys: Vec<_> = models.iter().map(|m| crate::case_id::TraceKey::of(m)).collect();
    let bases = crate::case_id::bases(&keys);
    let mut out: Vec<_> = models.into_iter().zip(&bases).flat_map(|(m, base)| cases_named(m, base)).collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    match crate::case_id::duplicate(&out) {
        Some((id, first, second)) => Err(CasesError::DuplicateId { id, first, second }),
        None => Ok(out),
    }
}

/// The cases a run would play: the traces' cases narrowed by `--role`, `--case` and `--revision`. Zero is an
/// error naming what was looked for (unless `allow_empty`).
pub fn select_cases(cfg: &RunConfig) -> Result<Vec<crate::play::Case>, RunError> {
    if cfg.inputs.is_empty() && !cfg.allow_empty {
        return Err(RunError::usage("no trace files (*.jsonl) to run (--allow-empty accepts that)"));
    }
    // Every error of the traces is bad input.
    let all = load_cases(&cfg.inputs, cfg.allow_empty).map_err(|e| RunError::usage(e.to_string()))?;
    let n = all.len();
    let cases: Vec<_> = all
        .into_iter()
        .filter(|c| cfg.roles.is_empty() || cfg.roles.contains(&c.role))
        .filter(|c| cfg.cases.is_empty() || cfg.cases.iter().any(|f| c.id.contains(f.as_str())))
        .filter(|c| cfg.revisions.is_empty() || cfg.revisions.contains(&c.model.revision.revision))
        .collect();
    if cases.is_empty() && !cfg.allow_empty {
        let mut asked = vec![];
        if !cfg.cases.is_empty() {
            asked.push(format!("--case {}", cfg.cases.join(",")));
        }
        if !cfg.revisions.is_empty() {
            asked.push(format!("--revision {}", cfg.revisions.join(",")));
        }
        if !cfg.roles.is_empty() {
            asked.push(format!("--role {}", cfg.roles.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(",")));
        }
        return Err(RunError::usage(if asked.is_empty() {
            format!("the {} trace files yield no case (--allow-empty accepts that)", cfg.inputs.len())
        } else {
            format!(
                "no case matches {} (of {n} cases in {} traces; `run --list` lists them)",
                asked.join(" "),
                cfg.inputs.len()
            )
        }));
    }
    Ok(cases)
}

/// `tcp://HOST:PORT` → `HOST:PORT` (IPv6 literals bracketed), or why it is not one.
fn tcp_endpoint(ep: &str, option: &str) -> Result<String, RunError> {
    let hp = ep
        .strip_prefix("tcp://")
        .ok_or_else(|| RunError::usage(format!("{option} {ep}: a ZeroMQ endpoint tcp://HOST:PORT")))?;
    match hp.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && (p.parse::<u16>().is_ok() || p == "*") => Ok(hp.to_string()),
        _ => Err(RunError::usage(format!("{option} {ep}: a ZeroMQ endpoint tcp://HOST:PORT"))),
    }
}

/// `http://HOST:PORT[/…]` → `HOST:PORT`, or why it is not one.
pub(crate) fn http_host(url: &str, option: &str) -> Result<String, RunError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| RunError::usage(format!("{option} {url}: a bootstrap server URL http://HOST:PORT")))?;
    let hp = rest.split('/').next().unwrap_or("");
    if hp.is_empty() {
        return Err(RunError::usage(format!("{option} {url}: a bootstrap server URL http://HOST:PORT")));
    }
    Ok(if hp.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        hp.to_string()
    } else {
        format!("{hp}:80")
    })
}

/// Something listens at `host:port` (a TCP connect within 2 s), or an environment error saying what is not.
pub(crate) fn reachable(hp: &str, shown: &str) -> Result<(), RunError> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = hp.to_socket_addrs().map_err(|e| RunError::usage(format!("{shown}: {e}")))?.collect();
    let mut last = None;
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)) {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    Err(RunError::environment(format!(
        "nothing is listening at {shown} ({})",
        last.map(|e| e.to_string()).unwrap_or_else(|| "no address".into())
    )))
}

/// The address is free to listen on, or an environment error (a port in use).
fn bindable(hp: &str, shown: &str) -> Result<(), RunError> {
    if hp.ends_with(":*") || hp.ends_with(":0") {
        return Ok(());
    }
    match std::net::TcpListener::bind(hp) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            Err(RunError::environment(format!("cannot listen at {shown}: the port is in use")))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
            Err(RunError::usage(format!("cannot listen at {shown}: {e}")))
        }
        Err(e) => Err(RunError::environment(format!("cannot listen at {shown}: {e}"))),
    }
}

/// Checks an already-running implementation before any case: endpoint syntax (exit 2), something listening
/// at `--peer` and `--listen`'s ports free (exit 3). Without this a wrong scheme waited out every case's
/// timeout and a dead peer read as missing replies.
pub fn preflight(external: &crate::play::External) -> Result<(), RunError> {
    use crate::play::External;
    preflight_syntax(external)?;
    match external {
        External::None => Ok(()),
        External::Prefillers(eps) => {
            for ep in eps {
                let hp = tcp_endpoint(ep, "--peer")?;
                reachable(&hp, ep)?;
            }
            Ok(())
        }
        External::Bootstrap(url) => reachable(&http_host(url, "--peer")?, url),
        External::Listen { endpoint, bootstrap, .. } => {
            let hp = tcp_endpoint(endpoint, "--listen")?;
            bindable(&hp, endpoint)?;
            bindable(bootstrap, &format!("--bootstrap-bind {bootstrap}"))
        }
    }
}

/// The endpoint syntax of an already-running implementation (exit 2 when wrong), checked before anything runs.
pub fn preflight_syntax(external: &crate::play::External) -> Result<(), RunError> {
    use crate::play::External;
    match external {
        External::None => Ok(()),
        External::Prefillers(eps) => eps.iter().try_for_each(|ep| tcp_endpoint(ep, "--peer").map(|_| ())),
        External::Bootstrap(url) => http_host(url, "--peer").map(|_| ()),
        External::Listen { endpoint, .. } => tcp_endpoint(endpoint, "--listen").map(|_| ()),
    }
}

/// `Err` (the skip reason) when the testee does not take the case's role.
pub(crate) fn takes_role(case: &crate::play::Case, hello: &crate::testee::Hello) -> Result<(), String> {
    if hello.roles.iter().any(|x| x == case.role.as_str()) {
        Ok(())
    } else {
        Err(format!("the testee does not take the {} role", case.role.as_str()))
    }
}

/// Cases run at once when `--jobs` is not given. A case spends its time waiting on the scenario's timers, not
/// computing (the 498 bundled cases take about 9 s of CPU in all), so against the built-in peer, which runs in
/// this process, 16 per CPU (at most 64); a testee started as a command (a Python peer, say) costs a process
/// start per case, so one per CPU.
pub fn default_jobs(testee: &TesteeSpec) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    match testee {
        TesteeSpec::Builtin => (16 * cpus).min(64),
        _ => cpus,
    }
}

/// A failed case listed in the expected failures, whose every finding a listing covers (by check, or any check
/// when the listing names none), becomes an expected failure with the listings' reasons.
fn apply_expected(r: &mut CaseResult, expected: &ExpectedFailures) {
    let listed: Vec<&ExpectedFailure> = expected.cases.iter().filter(|e| e.id == r.id).collect();
    if r.status == Status::Fail && !listed.is_empty() {
        let covered =
            r.findings.iter().all(|f| listed.iter().any(|e| e.check.as_deref().is_none_or(|c| c == f.check.as_str())));
        if covered {
            r.status = Status::Xfail;
            r.reason = Some(listed.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>().join("; "));
        }
    }
}

/// A file name for a case's testee log: the id with `/` as `__`.
pub fn log_file_name(id: &str) -> String {
    format!("{}.log", id.replace('/', "__"))
}

/// One case against a fresh testee (or skipped when the testee does not take its role), with the testee's
/// death and the last lines of its standard error recorded.
async fn run_case(
    case: &crate::play::Case,
    opts: &PlayOptions,
    hello: &crate::testee::Hello,
    log: &crate::testee::TesteeLog,
) -> CaseResult {
    let mut r = match takes_role(case, hello) {
        Ok(()) => play(case, opts, &hello.revisions).await,
        Err(why) => {
            let mut r = CaseResult::new(case);
            r.status = Status::Skip;
            r.reason = Some(why);
            r.not_applicable = vec![];
            r
        }
    };
    if let Some(why) = log.died() {
        r.status = Status::Error;
        r.reason = Some(why);
    }
    if matches!(r.status, Status::Fail | Status::Error) {
        r.testee_stderr = log.tail(10);
    }
    r
}

/// Runs every selected case against the testee (up to `jobs` at once; results in case order); an error when the
/// run could not start (bad input, a testee that does not answer its hello) rather than a failed case.
pub async fn run(mut cfg: RunConfig) -> Result<RunReport, RunError> {
    preflight(&cfg.external)?;
    let cases = select_cases(&cfg)?;
    let hello = Arc::new(testee_hello(&cfg.external, &cfg.testee, cfg.speaks.as_deref()).await?);
    if let Some(dir) = &cfg.testee_log {
        std::fs::create_dir_all(dir).map_err(|e| RunError::usage(format!("--testee-log {}: {e}", dir.display())))?;
    }
    let results = run_cases(&mut cfg, &cases, &hello).await?;
    let not_run = cases.len() - results.len();
    let stale = stale_expected(&cfg, &results, not_run);
    Ok(RunReport { testee: hello.name.clone(), results, stale, not_run })
}

/// What the testee speaks (an external peer is taken at its word: any revision, the roles asked for), narrowed
/// to `--speaks`.
pub(crate) async fn testee_hello(
    external: &crate::play::External,
    testee: &TesteeSpec,
    speaks: Option<&[String]>,
) -> Result<crate::testee::Hello, RunError> {
    let mut hello = match external {
        crate::play::External::None => {
            let log = crate::testee::TesteeLog::default();
            let (probe, hello) = Testee::start_logged(testee, Some(&log)).await.map_err(|e| {
                if e.environment {
                    RunError::environment(e.message)
                } else {
                    RunError::usage(e.message)
                }
            })?;
            probe.stop().await;
            hello
        }
        e => crate::testee::Hello::new(
            e.describe(),
            mooncake_wire::spec::Spec::builtin().push().revisions.iter().map(|r| r.revision.clone()).collect(),
            &[crate::role::Role::Prefiller, crate::role::Role::Decoder, crate::role::Role::Bootstrap],
        ),
    };
    if let Some(only) = speaks {
        hello.revisions.retain(|r| only.contains(r));
        if hello.revisions.is_empty() {
            return Err(RunError::usage(format!(
                "--speaks {}: the testee declares none of these revisions",
                only.join(",")
            )));
        }
    }
    Ok(hello)
}

/// Runs the cases: up to `jobs` at once, and a new one starts as soon as any ends (not only the oldest: a
/// 5-second case must not hold back the slots of the short ones behind it). Cases start in order, so those
/// started are always a prefix of the list; results are reported in case order as that prefix completes. An
/// implementation the runner does not start serves one case at a time; testees are started per case, each on
/// its own ports.
async fn run_cases(
    cfg: &mut RunConfig,
    cases: &[crate::play::Case],
    hello: &Arc<crate::testee::Hello>,
) -> Result<Vec<CaseResult>, RunError> {
    let mut opts = PlayOptions::new(cfg.testee.clone(), cfg.scenarios.clone(), cfg.slack);
    opts.external = cfg.external.clone();
    let jobs = if matches!(cfg.external, crate::play::External::None) { cfg.jobs.max(1) } else { 1 };
    let n = cases.len();
    let mut results: Vec<CaseResult> = vec![];
    let mut running = tokio::task::JoinSet::new();
    let mut done: Vec<Option<CaseResult>> = (0..n).map(|_| None).collect();
    let (mut next, mut stopped) = (0, false);
    loop {
        while !stopped && next < n && running.len() < jobs {
            let case = cases[next].clone();
            if let Some(p) = cfg.progress.as_mut() {
                p(Progress::Started { index: next, total: n, id: &case.id });
            }
            let log = match &cfg.testee_log {
                Some(dir) => crate::testee::TesteeLog::to_file(&dir.join(log_file_name(&case.id)))
                    .map_err(|e| RunError::usage(e.to_string()))?,
                None => crate::testee::TesteeLog::default(),
            };
            let mut case_opts = opts.clone();
            case_opts.testee_log = Some(log.clone());
            let (hello, index) = (hello.clone(), next);
            running.spawn(async move { (index, run_case(&case, &case_opts, &hello, &log).await) });
            next += 1;
        }
        let Some(joined) = running.join_next().await else { break };
        let (index, mut r) = joined.map_err(|e| RunError::environment(format!("a case's task failed: {e}")))?;
        apply_expected(&mut r, &cfg.expected);
        stopped |= cfg.fail_fast && matches!(r.status, Status::Fail | Status::Error);
        done[index] = Some(r);
        while let Some(r) = done.get_mut(results.len()).and_then(Option::take) {
            let i = results.len();
            results.push(r);
            if let Some(p) = cfg.progress.as_mut() {
                let failed = results.iter().filter(|r| matches!(r.status, Status::Fail | Status::Error)).count();
                p(Progress::Finished { index: i, total: n, result: results.last().expect("pushed"), failed });
            }
        }
    }
    Ok(results)
}

/// Expected failures that did not fail as listed: every one, or (a narrowed run) those whose case ran.
fn stale_expected(cfg: &RunConfig, results: &[CaseResult], not_run: usize) -> Vec<String> {
    let narrowed = !cfg.cases.is_empty() || !cfg.roles.is_empty() || !cfg.revisions.is_empty() || not_run > 0;
    cfg.expected
        .cases
        .iter()
        .filter(|e| !results.iter().any(|r| r.id == e.id && r.status == Status::Xfail))
        .filter(|e| results.iter().any(|r| r.id == e.id) || !narrowed)
        .map(|e| {
            let now = match results.iter().find(|r| r.id == e.id) {
                Some(r) => format!("it is {}", r.status.word()),
                None => "no such case ran".to_string(),
            };
            format!("{} ({}): listed as an expected failure, but {now}", e.id, e.reason)
        })
        .collect()
}
