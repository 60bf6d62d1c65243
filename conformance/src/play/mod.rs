//! Cases and their players. A case is one trace played against one testee role:
//! * `…/prefiller` — the runner plays the recorded decoder(s) against prefiller testee(s) ([`as_decoder`]);
//! * `…/decoder` — the runner plays the recorded prefiller(s) (the reference core) against decoder testee(s)
//!   ([`as_prefiller`]);
//! * `…/bootstrap` — the runner replays the recorded HTTP requests against a bootstrap testee ([`as_client`]).

pub mod as_client;
pub mod as_decoder;
pub mod as_prefiller;
mod ctx;
pub mod error;
pub mod gen1;
pub(crate) mod prefiller_side;
pub(crate) mod pull;
mod te_checks;

pub(crate) use crate::scenarios::ReplyActions;
pub(crate) use ctx::CaseCtx;
pub use error::PlayError;
pub(crate) use prefiller_side::{apply, check_te_calls, fire, PrefillerControl, PrefillerSide};

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use crate::role::Role;
use crate::scenarios::Scenarios;
pub use crate::testee::secs;
use crate::testee::TesteeSpec;
use mooncake_trace::conversation::Conversation;
use mooncake_trace::finding::{CheckId, Finding};

/// How a case ended. Its one spelling — [`Status::word`], its `Display` and its JSON form, which serde derives
/// from the same lowercase names — is used by every report: text and Markdown (which capitalise a failing one to
/// stand out), JSON, JUnit (as elements) and `cases`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Every check held.
    Pass,
    /// A check found something.
    Fail,
    /// Failed as `expected-failures.toml` says it does.
    Xfail,
    /// Not run (see the case's `reason`).
    Skip,
    /// Could not run because the environment failed (a testee died): exit 3.
    Error,
}

impl Status {
    /// Every status.
    pub const ALL: [Status; 5] = [Status::Pass, Status::Fail, Status::Xfail, Status::Skip, Status::Error];

    /// The status's one spelling: pass, fail, xfail, skip, error (its serde name).
    pub fn word(&self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Xfail => "xfail",
            Status::Skip => "skip",
            Status::Error => "error",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// The result of one case, as the reports show it.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// Stable id: `<revision>/<scenario>/<role>` (`<revision>@<release>/…` when traces of two releases share the
    /// revision and the scenario: [`crate::case_id`]).
    pub id: String,
    /// The trace the case replays (its path or bundled name).
    pub trace: String,
    /// The role the testee took.
    pub role: Role,
    /// The trace's revision.
    pub revision: String,
    /// What the trace recorded when it is not vLLM's own connector: `<implementation>-<release>`
    /// (`mooncake-0.3.13.post1`; `spec/implementations/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub implementation: Option<String>,
    /// The revision the testee was started at when it differs from the trace's (a cross-version case).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testee_revision: Option<String>,
    /// How it ended.
    pub status: Status,
    /// Why the case was skipped or could not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What the checks found.
    pub findings: Vec<Finding>,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
    /// The last lines the testee wrote on standard error, kept when the case failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub testee_stderr: Vec<String>,
    /// Where the prefiller-side setup came from: the scenarios file, or derived from the trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup: Option<crate::derive::Source>,
    /// What the report says under the case (how a setup was derived, where it differs from the file's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Checks of this role that did not run because the trace does not hold what they compare with.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_applicable: Vec<NotApplicable>,
}

/// A check left out of a case because the recording could not observe what it compares with (a tap's trace
/// has no transfer-engine calls and no connector outcomes: header `unobserved`).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct NotApplicable {
    /// The check left out.
    pub check: CheckId,
    /// The header item it compares with, which the recording declares `unobserved`.
    pub unobserved: &'static str,
}

/// Which check needs which header item, in which role's cases.
const NEEDS: [(CheckId, &str, Role); 4] = [
    (CheckId::TeCalls, "transfer_engine_calls", Role::Prefiller),
    (CheckId::PFinishedSending, "observed_outcome", Role::Prefiller),
    (CheckId::DOutcome, "observed_outcome", Role::Decoder),
    // Two testees against each other (`as_prefiller::play_pair`) also compare the prefiller's completions.
    (CheckId::PFinishedSending, "observed_outcome", Role::Decoder),
];

/// A count from a testee's `status` as a message shows it (`null` when the testee did not give it).
pub(crate) fn count(n: Option<u64>) -> String {
    n.map_or_else(|| "null".to_string(), |n| n.to_string())
}

/// A prefiller testee's completions against what vLLM's prefiller freed (`want`, the recording's
/// `finished_sending`): it freed by delivery only what vLLM freed, and everything vLLM freed by delivery or by
/// expiry (a recording cannot tell the two apart; a recorder that waits past the abort timeout sees expiries).
/// A transfer is freed at most once: a second report frees blocks the scheduler may have given to another
/// request. `None` when they agree, else what a `P-FINISHED-SENDING` finding says.
pub(crate) fn freed_mismatch(s: &mooncake_testee_protocol::PrefillerStatus, want: &[String]) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    let twice: Vec<&str> = s
        .finished_sending
        .iter()
        .filter(|x| !seen.insert((&x.p_req_id, &x.transfer_id)))
        .map(|x| x.transfer_id.as_str())
        .collect();
    if !twice.is_empty() {
        return Some(format!("freed transfers {twice:?} more than once"));
    }
    let (delivered, expired) = (s.freed(false), s.freed(true));
    let extra = delivered.iter().any(|d| !want.contains(d));
    let missing = want.iter().any(|w| !delivered.contains(w) && !expired.contains(w));
    (extra || missing)
        .then(|| format!("freed {delivered:?} after delivery and {expired:?} on expiry; vLLM freed {want:?}"))
}

/// Whether `check` can run on this trace: false when it compares with something the header declares
/// `unobserved`.
pub fn applies(header: &mooncake_trace::trace::Header, check: CheckId) -> bool {
    NEEDS.iter().filter(|(c, _, _)| *c == check).all(|(_, what, _)| header.observed(what))
}

/// The checks of a `role` case that do not apply to this trace, each with the header item it needs.
pub fn not_applicable(header: &mooncake_trace::trace::Header, role: Role) -> Vec<NotApplicable> {
    let mut out: Vec<NotApplicable> = vec![];
    for (check, what, r) in NEEDS {
        // A decoder case compares the prefiller's completions only with two testees.
        if r != role || header.observed(what) || (role == Role::Decoder && check == CheckId::PFinishedSending) {
            continue;
        }
        out.push(NotApplicable { check, unobserved: what });
    }
    out
}

/// One case to run.
#[derive(Clone)]
pub struct Case {
    /// Its stable id, `<revision>/<scenario>/<role>` ([`crate::case_id`]).
    pub id: String,
    /// The role the testee takes.
    pub role: Role,
    /// The recorded conversation the case replays.
    pub model: Arc<Conversation>,
}

/// Options shared by the players.
#[derive(Clone)]
pub struct PlayOptions {
    /// How to start the testee.
    pub testee: TesteeSpec,
    /// The scenarios file (setups of the traces' scenarios).
    pub scenarios: Arc<Scenarios>,
    /// How long to wait for any one reply or outcome beyond the scenario's own timeouts.
    pub slack: Duration,
    /// A peer the runner does not start or control (`replay`): see [`External`].
    pub external: External,
    /// Where the case's testee processes write their standard error (set per case by the runner).
    pub testee_log: Option<crate::testee::TesteeLog>,
    /// Setups derived from the run's traces.
    pub derived: crate::derive::Cache,
}

/// Notes a player leaves for its case's report: checks it could not make ("not checked: …"), and reasons the
/// case is broken rather than passed or failed (the runner's own side deviated from the recording, so the
/// comparison says nothing about the implementation under test).
#[derive(Clone, Debug, Default)]
pub struct CaseSink(Arc<std::sync::Mutex<(Vec<String>, Vec<String>)>>);

impl CaseSink {
    /// A check that was left out, with why.
    pub fn not_checked(&self, what: &str, why: impl Into<String>) {
        self.0.lock().expect("sink").0.push(format!("not checked: {what} — {}", why.into()));
    }
    /// The case is broken (environment or timing): reported as an error, never as a pass.
    pub fn broken(&self, why: impl Into<String>) {
        self.0.lock().expect("sink").1.push(why.into());
    }
    fn take(&self) -> (Vec<String>, Vec<String>) {
        std::mem::take(&mut *self.0.lock().expect("sink"))
    }
}

/// An implementation already running somewhere (`replay --peer` / `--listen`). The runner cannot prepare its
/// state or read its tables, so those checks are left out.
#[derive(Clone, Debug, Default)]
pub enum External {
    /// None: the runner starts the testee.
    #[default]
    None,
    /// Prefiller ROUTER endpoints, in the order the trace's prefillers registered.
    Prefillers(Vec<String>),
    /// Where the runner's prefiller listens for an external decoder, and where its bootstrap server binds.
    /// Transfers become ready when the decoder's first request arrives, or `ready_after` the start when set.
    Listen {
        /// The ROUTER endpoint the runner's prefiller binds.
        endpoint: String,
        /// Where the runner's bootstrap server binds.
        bootstrap: String,
        /// How long to wait for the decoder to pull everything.
        timeout: Duration,
        /// Make the transfers ready this long after the start instead.
        ready_after: Option<Duration>,
    },
    /// A bootstrap server's base URL.
    Bootstrap(String),
}

impl External {
    /// How reports name the implementation under test.
    pub fn describe(&self) -> String {
        match self {
            External::None => "the testee".into(),
            External::Prefillers(eps) => format!("prefiller at {}", eps.join(", ")),
            External::Listen { endpoint, .. } => format!("decoder pulling from {endpoint}"),
            External::Bootstrap(url) => format!("bootstrap server at {url}"),
        }
    }
}

impl PlayOptions {
    /// Options with nothing external and no case state yet; `slack` as [`PlayOptions::slack`].
    pub fn new(testee: TesteeSpec, scenarios: Scenarios, slack: Duration) -> Self {
        PlayOptions {
            testee,
            scenarios: Arc::new(scenarios),
            slack,
            external: External::None,
            testee_log: None,
            derived: Default::default(),
        }
    }
}

/// The cases a trace yields: one per role it exercises, with ids `<revision>/<scenario>/<role>` (a run of
/// several traces names them through [`crate::case_id::bases`], which keeps them unique).
pub fn cases_of(model: Arc<Conversation>) -> Vec<Case> {
    let base = format!("{}/{}", model.revision.revision, model.scenario());
    cases_named(model, &base)
}

/// The cases a trace yields, with ids `<base>/<role>`.
pub fn cases_named(model: Arc<Conversation>, base: &str) -> Vec<Case> {
    let mut out = vec![];
    if !model.exchanges.is_empty() && !model.prefillers.is_empty() {
        out.push(Case { id: format!("{base}/prefiller"), role: Role::Prefiller, model: model.clone() });
    }
    if !model.exchanges.is_empty() && !model.decoders.is_empty() {
        out.push(Case { id: format!("{base}/decoder"), role: Role::Decoder, model: model.clone() });
    }
    if !model.http.is_empty() {
        out.push(Case { id: format!("{base}/bootstrap"), role: Role::Bootstrap, model: model.clone() });
    }
    out
}

/// Runs one case; never panics on a misbehaving testee.
pub async fn play(case: &Case, opts: &PlayOptions, testee_revisions: &[String]) -> CaseResult {
    let start = std::time::Instant::now();
    let mut r = CaseResult::new(case);
    let pairing = match crate::crossver::choose(&case.model, case.role, testee_revisions) {
        Ok(p) => p,
        Err(why) => {
            r.status = Status::Skip;
            r.reason = Some(why.to_string());
            return r;
        }
    };
    if pairing.is_cross() {
        r.testee_revision = Some(pairing.testee.revision.clone());
    }
    let planning = pairing.planning_differs();
    if case.role == Role::Prefiller && !planning.is_empty() {
        r.notes.push(format!(
            "TE-CALLS not compared: {} plans copies differently from {} (behaviour.{}); where the bytes land is checked with its rules",
            pairing.testee.revision,
            pairing.runner.revision,
            planning.iter().map(|k| k.name()).collect::<Vec<_>>().join(", behaviour.")
        ));
    }
    // What the trace does not show of the setup fails the case here, naming the entry to add, before any
    // testee runs.
    match crate::derive::case_setup(&case.id, &case.model, &opts.scenarios, case.role, &opts.derived) {
        Ok(setup) => {
            r.setup = setup.source;
            r.notes.extend(setup.notes);
            let mut ctx = CaseCtx::new(case, opts, &pairing, setup.scenario);
            let outcome = play_in(case.role, &mut ctx).await;
            r.conclude(ctx, outcome);
        }
        Err(e) => {
            r.status = Status::Fail;
            r.setup = Some(crate::derive::Source::Derived);
            r.findings.push(Finding::new(CheckId::CaseSetup, e.to_string()));
        }
    }
    r.duration_ms = start.elapsed().as_millis() as u64;
    r
}

/// The player of a case's role and generation.
async fn play_in(role: Role, ctx: &mut CaseCtx<'_>) -> Result<(), PlayError> {
    let gen1 = ctx.t.revision.generation == 1;
    match role {
        _ if ctx.t.is_pull() && !matches!(ctx.opts.external, External::None) => Err(PlayError::ExternalPull),
        Role::Prefiller if ctx.t.is_pull() => pull::as_decoder(ctx).await,
        Role::Decoder if ctx.t.is_pull() => pull::as_prefiller(ctx).await,
        Role::Prefiller if gen1 => gen1::as_decoder(ctx).await,
        Role::Decoder if gen1 => gen1::as_prefiller(ctx).await,
        Role::Prefiller => as_decoder::play(ctx).await,
        Role::Decoder => as_prefiller::play(ctx).await,
        Role::Bootstrap => as_client::play(ctx).await,
    }
}

impl CaseResult {
    /// A case not run yet: passed, with nothing found.
    pub(crate) fn new(case: &Case) -> CaseResult {
        CaseResult {
            id: case.id.clone(),
            trace: case.model.trace.path.clone(),
            role: case.role,
            revision: case.model.revision.revision.clone(),
            implementation: case.model.trace.header.implementation.as_ref().map(|_| case.model.trace.header.source()),
            testee_revision: None,
            status: Status::Pass,
            reason: None,
            findings: vec![],
            duration_ms: 0,
            testee_stderr: vec![],
            setup: None,
            notes: vec![],
            not_applicable: not_applicable(&case.model.trace.header, case.role),
        }
    }

    /// The status, findings and notes of a played case: failed on a finding or a player's error, broken
    /// (`error`) when the runner's own side deviated, whatever the comparison said.
    fn conclude(&mut self, ctx: CaseCtx<'_>, outcome: Result<(), PlayError>) {
        self.findings = ctx.findings;
        if let Err(e) = outcome {
            self.findings.push(Finding::new(CheckId::CaseSetup, e.to_string()));
        }
        self.status = if self.findings.is_empty() { Status::Pass } else { Status::Fail };
        let (notes, broken) = ctx.sink.take();
        self.notes.extend(notes);
        if !broken.is_empty() {
            // The runner's own side did not behave as recorded: whatever the comparison said, it proves nothing.
            self.status = Status::Error;
            self.reason = Some(format!("broken case (environment or timing): {}", broken.join("; ")));
            self.findings.extend(broken.into_iter().map(|b| Finding::new(CheckId::RunnerDeviation, b)));
        }
    }
}

/// `f(…)` with a bound in time: a testee that hangs fails the check instead of the run.
pub async fn bounded<T>(d: Duration, what: &str, f: impl std::future::Future<Output = T>) -> Result<T, PlayError> {
    tokio::time::timeout(d, f).await.map_err(|_| PlayError::Timeout { what: what.to_string(), waited: d })
}

/// Polls a decoder testee's `status` until `done` holds of it (true) or `until` passed (false).
pub(crate) async fn settled(
    te: &mut crate::testee::Testee,
    until: tokio::time::Instant,
    done: impl Fn(&mooncake_testee_protocol::DecoderStatus) -> bool,
) -> Result<bool, PlayError> {
    loop {
        let s: mooncake_testee_protocol::DecoderStatus = te.status().await?;
        if done(&s) {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= until {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every region of a decoder testee's memory (`bases` with their `block_lens`, `num_blocks` blocks each), read
/// through `read_memory` (`None`: not readable).
pub(crate) async fn read_regions(
    te: &mut crate::testee::Testee,
    bases: &[u64],
    block_lens: &[u64],
    num_blocks: u64,
) -> Vec<Option<Vec<u8>>> {
    use mooncake_testee_protocol::{Command, Memory};
    let mut out = vec![];
    for (base, bl) in bases.iter().zip(block_lens) {
        let m = te.send::<Memory>(&Command::ReadMemory { addr: *base, len: bl * num_blocks }).await;
        out.push(m.ok().and_then(|m| hex::decode(&m.hex).ok()));
    }
    out
}

/// A decoder testee's memory, block by block of each region of `cols` (a region it does not give is left out;
/// an answer shorter than the region ends it).
pub(crate) async fn read_testee_memory(
    te: &mut crate::testee::Testee,
    cols: &crate::setup::Columns,
    num_blocks: u64,
) -> std::collections::HashMap<(usize, u64), Vec<u8>> {
    let mut mem = std::collections::HashMap::new();
    let regions = read_regions(te, &cols.base, &cols.block_lens, num_blocks).await;
    for (r, (bytes, &bl)) in regions.iter().zip(&cols.block_lens).enumerate() {
        let Some(bytes) = bytes else { continue };
        for b in 0..num_blocks {
            let Some(block) = bytes.get((b * bl) as usize..((b + 1) * bl) as usize) else { break };
            mem.insert((r, b), block.to_vec());
        }
    }
    mem
}

#[cfg(test)]
mod status_tests {
    use super::Status;

    #[test]
    fn a_status_has_one_spelling() {
        for s in Status::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, serde_json::Value::from(s.word()));
            assert_eq!(s.to_string(), s.word());
            assert_eq!(serde_json::from_value::<Status>(json).unwrap(), s);
        }
        assert!(serde_json::from_value::<Status>(serde_json::json!("PASS")).is_err());
    }
}
