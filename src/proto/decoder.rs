//! The decoder (KV consumer) side of the push protocol as a sans-IO state machine.
//!
//! Inputs: pulls from the scheduler, bootstrap `/query` results, replies on each exchange, socket failures,
//! and the time. Outputs ([`DecoderCore::poll_event`]): queries to make, exchanges to open (a new DEALER per
//! pull and per LAYOUT_MISS retry, one frame sent), exchanges to close, and per-request results; and when to
//! be woken ([`DecoderCore::poll_timeout`]).
//!
//! Generation 2 (`spec/PROTOCOL.md`, "Generation 2"); what differs between revisions (failure regimes,
//! which columns are sent, PP rank choice) comes from the revision's typed behaviour (`spec/PROTOCOL.md`,
//! "Decoder"). In outline: P ranks chosen by the TP/PP rules, the same bytes to each, the layout left out for a P address that
//! acknowledged the current `layout_id`, one resend with the layout after LAYOUT_MISS, results aggregated
//! across P workers, a request finished once every contacted worker settled it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::lease::{Heartbeat, LeaseBook, LeaseError, LeaseRequest};
use super::profile::WireProfile;
use crate::limits;
use crate::msgpack::WireInt;
use crate::spec::behaviour::{
    DecoderPpTargets, FailureFinish, FailureReport, FreeOnlySuccess, HeterogeneousTp, UnknownOkId,
    UnreportedAfterFinish,
};
use crate::typed::{MooncakeLeaseHeartbeat, MooncakeXferMetadata, MooncakeXferResponse, ReqBlocks, Status};

/// The decoder worker's registered KV layout (what a layout-carrying pull sends).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecoderLayout {
    /// Base address of each registered KV region.
    pub kv_caches_base_addr: Vec<WireInt>,
    /// Byte length of one block, per region.
    pub block_lens: Vec<WireInt>,
    /// Byte length of one block, per KV cache tensor (hybrid layouts).
    pub kv_block_lens: Vec<WireInt>,
    /// Names of the registered layers.
    pub registered_layer_names: Vec<String>,
    /// Layer index of each region.
    pub registered_layer_indices: Vec<WireInt>,
    /// KV group index of each region.
    pub registered_group_indices: Vec<WireInt>,
    /// Groups sharing their blocks, by shared group id.
    pub registered_shared_group_ids: Vec<Vec<WireInt>>,
    /// Row offset of each region inside its block.
    pub registered_row_offsets: Vec<WireInt>,
}

#[derive(Clone, Debug)]
/// What a decoder worker is: its address, its place in the TP/PP grid and its registered layout.
pub struct DecoderConfig {
    /// This worker's IP as sent in `remote_hostname`.
    pub hostname: String,
    /// This worker's transfer-engine RPC port (`remote_port`).
    pub te_port: u64,
    /// This worker's tensor-parallel rank.
    pub tp_rank: usize,
    /// The decoder's tensor-parallel size.
    pub tp_size: usize,
    /// This worker's pipeline-parallel rank.
    pub pp_rank: usize,
    /// The decoder's pipeline-parallel size.
    pub pp_size: usize,
    /// Its registered KV layout.
    pub layout: DecoderLayout,
    /// The id of this registration (odd, 63-bit; drawn by the driver). 0 turns layout caching off; it is
    /// forced to 0 for revisions without layout caching.
    pub layout_id: u64,
}

/// One request to pull.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    /// The decoder's request id.
    pub d_req_id: String,
    /// The id the prefiller knows the transfer by (`transfer_id` of `kv_transfer_params`).
    pub transfer_id: String,
    /// Destination block ids per KV group; empty when nothing is to be written (free-only).
    pub local_blocks: Vec<Vec<u64>>,
    /// The prefiller engine id (`remote_engine_id`).
    pub engine_id: String,
    /// The prefiller's bootstrap server (`remote_bootstrap_addr`).
    pub bootstrap_addr: String,
    /// Generation 1: `remote_host` and `remote_port` of `kv_transfer_params` (the prefiller engine's base
    /// port); generation 2 ignores it.
    pub remote: Option<(String, u64)>,
}

/// Engine id → TP rank → PP rank → worker address (the decoder's view of `/query`).
pub type EngineTable = BTreeMap<usize, BTreeMap<usize, String>>;

/// Why no prefiller worker can be chosen for a pull: the exception vLLM raises while choosing them. The texts
/// are vLLM's (`str(exception)`), compared with recorded traces: they must not change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TargetsError {
    /// The prefiller has more TP ranks than the decoder, which this revision refuses.
    #[error("Mooncake: Heterogeneous TP is not supported yet.")]
    HeterogeneousTp,
    /// The TP/PP planner raised; the text is its `err_msg` (vLLM's `str(exception)`, without the type).
    #[error("{}", .0.err_msg())]
    Plan(#[from] crate::plan::PlanError),
    /// The bootstrap table has no worker at a TP rank the planner chose.
    #[error("remote engine {engine} has no TP rank {rank}")]
    NoTpRank {
        /// The prefiller engine's id.
        engine: String,
        /// The missing TP rank.
        rank: usize,
    },
    /// The bootstrap table has no PP rank 0 at a chosen TP rank (revisions that pull from PP rank 0 only).
    #[error("remote engine {engine} has no PP rank 0 at TP rank {tp_rank}")]
    NoPpRankZero {
        /// The prefiller engine's id.
        engine: String,
        /// The TP rank without a PP rank 0.
        tp_rank: usize,
    },
}

/// A reply's `ok_reqs` names a request the exchange did not carry, and the revision raises for it: vLLM's
/// `KeyError`, as the exchange's failure reason (the text is compared with recorded traces).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("transfer failed: KeyError: '{0}'")]
pub(crate) struct UnknownOkIdError(pub(crate) String);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
/// Identifies one DEALER exchange the driver runs for the core (a socket it opens, sends on and closes).
pub struct ExchangeId(pub u64);

#[derive(Clone, Debug, PartialEq, Eq)]
/// What the decoder core asks its driver to do, or reports about a request.
pub enum DecoderEvent {
    /// `GET {bootstrap_addr}/query`, then [`DecoderCore::query_result`].
    Query {
        /// The bootstrap server to ask.
        bootstrap_addr: String,
    },
    /// Open a new DEALER to `addr` and send `payload` as one frame; deliver replies with
    /// [`DecoderCore::handle_reply`].
    Open {
        /// The exchange.
        id: ExchangeId,
        /// The prefiller worker's address.
        addr: String,
        /// The message to send.
        payload: Vec<u8>,
    },
    /// Close that DEALER (linger 0).
    Close {
        /// The exchange.
        id: ExchangeId,
    },
    /// Loading this request's KV failed; `invalid_blocks` are its destination blocks (empty when the revision
    /// reports the request in `failed_recving` instead: `failed_recving` is then true).
    Failed {
        /// The request.
        d_req_id: String,
        /// Why it failed.
        reason: String,
        /// Destination blocks to report invalid.
        invalid_blocks: Vec<u64>,
        /// Report the request in `failed_recving` instead.
        failed_recving: bool,
    },
    /// The request is reported finished receiving (also after a failure, where the revision does so).
    Finished {
        /// The request.
        d_req_id: String,
    },
    /// The request will never be reported: vLLM leaves it waiting for remote KV (a failure where the revision
    /// reports none, a FINISH that left it unmentioned, a prefiller that cannot be chosen). The core drops its
    /// state; `reason` says why.
    Unsettled {
        /// The request.
        d_req_id: String,
        /// Why it will not be reported.
        reason: String,
    },
}

#[derive(Debug)]
struct PullState {
    transfer_id: String,
    local_blocks: Vec<Vec<u64>>,
    /// Settlements (or, where failures do not settle, ok mentions) still needed before it finishes.
    tasks_left: usize,
    /// Its failure was reported (or, where failures are not reported, happened).
    failed: bool,
}

impl PullState {
    fn has_blocks(&self) -> bool {
        self.local_blocks.iter().any(|g| !g.is_empty())
    }

    /// The `Failed` event of this pull, when it had blocks and the revision reports failures at all: its
    /// blocks as invalid, or none when the failure goes to `failed_recving`.
    fn failed_event(
        &self,
        d_req_id: &str,
        reason: &str,
        failed_recving: bool,
        report: FailureReport,
    ) -> Option<DecoderEvent> {
        if !self.has_blocks() || report == FailureReport::None {
            return None;
        }
        Some(DecoderEvent::Failed {
            d_req_id: d_req_id.to_string(),
            reason: reason.to_string(),
            invalid_blocks: if failed_recving { vec![] } else { self.local_blocks.iter().flatten().copied().collect() },
            failed_recving,
        })
    }
}

#[derive(Debug)]
struct Exchange {
    addr: String,
    /// Requests of this exchange not yet settled by it, in pull order.
    reqs: Vec<String>,
    /// Every request of its message.
    all: Vec<String>,
    include_layout: bool,
    deadline: Instant,
}

/// A heartbeat's DEALER, open until its reply or its receive timeout.
#[derive(Debug)]
struct HeartbeatExchange {
    deadline: Instant,
}

/// What became of the decoder's lease heartbeats (0.34.0), for tests and logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseStats {
    /// Heartbeats sent (one per prefiller worker).
    pub sent: u64,
    /// Answered with a status other than ERROR (renewed).
    pub renewed: u64,
    /// Answered ERROR (the prefiller has no lease duration, or predates leases).
    pub rejected: u64,
    /// The last ERROR's `err_msg` (vLLM logs the first one).
    pub last_rejection: Option<String>,
    /// No (decodable) reply within the reply timeout, or the socket failed.
    pub unanswered: u64,
    /// Not sent: the engine was not in the bootstrap table, or no worker could be chosen.
    pub skipped: u64,
}

/// The generation-2 decoder worker as a sans-IO state machine: pulls in, sockets to open and requests settled out.
pub struct DecoderCore {
    profile: WireProfile,
    cfg: DecoderConfig,
    recv_timeout: Duration,
    engines: HashMap<String, EngineTable>,
    /// Pulls waiting for a bootstrap query, by bootstrap address.
    waiting: HashMap<String, Vec<PullRequest>>,
    pulls: HashMap<String, PullState>,
    exchanges: BTreeMap<ExchangeId, Exchange>,
    next_exchange: u64,
    acked: HashSet<String>,
    events: VecDeque<DecoderEvent>,
    /// Leased requests and the renewal clock (0.34.0, with a lease duration set).
    lease: Option<LeaseBook>,
    /// Open heartbeat DEALERs (ids from the same counter as pulls).
    heartbeats: BTreeMap<ExchangeId, HeartbeatExchange>,
    /// Heartbeats waiting for a bootstrap query, by bootstrap address.
    heartbeats_waiting: HashMap<String, Vec<Heartbeat>>,
    lease_stats: LeaseStats,
}

impl DecoderCore {
    /// A decoder for `profile`'s revision with this identity and layout (the layout id is forced to 0 where the revision does not cache layouts).
    pub fn new(profile: WireProfile, mut cfg: DecoderConfig) -> Self {
        if profile.layout_caching.is_none() {
            cfg.layout_id = 0;
        }
        let recv_timeout = profile.abort_timeout + Duration::from_secs(60);
        DecoderCore {
            profile,
            cfg,
            recv_timeout,
            engines: HashMap::new(),
            waiting: HashMap::new(),
            pulls: HashMap::new(),
            exchanges: BTreeMap::new(),
            next_exchange: 1,
            acked: HashSet::new(),
            events: VecDeque::new(),
            lease: None,
            heartbeats: BTreeMap::new(),
            heartbeats_waiting: HashMap::new(),
            lease_stats: LeaseStats::default(),
        }
    }

    /// Sets `kv_lease_duration` (`None`: off, the default). With it, requests [`DecoderCore::announce`]d are
    /// renewed until their pull settles (`spec/PROTOCOL.md#kv-leases`). Only revisions with
    /// `behaviour.lease_renewal` read it.
    pub fn set_kv_lease_duration(&mut self, d: Option<Duration>) -> Result<(), LeaseError> {
        self.lease = match d {
            None => None,
            Some(d) => {
                let rule = self
                    .profile
                    .lease_renewal
                    .clone()
                    .ok_or_else(|| LeaseError::NotInRevision(self.profile.name().to_string()))?;
                if d.is_zero() {
                    return Err(LeaseError::NotPositive(d));
                }
                Some(LeaseBook::new(rule, d))
            }
        };
        Ok(())
    }

    /// Requests arrived at the decoder's scheduler (vLLM's `on_new_request`), before they are pulled: with a
    /// lease duration, their leases are renewed from now until their pulls settle. Without one, nothing.
    pub fn announce(&mut self, now: Instant, reqs: Vec<LeaseRequest>) {
        let Some(book) = self.lease.as_mut() else { return };
        for r in reqs {
            book.add(r);
        }
        self.renew_due(now);
    }

    /// The request ended at the scheduler (vLLM's `request_finished`): its lease is no longer renewed.
    pub fn release(&mut self, d_req_id: &str) {
        if let Some(book) = self.lease.as_mut() {
            book.remove(d_req_id);
        }
    }

    /// Reports a request finished receiving; its lease ends with it.
    fn finished(&mut self, d_req_id: String) {
        self.release(&d_req_id);
        self.events.push_back(DecoderEvent::Finished { d_req_id });
    }

    /// Sends the heartbeats that are due: one per prefiller engine, to every worker its pull would use.
    fn renew_due(&mut self, now: Instant) {
        let due = match self.lease.as_mut() {
            Some(book) => book.take_due(now),
            None => return,
        };
        for hb in due {
            if self.engines.contains_key(&hb.engine_id) {
                self.send_heartbeat(now, &hb);
                continue;
            }
            // vLLM queries the bootstrap server for a heartbeat too (the requests may still be queued), sharing
            // a query already running for that address.
            let addr = hb.bootstrap_addr.clone();
            if !self.query_pending(&addr) {
                self.events.push_back(DecoderEvent::Query { bootstrap_addr: addr.clone() });
            }
            self.heartbeats_waiting.entry(addr).or_default().push(hb);
        }
    }

    fn query_pending(&self, bootstrap_addr: &str) -> bool {
        self.waiting.contains_key(bootstrap_addr) || self.heartbeats_waiting.contains_key(bootstrap_addr)
    }

    fn send_heartbeat(&mut self, now: Instant, hb: &Heartbeat) {
        let (Ok(addrs), Some(book)) = (self.targets(&hb.engine_id), self.lease.as_ref()) else {
            self.lease_stats.skipped += 1;
            return;
        };
        let deadline = now + book.reply_timeout();
        let msg = MooncakeLeaseHeartbeat { lease_transfer_ids: hb.transfer_ids.clone() };
        let Ok(payload) = self.profile.encode_heartbeat(&msg) else {
            self.lease_stats.skipped += 1;
            return;
        };
        for addr in addrs {
            let id = ExchangeId(self.next_exchange);
            self.next_exchange += 1;
            self.lease_stats.sent += 1;
            self.events.push_back(DecoderEvent::Open { id, addr, payload: payload.clone() });
            self.heartbeats.insert(id, HeartbeatExchange { deadline });
        }
    }

    /// A heartbeat's reply: renewed, or rejected (vLLM logs it once); the DEALER closes either way.
    fn heartbeat_reply(&mut self, id: ExchangeId, payload: &[u8]) {
        match self.profile.decode_response(payload) {
            Ok(r) if r.status == Status::ERROR => {
                self.lease_stats.rejected += 1;
                self.lease_stats.last_rejection = r.err_msg.clone();
            }
            Ok(_) => self.lease_stats.renewed += 1,
            Err(_) => self.lease_stats.unanswered += 1,
        }
        self.close_heartbeat(id);
    }

    fn close_heartbeat(&mut self, id: ExchangeId) {
        if self.heartbeats.remove(&id).is_some() {
            self.events.push_back(DecoderEvent::Close { id });
        }
    }

    /// What became of the heartbeats so far.
    pub fn lease_stats(&self) -> &LeaseStats {
        &self.lease_stats
    }

    /// Requests whose lease is being renewed.
    pub fn leased_requests(&self) -> usize {
        self.lease.as_ref().map_or(0, LeaseBook::len)
    }

    /// Overrides the receive timeout (vLLM: `(VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT + 60) s`).
    pub fn set_recv_timeout(&mut self, t: Duration) {
        self.recv_timeout = t;
    }
    /// The layout id this worker sends (0: no caching).
    pub fn layout_id(&self) -> u64 {
        self.cfg.layout_id
    }

    /// A new registration of the KV caches: new layout and id; every acknowledgement is forgotten.
    pub fn reregister(&mut self, layout: DecoderLayout, layout_id: u64) {
        self.cfg.layout = layout;
        self.cfg.layout_id = if self.profile.layout_caching.is_some() { layout_id } else { 0 };
        self.acked.clear();
    }

    /// Pulls a batch of requests (one scheduler step). A free-only pull (no blocks) ends its request's lease:
    /// it never reaches `finished_recving`.
    pub fn pull(&mut self, now: Instant, reqs: Vec<PullRequest>) {
        let mut by_engine: BTreeMap<String, Vec<PullRequest>> = BTreeMap::new();
        for r in reqs {
            if r.local_blocks.iter().all(Vec::is_empty) {
                self.release(&r.d_req_id);
            }
            by_engine.entry(r.engine_id.clone()).or_default().push(r);
        }
        for (engine, reqs) in by_engine {
            if self.engines.contains_key(&engine) {
                self.receive(now, &engine, reqs);
            } else {
                let addr = reqs[0].bootstrap_addr.clone();
                let first = !self.query_pending(&addr);
                self.waiting.entry(addr.clone()).or_default().extend(reqs);
                if first {
                    self.events.push_back(DecoderEvent::Query { bootstrap_addr: addr });
                }
            }
        }
        // The same scheduler step renews leases, after handing over the pulls.
        self.renew_due(now);
    }

    /// The answer to a `/query`: the parsed table, or why it failed. Engines are cached and never refreshed.
    pub fn query_result(
        &mut self,
        now: Instant,
        bootstrap_addr: &str,
        result: Result<BTreeMap<String, EngineTable>, QueryError>,
    ) {
        if let Ok(table) = result {
            for (engine, t) in table {
                self.engines.insert(engine, t);
            }
        }
        let reqs = self.waiting.remove(bootstrap_addr).unwrap_or_default();
        let mut by_engine: BTreeMap<String, Vec<PullRequest>> = BTreeMap::new();
        for r in reqs {
            by_engine.entry(r.engine_id.clone()).or_default().push(r);
        }
        for (engine, reqs) in by_engine {
            if self.engines.contains_key(&engine) {
                self.receive(now, &engine, reqs);
            } else {
                let reason = format!("remote engine_id {engine} not found from bootstrap server {bootstrap_addr}");
                for r in reqs {
                    self.fail_unregistered(r, &reason);
                }
            }
        }
        for hb in self.heartbeats_waiting.remove(bootstrap_addr).unwrap_or_default() {
            if self.engines.contains_key(&hb.engine_id) {
                self.send_heartbeat(now, &hb);
            } else {
                // vLLM skips the renewal with a warning; the pull reports the engine missing.
                self.lease_stats.skipped += 1;
            }
        }
    }

    /// A pull that was never sent (its engine is not registered, too many pulls in flight).
    fn fail_unregistered(&mut self, r: PullRequest, reason: &str) {
        if self.profile.rules.failure_report == FailureReport::None {
            self.events.push_back(DecoderEvent::Unsettled { d_req_id: r.d_req_id, reason: reason.to_string() });
            return;
        }
        let blocks: Vec<u64> = r.local_blocks.iter().flatten().copied().collect();
        if !blocks.is_empty() {
            let failed_recving = self.reports_failed_recving();
            self.events.push_back(DecoderEvent::Failed {
                d_req_id: r.d_req_id.clone(),
                reason: reason.to_string(),
                invalid_blocks: if failed_recving { vec![] } else { blocks },
                failed_recving,
            });
            self.finished(r.d_req_id);
        }
    }

    /// With several KV groups, 0.31.0 on report a failed request in `failed_recving`, not by its blocks.
    fn reports_failed_recving(&self) -> bool {
        let groups: std::collections::BTreeSet<i64> =
            self.cfg.layout.registered_group_indices.iter().filter_map(|g| g.as_i64()).filter(|g| *g >= 0).collect();
        self.profile.rules.failure_report == FailureReport::InvalidBlocksOrFailedRecving && groups.len() > 1
    }

    /// The prefiller worker addresses to pull from, by the TP/PP rules.
    fn targets(&self, engine: &str) -> Result<Vec<String>, TargetsError> {
        let table = &self.engines[engine];
        let remote_tp = table.len();
        if self.profile.rules.heterogeneous_tp == HeterogeneousTp::RefusedWhenReady && remote_tp > self.cfg.tp_size {
            return Err(TargetsError::HeterogeneousTp);
        }
        let topo = crate::plan::TransferTopology::new(self.cfg.tp_rank as i64, self.cfg.tp_size as i64, 1, false, 1)?;
        let ranks: Vec<usize> =
            topo.handshake_target_ranks(remote_tp as i64, 1)?.into_iter().map(|r| r as usize).collect();
        let mut addrs = vec![];
        for r in ranks {
            let pp = table.get(&r).ok_or_else(|| TargetsError::NoTpRank { engine: engine.to_string(), rank: r })?;
            if self.profile.rules.decoder_pp_targets == DecoderPpTargets::PpRankZero {
                addrs.push(
                    pp.get(&0)
                        .ok_or_else(|| TargetsError::NoPpRankZero { engine: engine.to_string(), tp_rank: r })?
                        .clone(),
                );
            } else if self.cfg.pp_size == pp.len() && pp.contains_key(&self.cfg.pp_rank) {
                addrs.push(pp[&self.cfg.pp_rank].clone());
            } else {
                addrs.extend(pp.values().cloned());
            }
        }
        Ok(addrs)
    }

    fn receive(&mut self, now: Instant, engine: &str, reqs: Vec<PullRequest>) {
        let addrs = match self.targets(engine) {
            Ok(a) => a,
            Err(e) => {
                // vLLM raises while choosing prefiller workers, before any report: the requests wait forever.
                for r in reqs {
                    self.events.push_back(DecoderEvent::Unsettled {
                        d_req_id: r.d_req_id,
                        reason: format!("no prefiller worker can be chosen: {e}"),
                    });
                }
                return;
            }
        };
        if self.exchanges.len() + addrs.len() > limits::MAX_DECODER_EXCHANGES {
            for r in reqs {
                self.fail_unregistered(r, "transfer failed: too many pulls in flight");
            }
            return;
        }
        let ids: Vec<String> = reqs.iter().map(|r| r.d_req_id.clone()).collect();
        for r in reqs {
            self.pulls.insert(
                r.d_req_id,
                PullState {
                    transfer_id: r.transfer_id,
                    local_blocks: r.local_blocks,
                    tasks_left: addrs.len(),
                    failed: false,
                },
            );
        }
        for addr in addrs {
            let include_layout = self.cfg.layout_id == 0 || !self.acked.contains(&addr);
            self.open(now, addr, ids.clone(), include_layout);
        }
    }

    fn metadata(&self, reqs: &[String], include_layout: bool) -> MooncakeXferMetadata {
        let c = &self.cfg;
        let mut m = MooncakeXferMetadata {
            remote_hostname: c.hostname.clone(),
            remote_port: c.te_port.into(),
            remote_tp_size: c.tp_size.into(),
            remote_tp_rank: c.tp_rank.into(),
            remote_pp_size: c.pp_size.into(),
            layout_id: c.layout_id.into(),
            ..Default::default()
        };
        for id in reqs {
            let Some(p) = self.pulls.get(id) else { continue };
            let blocks = p.local_blocks.iter().map(|g| g.iter().map(|b| WireInt::from(*b)).collect()).collect();
            m.req_blocks.push((id.clone(), ReqBlocks { transfer_id: p.transfer_id.clone(), blocks }));
        }
        if include_layout {
            // Only the columns this revision's request has: an older decoder cannot say the others.
            let l = &c.layout;
            let has = |f: &str| self.profile.request_has(f);
            m.kv_caches_base_addr = l.kv_caches_base_addr.clone();
            if has("block_lens") {
                m.block_lens = l.block_lens.clone();
            }
            if has("kv_block_lens") {
                m.kv_block_lens = l.kv_block_lens.clone();
            }
            if has("registered_layer_names") {
                m.registered_layer_names = l.registered_layer_names.clone();
                m.registered_layer_indices = l.registered_layer_indices.clone();
            }
            if has("registered_group_indices") {
                m.registered_group_indices = l.registered_group_indices.clone();
            }
            if has("registered_shared_group_ids") {
                m.registered_shared_group_ids = l.registered_shared_group_ids.clone();
                m.registered_row_offsets = l.registered_row_offsets.clone();
            }
        }
        if !self.profile.request_has("remote_pp_size") {
            m.remote_pp_size = 1u64.into();
        }
        m
    }

    fn open(&mut self, now: Instant, addr: String, reqs: Vec<String>, include_layout: bool) {
        // A request an earlier exchange of the same pull already settled (one that failed before it was sent)
        // is not pulled from the other workers; with none left there is nothing to open.
        let reqs: Vec<String> = reqs.into_iter().filter(|r| self.pulls.contains_key(r)).collect();
        if reqs.is_empty() {
            return;
        }
        let payload = match self.profile.encode_metadata(&self.metadata(&reqs, include_layout)) {
            Ok(p) => p,
            Err(e) => {
                // The layout cannot be said in this revision (e.g. a field it lacks): fail locally.
                let id = ExchangeId(self.next_exchange);
                self.next_exchange += 1;
                self.exchanges.insert(id, Exchange { addr, all: reqs.clone(), reqs, include_layout, deadline: now });
                self.fail_exchange(id, &format!("transfer failed: {e}"));
                return;
            }
        };
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        self.events.push_back(DecoderEvent::Open { id, addr: addr.clone(), payload });
        self.exchanges
            .insert(id, Exchange { addr, all: reqs.clone(), reqs, include_layout, deadline: now + self.recv_timeout });
    }

    /// A frame received on an exchange's DEALER.
    pub fn handle_reply(&mut self, now: Instant, id: ExchangeId, payload: &[u8]) {
        if self.heartbeats.contains_key(&id) {
            return self.heartbeat_reply(id, payload);
        }
        if !self.exchanges.contains_key(&id) {
            return;
        }
        let r = match self.profile.decode_response(payload) {
            Ok(r) => r,
            Err(e) => return self.fail_exchange(id, &format!("transfer failed: {}", e.msgspec_message())),
        };
        let miss = self.profile.layout_caching.is_some() && r.status == Status::LAYOUT_MISS;
        if miss {
            let x = &self.exchanges[&id];
            self.acked.remove(&x.addr);
            if !x.include_layout {
                // Resend the requests this peer has not settled, with the layout, on a new DEALER.
                let x = self.exchanges.remove(&id).expect("exists");
                self.events.push_back(DecoderEvent::Close { id });
                self.open(now, x.addr, x.reqs, true);
                return;
            }
        }
        if miss || r.status == Status::ERROR {
            let reason = r.err_msg.clone().unwrap_or_else(|| "transfer error".into());
            return self.fail_exchange(id, &reason);
        }
        let addr = self.exchanges[&id].addr.clone();
        if self.cfg.layout_id != 0 && r.layout_id == WireInt::from(self.cfg.layout_id) {
            self.acked.insert(addr);
        }
        if let Err(e) = self.settle(id, &r) {
            return self.fail_exchange(id, &e.to_string());
        }
        if self.profile.is_terminal(r.status) {
            let left = self.exchanges.get(&id).map(|x| x.reqs.clone()).unwrap_or_default();
            if self.profile.rules.unreported_after_finish == UnreportedAfterFinish::Failed {
                self.fail_reqs(id, &left, "peer finished without reporting a transfer result");
            }
            self.close(id, "the prefiller finished without reporting it");
        } else if let Some(x) = self.exchanges.get_mut(&id) {
            x.deadline = now + self.recv_timeout;
        }
    }

    /// The exchange's socket failed (connect error, send error).
    pub fn exchange_failed(&mut self, id: ExchangeId, error: &str) {
        if self.heartbeats.contains_key(&id) {
            self.lease_stats.unanswered += 1;
            return self.close_heartbeat(id);
        }
        if self.exchanges.contains_key(&id) {
            self.fail_exchange(id, &format!("transfer failed: {error}"));
        }
    }

    /// One reply's id lists. `Err` is an exception vLLM raises while reading them (an unknown ok id).
    fn settle(&mut self, id: ExchangeId, r: &MooncakeXferResponse) -> Result<(), UnknownOkIdError> {
        let rules = self.profile.rules.clone();
        let per_peer = rules.failure_finish == FailureFinish::WhenEveryPeerSettled;
        let all = self.exchanges[&id].all.clone();
        // 0.33.0 reads err_reqs first, older releases ok_reqs first.
        if per_peer {
            self.settle_err(id, r);
        }
        for d in r.ok_reqs.iter().flatten() {
            let d = &d.to_owned();
            if !all.contains(d) {
                match rules.unknown_ok_id {
                    UnknownOkId::Ignored => continue,
                    UnknownOkId::FailsExchange => return Err(UnknownOkIdError(d.clone())),
                }
            }
            if per_peer {
                if self.take(id, std::slice::from_ref(d)) == 1 {
                    self.complete_task(d);
                }
                continue;
            }
            // Before 0.33.0 every mention counts, and a failed request's later mentions are skipped.
            self.take(id, std::slice::from_ref(d));
            if self.pulls.get(d).is_some_and(|p| !p.failed) {
                self.complete_task(d);
            }
        }
        if !per_peer {
            self.settle_err(id, r);
        }
        Ok(())
    }

    fn settle_err(&mut self, id: ExchangeId, r: &MooncakeXferResponse) {
        if let Some(err) = &r.err_reqs {
            let reason = r.err_msg.clone().unwrap_or_else(|| "unknown error".into());
            let all = &self.exchanges[&id].all;
            let mine: Vec<String> = err.iter().filter(|d| all.iter().any(|a| a == d)).map(String::from).collect();
            self.fail_reqs(id, &mine, &reason);
        }
    }

    /// Removes requests from an exchange's unsettled list; returns how many it still held.
    fn take(&mut self, id: ExchangeId, reqs: &[String]) -> usize {
        let Some(x) = self.exchanges.get_mut(&id) else { return 0 };
        let before = x.reqs.len();
        x.reqs.retain(|d| !reqs.contains(d));
        before - x.reqs.len()
    }

    /// The whole exchange failed (ERROR, LAYOUT_MISS after a full pull, an undecodable reply, a socket error,
    /// the receive timeout): 0.33.0 fails what this peer has not settled, older releases every request of the
    /// message.
    fn fail_exchange(&mut self, id: ExchangeId, reason: &str) {
        let Some(x) = self.exchanges.get(&id) else { return };
        let ids = if self.profile.rules.failure_finish == FailureFinish::WhenEveryPeerSettled {
            x.reqs.clone()
        } else {
            x.all.clone()
        };
        self.fail_reqs(id, &ids, reason);
        self.close(id, reason);
    }

    /// vLLM `_handle_failed_recv`, by the revision's `failure_report` and `failure_finish`.
    fn fail_reqs(&mut self, id: ExchangeId, reqs: &[String], reason: &str) {
        let rules = self.profile.rules.clone();
        let failed_recving = self.reports_failed_recving();
        for d in reqs {
            let held = self.take(id, std::slice::from_ref(d)) == 1;
            let Some(p) = self.pulls.get_mut(d) else { continue };
            match rules.failure_finish {
                // Nothing is reported; this peer will never settle it (the state goes when its exchanges end).
                FailureFinish::Never => {}
                FailureFinish::AtFirstFailure => {
                    if p.failed {
                        continue;
                    }
                    p.failed = true;
                    if let Some(failed) = p.failed_event(d, reason, failed_recving, rules.failure_report) {
                        self.events.push_back(failed);
                        self.finished(d.clone());
                    }
                    // Kept (failed) while other exchanges of the pull may still mention it.
                    if !self.exchanges.values().any(|o| o.all.contains(d)) {
                        self.pulls.remove(d);
                    }
                }
                FailureFinish::WhenEveryPeerSettled => {
                    if !held {
                        continue;
                    }
                    if !p.failed {
                        p.failed = true;
                        if let Some(failed) = p.failed_event(d, reason, failed_recving, rules.failure_report) {
                            self.events.push_back(failed);
                        }
                    }
                    self.complete_task(d);
                }
            }
        }
    }

    fn complete_task(&mut self, d: &str) {
        let Some(p) = self.pulls.get_mut(d) else { return };
        p.tasks_left = p.tasks_left.saturating_sub(1);
        if p.tasks_left == 0 {
            let p = self.pulls.remove(d).expect("present");
            let report =
                p.has_blocks() || (!p.failed && self.profile.rules.free_only_success == FreeOnlySuccess::Finished);
            if report {
                self.finished(d.to_string());
            }
        }
    }

    /// Ends an exchange. A request no open exchange can settle any more never will: it is reported unsettled
    /// (vLLM leaves it waiting) and forgotten.
    fn close(&mut self, id: ExchangeId, reason: &str) {
        let Some(x) = self.exchanges.remove(&id) else { return };
        self.events.push_back(DecoderEvent::Close { id });
        for d in &x.all {
            if !self.pulls.contains_key(d) || self.exchanges.values().any(|o| o.reqs.contains(d)) {
                continue;
            }
            let p = self.pulls.remove(d).expect("present");
            if !p.failed || self.profile.rules.failure_finish == FailureFinish::Never {
                self.events.push_back(DecoderEvent::Unsettled { d_req_id: d.clone(), reason: reason.to_string() });
            }
        }
    }

    /// Fails exchanges that waited longer than the receive timeout for a reply, closes heartbeats that got no
    /// reply in time, and sends the heartbeats that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<ExchangeId> = self.exchanges.iter().filter(|(_, x)| x.deadline <= now).map(|(k, _)| *k).collect();
        for id in due {
            self.fail_exchange(id, "transfer failed: Resource temporarily unavailable");
        }
        let late: Vec<ExchangeId> =
            self.heartbeats.iter().filter(|(_, x)| x.deadline <= now).map(|(k, _)| *k).collect();
        for id in late {
            self.lease_stats.unanswered += 1;
            self.close_heartbeat(id);
        }
        self.renew_due(now);
    }

    /// When [`DecoderCore::handle_timeout`] is next due: an open exchange's or heartbeat's deadline, or the
    /// next renewal.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let renewal = self.lease.as_ref().and_then(LeaseBook::due);
        self.exchanges
            .values()
            .map(|x| x.deadline)
            .chain(self.heartbeats.values().map(|x| x.deadline))
            .chain(renewal)
            .min()
    }
    /// The next thing to do or report, if any.
    pub fn poll_event(&mut self) -> Option<DecoderEvent> {
        self.events.pop_front()
    }

    /// Requests not yet settled by every worker (including those waiting for a bootstrap query).
    pub fn pending_pulls(&self) -> usize {
        self.pulls.len() + self.waiting.values().map(Vec::len).sum::<usize>()
    }
    /// DEALER exchanges open (pulls and heartbeats).
    pub fn open_exchanges(&self) -> usize {
        self.exchanges.len() + self.heartbeats.len()
    }
    /// Whether the prefiller worker at `addr` has answered a pull (so it has this worker's layout).
    pub fn is_acked(&self, addr: &str) -> bool {
        self.acked.contains(addr)
    }
}

/// Why a `GET /query` brought no engine table ([`parse_query`], [`DecoderCore::query_result`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The query got no answer, or no JSON body: the I/O layer's description (connection refused, an HTTP
    /// status, a body that is not JSON).
    #[error("{0}")]
    Unanswered(String),
    /// A part of the body that must be a JSON object (`query body`, `pp table`) is not one.
    #[error("{0} is not an object")]
    NotAnObject(&'static str),
    /// An engine entry without this item (`engine_id`, `worker_addr`).
    #[error("{0} missing")]
    Missing(&'static str),
    /// A TP or PP rank key that is not an integer.
    #[error("{kind} rank {rank:?} is not an integer")]
    BadRank {
        /// `tp` or `pp`.
        kind: &'static str,
        /// The key.
        rank: String,
    },
    /// A worker address that is not a string.
    #[error("address is not a string")]
    AddressNotString,
}

/// Parses a `GET /query` body into engine id → the decoder's engine table (the DP keys are ignored, as vLLM's
/// decoder ignores them).
pub fn parse_query(body: &serde_json::Value) -> Result<BTreeMap<String, EngineTable>, QueryError> {
    let mut out = BTreeMap::new();
    for (_, e) in body.as_object().ok_or(QueryError::NotAnObject("query body"))? {
        let id = e.get("engine_id").and_then(|v| v.as_str()).ok_or(QueryError::Missing("engine_id"))?.to_string();
        let mut t = EngineTable::new();
        for (tp, pps) in e.get("worker_addr").and_then(|v| v.as_object()).ok_or(QueryError::Missing("worker_addr"))? {
            let tp: usize = tp.parse().map_err(|_| QueryError::BadRank { kind: "tp", rank: tp.clone() })?;
            let mut m = BTreeMap::new();
            for (pp, a) in pps.as_object().ok_or(QueryError::NotAnObject("pp table"))? {
                m.insert(
                    pp.parse().map_err(|_| QueryError::BadRank { kind: "pp", rank: pp.clone() })?,
                    a.as_str().ok_or(QueryError::AddressNotString)?.to_string(),
                );
            }
            t.insert(tp, m);
        }
        out.insert(id, t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A planner exception reaches the decoder's reason as vLLM's `str(exception)`: the message without the
    /// exception type the planner's own `Display` puts first.
    #[test]
    fn a_planner_exception_reads_as_its_message() {
        let e = crate::plan::TransferTopology::new(0, 0, 1, false, 1).expect_err("tp_size 0 divides by zero");
        let t = TargetsError::from(e.clone());
        assert_eq!(t.to_string(), e.err_msg());
        assert_ne!(t.to_string(), e.to_string());
        assert_eq!(std::error::Error::source(&t).map(|s| s.to_string()), Some(e.to_string()));
    }
}
