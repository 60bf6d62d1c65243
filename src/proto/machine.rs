//! What a driver needs of a prefiller or decoder state machine, whichever generation it speaks: the
//! reference peer (`reference-impl/`) and the simulated network drive these traits, so one driver serves the
//! generation-2 cores ([`PrefillerCore`], [`DecoderCore`]) and the generation-1 ones ([`Gen1Prefiller`],
//! [`Gen1Decoder`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::decoder::{DecoderCore, DecoderEvent, EngineTable, ExchangeId, LeaseStats, PullRequest, QueryError};
use super::gen1::{Gen1Decoder, Gen1Prefiller};
use super::lease::LeaseRequest;
use super::planner::SenderPlanner;
use super::prefiller::{PrefillerCore, PrefillerEvent, PrefillerStats, Transmit, WriteId};

/// A prefiller state machine.
pub trait PrefillerMachine: Send + 'static {
    /// A message from the ROUTER (routing id first).
    fn handle_frames(&mut self, now: Instant, frames: Vec<Vec<u8>>);
    /// The scheduler allocated a request to be pulled under `transfer_id` (generation 1: the request id).
    fn request_allocated(&mut self, now: Instant, p_req_id: &str, transfer_id: &str);
    /// Its blocks are ready.
    fn request_finished(&mut self, now: Instant, p_req_id: &str, transfer_id: &str, blocks: Vec<Vec<u64>>);
    /// The scheduler aborted the request.
    fn request_aborted(&mut self, now: Instant, transfer_id: &str);
    /// Forgets cached peer layouts (a no-op where the revision caches none).
    fn clear_layout_cache(&mut self);
    /// A write the core asked for finished with the engine's return code `ret` (0 = success).
    fn write_complete(&mut self, now: Instant, id: WriteId, ret: i64);
    /// Time has passed: expire what is due (call at [`PrefillerMachine::poll_timeout`]).
    fn handle_timeout(&mut self, now: Instant);
    /// When `handle_timeout` is next due.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The next reply to send.
    fn poll_transmit(&mut self) -> Option<Transmit>;
    /// The next thing to do or report.
    fn poll_event(&mut self) -> Option<PrefillerEvent>;
    /// Transfers tracked.
    fn tracked_transfers(&self) -> usize;
    /// Pulls being served.
    fn open_exchanges(&self) -> usize;
    /// Peer layouts cached.
    fn cached_layouts(&self) -> usize;
    /// The counters.
    fn stats(&self) -> PrefillerStats;
    /// Overrides `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`.
    fn set_abort_timeout(&mut self, t: Duration);
    /// The ROUTER is bound at `endpoint` (`tcp://host:port`), before any message: a machine that advertises its
    /// own port (the pull family's `handshake_port`) learns it here. Nothing by default.
    fn router_bound(&mut self, _endpoint: &str) {}
}

impl<P> PrefillerMachine for PrefillerCore<P>
where
    P: SenderPlanner + Send + 'static,
    P::Prepared: Send,
    P::Pull: Send,
    P::PrepareKey: Send,
    P::Error: Send,
{
    fn handle_frames(&mut self, now: Instant, frames: Vec<Vec<u8>>) {
        PrefillerCore::handle_frames(self, now, frames)
    }
    fn request_allocated(&mut self, now: Instant, p: &str, t: &str) {
        PrefillerCore::request_allocated(self, now, p, t)
    }
    fn request_finished(&mut self, now: Instant, p: &str, t: &str, blocks: Vec<Vec<u64>>) {
        PrefillerCore::request_finished(self, now, p, t, blocks)
    }
    fn request_aborted(&mut self, now: Instant, t: &str) {
        PrefillerCore::request_aborted(self, now, t)
    }
    fn clear_layout_cache(&mut self) {
        PrefillerCore::clear_layout_cache(self)
    }
    fn write_complete(&mut self, now: Instant, id: WriteId, ret: i64) {
        PrefillerCore::write_complete(self, now, id, ret)
    }
    fn handle_timeout(&mut self, now: Instant) {
        PrefillerCore::handle_timeout(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        PrefillerCore::poll_timeout(self)
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        PrefillerCore::poll_transmit(self)
    }
    fn poll_event(&mut self) -> Option<PrefillerEvent> {
        PrefillerCore::poll_event(self)
    }
    fn tracked_transfers(&self) -> usize {
        PrefillerCore::tracked_transfers(self)
    }
    fn open_exchanges(&self) -> usize {
        PrefillerCore::open_exchanges(self)
    }
    fn cached_layouts(&self) -> usize {
        PrefillerCore::cached_layouts(self)
    }
    fn stats(&self) -> PrefillerStats {
        self.stats.clone()
    }
    fn set_abort_timeout(&mut self, t: Duration) {
        PrefillerCore::set_abort_timeout(self, t)
    }
}

impl PrefillerMachine for Gen1Prefiller {
    fn handle_frames(&mut self, now: Instant, frames: Vec<Vec<u8>>) {
        Gen1Prefiller::handle_frames(self, now, frames)
    }
    fn request_allocated(&mut self, now: Instant, p: &str, t: &str) {
        Gen1Prefiller::request_allocated(self, now, p, t)
    }
    fn request_finished(&mut self, now: Instant, p: &str, t: &str, blocks: Vec<Vec<u64>>) {
        Gen1Prefiller::request_finished(self, now, p, t, blocks)
    }
    fn request_aborted(&mut self, now: Instant, t: &str) {
        Gen1Prefiller::request_aborted(self, now, t)
    }
    fn clear_layout_cache(&mut self) {}
    fn write_complete(&mut self, now: Instant, id: WriteId, ret: i64) {
        Gen1Prefiller::write_complete(self, now, id, ret)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Gen1Prefiller::handle_timeout(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Gen1Prefiller::poll_timeout(self)
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        Gen1Prefiller::poll_transmit(self)
    }
    fn poll_event(&mut self) -> Option<PrefillerEvent> {
        Gen1Prefiller::poll_event(self)
    }
    fn tracked_transfers(&self) -> usize {
        Gen1Prefiller::tracked_transfers(self)
    }
    fn open_exchanges(&self) -> usize {
        Gen1Prefiller::open_exchanges(self)
    }
    fn cached_layouts(&self) -> usize {
        0
    }
    fn stats(&self) -> PrefillerStats {
        self.stats.clone()
    }
    fn set_abort_timeout(&mut self, t: Duration) {
        Gen1Prefiller::set_abort_timeout(self, t)
    }
}

/// The socket a decoder opens per exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketKind {
    /// Generation 2: a DEALER, one frame per message.
    Dealer,
    /// Generation 1: a REQ (libzmq adds the empty delimiter), one request and one reply.
    Req,
}

/// A decoder state machine.
pub trait DecoderMachine: Send + 'static {
    /// The socket the driver opens per exchange.
    fn socket_kind(&self) -> SocketKind;
    /// One scheduler step's requests to pull.
    fn pull(&mut self, now: Instant, reqs: Vec<PullRequest>);
    /// Requests arrived at the scheduler, to be pulled later: renewed while leases are on (0.34.0); a no-op
    /// where the machine has no leases.
    fn announce(&mut self, now: Instant, reqs: Vec<LeaseRequest>);
    /// Requests whose leases are renewed.
    fn leased_requests(&self) -> usize;
    /// What became of the lease heartbeats.
    fn lease_stats(&self) -> LeaseStats;
    /// The answer to a `/query` the machine asked for (generation 2 only).
    fn query_result(
        &mut self,
        now: Instant,
        bootstrap_addr: &str,
        result: Result<BTreeMap<String, EngineTable>, QueryError>,
    );
    /// A reply arrived on the exchange `id`.
    fn handle_reply(&mut self, now: Instant, id: ExchangeId, payload: &[u8]);
    /// The exchange `id` failed (its socket errored or closed); `error` says how.
    fn exchange_failed(&mut self, id: ExchangeId, error: &str);
    /// Time has passed: expire what is due (call at [`DecoderMachine::poll_timeout`]).
    fn handle_timeout(&mut self, now: Instant);
    /// When `handle_timeout` is next due.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The next thing to do or report.
    fn poll_event(&mut self) -> Option<DecoderEvent>;
    /// Requests not yet settled.
    fn pending_pulls(&self) -> usize;
    /// Exchanges open.
    fn open_exchanges(&self) -> usize;
}

impl DecoderMachine for DecoderCore {
    fn socket_kind(&self) -> SocketKind {
        SocketKind::Dealer
    }
    fn pull(&mut self, now: Instant, reqs: Vec<PullRequest>) {
        DecoderCore::pull(self, now, reqs)
    }
    fn announce(&mut self, now: Instant, reqs: Vec<LeaseRequest>) {
        DecoderCore::announce(self, now, reqs)
    }
    fn leased_requests(&self) -> usize {
        DecoderCore::leased_requests(self)
    }
    fn lease_stats(&self) -> LeaseStats {
        DecoderCore::lease_stats(self).clone()
    }
    fn query_result(&mut self, now: Instant, addr: &str, result: Result<BTreeMap<String, EngineTable>, QueryError>) {
        DecoderCore::query_result(self, now, addr, result)
    }
    fn handle_reply(&mut self, now: Instant, id: ExchangeId, payload: &[u8]) {
        DecoderCore::handle_reply(self, now, id, payload)
    }
    fn exchange_failed(&mut self, id: ExchangeId, error: &str) {
        DecoderCore::exchange_failed(self, id, error)
    }
    fn handle_timeout(&mut self, now: Instant) {
        DecoderCore::handle_timeout(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        DecoderCore::poll_timeout(self)
    }
    fn poll_event(&mut self) -> Option<DecoderEvent> {
        DecoderCore::poll_event(self)
    }
    fn pending_pulls(&self) -> usize {
        DecoderCore::pending_pulls(self)
    }
    fn open_exchanges(&self) -> usize {
        DecoderCore::open_exchanges(self)
    }
}

impl DecoderMachine for Gen1Decoder {
    fn socket_kind(&self) -> SocketKind {
        SocketKind::Req
    }
    fn pull(&mut self, now: Instant, reqs: Vec<PullRequest>) {
        Gen1Decoder::pull(self, now, reqs)
    }
    fn announce(&mut self, _now: Instant, _reqs: Vec<LeaseRequest>) {}
    fn leased_requests(&self) -> usize {
        0
    }
    fn lease_stats(&self) -> LeaseStats {
        LeaseStats::default()
    }
    fn query_result(&mut self, _now: Instant, _addr: &str, _result: Result<BTreeMap<String, EngineTable>, QueryError>) {
    }
    fn handle_reply(&mut self, now: Instant, id: ExchangeId, payload: &[u8]) {
        Gen1Decoder::handle_reply(self, now, id, payload)
    }
    fn exchange_failed(&mut self, id: ExchangeId, error: &str) {
        Gen1Decoder::exchange_failed(self, id, error)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Gen1Decoder::handle_timeout(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Gen1Decoder::poll_timeout(self)
    }
    fn poll_event(&mut self) -> Option<DecoderEvent> {
        Gen1Decoder::poll_event(self)
    }
    fn pending_pulls(&self) -> usize {
        Gen1Decoder::pending_pulls(self)
    }
    fn open_exchanges(&self) -> usize {
        Gen1Decoder::open_exchanges(self)
    }
}
