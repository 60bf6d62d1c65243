//! The prefiller (KV producer) side of the push protocol as a sans-IO state machine.
//!
//! Inputs: frames from the ROUTER socket, the scheduler's view of its requests (allocated, finished with
//! blocks, aborted), completions of transfer-engine writes, and the time. Outputs: replies to send
//! ([`PrefillerCore::poll_transmit`]), writes to perform and requests to free ([`PrefillerCore::poll_event`]),
//! and when to be woken ([`PrefillerCore::poll_timeout`]). No socket, clock or thread inside.
//!
//! Generation 2 (`spec/PROTOCOL.md`, "Generation 2"). What differs between revisions is read from the
//! revision's typed behaviour (`spec/PROTOCOL.md`, "Prefiller: replies and bookkeeping"; the values in
//! [`crate::proto::profile::Rules`]), not assumed. In outline: pairing check, PP check, layout-less pulls served from a per-peer layout cache (LAYOUT_MISS when
//! absent), region validation, then rounds: wait until some requests are ready, one write per round, one
//! reply per round (CONTINUE while some are pending, FINISH with the last), a timeout FINISH after the abort
//! timeout, `need_send` deliveries before a transfer is freed, and expiry of ready transfers nobody pulled. From
//! 0.34.0 (`spec/PROTOCOL.md#kv-leases`): every payload is tried as a lease heartbeat first; with a lease
//! duration a ready transfer is held that long and heartbeats extend it; a pull of a transfer that expired
//! lately is answered at once.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::lease::LeaseError;
use super::lru::Lru;
use super::planner::{Descriptor, ReadyReq, SenderPlanner, TransferBatch};
use super::profile::{Inbound, WireProfile};
use crate::limits;
use crate::msgpack::WireInt;
use crate::spec::behaviour::{BlockCountFailure, EmptyIdLists, HeterogeneousTp, ReplyRounds, UndecodableRequest};
use crate::typed::{MooncakeXferMetadata, MooncakeXferResponse, Status, StrList};

/// A decoder connection as the ROUTER names it (the routing id: opaque bytes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PeerId(pub Vec<u8>);

/// A reply to send: `[peer, payload]` on the ROUTER.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The ROUTER routing id of the peer.
    pub peer: PeerId,
    /// The encoded reply.
    pub payload: Vec<u8>,
    /// Send `[peer, "", payload]` (a REQ peer, generation 1) instead of `[peer, payload]`.
    pub delimiter: bool,
}

impl Transmit {
    /// The ROUTER frames of this reply.
    pub fn frames(self) -> Vec<Vec<u8>> {
        if self.delimiter {
            vec![self.peer.0, vec![], self.payload]
        } else {
            vec![self.peer.0, self.payload]
        }
    }
}

/// Identifies one transfer-engine write the driver performs for the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriteId(pub(crate) u64);

#[derive(Clone, Debug, PartialEq, Eq)]
/// What the prefiller core asks its driver to do, or reports.
pub enum PrefillerEvent {
    /// Perform these copies into the decoder's memory (`session` = `"host:port"` of its transfer engine), then
    /// call [`PrefillerCore::write_complete`] with the engine's return code (0 = success).
    Write {
        /// Identifies the write in [`PrefillerCore::write_complete`].
        id: WriteId,
        /// The decoder's transfer-engine session.
        session: String,
        /// The copies to perform.
        descriptors: Vec<Descriptor>,
    },
    /// The prefiller's blocks of this request can be freed: delivered `need_send` times, or expired.
    FinishedSending {
        /// The prefiller's request id.
        p_req_id: String,
        /// The transfer id.
        transfer_id: String,
        /// Freed because the request expired unpulled.
        expired: bool,
    },
    /// A message was refused without a reply (wrong frame count); for logs.
    Rejected {
        /// The peer.
        peer: PeerId,
        /// Why.
        reason: String,
    },
}

/// One transfer the prefiller may be asked for, keyed by `transfer_id`.
#[derive(Debug, Clone)]
struct Entry {
    gen: u64,
    /// Empty until the scheduler names the request (an entry a pull created first has no owner).
    p_req_id: String,
    local_blocks: Vec<Vec<u64>>,
    ready: bool,
    expire: Option<Instant>,
    need_send: usize,
    sent: usize,
    sending: usize,
    /// Exchanges waiting on it (to clean up ownerless entries when they end).
    waiters: usize,
}

#[derive(Debug, Clone)]
struct Pending {
    d_req_id: String,
    transfer_id: String,
    gen: u64,
    /// Index of the request in `req_blocks` (for the decoder's block ids).
    index: usize,
}

#[derive(Debug)]
struct Round {
    write: Option<WriteId>,
    status: Status,
    ready: Vec<Pending>,
    ok: Vec<String>,
    err_reqs: Vec<String>,
    err_msg: Option<String>,
}

#[derive(Debug)]
struct Exchange<Pl, Pr> {
    peer: PeerId,
    meta: MooncakeXferMetadata,
    pull: Pl,
    prepared: Pr,
    target_ranks: Vec<usize>,
    pending: Vec<Pending>,
    deadline: Instant,
    round: Option<Round>,
}

/// Counters for tests and logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrefillerStats {
    /// Messages received.
    pub messages: u64,
    /// Messages refused or answered with an error.
    pub errors: u64,
    /// Pulls that named a layout id the cache did not hold.
    pub layout_misses: u64,
    /// Exchanges that timed out.
    pub timeouts: u64,
    /// Reply rounds sent.
    pub rounds: u64,
    /// Requests that expired unpulled.
    pub expired: u64,
    /// Lease heartbeats answered (renewed or refused).
    pub heartbeats: u64,
    /// Pulled requests answered at once because their transfer had expired.
    pub expired_pulls: u64,
}

/// The generation-2 prefiller worker as a sans-IO state machine: messages and block readiness in, replies and writes out.
pub struct PrefillerCore<P: SenderPlanner> {
    profile: WireProfile,
    planner: P,
    abort_timeout: Duration,
    entries: HashMap<String, Entry>,
    next_gen: u64,
    exchanges: HashMap<u64, Exchange<P::Pull, P::Prepared>>,
    next_exchange: u64,
    writes: HashMap<WriteId, u64>,
    next_write: u64,
    layouts: Lru<LayoutKey, P::Prepared>,
    /// Prepared regions (or the refusal) per distinct decoder layout, whatever its `layout_id`.
    prepared: HashMap<P::PrepareKey, Result<P::Prepared, P::Error>>,
    /// Exchanges waiting on each transfer id (may hold ids of exchanges that ended; checked on use).
    waiting: HashMap<String, Vec<u64>>,
    /// Wait deadlines of exchanges, (deadline, exchange); an item whose exchange moved on is skipped.
    deadlines: BTreeSet<(Instant, u64)>,
    /// Expiry times of ready transfers, (expire, generation, transfer id); stale items are skipped.
    expiries: BTreeSet<(Instant, u64, String)>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<PrefillerEvent>,
    /// `kv_lease_duration` when set (revisions with `kv_leases`): how long a ready transfer is held.
    kv_lease: Option<Duration>,
    /// Transfer ids that expired, with when (revisions with `expired_pull`); `expired_order` in expiry order.
    expired_ids: HashMap<String, Instant>,
    expired_order: VecDeque<(Instant, String)>,
    pub(crate) stats: PrefillerStats,
}

/// `(remote_hostname, remote_port, remote_tp_rank, remote_pp_size, remote_tp_size, layout_id)`.
type LayoutKey = (String, WireInt, WireInt, WireInt, WireInt, WireInt);

fn layout_key(m: &MooncakeXferMetadata) -> LayoutKey {
    (m.remote_hostname.clone(), m.remote_port, m.remote_tp_rank, m.remote_pp_size, m.remote_tp_size, m.layout_id)
}

/// Fills the spec's `miss_message` template (`{layout_id:#x}`, `{host}`, `{port}`).
fn miss_message(template: &str, m: &MooncakeXferMetadata) -> String {
    template
        .replace("{layout_id:#x}", &format!("{:#x}", m.layout_id))
        .replace("{host}", &m.remote_hostname)
        .replace("{port}", &m.remote_port.to_string())
}

impl<P: SenderPlanner> PrefillerCore<P> {
    /// A prefiller for `profile`'s revision that plans transfers with `planner`.
    pub fn new(profile: WireProfile, planner: P) -> Self {
        let cap = profile.layout_caching.as_ref().map(|l| l.max_peer_layouts).unwrap_or(0);
        PrefillerCore {
            abort_timeout: profile.abort_timeout,
            profile,
            planner,
            entries: HashMap::new(),
            next_gen: 1,
            exchanges: HashMap::new(),
            next_exchange: 1,
            writes: HashMap::new(),
            next_write: 1,
            layouts: Lru::new(cap),
            prepared: HashMap::new(),
            waiting: HashMap::new(),
            deadlines: BTreeSet::new(),
            expiries: BTreeSet::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            kv_lease: None,
            expired_ids: HashMap::new(),
            expired_order: VecDeque::new(),
            stats: PrefillerStats::default(),
        }
    }

    /// Sets `kv_lease_duration` (`None`: leases off, the default): a ready transfer is then held that long
    /// instead of the abort timeout, and heartbeats extend it (`spec/PROTOCOL.md#kv-leases`). Only revisions
    /// with `behaviour.kv_leases` read it.
    pub fn set_kv_lease_duration(&mut self, d: Option<Duration>) -> Result<(), LeaseError> {
        if let Some(d) = d {
            if self.profile.kv_leases.is_none() {
                return Err(LeaseError::NotInRevision(self.profile.name().to_string()));
            }
            if d.is_zero() {
                return Err(LeaseError::NotPositive(d));
            }
        }
        self.kv_lease = d;
        Ok(())
    }

    /// The lease duration set, if any.
    pub fn kv_lease_duration(&self) -> Option<Duration> {
        self.kv_lease
    }

    /// Overrides `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`.
    pub fn set_abort_timeout(&mut self, t: Duration) {
        self.abort_timeout = t;
    }
    /// The planner.
    pub fn planner(&self) -> &P {
        &self.planner
    }

    // ---- scheduler inputs -------------------------------------------------------------------------------

    /// The scheduler allocated a request that will be pulled under `transfer_id`
    /// (`update_state_after_alloc`). An entry a pull already created keeps having no owner, as in vLLM.
    pub fn request_allocated(&mut self, now: Instant, p_req_id: &str, transfer_id: &str) {
        if !self.entries.contains_key(transfer_id) {
            let e = self.new_entry(p_req_id);
            self.entries.insert(transfer_id.to_string(), e);
        }
        let _ = now;
    }

    /// The request finished its prefill: its blocks are ready to send until `now + abort timeout` (or
    /// `now + kv_lease_duration` when leases are on).
    pub fn request_finished(&mut self, now: Instant, p_req_id: &str, transfer_id: &str, blocks: Vec<Vec<u64>>) {
        let expire = now + self.kv_lease.unwrap_or(self.abort_timeout);
        if !self.entries.contains_key(transfer_id) {
            let e = self.new_entry(p_req_id);
            self.entries.insert(transfer_id.to_string(), e);
        }
        let e = self.entries.get_mut(transfer_id).expect("just ensured");
        if let Some(old) = e.expire.replace(expire) {
            self.expiries.remove(&(old, e.gen, transfer_id.to_string()));
        }
        e.p_req_id = p_req_id.to_string();
        e.local_blocks = blocks;
        e.ready = true;
        let gen = e.gen;
        self.expiries.insert((expire, gen, transfer_id.to_string()));
        let ids = self.waiting.get(transfer_id).cloned().unwrap_or_default();
        self.drive_ids(now, &ids);
    }

    /// The request ended without a transfer (aborted, error): forget it. A waiting pull times out.
    pub fn request_aborted(&mut self, now: Instant, transfer_id: &str) {
        self.remove_entry(transfer_id);
        let _ = now;
    }

    fn new_entry(&mut self, p_req_id: &str) -> Entry {
        self.next_gen += 1;
        Entry {
            gen: self.next_gen,
            p_req_id: p_req_id.to_string(),
            local_blocks: vec![],
            ready: false,
            expire: None,
            need_send: 0,
            sent: 0,
            sending: 0,
            waiters: 0,
        }
    }

    /// Forgets every cached peer layout (vLLM does this when the prefiller re-registers its caches).
    pub fn clear_layout_cache(&mut self) {
        self.layouts.clear();
        self.prepared.clear();
    }

    /// The planner's preparation of this pull's layout, computed once per distinct layout.
    fn prepare(&mut self, pull: &P::Pull) -> Result<P::Prepared, P::Error> {
        let key = self.planner.prepare_key(pull);
        if let Some(p) = self.prepared.get(&key) {
            return p.clone();
        }
        let p = self.planner.prepare(pull);
        if self.prepared.len() >= limits::MAX_PREPARED_LAYOUTS {
            self.prepared.clear();
        }
        self.prepared.insert(key, p.clone());
        p
    }

    // ---- network input ----------------------------------------------------------------------------------

    /// A message from the ROUTER: `[routing_id, payload]`. Anything else is refused without a reply.
    pub fn handle_frames(&mut self, now: Instant, mut frames: Vec<Vec<u8>>) {
        if frames.len() != 2 || frames[0].is_empty() {
            let peer = PeerId(frames.first().cloned().unwrap_or_default());
            self.events.push_back(PrefillerEvent::Rejected {
                peer,
                reason: format!("expected [routing_id, payload] (2 frames), got {} frames; a REQ socket or a multipart send is not a Mooncake decoder", frames.len()),
            });
            return;
        }
        let payload = frames.pop().expect("2 frames");
        let peer = PeerId(frames.pop().expect("2 frames"));
        self.handle_message(now, peer, &payload);
    }

    /// One message from a decoder: a lease heartbeat (revisions that have them try every payload as one
    /// first), else a pull.
    pub(crate) fn handle_message(&mut self, now: Instant, peer: PeerId, payload: &[u8]) {
        self.stats.messages += 1;
        let meta = match self.profile.read_inbound(payload) {
            Inbound::Heartbeat(h) => return self.renew(now, peer, &h.lease_transfer_ids),
            Inbound::Pull(Ok(m)) => m,
            Inbound::Pull(Err(e)) => match self.profile.rules.undecodable_request {
                UndecodableRequest::ErrorReply => return self.reply_error(peer, Status::ERROR, e.msgspec_message()),
            },
        };
        if self.exchanges.len() >= limits::MAX_PREFILLER_EXCHANGES {
            return self.reply_error(
                peer,
                Status::ERROR,
                format!("Mooncake prefiller is serving {} pulls already; retry later.", self.exchanges.len()),
            );
        }
        let pull = match self.planner.pull(&meta) {
            Ok(p) => p,
            Err(e) => return self.reply_error(peer, Status::ERROR, e.to_string()),
        };
        let target_ranks = match self.planner.check(&pull) {
            Ok(t) => t,
            Err(e) => return self.reply_error(peer, Status::ERROR, e.to_string()),
        };
        let caching = self.profile.layout_caching.is_some();
        let prepared = match caching {
            true if meta.layout_id != WireInt::ZERO && meta.kv_caches_base_addr.is_empty() => {
                match self.layouts.get(&layout_key(&meta)) {
                    Some(p) => p.clone(),
                    None => {
                        self.stats.layout_misses += 1;
                        let lc = self.profile.layout_caching.as_ref().expect("caching is on");
                        let msg = miss_message(&lc.miss_message, &meta);
                        let status = self.status_named(&lc.miss_status, Status::LAYOUT_MISS);
                        return self.reply_error(peer, status, msg);
                    }
                }
            }
            _ => match self.prepare(&pull) {
                Ok(p) => {
                    if caching && meta.layout_id != WireInt::ZERO {
                        self.layouts.put(layout_key(&meta), p.clone());
                    }
                    p
                }
                Err(e) => return self.reply_error(peer, Status::ERROR, e.to_string()),
            },
        };
        if let Err(e) = self.planner.validate(&pull, &prepared) {
            return self.reply_error(peer, Status::ERROR, e.to_string());
        }
        // Every requested transfer gets an entry (a placeholder when the scheduler has not named it yet), but one
        // that expired lately, which is answered at once where the revision does so.
        let mut pending = Vec::with_capacity(meta.req_blocks.len());
        let mut expired = vec![];
        for (index, (d_req_id, b)) in meta.req_blocks.iter().enumerate() {
            if !self.entries.contains_key(&b.transfer_id) && self.expired_ids.contains_key(&b.transfer_id) {
                expired.push(d_req_id.clone());
                continue;
            }
            if !self.entries.contains_key(&b.transfer_id) {
                let e = self.new_entry("");
                self.entries.insert(b.transfer_id.clone(), e);
            }
            let e = self.entries.get_mut(&b.transfer_id).expect("just ensured");
            e.waiters += 1;
            pending.push(Pending { d_req_id: d_req_id.clone(), transfer_id: b.transfer_id.clone(), gen: e.gen, index });
        }
        if let (false, Some(x)) = (expired.is_empty(), &self.profile.expired_pull) {
            self.stats.expired_pulls += expired.len() as u64;
            let status = if pending.is_empty() { Status::FINISH } else { Status::CONTINUE };
            let mut r = MooncakeXferResponse::new(status);
            r.err_reqs = Some(expired.into());
            r.err_msg = Some(x.message.clone());
            r.layout_id = meta.layout_id;
            self.send(peer.clone(), &r);
        }
        if pending.is_empty() {
            // Nothing to wait for: vLLM's round loop never runs and nothing (more) is sent back.
            return;
        }
        let id = self.next_exchange;
        self.next_exchange += 1;
        for p in &pending {
            self.waiting.entry(p.transfer_id.clone()).or_default().push(id);
        }
        let deadline = now + self.abort_timeout;
        self.deadlines.insert((deadline, id));
        self.exchanges
            .insert(id, Exchange { peer, meta, pull, prepared, target_ranks, pending, deadline, round: None });
        self.drive_ids(now, &[id]);
    }

    /// A heartbeat: each named transfer the prefiller holds gets its deadline moved to at least
    /// `now + duration × renew_to` (a transfer not ready yet has none to move, an unknown one is not created),
    /// answered `renewed_status`; without a lease duration, answered `off_status` and `off_message`.
    fn renew(&mut self, now: Instant, peer: PeerId, ids: &[String]) {
        self.stats.heartbeats += 1;
        let Some(leases) = self.profile.kv_leases.clone() else { return };
        let Some(d) = self.kv_lease else {
            let status = self.status_named(&leases.off_status, Status::ERROR);
            return self.reply_error(peer, status, leases.off_message.clone());
        };
        let [num, den] = leases.renew_to;
        let until = now + d * num / den;
        for tid in ids {
            let Some(e) = self.entries.get_mut(tid) else { continue };
            match e.expire {
                Some(old) if old < until => {
                    self.expiries.remove(&(old, e.gen, tid.clone()));
                    e.expire = Some(until);
                    self.expiries.insert((until, e.gen, tid.clone()));
                }
                _ => {}
            }
        }
        let status = self.status_named(&leases.renewed_status, Status::FINISH);
        self.send(peer, &MooncakeXferResponse::new(status));
    }

    /// The status of this revision's enum with this name (`fallback` when it has none: the loader checks that
    /// behaviour items name members).
    fn status_named(&self, name: &str, fallback: Status) -> Status {
        self.profile.statuses.iter().map(|(s, _)| *s).find(|s| s.name() == Some(name)).unwrap_or(fallback)
    }

    fn reply_error(&mut self, peer: PeerId, status: Status, msg: String) {
        self.stats.errors += (status == Status::ERROR) as u64;
        let mut r = MooncakeXferResponse::new(status);
        r.err_msg = Some(msg);
        self.send(peer, &r);
    }

    fn send(&mut self, peer: PeerId, r: &MooncakeXferResponse) {
        let payload = self.profile.encode_response(r).expect("the core only builds replies its revision can carry");
        self.transmits.push_back(Transmit { peer, payload, delimiter: false });
    }

    // ---- transfer engine --------------------------------------------------------------------------------

    /// The transfer engine finished a write: `ret` is its return code (0 = success).
    pub fn write_complete(&mut self, now: Instant, id: WriteId, ret: i64) {
        let Some(ex_id) = self.writes.remove(&id) else { return };
        self.finish_round(now, ex_id, ret);
        self.drive_ids(now, &[ex_id]);
    }

    // ---- time -------------------------------------------------------------------------------------------

    /// Fires timeouts due at `now`: pulls that waited too long, ready transfers nobody pulled.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(t, id)) = self.deadlines.first() {
            if t > now {
                break;
            }
            self.deadlines.pop_first();
            // Only an exchange still waiting with exactly this deadline times out.
            if !self.exchanges.get(&id).is_some_and(|x| x.round.is_none() && x.deadline == t) {
                continue;
            }
            let ex = self.exchanges.remove(&id).expect("checked");
            self.stats.timeouts += 1;
            let mut r = MooncakeXferResponse::new(Status::FINISH);
            r.err_reqs = Some(ex.pending.iter().map(|p| p.d_req_id.clone()).collect());
            r.err_msg = Some("Timeout waiting for P side ready.".into());
            r.layout_id = ex.meta.layout_id;
            self.release_waiters(id, &ex.pending);
            self.send(ex.peer, &r);
        }
        while let Some((t, gen, tid)) = self.expiries.first().cloned() {
            if t >= now {
                break;
            }
            self.expiries.pop_first();
            let due =
                self.entries.get(&tid).is_some_and(|e| e.gen == gen && !e.p_req_id.is_empty() && e.expire == Some(t));
            if !due {
                continue;
            }
            if self.entries[&tid].sending > 0 {
                // Being sent: expiry waits for the round to end (it re-queues the entry).
                continue;
            }
            let e = self.entries.remove(&tid).expect("checked");
            self.stats.expired += 1;
            self.remember_expired(now, &tid);
            self.events.push_back(PrefillerEvent::FinishedSending {
                p_req_id: e.p_req_id,
                transfer_id: tid,
                expired: true,
            });
        }
        self.forget_expired(now);
    }

    /// Remembers that a transfer expired (revisions with `expired_pull`), so a late pull of it is answered at once.
    fn remember_expired(&mut self, now: Instant, tid: &str) {
        if self.profile.expired_pull.is_none() {
            return;
        }
        if self.expired_order.len() >= limits::MAX_REMEMBERED_EXPIRED {
            if let Some((t, old)) = self.expired_order.pop_front() {
                if self.expired_ids.get(&old) == Some(&t) {
                    self.expired_ids.remove(&old);
                }
            }
        }
        self.expired_ids.insert(tid.to_string(), now);
        self.expired_order.push_back((now, tid.to_string()));
    }

    /// Forgets expired ids older than the abort timeout (vLLM prunes them when it next reports what it
    /// finished sending; a pull after that waits like a pull of an unknown transfer).
    fn forget_expired(&mut self, now: Instant) {
        while let Some((t, tid)) = self.expired_order.front().cloned() {
            if t + self.abort_timeout >= now {
                break;
            }
            self.expired_order.pop_front();
            if self.expired_ids.get(&tid) == Some(&t) {
                self.expired_ids.remove(&tid);
            }
        }
    }

    /// When [`PrefillerCore::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let wait = self.deadlines.first().map(|(t, _)| *t);
        // Expiry is strict (`expire < now`): wake just after.
        let expiry = self.expiries.first().map(|(t, _, _)| *t + Duration::from_nanos(1));
        let forget = self.expired_order.front().map(|(t, _)| *t + self.abort_timeout + Duration::from_nanos(1));
        wait.into_iter().chain(expiry).chain(forget).min()
    }

    /// The next reply to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }
    /// The next thing to do or report, if any.
    pub fn poll_event(&mut self) -> Option<PrefillerEvent> {
        self.events.pop_front()
    }

    // ---- inspection -------------------------------------------------------------------------------------

    /// Transfers the prefiller tracks (ready, pending, or placeholders a pull created).
    pub fn tracked_transfers(&self) -> usize {
        self.entries.len()
    }
    /// Pulls being served.
    pub fn open_exchanges(&self) -> usize {
        self.exchanges.len()
    }
    /// Peer layouts cached (0.33.0's `layout_id`).
    pub fn cached_layouts(&self) -> usize {
        self.layouts.len()
    }
    /// Expired transfer ids remembered for late pulls (0.34.0's `expired_pull`; not transfers).
    pub fn remembered_expired(&self) -> usize {
        self.expired_ids.len()
    }

    // ---- rounds -----------------------------------------------------------------------------------------

    fn is_ready(&self, p: &Pending) -> bool {
        self.entries.get(&p.transfer_id).is_some_and(|e| e.gen == p.gen && e.ready)
    }

    /// Starts a round in each of these exchanges that has ready requests and no write in flight.
    fn drive_ids(&mut self, now: Instant, ids: &[u64]) {
        for &id in ids {
            let ready_idx: Vec<usize> = match self.exchanges.get(&id) {
                Some(x) if x.round.is_none() => {
                    x.pending.iter().enumerate().filter(|(_, p)| self.is_ready(p)).map(|(i, _)| i).collect()
                }
                _ => continue,
            };
            if !ready_idx.is_empty() {
                self.start_round(now, id, &ready_idx);
            }
        }
    }

    fn start_round(&mut self, now: Instant, ex_id: u64, ready_idx: &[usize]) {
        self.stats.rounds += 1;
        let mut ex = self.exchanges.remove(&ex_id).expect("exists");
        // A round has begun: the exchange no longer waits, so its wait deadline goes (it gets a new one if
        // the round ends in CONTINUE).
        self.deadlines.remove(&(ex.deadline, ex_id));
        let mut ready = Vec::with_capacity(ready_idx.len());
        for &i in ready_idx.iter().rev() {
            ready.push(ex.pending.remove(i));
        }
        ready.reverse();
        let status = if ex.pending.is_empty() { Status::FINISH } else { Status::CONTINUE };
        // Mark as sending (so they cannot expire mid-write) and work out how many deliveries free them.
        let remote_pp = ex.meta.remote_pp_size.as_usize().unwrap_or(1);
        let mut sendable = Vec::with_capacity(ready.len());
        let refuses_hetero = self.profile.rules.heterogeneous_tp == HeterogeneousTp::RefusedWhenReady;
        for p in ready {
            unwait(&mut self.waiting, &p.transfer_id, ex_id);
            let e = self.entries.get_mut(&p.transfer_id).expect("ready entries exist");
            e.waiters = e.waiters.saturating_sub(1);
            e.sending += 1;
            if e.need_send == 0 {
                e.need_send = self.planner.need_send(&ex.target_ranks, remote_pp);
                if refuses_hetero && e.need_send != 1 {
                    // vLLM raises in the round: ERROR, the pull ends, and the entries of the round stay marked
                    // as being sent (they never expire); a later pull of the same transfer is served.
                    self.release_waiters(ex_id, &ex.pending);
                    return self.reply_error(
                        ex.peer,
                        Status::ERROR,
                        "Mooncake: Heterogeneous TP is not supported yet.".into(),
                    );
                }
            }
            sendable.push(p);
        }
        let built = {
            let reqs: Vec<ReadyReq<'_>> = sendable
                .iter()
                .map(|p| ReadyReq {
                    d_req_id: &p.d_req_id,
                    transfer_id: &p.transfer_id,
                    local_blocks: &self.entries[&p.transfer_id].local_blocks,
                    remote_blocks: &ex.meta.req_blocks[p.index].1.blocks,
                })
                .collect();
            self.planner.build(&ex.pull, &ex.prepared, &reqs)
        };
        let TransferBatch { descriptors, err_reqs, err_msg } = match built {
            Ok(b) => b,
            Err(e) => {
                // vLLM raised inside the round: its generic handler answers ERROR and the pull ends.
                for p in &sendable {
                    if let Some(en) = self.entries.get_mut(&p.transfer_id) {
                        en.sending = en.sending.saturating_sub(1);
                    }
                }
                self.release_waiters(ex_id, &ex.pending);
                return self.reply_error(ex.peer, Status::ERROR, e.to_string());
            }
        };
        // err-then-ok lists every ready id in the ok reply, the failed ones too.
        let err_then_ok = self.profile.rules.reply_rounds == ReplyRounds::ErrThenOk;
        let ok: Vec<String> =
            sendable.iter().map(|p| p.d_req_id.clone()).filter(|d| err_then_ok || !err_reqs.contains(d)).collect();
        let write = if descriptors.is_empty() {
            None
        } else {
            let id = WriteId(self.next_write);
            self.next_write += 1;
            self.writes.insert(id, ex_id);
            let session = format!("{}:{}", ex.meta.remote_hostname, ex.meta.remote_port);
            self.events.push_back(PrefillerEvent::Write { id, session, descriptors });
            Some(id)
        };
        ex.round = Some(Round { write, status, ready: sendable, ok, err_reqs, err_msg });
        self.exchanges.insert(ex_id, ex);
        if write.is_none() {
            self.finish_round(now, ex_id, 0);
        }
    }

    fn finish_round(&mut self, now: Instant, ex_id: u64, ret: i64) {
        let Some(mut ex) = self.exchanges.remove(&ex_id) else { return };
        let Some(round) = ex.round.take() else {
            self.exchanges.insert(ex_id, ex);
            return;
        };
        let rules = &self.profile.rules;
        let err_then_ok = rules.reply_rounds == ReplyRounds::ErrThenOk;
        let counts_block_failures = rules.block_count_failure == BlockCountFailure::CountedAsDelivered;
        let write_failed = ret != 0 && round.write.is_some();
        let te = format!("Mooncake transfer engine returned {ret}");
        // The replies of this round, in order.
        let mut replies = vec![];
        let mut delivered: Vec<String> = vec![];
        if err_then_ok {
            // A separate reply for the block-count failures, then the ok reply (or, the write failed, one
            // error reply naming every ready id).
            if !round.err_reqs.is_empty() {
                let mut r = MooncakeXferResponse::new(round.status);
                r.err_reqs = Some(round.err_reqs.iter().collect());
                r.err_msg = round.err_msg.clone();
                replies.push(r);
            }
            let mut r = MooncakeXferResponse::new(round.status);
            if write_failed {
                r.err_reqs = Some(round.ready.iter().map(|p| p.d_req_id.clone()).collect());
                r.err_msg = Some(te);
            } else {
                r.ok_reqs = Some(round.ok.iter().collect());
                delivered = round
                    .ready
                    .iter()
                    .map(|p| p.d_req_id.clone())
                    .filter(|d| counts_block_failures || !round.err_reqs.contains(d))
                    .collect();
            }
            replies.push(r);
        } else {
            let (mut ok, mut err_reqs, mut err_msg) = (round.ok.clone(), round.err_reqs.clone(), round.err_msg.clone());
            if write_failed {
                err_msg = Some(match err_msg.take() {
                    None => te,
                    Some(m) => format!("{m}; {te}"),
                });
                err_reqs.append(&mut ok);
            } else {
                delivered = ok.clone();
            }
            let mut r = MooncakeXferResponse::new(round.status);
            let keep_empty = rules.empty_id_lists == EmptyIdLists::EmptyArray;
            r.ok_reqs = Some(ok.into()).filter(|v: &StrList| keep_empty || !v.is_empty());
            r.err_reqs = Some(err_reqs.into()).filter(|v: &StrList| !v.is_empty());
            r.err_msg = err_msg;
            replies.push(r);
        }
        for p in &round.ready {
            let Some(e) = self.entries.get_mut(&p.transfer_id) else { continue };
            if e.gen != p.gen {
                continue;
            }
            e.sending = e.sending.saturating_sub(1);
            if e.sending == 0 {
                if let Some(t) = e.expire.filter(|t| *t < now) {
                    self.expiries.insert((t, e.gen, p.transfer_id.clone()));
                }
            }
            if !delivered.contains(&p.d_req_id) {
                continue;
            }
            e.sent += 1;
            if e.sent == e.need_send {
                let e = self.remove_entry(&p.transfer_id).expect("present");
                self.events.push_back(PrefillerEvent::FinishedSending {
                    p_req_id: e.p_req_id,
                    transfer_id: p.transfer_id.clone(),
                    expired: false,
                });
            }
        }
        for mut r in replies {
            if r.status != Status::ERROR {
                r.layout_id = ex.meta.layout_id;
            }
            self.send(ex.peer.clone(), &r);
        }
        if round.status == Status::FINISH {
            self.release_waiters(ex_id, &ex.pending);
        } else {
            ex.deadline = now + self.abort_timeout;
            self.deadlines.insert((ex.deadline, ex_id));
            self.exchanges.insert(ex_id, ex);
        }
    }

    /// Forgets a transfer and its pending expiry, so no timer outlives what it was for.
    fn remove_entry(&mut self, transfer_id: &str) -> Option<Entry> {
        let e = self.entries.remove(transfer_id)?;
        if let Some(t) = e.expire {
            self.expiries.remove(&(t, e.gen, transfer_id.to_string()));
        }
        Some(e)
    }

    /// An exchange stopped waiting on these: drop placeholder entries nobody owns or waits on any more
    /// (vLLM keeps them forever, vllm-project/vllm#51236; the wire does not see the difference).
    fn release_waiters(&mut self, ex_id: u64, pending: &[Pending]) {
        for p in pending {
            unwait(&mut self.waiting, &p.transfer_id, ex_id);
            let remove = match self.entries.get_mut(&p.transfer_id) {
                Some(e) if e.gen == p.gen => {
                    e.waiters = e.waiters.saturating_sub(1);
                    e.waiters == 0 && e.p_req_id.is_empty() && !e.ready
                }
                _ => false,
            };
            if remove {
                self.remove_entry(&p.transfer_id);
            }
        }
    }
}

/// Forgets that exchange `id` waits on `transfer_id`.
fn unwait(waiting: &mut HashMap<String, Vec<u64>>, transfer_id: &str, id: u64) {
    if let Some(v) = waiting.get_mut(transfer_id) {
        v.retain(|x| *x != id);
        if v.is_empty() {
            waiting.remove(transfer_id);
        }
    }
}
