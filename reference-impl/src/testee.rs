//! The testee control protocol (`conformance/TESTEE.md`): one command in, one answer out. `mooncake-peer
//! testee` runs it over standard input and output; the conformance runner uses it in-process as its built-in
//! reference peer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_wire::proto::gen1::{Gen1Decoder, Gen1DecoderConfig, Gen1Prefiller, Gen1Profile};
use mooncake_wire::proto::{DecoderConfig, DecoderCore, PullRequest, Registry, WireProfile};
use mooncake_wire::spec::Spec;
use serde::Deserialize;
use serde_json::{json, Value as J};
use tokio::net::TcpListener;

use crate::backend::{serve_engine, Backend};
use crate::config::{producer, producer_with, LayoutConfig, ModelConfig};
use crate::decoder::DecoderPeer;
use crate::http::BootstrapServer;
use crate::prefiller::{PrefillerConfig, PrefillerPeer};

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

pub fn hello() -> J {
    json!({"hello": "mooncake-testee", "protocol": 1, "name": format!("mooncake-peer {}", env!("CARGO_PKG_VERSION")),
           "revisions": revisions(), "roles": ["prefiller", "decoder", "bootstrap"]})
}

enum Role {
    Bootstrap(BootstrapServer),
    /// The peer, and whether `status` shows its wire.
    Prefiller(PrefillerPeer, bool),
    Decoder(DecoderPeer, tokio::task::JoinHandle<()>, bool),
}

/// One message of a `wire` list: `{"dir": "in"|"out", "frames": [hex, ...]}` (plus the endpoint a decoder sent
/// to).
fn wire_entry(inbound: bool, frames: &[Vec<u8>], endpoint: Option<&str>) -> J {
    let mut e = json!({"dir": if inbound { "in" } else { "out" }, "frames": frames.iter().map(hex::encode).collect::<Vec<_>>()});
    if let Some(ep) = endpoint {
        e["endpoint"] = json!(ep);
    }
    e
}

pub struct Testee {
    ctx: zmq::Context,
    role: Option<Role>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrefillerStart {
    /// The transfer backend: `tcp-engine` (Mooncake Transfer Engine's TCP transport; the only one a process
    /// can use — the in-process fabric is a library feature for tests).
    #[serde(default)]
    transfer: Option<String>,
    /// Generation 2 only (the engine it registers as).
    #[serde(default)]
    engine_id: String,
    #[serde(default)]
    dp_rank: i64,
    #[serde(default)]
    tp_rank: i64,
    #[serde(default = "one")]
    tp_size: i64,
    #[serde(default)]
    pp_rank: i64,
    #[serde(default = "one")]
    pp_size: i64,
    #[serde(default)]
    bootstrap: Option<String>,
    #[serde(default)]
    bind: Option<String>,
    #[serde(default)]
    abort_timeout_s: Option<f64>,
    model: ModelConfig,
    layout: LayoutConfig,
    /// Deliberate faults (tests of the conformance runner).
    #[serde(default)]
    faults: Vec<String>,
    /// Keep every ZeroMQ message; `status` lists them under `wire`.
    #[serde(default)]
    record_wire: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecoderStart {
    /// The transfer backend (see `PrefillerStart::transfer`).
    #[serde(default)]
    transfer: Option<String>,
    /// The transfer engine's RPC (handshake) port, sent as `remote_port` (0: any free port).
    #[serde(default)]
    te_port: u16,
    #[serde(default = "localhost")]
    hostname: String,
    #[serde(default)]
    tp_rank: usize,
    #[serde(default = "one_usize")]
    tp_size: usize,
    #[serde(default)]
    pp_rank: usize,
    #[serde(default = "one_usize")]
    pp_size: usize,
    #[serde(default)]
    layout_id: u64,
    #[serde(default)]
    abort_timeout_s: Option<f64>,
    /// How long to wait for each reply (vLLM: abort timeout + 60 s).
    #[serde(default)]
    recv_timeout_s: Option<f64>,
    layout: LayoutConfig,
    #[serde(default)]
    faults: Vec<String>,
    /// `status` lists every ZeroMQ message sent and received under `wire`.
    #[serde(default)]
    record_wire: bool,
}

#[derive(Deserialize)]
struct PullCmd {
    d_req_id: String,
    /// Generation 2 (generation 1 has no transfer id).
    #[serde(default)]
    transfer_id: String,
    #[serde(default)]
    blocks: Vec<Vec<u64>>,
    /// Generation 2: the prefiller engine and its bootstrap server.
    #[serde(default)]
    engine_id: String,
    #[serde(default)]
    bootstrap_addr: String,
    /// Generation 1: `kv_transfer_params` `remote_host` and `remote_port` (the engine's base port).
    #[serde(default)]
    remote_host: Option<String>,
    #[serde(default)]
    remote_port: Option<u64>,
}

fn one() -> i64 {
    1
}
/// The transfer backends a process can use: `tcp-engine` (the default).
fn check_transfer(t: &Option<String>) -> Result<(), String> {
    match t.as_deref() {
        None | Some("tcp-engine") => Ok(()),
        Some(other) => Err(format!("config: transfer `{other}` is not a transfer backend (tcp-engine)")),
    }
}

fn one_usize() -> usize {
    1
}
fn localhost() -> String {
    "127.0.0.1".into()
}

/// Seconds from a control command; negative, infinite or NaN values are refused.
fn secs(v: Option<f64>, what: &str) -> Result<Option<Duration>, String> {
    match v {
        None => Ok(None),
        Some(x) => {
            Duration::try_from_secs_f64(x).map(Some).map_err(|_| format!("{what}: {x} is not a duration in seconds"))
        }
    }
}

fn err(e: impl std::fmt::Display) -> J {
    json!({"ok": false, "error": e.to_string()})
}

fn field<'a, T: Deserialize<'a>>(cmd: &'a J, k: &str) -> Result<T, String> {
    T::deserialize(cmd.get(k).ok_or_else(|| format!("missing `{k}`"))?).map_err(|e| format!("`{k}`: {e}"))
}

impl Default for Testee {
    fn default() -> Self {
        Testee { ctx: zmq::Context::new(), role: None }
    }
}

impl Testee {
    /// Handles one command; never panics on bad input.
    pub async fn handle(&mut self, cmd: &J) -> J {
        let name = cmd.get("cmd").and_then(J::as_str).unwrap_or("");
        let r = match name {
            "start" => self.start(cmd).await,
            "stop" => {
                self.role = None;
                Ok(json!({}))
            }
            _ => self.role_cmd(name, cmd).await,
        };
        match r {
            Ok(J::Object(mut m)) => {
                m.insert("ok".into(), J::Bool(true));
                J::Object(m)
            }
            Ok(_) => json!({"ok": true}),
            Err(e) => err(e),
        }
    }

    async fn start(&mut self, cmd: &J) -> Result<J, String> {
        if self.role.is_some() {
            return Err("this testee already has a role".into());
        }
        let role: String = field(cmd, "role")?;
        let revision: String = field(cmd, "revision")?;
        if !revisions().contains(&revision) {
            return Err(format!("unsupported revision {revision}"));
        }
        let rev = Spec::builtin().revision(&revision).expect("listed").clone();
        let config = cmd.get("config").cloned().unwrap_or(json!({}));
        match role.as_str() {
            "bootstrap" => {
                let bind = config.get("bind").and_then(J::as_str).unwrap_or("127.0.0.1:0").to_string();
                let spec = mooncake_wire::bootstrap::BootstrapSpec::new(rev)
                    .ok_or("no bootstrap server in this revision")??;
                let s = BootstrapServer::start(&bind, Registry::new(spec)).await?;
                let url = s.url();
                self.role = Some(Role::Bootstrap(s));
                Ok(json!({"url": url}))
            }
            "prefiller" => {
                let c: PrefillerStart = serde_json::from_value(config).map_err(|e| format!("config: {e}"))?;
                check_transfer(&c.transfer)?;
                if rev.generation == 1 {
                    return self.start_gen1_prefiller(&revision, c).await;
                }
                let profile = WireProfile::builtin(&revision)?;
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
                    record_wire: c.record_wire,
                    faults: c.faults.iter().map(|f| crate::faults::Fault::parse(f)).collect::<Result<_, _>>()?,
                };
                let p = PrefillerPeer::start(&self.ctx, cfg, profile, planner, memory, Backend::tcp_engine()).await?;
                let endpoint = p.endpoint.clone();
                self.role = Some(Role::Prefiller(p, c.record_wire));
                Ok(json!({"endpoint": endpoint}))
            }
            "decoder" => {
                let c: DecoderStart = serde_json::from_value(config).map_err(|e| format!("config: {e}"))?;
                check_transfer(&c.transfer)?;
                c.layout.check()?;
                let memory = Arc::new(Mutex::new(c.layout.memory(false)));
                let listener = TcpListener::bind((c.hostname.as_str(), c.te_port))
                    .await
                    .map_err(|e| format!("transfer-engine listener: {e}"))?;
                let port = listener.local_addr().map_err(|e| e.to_string())?.port();
                let server = tokio::spawn(serve_engine(listener, memory.clone()));
                if rev.generation == 1 {
                    let profile = Gen1Profile::builtin(&revision)?;
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
                    self.role = Some(Role::Decoder(d, server, c.record_wire));
                    return Ok(json!({"session": format!("{}:{port}", c.hostname)}));
                }
                let profile = WireProfile::builtin(&revision)?;
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
                let faults = c.faults.iter().map(|f| crate::faults::Fault::parse(f)).collect::<Result<_, _>>()?;
                let d = DecoderPeer::start_with_faults(&self.ctx, core, memory, faults)?;
                self.role = Some(Role::Decoder(d, server, c.record_wire));
                Ok(json!({"session": format!("{}:{port}", c.hostname)}))
            }
            other => Err(format!("unknown role {other:?}")),
        }
    }

    /// A generation-1 prefiller: a ROUTER at `bind`, no bootstrap server, requests known by the decoder's ids.
    async fn start_gen1_prefiller(&mut self, revision: &str, c: PrefillerStart) -> Result<J, String> {
        if c.bootstrap.is_some() {
            return Err("generation 1 has no bootstrap server: `bootstrap` must be null".into());
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
            record_wire: c.record_wire,
            faults: c.faults.iter().map(|f| crate::faults::Fault::parse(f)).collect::<Result<_, _>>()?,
        };
        let p = PrefillerPeer::start_machine(&self.ctx, cfg, core, memory, Backend::tcp_engine()).await?;
        let endpoint = p.endpoint.clone();
        self.role = Some(Role::Prefiller(p, c.record_wire));
        Ok(json!({"endpoint": endpoint}))
    }

    async fn role_cmd(&mut self, name: &str, cmd: &J) -> Result<J, String> {
        match (&self.role, name) {
            (None, _) => Err(format!("unsupported: {name} before start")),
            (Some(Role::Prefiller(p, _)), "allocate") => {
                p.allocated(&field::<String>(cmd, "p_req_id")?, &field::<String>(cmd, "transfer_id")?);
                Ok(json!({}))
            }
            (Some(Role::Prefiller(p, _)), "ready") => {
                p.finished(
                    &field::<String>(cmd, "p_req_id")?,
                    &field::<String>(cmd, "transfer_id")?,
                    field(cmd, "blocks")?,
                );
                Ok(json!({}))
            }
            (Some(Role::Prefiller(p, _)), "abort") => {
                p.aborted(&field::<String>(cmd, "transfer_id")?);
                Ok(json!({}))
            }
            (Some(Role::Prefiller(p, _)), "forget_layouts") => {
                p.forget_layouts();
                Ok(json!({}))
            }
            (Some(Role::Prefiller(p, _)), "fail_next_transfer") => {
                let count = cmd.get("count").and_then(J::as_u64).unwrap_or(1) as usize;
                let ret = cmd.get("ret").and_then(J::as_i64).unwrap_or(-1);
                p.fail_next_writes(count, ret);
                Ok(json!({}))
            }
            (Some(Role::Prefiller(p, wire)), "status") => {
                let s = p.status().await?;
                let mut a = json!({
                    "tracked_transfers": s.tracked_transfers,
                    "open_exchanges": s.open_exchanges,
                    "cached_layouts": s.cached_layouts,
                    "finished_sending": s.finished_sending.iter().map(|(p, t, e)| json!({"p_req_id": p, "transfer_id": t, "expired": e})).collect::<Vec<_>>(),
                    "writes": s.writes.iter().map(|(sess, n, b, r)| json!({"session": sess, "descriptors": n, "bytes": b, "ret": r})).collect::<Vec<_>>(),
                    "rejected": s.rejected,
                });
                if *wire {
                    a["wire"] = s.wire.iter().map(|(inbound, f)| wire_entry(*inbound, f, None)).collect();
                }
                Ok(a)
            }
            (Some(Role::Decoder(d, _, _)), "pull") => {
                let reqs: Vec<PullCmd> = field(cmd, "requests")?;
                d.pull(
                    reqs.into_iter()
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
                Ok(json!({}))
            }
            (Some(Role::Decoder(d, _, wire)), "status") => {
                let s = d.status().await?;
                let mut a = json!({
                    "finished": s.finished,
                    "failed": s.failed.iter().map(|(id, r, b, fr)| json!({"d_req_id": id, "reason": r, "invalid_blocks": b, "failed_recving": fr})).collect::<Vec<_>>(),
                    "unsettled": s.unsettled.iter().map(|(id, r)| json!({"d_req_id": id, "reason": r})).collect::<Vec<_>>(),
                    "pending_pulls": s.pending_pulls,
                    "open_exchanges": s.open_exchanges,
                });
                if *wire {
                    // Sent and received in exchange order (each exchange: its request, then its replies).
                    let mut w = vec![];
                    for (id, addr, payload) in &s.sent {
                        w.push(wire_entry(false, std::slice::from_ref(payload), Some(addr)));
                        w.extend(
                            s.received.iter().filter(|(r, _)| r == id).map(|(_, f)| wire_entry(true, f, Some(addr))),
                        );
                    }
                    a["wire"] = J::Array(w);
                }
                Ok(a)
            }
            (Some(Role::Decoder(d, _, _)), "read_memory") => {
                let addr: u64 = field(cmd, "addr")?;
                let len: u64 = field(cmd, "len")?;
                let m = d.memory.lock().map_err(|_| "memory lock")?;
                let b = m.read(addr, len).ok_or_else(|| format!("{len} bytes at {addr:#x} are not registered"))?;
                Ok(json!({"hex": hex::encode(b)}))
            }
            (Some(Role::Bootstrap(b)), "status") => {
                let r = b.registry.lock().map_err(|_| "registry lock")?;
                Ok(json!({"workers": r.worker_count(), "table": r.query()}))
            }
            _ => Err(format!("unsupported: {name}")),
        }
    }
}

impl Drop for Testee {
    fn drop(&mut self) {
        if let Some(Role::Decoder(_, server, _)) = &self.role {
            server.abort();
        }
    }
}
