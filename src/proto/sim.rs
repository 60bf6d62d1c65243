//! An in-memory network for the sans-IO cores: decoders, prefillers and a bootstrap registry wired together
//! with a simulated clock and simulated memory, so tests (`tests/suite/proto_pair.rs`) can
//! run whole exchanges deterministically and check exactly which bytes landed where.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::decoder::{DecoderCore, DecoderEvent, ExchangeId};
use super::memory::{perform_write, Memory};
use super::planner::SenderPlanner;
use super::prefiller::{PeerId, PrefillerCore, PrefillerEvent};
use super::registry::Registry;

/// A prefiller in the simulated network: its core, address and memory, and what it did.
pub struct SimPrefiller<P: SenderPlanner> {
    /// The core.
    pub core: PrefillerCore<P>,
    /// Its ROUTER address.
    pub addr: String,
    /// Its registered memory.
    pub memory: Memory,
    /// Every write performed: (session, descriptor count, bytes).
    pub writes: Vec<(String, usize, u64)>,
    /// Return code the next writes get (tests set it to -1 to fail the transfer engine).
    pub write_result: i64,
    /// Requests reported finished sending, in order.
    pub finished_sending: Vec<String>,
}

/// A decoder in the simulated network: its core, transfer-engine session and memory, and what it saw.
pub struct SimDecoder {
    /// The core.
    pub core: DecoderCore,
    /// `host:te_port`, the session name prefillers write to.
    pub session: String,
    /// Its registered memory (where prefillers write).
    pub memory: Memory,
    /// Requests reported finished receiving.
    pub finished: Vec<String>,
    /// Requests failed, with the reason.
    pub failed: Vec<(String, String)>,
    /// Requests left unsettled.
    pub unsettled: Vec<String>,
    /// Payloads this decoder sent, per exchange, in order.
    pub sent: Vec<(ExchangeId, String, Vec<u8>)>,
    /// Replies it received.
    pub received: Vec<(ExchangeId, Vec<u8>)>,
}

/// The network: a clock, a registry, prefillers by address, decoders by index.
pub struct Net<P: SenderPlanner> {
    /// The simulated clock.
    pub now: Instant,
    /// The bootstrap registry.
    pub registry: Registry,
    /// The registry's address.
    pub bootstrap_addr: String,
    /// The prefillers, by index.
    pub prefillers: Vec<SimPrefiller<P>>,
    /// The decoders, by index.
    pub decoders: Vec<SimDecoder>,
    /// Exchange (decoder index, id) → (prefiller index, routing id).
    routes: HashMap<(usize, ExchangeId), (usize, PeerId)>,
    next_routing: u32,
    /// Prefillers that never answer (tests).
    pub silent: Vec<usize>,
}

impl<P: SenderPlanner> Net<P> {
    /// A network whose simulated clock starts at `start` (any instant; only differences matter).
    pub fn new(registry: Registry, bootstrap_addr: &str, start: Instant) -> Self {
        Net {
            now: start,
            registry,
            bootstrap_addr: bootstrap_addr.into(),
            prefillers: vec![],
            decoders: vec![],
            routes: HashMap::new(),
            next_routing: 0x6b8b_4567,
            silent: vec![],
        }
    }

    /// Adds a prefiller at `addr` (registered with the bootstrap registry); returns its index.
    pub fn add_prefiller(&mut self, core: PrefillerCore<P>, addr: &str, memory: Memory) -> usize {
        self.prefillers.push(SimPrefiller {
            core,
            addr: addr.into(),
            memory,
            writes: vec![],
            write_result: 0,
            finished_sending: vec![],
        });
        self.prefillers.len() - 1
    }

    /// Adds a decoder whose transfer engine is `session`; returns its index.
    pub fn add_decoder(&mut self, core: DecoderCore, session: &str, memory: Memory) -> usize {
        self.decoders.push(SimDecoder {
            core,
            session: session.into(),
            memory,
            finished: vec![],
            failed: vec![],
            unsettled: vec![],
            sent: vec![],
            received: vec![],
        });
        self.decoders.len() - 1
    }

    /// Delivers every pending output until nothing moves (no time passes).
    pub fn settle(&mut self) {
        loop {
            let mut moved = false;
            for di in 0..self.decoders.len() {
                while let Some(ev) = self.decoders[di].core.poll_event() {
                    moved = true;
                    self.on_decoder_event(di, ev);
                }
            }
            for pi in 0..self.prefillers.len() {
                while let Some(t) = self.prefillers[pi].core.poll_transmit() {
                    moved = true;
                    if self.silent.contains(&pi) {
                        continue;
                    }
                    let route = self.routes.iter().find(|(_, (p, r))| *p == pi && *r == t.peer).map(|(k, _)| *k);
                    if let Some((di, id)) = route {
                        self.decoders[di].received.push((id, t.payload.clone()));
                        let now = self.now;
                        self.decoders[di].core.handle_reply(now, id, &t.payload);
                    }
                }
                while let Some(ev) = self.prefillers[pi].core.poll_event() {
                    moved = true;
                    self.on_prefiller_event(pi, ev);
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn on_decoder_event(&mut self, di: usize, ev: DecoderEvent) {
        let now = self.now;
        match ev {
            DecoderEvent::Query { bootstrap_addr } => {
                let r = if bootstrap_addr == self.bootstrap_addr {
                    super::decoder::parse_query(&self.registry.query())
                } else {
                    Err(super::decoder::QueryError::Unanswered(format!("cannot connect to {bootstrap_addr}")))
                };
                self.decoders[di].core.query_result(now, &bootstrap_addr, r);
            }
            DecoderEvent::Open { id, addr, payload } => {
                self.decoders[di].sent.push((id, addr.clone(), payload.clone()));
                // libzmq connects in the background: a DEALER to nowhere just never gets an answer.
                if let Some(pi) = self.prefillers.iter().position(|p| p.addr == addr) {
                    let mut rid = vec![0u8];
                    rid.extend_from_slice(&self.next_routing.to_be_bytes());
                    self.next_routing += 1;
                    let peer = PeerId(rid);
                    self.routes.insert((di, id), (pi, peer.clone()));
                    self.prefillers[pi].core.handle_frames(now, vec![peer.0, payload]);
                }
            }
            DecoderEvent::Close { id } => {
                self.routes.remove(&(di, id));
            }
            DecoderEvent::Finished { d_req_id } => self.decoders[di].finished.push(d_req_id),
            DecoderEvent::Failed { d_req_id, reason, .. } => self.decoders[di].failed.push((d_req_id, reason)),
            DecoderEvent::Unsettled { d_req_id, .. } => self.decoders[di].unsettled.push(d_req_id),
        }
    }

    fn on_prefiller_event(&mut self, pi: usize, ev: PrefillerEvent) {
        let now = self.now;
        match ev {
            PrefillerEvent::Write { id, session, descriptors } => {
                let bytes: u64 = descriptors.iter().map(|d| d.len).sum();
                self.prefillers[pi].writes.push((session.clone(), descriptors.len(), bytes));
                let mut ret = self.prefillers[pi].write_result;
                if ret == 0 {
                    ret = match self.decoders.iter_mut().find(|d| d.session == session) {
                        Some(d) => perform_write(&self.prefillers[pi].memory, &mut d.memory, &descriptors),
                        None => -1,
                    };
                }
                self.prefillers[pi].core.write_complete(now, id, ret);
            }
            PrefillerEvent::FinishedSending { p_req_id, .. } => self.prefillers[pi].finished_sending.push(p_req_id),
            PrefillerEvent::Rejected { .. } => {}
        }
    }

    /// Moves the clock to the earliest timeout (at most `limit` ahead) and fires it. Returns false when
    /// nothing is scheduled within the limit.
    pub(crate) fn advance(&mut self, limit: Duration) -> bool {
        let next = self
            .prefillers
            .iter()
            .filter_map(|p| p.core.poll_timeout())
            .chain(self.decoders.iter().filter_map(|d| d.core.poll_timeout()))
            .min();
        match next {
            Some(t) if t <= self.now + limit => {
                self.now = self.now.max(t);
                let now = self.now;
                for p in &mut self.prefillers {
                    p.core.handle_timeout(now);
                }
                for d in &mut self.decoders {
                    d.core.handle_timeout(now);
                }
                self.settle();
                true
            }
            _ => false,
        }
    }

    /// Advances the clock by `d` exactly, firing everything due.
    pub fn sleep(&mut self, d: Duration) {
        let until = self.now + d;
        while self.advance(until.saturating_duration_since(self.now)) {}
        self.now = until;
        for p in &mut self.prefillers {
            p.core.handle_timeout(until);
        }
        for dd in &mut self.decoders {
            dd.core.handle_timeout(until);
        }
        self.settle();
    }
}
