//! The testee control protocol (`conformance/TESTEE.md`): one command in, one answer out. `mooncake-peer
//! testee` runs it over standard input and output, and is the conformance runner's built-in testee (a process
//! the runner finds next to its own executable; the runner does not link this crate).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_testee_protocol::{
    self as proto, BootstrapConfig, Command, CommandError, Done, FinishedSending, Hello, Started, WireEntry,
    WriteRecord,
};
use mooncake_wire::proto::gen1::{Gen1Decoder, Gen1DecoderConfig, Gen1Prefiller, Gen1Profile};
use mooncake_wire::proto::pull::{PullDecoder, PullProfile, PullRead};
use mooncake_wire::proto::{DecoderConfig, DecoderCore, LeaseRequest, PullRequest, Registry, WireProfile};
use mooncake_wire::spec::Spec;
use serde_json::{json, Value as J};
use tokio::net::TcpListener;

use crate::backend::Backend;
use crate::decoder::DecoderPeer;
use crate::engine::{serve_edited, PeerLog};
use crate::faults::bootstrap::FaultyBootstrap;
use crate::faults::Fault;
use crate::http::BootstrapServer;
use crate::prefiller::{PrefillerConfig, PrefillerPeer};
use crate::pull::{pull_layout, pull_revisions, PullDecoderPeer, PullPrefillerPeer, PullPrefillerStart};
use mooncake_io::layout::{producer, producer_with, LayoutExt};

/// Revisions the reference peer speaks: every generation-2 revision with per-group block lists whose layout
/// fields the typed structs carry.
pub fn revisions() -> Vec<String> {
    Spec::builtin()
        .push()
        .revisions
        .iter()
        .filter(|r| r.generation == 1 || r.generation == 2)
        .map(|r| r.revision.clone())
        .collect()
}

/// The reference peer's hello: the push revisions ([`revisions`]), then the pull revisions
/// ([`pull_revisions`], `conformance/TESTEE.md`, "The pull family (vllm-ascend)").
pub fn hello() -> Hello {
    Hello::new(
        format!("mooncake-peer {}", env!("CARGO_PKG_VERSION")),
        revisions().into_iter().chain(pull_revisions()).collect(),
        &[proto::Role::Prefiller, proto::Role::Decoder, proto::Role::Bootstrap],
    )
}

/// The peer this testee runs in its role (`proto::Role` names the role; this holds what serves it).
enum Running {
    /// The server, and the faulty front before it when the config asks for bootstrap faults.
    Bootstrap {
        server: BootstrapServer,
        _front: Option<FaultyBootstrap>,
    },
    /// The peer, and whether `status` shows its wire.
    Prefiller(PrefillerPeer, bool),
    Decoder(DecoderPeer, tokio::task::JoinHandle<()>, bool),
    /// A pull-family decoder, and whether `status` shows its wire.
    PullDecoder(PullDecoderPeer, bool),
}

/// One message of a `wire` list: `{"dir": "in"|"out", "frames": [hex, ...]}` (plus the endpoint a decoder sent
/// to).
fn wire_entry(inbound: bool, frames: &[Vec<u8>], endpoint: Option<&str>) -> WireEntry {
    WireEntry {
        dir: if inbound { "in" } else { "out" }.into(),
        frames: frames.iter().map(hex::encode).collect(),
        endpoint: endpoint.map(String::from),
    }
}

/// The reference peer as a testee of the conformance runner: takes one role at a time (bootstrap server,
/// prefiller or decoder) and answers the control protocol's commands ([`Testee::handle`]).
pub struct Testee {
    ctx: zmq::Context,
    role: Option<Running>,
    /// A pull prefiller's transfer-engine target (serving its memory to the decoders' reads).
    target: Option<mooncake_io::engine::EngineTarget>,
    /// The deliberate faults of its role's start config that act in that role.
    faults: Vec<Fault>,
}

/// Why the testee refuses or fails a command. Its text is the testee protocol's error answer
/// (`{"ok": false, "error": "..."}`): what the runner shows, and what a runner reads `unsupported:` from.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TesteeError {
    /// A command this testee does not implement.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A command that needs a role, before `start`.
    #[error("unsupported: {0} before start")]
    BeforeStart(&'static str),
    /// A command the protocol cannot read.
    #[error(transparent)]
    Command(CommandError),
    /// A second `start`.
    #[error("this testee already has a role")]
    HasRole,
    /// A revision the reference peer does not speak.
    #[error("unsupported revision {0}")]
    UnsupportedRevision(String),
    /// A `start` config that is not the role's config.
    #[error("config: {0}")]
    Config(#[source] serde_json::Error),
    /// A transfer backend other than `tcp-engine`.
    #[error("config: transfer `{0}` is not a transfer backend (tcp-engine)")]
    Transfer(String),
    /// A negative, infinite or NaN number of seconds, or more than `limits::MAX_TIMEOUT_SECS`.
    #[error("{what}: {value} is not a duration in seconds from 0 to a week (604800)")]
    Duration {
        /// The config key.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// A bootstrap role in a revision without a bootstrap server.
    #[error("no bootstrap server in this revision")]
    NoBootstrap,
    /// A generation-1 prefiller given a bootstrap server.
    #[error("generation 1 has no bootstrap server: `bootstrap` must be null")]
    Gen1Bootstrap,
    /// The revision's bootstrap codec cannot be built.
    #[error(transparent)]
    BootstrapSpec(#[from] mooncake_wire::spec::SpecError),
    /// The bootstrap server cannot start.
    #[error(transparent)]
    Http(#[from] mooncake_io::http::HttpError),
    /// The revision's wire profile (or planning rules) cannot be built.
    #[error(transparent)]
    Profile(#[from] mooncake_wire::proto::ProfileError),
    /// A pull role cannot start (its layout, its engine target, its sockets).
    #[error(transparent)]
    Pull(#[from] crate::pull::PullError),
    /// The layout (or the planner built from it) is refused.
    #[error(transparent)]
    Layout(#[from] mooncake_io::layout::LayoutError),
    /// A fault name the peer does not know.
    #[error(transparent)]
    Fault(#[from] crate::error::UnknownFault),
    /// A lease duration the revision cannot take (`kv_lease_duration_s`).
    #[error("config: {0}")]
    Lease(#[from] mooncake_wire::proto::LeaseError),
    /// The peer cannot start or answer.
    #[error(transparent)]
    Peer(#[from] crate::error::PeerError),
    /// The decoder's transfer-engine listener cannot be bound.
    #[error("transfer-engine listener: {0}")]
    Listener(#[source] std::io::Error),
    /// The listener's address cannot be read.
    #[error(transparent)]
    LocalAddr(std::io::Error),
    /// A lock another thread poisoned (`memory` or `registry`).
    #[error("{0} lock")]
    Poisoned(&'static str),
    /// A `read_memory` range outside the registered memory.
    #[error("{len} bytes at {addr:#x} are not registered")]
    NotRegistered {
        /// The address asked for.
        addr: u64,
        /// The length asked for.
        len: u64,
    },
    /// The bootstrap table cannot be written as JSON.
    #[error(transparent)]
    Json(serde_json::Error),
}

impl From<CommandError> for TesteeError {
    fn from(e: CommandError) -> Self {
        match e {
            CommandError::Unsupported(name) => TesteeError::Unsupported(name),
            e => TesteeError::Command(e),
        }
    }
}

/// The faults a role's start config lists (`"faults": [names]`) that act in that role.
fn role_faults(role: proto::Role, config: &J) -> Result<Vec<Fault>, TesteeError> {
    let names: Vec<String> = match config.get("faults") {
        None => vec![],
        Some(v) => serde_json::from_value(v.clone()).map_err(TesteeError::Config)?,
    };
    let mut faults = Fault::parse_all(&names)?;
    faults.retain(|f| f.roles().contains(&role));
    Ok(faults)
}

/// The transfer backends a process can use: `tcp-engine` (the default).
fn check_transfer(t: &Option<String>) -> Result<(), TesteeError> {
    match t.as_deref() {
        None | Some("tcp-engine") => Ok(()),
        Some(other) => Err(TesteeError::Transfer(other.to_string())),
    }
}

/// Seconds from a control command; negative, infinite or NaN values are refused.
fn secs(v: Option<f64>, what: &'static str) -> Result<Option<Duration>, TesteeError> {
    match v {
        None => Ok(None),
        Some(x) if x <= mooncake_wire::limits::MAX_TIMEOUT_SECS => {
            Duration::try_from_secs_f64(x).map(Some).map_err(|_| TesteeError::Duration { what, value: x })
        }
        Some(x) => Err(TesteeError::Duration { what, value: x }),
    }
}

impl Default for Testee {
    fn default() -> Self {
        Testee { ctx: zmq::Context::new(), role: None, target: None, faults: vec![] }
    }
}

impl Testee {
    /// Handles one command; never panics on bad input.
    pub async fn handle(&mut self, cmd: &J) -> J {
        let r = match Command::parse(cmd) {
            Err(e) => Err(TesteeError::from(e)),
            Ok(Command::Start { role, revision, config }) => self.start(role, &revision, config).await,
            Ok(Command::Stop) => {
                self.role = None;
                self.target = None;
                Ok(proto::ok_answer(&Done {}))
            }
            Ok(Command::Status) if self.faults.contains(&Fault::CrashOnStatus) => std::process::exit(3),
            Ok(Command::Status) if self.faults.contains(&Fault::HangOnStatus) => std::future::pending().await,
            Ok(c) if matches!(self.role, Some(Running::PullDecoder(..))) => self.pull_decoder_cmd(c).await,
            Ok(c) => self.role_cmd(c).await,
        };
        r.unwrap_or_else(proto::error_answer)
    }

    async fn start(&mut self, role: proto::Role, revision: &str, config: J) -> Result<J, TesteeError> {
        if self.role.is_some() {
            return Err(TesteeError::HasRole);
        }
        if !revisions().iter().chain(&pull_revisions()).any(|r| r == revision) {
            return Err(TesteeError::UnsupportedRevision(revision.to_string()));
        }
        let rev = Spec::builtin().revision(revision).expect("listed").clone();
        let config = if config.is_null() { json!({}) } else { config };
        self.faults = role_faults(role, &config)?;
        if rev.family == "pull" {
            return self.start_pull(role, revision, config).await;
        }
        match role {
            proto::Role::Bootstrap => {
                let c: BootstrapConfig = serde_json::from_value(config).map_err(TesteeError::Config)?;
                let bind = c.bind.unwrap_or_else(|| "127.0.0.1:0".into());
                let spec = mooncake_wire::bootstrap::BootstrapSpec::new(rev).ok_or(TesteeError::NoBootstrap)??;
                let (s, front) = if self.faults.is_empty() {
                    (BootstrapServer::start(&bind, Registry::new(spec)).await?, None)
                } else {
                    let inner = BootstrapServer::start("127.0.0.1:0", Registry::new(spec)).await?;
                    let front = crate::faults::bootstrap::start(&bind, inner.url(), self.faults.clone()).await?;
                    (inner, Some(front))
                };
                let url = front.as_ref().map_or_else(|| s.url(), |f| f.url.clone());
                self.role = Some(Running::Bootstrap { server: s, _front: front });
                Ok(proto::ok_answer(&Started { url: Some(url), ..Default::default() }))
            }
            proto::Role::Prefiller => {
                let c: proto::PrefillerConfig = serde_json::from_value(config).map_err(TesteeError::Config)?;
                check_transfer(&c.transfer)?;
                if rev.generation == 1 {
                    return self.start_gen1_prefiller(revision, c).await;
                }
                let profile = WireProfile::builtin(revision)?;
                let planner = producer(c.tp_rank, c.tp_size, c.pp_size, &c.model, &c.layout, &profile)?;
                let memory = Arc::new(Mutex::new(c.layout.memory(true)));
                let cfg = PrefillerConfig {
                    bind: c.bind.unwrap_or_else(|| "tcp://127.0.0.1:*".into()),
                    engine_id: c.engine_id,
                    dp_rank: c.dp_rank,
                    tp_rank: c.tp_rank,
                    pp_rank: c.pp_rank,
                    bootstrap: c.bootstrap,
                    abort_timeout: secs(c.abort_timeout_s, "abort_timeout_s")?,
                    kv_lease: secs(c.kv_lease_duration_s, "kv_lease_duration_s")?,
                    record_wire: c.record_wire,
                    faults: self.faults.clone(),
                };
                let p = PrefillerPeer::start(cfg, profile, planner, memory, Backend::tcp_engine()).await?;
                let endpoint = p.endpoint.clone();
                self.role = Some(Running::Prefiller(p, c.record_wire));
                Ok(proto::ok_answer(&Started { endpoint: Some(endpoint), ..Default::default() }))
            }
            proto::Role::Decoder => {
                let c: proto::DecoderConfig = serde_json::from_value(config).map_err(TesteeError::Config)?;
                check_transfer(&c.transfer)?;
                c.layout.check()?;
                let memory = Arc::new(Mutex::new(c.layout.memory(false)));
                let listener =
                    TcpListener::bind((c.hostname.as_str(), c.te_port)).await.map_err(TesteeError::Listener)?;
                let port = listener.local_addr().map_err(TesteeError::LocalAddr)?.port();
                let edit = crate::faults::te::answer_edit(&self.faults);
                let server = tokio::spawn(serve_edited(listener, memory.clone(), PeerLog::default(), edit));
                if rev.generation == 1 {
                    let profile = Gen1Profile::builtin(revision)?;
                    let cfg = Gen1DecoderConfig {
                        hostname: c.hostname.clone(),
                        te_port: port as u64,
                        tp_rank: c.tp_rank as u64,
                        kv_caches_base_addr: c.layout.kv_caches_base_addr.clone(),
                    };
                    let mut core = Gen1Decoder::new(profile, cfg);
                    if let Some(t) = secs(c.recv_timeout_s, "recv_timeout_s")? {
                        core.set_recv_timeout(t);
                    }
                    let d = DecoderPeer::start(&self.ctx, core, memory)?;
                    self.role = Some(Running::Decoder(d, server, c.record_wire));
                    return Ok(session(&c.hostname, port));
                }
                let profile = WireProfile::builtin(revision)?;
                let cfg = DecoderConfig {
                    hostname: c.hostname.clone(),
                    te_port: port as u64,
                    tp_rank: c.tp_rank,
                    tp_size: c.tp_size,
                    pp_rank: c.pp_rank,
                    pp_size: c.pp_size,
                    layout: c.layout.decoder_layout(),
                    layout_id: c.layout_id,
                };
                let mut core = DecoderCore::new(profile, cfg);
                if let Some(t) = secs(c.abort_timeout_s, "abort_timeout_s")? {
                    core.set_recv_timeout(t + Duration::from_secs(60));
                }
                if let Some(t) = secs(c.recv_timeout_s, "recv_timeout_s")? {
                    core.set_recv_timeout(t);
                }
                core.set_kv_lease_duration(secs(c.kv_lease_duration_s, "kv_lease_duration_s")?)?;
                let d = DecoderPeer::start_with_faults(&self.ctx, core, memory, self.faults.clone())?;
                self.role = Some(Running::Decoder(d, server, c.record_wire));
                Ok(session(&c.hostname, port))
            }
        }
    }

    /// A generation-1 prefiller: a ROUTER at `bind`, no bootstrap server, requests known by the decoder's ids.
    async fn start_gen1_prefiller(&mut self, revision: &str, c: proto::PrefillerConfig) -> Result<J, TesteeError> {
        if c.bootstrap.is_some() {
            return Err(TesteeError::Gen1Bootstrap);
        }
        let profile = Gen1Profile::builtin(revision)?;
        let planner = producer_with(c.tp_rank, c.tp_size, c.pp_size, &c.model, &c.layout, profile.plan_rules()?, None)?;
        let memory = Arc::new(Mutex::new(c.layout.memory(true)));
        let mut core = Gen1Prefiller::new(profile, planner);
        if let Some(t) = secs(c.abort_timeout_s, "abort_timeout_s")? {
            core.set_abort_timeout(t);
        }
        let cfg = PrefillerConfig {
            bind: c.bind.unwrap_or_else(|| "tcp://127.0.0.1:*".into()),
            engine_id: c.engine_id,
            dp_rank: c.dp_rank,
            tp_rank: c.tp_rank,
            pp_rank: c.pp_rank,
            bootstrap: None,
            abort_timeout: None,
            kv_lease: None,
            record_wire: c.record_wire,
            faults: self.faults.clone(),
        };
        let p = PrefillerPeer::start_machine(cfg, core, memory, Backend::tcp_engine()).await?;
        let endpoint = p.endpoint.clone();
        self.role = Some(Running::Prefiller(p, c.record_wire));
        Ok(proto::ok_answer(&Started { endpoint: Some(endpoint), ..Default::default() }))
    }

    /// A role of the pull family (`conformance/TESTEE.md`, "The pull family (vllm-ascend)").
    async fn start_pull(&mut self, role: proto::Role, revision: &str, config: J) -> Result<J, TesteeError> {
        let profile = PullProfile::builtin(revision)?;
        match role {
            proto::Role::Bootstrap => Err(TesteeError::NoBootstrap),
            proto::Role::Prefiller => {
                let c: proto::PrefillerConfig = serde_json::from_value(config).map_err(TesteeError::Config)?;
                check_transfer(&c.transfer)?;
                let start = PullPrefillerStart {
                    engine_id: c.engine_id,
                    tp_size: c.tp_size,
                    bind: c.bind.unwrap_or_else(|| "tcp://127.0.0.1:*".into()),
                    abort_timeout: secs(c.abort_timeout_s, "abort_timeout_s")?,
                    model: &c.model,
                    layout: &c.layout,
                    record_wire: c.record_wire,
                    faults: self.faults.clone(),
                };
                let p = PullPrefillerPeer::start(profile, start).await?;
                let endpoint = p.peer.endpoint.clone();
                self.role = Some(Running::Prefiller(p.peer, c.record_wire));
                self.target = Some(p.target);
                Ok(proto::ok_answer(&Started { endpoint: Some(endpoint), ..Default::default() }))
            }
            proto::Role::Decoder => {
                let c: proto::DecoderConfig = serde_json::from_value(config).map_err(TesteeError::Config)?;
                check_transfer(&c.transfer)?;
                c.layout.check()?;
                let memory = Arc::new(Mutex::new(c.layout.memory(false)));
                let mut core = PullDecoder::new(profile, c.tp_rank as u64, pull_layout(&c.layout))
                    .map_err(crate::pull::PullError::from)?;
                if let Some(t) = secs(c.recv_timeout_s, "recv_timeout_s")? {
                    core.set_reply_timeout(t);
                }
                let d = PullDecoderPeer::start_with_faults(&self.ctx, core, memory, self.faults.clone())?;
                self.role = Some(Running::PullDecoder(d, c.record_wire));
                Ok(proto::ok_answer(&Done {}))
            }
        }
    }

    /// A command to a pull decoder.
    async fn pull_decoder_cmd(&mut self, cmd: Command) -> Result<J, TesteeError> {
        let Some(Running::PullDecoder(d, wire)) = &self.role else { return Err(TesteeError::BeforeStart(cmd.name())) };
        match cmd {
            Command::Pull { requests } => {
                d.pull(requests.into_iter().map(pull_read).collect());
                Ok(proto::ok_answer(&Done {}))
            }
            Command::FailNextTransfer { count, ret } => {
                d.fail_next_reads(count, ret);
                Ok(proto::ok_answer(&Done {}))
            }
            Command::Status => {
                let mut status = pull_decoder_status(&d.status().await?, *wire);
                crate::faults::report::decoder_status(&self.faults, &mut status);
                Ok(proto::ok_answer(&status))
            }
            Command::ReadMemory { addr, len } => {
                let m = d.memory.lock().map_err(|_| TesteeError::Poisoned("memory"))?;
                let b = m.read(addr, len).ok_or(TesteeError::NotRegistered { addr, len })?;
                let b = crate::faults::report::memory(&self.faults, b.to_vec());
                Ok(proto::ok_answer(&proto::Memory { hex: hex::encode(b) }))
            }
            c => Err(TesteeError::Unsupported(c.name().to_string())),
        }
    }

    async fn role_cmd(&mut self, cmd: Command) -> Result<J, TesteeError> {
        let done = || Ok(proto::ok_answer(&Done {}));
        match (&self.role, cmd) {
            (None, c) => Err(TesteeError::BeforeStart(c.name())),
            (Some(Running::Prefiller(p, _)), Command::Allocate { p_req_id, transfer_id }) => {
                p.allocated(&p_req_id, &transfer_id);
                done()
            }
            (Some(Running::Prefiller(p, _)), Command::Ready { p_req_id, transfer_id, blocks }) => {
                p.finished(&p_req_id, &transfer_id, blocks);
                done()
            }
            (Some(Running::Prefiller(p, _)), Command::Abort { transfer_id }) => {
                p.aborted(&transfer_id);
                done()
            }
            (Some(Running::Prefiller(p, _)), Command::ForgetLayouts) => {
                p.forget_layouts();
                done()
            }
            (Some(Running::Prefiller(p, _)), Command::FailNextTransfer { count, ret }) => {
                p.fail_next_writes(count as usize, ret);
                done()
            }
            (Some(Running::Prefiller(p, wire)), Command::Status) => {
                let s = p.status().await?;
                let status = proto::PrefillerStatus {
                    tracked_transfers: Some(s.tracked_transfers as u64),
                    open_exchanges: Some(s.open_exchanges as u64),
                    cached_layouts: Some(s.cached_layouts as u64),
                    finished_sending: s
                        .finished_sending
                        .iter()
                        .map(|(p, t, e)| FinishedSending { p_req_id: p.clone(), transfer_id: t.clone(), expired: *e })
                        .collect(),
                    writes: s
                        .writes
                        .iter()
                        .map(|(sess, n, b, r)| WriteRecord {
                            session: sess.clone(),
                            descriptors: *n as u64,
                            bytes: *b,
                            ret: *r,
                        })
                        .collect(),
                    rejected: Some(s.rejected.clone()),
                    heartbeats: Some(s.stats.heartbeats),
                    wire: wire.then(|| s.wire.iter().map(|(inbound, f)| wire_entry(*inbound, f, None)).collect()),
                };
                let mut status = status;
                crate::faults::report::prefiller_status(&self.faults, &mut status);
                Ok(proto::ok_answer(&status))
            }
            (Some(Running::Decoder(d, _, _)), Command::Pull { requests }) => {
                d.pull(
                    requests
                        .into_iter()
                        .map(|r| PullRequest {
                            remote: r.remote_host.zip(r.remote_port),
                            d_req_id: r.d_req_id,
                            transfer_id: r.transfer_id,
                            local_blocks: r.blocks,
                            engine_id: r.engine_id,
                            bootstrap_addr: r.bootstrap_addr,
                        })
                        .collect(),
                );
                done()
            }
            (Some(Running::Decoder(d, _, _)), Command::Announce { requests }) => {
                d.announce(
                    requests
                        .into_iter()
                        .map(|r| LeaseRequest {
                            d_req_id: r.d_req_id,
                            transfer_id: r.transfer_id,
                            engine_id: r.engine_id,
                            bootstrap_addr: r.bootstrap_addr,
                        })
                        .collect(),
                );
                done()
            }
            (Some(Running::Decoder(d, _, wire)), Command::Status) => {
                let s = d.status().await?;
                let wire = wire.then(|| decoder_wire(&s.sent, &s.received));
                let status = proto::DecoderStatus {
                    finished: s.finished.clone(),
                    failed: s
                        .failed
                        .iter()
                        .map(|(id, r, b, fr)| proto::Failed {
                            d_req_id: id.clone(),
                            reason: r.clone(),
                            invalid_blocks: b.clone(),
                            failed_recving: *fr,
                        })
                        .collect(),
                    unsettled: Some(
                        s.unsettled
                            .iter()
                            .map(|(id, r)| proto::Unsettled { d_req_id: id.clone(), reason: r.clone() })
                            .collect(),
                    ),
                    pending_pulls: Some(s.pending_pulls as u64),
                    open_exchanges: Some(s.open_exchanges as u64),
                    leased: Some(s.leased as u64),
                    heartbeats: Some(proto::HeartbeatCounts {
                        sent: s.leases.sent,
                        renewed: s.leases.renewed,
                        rejected: s.leases.rejected,
                        last_rejection: s.leases.last_rejection.clone(),
                    }),
                    wire,
                    reads: None,
                };
                let mut status = status;
                crate::faults::report::decoder_status(&self.faults, &mut status);
                Ok(proto::ok_answer(&status))
            }
            (Some(Running::Decoder(d, _, _)), Command::ReadMemory { addr, len }) => {
                let m = d.memory.lock().map_err(|_| TesteeError::Poisoned("memory"))?;
                let b = m.read(addr, len).ok_or(TesteeError::NotRegistered { addr, len })?;
                let b = crate::faults::report::memory(&self.faults, b.to_vec());
                Ok(proto::ok_answer(&proto::Memory { hex: hex::encode(b) }))
            }
            (Some(Running::Bootstrap { server: b, .. }), Command::Status) => {
                let r = b.registry.lock().map_err(|_| TesteeError::Poisoned("registry"))?;
                let table = serde_json::to_value(r.query()).map_err(TesteeError::Json)?;
                Ok(proto::ok_answer(&proto::BootstrapStatus { workers: r.worker_count() as u64, table }))
            }
            (_, c) => Err(TesteeError::Unsupported(c.name().to_string())),
        }
    }
}

/// A `pull` request of the pull family: `transfer_id` is the prefiller's request id.
fn pull_read(r: proto::Pull) -> PullRead {
    PullRead {
        d_req_id: r.d_req_id,
        remote_request_id: r.transfer_id,
        local_blocks: r.blocks,
        remote_blocks: r.remote_blocks,
        engine_id: r.engine_id,
        remote_host: r.remote_host.unwrap_or_else(|| "127.0.0.1".into()),
        remote_port: r.remote_port.unwrap_or_default(),
    }
}

/// A decoder's `wire` list from what it sent per exchange (exchange, endpoint, payload) and received (exchange,
/// frames): in exchange order, each exchange's request, then its replies.
fn decoder_wire(sent: &[(u64, String, Vec<u8>)], received: &[(u64, Vec<Vec<u8>>)]) -> Vec<WireEntry> {
    let mut w = vec![];
    for (id, addr, payload) in sent {
        w.push(wire_entry(false, std::slice::from_ref(payload), Some(addr)));
        w.extend(received.iter().filter(|(r, _)| r == id).map(|(_, f)| wire_entry(true, f, Some(addr))));
    }
    w
}

/// A pull decoder's `status`: a failed entry only where the revision reports the read (`failed_read`).
fn pull_decoder_status(s: &crate::pull::PullDecoderStatus, wire: bool) -> proto::DecoderStatus {
    let wire = wire.then(|| decoder_wire(&s.sent, &s.received));
    let failed = s.failed.iter().map(|(id, reason, blocks)| proto::Failed {
        d_req_id: id.clone(),
        reason: reason.clone(),
        invalid_blocks: blocks.clone(),
        failed_recving: false,
    });
    let reads = s.reads.iter().map(|(session, n, bytes, ret)| WriteRecord {
        session: session.clone(),
        descriptors: *n as u64,
        bytes: *bytes,
        ret: *ret,
    });
    proto::DecoderStatus {
        finished: s.finished.clone(),
        failed: failed.collect(),
        unsettled: Some(vec![]),
        pending_pulls: Some(s.pending_pulls as u64),
        open_exchanges: Some(s.open_exchanges as u64),
        wire,
        reads: Some(reads.collect()),
        ..Default::default()
    }
}

/// The answer to a decoder's `start`: its transfer-engine endpoint.
fn session(hostname: &str, port: u16) -> J {
    proto::ok_answer(&Started { session: Some(format!("{hostname}:{port}")), ..Default::default() })
}

impl Drop for Testee {
    fn drop(&mut self) {
        if let Some(Running::Decoder(_, server, _)) = &self.role {
            server.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A testee's `start` config takes a duration in seconds from 0 to a week; anything else is refused by
    /// name (a huge one used to overflow the first deadline, a panic).
    #[test]
    fn config_durations_are_range_checked() {
        for bad in [f64::NAN, f64::INFINITY, -1.0, 1e300, mooncake_wire::limits::MAX_TIMEOUT_SECS * 2.0] {
            let e = secs(Some(bad), "abort_timeout_s").unwrap_err();
            assert!(e.to_string().starts_with("abort_timeout_s: "), "{e}");
        }
        assert_eq!(secs(Some(2.5), "x").unwrap(), Some(Duration::from_millis(2500)));
        assert_eq!(secs(None, "x").unwrap(), None);
    }
}
