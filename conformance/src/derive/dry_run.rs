//! A dry run of a trace's prefiller side: the reference prefiller cores (the state machines the reference peer
//! drives, with the planner of the trace's revision), prepared as a scenario says, fed the recorded requests in
//! recorded order on a simulated clock. What they answer, write and free is compared with the recording. This
//! is how a setup derived from a trace is checked (and chosen, where several are possible) before any testee
//! runs: a setup the dry run cannot reproduce the recording with would make the reference peer fail.
//!
//! The dry run mirrors the players: the decoder's requests go out as recorded (generation 1: with the runner's
//! decoder layout, as [`crate::play::gen1`] sends them), transfers are readied before the pulls or after the
//! N-th reply, the injected failures fail each prefiller's first writes, layouts are forgotten after a reply.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use mooncake_io::layout::producer_with;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::gen1::Gen1Prefiller;
use mooncake_wire::proto::{PrefillerCore, PrefillerEvent, PrefillerMachine};
use serde_json::Value as J;

use crate::role::Role;
use crate::scenarios::{Model, Ready, ReplyActions, Scenario, Step};
use crate::setup::gen1::{layout, Gen1Setup};
use crate::setup::{model_config, prefiller_planner, SetupError, D_BASE, P_BASE};
use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::{Event, ZmqDir};

/// Why a dry run cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum DryRunError {
    /// A generation-2 trace whose revision the reference cores cannot speak.
    #[error("the trace's revision has no generation-2 profile")]
    NoProfile,
    /// The reference prefillers cannot be prepared as the trace and scenario say.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// A recorded generation-1 request cannot be said again in the revision.
    #[error(transparent)]
    Encode(#[from] mooncake_wire::proto::CarryError),
    /// The scenario's prefiller lease cannot be set on the trace's revision.
    #[error("prefiller_kv_lease_s: {0}")]
    Lease(#[from] mooncake_wire::proto::LeaseError),
}

/// What a dry run produced, next to what the recording shows.
#[derive(Clone, Debug, Default)]
pub struct DryRun {
    /// Replies that differ from the recorded ones, are missing or are extra: one line each.
    pub replies: Vec<String>,
    /// Transfer-engine calls (session, descriptors, bytes), sorted.
    pub writes: Vec<(String, u64, u64)>,
    /// The recorded calls, sorted.
    pub recorded_writes: Vec<(String, u64, u64)>,
    /// Per prefiller conn: (p_req_id, transfer_id) freed after delivery, and on expiry.
    pub freed: BTreeMap<String, Freed>,
}

/// What one prefiller freed in the dry run, as (p_req_id, transfer_id), in order.
#[derive(Clone, Debug, Default)]
pub struct Freed {
    /// Freed after a delivery.
    pub delivered: Vec<(String, String)>,
    /// Freed on expiry.
    pub expired: Vec<(String, String)>,
}

impl DryRun {
    /// Whether the dry run's writes are the recorded transfer-engine calls.
    pub fn writes_match(&self) -> bool {
        self.writes == self.recorded_writes
    }

    /// The rule of `P-FINISHED-SENDING` on the dry run: a prefiller frees after a delivery only what vLLM
    /// freed, and everything vLLM freed after a delivery or on expiry.
    pub fn finished_sending_problems(&self, t: &Conversation) -> Vec<String> {
        let mut out = vec![];
        let Some(want) = t.trace.header.observed_outcome.get("finished_sending").and_then(J::as_object) else {
            return out;
        };
        for (conn, ids) in want {
            let Some(f) = self.freed.get(conn) else { continue };
            let want: Vec<&str> = ids.as_array().map(|a| a.iter().filter_map(J::as_str).collect()).unwrap_or_default();
            let delivered: Vec<&str> = f.delivered.iter().map(|(p, _)| p.as_str()).collect();
            let expired: Vec<&str> = f.expired.iter().map(|(p, _)| p.as_str()).collect();
            let extra: Vec<&&str> = delivered.iter().filter(|d| !want.contains(d)).collect();
            let missing: Vec<&&str> = want.iter().filter(|w| !delivered.contains(w) && !expired.contains(w)).collect();
            if !extra.is_empty() || !missing.is_empty() {
                out.push(format!(
                    "{conn} freed {delivered:?} after delivery and {expired:?} on expiry; vLLM freed {want:?}"
                ));
            }
        }
        out
    }

    /// Whether the dry run reproduced the recording in everything the prefiller case checks.
    pub fn reproduces(&self, t: &Conversation) -> bool {
        self.replies.is_empty() && self.writes_match() && self.finished_sending_problems(t).is_empty()
    }
}

/// The machines and what they did, on a simulated clock.
struct Sim {
    now: Instant,
    machines: Vec<Box<dyn PrefillerMachine>>,
    conns: Vec<String>,
    fail_left: Vec<usize>,
    /// Replies not yet taken, per routing id.
    queues: HashMap<Vec<u8>, VecDeque<Vec<u8>>>,
    writes: Vec<(String, u64, u64)>,
    freed: Vec<Freed>,
}

impl Sim {
    fn new(machines: Vec<(String, Box<dyn PrefillerMachine>)>, fail: usize) -> Sim {
        let n = machines.len();
        let (conns, machines) = machines.into_iter().unzip();
        Sim {
            now: Instant::now(),
            machines,
            conns,
            fail_left: vec![fail; n],
            queues: HashMap::new(),
            writes: vec![],
            freed: vec![Freed::default(); n],
        }
    }

    /// Takes what machine `i` wants sent and done; writes complete at once (failed while the budget lasts).
    fn pump(&mut self, i: usize) {
        for _ in 0..100_000 {
            let mut progressed = false;
            while let Some(tx) = self.machines[i].poll_transmit() {
                self.queues.entry(tx.peer.0.clone()).or_default().push_back(tx.payload);
                progressed = true;
            }
            let mut done = vec![];
            while let Some(ev) = self.machines[i].poll_event() {
                progressed = true;
                match ev {
                    PrefillerEvent::Write { id, session, descriptors } => {
                        self.writes.push((session, descriptors.len() as u64, descriptors.iter().map(|d| d.len).sum()));
                        let ret = if self.fail_left[i] > 0 {
                            self.fail_left[i] -= 1;
                            -1
                        } else {
                            0
                        };
                        done.push((id, ret));
                    }
                    PrefillerEvent::FinishedSending { p_req_id, transfer_id, expired } => {
                        let f = &mut self.freed[i];
                        if expired { &mut f.expired } else { &mut f.delivered }.push((p_req_id, transfer_id));
                    }
                    PrefillerEvent::Rejected { .. } => {}
                }
            }
            for (id, ret) in done {
                self.machines[i].write_complete(self.now, id, ret);
            }
            if !progressed {
                return;
            }
        }
    }

    fn pump_all(&mut self) {
        for i in 0..self.machines.len() {
            self.pump(i);
        }
    }

    /// Moves the clock to the next deadline of any machine, if it falls before `limit`.
    fn tick(&mut self, limit: Instant) -> bool {
        let Some(next) = self.machines.iter().filter_map(|m| m.poll_timeout()).min() else { return false };
        if next > limit {
            return false;
        }
        self.now = self.now.max(next);
        let now = self.now;
        for m in self.machines.iter_mut() {
            m.handle_timeout(now);
        }
        self.pump_all();
        true
    }

    /// Moves the clock to `until`, firing every deadline on the way (expiries).
    fn advance(&mut self, until: Instant) {
        for _ in 0..10_000 {
            if !self.tick(until) {
                break;
            }
        }
        self.now = self.now.max(until);
        let now = self.now;
        for m in self.machines.iter_mut() {
            m.handle_timeout(now);
        }
        self.pump_all();
    }

    /// The next reply to `rid`, waiting on the simulated clock up to `limit`.
    fn reply(&mut self, rid: &[u8], limit: Duration) -> Option<Vec<u8>> {
        let until = self.now + limit;
        for _ in 0..10_000 {
            if let Some(p) = self.queues.get_mut(rid).and_then(|q| q.pop_front()) {
                return Some(p);
            }
            if !self.tick(until) {
                return None;
            }
        }
        None
    }

    /// Runs every deadline up to `limit` (expiries), then reports what was left unanswered.
    fn finish(
        mut self,
        limit: Duration,
        recorded_writes: Vec<(String, u64, u64)>,
        mut replies: Vec<String>,
        describe: impl Fn(&[u8]) -> String,
    ) -> DryRun {
        // A reply nobody recorded, before any later deadline (the players look for extra replies at once).
        let mut extra: Vec<(Vec<u8>, Vec<u8>)> =
            self.queues.iter().flat_map(|(rid, q)| q.iter().map(|p| (rid.clone(), p.clone()))).collect();
        extra.sort();
        for (rid, p) in extra {
            replies.push(format!(
                "{}: a reply after the recorded ones: {}",
                String::from_utf8_lossy(&rid),
                describe(&p)
            ));
        }
        let until = self.now + limit;
        for _ in 0..10_000 {
            if !self.tick(until) {
                break;
            }
        }
        let mut writes = self.writes;
        writes.sort();
        let mut recorded_writes = recorded_writes;
        recorded_writes.sort();
        DryRun { replies, writes, recorded_writes, freed: self.conns.into_iter().zip(self.freed).collect() }
    }
}

fn recorded_writes(t: &Conversation) -> Vec<(String, u64, u64)> {
    t.trace.header.transfer_engine_calls.iter().map(|c| (c.session.clone(), c.n, c.bytes)).collect()
}

/// Dry-runs the trace's prefiller side prepared as `scenario` says.
pub fn dry_run(t: &Conversation, model: &Model, scenario: &Scenario) -> Result<DryRun, DryRunError> {
    if t.revision.generation == 1 {
        dry_run_gen1(t, model, scenario)
    } else {
        dry_run_gen2(t, model, scenario)
    }
}

fn dry_run_gen2(t: &Conversation, model: &Model, scenario: &Scenario) -> Result<DryRun, DryRunError> {
    let profile = t.profile.clone().ok_or(DryRunError::NoProfile)?;
    let abort = Duration::from_secs_f64(model.abort_timeout_s);
    let mut machines: Vec<(String, Box<dyn PrefillerMachine>)> = vec![];
    for p in &t.prefillers {
        let (_, planner) = prefiller_planner(t, p, model, &profile)?;
        let mut core = PrefillerCore::new(profile.clone(), planner);
        core.set_abort_timeout(abort);
        core.set_kv_lease_duration(scenario.prefiller_kv_lease_s.map(Duration::from_secs_f64))?;
        machines.push((p.conn.clone(), Box::new(core)));
    }
    let mut sim = Sim::new(machines, scenario.fail_transfers);
    let now = sim.now;
    for m in sim.machines.iter_mut() {
        for tr in &scenario.transfers {
            m.request_allocated(now, &tr.p_req_id, &tr.transfer_id);
            if tr.ready == Ready::Before {
                m.request_finished(now, &tr.p_req_id, &tr.transfer_id, tr.blocks.clone());
            }
        }
    }
    sim.pump_all();
    let mut replay = Gen2Replay {
        t,
        sim,
        abort,
        actions: ReplyActions::new(scenario, &scenario.transfers),
        problems: vec![],
        dead: vec![],
        replies_seen: 0,
    };
    // The scenario's start (its transfers made ready): recorded `t`s count from here, as the players'
    // timelines do; a scenario with no delay and no heartbeats runs as fast as the events come.
    let start = now;
    let timed = scenario.pull_delay_s > 0.0 || !t.heartbeats.is_empty();
    let beats: HashMap<u64, usize> = t.heartbeats.iter().filter_map(|h| Some((h.seq?, h.index))).collect();
    let sends: HashMap<u64, usize> = t.exchanges.iter().map(|x| (x.send_seq(), x.index)).collect();
    let recorded: HashMap<u64, (usize, usize)> = t
        .exchanges
        .iter()
        .flat_map(|x| x.replies.iter().enumerate().map(move |(j, r)| (r.seq.unwrap_or(0), (x.index, j))))
        .collect();
    for ev in t.events() {
        let Event::Zmq(z) = ev else { continue };
        if z.side != Role::Decoder {
            continue;
        }
        if let (true, ZmqDir::Send, Some(at)) = (timed, z.dir, z.t) {
            replay.sim.advance(start + Duration::from_secs_f64(at.max(0.0)));
        }
        if let Some(&h) = beats.get(&z.seq) {
            replay.heartbeat(h);
        } else if let (ZmqDir::Send, Some(&k)) = (z.dir, sends.get(&z.seq)) {
            replay.send(k);
        } else if let (ZmqDir::Recv, Some(&(k, j))) = (z.dir, recorded.get(&z.seq)) {
            replay.receive(k, j);
        }
    }
    let Gen2Replay { sim, problems, .. } = replay;
    Ok(sim.finish(abort * 4, recorded_writes(t), problems, |b| show(t, b)))
}

/// A reply as the problems show it: decoded, or its bytes.
fn show(t: &Conversation, b: &[u8]) -> String {
    t.decode_reply(b).map(|r| mooncake_trace::reply::show_reply(&r)).unwrap_or_else(|| hex::encode(b))
}

/// The decoder side of a generation-2 trace replayed against the simulated prefillers.
struct Gen2Replay<'t> {
    t: &'t Conversation,
    sim: Sim,
    abort: Duration,
    actions: ReplyActions<'t>,
    problems: Vec<String>,
    /// Exchanges whose reply did not come (their later replies are not awaited).
    dead: Vec<usize>,
    replies_seen: usize,
}

impl Gen2Replay<'_> {
    fn rid(k: usize) -> Vec<u8> {
        format!("exchange {}", k + 1).into_bytes()
    }

    /// A lease heartbeat moves the deadlines it names; its reply is LEASE-REPLY's, not the setup's.
    fn heartbeat(&mut self, h: usize) {
        let hb = &self.t.heartbeats[h];
        let Some(i) = hb.prefiller.as_ref().and_then(|c| self.sim.conns.iter().position(|m| m == c)) else { return };
        let now = self.sim.now;
        let rid = format!("heartbeat {}", h + 1).into_bytes();
        self.sim.machines[i].handle_frames(now, vec![rid.clone(), hb.payload.bytes.clone()]);
        self.sim.pump(i);
        self.sim.queues.remove(&rid);
    }

    /// Exchange `k`'s recorded request, to the prefiller it was sent to.
    fn send(&mut self, k: usize) {
        let x = &self.t.exchanges[k];
        let Some(i) = x.prefiller.as_ref().and_then(|c| self.sim.conns.iter().position(|m| m == c)) else {
            let problem = format!("exchange {}: sent to {}, which no recorded prefiller listens at", k + 1, x.endpoint);
            self.problems.push(problem);
            self.dead.push(k);
            return;
        };
        let now = self.sim.now;
        self.sim.machines[i].handle_frames(now, vec![Self::rid(k), x.request.bytes.clone()]);
        self.sim.pump(i);
    }

    /// Exchange `k`'s reply, against its recorded reply `j`; then the scenario's actions keyed on the replies so
    /// far, as the players take them.
    fn receive(&mut self, k: usize, j: usize) {
        if self.dead.contains(&k) {
            return;
        }
        let t = self.t;
        let want = &t.exchanges[k].replies[j].payload.bytes;
        let Some(got) = self.sim.reply(&Self::rid(k), self.abort * 2) else {
            self.problems.push(format!("exchange {} reply {}: no reply (recorded: {})", k + 1, j + 1, show(t, want)));
            self.dead.push(k);
            return;
        };
        self.replies_seen += 1;
        match (t.decode_reply(&got), t.decode_reply(want)) {
            (Some(g), Some(w)) if mooncake_trace::checks::same_reply(&g, &w) => {}
            (Some(g), Some(w)) => self.problems.push(format!(
                "exchange {} reply {}: {}",
                k + 1,
                j + 1,
                mooncake_trace::reply::reply_diff(&g, &w)
            )),
            _ => self.problems.push(format!(
                "exchange {} reply {}: {} vs recorded {}",
                k + 1,
                j + 1,
                hex::encode(&got),
                hex::encode(want)
            )),
        }
        let now = self.sim.now;
        for step in self.actions.due(self.replies_seen) {
            for m in self.sim.machines.iter_mut() {
                match step {
                    Step::Ready(tr) => m.request_finished(now, &tr.p_req_id, &tr.transfer_id, tr.blocks.clone()),
                    Step::Forget => m.clear_layout_cache(),
                }
            }
        }
        self.sim.pump_all();
    }
}

fn dry_run_gen1(t: &Conversation, model: &Model, scenario: &Scenario) -> Result<DryRun, DryRunError> {
    let Gen1Setup { profile, abort, msgs, by_id, regions, workers, p_tp, d_conns, d_tp } =
        Gen1Setup::new(t, model, scenario)?;
    let mut machines: Vec<(String, Box<dyn PrefillerMachine>)> = vec![];
    for (conn, _, rank) in &workers {
        let l = layout(regions, model, p_tp, P_BASE, *rank);
        let planner = producer_with(
            *rank as i64,
            p_tp as i64,
            1,
            &model_config(model),
            &l,
            profile.plan_rules().map_err(SetupError::from)?,
            None,
        )
        .map_err(SetupError::from)?;
        let mut core = Gen1Prefiller::new(profile.clone(), planner);
        core.set_abort_timeout(abort);
        machines.push((conn.clone(), Box::new(core)));
    }
    let mut sim = Sim::new(machines, scenario.fail_transfers);
    let now = sim.now;
    for m in sim.machines.iter_mut() {
        for (id, tr) in &by_id {
            m.request_allocated(now, id, id);
            if tr.ready == Ready::Before {
                m.request_finished(now, id, id, tr.blocks.clone());
            }
        }
    }
    sim.pump_all();
    let text = |b: &[u8]| format!("{:?}", String::from_utf8_lossy(b));
    let mut problems = vec![];
    let mut replies_seen = 0usize;
    for (k, m) in msgs.iter().enumerate() {
        let Some(i) = workers.iter().position(|w| w.1 == m.endpoint) else {
            problems.push(format!("message {}: sent to {}, which no recorded prefiller listens at", k + 1, m.endpoint));
            continue;
        };
        let d = d_conns.iter().position(|c| *c == m.decoder).unwrap_or(0) as u64;
        let mut meta = m.meta.clone();
        meta.kv_caches_base_addr =
            layout(regions, model, d_tp, D_BASE, d).kv_caches_base_addr.into_iter().map(WireInt::from_u64).collect();
        let rid = format!("message {}", k + 1).into_bytes();
        let now = sim.now;
        sim.machines[i].handle_frames(now, vec![rid.clone(), vec![], profile.encode_request(&meta)?]);
        sim.pump(i);
        let got = sim.reply(&rid, abort * 2);
        match (&got, &m.reply) {
            (None, Some(want)) => problems.push(format!("message {}: no reply (recorded: {})", k + 1, text(want))),
            (Some(g), None) => {
                problems.push(format!("message {}: {} where vLLM's prefiller sent no reply", k + 1, text(g)))
            }
            (Some(g), Some(w)) if g != w => {
                problems.push(format!("message {}: {} vs recorded {}", k + 1, text(g), text(w)))
            }
            _ => {}
        }
        if got.is_some() {
            replies_seen += 1;
            let now = sim.now;
            for (id, tr) in &by_id {
                if tr.ready == Ready::AfterReply(replies_seen) {
                    for m in sim.machines.iter_mut() {
                        m.request_finished(now, id, id, tr.blocks.clone());
                    }
                }
            }
            sim.pump_all();
        }
    }
    Ok(sim.finish(abort * 4, recorded_writes(t), problems, |b| text(b)))
}
