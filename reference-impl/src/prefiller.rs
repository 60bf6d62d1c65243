//! The prefiller peer: a [`PrefillerCore`] driven by tokio over a real ROUTER socket, with a transfer backend
//! that moves the bytes, and registration with the bootstrap server.

use std::time::{Duration, Instant};

use mooncake_wire::proto::{PrefillerCore, PrefillerEvent, PrefillerStats, SenderPlanner, WireProfile};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use crate::backend::{Backend, SharedMemory};
use crate::reactor::{Incoming, Reactor};

#[derive(Clone, Debug)]
pub struct PrefillerConfig {
    /// ROUTER bind address; `tcp://127.0.0.1:*` picks a free port.
    pub bind: String,
    pub engine_id: String,
    pub dp_rank: i64,
    pub tp_rank: i64,
    pub pp_rank: i64,
    /// `http://host:port` of the bootstrap server to register with (none: do not register).
    pub bootstrap: Option<String>,
    /// Overrides the revision's abort timeout.
    pub abort_timeout: Option<Duration>,
    /// Keep a copy of every ROUTER message in the status (the conformance runner reads it).
    pub record_wire: bool,
    /// Deliberate faults in what it sends (tests of the conformance runner only).
    pub faults: Vec<crate::faults::Fault>,
}

/// What the peer has done, for tests, the testee control protocol and logs.
#[derive(Clone, Debug, Default)]
pub struct PrefillerStatus {
    pub tracked_transfers: usize,
    pub open_exchanges: usize,
    pub cached_layouts: usize,
    pub stats: PrefillerStats,
    /// (p_req_id, transfer_id, expired), in order.
    pub finished_sending: Vec<(String, String, bool)>,
    /// (session, descriptors, bytes, return code) of every write.
    pub writes: Vec<(String, usize, u64, i64)>,
    pub rejected: Vec<String>,
    /// Every ROUTER message, in order: (inbound, frames). Kept only when enabled (`record_wire`).
    pub wire: Vec<(bool, Vec<Vec<u8>>)>,
}

enum Cmd {
    Allocated(String, String),
    Finished(String, String, Vec<Vec<u64>>),
    Aborted(String),
    ForgetLayouts,
    FailNextWrites(usize, i64),
    Status(oneshot::Sender<PrefillerStatus>),
}

pub struct PrefillerPeer {
    /// The bound ROUTER endpoint (`tcp://127.0.0.1:PORT`), as registered.
    pub endpoint: String,
    pub memory: SharedMemory,
    cmds: mpsc::UnboundedSender<Cmd>,
    task: tokio::task::JoinHandle<()>,
}

impl PrefillerPeer {
    pub async fn start<P>(ctx: &zmq::Context, cfg: PrefillerConfig, profile: WireProfile, planner: P, memory: SharedMemory, backend: Backend) -> Result<PrefillerPeer, String>
    where
        P: SenderPlanner + Send + 'static,
        P::Prepared: Send,
        P::Pull: Send,
    {
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let reactor = Reactor::start(ctx, in_tx)?;
        let endpoint = reactor.bind_router(&cfg.bind).await?;
        if let Some(b) = &cfg.bootstrap {
            let payload = json!({"engine_id": cfg.engine_id, "dp_rank": cfg.dp_rank, "tp_rank": cfg.tp_rank, "pp_rank": cfg.pp_rank, "addr": endpoint});
            crate::http::register(b, &payload, Duration::from_secs(30)).await?;
        }
        let mut core = PrefillerCore::new(profile, planner);
        if let Some(t) = cfg.abort_timeout {
            core.set_abort_timeout(t);
        }
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(core, reactor, in_rx, cmd_rx, memory.clone(), backend, cfg.record_wire, cfg.faults.clone()));
        tracing::info!(%endpoint, engine = %cfg.engine_id, "prefiller listening");
        Ok(PrefillerPeer { endpoint, memory, cmds: cmd_tx, task })
    }

    /// The scheduler allocated `p_req_id` for `transfer_id`.
    pub fn allocated(&self, p_req_id: &str, transfer_id: &str) {
        let _ = self.cmds.send(Cmd::Allocated(p_req_id.into(), transfer_id.into()));
    }
    /// The request's blocks are ready to be pulled.
    pub fn finished(&self, p_req_id: &str, transfer_id: &str, blocks: Vec<Vec<u64>>) {
        let _ = self.cmds.send(Cmd::Finished(p_req_id.into(), transfer_id.into(), blocks));
    }
    pub fn aborted(&self, transfer_id: &str) {
        let _ = self.cmds.send(Cmd::Aborted(transfer_id.into()));
    }
    pub fn forget_layouts(&self) {
        let _ = self.cmds.send(Cmd::ForgetLayouts);
    }
    /// The next `n` writes report `ret` without moving bytes (a failing transfer engine).
    pub fn fail_next_writes(&self, n: usize, ret: i64) {
        let _ = self.cmds.send(Cmd::FailNextWrites(n, ret));
    }
    pub async fn status(&self) -> Result<PrefillerStatus, String> {
        let (tx, rx) = oneshot::channel();
        self.cmds.send(Cmd::Status(tx)).map_err(|_| "the prefiller stopped".to_string())?;
        rx.await.map_err(|_| "the prefiller stopped".to_string())
    }
}

impl Drop for PrefillerPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run<P>(
    mut core: PrefillerCore<P>,
    reactor: Reactor,
    mut incoming: mpsc::UnboundedReceiver<Incoming>,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
    memory: SharedMemory,
    backend: Backend,
    record_wire: bool,
    faults: Vec<crate::faults::Fault>,
) where
    P: SenderPlanner + Send + 'static,
    P::Prepared: Send,
    P::Pull: Send,
{
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(mooncake_wire::proto::WriteId, i64, String, usize, u64)>();
    let mut status = PrefillerStatus::default();
    let mut fail_next: Option<(usize, i64)> = None;
    loop {
        while let Some(t) = core.poll_transmit() {
            let messages = if faults.is_empty() { vec![vec![t.peer.0, t.payload]] } else { crate::faults::apply_to_reply(&faults, t.peer.0, t.payload) };
            for frames in messages {
                if record_wire {
                    status.wire.push((false, frames.clone()));
                }
                reactor.router_send(frames);
            }
        }
        while let Some(ev) = core.poll_event() {
            match ev {
                PrefillerEvent::Write { id, session, descriptors } => {
                    let (n, bytes) = (descriptors.len(), descriptors.iter().map(|d| d.len).sum::<u64>());
                    let forced = match &mut fail_next {
                        Some((left, ret)) if *left > 0 => {
                            *left -= 1;
                            Some(*ret)
                        }
                        _ => None,
                    };
                    let (backend, memory, done) = (backend.clone(), memory.clone(), done_tx.clone());
                    tokio::spawn(async move {
                        let ret = match forced {
                            Some(r) => r,
                            None => backend.write(&memory, &session, &descriptors).await,
                        };
                        let _ = done.send((id, ret, session, n, bytes));
                    });
                }
                PrefillerEvent::FinishedSending { p_req_id, transfer_id, expired } => {
                    tracing::debug!(%p_req_id, %transfer_id, expired, "finished sending");
                    status.finished_sending.push((p_req_id, transfer_id, expired));
                }
                PrefillerEvent::Rejected { reason, .. } => {
                    tracing::warn!(%reason, "message rejected");
                    status.rejected.push(reason);
                }
            }
        }
        let wake = core.poll_timeout();
        let sleep = async {
            match wake {
                Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            m = incoming.recv() => match m {
                Some(Incoming::Router(frames)) => {
                    if record_wire {
                        status.wire.push((true, frames.clone()));
                    }
                    core.handle_frames(Instant::now(), frames)
                }
                Some(_) => {}
                None => return,
            },
            c = cmds.recv() => match c {
                Some(Cmd::Allocated(p, t)) => core.request_allocated(Instant::now(), &p, &t),
                Some(Cmd::Finished(p, t, b)) => core.request_finished(Instant::now(), &p, &t, b),
                Some(Cmd::Aborted(t)) => core.request_aborted(Instant::now(), &t),
                Some(Cmd::ForgetLayouts) => core.clear_layout_cache(),
                Some(Cmd::FailNextWrites(n, r)) => fail_next = Some((n, r)),
                Some(Cmd::Status(tx)) => {
                    status.tracked_transfers = core.tracked_transfers();
                    status.open_exchanges = core.open_exchanges();
                    status.cached_layouts = core.cached_layouts();
                    status.stats = core.stats.clone();
                    let _ = tx.send(status.clone());
                }
                None => return,
            },
            Some((id, ret, session, n, bytes)) = done_rx.recv() => {
                status.writes.push((session, n, bytes, ret));
                core.write_complete(Instant::now(), id, ret);
            }
            _ = sleep => core.handle_timeout(Instant::now()),
        }
    }
}
