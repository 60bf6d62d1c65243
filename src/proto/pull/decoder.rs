//! The pull-family decoder worker: per request, the prefiller's metadata (queried once per prefiller engine and
//! port, then cached), one engine read of every block pair, then the completion — also after a failed read —
//! and its `ACK`. Requests are served one at a time, in order, as the release's receiving thread does.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::layout::{MetadataError, PullLayout};
use super::{MetadataShape, PullProfile, METADATA};
use crate::codec::Value;
use crate::limits;
use crate::proto::decoder::ExchangeId;
use crate::spec::behaviour::FailedRead;

/// One request to pull: the decoder's blocks, the prefiller's, and where the prefiller is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullRead {
    /// The decoder's request id (what it reports).
    pub d_req_id: String,
    /// The prefiller's request id (`remote_request_id`), named in the completion.
    pub remote_request_id: String,
    /// The decoder's destination blocks, per KV group.
    pub local_blocks: Vec<Vec<u64>>,
    /// The prefiller's blocks, per KV group, read pairwise with `local_blocks`.
    pub remote_blocks: Vec<Vec<u64>>,
    /// The prefiller engine (`remote_engine_id`): metadata is cached per engine and port.
    pub engine_id: String,
    /// The prefiller's host (`remote_host`); also the host of the read's session.
    pub remote_host: String,
    /// The prefiller's side-channel base port (`remote_port`); the decoder adds its TP rank.
    pub remote_port: u64,
}

/// One copy of a read: `len` bytes from the prefiller's `remote` address into the decoder's `local` address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadDescriptor {
    /// Destination, in the decoder's registered memory.
    pub local: u64,
    /// Source, in the prefiller's registered memory.
    pub remote: u64,
    /// Bytes.
    pub len: u64,
}

/// Identifies one engine read the driver performs for the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReadId(pub u64);

/// What the decoder asks its driver to do, or reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullDecoderEvent {
    /// Open a REQ to `addr` (`tcp://host:port`), send `payload`, and hand its reply to
    /// [`PullDecoder::handle_reply`] (or its failure to [`PullDecoder::exchange_failed`]).
    Open {
        /// The exchange.
        id: ExchangeId,
        /// The prefiller worker's endpoint.
        addr: String,
        /// The message.
        payload: Vec<u8>,
    },
    /// The exchange is over (its reply came, or it timed out): close its socket.
    Close {
        /// The exchange.
        id: ExchangeId,
    },
    /// Read these copies in one engine batch from `session` (`host:te_rpc_port`), then call
    /// [`PullDecoder::read_complete`] with the engine's return code (negative = failure).
    Read {
        /// The read.
        id: ReadId,
        /// The prefiller's transfer-engine session.
        session: String,
        /// The copies.
        descriptors: Vec<ReadDescriptor>,
    },
    /// The request finished receiving (also after a failed read: see `behaviour.failed_read`).
    Finished {
        /// The decoder's request id.
        d_req_id: String,
    },
    /// The request's read failed and the revision reports its blocks as load errors (`failed_read =
    /// load-errors`).
    Failed {
        /// The decoder's request id.
        d_req_id: String,
        /// Why.
        reason: String,
        /// Its destination blocks of KV group 0 (what the release reports).
        invalid_blocks: Vec<u64>,
    },
}

/// Counters of a decoder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullDecoderStats {
    /// Metadata queries sent.
    pub queries: u64,
    /// Engine reads asked for.
    pub reads: u64,
    /// Requests whose read failed (or could not be planned).
    pub failed_reads: u64,
    /// Replies that did not come in time.
    pub timeouts: u64,
}

/// What a prefiller worker advertised, as the decoder plans with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RemoteMeta {
    pub(crate) te_rpc_port: u64,
    /// Flat: one base address per region.
    pub(crate) flat: Vec<u64>,
    /// Per layer: `[K, V]` base addresses.
    pub(crate) addrs: Vec<Vec<u64>>,
    /// Per layer: the block strides.
    pub(crate) strides: Vec<Vec<u64>>,
}

fn ints(v: Option<&Value>) -> Option<Vec<u64>> {
    v?.items()?.map(|x| x.as_int().and_then(|i| i.as_u64())).collect()
}

fn nested(v: Option<&Value>) -> Option<Vec<Vec<u64>>> {
    v?.items()?.map(|x| ints(Some(&x))).collect()
}

impl RemoteMeta {
    /// The metadata reply, decoded with the revision's codec.
    fn decode(profile: &PullProfile, payload: &[u8]) -> Result<RemoteMeta, String> {
        let v = profile.codec().decode(METADATA, payload).map_err(|e| e.msgspec_message())?;
        let te_rpc_port = v.field("te_rpc_port").and_then(|p| p.as_int()?.as_u64()).ok_or("te_rpc_port")?;
        let addrs = v.field("kv_caches_base_addr");
        let bad = || "the metadata's addresses are not unsigned".to_string();
        Ok(match profile.shape {
            MetadataShape::Flat => RemoteMeta { te_rpc_port, flat: ints(addrs).ok_or_else(bad)?, ..Default::default() },
            MetadataShape::PerLayer => RemoteMeta {
                te_rpc_port,
                flat: vec![],
                addrs: nested(addrs).ok_or_else(bad)?,
                strides: nested(v.field("block_strides")).ok_or_else(bad)?,
            },
        })
    }
}

/// Runs of pairs contiguous on both sides: `(remote first, local first, length)`.
pub(crate) fn runs(remote: &[u64], local: &[u64]) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = vec![];
    for (&r, &l) in remote.iter().zip(local) {
        match out.last_mut() {
            Some((r0, l0, n)) if r0.checked_add(*n) == Some(r) && l0.checked_add(*n) == Some(l) => *n += 1,
            _ => out.push((r, l, 1)),
        }
    }
    out
}

/// One descriptor per run, in a region pair; `None` on overflow.
fn region_copies(
    (local_base, local_len): (u64, u64),
    (remote_base, remote_stride): (u64, u64),
    runs: &[(u64, u64, u64)],
    out: &mut Vec<ReadDescriptor>,
) -> Option<()> {
    for &(r0, l0, n) in runs {
        let local = local_base.checked_add(l0.checked_mul(local_len)?)?;
        let remote = remote_base.checked_add(r0.checked_mul(remote_stride)?)?;
        out.push(ReadDescriptor { local, remote, len: local_len.checked_mul(n)? });
    }
    Some(())
}

const OVERFLOW: &str = "a block address overflows";

fn check_count(regions: usize, runs: usize) -> Result<(), String> {
    match regions.checked_mul(runs) {
        Some(n) if n <= limits::MAX_PULL_DESCRIPTORS => Ok(()),
        _ => Err(format!("more than {} descriptors", limits::MAX_PULL_DESCRIPTORS)),
    }
}

/// vllm-ascend 0.18.0's plan: group 0's blocks, the prefiller's last ones when it has more; regions zipped by
/// position; both sides' blocks placed with the decoder's block length.
pub(crate) fn plan_flat(
    layout: &PullLayout,
    meta: &RemoteMeta,
    read: &PullRead,
) -> Result<Vec<ReadDescriptor>, String> {
    let local = read.local_blocks.first().map(Vec::as_slice).unwrap_or_default();
    let remote = read.remote_blocks.first().map(Vec::as_slice).unwrap_or_default();
    if local.len() > remote.len() {
        return Err(format!("{} local blocks, {} remote blocks", local.len(), remote.len()));
    }
    let runs = runs(&remote[remote.len() - local.len()..], local);
    let regions = layout.base_addrs.len().min(meta.flat.len());
    check_count(regions, runs.len())?;
    let mut out = vec![];
    for k in 0..regions {
        let len = layout.block_lens[k];
        region_copies((layout.base_addrs[k], len), (meta.flat[k], len), &runs, &mut out).ok_or(OVERFLOW)?;
    }
    Ok(out)
}

/// vllm-ascend 0.23.0.post1's plan: per KV group (both lists up to the shorter one), per layer of the decoder's
/// own, per region of the layer (K, V): the prefiller's region of the same layer index and position, placed with
/// its advertised stride (a stride that is not the block length splits every run into single blocks).
pub(crate) fn plan_per_layer(
    layout: &PullLayout,
    meta: &RemoteMeta,
    read: &PullRead,
) -> Result<Vec<ReadDescriptor>, String> {
    let layers = layout.layers();
    let mut groups: Vec<i64> = layers.iter().map(|l| l.group).collect();
    groups.dedup();
    groups.sort_unstable();
    groups.dedup();
    let mut out = vec![];
    for g in groups {
        let pick = |b: &[Vec<u64>]| usize::try_from(g).ok().and_then(|g| b.get(g)).cloned().unwrap_or_default();
        let (local, remote) = (pick(&read.local_blocks), pick(&read.remote_blocks));
        let n = local.len().min(remote.len());
        if n == 0 {
            continue;
        }
        let grouped = runs(&remote[..n], &local[..n]);
        let single: Vec<(u64, u64, u64)> = remote[..n].iter().zip(&local[..n]).map(|(&r, &l)| (r, l, 1)).collect();
        check_count(layout.base_addrs.len(), n)?;
        for layer in layers.iter().filter(|l| l.group == g) {
            for (ci, &r) in layer.regions.iter().enumerate() {
                let at = |t: &Vec<Vec<u64>>| t.get(layer.index as usize).and_then(|x| x.get(ci)).copied();
                let (Some(base), Some(stride)) = (at(&meta.addrs), at(&meta.strides)) else {
                    return Err(format!("the prefiller advertises no region {ci} of layer {}", layer.index));
                };
                let len = layout.block_lens[r];
                let runs = if stride == len { &grouped } else { &single };
                region_copies((layout.base_addrs[r], len), (base, stride), runs, &mut out).ok_or(OVERFLOW)?;
            }
        }
    }
    Ok(out)
}

#[derive(Debug)]
enum Phase {
    /// Waiting for the metadata.
    Meta(ExchangeId, Instant),
    /// Waiting for the engine.
    Reading(ReadId),
    /// Waiting for the `ACK`.
    Done(ExchangeId, Instant),
}

#[derive(Debug)]
struct Active {
    read: PullRead,
    addr: String,
    phase: Phase,
    /// Why its read failed, once it did.
    failure: Option<String>,
}

/// The pull-family decoder worker of generation 1.
pub struct PullDecoder {
    profile: PullProfile,
    tp_rank: u64,
    layout: PullLayout,
    reply_timeout: Duration,
    queue: VecDeque<PullRead>,
    active: Option<Active>,
    /// By (engine id, endpoint).
    metas: HashMap<(String, String), RemoteMeta>,
    next_exchange: u64,
    next_read: u64,
    events: VecDeque<PullDecoderEvent>,
    stats: PullDecoderStats,
}

impl PullDecoder {
    /// A decoder worker of TP rank `tp_rank` with its own registered `layout`.
    pub fn new(profile: PullProfile, tp_rank: u64, layout: PullLayout) -> Result<PullDecoder, MetadataError> {
        layout.check()?;
        Ok(PullDecoder {
            reply_timeout: profile.reply_timeout,
            profile,
            tp_rank,
            layout,
            queue: VecDeque::new(),
            active: None,
            metas: HashMap::new(),
            next_exchange: 1,
            next_read: 1,
            events: VecDeque::new(),
            stats: PullDecoderStats::default(),
        })
    }

    /// Overrides how long each reply is waited for.
    pub fn set_reply_timeout(&mut self, t: Duration) {
        self.reply_timeout = t;
    }

    /// One scheduler step's requests: queued, then served one at a time.
    pub fn pull(&mut self, now: Instant, reads: Vec<PullRead>) {
        for r in reads {
            if self.queue.len() >= limits::MAX_PULL_QUEUE {
                let reason = format!("more than {} requests waiting", limits::MAX_PULL_QUEUE);
                let invalid_blocks = r.local_blocks.first().cloned().unwrap_or_default();
                self.events.push_back(PullDecoderEvent::Failed { d_req_id: r.d_req_id, reason, invalid_blocks });
                continue;
            }
            self.queue.push_back(r);
        }
        self.start_next(now);
    }

    fn start_next(&mut self, now: Instant) {
        while self.active.is_none() {
            let Some(read) = self.queue.pop_front() else { return };
            let addr = format!("tcp://{}:{}", read.remote_host, read.remote_port.saturating_add(self.tp_rank));
            let nothing = read.local_blocks.iter().all(Vec::is_empty);
            let key = (read.engine_id.clone(), addr.clone());
            self.active = Some(Active { read, addr, phase: Phase::Reading(ReadId(0)), failure: None });
            if nothing {
                // A full prefix-cache hit reads nothing; the completion still frees the prefiller's blocks.
                self.send_done(now);
            } else if let Some(meta) = self.metas.get(&key).cloned() {
                self.begin_read(now, &meta);
            } else {
                self.stats.queries += 1;
                let id = self.exchange(now, self.profile.encode_get_meta());
                self.set_phase(Phase::Meta(id, now + self.reply_timeout));
            }
        }
    }

    fn set_phase(&mut self, phase: Phase) {
        if let Some(a) = &mut self.active {
            a.phase = phase;
        }
    }

    /// Opens an exchange of the active request with `payload`.
    fn exchange(&mut self, _now: Instant, payload: Vec<u8>) -> ExchangeId {
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        let addr = self.active.as_ref().map(|a| a.addr.clone()).unwrap_or_default();
        self.events.push_back(PullDecoderEvent::Open { id, addr, payload });
        id
    }

    fn begin_read(&mut self, now: Instant, meta: &RemoteMeta) {
        let Some(a) = &self.active else { return };
        let plan = match self.profile.shape {
            MetadataShape::Flat => plan_flat(&self.layout, meta, &a.read),
            MetadataShape::PerLayer => plan_per_layer(&self.layout, meta, &a.read),
        };
        match plan {
            // Nothing to copy: the release makes no engine call and counts the read done.
            Ok(descriptors) if descriptors.is_empty() => self.send_done(now),
            Ok(descriptors) => {
                let id = ReadId(self.next_read);
                self.next_read += 1;
                self.stats.reads += 1;
                let session = format!("{}:{}", a.read.remote_host, meta.te_rpc_port);
                self.events.push_back(PullDecoderEvent::Read { id, session, descriptors });
                self.set_phase(Phase::Reading(id));
            }
            Err(reason) => self.read_failed(now, reason),
        }
    }

    fn read_failed(&mut self, now: Instant, reason: String) {
        self.stats.failed_reads += 1;
        if let Some(a) = &mut self.active {
            a.failure = Some(reason);
        }
        self.send_done(now);
    }

    fn send_done(&mut self, now: Instant) {
        let Some(a) = &self.active else { return };
        let payload = self.profile.encode_done(&a.read.remote_request_id);
        let id = self.exchange(now, payload);
        self.set_phase(Phase::Done(id, now + self.reply_timeout));
    }

    /// The request is over: reported as the revision does, and the next one starts.
    fn finish(&mut self, now: Instant) {
        let Some(a) = self.active.take() else { return };
        self.events.push_back(PullDecoderEvent::Finished { d_req_id: a.read.d_req_id.clone() });
        if let (Some(reason), FailedRead::LoadErrors) = (a.failure, self.profile.failed_read) {
            let invalid_blocks = a.read.local_blocks.first().cloned().unwrap_or_default();
            self.events.push_back(PullDecoderEvent::Failed { d_req_id: a.read.d_req_id, reason, invalid_blocks });
        }
        self.start_next(now);
    }

    /// The exchange the active request waits on, if it is `id`: (is the metadata query).
    fn waiting_on(&self, id: ExchangeId) -> Option<bool> {
        match self.active.as_ref()?.phase {
            Phase::Meta(x, _) if x == id => Some(true),
            Phase::Done(x, _) if x == id => Some(false),
            _ => None,
        }
    }

    /// A reply on exchange `id`: the metadata (then the read), or the completion's answer (then the request is
    /// over; anything but `ACK` is logged by the release and changes nothing). A reply to nothing is ignored.
    pub fn handle_reply(&mut self, now: Instant, id: ExchangeId, payload: &[u8]) {
        let Some(is_meta) = self.waiting_on(id) else { return };
        self.events.push_back(PullDecoderEvent::Close { id });
        if !is_meta {
            return self.finish(now);
        }
        match RemoteMeta::decode(&self.profile, payload) {
            Ok(meta) => {
                if let Some(a) = &self.active {
                    self.metas.insert((a.read.engine_id.clone(), a.addr.clone()), meta.clone());
                }
                self.begin_read(now, &meta);
            }
            Err(e) => self.read_failed(now, format!("metadata: {e}")),
        }
    }

    /// The exchange `id` failed (its socket errored): a failed metadata query fails the read (the completion
    /// is still sent); a failed completion ends the request.
    pub fn exchange_failed(&mut self, now: Instant, id: ExchangeId, error: &str) {
        match self.waiting_on(id) {
            Some(true) => self.read_failed(now, format!("metadata: {error}")),
            Some(false) => self.finish(now),
            None => {}
        }
    }

    /// The engine finished read `id` with `ret` (negative: it failed); the completion follows either way.
    pub fn read_complete(&mut self, now: Instant, id: ReadId, ret: i64) {
        match self.active.as_ref().map(|a| &a.phase) {
            Some(Phase::Reading(x)) if *x == id && ret < 0 => self.read_failed(now, format!("read returned {ret}")),
            Some(Phase::Reading(x)) if *x == id => self.send_done(now),
            _ => {}
        }
    }

    /// Time has passed: a reply not in time fails as a socket error would.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due = match self.active.as_ref().map(|a| &a.phase) {
            Some(Phase::Meta(id, at) | Phase::Done(id, at)) if *at <= now => *id,
            _ => return,
        };
        self.stats.timeouts += 1;
        self.events.push_back(PullDecoderEvent::Close { id: due });
        self.exchange_failed(now, due, "no reply in time");
    }

    /// When [`PullDecoder::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.active.as_ref()?.phase {
            Phase::Meta(_, at) | Phase::Done(_, at) => Some(at),
            Phase::Reading(_) => None,
        }
    }

    /// The next thing to do or report.
    pub fn poll_event(&mut self) -> Option<PullDecoderEvent> {
        self.events.pop_front()
    }

    /// Requests not yet over (waiting or in progress).
    pub fn pending_pulls(&self) -> usize {
        self.queue.len() + usize::from(self.active.is_some())
    }

    /// Exchanges waiting for a reply (0 or 1).
    pub fn open_exchanges(&self) -> usize {
        usize::from(self.active.as_ref().is_some_and(|a| !matches!(a.phase, Phase::Reading(_))))
    }

    /// The counters.
    pub fn stats(&self) -> &PullDecoderStats {
        &self.stats
    }
}
