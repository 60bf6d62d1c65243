//! Generation 1 of the push protocol (vLLM 0.13.0 – 0.15.1) as sans-IO state machines: a decoder's REQ sends
//! one `MooncakeAgentMetadata` to the prefiller worker at `remote_port + its own TP rank`; the prefiller's
//! ROUTER receives `[routing_id, "", payload]`, waits for the named requests, writes them with one
//! transfer-engine call and answers with a raw constant (`trans_done` / `trans_error`). No bootstrap server,
//! no status enum, no transfer ids: both sides know a request by the same id.
//!
//! What varies is read from the spec (`[behaviour]` items `unknown_transfer`, `ready_wait`,
//! `transfer_failure`, `block_count_failure`, `empty_write`, `failure_report`, `failure_finish`,
//! `free_only_success` and the planning items), and the raw replies from the transport's constants.
//! Protocol prose: `spec/PROTOCOL.md`, "Generation 1".

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::decoder::{DecoderEvent, ExchangeId, PullRequest};
use super::prefiller::{PeerId, PrefillerEvent, PrefillerStats, Transmit, WriteId};
use super::profile::{need, CarryError, ProfileError};
use crate::codec::convert::{convert, ConvertError, Lacking};
use crate::codec::{Codec, DecodeError, EncodeError, Value};
use crate::limits;
use crate::msgpack::WireInt;
use crate::plan::{build_whole_blocks, Producer, Pull, ReadyRequest, RegisteredLayout};
use crate::spec::behaviour::{
    BlockCountFailure, EmptyWrite, FailureReport, FreeOnlySuccess, ReadyWait, TransferFailure, UnknownTransfer,
};

use crate::spec::{Revision, Spec};
use crate::typed::generated::push::newest_gen1;

/// The message the decoder sends.
pub(crate) const REQUEST: &str = "MooncakeAgentMetadata";

/// What a generation-1 core needs to know about its revision, from the spec.
#[derive(Clone, Debug)]
pub struct Gen1Profile {
    /// The revision.
    pub revision: Arc<Revision>,
    codec: Arc<Codec>,
    /// The success reply (`trans_done`).
    pub done: Vec<u8>,
    /// The failure reply (`trans_error`).
    pub error: Vec<u8>,
    /// Default of `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT` (expiry of ready requests nobody pulled).
    pub abort_timeout: Duration,
    /// The decoder's receive timeout (`RCVTIMEO` of its REQ socket).
    pub recv_timeout: Duration,
    /// What the prefiller does with a pull for a transfer it does not know (`behaviour.unknown_transfer`).
    pub unknown_transfer: UnknownTransfer,
    /// How long a pull waits for blocks that are not ready (`behaviour.ready_wait`).
    pub ready_wait: ReadyWait,
    /// What a failed write does (`behaviour.transfer_failure`).
    pub transfer_failure: TransferFailure,
    /// What a block-count mismatch does (`behaviour.block_count_failure`).
    pub block_count_failure: BlockCountFailure,
    /// Whether a write of no blocks is performed (`behaviour.empty_write`).
    pub empty_write: EmptyWrite,
    /// How a failure is reported to the scheduler (`behaviour.failure_report`).
    pub failure_report: FailureReport,
    /// Whether a free-only request counts as a success (`behaviour.free_only_success`).
    pub free_only_success: FreeOnlySuccess,
}

/// `RCVTIMEO = 60000` in the spec's decoder socket options.
fn rcvtimeo(rev: &Revision) -> Option<Duration> {
    let v = rev.transport.sockets.get("decoder")?.options.get("RCVTIMEO")?;
    let ms: u64 = v.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_millis(ms))
}

impl Gen1Profile {
    /// The profile of a built-in generation-1 revision, by name.
    pub fn builtin(revision: &str) -> Result<Gen1Profile, ProfileError> {
        let rev =
            Spec::builtin().revision(revision).ok_or_else(|| ProfileError::UnknownRevision(revision.into()))?.clone();
        Self::new(rev)
    }

    /// The profile of a generation-1 revision (an error names what the spec lacks).
    pub fn new(rev: Arc<Revision>) -> Result<Gen1Profile, ProfileError> {
        if rev.generation != 1 {
            return Err(ProfileError::WrongGeneration {
                revision: rev.revision.clone(),
                generation: rev.generation,
                expected: 1,
            });
        }
        let codec = Codec::builtin(&rev.revision).ok_or_else(|| ProfileError::NotBuiltin(rev.revision.clone()))?;
        if codec.message_type(REQUEST).is_none() {
            return Err(ProfileError::MissingMessage { revision: rev.revision.clone(), message: REQUEST });
        }
        let constant = |name: &'static str| -> Result<Vec<u8>, ProfileError> {
            rev.transport
                .messages
                .iter()
                .flat_map(|m| &m.constants)
                .find(|c| c.name == name)
                .map(|c| c.bytes.as_bytes().to_vec())
                .ok_or_else(|| ProfileError::MissingConstant { revision: rev.revision.clone(), name })
        };
        let abort = rev
            .env
            .get("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT")
            .and_then(|e| e.default.parse::<u64>().ok())
            .ok_or_else(|| ProfileError::NoAbortTimeout(rev.revision.clone()))?;
        let b = &rev.behaviour;
        let r = &rev.revision;
        Ok(Gen1Profile {
            done: constant("trans_done")?,
            error: constant("trans_error")?,
            abort_timeout: Duration::from_secs(abort),
            recv_timeout: rcvtimeo(&rev).unwrap_or(Duration::from_secs(60)),
            unknown_transfer: need(&b.unknown_transfer, r, "unknown_transfer")?,
            ready_wait: need(&b.ready_wait, r, "ready_wait")?,
            transfer_failure: need(&b.transfer_failure, r, "transfer_failure")?,
            block_count_failure: need(&b.block_count_failure, r, "block_count_failure")?,
            empty_write: need(&b.empty_write, r, "empty_write")?,
            failure_report: need(&b.failure_report, r, "failure_report")?,
            free_only_success: need(&b.free_only_success, r, "free_only_success")?,
            codec,
            revision: rev,
        })
    }

    /// The planning rules of this revision (no pairing check in generation 1: the decoder's TP rank is not
    /// on the wire).
    pub fn plan_rules(&self) -> Result<crate::plan::PlanRules, ProfileError> {
        let pairing_check = crate::spec::behaviour::PairingCheck::Own;
        super::profile::plan_rules(&self.revision.revision, &self.revision.behaviour, pairing_check)
    }

    /// Decodes a request with this revision's msgspec rules (its spec codec), as the newest generation-1
    /// revision's generated struct (the value carried over by [`convert`], by the two specs' field lists). The
    /// core holds ports, addresses and block ids unsigned: a negative int anywhere refuses the request.
    pub fn decode_request(&self, bytes: &[u8]) -> Result<AgentMetadata, RequestError> {
        let v = self.codec.decode(REQUEST, bytes).map_err(|e| RequestError::Decode(Box::new(e)))?;
        unsigned(&v)?;
        let gen1 = gen1_codec();
        let v = convert(&self.codec, &gen1, REQUEST, &v, Lacking::MustBeDefault)?;
        AgentMetadata::decode(&gen1.encode(REQUEST, &v)?).map_err(|e| RequestError::Decode(Box::new(e)))
    }

    /// Encodes a request as this revision does.
    pub fn encode_request(&self, m: &AgentMetadata) -> Result<Vec<u8>, CarryError> {
        let gen1 = gen1_codec();
        let v = gen1.decode(REQUEST, &m.encode())?;
        let v = convert(&gen1, &self.codec, REQUEST, &v, Lacking::MustBeDefault)?;
        Ok(self.codec.encode(REQUEST, &v)?)
    }
}

/// Why a generation-1 prefiller refuses a request ([`Gen1Profile::decode_request`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The bytes do not decode as the revision's request; the text is msgspec's (boxed: a decode error is
    /// large).
    #[error("{}", .0.msgspec_message())]
    Decode(Box<DecodeError>),
    /// An int the core holds unsigned (a port, an address, a block id) is negative.
    #[error("{0} is not an unsigned 64-bit integer")]
    NotUnsigned(WireInt),
    /// The request holds something the newest generation-1 revision cannot.
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// The converted value does not encode as the newest generation-1 revision's request.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// The codec of the revision whose generated struct the core holds.
fn gen1_codec() -> Arc<Codec> {
    Codec::builtin(newest_gen1::REVISION).expect("the newest generation-1 revision is built in")
}

/// Every int of `v` is unsigned (fits a `u64`).
fn unsigned(v: &Value) -> Result<(), RequestError> {
    match v {
        Value::Int(i) if i.as_u64().is_none() => Err(RequestError::NotUnsigned(*i)),
        Value::List(xs) | Value::Tuple(xs) => xs.iter().try_for_each(unsigned),
        Value::IntList(xs) => xs.iter().try_for_each(|i| unsigned(&Value::Int(*i))),
        Value::Dict(es) => es.iter().try_for_each(|(k, x)| unsigned(k).and_then(|()| unsigned(x))),
        Value::Struct(s) => s.fields.iter().try_for_each(unsigned),
        _ => Ok(()),
    }
}

/// An int of a decoded request as the core holds it (decoded requests are unsigned, see
/// [`Gen1Profile::decode_request`]).
pub fn unsigned_int(i: WireInt) -> u64 {
    i.as_u64().unwrap_or_default()
}

/// `MooncakeAgentMetadata`: the generation-1 pull, as the newest generation-1 revision's generated struct
/// (`crate::typed::generated::push`).
pub type AgentMetadata = newest_gen1::MooncakeAgentMetadata;

// ---- prefiller ----------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Entry {
    p_req_id: String,
    blocks: Vec<Vec<u64>>,
    ready: bool,
    /// `None`: never expires (pending, named by a pull, or kept after a failed write).
    expire: Option<Instant>,
}

#[derive(Debug)]
struct Gen1Exchange {
    peer: PeerId,
    meta: AgentMetadata,
    /// The ids named, up to the first unknown one.
    named: Vec<String>,
    /// Per named id, its blocks once it was seen ready: vLLM's sender holds each request's `SendBlockMeta`
    /// from the pull on, so a request that expires (its entry deleted) while the pull waits for another is
    /// still written from what it held.
    held: Vec<Option<Vec<Vec<u64>>>>,
    write: Option<WriteId>,
}

/// Where vLLM's sender stands in a pull's requests, taken in order.
enum Walk {
    /// At a request not ready yet.
    Waiting,
    /// At a ready request with fewer local blocks than the decoder asks for: the message fails there.
    Short,
    /// Past every request: the write can start.
    Ready,
}

impl Gen1Exchange {
    /// Takes the named requests in order as vLLM's sender does, checking each one's block count when
    /// `checks_counts` (`block_count_failure = fails-message`).
    fn walk(&self, checks_counts: bool) -> Walk {
        for (held, remote) in self.held.iter().zip(&self.meta.block_ids) {
            let Some(blocks) = held else { return Walk::Waiting };
            let local: usize = blocks.iter().map(Vec::len).sum();
            if checks_counts && !remote.is_empty() && local < remote.len() {
                return Walk::Short;
            }
        }
        Walk::Ready
    }
}

/// The generation-1 prefiller worker.
pub struct Gen1Prefiller {
    profile: Gen1Profile,
    planner: Producer,
    abort_timeout: Duration,
    /// By request id (the same on both sides).
    entries: HashMap<String, Entry>,
    exchanges: BTreeMap<u64, Gen1Exchange>,
    next_exchange: u64,
    writes: HashMap<WriteId, u64>,
    next_write: u64,
    transmits: VecDeque<Transmit>,
    events: VecDeque<PrefillerEvent>,
    pub(crate) stats: PrefillerStats,
}

impl Gen1Prefiller {
    /// `planner` holds the worker's own registered layout (its regions and block length).
    pub fn new(profile: Gen1Profile, planner: Producer) -> Self {
        Gen1Prefiller {
            abort_timeout: profile.abort_timeout,
            profile,
            planner,
            entries: HashMap::new(),
            exchanges: BTreeMap::new(),
            next_exchange: 1,
            writes: HashMap::new(),
            next_write: 1,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: PrefillerStats::default(),
        }
    }

    /// Overrides `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`.
    pub fn set_abort_timeout(&mut self, t: Duration) {
        self.abort_timeout = t;
    }

    /// The scheduler allocated request `req_id` (`reqs_to_send[id] = []`): a pending entry, which a pull waits
    /// on. An existing entry is replaced.
    pub fn request_allocated(&mut self, _now: Instant, p_req_id: &str, req_id: &str) {
        if self.entries.len() >= limits::MAX_PREFILLER_EXCHANGES && !self.entries.contains_key(req_id) {
            return;
        }
        self.entries.insert(
            req_id.to_string(),
            Entry { p_req_id: p_req_id.to_string(), blocks: vec![], ready: false, expire: None },
        );
    }

    /// Its blocks are ready: they may be pulled until `now + abort timeout`. vLLM looks the entry up without a
    /// default (a request never allocated is an error there); it is ignored here.
    pub fn request_finished(&mut self, now: Instant, p_req_id: &str, req_id: &str, blocks: Vec<Vec<u64>>) {
        let Some(e) = self.entries.get_mut(req_id) else { return };
        e.p_req_id = p_req_id.to_string();
        e.blocks = blocks;
        e.ready = true;
        e.expire = Some(now + self.abort_timeout);
        for x in self.exchanges.values_mut().filter(|x| x.write.is_none()) {
            for (d, h) in x.named.iter().zip(x.held.iter_mut()) {
                if d == req_id && h.is_none() {
                    *h = Some(e.blocks.clone());
                }
            }
        }
        self.drive(now);
    }

    /// The request ended without a transfer: vLLM frees its blocks and leaves the pending entry behind, so a
    /// later pull of it waits forever. The reference peer does the same.
    pub(crate) fn request_aborted(&mut self, _now: Instant, _req_id: &str) {}

    /// A message from the ROUTER: `[routing_id, "", payload]`. Anything else is refused without a reply (vLLM's
    /// listener dies on it; the reference peer keeps serving).
    pub fn handle_frames(&mut self, now: Instant, mut frames: Vec<Vec<u8>>) {
        if frames.len() != 3 || frames[0].is_empty() {
            let peer = PeerId(frames.first().cloned().unwrap_or_default());
            self.events.push_back(PrefillerEvent::Rejected {
                peer,
                reason: format!(
                    "expected [routing_id, \"\", payload] (a REQ socket's 3 frames), got {} frames",
                    frames.len()
                ),
            });
            return;
        }
        let payload = frames.pop().expect("3 frames");
        let peer = PeerId(frames.swap_remove(0));
        self.handle_message(now, peer, &payload);
    }

    fn reply(&mut self, peer: PeerId, done: bool) {
        let payload = if done { self.profile.done.clone() } else { self.profile.error.clone() };
        self.transmits.push_back(Transmit { peer, payload, delimiter: true });
    }

    /// One pull.
    pub(crate) fn handle_message(&mut self, now: Instant, peer: PeerId, payload: &[u8]) {
        self.stats.messages += 1;
        let meta = match self.profile.decode_request(payload) {
            Ok(m) => m,
            Err(_) => {
                self.stats.errors += 1;
                return self.reply(peer, false);
            }
        };
        if self.exchanges.len() >= limits::MAX_PREFILLER_EXCHANGES {
            return self.reply(peer, false);
        }
        let mut named = vec![];
        for id in &meta.request_ids {
            match self.entries.get_mut(id) {
                Some(e) => {
                    e.expire = None;
                    named.push(id.clone());
                }
                None if self.profile.unknown_transfer == UnknownTransfer::DoneAtFirstUnknown => {
                    // vLLM stops at the first id it does not hold and answers done, writing nothing.
                    return self.reply(peer, true);
                }
                None => {
                    self.entries.insert(
                        id.clone(),
                        Entry { p_req_id: String::new(), blocks: vec![], ready: false, expire: None },
                    );
                    named.push(id.clone());
                }
            }
        }
        if named.len() != meta.block_ids.len() {
            self.stats.errors += 1;
            return self.reply(peer, false);
        }
        let id = self.next_exchange;
        self.next_exchange += 1;
        let held = named.iter().map(|d| self.entries.get(d).filter(|e| e.ready).map(|e| e.blocks.clone())).collect();
        self.exchanges.insert(id, Gen1Exchange { peer, meta, named, held, write: None });
        self.drive(now);
    }

    /// Walks each waiting exchange's requests in order, as vLLM's sender does: it waits at the first one not
    /// ready yet; a ready one with fewer local blocks than the decoder asks for fails the whole message there
    /// (vLLM's assertion: `trans_error`, nothing written), even while a later one is not ready; once every
    /// one is ready, the write starts.
    fn drive(&mut self, now: Instant) {
        let checks_counts = self.profile.block_count_failure == BlockCountFailure::FailsMessage;
        let (mut failed, mut due) = (vec![], vec![]);
        for (id, x) in self.exchanges.iter().filter(|(_, x)| x.write.is_none()) {
            match x.walk(checks_counts) {
                Walk::Waiting => {}
                Walk::Short => failed.push(*id),
                Walk::Ready => due.push(*id),
            }
        }
        for id in failed {
            self.fail(id);
        }
        for id in due {
            self.start_write(now, id);
        }
    }

    fn start_write(&mut self, now: Instant, id: u64) {
        let x = &self.exchanges[&id];
        let pull = Pull {
            remote_tp_size: 1,
            remote_tp_rank: 0,
            remote_pp_size: 1,
            req_blocks: vec![],
            layout: Arc::new(RegisteredLayout {
                kv_caches_base_addr: x.meta.kv_caches_base_addr.iter().map(|a| unsigned_int(*a) as i64).collect(),
                ..Default::default()
            }),
        };
        let ready: Vec<ReadyRequest> = x
            .named
            .iter()
            .zip(&x.held)
            .zip(&x.meta.block_ids)
            .map(|((d, held), remote)| ReadyRequest {
                d_req_id: d.clone(),
                local_block_ids: vec![held.iter().flatten().flatten().map(|b| *b as i64).collect()],
                remote_block_ids: vec![remote.iter().map(|b| unsigned_int(*b) as i64).collect()],
            })
            .collect();
        let regions = match self.planner.prepare(&pull) {
            Ok(r) => r,
            Err(_) => return self.fail(id),
        };
        let batch = build_whole_blocks(self.planner.rules.paired_block_order, &regions.local, &regions.remote, &ready);
        if !batch.err_reqs.is_empty() && self.profile.block_count_failure == BlockCountFailure::FailsMessage {
            // An assertion in vLLM: the whole message fails before any write.
            return self.fail(id);
        }
        if batch.descriptors.is_empty() && self.profile.empty_write == EmptyWrite::Skipped {
            return self.finish(now, id, 0);
        }
        let w = WriteId(self.next_write);
        self.next_write += 1;
        self.writes.insert(w, id);
        let x = self.exchanges.get_mut(&id).expect("exists");
        x.write = Some(w);
        self.stats.rounds += 1;
        let session = format!("{}:{}", x.meta.remote_hostname, x.meta.remote_port);
        self.events.push_back(PrefillerEvent::Write { id: w, session, descriptors: batch.descriptors });
    }

    fn fail(&mut self, id: u64) {
        if let Some(x) = self.exchanges.remove(&id) {
            self.stats.errors += 1;
            self.reply(x.peer, false);
        }
    }

    /// The transfer engine finished the message's write.
    pub fn write_complete(&mut self, now: Instant, id: WriteId, ret: i64) {
        if let Some(ex_id) = self.writes.remove(&id) {
            self.finish(now, ex_id, ret);
        }
    }

    fn finish(&mut self, now: Instant, ex_id: u64, ret: i64) {
        let Some(x) = self.exchanges.remove(&ex_id) else { return };
        if ret != 0 {
            // vLLM raises; the requests stay named (never expire) or, where the spec says so, expire as usual.
            if self.profile.transfer_failure == TransferFailure::KeptUntilExpiry {
                for d in &x.named {
                    if let Some(e) = self.entries.get_mut(d) {
                        e.expire = Some(now + self.abort_timeout);
                    }
                }
            }
            self.stats.errors += 1;
            return self.reply(x.peer, false);
        }
        // vLLM deletes each named entry, then reports them all finished sending. An entry already gone (it
        // expired while the pull waited, or is named twice) raises there: the reply is an error, and the
        // entries deleted before it are never reported (their blocks stay allocated: vLLM's leak, kept).
        let mut freed = vec![];
        for d in &x.meta.request_ids {
            match self.entries.remove(d) {
                Some(e) => freed.push((e.p_req_id, d.clone())),
                None => {
                    self.stats.errors += 1;
                    return self.reply(x.peer, false);
                }
            }
        }
        for (p_req_id, transfer_id) in freed {
            self.events.push_back(PrefillerEvent::FinishedSending { p_req_id, transfer_id, expired: false });
        }
        self.reply(x.peer, true);
    }

    /// Expires ready requests nobody named before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.ready && e.expire.is_some_and(|t| t < now))
            .map(|(k, _)| k.clone())
            .collect();
        for d in due {
            let e = self.entries.remove(&d).expect("present");
            self.stats.expired += 1;
            self.events.push_back(PrefillerEvent::FinishedSending {
                p_req_id: e.p_req_id,
                transfer_id: d,
                expired: true,
            });
        }
    }

    /// When [`Self::handle_timeout`] should run next (expiry is strict: just after). A pull waits for its
    /// requests without a bound (`ready_wait = unbounded`), so no timer for it.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.entries.values().filter(|e| e.ready).filter_map(|e| e.expire).map(|t| t + Duration::from_nanos(1)).min()
    }
    /// The next reply to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }
    /// The next thing to do or report, if any.
    pub fn poll_event(&mut self) -> Option<PrefillerEvent> {
        self.events.pop_front()
    }
    /// Transfers the prefiller tracks.
    pub fn tracked_transfers(&self) -> usize {
        self.entries.len()
    }
    pub(crate) fn open_exchanges(&self) -> usize {
        self.exchanges.len()
    }
}

// ---- decoder ------------------------------------------------------------------------------------------------

/// The generation-1 decoder worker's own facts.
#[derive(Clone, Debug)]
pub struct Gen1DecoderConfig {
    /// `get_ip()`, sent as `remote_hostname`.
    pub hostname: String,
    /// Its transfer-engine RPC port (`remote_port`).
    pub te_port: u64,
    /// This worker's tensor-parallel rank.
    pub tp_rank: u64,
    /// Its registered regions, sent as `kv_caches_base_addr`.
    pub kv_caches_base_addr: Vec<u64>,
}

#[derive(Debug)]
struct Gen1Pull {
    reqs: Vec<(String, bool)>,
    deadline: Instant,
}

/// The generation-1 decoder worker: one REQ per (scheduler step, prefiller address).
pub struct Gen1Decoder {
    profile: Gen1Profile,
    cfg: Gen1DecoderConfig,
    recv_timeout: Duration,
    exchanges: BTreeMap<ExchangeId, Gen1Pull>,
    next_exchange: u64,
    events: VecDeque<DecoderEvent>,
}

impl Gen1Decoder {
    /// A decoder for `profile`'s revision with this identity.
    pub fn new(profile: Gen1Profile, cfg: Gen1DecoderConfig) -> Self {
        Gen1Decoder {
            recv_timeout: profile.recv_timeout,
            profile,
            cfg,
            exchanges: BTreeMap::new(),
            next_exchange: 1,
            events: VecDeque::new(),
        }
    }

    /// Overrides the receive timeout (the REQ socket's `RCVTIMEO`).
    pub fn set_recv_timeout(&mut self, t: Duration) {
        self.recv_timeout = t;
    }

    /// One scheduler step: the requests grouped by prefiller address (`tcp://remote_host:remote_port+tp_rank`,
    /// first appearance first), one message per address carrying that step's requests in order. A request
    /// without a prefiller address is left waiting, as vLLM's scheduler leaves it.
    pub fn pull(&mut self, now: Instant, reqs: Vec<PullRequest>) {
        let mut groups: Vec<(String, Vec<PullRequest>)> = vec![];
        for r in reqs {
            let Some((host, port)) = r.remote.clone() else {
                self.events.push_back(DecoderEvent::Unsettled {
                    d_req_id: r.d_req_id,
                    reason: "no remote_host/remote_port to pull from".into(),
                });
                continue;
            };
            let addr = if host.contains(':') && !host.starts_with('[') {
                format!("tcp://[{host}]:{}", port + self.cfg.tp_rank)
            } else {
                format!("tcp://{host}:{}", port + self.cfg.tp_rank)
            };
            match groups.iter_mut().find(|(a, _)| *a == addr) {
                Some((_, g)) => g.push(r),
                None => groups.push((addr, vec![r])),
            }
        }
        for (addr, reqs) in groups {
            if self.exchanges.len() >= limits::MAX_DECODER_EXCHANGES {
                for r in reqs {
                    self.events.push_back(DecoderEvent::Unsettled {
                        d_req_id: r.d_req_id,
                        reason: "too many pulls in flight".into(),
                    });
                }
                continue;
            }
            let meta = AgentMetadata {
                remote_hostname: self.cfg.hostname.clone(),
                remote_port: WireInt::from_u64(self.cfg.te_port),
                request_ids: reqs.iter().map(|r| r.d_req_id.clone()).collect(),
                kv_caches_base_addr: self.cfg.kv_caches_base_addr.iter().map(|a| WireInt::from_u64(*a)).collect(),
                block_ids: reqs
                    .iter()
                    .map(|r| r.local_blocks.iter().flatten().map(|b| WireInt::from_u64(*b)).collect())
                    .collect(),
            };
            let id = ExchangeId(self.next_exchange);
            self.next_exchange += 1;
            let list: Vec<(String, bool)> =
                reqs.iter().map(|r| (r.d_req_id.clone(), r.local_blocks.iter().any(|g| !g.is_empty()))).collect();
            match self.profile.encode_request(&meta) {
                Ok(payload) => {
                    self.events.push_back(DecoderEvent::Open { id, addr, payload });
                    self.exchanges.insert(id, Gen1Pull { reqs: list, deadline: now + self.recv_timeout });
                }
                Err(e) => {
                    for (d, _) in list {
                        self.events.push_back(DecoderEvent::Unsettled {
                            d_req_id: d,
                            reason: format!("cannot encode the pull: {e}"),
                        });
                    }
                }
            }
        }
    }

    /// The reply on an exchange's REQ.
    pub fn handle_reply(&mut self, _now: Instant, id: ExchangeId, payload: &[u8]) {
        let Some(x) = self.exchanges.remove(&id) else { return };
        self.events.push_back(DecoderEvent::Close { id });
        if payload == self.profile.done.as_slice() {
            for (d, has_blocks) in x.reqs {
                if has_blocks || self.profile.free_only_success == FreeOnlySuccess::Finished {
                    self.events.push_back(DecoderEvent::Finished { d_req_id: d });
                }
            }
        } else {
            self.unsettle(x, &format!("reply {:?}", String::from_utf8_lossy(payload)));
        }
    }

    fn unsettle(&mut self, x: Gen1Pull, reason: &str) {
        // Failures are only logged in this generation (`failure_report = none`).
        for (d, _) in x.reqs {
            self.events.push_back(DecoderEvent::Unsettled { d_req_id: d, reason: reason.to_string() });
        }
    }

    pub(crate) fn exchange_failed(&mut self, id: ExchangeId, error: &str) {
        if let Some(x) = self.exchanges.remove(&id) {
            self.events.push_back(DecoderEvent::Close { id });
            self.unsettle(x, error);
        }
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<ExchangeId> = self.exchanges.iter().filter(|(_, x)| x.deadline <= now).map(|(k, _)| *k).collect();
        for id in due {
            self.exchange_failed(id, "Resource temporarily unavailable (receive timeout)");
        }
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.exchanges.values().map(|x| x.deadline).min()
    }
    /// The next thing to do or report, if any.
    pub fn poll_event(&mut self) -> Option<DecoderEvent> {
        self.events.pop_front()
    }
    pub(crate) fn pending_pulls(&self) -> usize {
        self.exchanges.values().map(|x| x.reqs.len()).sum()
    }
    pub(crate) fn open_exchanges(&self) -> usize {
        self.exchanges.len()
    }
}
