//! `mooncake-conformance matrix`: the compatibility matrix, observed. For every ordered pair of spec
//! revisions (decoder at D, prefiller at P) and every scenario both have a recording of, the reference
//! decoder at D pulls from the reference prefiller at P over real ZeroMQ, HTTP and TCP ([`run`]); a cell
//! works for a scenario when each side ends as it does with a peer of its own revision (the decoder reports
//! and receives what it does against a prefiller of D, the prefiller frees and writes what it does for a
//! decoder of P). The observation is compared with what `diff D P` predicts for that direction
//! ([`mod@predict`]); any disagreement is a finding. What "compatible" means: `spec/PROTOCOL.md`, "Compatibility".

mod build;
pub mod predict;
pub mod render;
pub mod run;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::scenarios::Scenarios;
pub use build::build;
use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::Trace;
use predict::Prediction;
use run::{DOutcome, Observation, POutcome, Side};

/// What happened in one scenario of one cell.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioResult {
    /// The scenario's id.
    pub scenario: String,
    /// `None`: it works (each side ends as with a peer of its own revision). Otherwise how it breaks.
    pub observed: Option<String>,
    /// What `diff` predicts for this direction.
    pub predicted: Prediction,
    /// Observation and prediction agree.
    pub agree: bool,
    /// A timing scenario (leases, a late pull): its times scaled to the abort timeout it ran with.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timing: bool,
    /// What the prefiller answered the decoder's lease heartbeats (distinct replies), where it sent any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub heartbeat_replies: Vec<String>,
    /// A timing scenario this cell takes from the cell of the revisions that stand for its two (the same
    /// timing items): which.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_as: Option<String>,
}

/// One ordered pair of revisions: a decoder at one, a prefiller at the other.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// The decoder's revision.
    pub decoder: String,
    /// The prefiller's revision.
    pub prefiller: String,
    /// Every scenario both revisions have a recording of.
    pub scenarios: Vec<ScenarioResult>,
}

impl Cell {
    /// Whether every scenario works.
    pub fn works(&self) -> bool {
        self.scenarios.iter().all(|s| s.observed.is_none())
    }
    /// Whether every scenario's observation agrees with its prediction.
    pub fn agrees(&self) -> bool {
        self.scenarios.iter().all(|s| s.agree)
    }
    /// Scenarios that break.
    pub fn broken(&self) -> Vec<&str> {
        self.scenarios.iter().filter(|s| s.observed.is_some()).map(|s| s.scenario.as_str()).collect()
    }
}

/// The observed compatibility matrix.
#[derive(Clone, Debug, Serialize)]
pub struct Matrix {
    /// Revisions in spec order, each with the release its recordings come from.
    pub revisions: Vec<(String, String)>,
    /// One cell per ordered pair of revisions.
    pub cells: Vec<Cell>,
    /// Scenarios left out, and why.
    pub left_out: Vec<String>,
}

impl Matrix {
    /// Every (cell, scenario) whose observation and prediction disagree: the findings.
    pub fn disagreements(&self) -> Vec<(&Cell, &ScenarioResult)> {
        self.cells.iter().flat_map(|c| c.scenarios.iter().filter(|s| !s.agree).map(move |s| (c, s))).collect()
    }
    /// The cell of decoder revision `d` and prefiller revision `p`.
    pub fn cell(&self, d: &str, p: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.decoder == d && c.prefiller == p)
    }
}

/// How to build the matrix.
#[derive(Clone)]
pub struct MatrixConfig {
    /// The scenarios (setups of the recordings' scenarios).
    pub scenarios: Arc<Scenarios>,
    /// `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT` of every peer (short: it only sets the pace).
    pub abort: Duration,
    /// Runs at once.
    pub jobs: usize,
    /// Only these revisions (all when empty).
    pub only: Vec<String>,
    /// Progress, one line per finished cell.
    pub progress: Option<Arc<dyn Fn(&str) + Send + Sync>>,
}

/// Starts and stops one `mooncake-peer testee` (the program every worker of the matrix runs), so that a
/// missing or broken program is one clear error instead of a matrix of cells not run.
pub async fn preflight() -> Result<(), crate::testee::StartError> {
    let (probe, _) = crate::testee::Testee::start(&crate::testee::TesteeSpec::Builtin).await?;
    probe.stop().await;
    Ok(())
}

/// The recordings of vLLM's own connector per (revision, scenario): the newest release's where a revision has
/// several. Another implementation's recordings (`spec/implementations/`) are no side of a vLLM release.
pub fn sides(traces: &[Arc<Conversation>]) -> BTreeMap<(String, String), Side> {
    let mut out: BTreeMap<(String, String), (Vec<u64>, Side)> = BTreeMap::new();
    for t in traces.iter().filter(|t| t.trace.header.implementation.is_none()) {
        let key = (t.revision.revision.clone(), t.scenario().to_string());
        let v = mooncake_wire::spec::version_key(&t.trace.header.vllm_version);
        if out.get(&key).is_none_or(|(old, _)| v > *old) {
            out.insert(key, (v, Side { trace: t.clone() }));
        }
    }
    out.into_iter().map(|(k, (_, s))| (k, s)).collect()
}

/// Why the matrix's traces could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// A trace cannot be read.
    #[error(transparent)]
    Trace(#[from] mooncake_trace::trace::TraceError),
    /// A trace cannot be read as a conversation.
    #[error(transparent)]
    Conversation(#[from] mooncake_trace::conversation::ConversationError),
    /// A trace does not pass `validate`.
    #[error(transparent)]
    Invalid(#[from] mooncake_trace::validate::InvalidTrace),
}

/// Reads the traces and their conversations, leaving out those of another family than `push`; the first
/// unreadable one, or one that does not pass `validate`, is an error.
pub fn load_traces(inputs: &[mooncake_trace::jsonl::Input]) -> Result<Vec<Arc<Conversation>>, MatrixError> {
    let mut out = vec![];
    for f in inputs {
        let t = Trace::load_input(f)?;
        if t.header.family.as_deref().is_some_and(|f| f != "push") {
            continue;
        }
        let c = Conversation::new(t)?;
        mooncake_trace::validate::must_validate(&f.name(), &c)?;
        out.push(Arc::new(c));
    }
    Ok(out)
}

/// How an observation differs from the baselines: the decoder's side against the decoder's revision with
/// itself, the prefiller's against the prefiller's revision with itself.
fn compare(mixed: &Observation, d_base: &Observation, p_base: &Observation) -> Option<String> {
    if let Some(e) = &mixed.error {
        return Some(format!("not run: {e}"));
    }
    let mut out = vec![];
    let d_keys: Vec<&String> = mixed.decoders.keys().collect();
    for k in d_keys {
        let (m, b) = (&mixed.decoders[k], d_base.decoders.get(k).cloned().unwrap_or_default());
        if let Some(d) = d_diff(m, &b) {
            out.push(format!("decoder {k}: {d}"));
        }
    }
    for (k, m) in &mixed.prefillers {
        let b = p_base.prefillers.get(k).cloned().unwrap_or_default();
        if let Some(d) = p_diff(m, &b) {
            out.push(format!("prefiller {k}: {d}"));
        }
    }
    (!out.is_empty()).then(|| out.join("; "))
}

fn set(s: &std::collections::BTreeSet<String>) -> String {
    format!("[{}]", s.iter().cloned().collect::<Vec<_>>().join(", "))
}

fn d_diff(m: &DOutcome, b: &DOutcome) -> Option<String> {
    let mut d = vec![];
    if m.finished != b.finished {
        d.push(format!("finished {} (with its own prefiller {})", set(&m.finished), set(&b.finished)));
    }
    if m.failed != b.failed {
        d.push(format!("failed {} ({})", set(&m.failed), set(&b.failed)));
    }
    if m.unsettled != b.unsettled {
        d.push(format!("left waiting {} ({})", set(&m.unsettled), set(&b.unsettled)));
    }
    if m.invalid_blocks != b.invalid_blocks {
        d.push(format!("invalid blocks {:?} ({:?})", m.invalid_blocks, b.invalid_blocks));
    }
    if !m.landed.is_empty() && b.landed.is_empty() {
        d.push(format!("wrong bytes: {}", m.landed.first().cloned().unwrap_or_default()));
    }
    (!d.is_empty()).then(|| d.join(", "))
}

fn p_diff(m: &POutcome, b: &POutcome) -> Option<String> {
    let mut d = vec![];
    if m.freed != b.freed {
        d.push(format!("freed {} (with its own decoder {})", set(&m.freed), set(&b.freed)));
    }
    if m.bytes != b.bytes {
        d.push(format!("wrote {} bytes ({})", m.bytes, b.bytes));
    }
    if m.replies != b.replies {
        let only: Vec<&String> = m.replies.iter().filter(|r| !b.replies.contains(r)).collect();
        d.push(format!(
            "replied {} ({} with its own decoder)",
            if only.is_empty() {
                "less".to_string()
            } else {
                only.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
            },
            b.replies.len()
        ));
    }
    (!d.is_empty()).then(|| d.join(", "))
}

/// A timing scenario: one about leases or a late pull (`spec/PROTOCOL.md#kv-leases`), with one request between
/// one prefiller and one decoder worker, so that any generation-2 revision can run it with the layout of its
/// own `a_single_success` recording.
fn is_timing(s: &crate::scenarios::Scenario) -> bool {
    let about =
        s.prefiller_kv_lease_s.is_some() || s.decoder_kv_lease_s.is_some() || s.announce || s.pull_delay_s > 0.0;
    let single = s.prefiller_tp == 1 && s.decoder_tp == 1 && s.kv_groups.is_empty() && s.decoder_head_size.is_none();
    about && single && s.pulls.len() == 1
}

/// The recording whose layout stands in for a timing scenario a revision has no recording of.
const STAND_IN: &str = "a_single_success";

/// Whether two revisions differ in what a timing scenario is about: leases and late pulls.
fn timing_items_differ(a: &str, b: &str) -> bool {
    timing_items(a) != timing_items(b)
}

/// The revisions that stand for every revision stating the same timing items as they do: the newest of each
/// such group (the timing scenarios have one request between TP-1 workers, where nothing else of a revision
/// shows). A timing scenario runs only between them.
fn timing_representatives(revisions: &[(String, String)]) -> Vec<String> {
    let mut out: Vec<(Option<serde_json::Value>, String)> = vec![];
    for (r, _) in revisions {
        let items = timing_items(r);
        match out.iter_mut().find(|(i, _)| *i == items) {
            // Revisions are in spec order: a later one replaces the earlier.
            Some(slot) => slot.1 = r.clone(),
            None => out.push((items, r.clone())),
        }
    }
    out.into_iter().map(|(_, r)| r).collect()
}

/// A timing scenario's times (leases, the pull delay) scaled as the abort timeout is (`abort` against the
/// recordings' `abort_timeout_s`), so that their order is the recordings'.
fn scaled(
    s: &crate::scenarios::Scenario,
    abort: Duration,
    model: &crate::scenarios::Model,
) -> crate::scenarios::Scenario {
    let k = abort.as_secs_f64() / model.abort_timeout_s.max(1e-3);
    let mut s = s.clone();
    s.prefiller_kv_lease_s = s.prefiller_kv_lease_s.map(|x| x * k);
    s.decoder_kv_lease_s = s.decoder_kv_lease_s.map(|x| x * k);
    s.pull_delay_s *= k;
    s
}

/// Timing scenarios run with an abort timeout of at least this: the recordings' own (2 s), so the scenario's
/// times keep their half-second margins to each deadline (shorter, a lease renewed every sixth of it and a pull
/// between two deadlines would depend on the scheduling of a loaded machine).
const TIMING_ABORT: Duration = Duration::from_secs(2);

/// The values a timing scenario is about, as one comparable value.
fn timing_items(rev: &str) -> Option<serde_json::Value> {
    let r = mooncake_wire::spec::Spec::builtin().revision(rev)?;
    let b = &r.behaviour;
    let v = |x: Option<serde_json::Value>| x.unwrap_or_default();
    Some(serde_json::json!([
        v(b.kv_leases.as_ref().and_then(|i| serde_json::to_value(&i.value).ok())),
        v(b.lease_renewal.as_ref().and_then(|i| serde_json::to_value(&i.value).ok())),
        v(b.expired_pull.as_ref().and_then(|i| serde_json::to_value(&i.value).ok())),
    ]))
}
