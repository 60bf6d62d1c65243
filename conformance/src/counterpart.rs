//! The runner's own prefiller: the side of a decoder case that the runner plays. It is a sans-IO prefiller
//! core of `mooncake_wire::proto` (the executable spec: [`PrefillerCore`](mooncake_wire::proto::PrefillerCore)
//! with vLLM's planner, or the generation-1 core) behind a libzmq ROUTER (`mooncake_io::reactor`), writing
//! with `mooncake-io`'s transfer backend — not the reference peer the runner judges, whose ROUTER is its own
//! ZMTP server. It keeps what the runner compares: every ROUTER message in order, every transfer-engine
//! write, and what the core freed.
//!
//! One tokio task owns the core. Commands are taken before anything that arrived on the ROUTER, so a pull
//! sent after a command returned is handled after it.

use std::time::{Duration, Instant};

use mooncake_io::backend::{Backend, SharedMemory, Writer};
use mooncake_io::engine::{EngineClient, Issue};
use mooncake_io::reactor::{Incoming, Reactor};
use mooncake_wire::proto::{PrefillerEvent, PrefillerMachine};
use tokio::sync::{mpsc, oneshot};

/// How the runner's prefiller starts: where it binds and whom it registers with.
pub(crate) struct OwnConfig {
    /// ROUTER endpoint; `tcp://127.0.0.1:*` picks a free port.
    pub(crate) bind: String,
    /// The bootstrap server to register with, and as whom (generation 2).
    pub(crate) register: Option<Registration>,
}

/// A worker's `/register` at a bootstrap server (its bound endpoint is added as `addr`).
pub(crate) struct Registration {
    /// `http://host:port` of the bootstrap server.
    pub(crate) url: String,
    pub(crate) engine_id: String,
    pub(crate) dp_rank: i64,
    pub(crate) tp_rank: i64,
    pub(crate) pp_rank: i64,
}

/// What the runner's prefiller did, in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct OwnStatus {
    /// Every ROUTER message: (inbound, frames).
    pub(crate) wire: Vec<(bool, Vec<Vec<u8>>)>,
    /// Every transfer-engine write: (session, descriptors, bytes, return code).
    pub(crate) writes: Vec<(String, usize, u64, i64)>,
    /// (p_req_id, transfer_id, expired) of every request the core freed.
    pub(crate) finished_sending: Vec<(String, String, bool)>,
    /// What its strict transfer engine found wrong with the decoders' handshakes and descriptors.
    pub(crate) te_issues: Vec<Issue>,
}

enum Cmd {
    Allocated(String, String),
    Finished(String, String, Vec<Vec<u64>>),
    ForgetLayouts,
    FailNextWrites(usize, i64),
    Status(oneshot::Sender<OwnStatus>),
}

/// Why the runner's own prefiller could not start or answer: the runner's side failed, not the testee.
#[derive(Debug, thiserror::Error)]
pub enum CounterpartError {
    /// Its ZeroMQ reactor did not start.
    #[error(transparent)]
    Reactor(mooncake_io::reactor::ReactorError),
    /// Its ROUTER could not bind.
    #[error(transparent)]
    Bind(mooncake_io::reactor::ReactorError),
    /// Its `/register` at the bootstrap server failed.
    #[error(transparent)]
    Register(mooncake_io::http::HttpError),
    /// Its task ended.
    #[error("the runner's prefiller stopped")]
    Stopped,
}

/// The runner's prefiller worker; dropping it stops it.
pub(crate) struct OwnPrefiller {
    /// The bound ROUTER endpoint (`tcp://127.0.0.1:PORT`), as registered.
    pub(crate) endpoint: String,
    cmds: mpsc::UnboundedSender<Cmd>,
    task: tokio::task::JoinHandle<()>,
}

impl OwnPrefiller {
    /// Binds the ROUTER, registers (when asked) and serves pulls with `core`.
    pub(crate) async fn start<M: PrefillerMachine>(
        cfg: OwnConfig,
        core: M,
        memory: SharedMemory,
    ) -> Result<OwnPrefiller, CounterpartError> {
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let reactor = Reactor::start(&zmq::Context::new(), in_tx).map_err(CounterpartError::Reactor)?;
        let endpoint = reactor.bind_router(&cfg.bind).await.map_err(CounterpartError::Bind)?;
        if let Some(r) = cfg.register {
            let body = serde_json::json!({"engine_id": r.engine_id, "dp_rank": r.dp_rank, "tp_rank": r.tp_rank, "pp_rank": r.pp_rank, "addr": endpoint});
            mooncake_io::http::register(&r.url, &body, Duration::from_secs(30))
                .await
                .map_err(CounterpartError::Register)?;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(core, memory, reactor, in_rx, rx));
        Ok(OwnPrefiller { endpoint, cmds: tx, task })
    }

    fn send(&self, c: Cmd) {
        let _ = self.cmds.send(c);
    }
    /// The scheduler allocated `p_req_id` for `transfer_id`.
    pub(crate) fn allocated(&self, p_req_id: &str, transfer_id: &str) {
        self.send(Cmd::Allocated(p_req_id.into(), transfer_id.into()));
    }
    /// The request's blocks are ready to be pulled.
    pub(crate) fn finished(&self, p_req_id: &str, transfer_id: &str, blocks: Vec<Vec<u64>>) {
        self.send(Cmd::Finished(p_req_id.into(), transfer_id.into(), blocks));
    }
    /// Forgets the decoder layouts it cached.
    pub(crate) fn forget_layouts(&self) {
        self.send(Cmd::ForgetLayouts);
    }
    /// The next `n` writes report `ret` without moving bytes (a failing transfer engine).
    pub(crate) fn fail_next_writes(&self, n: usize, ret: i64) {
        self.send(Cmd::FailNextWrites(n, ret));
    }
    /// What it did so far.
    pub(crate) async fn status(&self) -> Result<OwnStatus, CounterpartError> {
        let (tx, rx) = oneshot::channel();
        self.send(Cmd::Status(tx));
        rx.await.map_err(|_| CounterpartError::Stopped)
    }
}

impl Drop for OwnPrefiller {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run<M: PrefillerMachine>(
    mut core: M,
    memory: SharedMemory,
    reactor: Reactor,
    mut incoming: mpsc::UnboundedReceiver<Incoming>,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
) {
    // Strict: it writes only inside the buffers a decoder advertised and records how its handshake answer
    // differs from a real engine target's.
    let engine = EngineClient::strict();
    let (mut writer, mut done_rx) = Writer::new(Backend::TcpEngine(engine.clone()), memory);
    let mut status = OwnStatus::default();
    loop {
        let mut out = vec![];
        while let Some(t) = core.poll_transmit() {
            let frames = t.frames();
            status.wire.push((false, frames.clone()));
            out.push(frames);
        }
        reactor.router_send_batch(out);
        while let Some(ev) = core.poll_event() {
            match ev {
                PrefillerEvent::Write { id, session, descriptors } => writer.start(id, session, descriptors),
                PrefillerEvent::FinishedSending { p_req_id, transfer_id, expired } => {
                    status.finished_sending.push((p_req_id, transfer_id, expired))
                }
                PrefillerEvent::Rejected { .. } => {}
            }
        }
        let deadline = core.poll_timeout();
        let sleep = mooncake_io::sleep_until(deadline);
        tokio::select! {
            biased;
            c = cmds.recv() => {
                let now = Instant::now();
                match c {
                    None => return,
                    Some(Cmd::Allocated(p, t)) => core.request_allocated(now, &p, &t),
                    Some(Cmd::Finished(p, t, b)) => core.request_finished(now, &p, &t, b),
                    Some(Cmd::ForgetLayouts) => core.clear_layout_cache(),
                    Some(Cmd::FailNextWrites(n, r)) => writer.fail_next(n, r),
                    Some(Cmd::Status(tx)) => {
                        status.te_issues = engine.issues();
                        let _ = tx.send(status.clone());
                    }
                }
            }
            Some(w) = done_rx.recv() => {
                status.writes.push((w.session, w.descriptors, w.bytes, w.ret));
                core.write_complete(Instant::now(), w.id, w.ret);
            }
            m = incoming.recv() => match m {
                Some(Incoming::Router(frames)) => {
                    status.wire.push((true, frames.clone()));
                    core.handle_frames(Instant::now(), frames);
                }
                Some(_) => {}
                None => return,
            },
            _ = sleep => core.handle_timeout(Instant::now()),
        }
    }
}
