//! The pull family's roles (vllm-ascend, `spec/pull/`): a prefiller is a [`PullPrefiller`] behind the same
//! ROUTER as the push prefillers ([`PrefillerPeer`]) with a transfer-engine target serving its memory to reads;
//! a decoder is a [`PullDecoder`] driven by tokio, its REQ exchanges on a reactor thread and its reads through
//! an [`EngineClient`] into its own memory.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mooncake_io::engine::client::Request;
use mooncake_io::engine::{EngineClient, EngineTarget};
use mooncake_io::layout::{LayoutConfig, LayoutExt, ModelConfig};
use mooncake_wire::proto::pull::{
    MetadataError, PullDecoder, PullDecoderEvent, PullLayout, PullPrefiller, PullPrefillerConfig, PullProfile,
    PullRead, ReadDescriptor, ReadId,
};
use mooncake_wire::proto::ExchangeId;
use mooncake_wire::spec::Spec;
use tokio::sync::{mpsc, oneshot};

use crate::backend::{Backend, SharedMemory};
use crate::error::PeerError;
use crate::prefiller::{PrefillerConfig, PrefillerPeer};
use crate::reactor::{Incoming, Reactor};
use crate::records::record;

/// The pull revisions the reference peer speaks: generation 1 (vllm-ascend's released connector).
pub fn pull_revisions() -> Vec<String> {
    Spec::builtin().pull().revisions.iter().filter(|r| r.generation == 1).map(|r| r.revision.clone()).collect()
}

/// A testee layout as the pull cores read it.
pub fn pull_layout(l: &LayoutConfig) -> PullLayout {
    PullLayout {
        base_addrs: l.kv_caches_base_addr.clone(),
        block_lens: l.block_lens.clone(),
        layer_indices: l.registered_layer_indices.clone(),
        layer_names: l.registered_layer_names.clone(),
        group_indices: l.registered_group_indices.clone(),
        num_blocks: l.num_blocks,
    }
}

/// Why a pull role cannot start.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The layout cannot be registered.
    #[error(transparent)]
    Layout(#[from] mooncake_io::layout::LayoutError),
    /// The layout cannot be advertised or planned with.
    #[error("layout: {0}")]
    Metadata(#[from] MetadataError),
    /// The transfer-engine target cannot bind.
    #[error("transfer-engine target: {0}")]
    Target(#[from] std::io::Error),
    /// The ROUTER or the reactor cannot start.
    #[error(transparent)]
    Peer(#[from] PeerError),
}

/// A running pull prefiller: the peer (ROUTER, core) and the engine target decoders read from.
pub struct PullPrefillerPeer {
    /// The ROUTER and its core.
    pub peer: PrefillerPeer,
    /// Serves the memory to reads; its RPC port is the metadata's `te_rpc_port`.
    pub target: EngineTarget,
}

/// What a pull prefiller is given.
pub struct PullPrefillerStart<'a> {
    /// Its engine id.
    pub engine_id: String,
    /// Its engine's TP size.
    pub tp_size: i64,
    /// The ROUTER's endpoint (`tcp://127.0.0.1:*`: any port).
    pub bind: String,
    /// Overrides the abort timeout.
    pub abort_timeout: Option<Duration>,
    /// The model (`block_size`, heads).
    pub model: &'a ModelConfig,
    /// Its regions.
    pub layout: &'a LayoutConfig,
    /// Keep every ROUTER message in the status.
    pub record_wire: bool,
    /// Deliberate faults in its replies (the runner's mutation suite only).
    pub faults: Vec<crate::faults::Fault>,
}

impl PullPrefillerPeer {
    /// Registers the regions (filled with the provenance pattern) with an engine target on 127.0.0.1, binds the
    /// ROUTER and advertises both in its metadata.
    pub async fn start(profile: PullProfile, s: PullPrefillerStart<'_>) -> Result<PullPrefillerPeer, PullError> {
        s.layout.check()?;
        let memory: SharedMemory = Arc::new(Mutex::new(s.layout.memory(true)));
        let target = EngineTarget::bind("127.0.0.1", 0, 0, memory.clone()).await?;
        let cfg = PullPrefillerConfig {
            engine_id: s.engine_id.clone(),
            local_ip: "127.0.0.1".into(),
            te_rpc_port: target.rpc.port().into(),
            handshake_port: 0,
            block_size: s.model.block_size.unwrap_or(16),
            total_num_kv_heads: s.model.total_num_kv_heads,
            tp_size: s.tp_size,
            layout: pull_layout(s.layout),
        };
        let core = PullPrefiller::new(profile, &cfg)?;
        let pcfg = PrefillerConfig {
            bind: s.bind,
            engine_id: s.engine_id,
            dp_rank: 0,
            tp_rank: 0,
            pp_rank: 0,
            bootstrap: None,
            abort_timeout: s.abort_timeout,
            kv_lease: None,
            record_wire: s.record_wire,
            faults: s.faults,
        };
        // The backend is never used: decoders read, the prefiller writes nothing.
        let peer = PrefillerPeer::start_machine(pcfg, core, memory, Backend::tcp_engine()).await?;
        Ok(PullPrefillerPeer { peer, target })
    }
}

/// A pull decoder's outcomes so far.
#[derive(Clone, Debug, Default)]
pub struct PullDecoderStatus {
    /// Requests finished, in order.
    pub finished: Vec<String>,
    /// Requests reported failed (`failed_read = load-errors`): (d_req_id, reason, invalid blocks).
    pub failed: Vec<(String, String, Vec<u64>)>,
    /// Engine reads: (session, descriptors, bytes, return code).
    pub reads: Vec<(String, usize, u64, i64)>,
    /// Requests not yet over.
    pub pending_pulls: usize,
    /// Exchanges waiting for a reply.
    pub open_exchanges: usize,
    /// Payloads sent, in order: (exchange, endpoint, bytes).
    pub sent: Vec<(u64, String, Vec<u8>)>,
    /// Messages received, in order: (exchange, frames).
    pub received: Vec<(u64, Vec<Vec<u8>>)>,
}

enum Cmd {
    Pull(Vec<PullRead>),
    FailNext(u64, i64),
    Status(oneshot::Sender<PullDecoderStatus>),
}

/// A finished engine read.
struct ReadDone {
    id: ReadId,
    session: String,
    descriptors: usize,
    bytes: u64,
    ret: i64,
}

/// A running pull decoder. Dropping it stops its task.
pub struct PullDecoderPeer {
    /// Its registered memory, which its reads fill.
    pub memory: SharedMemory,
    cmds: mpsc::UnboundedSender<Cmd>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PullDecoderPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PullDecoderPeer {
    /// Starts `core` on the current tokio runtime with a reactor thread on `ctx`; `memory` is what its reads
    /// fill.
    pub fn start(ctx: &zmq::Context, core: PullDecoder, memory: SharedMemory) -> Result<PullDecoderPeer, PeerError> {
        Self::start_with_faults(ctx, core, memory, vec![])
    }

    /// [`PullDecoderPeer::start`] with deliberate faults in what it sends (the runner's mutation suite only).
    pub fn start_with_faults(
        ctx: &zmq::Context,
        core: PullDecoder,
        memory: SharedMemory,
        faults: Vec<crate::faults::Fault>,
    ) -> Result<PullDecoderPeer, PeerError> {
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let reactor = Reactor::start(ctx, in_tx)?;
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let driver = Driver {
            core,
            reactor,
            memory: memory.clone(),
            client: EngineClient::new(),
            fail: (0, -1),
            status: PullDecoderStatus::default(),
            faults,
        };
        let task = tokio::spawn(driver.run(in_rx, cmd_rx));
        Ok(PullDecoderPeer { memory, cmds: cmd_tx, task })
    }

    /// One scheduler step's requests.
    pub fn pull(&self, reads: Vec<PullRead>) {
        let _ = self.cmds.send(Cmd::Pull(reads));
    }

    /// The next `count` engine reads return `ret` without reading.
    pub fn fail_next_reads(&self, count: u64, ret: i64) {
        let _ = self.cmds.send(Cmd::FailNext(count, ret));
    }

    /// A snapshot of the outcomes; errors when the task stopped.
    pub async fn status(&self) -> Result<PullDecoderStatus, PeerError> {
        let (tx, rx) = oneshot::channel();
        self.cmds.send(Cmd::Status(tx)).map_err(|_| PeerError::Stopped("decoder"))?;
        rx.await.map_err(|_| PeerError::Stopped("decoder"))
    }
}

struct Driver {
    core: PullDecoder,
    reactor: Reactor,
    memory: SharedMemory,
    client: EngineClient,
    /// Reads still to fail, and the code they return.
    fail: (u64, i64),
    status: PullDecoderStatus,
    /// Deliberate faults in what it sends.
    faults: Vec<crate::faults::Fault>,
}

/// Reads the descriptors from `session` into `memory`: 0, or -1 when the engine or the memory refuses.
async fn read(client: EngineClient, memory: SharedMemory, session: String, descriptors: Vec<ReadDescriptor>) -> i64 {
    let reqs = descriptors.iter().map(|d| Request::Read { addr: d.remote, len: d.len }).collect();
    match client.transfer(&session, reqs).await {
        Ok(data) => {
            let mut m = memory.lock().unwrap_or_else(|p| p.into_inner());
            let all = descriptors.iter().zip(&data).all(|(d, bytes)| m.write(d.local, bytes));
            if all && data.len() == descriptors.len() {
                0
            } else {
                -1
            }
        }
        Err(e) => {
            tracing::warn!(%session, error = %e, "engine read failed");
            -1
        }
    }
}

impl Driver {
    fn start_read(&mut self, id: ReadId, session: String, descriptors: Vec<ReadDescriptor>, done: &ReadTx) {
        let (n, bytes) = (descriptors.len(), descriptors.iter().map(|d| d.len).sum());
        if self.fail.0 > 0 {
            self.fail.0 -= 1;
            let ret = self.fail.1;
            let _ = done.send(ReadDone { id, session, descriptors: n, bytes, ret });
            return;
        }
        let (client, memory, done) = (self.client.clone(), self.memory.clone(), done.clone());
        tokio::spawn(async move {
            let ret = read(client, memory, session.clone(), descriptors).await;
            let _ = done.send(ReadDone { id, session, descriptors: n, bytes, ret });
        });
    }

    fn pump(&mut self, done: &ReadTx) {
        while let Some(ev) = self.core.poll_event() {
            match ev {
                PullDecoderEvent::Open { id, addr, payload } => {
                    let payload = crate::faults::wire::apply_to_raw_request(&self.faults, payload);
                    record(&mut self.status.sent, (id.0, addr.clone(), payload.clone()));
                    self.reactor.open_req(id.0, &addr, payload);
                }
                PullDecoderEvent::Close { id } => self.reactor.close_dealer(id.0),
                PullDecoderEvent::Read { id, session, descriptors } => self.start_read(id, session, descriptors, done),
                PullDecoderEvent::Finished { d_req_id } => record(&mut self.status.finished, d_req_id),
                PullDecoderEvent::Failed { d_req_id, reason, invalid_blocks } => {
                    tracing::warn!(%d_req_id, %reason, "read failed");
                    record(&mut self.status.failed, (d_req_id, reason, invalid_blocks));
                }
            }
        }
    }

    fn incoming(&mut self, m: Incoming) {
        let now = Instant::now();
        match m {
            Incoming::Dealer { id, frames } => {
                record(&mut self.status.received, (id, frames.clone()));
                match <[Vec<u8>; 1]>::try_from(frames) {
                    Ok([payload]) => self.core.handle_reply(now, ExchangeId(id), &payload),
                    Err(f) => self.core.exchange_failed(now, ExchangeId(id), &format!("{} frames", f.len())),
                }
            }
            Incoming::DealerError { id, error } => self.core.exchange_failed(now, ExchangeId(id), &error),
            // A decoder's reactor binds no ROUTER.
            Incoming::Router(_) => {}
        }
    }

    fn command(&mut self, c: Cmd) {
        match c {
            Cmd::Pull(reads) => self.core.pull(Instant::now(), reads),
            Cmd::FailNext(n, ret) => self.fail = (n, ret),
            Cmd::Status(tx) => {
                let mut s = self.status.clone();
                s.pending_pulls = self.core.pending_pulls();
                s.open_exchanges = self.core.open_exchanges();
                let _ = tx.send(s);
            }
        }
    }

    async fn run(mut self, mut incoming: mpsc::UnboundedReceiver<Incoming>, mut cmds: mpsc::UnboundedReceiver<Cmd>) {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<ReadDone>();
        loop {
            self.pump(&done_tx);
            let sleep = mooncake_io::sleep_until(self.core.poll_timeout());
            tokio::select! {
                m = incoming.recv() => match m {
                    Some(m) => self.incoming(m),
                    None => return,
                },
                c = cmds.recv() => match c {
                    Some(c) => self.command(c),
                    None => return,
                },
                Some(r) = done_rx.recv() => {
                    record(&mut self.status.reads, (r.session, r.descriptors, r.bytes, r.ret));
                    self.core.read_complete(Instant::now(), r.id, r.ret);
                }
                _ = sleep => self.core.handle_timeout(Instant::now()),
            }
        }
    }
}

type ReadTx = mpsc::UnboundedSender<ReadDone>;
