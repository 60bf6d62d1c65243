//! The pull-family prefiller worker: answers metadata queries with its metadata (encoded once) and completions
//! with `ACK`, freeing the request a completion names; frees what nobody completes after the abort timeout.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::layout::{MetadataError, PullPrefillerConfig};
use super::PullProfile;
use crate::codec::Value;
use crate::limits;
use crate::proto::prefiller::{PeerId, PrefillerEvent, PrefillerStats, Transmit, WriteId};
use crate::proto::PrefillerMachine;

/// A request whose prefill finished, waiting for its completion.
#[derive(Debug)]
struct Tracked {
    p_req_id: String,
    expire: Instant,
}

/// The pull-family prefiller worker of generation 1.
pub struct PullPrefiller {
    profile: PullProfile,
    config: PullPrefillerConfig,
    metadata: Vec<u8>,
    abort_timeout: Duration,
    /// By request id (the id the decoder's completion names).
    tracked: HashMap<String, Tracked>,
    /// Completions counted per request, for port tables that ask for several.
    done_counts: HashMap<String, u64>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<PrefillerEvent>,
    stats: PrefillerStats,
}

impl PullPrefiller {
    /// A worker advertising `cfg` (its metadata is encoded here, once).
    pub fn new(profile: PullProfile, cfg: &PullPrefillerConfig) -> Result<PullPrefiller, MetadataError> {
        let metadata = cfg.encode_metadata(&profile)?;
        Ok(PullPrefiller {
            abort_timeout: profile.abort_timeout,
            profile,
            config: cfg.clone(),
            metadata,
            tracked: HashMap::new(),
            done_counts: HashMap::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: PrefillerStats::default(),
        })
    }

    /// The metadata every query gets.
    pub fn metadata(&self) -> &[u8] {
        &self.metadata
    }

    /// Advertises `port` as its `handshake_port` (the port its ROUTER bound): the metadata is encoded again.
    pub fn set_handshake_port(&mut self, port: u64) -> Result<(), MetadataError> {
        let mut config = self.config.clone();
        config.handshake_port = port;
        self.metadata = config.encode_metadata(&self.profile)?;
        self.config = config;
        Ok(())
    }

    /// Overrides `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`.
    pub fn set_abort_timeout(&mut self, t: Duration) {
        self.abort_timeout = t;
    }

    /// The request's prefill finished (vLLM's `request_finished` with blocks to send): it is held for a
    /// completion naming `req_id` until `now + abort timeout`.
    pub fn request_finished(&mut self, now: Instant, p_req_id: &str, req_id: &str) {
        if self.tracked.len() >= limits::MAX_PULL_TRACKED && !self.tracked.contains_key(req_id) {
            self.free(p_req_id.to_string(), req_id, true);
            return;
        }
        let t = Tracked { p_req_id: p_req_id.to_string(), expire: now + self.abort_timeout };
        self.tracked.insert(req_id.to_string(), t);
    }

    /// The request ended without a transfer: it is no longer held (nothing is reported).
    pub fn request_aborted(&mut self, _now: Instant, req_id: &str) {
        self.tracked.remove(req_id);
        self.done_counts.remove(req_id);
    }

    fn free(&mut self, p_req_id: String, req_id: &str, expired: bool) {
        self.done_counts.remove(req_id);
        self.events.push_back(PrefillerEvent::FinishedSending { p_req_id, transfer_id: req_id.to_string(), expired });
    }

    fn reject(&mut self, peer: PeerId, reason: String) {
        self.stats.errors += 1;
        self.events.push_back(PrefillerEvent::Rejected { peer, reason });
    }

    /// A message from the ROUTER: the routing id, then frames of which exactly one must be non-empty (the
    /// payload). Anything else, an undecodable payload, an unknown tag or a completion missing its fields gets no
    /// reply (the release logs it), reported as [`PrefillerEvent::Rejected`].
    pub fn handle_frames(&mut self, _now: Instant, mut frames: Vec<Vec<u8>>) {
        self.stats.messages += 1;
        if frames.len() < 2 {
            let peer = PeerId(frames.pop().unwrap_or_default());
            return self.reject(peer, format!("invalid message format: {} frames", frames.len() + 1));
        }
        let peer = PeerId(frames.remove(0));
        let mut payloads: Vec<Vec<u8>> = frames.into_iter().filter(|f| !f.is_empty()).collect();
        if payloads.len() != 1 {
            return self.reject(peer, format!("invalid message format: {} payload frames", payloads.len()));
        }
        let payload = payloads.pop().unwrap_or_default();
        let msg = match self.profile.decode_untyped(&payload) {
            Ok(m) => m,
            Err(e) => return self.reject(peer, e.msgspec_message()),
        };
        match msg.first() {
            Some(Value::Bytes(t)) if *t == self.profile.get_meta_tag => {
                let payload = self.metadata.clone();
                self.transmits.push_back(Transmit { peer, payload, delimiter: true });
            }
            Some(Value::Bytes(t)) if *t == self.profile.done_tag => self.handle_done(peer, &msg),
            Some(_) => self.reject(peer, "unexpected message".into()),
            None => self.reject(peer, "an empty tuple has no element 0".into()),
        }
    }

    /// A completion: frees the request (at once with an empty port table; else once the table's count for this
    /// worker's port is reached), then `ACK`.
    fn handle_done(&mut self, peer: PeerId, msg: &[Value]) {
        let (Some(Value::Str(req_id)), Some(table)) = (msg.get(1), msg.get(2)) else {
            return self.reject(peer, "a completion without a request id and a port table".into());
        };
        let req_id = req_id.clone();
        let entries: &[(Value, Value)] = match table {
            Value::Dict(d) => d,
            Value::None => &[],
            _ => return self.reject(peer, "the port table is not a dict".into()),
        };
        let due = if entries.is_empty() {
            true
        } else {
            let own =
                entries.iter().find(|(k, _)| k.as_int().and_then(|i| i.as_u64()) == Some(self.config.handshake_port));
            let Some(need) = own.and_then(|(_, v)| num(v)) else {
                return self
                    .reject(peer, format!("the port table has no count for port {}", self.config.handshake_port));
            };
            let n = self.done_counts.entry(req_id.clone()).or_insert(0);
            *n += 1;
            *n as i64 >= need
        };
        if due {
            self.done_counts.remove(&req_id);
            match self.tracked.remove(&req_id) {
                Some(t) => self.free(t.p_req_id, &req_id, false),
                // The release logs a completion of a request it does not track, and acknowledges it.
                None => self.stats.errors += 1,
            }
        }
        let payload = self.profile.ack.clone();
        self.transmits.push_back(Transmit { peer, payload, delimiter: true });
    }

    /// Frees, as expired, what nobody completed within the abort timeout.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut due: Vec<(String, Instant)> =
            self.tracked.iter().filter(|(_, t)| t.expire <= now).map(|(id, t)| (id.clone(), t.expire)).collect();
        due.sort_by_key(|(id, at)| (*at, id.clone()));
        for (id, _) in due {
            if let Some(t) = self.tracked.remove(&id) {
                self.stats.expired += 1;
                self.free(t.p_req_id, &id, true);
            }
        }
    }

    /// When [`PullPrefiller::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.tracked.values().map(|t| t.expire).min()
    }

    /// The next reply to send (`[routing id, "", payload]`).
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next thing to report.
    pub fn poll_event(&mut self) -> Option<PrefillerEvent> {
        self.events.pop_front()
    }

    /// Requests held for a completion.
    pub fn tracked_transfers(&self) -> usize {
        self.tracked.len()
    }
}

/// The `num` of an untyped port-table entry (`{"num": n, "host": h}`).
fn num(entry: &Value) -> Option<i64> {
    let d = entry.as_dict()?;
    d.iter().find(|(k, _)| k.as_str() == Some("num")).and_then(|(_, v)| v.as_int()?.as_i64())
}

impl PrefillerMachine for PullPrefiller {
    fn handle_frames(&mut self, now: Instant, frames: Vec<Vec<u8>>) {
        PullPrefiller::handle_frames(self, now, frames)
    }
    /// Allocation changes nothing: a request is held from its `request_finished`.
    fn request_allocated(&mut self, _now: Instant, _p_req_id: &str, _transfer_id: &str) {}
    fn request_finished(&mut self, now: Instant, p_req_id: &str, transfer_id: &str, _blocks: Vec<Vec<u64>>) {
        PullPrefiller::request_finished(self, now, p_req_id, transfer_id)
    }
    fn request_aborted(&mut self, now: Instant, transfer_id: &str) {
        PullPrefiller::request_aborted(self, now, transfer_id)
    }
    fn clear_layout_cache(&mut self) {}
    /// The prefiller writes nothing: decoders read.
    fn write_complete(&mut self, _now: Instant, _id: WriteId, _ret: i64) {}
    fn handle_timeout(&mut self, now: Instant) {
        PullPrefiller::handle_timeout(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        PullPrefiller::poll_timeout(self)
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        PullPrefiller::poll_transmit(self)
    }
    fn poll_event(&mut self) -> Option<PrefillerEvent> {
        PullPrefiller::poll_event(self)
    }
    fn tracked_transfers(&self) -> usize {
        PullPrefiller::tracked_transfers(self)
    }
    /// Every query is answered at once: no exchange stays open.
    fn open_exchanges(&self) -> usize {
        0
    }
    fn cached_layouts(&self) -> usize {
        0
    }
    fn stats(&self) -> PrefillerStats {
        self.stats.clone()
    }
    fn set_abort_timeout(&mut self, t: Duration) {
        PullPrefiller::set_abort_timeout(self, t)
    }
    /// Advertises the bound port as `handshake_port` when the configuration left it 0.
    fn router_bound(&mut self, endpoint: &str) {
        let port = endpoint.rsplit(':').next().and_then(|p| p.parse::<u64>().ok());
        if let (0, Some(port)) = (self.config.handshake_port, port) {
            // The same layout encoded at start: it encodes again.
            let _ = self.set_handshake_port(port);
        }
    }
}
