//! The decoder peer: a [`DecoderMachine`] (the generation-2 `DecoderCore` or the generation-1 decoder) driven by tokio, opening a real DEALER per exchange, querying the
//! bootstrap server, and (with the TCP backend) serving the prefillers' writes into its memory.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mooncake_wire::proto::{
    DecoderEvent, DecoderMachine, EngineTable, ExchangeId, LeaseRequest, LeaseStats, PullRequest, QueryError,
    SocketKind,
};
use tokio::sync::{mpsc, oneshot};

use crate::backend::SharedMemory;
use crate::error::PeerError;
use crate::reactor::{Incoming, Reactor};
use crate::records::record;

/// Per-request outcomes and what is still open.
#[derive(Clone, Debug, Default)]
pub struct DecoderStatus {
    /// The d_req_ids reported finished receiving (vLLM's `finished_recving`; some revisions report a failed
    /// request there too), in order.
    pub finished: Vec<String>,
    /// (d_req_id, reason, invalid blocks, reported in `failed_recving`).
    pub failed: Vec<(String, String, Vec<u64>, bool)>,
    /// Requests the decoder will never report (vLLM leaves them waiting): (d_req_id, reason).
    pub unsettled: Vec<(String, String)>,
    /// Requests not yet settled by every prefiller worker, including those waiting for a bootstrap query.
    pub pending_pulls: usize,
    /// DEALER exchanges still open (pulls and lease heartbeats).
    pub open_exchanges: usize,
    /// Requests whose lease it renews.
    pub leased: usize,
    /// What became of its lease heartbeats.
    pub leases: LeaseStats,
    /// Payloads sent, in order: (exchange, address, bytes).
    pub sent: Vec<(u64, String, Vec<u8>)>,
    /// Messages received, in order, as they came: (exchange, frames).
    pub received: Vec<(u64, Vec<Vec<u8>>)>,
}

enum Cmd {
    Pull(Vec<PullRequest>),
    Announce(Vec<LeaseRequest>),
    Status(oneshot::Sender<DecoderStatus>),
}

/// A running decoder: its state machine on a tokio task, its sockets on a reactor thread. Dropping it stops the
/// task.
pub struct DecoderPeer {
    /// The registered memory the prefillers write into.
    pub memory: SharedMemory,
    cmds: mpsc::UnboundedSender<Cmd>,
    task: tokio::task::JoinHandle<()>,
}

impl DecoderPeer {
    /// Starts `core` on the current tokio runtime, with a reactor thread on `ctx` for its sockets; `memory` is
    /// the memory the prefillers write into (with the TCP backend, served by the caller). Errors when the
    /// reactor cannot start.
    pub fn start(
        ctx: &zmq::Context,
        core: impl DecoderMachine,
        memory: SharedMemory,
    ) -> Result<DecoderPeer, PeerError> {
        Self::start_with_faults(ctx, core, memory, vec![])
    }

    /// With deliberate faults in the requests it sends (tests of the conformance runner only).
    pub fn start_with_faults(
        ctx: &zmq::Context,
        core: impl DecoderMachine,
        memory: SharedMemory,
        faults: Vec<crate::faults::Fault>,
    ) -> Result<DecoderPeer, PeerError> {
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let reactor = Reactor::start(ctx, in_tx)?;
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(core, reactor, in_rx, cmd_rx, faults));
        Ok(DecoderPeer { memory, cmds: cmd_tx, task })
    }

    /// Hands the core requests to pull (vLLM's scheduler output); the outcomes show in [`DecoderPeer::status`].
    pub fn pull(&self, reqs: Vec<PullRequest>) {
        let _ = self.cmds.send(Cmd::Pull(reqs));
    }

    /// Requests arrived at the scheduler (vLLM's `on_new_request`): renewed while the core has a lease duration.
    pub fn announce(&self, reqs: Vec<LeaseRequest>) {
        let _ = self.cmds.send(Cmd::Announce(reqs));
    }

    /// A snapshot of the outcomes so far; errors when the decoder's task stopped.
    pub async fn status(&self) -> Result<DecoderStatus, PeerError> {
        let (tx, rx) = oneshot::channel();
        self.cmds.send(Cmd::Status(tx)).map_err(|_| PeerError::Stopped("decoder"))?;
        rx.await.map_err(|_| PeerError::Stopped("decoder"))
    }

    /// Waits (polling, bounded) until every listed request finished, failed or was left unsettled.
    pub async fn wait_settled(&self, ids: &[&str], timeout: Duration) -> Result<DecoderStatus, PeerError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let s = self.status().await?;
            let done = ids.iter().all(|id| {
                s.finished.iter().any(|f| f == id)
                    || s.unsettled.iter().any(|f| f.0 == *id)
                    || (s.failed.iter().any(|f| f.0 == *id) && s.pending_pulls == 0)
            });
            if done {
                return Ok(s);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(PeerError::NotSettled { timeout, status: format!("{s:?}") });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for DecoderPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    mut core: impl DecoderMachine,
    reactor: Reactor,
    mut incoming: mpsc::UnboundedReceiver<Incoming>,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
    faults: Vec<crate::faults::Fault>,
) {
    let (q_tx, mut q_rx) = mpsc::unbounded_channel::<(String, Result<BTreeMap<String, EngineTable>, QueryError>)>();
    let mut status = DecoderStatus::default();
    loop {
        while let Some(ev) = core.poll_event() {
            match ev {
                DecoderEvent::Query { bootstrap_addr } => {
                    let tx = q_tx.clone();
                    tokio::spawn(async move {
                        // vLLM 0.32.0+: 3 attempts, 0.1 s apart.
                        let mut r = Err(QueryError::Unanswered(String::new()));
                        for _ in 0..3 {
                            r = match crate::http::query(&bootstrap_addr, Duration::from_secs(30)).await {
                                Ok(j) => mooncake_wire::proto::decoder::parse_query(&j),
                                Err(e) => Err(QueryError::Unanswered(e.to_string())),
                            };
                            if r.is_ok() {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        let _ = tx.send((bootstrap_addr, r));
                    });
                }
                DecoderEvent::Open { id, addr, payload } => {
                    record(&mut status.sent, (id.0, addr.clone(), payload.clone()));
                    if core.socket_kind() == SocketKind::Req {
                        reactor.open_req(id.0, &addr, payload);
                    } else if faults.is_empty() {
                        reactor.open_dealer(id.0, &addr, payload);
                    } else {
                        reactor.open_dealer_messages(id.0, &addr, crate::faults::apply_to_request(&faults, payload));
                    }
                }
                DecoderEvent::Close { id } => reactor.close_dealer(id.0),
                DecoderEvent::Finished { d_req_id } => record(&mut status.finished, d_req_id),
                DecoderEvent::Failed { d_req_id, reason, invalid_blocks, failed_recving } => {
                    tracing::warn!(%d_req_id, %reason, "pull failed");
                    record(&mut status.failed, (d_req_id, reason, invalid_blocks, failed_recving));
                }
                DecoderEvent::Unsettled { d_req_id, reason } => {
                    tracing::warn!(%d_req_id, %reason, "pull left unsettled");
                    record(&mut status.unsettled, (d_req_id, reason));
                }
            }
        }
        let wake = core.poll_timeout();
        let sleep = mooncake_io::sleep_until(wake);
        tokio::select! {
            m = incoming.recv() => match m {
                Some(Incoming::Dealer { id, frames }) => {
                    record(&mut status.received, (id, frames.clone()));
                    if frames.len() == 1 {
                        core.handle_reply(Instant::now(), ExchangeId(id), &frames[0]);
                    } else {
                        core.exchange_failed(ExchangeId(id), &format!("expected one frame, got {}", frames.len()));
                    }
                }
                Some(Incoming::DealerError { id, error }) => core.exchange_failed(ExchangeId(id), &error),
                // A decoder's reactor binds no ROUTER.
                Some(Incoming::Router(_)) => {}
                None => return,
            },
            c = cmds.recv() => match c {
                Some(Cmd::Pull(reqs)) => core.pull(Instant::now(), reqs),
                Some(Cmd::Announce(reqs)) => core.announce(Instant::now(), reqs),
                Some(Cmd::Status(tx)) => {
                    status.pending_pulls = core.pending_pulls();
                    status.open_exchanges = core.open_exchanges();
                    status.leased = core.leased_requests();
                    status.leases = core.lease_stats();
                    let _ = tx.send(status.clone());
                }
                None => return,
            },
            Some((addr, r)) = q_rx.recv() => core.query_result(Instant::now(), &addr, r),
            _ = sleep => core.handle_timeout(Instant::now()),
        }
    }
}
