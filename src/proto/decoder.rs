//! The decoder (KV consumer) side of the push protocol as a sans-IO state machine.
//!
//! Inputs: pulls from the scheduler, bootstrap `/query` results, replies on each exchange, socket failures,
//! and the time. Outputs ([`DecoderCore::poll_event`]): queries to make, exchanges to open (a new DEALER per
//! pull and per LAYOUT_MISS retry, one frame sent), exchanges to close, and per-request results; and when to
//! be woken ([`DecoderCore::poll_timeout`]).
//!
//! Behaviour follows vLLM 0.33.0's `receive_kv` and `receive_kv_from_single_worker` (push-protocol reference
//! §6, §11): P ranks chosen by the TP/PP rules, the same bytes to each, the layout left out for a P address that
//! acknowledged the current `layout_id`, one resend with the layout after LAYOUT_MISS, results aggregated
//! across P workers, a request finished once every contacted worker settled it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::profile::WireProfile;
use crate::limits;
use crate::msgpack::WireInt;
use crate::typed::{MooncakeXferMetadata, MooncakeXferResponse, ReqBlocks, Status};

/// The decoder worker's registered KV layout (what a layout-carrying pull sends).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecoderLayout {
    pub kv_caches_base_addr: Vec<WireInt>,
    pub block_lens: Vec<WireInt>,
    pub kv_block_lens: Vec<WireInt>,
    pub registered_layer_names: Vec<String>,
    pub registered_layer_indices: Vec<WireInt>,
    pub registered_group_indices: Vec<WireInt>,
    pub registered_shared_group_ids: Vec<Vec<WireInt>>,
    pub registered_row_offsets: Vec<WireInt>,
}

#[derive(Clone, Debug)]
pub struct DecoderConfig {
    /// This worker's IP as sent in `remote_hostname`.
    pub hostname: String,
    /// This worker's transfer-engine RPC port (`remote_port`).
    pub te_port: u64,
    pub tp_rank: usize,
    pub tp_size: usize,
    pub pp_rank: usize,
    pub pp_size: usize,
    pub layout: DecoderLayout,
    /// The id of this registration (odd, 63-bit; drawn by the driver). 0 turns layout caching off; it is
    /// forced to 0 for revisions without layout caching.
    pub layout_id: u64,
}

/// One request to pull.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    pub d_req_id: String,
    pub transfer_id: String,
    /// Destination block ids per KV group; empty when nothing is to be written (free-only).
    pub local_blocks: Vec<Vec<u64>>,
    pub engine_id: String,
    pub bootstrap_addr: String,
}

/// Engine id → TP rank → PP rank → worker address (the decoder's view of `/query`).
pub type EngineTable = BTreeMap<usize, BTreeMap<usize, String>>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExchangeId(pub u64);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecoderEvent {
    /// `GET {bootstrap_addr}/query`, then [`DecoderCore::query_result`].
    Query { bootstrap_addr: String },
    /// Open a new DEALER to `addr` and send `payload` as one frame; deliver replies with
    /// [`DecoderCore::handle_reply`].
    Open { id: ExchangeId, addr: String, payload: Vec<u8> },
    /// Close that DEALER (linger 0).
    Close { id: ExchangeId },
    /// Loading this request's KV failed; `invalid_blocks` are its destination blocks.
    Failed { d_req_id: String, reason: String, invalid_blocks: Vec<u64> },
    /// Every contacted prefiller worker settled this request (also after a failure): its blocks may be used.
    Finished { d_req_id: String },
    /// A FINISH left this request unreported and the revision leaves it waiting (vLLM ≤ 0.32.0); the core
    /// drops its state.
    Unsettled { d_req_id: String },
}

#[derive(Debug)]
struct PullState {
    transfer_id: String,
    local_blocks: Vec<Vec<u64>>,
    tasks_left: usize,
    failed: bool,
}

#[derive(Debug)]
struct Exchange {
    addr: String,
    /// Requests of this exchange not yet settled by it, in pull order.
    reqs: Vec<String>,
    include_layout: bool,
    deadline: Instant,
}

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
}

impl DecoderCore {
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
        }
    }

    /// Overrides the receive timeout (vLLM: `(VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT + 60) s`).
    pub fn set_recv_timeout(&mut self, t: Duration) {
        self.recv_timeout = t;
    }
    pub fn profile(&self) -> &WireProfile {
        &self.profile
    }
    pub fn layout_id(&self) -> u64 {
        self.cfg.layout_id
    }

    /// A new registration of the KV caches: new layout and id; every acknowledgement is forgotten.
    pub fn reregister(&mut self, layout: DecoderLayout, layout_id: u64) {
        self.cfg.layout = layout;
        self.cfg.layout_id = if self.profile.layout_caching.is_some() { layout_id } else { 0 };
        self.acked.clear();
    }

    /// Pulls a batch of requests (one scheduler step).
    pub fn pull(&mut self, now: Instant, reqs: Vec<PullRequest>) {
        let mut by_engine: BTreeMap<String, Vec<PullRequest>> = BTreeMap::new();
        for r in reqs {
            by_engine.entry(r.engine_id.clone()).or_default().push(r);
        }
        for (engine, reqs) in by_engine {
            if self.engines.contains_key(&engine) {
                self.receive(now, &engine, reqs);
            } else {
                let addr = reqs[0].bootstrap_addr.clone();
                let first = !self.waiting.contains_key(&addr);
                self.waiting.entry(addr.clone()).or_default().extend(reqs);
                if first {
                    self.events.push_back(DecoderEvent::Query { bootstrap_addr: addr });
                }
            }
        }
    }

    /// The answer to a `/query`: the parsed table, or why it failed. Engines are cached and never refreshed.
    pub fn query_result(&mut self, now: Instant, bootstrap_addr: &str, result: Result<BTreeMap<String, EngineTable>, String>) {
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
    }

    fn fail_unregistered(&mut self, r: PullRequest, reason: &str) {
        let blocks: Vec<u64> = r.local_blocks.iter().flatten().copied().collect();
        if !blocks.is_empty() {
            self.events.push_back(DecoderEvent::Failed { d_req_id: r.d_req_id.clone(), reason: reason.to_string(), invalid_blocks: blocks });
            self.events.push_back(DecoderEvent::Finished { d_req_id: r.d_req_id });
        }
    }

    /// The prefiller worker addresses to pull from, by the TP/PP rules.
    fn targets(&self, engine: &str) -> Result<Vec<String>, String> {
        let table = &self.engines[engine];
        let remote_tp = table.len();
        let topo = crate::plan::TransferTopology::new(self.cfg.tp_rank as i64, self.cfg.tp_size as i64, 1, false, 1).map_err(|e| e.err_msg().to_string())?;
        let ranks: Vec<usize> =
            topo.handshake_target_ranks(remote_tp as i64, 1).map_err(|e| e.err_msg().to_string())?.into_iter().map(|r| r as usize).collect();
        let mut addrs = vec![];
        for r in ranks {
            let pp = table.get(&r).ok_or_else(|| format!("remote engine {engine} has no TP rank {r}"))?;
            if self.cfg.pp_size == pp.len() && pp.contains_key(&self.cfg.pp_rank) {
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
                for r in reqs {
                    self.fail_unregistered(r, &format!("transfer failed: {e}"));
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
            self.pulls.insert(r.d_req_id, PullState { transfer_id: r.transfer_id, local_blocks: r.local_blocks, tasks_left: addrs.len(), failed: false });
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
            let p = &self.pulls[id];
            let blocks = p.local_blocks.iter().map(|g| g.iter().map(|b| WireInt::from(*b)).collect()).collect();
            m.req_blocks.push((id.clone(), ReqBlocks { transfer_id: p.transfer_id.clone(), blocks }));
        }
        if include_layout {
            let l = &c.layout;
            m.kv_caches_base_addr = l.kv_caches_base_addr.clone();
            m.block_lens = l.block_lens.clone();
            m.kv_block_lens = l.kv_block_lens.clone();
            m.registered_layer_names = l.registered_layer_names.clone();
            m.registered_layer_indices = l.registered_layer_indices.clone();
            m.registered_group_indices = l.registered_group_indices.clone();
            m.registered_shared_group_ids = l.registered_shared_group_ids.clone();
            m.registered_row_offsets = l.registered_row_offsets.clone();
        }
        m
    }

    fn open(&mut self, now: Instant, addr: String, reqs: Vec<String>, include_layout: bool) {
        let payload = match self.profile.encode_metadata(&self.metadata(&reqs, include_layout)) {
            Ok(p) => p,
            Err(e) => {
                // The layout cannot be said in this revision (e.g. a field it lacks): fail locally.
                let id = ExchangeId(self.next_exchange);
                self.next_exchange += 1;
                self.exchanges.insert(id, Exchange { addr, reqs, include_layout, deadline: now });
                self.fail_exchange(id, &format!("transfer failed: {e}"));
                return;
            }
        };
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        self.events.push_back(DecoderEvent::Open { id, addr: addr.clone(), payload });
        self.exchanges.insert(id, Exchange { addr, reqs, include_layout, deadline: now + self.recv_timeout });
    }

    /// A frame received on an exchange's DEALER.
    pub fn handle_reply(&mut self, now: Instant, id: ExchangeId, payload: &[u8]) {
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
                // Resend the same requests with the layout on a new DEALER.
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
        self.settle(id, &r);
        if self.profile.is_terminal(r.status) {
            let x = self.exchanges.remove(&id).expect("exists");
            self.events.push_back(DecoderEvent::Close { id });
            if self.profile.fail_unreported_after_finish {
                self.fail_reqs(&x.reqs, "peer finished without reporting a transfer result");
            } else {
                for d in x.reqs {
                    if self.pulls.remove(&d).is_some() {
                        self.events.push_back(DecoderEvent::Unsettled { d_req_id: d });
                    }
                }
            }
        } else if let Some(x) = self.exchanges.get_mut(&id) {
            x.deadline = now + self.recv_timeout;
        }
    }

    /// The exchange's socket failed (connect error, send error).
    pub fn exchange_failed(&mut self, id: ExchangeId, error: &str) {
        if self.exchanges.contains_key(&id) {
            self.fail_exchange(id, &format!("transfer failed: {error}"));
        }
    }

    fn settle(&mut self, id: ExchangeId, r: &MooncakeXferResponse) {
        if let Some(err) = &r.err_reqs {
            let reason = r.err_msg.clone().unwrap_or_else(|| "unknown error".into());
            let mine: Vec<String> = err.iter().filter(|d| self.exchanges[&id].reqs.contains(d)).cloned().collect();
            self.take(id, &mine);
            self.fail_reqs(&mine, &reason);
        }
        for d in r.ok_reqs.iter().flatten() {
            if self.take(id, std::slice::from_ref(d)) == 1 {
                self.complete_task(d);
            }
        }
    }

    /// Removes requests from an exchange; returns how many it still held.
    fn take(&mut self, id: ExchangeId, reqs: &[String]) -> usize {
        let Some(x) = self.exchanges.get_mut(&id) else { return 0 };
        let before = x.reqs.len();
        x.reqs.retain(|d| !reqs.contains(d));
        before - x.reqs.len()
    }

    fn fail_exchange(&mut self, id: ExchangeId, reason: &str) {
        let Some(x) = self.exchanges.remove(&id) else { return };
        self.events.push_back(DecoderEvent::Close { id });
        self.fail_reqs(&x.reqs, reason);
    }

    /// vLLM `_handle_failed_recv`: a failure is reported once per request; every task still settles.
    fn fail_reqs(&mut self, reqs: &[String], reason: &str) {
        for d in reqs {
            let Some(p) = self.pulls.get_mut(d) else { continue };
            if !p.failed {
                p.failed = true;
                let blocks: Vec<u64> = p.local_blocks.iter().flatten().copied().collect();
                if !blocks.is_empty() {
                    self.events.push_back(DecoderEvent::Failed { d_req_id: d.clone(), reason: reason.to_string(), invalid_blocks: blocks });
                }
            }
            self.complete_task(d);
        }
    }

    fn complete_task(&mut self, d: &str) {
        let Some(p) = self.pulls.get_mut(d) else { return };
        p.tasks_left = p.tasks_left.saturating_sub(1);
        if p.tasks_left == 0 {
            let p = self.pulls.remove(d).expect("present");
            if p.local_blocks.iter().any(|g| !g.is_empty()) {
                self.events.push_back(DecoderEvent::Finished { d_req_id: d.to_string() });
            }
        }
    }

    /// Fails exchanges that waited longer than the receive timeout for a reply.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<ExchangeId> = self.exchanges.iter().filter(|(_, x)| x.deadline <= now).map(|(k, _)| *k).collect();
        for id in due {
            self.fail_exchange(id, "transfer failed: Resource temporarily unavailable");
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.exchanges.values().map(|x| x.deadline).min()
    }
    pub fn poll_event(&mut self) -> Option<DecoderEvent> {
        self.events.pop_front()
    }

    /// Requests not yet settled by every worker (including those waiting for a bootstrap query).
    pub fn pending_pulls(&self) -> usize {
        self.pulls.len() + self.waiting.values().map(Vec::len).sum::<usize>()
    }
    pub fn open_exchanges(&self) -> usize {
        self.exchanges.len()
    }
    pub fn is_acked(&self, addr: &str) -> bool {
        self.acked.contains(addr)
    }
}

/// Parses a `GET /query` body into engine id → the decoder's engine table (the DP keys are ignored, as vLLM's
/// decoder ignores them).
pub fn parse_query(body: &serde_json::Value) -> Result<BTreeMap<String, EngineTable>, String> {
    let mut out = BTreeMap::new();
    for (_, e) in body.as_object().ok_or("query body is not an object")? {
        let id = e.get("engine_id").and_then(|v| v.as_str()).ok_or("engine_id missing")?.to_string();
        let mut t = EngineTable::new();
        for (tp, pps) in e.get("worker_addr").and_then(|v| v.as_object()).ok_or("worker_addr missing")? {
            let tp: usize = tp.parse().map_err(|_| format!("tp rank {tp:?} is not an integer"))?;
            let mut m = BTreeMap::new();
            for (pp, a) in pps.as_object().ok_or("pp table is not an object")? {
                m.insert(pp.parse().map_err(|_| format!("pp rank {pp:?} is not an integer"))?, a.as_str().ok_or("address is not a string")?.to_string());
            }
            t.insert(tp, m);
        }
        out.insert(id, t);
    }
    Ok(out)
}
