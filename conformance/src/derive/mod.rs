//! The prefiller-side setup of a trace, derived from the trace itself: what a case needs that the wire does
//! not carry directly — which transfers exist and when each becomes ready, the prefiller's block ids, the
//! transfer-engine failures the recording injected and when the prefiller forgot the decoder's layout. A
//! scenario with an entry in the scenarios file (`conformance/scenarios.toml`, or `--scenarios FILE`) uses that
//! entry; a trace whose scenario has none (a user's own recording, a renamed scenario) uses this derivation.
//!
//! What the recording shows, and what is taken from it:
//!
//! * **transfers** — every transfer the decoder pulls (generation 2: the `req_blocks` values' transfer ids;
//!   generation 1: the request ids, the same on both sides). A transfer is ready before the pull when the reply
//!   that settles it is the exchange's first; after the N-th reply of the case when a CONTINUE came before it
//!   on its exchange (N counts every reply the decoder side received, in recorded order); allocated but never
//!   ready when nothing answers its pull; not scheduled at all when the reply is the timeout
//!   (`Timeout waiting for P side ready.`) or generation 1's `trans_done` to an unknown id (no write).
//! * **prefiller block ids** — never on the wire, but they decide how many copy descriptors each write has
//!   (contiguous runs coalesce), which `transfer_engine_calls` records. The decoder's own block ids are taken
//!   when they reproduce the recorded calls, else non-contiguous ids (one descriptor per block), else a mix,
//!   transfer by transfer — each candidate checked by a dry run of the reference prefiller with the planner of
//!   the trace's revision ([`dry_run()`]).
//! * **injected failures** — a reply `Mooncake transfer engine returned -1` (generation 1: `trans_error` after
//!   a recorded transfer-engine call) is a failed write: `fail_transfers`.
//! * **forgotten layouts** — a LAYOUT_MISS that answers a layout-less pull the same prefiller had acknowledged
//!   (echoed its `layout_id`) means the prefiller forgot it: `forget_layouts_after_reply` = the replies received
//!   before that pull was sent.
//! * **prefiller request ids** — named after the ids vLLM reported freed (`observed_outcome.finished_sending`):
//!   a shared trailing number pairs `p-req-2` with `xfer-2`; the rest go, in order, to the transfers the dry
//!   run freed; an id the recording does not constrain is the transfer id.
//!
//! The derived setup is then dry-run once more; whatever it does not reproduce is reported as
//! [`Unresolved`], with the case roles whose checks it would fail. A case of such a role fails with one
//! `CASE-SETUP` finding that prints the `[scenario.NAME]` entry to add (see [`snippet`]) instead of blaming the
//! testee.

pub mod dry_run;
mod gen1;
mod gen2;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::gen1::Gen1Profile;
use serde_json::Value as J;

pub use dry_run::{dry_run, DryRun, DryRunError};

use crate::role::Role;
use crate::scenarios::{Model, Ready, Scenario, Scenarios, Transfer};
use crate::setup::gen1::{messages, transfers_by_id};
use gen1::derive_gen1;
use gen2::derive_gen2;
use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::{Event, ZmqDir};

/// The reply of a prefiller that waited the abort timeout for a transfer that never became ready (vLLM
/// `send_kv_to_decode`; `src/proto/prefiller.rs`).
pub const TIMEOUT_MSG: &str = "Timeout waiting for P side ready.";
/// The start of the reply to a failed transfer-engine write (`Mooncake transfer engine returned {ret}`).
pub const TE_FAILED: &str = "Mooncake transfer engine returned ";
/// The reply naming requests whose prefiller holds fewer blocks than the decoder asks for (vLLM
/// `_build_transfer_params`; `mooncake_wire::plan::BlockMismatch::ProducerHasFewer`).
pub const BLOCK_COUNT_MSG: &str = "P num blocks less than D";
/// The first of the non-contiguous prefiller block ids handed out (then every other block: 10, 12, 14, …).
const SPREAD_FROM: u64 = 10;
/// At most this many transfers are tried block-choice by block-choice (2^n dry runs).
const MAX_MIXED: usize = 8;

/// Something the trace does not show, and what it would fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unresolved {
    /// What cannot be inferred and why (one sentence).
    pub what: String,
    /// The case roles whose checks it would fail.
    pub roles: Vec<Role>,
}

/// A setup derived from a trace.
#[derive(Clone, Debug)]
pub struct Derived {
    /// The setup, as a scenarios-file entry would give it.
    pub scenario: Scenario,
    /// How each part was inferred, one line each.
    pub how: Vec<String>,
    /// What the trace does not show (the case then needs a scenarios-file entry).
    pub unresolved: Vec<Unresolved>,
}

impl Derived {
    /// What was not inferred and would fail a case of `role`.
    pub fn blocking(&self, role: Role) -> Vec<&Unresolved> {
        self.unresolved.iter().filter(|u| u.roles.contains(&role)).collect()
    }
}

/// Derives the setup of `t` (prepared with the scenarios file's `[model]`).
pub fn derive(t: &Conversation, model: &Model) -> Derived {
    if t.revision.generation != 1 {
        return derive_gen2(t, model);
    }
    derive_gen1(t, model).unwrap_or_else(|e| Derived {
        scenario: Scenario::default(),
        how: vec![],
        unresolved: vec![Unresolved {
            what: format!("the trace cannot be read as a conversation: {e}"),
            roles: vec![Role::Prefiller, Role::Decoder],
        }],
    })
}

/// Readiness order: before the pulls first, then by the reply it waits for.
fn earlier(a: &Ready, b: &Ready) -> bool {
    let k = |r: &Ready| match r {
        Ready::Before => 0,
        Ready::AfterReply(n) => *n,
        Ready::Never => usize::MAX,
    };
    k(a) < k(b)
}

/// A transfer as the pulls show it.
#[derive(Clone, Debug)]
struct Seen {
    transfer_id: String,
    /// The decoder's block ids, per KV group, of the first pull that names it.
    blocks: Vec<Vec<u64>>,
    /// Readiness the replies show (the earliest).
    ready: Option<Ready>,
    /// Only an ERROR reply answered its pull (ready or not cannot be told; ready is what the recordings show).
    refused: bool,
    /// Its pull was answered with the timeout.
    timeout: bool,
    /// Its pull was refused for asking more blocks than the prefiller holds (`P num blocks less than D`).
    short: bool,
}

impl Seen {
    fn mark(&mut self, r: Ready) {
        if self.ready.as_ref().is_none_or(|old| earlier(&r, old)) {
            self.ready = Some(r);
        }
    }
}

#[derive(Default)]
struct Pulled {
    order: Vec<Seen>,
}

impl Pulled {
    fn get(&mut self, transfer_id: &str, blocks: Vec<Vec<u64>>) -> &mut Seen {
        if let Some(i) = self.order.iter().position(|s| s.transfer_id == transfer_id) {
            return &mut self.order[i];
        }
        self.order.push(Seen {
            transfer_id: transfer_id.to_string(),
            blocks,
            ready: None,
            refused: false,
            timeout: false,
            short: false,
        });
        self.order.last_mut().expect("pushed")
    }
}

fn wire_blocks(b: &[Vec<WireInt>]) -> Vec<Vec<u64>> {
    b.iter().map(|g| g.iter().map(|x| x.as_u64().unwrap_or(0)).collect()).collect()
}

/// 1-based index of each reply the decoder side received, in recorded order (the count the players key
/// `after_reply:N` on).
fn reply_index(t: &Conversation) -> BTreeMap<u64, usize> {
    let recorded: HashSet<u64> =
        t.exchanges.iter().flat_map(|x| x.replies.iter().map(|r| r.seq.unwrap_or(0))).collect();
    let mut out = BTreeMap::new();
    for ev in t.events() {
        if let Event::Zmq(z) = ev {
            if z.side == Role::Decoder && z.dir == ZmqDir::Recv && recorded.contains(&z.seq) {
                let n = out.len() + 1;
                out.insert(z.seq, n);
            }
        }
    }
    out
}

/// The recorded `t` of event `seq`, if the trace has times.
fn event_t(t: &Conversation, seq: u64) -> Option<f64> {
    t.events().iter().find_map(|e| match e {
        Event::Zmq(z) if z.seq == seq => z.t,
        _ => None,
    })
}

/// Seconds to a tenth, as scenarios state times.
fn tenth(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// What a recording with times (`t`) shows of a scenario's timing (0.34.0's leases, a late pull).
struct Timing {
    pull_delay_s: f64,
    announce: bool,
    decoder_lease: Option<f64>,
    prefiller_lease: Option<f64>,
    how: Vec<String>,
    /// What the trace shows of the timing too dimly to set it.
    unresolved: Vec<String>,
}

impl Timing {
    fn of(t: &Conversation, model: &Model) -> Timing {
        let mut how = vec![];
        let first_pull = t.exchanges.first().and_then(|x| x.seq).and_then(|s| event_t(t, s));
        let pull_delay_s = pull_delay(t, first_pull);
        if pull_delay_s > 0.0 {
            how.push(format!("the first pull {pull_delay_s} s after the start (its recorded t)"));
        }
        let rounds = heartbeat_rounds(t);
        let announce = match (rounds.first(), first_pull) {
            (Some(h), Some(p)) => *h < p,
            (Some(_), None) => true,
            _ => false,
        };
        let decoder_lease = decoder_lease(&rounds);
        let mut unresolved = vec![];
        if decoder_lease.is_none() && !rounds.is_empty() {
            unresolved.push(format!(
                "the decoder's kv_lease_duration: it sent {} heartbeat round(s), too few to show their cadence; give `decoder_kv_lease_s` (and `prefiller_kv_lease_s`)",
                rounds.len()
            ));
        }
        if let Some(l) = decoder_lease {
            how.push(format!("the decoder renews a lease of about {l} s (heartbeat rounds every {:.2} s)", l / 6.0));
        }
        if announce {
            how.push("the decoder knew its requests before pulling them (heartbeats before the first pull)".into());
        }
        let prefiller_lease = prefiller_lease(t, model, first_pull, decoder_lease, &mut how);
        Timing { pull_delay_s, announce, decoder_lease, prefiller_lease, how, unresolved }.bounded()
    }

    /// The timing within what a scenarios file may say: a recording's times are input, and one that would make
    /// a case wait longer (scenarios::bounds) is clamped, with a note of why it is not played.
    fn bounded(mut self) -> Timing {
        let max = crate::scenarios::bounds::MAX_SECONDS;
        for (what, v) in [
            ("pull delay", Some(self.pull_delay_s)),
            ("decoder lease", self.decoder_lease),
            ("prefiller lease", self.prefiller_lease),
        ] {
            if let Some(v) = v.filter(|v| !(0.0..=max).contains(v)) {
                self.unresolved.push(format!("the recorded times give a {what} of {v} s, outside 0 to {max} s"));
            }
        }
        let clamp = |v: f64| v.clamp(0.0, max);
        self.pull_delay_s = self.pull_delay_s.clamp(0.0, max);
        self.decoder_lease = self.decoder_lease.map(clamp);
        self.prefiller_lease = self.prefiller_lease.map(clamp);
        self
    }
}

/// When the first pull was handed over, in seconds to a tenth (0 when it was not late). The decoder asks the
/// bootstrap server for an engine it does not know before it pulls from it: such a query just before the first
/// pull is when the pull was handed over. A pull (or query) within a quarter second of the start is the
/// recorder's own pace, not a delay.
fn pull_delay(t: &Conversation, first_pull: Option<f64>) -> f64 {
    let query = first_pull.and_then(|p| {
        t.trace
            .http()
            .filter(|h| h.dir == mooncake_trace::trace::HttpDir::Request && h.path == "/query")
            .filter_map(|h| h.t)
            .filter(|q| *q <= p && *q >= 0.25)
            .fold(None::<f64>, |a, q| Some(a.map_or(q, |a: f64| a.max(q))))
    });
    query.or(first_pull).filter(|at| *at >= 0.25).map(tenth).unwrap_or(0.0)
}

/// Heartbeat rounds: the distinct times a decoder sent heartbeats (a round reaches every worker at once), in
/// order.
fn heartbeat_rounds(t: &Conversation) -> Vec<f64> {
    let mut rounds: Vec<f64> = t.heartbeats.iter().filter_map(|h| h.t).collect();
    rounds.sort_by(f64::total_cmp);
    rounds.dedup_by(|a, b| (*a - *b).abs() < 0.005);
    rounds
}

/// The decoder's lease, from the cadence of its heartbeat rounds. vLLM renews every duration / 6, checked at
/// each engine step: six times the median gap between rounds (the first round leaves late, after the bootstrap
/// query, so its gap is left out). An estimate: the duration is configuration, and the wire shows it only
/// through the cadence.
fn decoder_lease(rounds: &[f64]) -> Option<f64> {
    let mut gaps: Vec<f64> = rounds.windows(2).skip(1).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    gaps.get(gaps.len() / 2).map(|g| tenth(g * 6.0)).filter(|l| *l > 0.0)
}

/// The prefiller's lease, and how it shows in `how`. Renewed heartbeats: the prefiller has a lease, taken to be
/// the decoder's (vLLM asks for the same on both sides). Otherwise a transfer freed on expiry earlier than the
/// abort timeout shows the lease it was held for.
fn prefiller_lease(
    t: &Conversation,
    model: &Model,
    first_pull: Option<f64>,
    decoder_lease: Option<f64>,
    how: &mut Vec<String>,
) -> Option<f64> {
    let renewed = t.heartbeats.iter().flat_map(|h| &h.replies).filter_map(|r| r.payload.value()).any(|r| {
        t.profile
            .as_ref()
            .and_then(|p| p.kv_leases.as_ref())
            .is_some_and(|l| r.status.name() == Some(l.renewed_status.as_str()))
    });
    if renewed {
        how.push("the prefiller renewed the heartbeats: its lease taken to be the decoder's".into());
        return decoder_lease;
    }
    let freed_at = first_freed_t(t);
    let delivered_before = first_pull.is_some_and(|p| freed_at.is_some_and(|f| f > p));
    let lease = freed_at.filter(|f| !delivered_before && *f < model.abort_timeout_s - 0.1).map(tenth);
    if let Some(l) = lease {
        how.push(format!(
            "the prefiller freed the unpulled transfer after {l} s, before its abort timeout: a {l} s lease"
        ));
    }
    lease
}

/// The earliest time the recording reports a prefiller freed a transfer (`observed_outcome.finished_sending_t`).
fn first_freed_t(t: &Conversation) -> Option<f64> {
    t.trace
        .header
        .observed_outcome
        .get("finished_sending_t")
        .and_then(J::as_object)
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(J::as_object)
        .flat_map(|m| m.values())
        .filter_map(J::as_f64)
        .fold(None::<f64>, |a, x| Some(a.map_or(x, |a| a.min(x))))
}

fn transfers_how(
    transfers: &[Transfer],
    later: &[String],
    never: &[String],
    dropped: &[String],
    why_dropped: &str,
) -> String {
    let mut s = format!(
        "transfers {} from the pulls",
        if transfers.is_empty() {
            "none".to_string()
        } else {
            transfers.iter().map(|t| t.transfer_id.as_str()).collect::<Vec<_>>().join(", ")
        }
    );
    if !later.is_empty() {
        s += &format!("; readied {} (a CONTINUE came first)", later.join(", "));
    }
    if !never.is_empty() {
        s += &format!("; never ready: {} (no reply settles the pull)", never.join(", "));
    }
    if !dropped.is_empty() {
        s += &format!("; not scheduled: {} (the reply is {why_dropped})", dropped.join(", "));
    }
    s
}

/// Up to `cap` subsets of `items` of size `k`, in lexicographic order.
fn combinations(items: &[usize], k: usize, cap: usize) -> Vec<Vec<usize>> {
    let mut out = vec![];
    fn go(items: &[usize], k: usize, start: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>, cap: usize) {
        if out.len() >= cap {
            return;
        }
        if cur.len() == k {
            out.push(cur.clone());
            return;
        }
        for i in start..items.len() {
            cur.push(items[i]);
            go(items, k, i + 1, cur, out, cap);
            cur.pop();
        }
    }
    if k <= items.len() {
        go(items, k, 0, &mut vec![], &mut out, cap);
    }
    out
}

/// Whether some group of these block ids has two consecutive ids next to each other (a run the planner could
/// coalesce).
fn has_run(blocks: &[Vec<u64>]) -> bool {
    blocks.iter().any(|g| g.windows(2).any(|w| w[1] == w[0] + 1))
}

/// `base` with the transfers whose `spread` flag is set given non-contiguous prefiller block ids (every other
/// block from [`SPREAD_FROM`], continuing from one transfer to the next, wrapping within the model's blocks).
fn with_blocks(base: &Scenario, spread: &[bool], decoder_blocks: &[Vec<Vec<u64>>], model: &Model) -> Scenario {
    let slots: Vec<u64> = (0..model.num_blocks.max(2)).step_by(2).collect();
    let mut next = slots.iter().position(|b| *b >= SPREAD_FROM).unwrap_or(0);
    let mut sc = base.clone();
    for (i, tr) in sc.transfers.iter_mut().enumerate() {
        tr.blocks = decoder_blocks[i].clone();
        if spread[i] {
            for g in tr.blocks.iter_mut() {
                for b in g.iter_mut() {
                    *b = slots[next % slots.len()];
                    next += 1;
                }
            }
        }
    }
    sc
}

/// Chooses the prefiller block ids, names the prefiller requests, and checks the whole setup with a dry run.
fn finish(
    t: &Conversation,
    model: &Model,
    mut scenario: Scenario,
    mut how: Vec<String>,
    mut unresolved: Vec<Unresolved>,
) -> Derived {
    let decoder_blocks: Vec<Vec<Vec<u64>>> = scenario.transfers.iter().map(|t| t.blocks.clone()).collect();
    let variable: Vec<usize> = (0..decoder_blocks.len()).filter(|i| has_run(&decoder_blocks[*i])).collect();
    // A recording that could not observe the transfer-engine calls (a tap's) does not constrain the prefiller's
    // block ids: the decoder's own are taken, and TE-CALLS does not apply to its cases.
    let te_observed = t.trace.header.observed("transfer_engine_calls");
    let mut candidates = spread_candidates(decoder_blocks.len(), &variable);
    if !te_observed {
        candidates.truncate(1);
        how.push("prefiller blocks: the decoder's own ids (the recording did not observe transfer-engine calls, so nothing constrains them)".into());
    }
    let blocks = Blocks { decoder: &decoder_blocks, te_observed };
    let (chosen, tried) = match try_candidates(t, model, &scenario, &candidates, &blocks) {
        Ok(r) => r,
        Err(e) => {
            unresolved.push(Unresolved {
                what: format!("the reference prefiller cannot be set up for this trace: {e}"),
                roles: vec![Role::Prefiller, Role::Decoder],
            });
            return Derived { scenario, how, unresolved };
        }
    };
    let calls = t.trace.header.transfer_engine_calls.len();
    let (spread, run) = match chosen {
        Some((c, run)) => {
            if calls > 0 && te_observed {
                how.push(spread_how(&c, variable.len(), calls));
            }
            (c, run)
        }
        None => {
            let (c, run) = tried.first().cloned().expect("one candidate at least");
            unresolved.push(Unresolved { what: unreproduced(&run, &tried, &variable), roles: vec![Role::Prefiller] });
            (c, run)
        }
    };
    scenario = with_blocks(&scenario, &spread, &decoder_blocks, model);
    if !run.replies.is_empty() {
        unresolved.push(Unresolved {
            what: format!(
                "the reference prefiller, prepared as derived, does not answer as recorded: {}",
                run.replies.join("; ")
            ),
            roles: vec![Role::Prefiller, Role::Decoder],
        });
    }
    // Prefiller request ids, after what vLLM reported freed.
    if t.revision.generation != 1 {
        how.extend(name_prefiller_requests(t, &mut scenario, &run));
    }
    match dry_run(t, model, &scenario) {
        Ok(run) => {
            let p = run.finished_sending_problems(t);
            if !p.is_empty() {
                unresolved.push(Unresolved {
                    what: format!("what the prefiller frees: {}", p.join("; ")),
                    roles: vec![Role::Prefiller],
                });
            }
        }
        Err(e) => unresolved.push(Unresolved { what: e.to_string(), roles: vec![Role::Prefiller, Role::Decoder] }),
    }
    Derived { scenario, how, unresolved }
}

/// Which transfers take non-contiguous prefiller block ids, one candidate per choice: none first, then all of
/// those with a run of ids (`variable`), then (for a few) every mix.
fn spread_candidates(n: usize, variable: &[usize]) -> Vec<Vec<bool>> {
    let mut candidates: Vec<Vec<bool>> = vec![vec![false; n]];
    if variable.is_empty() {
        return candidates;
    }
    candidates.push((0..n).map(|i| variable.contains(&i)).collect());
    if variable.len() > 1 && variable.len() <= MAX_MIXED {
        for mask in 1..(1u32 << variable.len()) - 1 {
            let mut c = vec![false; n];
            for (bit, i) in variable.iter().enumerate() {
                c[*i] = mask & (1 << bit) != 0;
            }
            candidates.push(c);
        }
    }
    candidates
}

/// The decoder's block ids per transfer, and whether the recording observed the transfer-engine calls.
struct Blocks<'b> {
    decoder: &'b [Vec<Vec<u64>>],
    te_observed: bool,
}

/// A candidate and the dry run of the scenario prepared with it.
type Tried = (Vec<bool>, DryRun);

/// Dry-runs the candidates in order: the first whose writes match the recorded transfer-engine calls (or the
/// first, where the recording did not observe them), and every one tried before it.
fn try_candidates(
    t: &Conversation,
    model: &Model,
    scenario: &Scenario,
    candidates: &[Vec<bool>],
    blocks: &Blocks<'_>,
) -> Result<(Option<Tried>, Vec<Tried>), dry_run::DryRunError> {
    let mut tried = vec![];
    for c in candidates {
        let run = dry_run(t, model, &with_blocks(scenario, c, blocks.decoder, model))?;
        if run.writes_match() || !blocks.te_observed {
            return Ok((Some((c.clone(), run)), tried));
        }
        tried.push((c.clone(), run));
    }
    Ok((None, tried))
}

/// How the prefiller's block ids were chosen (`spread`: the transfers given non-contiguous ones).
fn spread_how(spread: &[bool], variable: usize, calls: usize) -> String {
    let spread_n = spread.iter().filter(|x| **x).count();
    let s = if calls == 1 { "" } else { "s" };
    if spread_n == 0 {
        format!("prefiller blocks: the decoder's own ids (reproduce the {calls} recorded transfer-engine call{s})")
    } else if spread_n == variable {
        format!("prefiller blocks: non-contiguous ids, one descriptor per block (reproduce the {calls} recorded transfer-engine call{s})")
    } else {
        format!("prefiller blocks: non-contiguous ids for {spread_n} transfers, the decoder's own for the others (reproduce the {calls} recorded transfer-engine calls)")
    }
}

/// Why no candidate reproduced the recorded transfer-engine calls: the model's byte counts, or the prefiller's
/// block ids (what the scenarios file must then give).
fn unreproduced(run: &DryRun, tried: &[Tried], variable: &[usize]) -> String {
    let counts = |w: &[(String, u64, u64)]| w.iter().map(|x| (x.0.clone(), x.1)).collect::<Vec<_>>();
    if run.writes.len() == run.recorded_writes.len() && counts(&run.writes) == counts(&run.recorded_writes) {
        return format!(
            "the model: the recorded transfer-engine calls (session, descriptors, bytes) {:?} move other byte counts than the scenarios file's [model] gives ({:?}); give the recording's model (heads, head size, block size, dtype) as [model] in the --scenarios file",
            run.recorded_writes, run.writes
        );
    }
    let spread = tried
        .iter()
        .find(|(c, _)| c.iter().filter(|x| **x).count() == variable.len() && !variable.is_empty())
        .map(|(_, r)| format!(", nor by non-contiguous ones ({:?})", r.writes))
        .unwrap_or_default();
    format!(
        "prefiller block ids: the recorded transfer-engine calls (session, descriptors, bytes) {:?} are reproduced neither by the decoder's own block ids ({:?}){spread}; fill in each transfer's `blocks` with the prefiller's block ids (a run of consecutive ids on both sides is one descriptor per region)",
        run.recorded_writes, run.writes
    )
}

/// Names the prefiller's requests after what vLLM reported freed (`name_requests`); returns what to say about it.
fn name_prefiller_requests(t: &Conversation, scenario: &mut Scenario, run: &DryRun) -> Option<String> {
    let named = name_requests(t, scenario, run)?;
    for tr in scenario.transfers.iter_mut() {
        if let Some(p) = named.get(&tr.transfer_id) {
            tr.p_req_id = p.clone();
        }
    }
    if !named.iter().any(|(t, p)| t != p) {
        return None;
    }
    let pairs: Vec<String> = scenario
        .transfers
        .iter()
        .filter(|t| t.p_req_id != t.transfer_id)
        .map(|t| format!("{} = {}", t.p_req_id, t.transfer_id))
        .collect();
    Some(format!("prefiller request ids from observed_outcome.finished_sending: {}", pairs.join(", ")))
}

/// The trailing decimal number of an id (`p-req-12` → 12).
fn trailing_number(s: &str) -> Option<u64> {
    let digits: String =
        s.chars().rev().take_while(|c| c.is_ascii_digit()).collect::<Vec<_>>().into_iter().rev().collect();
    digits.parse().ok()
}

/// Prefiller request ids per transfer id, from the ids vLLM reported freed; `None` when it reported none.
fn name_requests(t: &Conversation, scenario: &Scenario, run: &DryRun) -> Option<HashMap<String, String>> {
    let fs = t.trace.header.observed_outcome.get("finished_sending").and_then(J::as_object)?;
    let mut want: Vec<String> = vec![];
    for ids in fs.values() {
        for id in ids.as_array().into_iter().flatten().filter_map(J::as_str) {
            if !want.iter().any(|w| w == id) {
                want.push(id.to_string());
            }
        }
    }
    if want.is_empty() {
        return None;
    }
    let mut named: HashMap<String, String> = HashMap::new();
    let mut used: HashSet<String> = HashSet::new();
    // A shared trailing number, where it is unique on both sides.
    for tr in &scenario.transfers {
        let Some(n) = trailing_number(&tr.transfer_id) else { continue };
        if scenario.transfers.iter().filter(|o| trailing_number(&o.transfer_id) == Some(n)).count() != 1 {
            continue;
        }
        let same: Vec<&String> = want.iter().filter(|w| trailing_number(w) == Some(n)).collect();
        if let [p] = same.as_slice() {
            named.insert(tr.transfer_id.clone(), (*p).clone());
            used.insert((*p).clone());
        }
    }
    // The rest in order, to what the dry run freed (after delivery first).
    let mut freed: Vec<String> = vec![];
    for f in run.freed.values() {
        for (_, tid) in f.delivered.iter().chain(&f.expired) {
            if !freed.contains(tid) {
                freed.push(tid.clone());
            }
        }
    }
    let mut rest = want.iter().filter(|w| !used.contains(*w));
    let unnamed: Vec<String> = freed.into_iter().filter(|tid| !named.contains_key(tid)).collect();
    for tid in &unnamed {
        match rest.next() {
            Some(p) => {
                named.insert(tid.clone(), p.clone());
            }
            None => break,
        }
    }
    Some(named)
}

// ---- a setup per case ---------------------------------------------------------------------------------

/// Where a case's setup came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The scenarios file's entry for the trace's scenario.
    Scenarios,
    /// Derived from the trace (no entry).
    Derived,
}

/// The setup a case runs with.
#[derive(Clone, Debug)]
pub struct CaseSetup {
    /// The setup.
    pub scenario: Scenario,
    /// Where it came from; `None` when neither the file nor the trace gave one.
    pub source: Option<Source>,
    /// Said in the report under the case.
    pub notes: Vec<String>,
}

/// Derivations of the traces of one run, computed once per trace.
#[derive(Clone, Default)]
pub struct Cache(Arc<Mutex<HashMap<String, Arc<Derived>>>>);

impl Cache {
    /// The derivation of `t`'s setup with `model`, computed on first use (per trace path and scenario).
    pub fn get(&self, t: &Conversation, model: &Model) -> Arc<Derived> {
        let key = format!("{}\u{0}{}", t.trace.path, t.scenario());
        if let Some(d) = self.0.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return d.clone();
        }
        let d = Arc::new(derive(t, model));
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(key, d.clone());
        d
    }
}

/// A case whose setup neither the scenarios file nor the trace gives (the `CASE-SETUP` finding's text names
/// the entry to add, with a snippet to fill in).
#[derive(Debug, thiserror::Error)]
#[error(
    "{case_id}: the scenarios file has no [scenario.{entry}] entry, and the trace does not show everything this case needs: {}. \
     Put this entry in a TOML file and pass it with --scenarios FILE (it adds to the bundled scenarios), with what the comments ask filled in:\n\n{snippet}",
    unshown.join("; ")
)]
pub struct MissingSetup {
    /// The case.
    pub case_id: String,
    /// The scenario's key in the scenarios file (`[scenario.KEY]`).
    pub entry: String,
    /// What the trace does not show that the case needs.
    pub unshown: Vec<String>,
    /// The entry to add, with comments asking for what is missing.
    pub snippet: String,
}

/// The setup of a case of `role` on trace `t`: the scenarios file's entry for its scenario (cross-checked with
/// the derivation: a difference is a note), else the derivation — or, when the trace does not show something
/// a case of this role needs, the `CASE-SETUP` text naming the entry to add. A pull-family trace has none of
/// these: its players read its `[pull_scenario]` entry.
pub fn case_setup(
    case_id: &str,
    t: &Conversation,
    scenarios: &Scenarios,
    role: Role,
    cache: &Cache,
) -> Result<CaseSetup, MissingSetup> {
    let name = t.scenario();
    if t.is_pull() {
        // The pull players read their `[pull_scenario]` entry themselves (`crate::setup::pull`).
        return Ok(CaseSetup { scenario: Scenario::default(), source: Some(Source::Scenarios), notes: vec![] });
    }
    if role == Role::Bootstrap {
        return Ok(CaseSetup {
            scenario: scenarios.scenario.get(name).cloned().unwrap_or_default(),
            source: None,
            notes: vec![],
        });
    }
    let derived = cache.get(t, &scenarios.model);
    if let Some(given) = scenarios.scenario.get(name) {
        let diffs = differences(t, &scenarios.model, given, &derived.scenario);
        let mut notes = vec![];
        if !diffs.is_empty() {
            notes.push(format!("the scenarios file's [scenario.{}] differs from the setup derived from the trace ({}); the file's entry is used", key(name), diffs.join("; ")));
        }
        return Ok(CaseSetup { scenario: given.clone(), source: Some(Source::Scenarios), notes });
    }
    let blocking = derived.blocking(role);
    if !blocking.is_empty() {
        return Err(MissingSetup {
            case_id: case_id.to_string(),
            entry: key(name),
            unshown: blocking.iter().map(|u| u.what.clone()).collect(),
            snippet: snippet(name, &derived),
        });
    }
    let mut notes =
        vec![format!("no [scenario.{}] entry: setup derived from the trace — {}", key(name), derived.how.join("; "))];
    for u in derived.unresolved.iter().filter(|u| !u.roles.contains(&role)) {
        notes.push(format!("not inferred (not checked by this case): {}", u.what));
    }
    Ok(CaseSetup { scenario: derived.scenario.clone(), source: Some(Source::Derived), notes })
}

/// What differs between two setups of `t` in what the cases use: the transfers (by transfer id; generation 1:
/// by the request id each stands for), their blocks and readiness, the prefiller request ids where the
/// recording names them, the failures and the forgotten layouts.
pub fn differences(t: &Conversation, model: &Model, a: &Scenario, b: &Scenario) -> Vec<String> {
    let transfers = if t.revision.generation == 1 {
        gen1_transfer_differences(t, a, b)
    } else {
        Some(transfer_differences(t, a, b))
    };
    // A generation-1 trace whose messages cannot be read shows no setup to compare with.
    let Some(mut out) = transfers else { return vec![] };
    if a.fail_transfers != b.fail_transfers {
        out.push(format!("fail_transfers {} vs derived {}", a.fail_transfers, b.fail_transfers));
    }
    if a.forget_layouts_after_reply != b.forget_layouts_after_reply {
        out.push(format!(
            "forget_layouts_after_reply {:?} vs derived {:?}",
            a.forget_layouts_after_reply, b.forget_layouts_after_reply
        ));
    }
    // Timing (0.34.0's leases, a late pull), where the trace has times to show it.
    let timed = t.trace.events.iter().any(|e| matches!(e, Event::Zmq(z) if z.t.is_some()));
    if timed {
        out.extend(timing_differences(model, a, b));
    }
    out
}

/// A transfer of one setup as a difference shows it.
fn transfer_text(tr: Option<&Transfer>) -> String {
    tr.map(|t| format!("blocks {:?}, {}", t.blocks, ready_text(&t.ready))).unwrap_or_else(|| "none".into())
}

/// Generation 1's transfers that differ, by the request id each stands for; `None` when the trace's messages
/// cannot be read.
fn gen1_transfer_differences(t: &Conversation, a: &Scenario, b: &Scenario) -> Option<Vec<String>> {
    let profile = Gen1Profile::new(t.revision.clone()).ok()?;
    let msgs = messages(t, &profile).ok()?;
    let (ma, mb) = (transfers_by_id(a, &msgs), transfers_by_id(b, &msgs));
    let ids: std::collections::BTreeSet<&String> = ma.keys().chain(mb.keys()).collect();
    let mut out = vec![];
    for id in ids {
        let (x, y) = (ma.get(id), mb.get(id));
        if x.map(|t| (&t.blocks, &t.ready)) != y.map(|t| (&t.blocks, &t.ready)) {
            out.push(format!("request {id}: {} vs derived {}", transfer_text(x), transfer_text(y)));
        }
    }
    Some(out)
}

/// The transfers that differ, by transfer id (generation 2): blocks and readiness, and the prefiller request
/// ids where the recording names them (a freed request).
fn transfer_differences(t: &Conversation, a: &Scenario, b: &Scenario) -> Vec<String> {
    let mut out = vec![];
    let freed = freed_p_reqs(t);
    let free_only = free_only_transfers(t);
    let mut ids: Vec<&String> = a.transfers.iter().chain(&b.transfers).map(|t| &t.transfer_id).collect();
    ids.dedup();
    let mut seen = HashSet::new();
    for id in ids {
        if !seen.insert(id) {
            continue;
        }
        let (x, y) =
            (a.transfers.iter().find(|t| &t.transfer_id == id), b.transfers.iter().find(|t| &t.transfer_id == id));
        // A transfer only ever pulled free-only (no decoder blocks): nothing is written, so the prefiller's
        // block ids leave no trace; only its readiness is compared.
        let same = if free_only.contains(id.as_str()) {
            x.map(|t| &t.ready) == y.map(|t| &t.ready)
        } else {
            x.map(|t| (&t.blocks, &t.ready)) == y.map(|t| (&t.blocks, &t.ready))
        };
        if !same {
            out.push(format!("transfer {id}: {} vs derived {}", transfer_text(x), transfer_text(y)));
        }
        if let (Some(x), Some(y)) = (x, y) {
            if x.p_req_id != y.p_req_id && (freed.contains(&x.p_req_id) || freed.contains(&y.p_req_id)) {
                out.push(format!("transfer {id}: prefiller request {} vs derived {}", x.p_req_id, y.p_req_id));
            }
        }
    }
    out
}

/// The timing that differs: the pull delay, the announcement, the leases.
fn timing_differences(model: &Model, a: &Scenario, b: &Scenario) -> Vec<String> {
    let mut out = vec![];
    // Times read off a recording carry the recording machine's jitter (a loaded machine's decoder may pull
    // a second late: 0.28.0's first bootstrap query takes about half a second on its own): two delays are the
    // same when they fall on the same side of every deadline the case depends on — the prefiller's lease,
    // its abort timeout, and how long it remembers an expired transfer.
    let abort = model.abort_timeout_s;
    let sides = |delay: f64, lease: Option<f64>| {
        let expiry = lease.unwrap_or(abort);
        (lease.is_some_and(|l| delay > l), delay > abort, delay > expiry + abort)
    };
    if sides(a.pull_delay_s, a.prefiller_kv_lease_s) != sides(b.pull_delay_s, a.prefiller_kv_lease_s) {
        out.push(format!("pull_delay_s {} vs derived {}", a.pull_delay_s, b.pull_delay_s));
    }
    if a.announce != b.announce {
        out.push(format!("announce {} vs derived {}", a.announce, b.announce));
    }
    let near = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => (x - y).abs() <= 0.25,
        (None, None) => true,
        _ => false,
    };
    if !near(a.decoder_kv_lease_s, b.decoder_kv_lease_s) {
        out.push(format!("decoder_kv_lease_s {:?} vs derived {:?}", a.decoder_kv_lease_s, b.decoder_kv_lease_s));
    }
    if !near(a.prefiller_kv_lease_s, b.prefiller_kv_lease_s) {
        out.push(format!("prefiller_kv_lease_s {:?} vs derived {:?}", a.prefiller_kv_lease_s, b.prefiller_kv_lease_s));
    }
    out
}

/// The prefiller requests the recording reports freed (`observed_outcome.finished_sending`, every prefiller).
fn freed_p_reqs(t: &Conversation) -> HashSet<String> {
    t.trace
        .header
        .observed_outcome
        .get("finished_sending")
        .and_then(J::as_object)
        .into_iter()
        .flat_map(|o| o.values())
        .flat_map(|v| v.as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(String::from))
        .collect()
}

/// The transfers every recorded pull asks for with no decoder blocks (free-only pulls).
fn free_only_transfers(t: &Conversation) -> HashSet<String> {
    let mut with_blocks = HashSet::new();
    let mut all = HashSet::new();
    for m in t.exchanges.iter().filter_map(|x| x.request.value()) {
        for (_, rb) in &m.req_blocks {
            all.insert(rb.transfer_id.clone());
            if rb.blocks.iter().any(|g| !g.is_empty()) {
                with_blocks.insert(rb.transfer_id.clone());
            }
        }
    }
    all.retain(|id| !with_blocks.contains(id));
    all
}

fn ready_text(r: &Ready) -> String {
    match r {
        Ready::Before => "before".into(),
        Ready::AfterReply(n) => format!("after_reply:{n}"),
        Ready::Never => "never".into(),
    }
}

/// A scenario name as a TOML key: bare where TOML allows, quoted otherwise.
pub fn key(name: &str) -> String {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        name.to_string()
    } else {
        toml_str(name)
    }
}

/// A TOML basic string (JSON's escapes are TOML's).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// The `[scenario.NAME]` entry of a derived setup, with what could not be inferred as comments.
pub fn snippet(name: &str, d: &Derived) -> String {
    let sc = &d.scenario;
    let mut o = String::new();
    for u in &d.unresolved {
        o.push_str(&format!("# TO FILL IN: {}\n", u.what.replace('\n', " ")));
    }
    o.push_str(&format!("[scenario.{}]\n", key(name)));
    if sc.transfers.is_empty() {
        o.push_str("transfers = []\n");
    } else {
        o.push_str("transfers = [\n");
        for t in &sc.transfers {
            let ready = if t.ready == Ready::Before {
                String::new()
            } else {
                format!(", ready = {}", toml_str(&ready_text(&t.ready)))
            };
            let blocks = format!(
                "[{}]",
                t.blocks
                    .iter()
                    .map(|g| format!("[{}]", g.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(", ")))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            o.push_str(&format!(
                "  {{ p_req_id = {}, transfer_id = {}, blocks = {blocks}{ready} }},\n",
                toml_str(&t.p_req_id),
                toml_str(&t.transfer_id)
            ));
        }
        o.push_str("]\n");
    }
    if sc.fail_transfers > 0 {
        o.push_str(&format!("fail_transfers = {}\n", sc.fail_transfers));
    }
    if let Some(n) = sc.forget_layouts_after_reply {
        o.push_str(&format!("forget_layouts_after_reply = {n}\n"));
    }
    o
}
