//! The prefiller peer: a [`PrefillerCore`] behind a ZeroMQ ROUTER ([`Router`], its own thread), with a
//! transfer backend that moves the bytes on tokio, and registration with the bootstrap server. Pulls are
//! answered on the router's thread (one wake-up per round trip); commands, write completions and timeouts
//! come through a tokio task.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mooncake_wire::proto::{
    PrefillerCore, PrefillerEvent, PrefillerMachine, PrefillerStats, SenderPlanner, WireProfile,
};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::backend::{Backend, SharedMemory, WriteDone, Writer};
use crate::error::PeerError;
use crate::records::record;
use crate::router::Router;

/// How a [`PrefillerPeer`] binds and registers.
#[derive(Clone, Debug)]
pub struct PrefillerConfig {
    /// ROUTER bind address; `tcp://127.0.0.1:*` picks a free port.
    pub bind: String,
    /// The engine id it registers under (vLLM's `engine_id`).
    pub engine_id: String,
    /// Its data-parallel rank, as registered.
    pub dp_rank: i64,
    /// Its tensor-parallel rank, as registered.
    pub tp_rank: i64,
    /// Its pipeline-parallel rank, as registered.
    pub pp_rank: i64,
    /// `http://host:port` of the bootstrap server to register with (none: do not register).
    pub bootstrap: Option<String>,
    /// Overrides the revision's abort timeout.
    pub abort_timeout: Option<Duration>,
    /// `kv_lease_duration` (revisions with KV leases; `None`: off).
    pub kv_lease: Option<Duration>,
    /// Keep a copy of every ROUTER message in the status (the conformance runner reads it).
    pub record_wire: bool,
    /// Deliberate faults in what it sends (tests of the conformance runner only).
    pub faults: Vec<crate::faults::Fault>,
}

/// What the peer has done, for tests, the testee control protocol and logs.
#[derive(Clone, Debug, Default)]
pub struct PrefillerStatus {
    /// Transfers the core tracks (ready, pending, or placeholders a pull created).
    pub tracked_transfers: usize,
    /// Pulls being served.
    pub open_exchanges: usize,
    /// Decoder layouts cached (0.33.0's `layout_id`).
    pub cached_layouts: usize,
    /// The core's counters.
    pub stats: PrefillerStats,
    /// (p_req_id, transfer_id, expired), in order.
    pub finished_sending: Vec<(String, String, bool)>,
    /// (session, descriptors, bytes, return code) of every write.
    pub writes: Vec<(String, usize, u64, i64)>,
    /// Why each refused message was refused, in order.
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

/// A running prefiller: its ROUTER on a thread of its own, commands and write completions on a tokio task.
/// Dropping it stops the task.
pub struct PrefillerPeer {
    /// The bound ROUTER endpoint (`tcp://127.0.0.1:PORT`), as registered.
    pub endpoint: String,
    /// The registered memory its writes read from.
    pub memory: SharedMemory,
    /// Applies a command to the core before returning (pulls are answered on the router's thread, so a command
    /// queued for the task could lose a race with a pull sent after the command was acknowledged).
    apply: Box<dyn Fn(Cmd) + Send + Sync>,
    task: tokio::task::JoinHandle<()>,
}

impl PrefillerPeer {
    /// Starts a generation-2 [`PrefillerCore`] of `profile` with `planner`: binds the ROUTER, registers with
    /// the bootstrap server when `cfg.bootstrap` names one, and moves bytes from `memory` with `backend`. Errors
    /// when binding or registering fails.
    pub async fn start<P>(
        cfg: PrefillerConfig,
        profile: WireProfile,
        planner: P,
        memory: SharedMemory,
        backend: Backend,
    ) -> Result<PrefillerPeer, PeerError>
    where
        P: SenderPlanner + Send + 'static,
        P::Prepared: Send,
        P::Pull: Send,
        P::PrepareKey: Send,
        P::Error: Send,
    {
        let mut core = PrefillerCore::new(profile, planner);
        core.set_kv_lease_duration(cfg.kv_lease)?;
        Self::start_machine(cfg, core, memory, backend).await
    }

    /// With any prefiller state machine (the generation-1 one, say).
    pub async fn start_machine<M: PrefillerMachine>(
        cfg: PrefillerConfig,
        mut core: M,
        memory: SharedMemory,
        backend: Backend,
    ) -> Result<PrefillerPeer, PeerError> {
        if let Some(t) = cfg.abort_timeout {
            core.set_abort_timeout(t);
        }
        let (writer, done_rx) = Writer::new(backend, memory.clone());
        let shared = Arc::new(Mutex::new(Shared {
            core,
            status: PrefillerStatus::default(),
            faults: cfg.faults.clone(),
            record_wire: cfg.record_wire,
            writer,
        }));
        let wake = Arc::new(Notify::new());
        // Pulls are answered on the router's thread; the task below only hears of new deadlines.
        let handler = {
            let (shared, wake) = (shared.clone(), wake.clone());
            Box::new(move |frames: Vec<Vec<u8>>| {
                let mut s = lock(&shared);
                let before = s.core.poll_timeout();
                s.receive(Instant::now(), frames);
                let out = s.pump();
                if let Some(after) = s.core.poll_timeout() {
                    if before.is_none_or(|b| after < b) {
                        wake.notify_one();
                    }
                }
                out
            })
        };
        let router = Router::bind(&cfg.bind, handler)?;
        let endpoint = router.endpoint().to_string();
        lock(&shared).core.router_bound(&endpoint);
        if let Some(b) = &cfg.bootstrap {
            // A deliberate fault registers the next rank (tests of the runner only).
            let tp_rank = cfg.tp_rank + i64::from(cfg.faults.contains(&crate::faults::Fault::WrongRegistration));
            let payload = json!({"engine_id": cfg.engine_id, "dp_rank": cfg.dp_rank, "tp_rank": tp_rank, "pp_rank": cfg.pp_rank, "addr": endpoint});
            crate::http::register(b, &payload, Duration::from_secs(30)).await?;
        }
        let apply = {
            let (shared, wake) = (shared.clone(), wake.clone());
            Box::new(move |c: Cmd| {
                apply(&mut lock(&shared), c);
                // The task sends what the command released and re-reads the deadline.
                wake.notify_one();
            })
        };
        let task = tokio::spawn(run(shared, router, wake, done_rx));
        tracing::info!(%endpoint, engine = %cfg.engine_id, "prefiller listening");
        Ok(PrefillerPeer { endpoint, memory, apply, task })
    }

    /// The scheduler allocated `p_req_id` for `transfer_id`.
    pub fn allocated(&self, p_req_id: &str, transfer_id: &str) {
        (self.apply)(Cmd::Allocated(p_req_id.into(), transfer_id.into()));
    }
    /// The request's blocks are ready to be pulled.
    pub fn finished(&self, p_req_id: &str, transfer_id: &str, blocks: Vec<Vec<u64>>) {
        (self.apply)(Cmd::Finished(p_req_id.into(), transfer_id.into(), blocks));
    }
    /// The request ended without a transfer: the core forgets it (a pull waiting for it times out).
    pub fn aborted(&self, transfer_id: &str) {
        (self.apply)(Cmd::Aborted(transfer_id.into()));
    }
    /// Forgets every cached decoder layout (vLLM does this when the prefiller re-registers its caches).
    pub fn forget_layouts(&self) {
        (self.apply)(Cmd::ForgetLayouts);
    }
    /// The next `n` writes report `ret` without moving bytes (a failing transfer engine).
    pub fn fail_next_writes(&self, n: usize, ret: i64) {
        (self.apply)(Cmd::FailNextWrites(n, ret));
    }
    /// A snapshot of what it has done so far; errors when its task stopped.
    pub async fn status(&self) -> Result<PrefillerStatus, PeerError> {
        let (tx, rx) = oneshot::channel();
        (self.apply)(Cmd::Status(tx));
        rx.await.map_err(|_| PeerError::Stopped("prefiller"))
    }
}

impl Drop for PrefillerPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The core and what the peer records, shared by the router's thread (pulls) and the task (commands, write
/// completions, timeouts).
struct Shared<P> {
    core: P,
    status: PrefillerStatus,
    faults: Vec<crate::faults::Fault>,
    record_wire: bool,
    /// Runs the core's writes (and fails the next ones when told to).
    writer: Writer,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<P> Shared<P>
where
    P: PrefillerMachine,
{
    fn receive(&mut self, now: Instant, frames: Vec<Vec<u8>>) {
        if self.record_wire {
            record(&mut self.status.wire, (true, frames.clone()));
        }
        self.core.handle_frames(now, frames);
    }

    /// Takes what the core wants sent (returned, to go out on the ROUTER) and done (writes started on the
    /// runtime, completions recorded).
    fn pump(&mut self) -> Vec<Vec<Vec<u8>>> {
        let mut batch = vec![];
        while let Some(t) = self.core.poll_transmit() {
            let messages = if self.faults.is_empty() {
                vec![t.frames()]
            } else if t.delimiter {
                crate::faults::apply_to_enveloped_reply(&self.faults, t.peer.0, t.payload)
            } else {
                crate::faults::apply_to_reply(&self.faults, t.peer.0, t.payload)
            };
            for frames in messages {
                if self.record_wire {
                    record(&mut self.status.wire, (false, frames.clone()));
                }
                batch.push(frames);
            }
        }
        while let Some(ev) = self.core.poll_event() {
            match ev {
                PrefillerEvent::Write { id, session, descriptors } => self.writer.start(id, session, descriptors),
                PrefillerEvent::FinishedSending { p_req_id, transfer_id, expired } => {
                    tracing::debug!(%p_req_id, %transfer_id, expired, "finished sending");
                    record(&mut self.status.finished_sending, (p_req_id, transfer_id, expired));
                }
                PrefillerEvent::Rejected { reason, .. } => {
                    tracing::warn!(%reason, "message rejected");
                    record(&mut self.status.rejected, reason);
                }
            }
        }
        batch
    }
}

async fn run<P>(
    shared: Arc<Mutex<Shared<P>>>,
    router: Router,
    wake: Arc<Notify>,
    mut done_rx: mpsc::UnboundedReceiver<WriteDone>,
) where
    P: PrefillerMachine,
{
    loop {
        let (batch, deadline) = {
            let mut s = lock(&shared);
            (s.pump(), s.core.poll_timeout())
        };
        if !batch.is_empty() {
            router.send_batch(batch);
        }
        let sleep = mooncake_io::sleep_until(deadline);
        tokio::select! {
            // A pull on the router's thread set an earlier deadline.
            _ = wake.notified() => {}
            Some(w) = done_rx.recv() => {
                let mut s = lock(&shared);
                record(&mut s.status.writes, (w.session, w.descriptors, w.bytes, w.ret));
                s.core.write_complete(Instant::now(), w.id, w.ret);
            }
            _ = sleep => lock(&shared).core.handle_timeout(Instant::now()),
        }
    }
}

/// A scheduler-side command, applied to the core under the lock.
fn apply<P>(s: &mut Shared<P>, c: Cmd)
where
    P: PrefillerMachine,
{
    let now = Instant::now();
    match c {
        Cmd::Allocated(p, t) => s.core.request_allocated(now, &p, &t),
        Cmd::Finished(p, t, b) => s.core.request_finished(now, &p, &t, b),
        Cmd::Aborted(t) => s.core.request_aborted(now, &t),
        Cmd::ForgetLayouts => s.core.clear_layout_cache(),
        Cmd::FailNextWrites(n, r) => s.writer.fail_next(n, r),
        Cmd::Status(tx) => {
            let mut st = s.status.clone();
            st.tracked_transfers = s.core.tracked_transfers();
            st.open_exchanges = s.core.open_exchanges();
            st.cached_layouts = s.core.cached_layouts();
            st.stats = s.core.stats();
            let _ = tx.send(st);
        }
    }
}
