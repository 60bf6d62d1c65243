//! Building the matrix: what runs where ([`Plan`]: the recorded sides, the revisions, where each scenario
//! runs), every run observed (each revision with itself first, then every ordered pair), and every cell read
//! off the observations against `diff`'s prediction.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::predict::{predict, Prediction};
use super::run::{observe, Observation, Side};
use super::{
    compare, is_timing, scaled, sides, timing_items, timing_items_differ, timing_representatives, Cell, Matrix,
    MatrixConfig, ScenarioResult, STAND_IN, TIMING_ABORT,
};
use crate::scenarios::{Model, Scenario};
use mooncake_trace::conversation::Conversation;

/// An observed run: (decoder revision, prefiller revision, scenario).
type RunKey = (String, String, String);

/// What runs where.
struct Plan<'c> {
    cfg: &'c MatrixConfig,
    /// The recordings per (revision, scenario), with stand-ins for timing scenarios.
    sides: BTreeMap<(String, String), Side>,
    /// Revisions in spec order, each with the release of its recordings.
    revisions: Vec<(String, String)>,
    timing_names: BTreeSet<String>,
    /// The revisions timing scenarios run between (each stands for those stating the same timing items).
    reps: Vec<String>,
    left_out: Vec<String>,
}

impl<'c> Plan<'c> {
    fn new(traces: &[Arc<Conversation>], cfg: &'c MatrixConfig) -> Plan<'c> {
        let mut plan = Plan {
            cfg,
            sides: sides(traces),
            revisions: vec![],
            timing_names: BTreeSet::new(),
            reps: vec![],
            left_out: vec![],
        };
        plan.timing_names = plan.sides.keys().map(|(_, n)| n.clone()).filter(|n| plan.timing(n)).collect();
        let stand_ins = plan.add_stand_ins();
        let spec = mooncake_wire::spec::Spec::builtin();
        for r in &spec.push().revisions {
            if !cfg.only.is_empty() && !cfg.only.contains(&r.revision) {
                continue;
            }
            if let Some(((_, _), s)) = plan.sides.iter().find(|((rev, _), _)| rev == &r.revision) {
                plan.revisions.push((r.revision.clone(), s.trace.trace.header.vllm_version.clone()));
            }
        }
        plan.reps = timing_representatives(&plan.revisions);
        plan.note_left_out(stand_ins);
        plan
    }

    /// Timing scenarios in every generation-2 revision: its `a_single_success` layout where it has no
    /// recording. Returns the revisions given a stand-in.
    fn add_stand_ins(&mut self) -> Vec<String> {
        let mut stand_ins = vec![];
        let with_stand_in: Vec<(String, Side)> = self
            .sides
            .iter()
            .filter(|((_, n), s)| n == STAND_IN && s.trace.revision.generation == 2)
            .map(|((r, _), s)| (r.clone(), s.clone()))
            .collect();
        for name in &self.timing_names {
            for (rev, side) in &with_stand_in {
                if let std::collections::btree_map::Entry::Vacant(e) = self.sides.entry((rev.clone(), name.clone())) {
                    e.insert(side.clone());
                    stand_ins.push(rev.clone());
                }
            }
        }
        stand_ins.sort();
        stand_ins.dedup();
        stand_ins
    }

    /// What the matrix leaves out, and how it runs timing scenarios.
    fn note_left_out(&mut self, mut stand_ins: Vec<String>) {
        let names: BTreeSet<String> = self.sides.keys().map(|(_, s)| s.clone()).collect();
        let bootstrap_only: Vec<&String> = names.iter().filter(|n| !self.runnable(n)).collect();
        for name in bootstrap_only {
            self.left_out.push(format!("{name}: no decoder pulls (bootstrap only: the server and the workers registering with it are the prefiller side)"));
        }
        stand_ins.retain(|r| self.reps.contains(r));
        for name in &self.timing_names {
            self.left_out.push(format!(
                "{name}: a timing scenario, run between {} (each the newest of the revisions stating its `kv_leases`, `lease_renewal` and `expired_pull`: it stands for them) in the cells where those differ, and each with itself, with the abort timeout at least {} ms and the scenario's times scaled to it; {} use the layout of their {STAND_IN} recording",
                self.reps.join(" and "),
                TIMING_ABORT.as_millis(),
                if stand_ins.is_empty() { "no revision needs to".to_string() } else { stand_ins.join(", ") }
            ));
        }
    }

    fn timing(&self, name: &str) -> bool {
        self.cfg.scenarios.scenario.get(name).is_some_and(is_timing)
    }

    /// Scenarios with decoder pulls; the bootstrap-only one belongs to the prefiller side alone (its server
    /// and its registering workers are one deployment), so it never mixes revisions.
    fn runnable(&self, name: &str) -> bool {
        self.cfg.scenarios.scenario.get(name).is_some_and(|s| !s.pulls.is_empty() && !s.query_only)
    }

    /// Whether scenario `name` runs in the cell (decoder `d`, prefiller `p`).
    fn runs_in(&self, d: &str, p: &str, name: &str) -> bool {
        let rep = |r: &str| self.reps.iter().any(|x| x == r);
        !self.timing(name) || (rep(d) && rep(p) && (d == p || timing_items_differ(d, p)))
    }

    /// The revision standing for `r` in timing scenarios.
    fn rep_of(&self, r: &str) -> String {
        let items = timing_items(r);
        self.reps.iter().find(|x| timing_items(x) == items).cloned().unwrap_or_else(|| r.to_string())
    }

    /// Scenario `name` as it runs, with its abort timeout (a timing scenario's times scaled to at least
    /// [`TIMING_ABORT`]).
    fn setup(&self, name: &str) -> (Scenario, Duration) {
        let sc = &self.cfg.scenarios.scenario[name];
        if self.timing(name) {
            let abort = self.cfg.abort.max(TIMING_ABORT);
            (scaled(sc, abort, &self.cfg.scenarios.model), abort)
        } else {
            (sc.clone(), self.cfg.abort)
        }
    }

    /// Observes scenario `name` between `d_side` and `p_side`, once a permit of `sem` is free.
    fn spawn(
        &self,
        sem: &Arc<Semaphore>,
        key: RunKey,
        d_side: &Side,
        p_side: &Side,
    ) -> JoinHandle<(RunKey, Observation)> {
        let (sc, abort) = self.setup(&key.2);
        let (d_side, p_side, model, sem): (Side, Side, Model, _) =
            (d_side.clone(), p_side.clone(), self.cfg.scenarios.model.clone(), sem.clone());
        tokio::spawn(async move {
            let _permit = sem.acquire().await;
            (key, observe(&d_side, &p_side, &sc, &model, abort).await)
        })
    }

    fn progress(&self, line: &str) {
        if let Some(p) = &self.cfg.progress {
            p(line);
        }
    }
}

/// Builds the matrix from recordings (`traces`: every push trace, any directory layout).
pub async fn build(traces: &[Arc<Conversation>], cfg: &MatrixConfig) -> Matrix {
    let plan = Plan::new(traces, cfg);
    let sem = Arc::new(Semaphore::new(cfg.jobs.max(1)));
    let mut observed = observe_baselines(&plan, &sem).await;
    plan.progress(&format!("matrix: {} baselines observed", observed.len()));
    for (d_rev, _) in &plan.revisions {
        let n = observe_pairs(&plan, &sem, d_rev, &mut observed).await;
        plan.progress(&format!("matrix: decoder {d_rev}: {n} runs against the other revisions observed"));
    }
    // Every cell once everything is observed: a cell may take a timing scenario from another's observation.
    let mut cells = vec![];
    for (d_rev, _) in &plan.revisions {
        for (p_rev, _) in &plan.revisions {
            let cell = cell(&plan, &observed, d_rev, p_rev);
            plan.progress(&format!(
                "matrix: D {} × P {}: {}{}",
                cell.decoder,
                cell.prefiller,
                if cell.works() { "works".to_string() } else { format!("breaks ({})", cell.broken().join(", ")) },
                if cell.agrees() { "" } else { " — DISAGREES with diff" }
            ));
            cells.push(cell);
        }
    }
    Matrix { revisions: plan.revisions, cells, left_out: plan.left_out }
}

/// Every revision with itself (a timing scenario only where some cell runs it).
async fn observe_baselines(plan: &Plan<'_>, sem: &Arc<Semaphore>) -> BTreeMap<RunKey, Observation> {
    let mut jobs = vec![];
    for ((rev, name), side) in &plan.sides {
        if plan.revisions.iter().any(|(r, _)| r == rev) && plan.runnable(name) && plan.runs_in(rev, rev, name) {
            jobs.push(plan.spawn(sem, (rev.clone(), rev.clone(), name.clone()), side, side));
        }
    }
    let mut observed = BTreeMap::new();
    for j in jobs {
        if let Ok((k, o)) = j.await {
            observed.insert(k, o);
        }
    }
    observed
}

/// Decoder revision `d_rev` against every other revision. Returns the runs observed.
async fn observe_pairs(
    plan: &Plan<'_>,
    sem: &Arc<Semaphore>,
    d_rev: &str,
    observed: &mut BTreeMap<RunKey, Observation>,
) -> usize {
    let mut jobs = vec![];
    for (p_rev, _) in plan.revisions.iter().filter(|(p, _)| p != d_rev) {
        for ((_, name), d_side) in plan.sides.iter().filter(|((r, n), _)| r == d_rev && plan.runnable(n)) {
            let Some(p_side) = plan.sides.get(&(p_rev.clone(), name.clone())) else { continue };
            if plan.runs_in(d_rev, p_rev, name) {
                jobs.push(plan.spawn(sem, (d_rev.to_string(), p_rev.clone(), name.clone()), d_side, p_side));
            }
        }
    }
    let n = jobs.len();
    for j in jobs {
        if let Ok((k, o)) = j.await {
            observed.insert(k, o);
        }
    }
    n
}

/// The cell (decoder `d_rev`, prefiller `p_rev`): each scenario both recorded, observed against predicted.
fn cell(plan: &Plan<'_>, observed: &BTreeMap<RunKey, Observation>, d_rev: &str, p_rev: &str) -> Cell {
    let mut scenarios = vec![];
    for ((_, name), d_side) in plan.sides.iter().filter(|((r, n), _)| r == d_rev && plan.runnable(n)) {
        let Some(p_side) = plan.sides.get(&(p_rev.to_string(), name.clone())) else { continue };
        if let Some(r) = scenario_result(plan, observed, (d_rev, p_rev, name), d_side, p_side) {
            scenarios.push(r);
        }
    }
    Cell { decoder: d_rev.to_string(), prefiller: p_rev.to_string(), scenarios }
}

/// Scenario `name` in cell (`d_rev`, `p_rev`); `None` where it is not shown. A timing scenario not run in this
/// cell is shown only where the two revisions differ in what it is about, observed between the revisions
/// standing for them — and only where `diff` predicts the same for both pairs: where this pair breaks for
/// other reasons too (a wire change), it is left out here.
fn scenario_result(
    plan: &Plan<'_>,
    observed: &BTreeMap<RunKey, Observation>,
    (d_rev, p_rev, name): (&str, &str, &String),
    d_side: &Side,
    p_side: &Side,
) -> Option<ScenarioResult> {
    let scenario = &plan.cfg.scenarios.scenario[name];
    let model = &plan.cfg.scenarios.model;
    let (d_obs, p_obs, observed_as) = if plan.runs_in(d_rev, p_rev, name) {
        (d_rev.to_string(), p_rev.to_string(), None)
    } else if d_rev != p_rev && timing_items_differ(d_rev, p_rev) {
        let (d, p) = (plan.rep_of(d_rev), plan.rep_of(p_rev));
        let as_ = format!("observed between {d} and {p}, which state the same timing items");
        (d, p, Some(as_))
    } else {
        return None;
    };
    let predicted = predict(&d_side.trace, &p_side.trace, scenario, model);
    if observed_as.is_some() {
        let rd = plan.sides.get(&(d_obs.clone(), name.clone()))?;
        let rp = plan.sides.get(&(p_obs.clone(), name.clone()))?;
        let theirs = predict(&rd.trace, &rp.trace, scenario, model);
        let subjects = |p: &Prediction| -> Vec<String> {
            p.breaks.iter().map(|b| b.split(':').next().unwrap_or(b).to_string()).collect()
        };
        if subjects(&theirs) != subjects(&predicted) {
            return None;
        }
    }
    let none = Observation::default();
    let get = |d: &str, p: &str| observed.get(&(d.to_string(), p.to_string(), name.clone())).unwrap_or(&none);
    let observed_break =
        if d_rev == p_rev { None } else { compare(get(&d_obs, &p_obs), get(&d_obs, &d_obs), get(&p_obs, &p_obs)) };
    let agree = observed_break.is_none() == predicted.works()
        && !observed_break.as_deref().is_some_and(|o| o.starts_with("not run"));
    let heartbeat_replies: BTreeSet<String> =
        get(&d_obs, &p_obs).prefillers.values().flat_map(|p| p.heartbeat_replies.iter().cloned()).collect();
    Some(ScenarioResult {
        scenario: name.clone(),
        observed: observed_break,
        predicted,
        agree,
        timing: plan.timing(name),
        heartbeat_replies: heartbeat_replies.into_iter().collect(),
        observed_as,
    })
}
