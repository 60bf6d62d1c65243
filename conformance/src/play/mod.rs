//! Cases and their players. A case is one trace played against one testee role:
//! * `…/prefiller` — the runner plays the recorded decoder(s) against prefiller testee(s) ([`as_decoder`]);
//! * `…/decoder` — the runner plays the recorded prefiller(s) (the reference core) against decoder testee(s)
//!   ([`as_prefiller`]);
//! * `…/bootstrap` — the runner replays the recorded HTTP requests against a bootstrap testee ([`as_client`]).

pub mod as_client;
pub mod as_decoder;
pub mod as_prefiller;
pub mod setup;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::scenarios::Scenarios;
use crate::testee::TesteeSpec;
use crate::trace_model::TraceModel;
use crate::validate::Finding;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Prefiller,
    Decoder,
    Bootstrap,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Prefiller => "prefiller",
            Role::Decoder => "decoder",
            Role::Bootstrap => "bootstrap",
        }
    }
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "prefiller" => Some(Role::Prefiller),
            "decoder" => Some(Role::Decoder),
            "bootstrap" => Some(Role::Bootstrap),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    /// Failed as `expected-failures.toml` says it does.
    Xfail,
    Skip,
}

#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// Stable id: `<revision>/<scenario>/<role>`.
    pub id: String,
    pub trace: String,
    pub role: Role,
    pub revision: String,
    /// The revision the testee was started at when it differs from the trace's (a cross-version case).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testee_revision: Option<String>,
    pub status: Status,
    /// Why the case was skipped or could not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub findings: Vec<Finding>,
    pub duration_ms: u64,
}

/// One case to run.
#[derive(Clone)]
pub struct Case {
    pub id: String,
    pub role: Role,
    pub model: Arc<TraceModel>,
}

/// Options shared by the players.
#[derive(Clone)]
pub struct PlayOptions {
    pub testee: TesteeSpec,
    pub scenarios: Arc<Scenarios>,
    /// How long to wait for any one reply or outcome beyond the scenario's own timeouts.
    pub slack: Duration,
    /// A peer the runner does not start or control (`replay`): see [`External`].
    pub external: External,
}

/// An implementation already running somewhere (`replay --peer` / `--listen`). The runner cannot prepare its
/// state or read its tables, so those checks are left out.
#[derive(Clone, Debug, Default)]
pub enum External {
    #[default]
    None,
    /// Prefiller ROUTER endpoints, in the order the trace's prefillers registered.
    Prefillers(Vec<String>),
    /// Where the runner's prefiller listens for an external decoder, and where its bootstrap server binds.
    Listen { endpoint: String, bootstrap: String, timeout: Duration },
    /// A bootstrap server's base URL.
    Bootstrap(String),
}

impl PlayOptions {
    pub fn new(testee: TesteeSpec, scenarios: Scenarios, slack: Duration) -> Self {
        PlayOptions { testee, scenarios: Arc::new(scenarios), slack, external: External::None }
    }
}

/// The cases a trace yields: one per role it exercises.
pub fn cases_of(model: Arc<TraceModel>) -> Vec<Case> {
    let mut out = vec![];
    let base = format!("{}/{}", model.revision.revision, model.scenario());
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
    let mut r = CaseResult {
        id: case.id.clone(),
        trace: case.model.trace.path.clone(),
        role: case.role,
        revision: case.model.revision.revision.clone(),
        testee_revision: None,
        status: Status::Pass,
        reason: None,
        findings: vec![],
        duration_ms: 0,
    };
    let pairing = match crate::crossver::choose(&case.model, case.role, testee_revisions) {
        Ok(p) => p,
        Err(why) => {
            r.status = Status::Skip;
            r.reason = Some(why);
            return r;
        }
    };
    if pairing.is_cross() {
        r.testee_revision = Some(pairing.testee.revision.clone());
    }
    let outcome = match case.role {
        Role::Prefiller => as_decoder::play(case, opts, &pairing).await,
        Role::Decoder => as_prefiller::play(case, opts, &pairing).await,
        Role::Bootstrap => as_client::play(case, opts, &pairing).await,
    };
    match outcome {
        Ok(findings) => {
            r.status = if findings.is_empty() { Status::Pass } else { Status::Fail };
            r.findings = findings;
        }
        Err(e) => {
            r.status = Status::Fail;
            r.findings.push(Finding { check: "CASE-SETUP", seq: None, line: None, message: None, detail: e });
        }
    }
    r.duration_ms = start.elapsed().as_millis() as u64;
    r
}

/// `f(…)` with a bound in time: a testee that hangs fails the check instead of the run.
pub async fn bounded<T>(d: Duration, what: &str, f: impl std::future::Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(d, f).await.map_err(|_| format!("{what}: no answer within {d:?}"))
}
