//! `probe`: what a running generation-2 deployment is, asked without disturbing it.
//!
//! The bootstrap server's `GET /query` table lists every registered engine and worker ([`workers`]); each
//! worker's ROUTER is checked for a TCP listener and sent the harmless messages of [`identify::Plan`], whose
//! answers say which revisions it can run; `--decoder-revision` adds `diff`'s verdict for a decoder of that
//! revision pulling from each worker ([`pairing`]); `--engine` fetches a transfer engine's segment descriptor
//! by the P2P handshake and checks it ([`live::engine`]). What is wrong becomes a [`Problem`]; the library
//! decides no exit code (the command does: 1 on any problem). The I/O is in [`live`]; the rest is pure.
//!
//! Generation 1 (vLLM 0.13.0 – 0.15.1) has no bootstrap server, so a probe never reaches one of its
//! listeners — which matters, because a generation-1 listener dies on a malformed frame
//! (`spec/PROTOCOL.md`, "Generation 1").

pub mod identify;
pub mod live;
mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value as J;

use mooncake_wire::diff::{Age, Effect};
use mooncake_wire::spec::{version_key, Revision, Spec};

pub use identify::{Answer, Identification, Plan};
pub use report::write_report;

/// One registered prefiller worker, as `GET /query` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Worker {
    /// The bootstrap server that lists it.
    pub bootstrap: String,
    /// The data-parallel rank (the table's key).
    pub dp_rank: String,
    /// The engine id registered under it.
    pub engine_id: String,
    /// The tensor-parallel rank.
    pub tp_rank: String,
    /// The pipeline-parallel rank.
    pub pp_rank: String,
    /// The ROUTER address it registered (`tcp://ip:port`).
    pub addr: String,
}

/// The workers of a `GET /query` answer (`dict[int, EngineEntry]` of every generation-2 revision's bootstrap
/// models), in key order; an error says where the answer is not such a table.
pub fn workers(bootstrap: &str, table: &J) -> Result<Vec<Worker>, String> {
    let obj = table.as_object().ok_or("the /query answer is not a JSON object")?;
    let mut out = vec![];
    for (dp, entry) in obj {
        let engine_id =
            entry.get("engine_id").and_then(J::as_str).ok_or(format!("dp_rank {dp}: no `engine_id` text"))?;
        let tps =
            entry.get("worker_addr").and_then(J::as_object).ok_or(format!("dp_rank {dp}: no `worker_addr` object"))?;
        for (tp, pps) in tps {
            let pps = pps.as_object().ok_or(format!("dp_rank {dp} tp_rank {tp}: not an object of pp ranks"))?;
            for (pp, addr) in pps {
                let addr =
                    addr.as_str().ok_or(format!("dp_rank {dp} tp_rank {tp} pp_rank {pp}: address not a text"))?;
                out.push(Worker {
                    bootstrap: bootstrap.to_string(),
                    dp_rank: dp.clone(),
                    engine_id: engine_id.to_string(),
                    tp_rank: tp.clone(),
                    pp_rank: pp.clone(),
                    addr: addr.to_string(),
                });
            }
        }
    }
    out.sort_by_key(|w| (rank(&w.dp_rank), rank(&w.tp_rank), rank(&w.pp_rank)));
    Ok(out)
}

fn rank(s: &str) -> (u64, String) {
    (s.parse().unwrap_or(u64::MAX), s.to_string())
}

/// What the probe found wrong; any one makes the command exit 1.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// `unreachable-worker`, `no-answer`, `unknown-revision`, `duplicate-registration`, `missing-worker`,
    /// `incompatible-pair`, `unsure-pair`, `query-shape`, `engine`.
    pub kind: &'static str,
    /// What, in words.
    pub detail: String,
}

impl Problem {
    pub(crate) fn new(kind: &'static str, detail: impl Into<String>) -> Problem {
        Problem { kind, detail: detail.into() }
    }
}

/// One address registered in more than one slot: two workers that cannot both be reached there (a host that
/// advertised a loopback or NAT address, a copied configuration).
pub fn duplicates(workers: &[Worker]) -> Vec<Problem> {
    let mut by_addr: BTreeMap<&str, Vec<&Worker>> = BTreeMap::new();
    for w in workers {
        by_addr.entry(&w.addr).or_default().push(w);
    }
    by_addr
        .into_iter()
        .filter(|(_, ws)| ws.len() > 1)
        .map(|(addr, ws)| {
            let slots: Vec<String> = ws.iter().map(|w| slot(w)).collect();
            Problem::new("duplicate-registration", format!("{addr} is registered by {}", slots.join(" and ")))
        })
        .collect()
}

/// The slot of a worker in words: `dp 0 tp 1 pp 0 (engine e)`.
pub fn slot(w: &Worker) -> String {
    format!("{} dp {} tp {} pp {} (engine {})", w.bootstrap, w.dp_rank, w.tp_rank, w.pp_rank, w.engine_id)
}

/// Ranks missing from an engine's table: TP ranks not `0..n`, or TP ranks whose PP ranks differ from `0..m` —
/// a worker that never registered (a decoder pulling from it fails).
pub fn gaps(workers: &[Worker]) -> Vec<Problem> {
    let mut by_dp: BTreeMap<(&str, (u64, String)), BTreeMap<u64, BTreeSet<u64>>> = BTreeMap::new();
    for w in workers {
        let (Ok(tp), Ok(pp)) = (w.tp_rank.parse::<u64>(), w.pp_rank.parse::<u64>()) else { continue };
        by_dp.entry((&w.bootstrap, rank(&w.dp_rank))).or_default().entry(tp).or_default().insert(pp);
    }
    let mut out = vec![];
    for ((url, (_, dp)), tps) in by_dp {
        let max_tp = tps.keys().max().copied().unwrap_or(0);
        let max_pp = tps.values().flatten().max().copied().unwrap_or(0);
        for tp in 0..=max_tp {
            for pp in 0..=max_pp {
                if !tps.get(&tp).is_some_and(|p| p.contains(&pp)) {
                    out.push(Problem::new(
                        "missing-worker",
                        format!(
                            "{url} dp {dp}: tp {tp} pp {pp} is not registered (others up to tp {max_tp} pp {max_pp} are)"
                        ),
                    ));
                }
            }
        }
    }
    out
}

/// The rows of the spec diff that break a decoder running `decoder` pulling from a prefiller running
/// `prefiller`: (rows that break it always, rows that break it only when something is sent or set — each with
/// its condition). Both empty: they interoperate. Rows about `POST /register` are left out (a decoder never
/// registers; a prefiller and its bootstrap server run one release). The committed compatibility matrix
/// (`schema/push/compat-matrix.md`) observes these verdicts with 0 disagreements.
pub fn pairing(decoder: &Arc<Revision>, prefiller: &Arc<Revision>) -> (Vec<String>, Vec<String>) {
    let (mut always, mut when) = (vec![], vec![]);
    if decoder.revision == prefiller.revision {
        return (always, when);
    }
    let d_old = version_key(decoder.first_release()) < version_key(prefiller.first_release());
    let (old, new) = if d_old { (decoder, prefiller) } else { (prefiller, decoder) };
    let d_age = if d_old { Age::Old } else { Age::New };
    let report = mooncake_wire::diff::diff(old, new);
    for c in report.changes.iter().filter(|c| !c.subject.starts_with("bootstrap.duplicate_registration")) {
        for v in [&c.old_reads_new, &c.new_reads_old] {
            if !v.peers.fit_decoder_at(d_age) {
                continue;
            }
            match &v.effect {
                Effect::Breaks { .. } => always.push(format!("{}: {} ({}: {})", c.subject, c.what, v.peers, v.reason)),
                Effect::BreaksWhenSent { when: w } => when.push(format!("{} ({}): when {w}", c.subject, v.peers)),
                Effect::Compatible | Effect::Review => {}
            }
        }
    }
    always.dedup();
    when.dedup();
    (always, when)
}

/// The verdict of one worker against the decoder revision, over every revision the worker may run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PairVerdict {
    /// `compatible`; `conditional` (some rows break only when their condition holds); `incompatible` (a row
    /// breaks it always, whichever of the revisions the worker runs); `unsure` (it depends on which it runs).
    pub verdict: &'static str,
    /// The rows that break it always, per prefiller revision that has any.
    pub breaking: BTreeMap<String, Vec<String>>,
    /// The rows that break it only when their condition holds, per prefiller revision that has any.
    pub conditions: BTreeMap<String, Vec<String>>,
}

/// The `diff` row of a decoder without leases pulling from a prefiller with them (`behaviour.kv_leases`, old D →
/// new P), which holds only when that prefiller sets `kv_lease_duration`.
const LEASE_ROW: &str = "behaviour.kv_leases (old D → new P)";

/// [`pairing`] over the revisions of an identification; a prefiller seen with its leases off drops the rows that
/// need them on.
pub fn pair_verdict(decoder: &Arc<Revision>, id: &Identification) -> Option<PairVerdict> {
    let revs: BTreeSet<&str> = id.identities.iter().map(|i| i.revision.as_str()).collect();
    if revs.is_empty() {
        return None;
    }
    let (mut breaking, mut conditions) = (BTreeMap::new(), BTreeMap::new());
    for r in &revs {
        let (always, mut when) = pairing(decoder, Spec::builtin().revision(r)?);
        // The probe saw this prefiller's leases off (its heartbeat answer): the rows about a prefiller that sets
        // `kv_lease_duration` cannot apply to it.
        let leases_off = id.identities.iter().filter(|i| i.revision == *r).all(|i| i.leases == Some(false));
        if leases_off {
            when.retain(|row| !row.starts_with(LEASE_ROW));
        }
        if !always.is_empty() {
            breaking.insert(r.to_string(), always);
        }
        if !when.is_empty() {
            conditions.insert(r.to_string(), when);
        }
    }
    let verdict = match breaking.len() {
        0 if conditions.is_empty() => "compatible",
        0 => "conditional",
        n if n == revs.len() => "incompatible",
        _ => "unsure",
    };
    Some(PairVerdict { verdict, breaking, conditions })
}

/// What was found about one worker.
#[derive(Clone, Debug, Serialize)]
pub struct WorkerReport {
    /// The worker.
    pub worker: Worker,
    /// Why its ROUTER's TCP port cannot be reached (`None`: it can).
    pub unreachable: Option<String>,
    /// The answer to each probe (`None`: none within the timeout, or not a reply), in plan order.
    pub answers: Vec<Option<Answer>>,
    /// What went wrong with the probes that got no answer.
    pub no_answer: Vec<String>,
    /// What the answers say it runs (`None` when unreachable).
    pub identification: Option<Identification>,
    /// The verdict against `--decoder-revision`.
    pub pairing: Option<PairVerdict>,
}

/// What `probe` found.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeReport {
    /// The bootstrap servers' URLs.
    pub bootstrap: Vec<String>,
    /// The bound on each request, in seconds.
    pub timeout_s: f64,
    /// Per bootstrap server, the generation-2 revisions whose bootstrap `GET /query` model its answer fits.
    pub query_fits: BTreeMap<String, Vec<String>>,
    /// Every registered worker.
    pub workers: Vec<WorkerReport>,
    /// The messages sent to each worker.
    pub probes: Vec<identify::Probe>,
    /// Revision ranges the probe cannot tell apart (their answers to every harmless message are the same).
    pub indistinguishable: Vec<String>,
    /// The decoder revision the pairs were judged for.
    pub decoder_revision: Option<String>,
    /// `--engine`'s checks, one per engine given.
    pub engines: Vec<live::EngineReport>,
    /// Everything wrong, in order found.
    pub problems: Vec<Problem>,
}

/// The ranges of a plan's classes of more than one revision.
pub fn indistinguishable(plan: &Plan) -> Vec<String> {
    plan.classes()
        .into_iter()
        .filter(|c| c.iter().map(|i| &i.revision).collect::<BTreeSet<_>>().len() > 1)
        .map(|c| identify::range_of(&c.into_iter().cloned().collect::<Vec<_>>()))
        .collect()
}

/// The problems of the workers' results: unreachable, unanswered, matching no revision, an incompatible pair.
pub fn worker_problems(reports: &[WorkerReport]) -> Vec<Problem> {
    let mut out = vec![];
    for r in reports {
        let at = format!("{} at {}", slot(&r.worker), r.worker.addr);
        if let Some(why) = &r.unreachable {
            out.push(Problem::new("unreachable-worker", format!("{at}: {why}")));
            continue;
        }
        for n in &r.no_answer {
            out.push(Problem::new("no-answer", format!("{at}: {n}")));
        }
        if r.identification.as_ref().is_some_and(|i| i.identities.is_empty()) {
            let got: Vec<String> = r.answers.iter().flatten().map(|a| a.to_string()).collect();
            out.push(Problem::new(
                "unknown-revision",
                format!("{at}: its answers fit no generation-2 revision ({})", got.join("; ")),
            ));
        }
        match r.pairing.as_ref().map(|p| p.verdict) {
            Some("incompatible") => out.push(Problem::new("incompatible-pair", format!("{at}: {}", pair_rows(r)))),
            Some("unsure") => out.push(Problem::new("unsure-pair", format!("{at}: breaks with {}", pair_rows(r)))),
            _ => {}
        }
    }
    out
}

fn pair_rows(r: &WorkerReport) -> String {
    let Some(p) = &r.pairing else { return String::new() };
    p.breaking.iter().map(|(rev, rows)| format!("{rev}: {}", rows.join("; "))).collect::<Vec<_>>().join(" | ")
}

/// The generation-2 revisions whose bootstrap models the `GET /query` answer fits (status 200, body
/// `dict[int, EngineEntry]`).
pub fn query_fits(table: &J) -> Vec<String> {
    let mut out = vec![];
    for r in Spec::builtin().push().revisions.iter().filter(|r| r.generation == 2) {
        let Some(Ok(mut b)) = mooncake_wire::bootstrap::BootstrapSpec::new(r.clone()) else { continue };
        if b.check_response("GET", "/query", 200, Some(table)).is_ok() {
            out.push(r.revision.clone());
        }
    }
    out
}
