//! `mooncake-conformance matrix`: the compatibility matrix, observed. For every ordered pair of spec
//! revisions (decoder at D, prefiller at P) and every scenario both have a recording of, the reference
//! decoder at D pulls from the reference prefiller at P over real ZeroMQ, HTTP and TCP ([`run`]); a cell
//! works for a scenario when each side ends as it does with a peer of its own revision (the decoder reports
//! and receives what it does against a prefiller of D, the prefiller frees and writes what it does for a
//! decoder of P). The observation is compared with what `diff D P` predicts for that direction
//! ([`mod@predict`]); any disagreement is a finding. What "compatible" means: `spec/PROTOCOL.md`, "Compatibility".

pub mod predict;
pub mod render;
pub mod run;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::conversation::Conversation;
use crate::scenarios::Scenarios;
use crate::trace::Trace;
use predict::{predict, Prediction};
use run::{observe, DOutcome, Observation, POutcome, Side};

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

/// The recordings per (revision, scenario): the newest release's where a revision has several.
pub fn sides(traces: &[Arc<Conversation>]) -> BTreeMap<(String, String), Side> {
    let mut out: BTreeMap<(String, String), (Vec<u64>, Side)> = BTreeMap::new();
    for t in traces {
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
    Trace(#[from] crate::trace::TraceError),
    /// A trace cannot be read as a conversation.
    #[error(transparent)]
    Conversation(#[from] crate::conversation::ConversationError),
    /// A trace does not pass `validate`.
    #[error(transparent)]
    Invalid(#[from] crate::validate::InvalidTrace),
}

/// Reads the traces and their conversations, leaving out those of another family than `push`; the first
/// unreadable one, or one that does not pass `validate`, is an error.
pub fn load_traces(inputs: &[crate::jsonl::Input]) -> Result<Vec<Arc<Conversation>>, MatrixError> {
    let mut out = vec![];
    for f in inputs {
        let t = Trace::load_input(f)?;
        if t.header.family.as_deref().is_some_and(|f| f != "push") {
            continue;
        }
        let c = Conversation::new(t)?;
        crate::validate::must_validate(&f.name(), &c)?;
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

/// Builds the matrix from recordings (`traces`: every push trace, any directory layout).
pub async fn build(traces: &[Arc<Conversation>], cfg: &MatrixConfig) -> Matrix {
    let mut sides = sides(traces);
    let timing = |name: &str| cfg.scenarios.scenario.get(name).is_some_and(is_timing);
    // Timing scenarios in every generation-2 revision: its `a_single_success` layout where it has no recording.
    let timing_names: std::collections::BTreeSet<String> =
        sides.keys().map(|(_, n)| n.clone()).filter(|n| timing(n)).collect();
    let mut stand_ins = vec![];
    let revs_with_stand_in: Vec<(String, Side)> = sides
        .iter()
        .filter(|((_, n), s)| n == STAND_IN && s.trace.revision.generation == 2)
        .map(|((r, _), s)| (r.clone(), s.clone()))
        .collect();
    for name in &timing_names {
        for (rev, side) in &revs_with_stand_in {
            if let std::collections::btree_map::Entry::Vacant(e) = sides.entry((rev.clone(), name.clone())) {
                e.insert(side.clone());
                stand_ins.push(rev.clone());
            }
        }
    }
    stand_ins.sort();
    stand_ins.dedup();
    let spec = mooncake_wire::spec::Spec::builtin();
    let mut revisions: Vec<(String, String)> = vec![];
    for r in &spec.push().revisions {
        if !cfg.only.is_empty() && !cfg.only.contains(&r.revision) {
            continue;
        }
        if let Some(((_, _), s)) = sides.iter().find(|((rev, _), _)| rev == &r.revision) {
            revisions.push((r.revision.clone(), s.trace.trace.header.vllm_version.clone()));
        }
    }
    let mut left_out = vec![];
    // Scenarios with decoder pulls; the bootstrap-only one belongs to the prefiller side alone (its server
    // and its registering workers are one deployment), so it never mixes revisions.
    let runnable = |name: &str| cfg.scenarios.scenario.get(name).is_some_and(|s| !s.pulls.is_empty() && !s.query_only);
    for name in sides.keys().map(|(_, s)| s.clone()).collect::<std::collections::BTreeSet<_>>() {
        if !runnable(&name) {
            left_out.push(format!("{name}: no decoder pulls (bootstrap only: the server and the workers registering with it are the prefiller side)"));
        }
    }
    let reps = timing_representatives(&revisions);
    stand_ins.retain(|r| reps.contains(r));
    let rep_of = |r: &str| -> String {
        let items = timing_items(r);
        reps.iter().find(|x| timing_items(x) == items).cloned().unwrap_or_else(|| r.to_string())
    };
    for name in &timing_names {
        left_out.push(format!(
            "{name}: a timing scenario, run between {} (each the newest of the revisions stating its `kv_leases`, `lease_renewal` and `expired_pull`: it stands for them) in the cells where those differ, and each with itself, with the abort timeout at least {} ms and the scenario's times scaled to it; {} use the layout of their {STAND_IN} recording",
            reps.join(" and "),
            TIMING_ABORT.as_millis(),
            if stand_ins.is_empty() { "no revision needs to".to_string() } else { stand_ins.join(", ") }
        ));
    }
    // The cells a scenario runs in.
    let runs_in = |d: &str, p: &str, name: &str| {
        !timing(name)
            || (reps.iter().any(|r| r == d) && reps.iter().any(|r| r == p) && (d == p || timing_items_differ(d, p)))
    };
    let setup = |name: &str| -> (crate::scenarios::Scenario, Duration) {
        let sc = &cfg.scenarios.scenario[name];
        if timing(name) {
            let abort = cfg.abort.max(TIMING_ABORT);
            (scaled(sc, abort, &cfg.scenarios.model), abort)
        } else {
            (sc.clone(), cfg.abort)
        }
    };
    let model = cfg.scenarios.model.clone();
    let sem = Arc::new(tokio::sync::Semaphore::new(cfg.jobs.max(1)));
    // Baselines: every revision with itself.
    let mut jobs = vec![];
    for ((rev, name), side) in &sides {
        if !revisions.iter().any(|(r, _)| r == rev) || !runnable(name) {
            continue;
        }
        // A timing scenario's baseline is needed only where some cell runs it.
        if !runs_in(rev, rev, name) {
            continue;
        }
        let (sc, abort) = setup(name);
        let (side, model, sem) = (side.clone(), model.clone(), sem.clone());
        let key = (rev.clone(), rev.clone(), name.clone());
        jobs.push(tokio::spawn(async move {
            let _permit = sem.acquire().await;
            (key, observe(&side, &side, &sc, &model, abort).await)
        }));
    }
    let mut observed: BTreeMap<(String, String, String), Observation> = BTreeMap::new();
    for j in jobs {
        if let Ok((k, o)) = j.await {
            observed.insert(k, o);
        }
    }
    if let Some(p) = &cfg.progress {
        p(&format!("matrix: {} baselines observed", observed.len()));
    }
    let mut cells = vec![];
    for (d_rev, _) in &revisions {
        let mut jobs = vec![];
        for (p_rev, _) in &revisions {
            if d_rev == p_rev {
                continue;
            }
            for ((rev, name), d_side) in sides.iter().filter(|((r, n), _)| r == d_rev && runnable(n)) {
                let Some(p_side) = sides.get(&(p_rev.clone(), name.clone())) else { continue };
                let _ = rev;
                if !runs_in(d_rev, p_rev, name) {
                    continue;
                }
                let (sc, abort) = setup(name);
                let (d_side, p_side, model, sem) = (d_side.clone(), p_side.clone(), model.clone(), sem.clone());
                let key = (d_rev.clone(), p_rev.clone(), name.clone());
                jobs.push(tokio::spawn(async move {
                    let _permit = sem.acquire().await;
                    (key, observe(&d_side, &p_side, &sc, &model, abort).await)
                }));
            }
        }
        let n = jobs.len();
        for j in jobs {
            if let Ok((k, o)) = j.await {
                observed.insert(k, o);
            }
        }
        if let Some(p) = &cfg.progress {
            p(&format!("matrix: decoder {d_rev}: {n} runs against the other revisions observed"));
        }
    }
    // Every cell once everything is observed: a cell may take a timing scenario from another's observation.
    for (d_rev, _) in &revisions {
        for (p_rev, _) in &revisions {
            let mut scenarios = vec![];
            for ((rev, name), d_side) in sides.iter().filter(|((r, n), _)| r == d_rev && runnable(n)) {
                let _ = rev;
                let Some(p_side) = sides.get(&(p_rev.clone(), name.clone())) else { continue };
                // A timing scenario not run in this cell: shown only where the two revisions differ in what it is
                // about, observed between the revisions standing for them.
                let (d_obs, p_obs, observed_as) = if runs_in(d_rev, p_rev, name) {
                    (d_rev.clone(), p_rev.clone(), None)
                } else if d_rev != p_rev && timing_items_differ(d_rev, p_rev) {
                    let (d, p) = (rep_of(d_rev), rep_of(p_rev));
                    let as_ = format!("observed between {d} and {p}, which state the same timing items");
                    (d, p, Some(as_))
                } else {
                    continue;
                };
                let predicted = predict(&d_side.trace, &p_side.trace, &cfg.scenarios.scenario[name], &model);
                // Another pair's observation stands for this one only where `diff` predicts the same for both:
                // where this pair breaks for other reasons too (a wire change), the scenario is left out here.
                if observed_as.is_some() {
                    let (Some(rd), Some(rp)) =
                        (sides.get(&(d_obs.clone(), name.clone())), sides.get(&(p_obs.clone(), name.clone())))
                    else {
                        continue;
                    };
                    let theirs = predict(&rd.trace, &rp.trace, &cfg.scenarios.scenario[name], &model);
                    let subjects = |p: &Prediction| -> Vec<String> {
                        p.breaks.iter().map(|b| b.split(':').next().unwrap_or(b).to_string()).collect()
                    };
                    if subjects(&theirs) != subjects(&predicted) {
                        continue;
                    }
                }
                let observed_break = if d_rev == p_rev {
                    None
                } else {
                    let none = Observation::default();
                    let m = observed.get(&(d_obs.clone(), p_obs.clone(), name.clone())).unwrap_or(&none);
                    let db = observed.get(&(d_obs.clone(), d_obs.clone(), name.clone())).unwrap_or(&none);
                    let pb = observed.get(&(p_obs.clone(), p_obs.clone(), name.clone())).unwrap_or(&none);
                    compare(m, db, pb)
                };
                let agree = observed_break.is_none() == predicted.works()
                    && !observed_break.as_deref().is_some_and(|o| o.starts_with("not run"));
                let heartbeat_replies: Vec<String> = observed
                    .get(&(d_obs.clone(), p_obs.clone(), name.clone()))
                    .map(|o| o.prefillers.values().flat_map(|p| p.heartbeat_replies.iter().cloned()).collect())
                    .map(|v: std::collections::BTreeSet<String>| v.into_iter().collect())
                    .unwrap_or_default();
                scenarios.push(ScenarioResult {
                    scenario: name.clone(),
                    observed: observed_break,
                    predicted,
                    agree,
                    timing: timing(name),
                    heartbeat_replies,
                    observed_as,
                });
            }
            let cell = Cell { decoder: d_rev.clone(), prefiller: p_rev.clone(), scenarios };
            if let Some(p) = &cfg.progress {
                p(&format!(
                    "matrix: D {} × P {}: {}{}",
                    cell.decoder,
                    cell.prefiller,
                    if cell.works() { "works".to_string() } else { format!("breaks ({})", cell.broken().join(", ")) },
                    if cell.agrees() { "" } else { " — DISAGREES with diff" }
                ));
            }
            cells.push(cell);
        }
    }
    Matrix { revisions, cells, left_out }
}
