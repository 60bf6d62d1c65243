//! One cell of the compatibility matrix, observed: the reference decoder at one revision pulls from the
//! reference prefiller (and its bootstrap server) at another, over real ZeroMQ, HTTP and TCP on 127.0.0.1, as
//! a recorded scenario drives them. Each side is configured from its own revision's recording of the scenario
//! (its layout, TP size, what it pulls), so each behaves as a deployment of its revision would.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_io::backend::{serve_engine, Backend, SharedMemory};
use mooncake_io::http::BootstrapServer;
use mooncake_reference::config::{producer, LayoutExt};
use mooncake_reference::decoder::DecoderPeer;
use mooncake_reference::prefiller::{PrefillerConfig, PrefillerPeer};
use mooncake_testee_protocol::LayoutConfig;
use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::proto::gen1::{Gen1Decoder, Gen1DecoderConfig, Gen1Profile};
use mooncake_wire::proto::memory::decode_provenance;
use mooncake_wire::proto::{DecoderConfig, DecoderCore, PullRequest, Registry, WireProfile};
use serde::Serialize;
use serde_json::json;
use tokio::net::TcpListener;

use crate::conversation::Conversation;
use crate::play::gen1;
use crate::scenarios::{Model, Ready, Scenario};
use crate::setup::gen1 as gen1_setup;
use crate::setup::{columns, decoder_layout, model_config, prefiller_layout, D_BASE, P_BASE};

/// What a decoder worker reported and what landed in its memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DOutcome {
    pub finished: BTreeSet<String>,
    pub failed: BTreeSet<String>,
    pub invalid_blocks: BTreeSet<u64>,
    pub unsettled: BTreeSet<String>,
    /// Bytes that are not where the finished requests say (empty: every requested block holds its source).
    pub landed: Vec<String>,
}

/// What a prefiller worker freed after delivering, and the bytes it wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct POutcome {
    pub freed: BTreeSet<String>,
    pub writes: usize,
    pub bytes: u64,
    /// Every reply it sent, as its revision reads it (status, id sets and error text; generation 1: the raw
    /// reply), sorted: what the decoder was told.
    pub replies: Vec<String>,
}

/// One run of a scenario between a decoder of one revision and a prefiller of another.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Observation {
    pub decoders: BTreeMap<String, DOutcome>,
    pub prefillers: BTreeMap<String, POutcome>,
    /// The run could not be set up (an environment problem, not an outcome).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A side of a cell: its revision's recording of the scenario.
#[derive(Clone)]
pub struct Side {
    pub trace: Arc<Conversation>,
}

impl Side {
    fn gen(&self) -> u32 {
        self.trace.revision.generation
    }
}

/// Runs `scenario` with the decoder side of `d` and the prefiller side of `p`.
pub async fn observe(d: &Side, p: &Side, scenario: &Scenario, model: &Model, abort: Duration) -> Observation {
    match tokio::time::timeout(abort * 8 + Duration::from_secs(30), observe_inner(d, p, scenario, model, abort)).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => Observation { error: Some(e), ..Default::default() },
        Err(_) => Observation { error: Some("the run did not end in time".into()), ..Default::default() },
    }
}

enum Prefillers {
    Gen2 { _boot: BootstrapServer, url: String, engine: String, peers: Vec<(String, PrefillerPeer)> },
    Gen1 { base: u64, peers: Vec<(String, PrefillerPeer)> },
}

impl Prefillers {
    fn peers(&self) -> &[(String, PrefillerPeer)] {
        match self {
            Prefillers::Gen2 { peers, .. } | Prefillers::Gen1 { peers, .. } => peers,
        }
    }
}

async fn start_prefillers(p: &Side, d: &Side, model: &Model, abort: Duration) -> Result<Prefillers, String> {
    let t = &p.trace;
    if p.gen() == 1 {
        let profile = Gen1Profile::new(t.revision.clone()).map_err(|e| e.to_string())?;
        let regions = gen1_setup::messages(t, &profile)?.first().map(|m| m.meta.kv_caches_base_addr.len()).unwrap_or(0);
        let ranks = gen1_setup::ranks(t);
        let (base, peers) = gen1::bind_workers(&profile, ranks.len().max(1) as u64, regions, model, abort).await?;
        let peers = ranks.into_iter().map(|r| r.0).zip(peers).collect();
        return Ok(Prefillers::Gen1 { base, peers });
    }
    // The bootstrap server belongs to the prefiller side; a generation-1 decoder never asks it anything.
    let rev = if d.gen() == 2 || p.gen() == 2 { t.revision.clone() } else { d.trace.revision.clone() };
    let spec = BootstrapSpec::new(rev).ok_or("no bootstrap in this revision")?.map_err(|e| e.to_string())?;
    let boot = BootstrapServer::start("127.0.0.1:0", Registry::new(spec)).await?;
    let url = boot.url();
    let profile = WireProfile::new(
        t.revision.clone(),
        mooncake_wire::codec::Codec::builtin(&t.revision.revision).ok_or("no codec")?,
    )
    .map_err(|e| e.to_string())?;
    let mut order: Vec<usize> = (0..t.prefillers.len()).collect();
    order.sort_by_key(|&i| {
        t.http
            .iter()
            .position(|(r, _)| t.prefillers[i].register.is_some() && r.body == t.prefillers[i].register)
            .unwrap_or(usize::MAX)
    });
    let mut peers = vec![];
    for i in order {
        let pc = &t.prefillers[i];
        // A recording without a layout-carrying pull (a decoder that refused to pull): the model's layers.
        let layout: LayoutConfig = match prefiller_layout(t, pc, model) {
            Ok(l) => l,
            Err(_) => gen1_setup::layout(
                model.num_layers as usize,
                model,
                pc.tp_size.max(1) as u64,
                P_BASE,
                pc.tp_rank as u64,
            ),
        };
        let planner = producer(pc.tp_rank, pc.tp_size, 1, &model_config(model), &layout, &profile)?;
        let cfg = PrefillerConfig {
            bind: "tcp://127.0.0.1:*".into(),
            engine_id: pc.engine_id.clone(),
            dp_rank: pc.dp_rank,
            tp_rank: pc.tp_rank,
            pp_rank: pc.pp_rank,
            bootstrap: Some(url.clone()),
            abort_timeout: Some(abort),
            record_wire: true,
            faults: vec![],
        };
        let peer = PrefillerPeer::start(
            cfg,
            profile.clone(),
            planner,
            Arc::new(Mutex::new(layout.memory(true))),
            Backend::tcp_engine(),
        )
        .await?;
        peers.push((pc.conn.clone(), peer));
    }
    let engine = t.prefillers.first().map(|p| p.engine_id.clone()).unwrap_or_default();
    Ok(Prefillers::Gen2 { _boot: boot, url, engine, peers })
}

/// A decoder worker of the cell, with its memory and what it pulls.
struct Dec {
    conn: String,
    peer: DecoderPeer,
    memory: SharedMemory,
    layout: LayoutConfig,
    server: tokio::task::JoinHandle<()>,
    /// Per step: (d_req_id, blocks per group).
    steps: Vec<Vec<(String, String, Vec<Vec<u64>>)>>,
}

/// The scenario's pulls as a decoder step list: (d_req_id, transfer_id, blocks per group).
fn scenario_steps(scenario: &Scenario) -> Vec<Vec<(String, String, Vec<Vec<u64>>)>> {
    scenario
        .pulls
        .iter()
        .map(|batch| batch.iter().map(|p| (p.d_req_id.clone(), p.transfer_id.clone(), p.blocks.clone())).collect())
        .collect()
}

async fn start_decoders(
    ctx: &zmq::Context,
    d: &Side,
    scenario: &Scenario,
    model: &Model,
    abort: Duration,
) -> Result<Vec<Dec>, String> {
    let t = &d.trace;
    let mut out = vec![];
    let ranks = scenario.decoder_tp.max(1);
    let steps = scenario_steps(scenario);
    let conn_of = |r: u64| -> String {
        let names: Vec<&String> = t.decoders.iter().map(|x| &x.conn).collect();
        if names.len() as u64 == ranks {
            names[r as usize].clone()
        } else {
            format!("decoder_tp{r}")
        }
    };
    if d.gen() == 1 {
        let profile = Gen1Profile::new(t.revision.clone()).map_err(|e| e.to_string())?;
        let regions = gen1_setup::messages(t, &profile)?
            .first()
            .map(|m| m.meta.kv_caches_base_addr.len())
            .unwrap_or(model.num_layers as usize);
        for rank in 0..ranks {
            let layout = gen1_setup::layout(regions, model, ranks, D_BASE, rank);
            let memory = Arc::new(Mutex::new(layout.memory(false)));
            let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            let server = tokio::spawn(serve_engine(listener, memory.clone()));
            let cfg = Gen1DecoderConfig {
                hostname: "127.0.0.1".into(),
                te_port: port as u64,
                tp_rank: rank,
                kv_caches_base_addr: layout.kv_caches_base_addr.clone(),
            };
            let mut core = Gen1Decoder::new(profile.clone(), cfg);
            core.set_recv_timeout(abort * 2 + Duration::from_secs(1));
            let peer = DecoderPeer::start(ctx, core, memory.clone())?;
            out.push(Dec { conn: conn_of(rank), peer, memory, layout, server, steps: steps.clone() });
        }
        return Ok(out);
    }
    let profile = WireProfile::new(
        t.revision.clone(),
        mooncake_wire::codec::Codec::builtin(&t.revision.revision).ok_or("no codec")?,
    )
    .map_err(|e| e.to_string())?;
    for rank in 0..ranks {
        // The layout this revision's worker of that rank registered (any recorded rank, else the model's).
        let req = t
            .decoders
            .iter()
            .filter_map(|x| x.layout_request.as_ref())
            .find(|m| m.remote_tp_rank.as_u64() == Some(rank))
            .or_else(|| t.decoders.iter().find_map(|x| x.layout_request.as_ref()))
            .cloned();
        let layout: LayoutConfig = match &req {
            Some(req) => decoder_layout(req, model),
            None => gen1_setup::layout(model.num_layers as usize, model, ranks, D_BASE, rank),
        };
        let memory = Arc::new(Mutex::new(layout.memory(false)));
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let server = tokio::spawn(serve_engine(listener, memory.clone()));
        let cfg = DecoderConfig {
            hostname: "127.0.0.1".into(),
            te_port: port as u64,
            tp_rank: rank as usize,
            tp_size: ranks as usize,
            pp_rank: 0,
            pp_size: req.as_ref().and_then(|r| r.remote_pp_size.as_u64()).unwrap_or(1) as usize,
            layout: layout.decoder_layout(),
            layout_id: req.as_ref().and_then(|r| r.layout_id.as_u64()).unwrap_or(0),
        };
        let mut core = DecoderCore::new(profile.clone(), cfg);
        core.set_recv_timeout(abort * 2 + Duration::from_secs(1));
        let peer = DecoderPeer::start(ctx, core, memory.clone())?;
        out.push(Dec { conn: conn_of(rank), peer, memory, layout, server, steps: steps.clone() });
    }
    Ok(out)
}

async fn observe_inner(
    d: &Side,
    p: &Side,
    scenario: &Scenario,
    model: &Model,
    abort: Duration,
) -> Result<Observation, String> {
    let ctx = zmq::Context::new();
    let prefillers = start_prefillers(p, d, model, abort).await?;
    // Generation 1 knows a request by one id on both sides: ready the prefiller's requests under the
    // decoder's ids (what the recording did); generation 2 under the transfer ids.
    let decoders = start_decoders(&ctx, d, scenario, model, abort).await?;
    // Generation 1 knows a request by one id on both sides: a generation-1 prefiller readies its requests
    // under the decoder's ids (what the recordings do); generation 2 under the transfer ids.
    let pulls: Vec<&crate::scenarios::Pull> = scenario.pulls.iter().flatten().collect();
    let transfers: Vec<(String, crate::scenarios::Transfer)> = scenario
        .transfers
        .iter()
        .map(|tr| {
            let key = if p.gen() == 1 {
                pulls
                    .iter()
                    .find(|x| x.transfer_id == tr.transfer_id)
                    .map(|x| x.d_req_id.clone())
                    .unwrap_or_else(|| tr.transfer_id.clone())
            } else {
                tr.transfer_id.clone()
            };
            (key, tr.clone())
        })
        .collect();
    for (_, peer) in prefillers.peers() {
        for (key, tr) in &transfers {
            let pid = if p.gen() == 1 { key.clone() } else { tr.p_req_id.clone() };
            peer.allocated(&pid, key);
            if tr.ready == Ready::Before {
                peer.finished(&pid, key, tr.blocks.clone());
            }
        }
        if scenario.fail_transfers > 0 {
            peer.fail_next_writes(scenario.fail_transfers, -1);
        }
    }
    // Pull step by step, each decoder worker in turn; reply-driven actions as the replies come.
    let max_steps = decoders.iter().map(|x| x.steps.len()).max().unwrap_or(0);
    let mut done_actions: Vec<String> = vec![];
    for k in 0..max_steps {
        for dec in &decoders {
            let Some(step) = dec.steps.get(k) else { continue };
            let reqs = step
                .iter()
                .map(|(id, tid, blocks)| {
                    let (engine_id, bootstrap_addr, remote) = match &prefillers {
                        Prefillers::Gen2 { url, engine, peers, .. } => {
                            // A generation-1 decoder addresses the worker by port arithmetic.
                            let port = peers
                                .first()
                                .and_then(|(_, x)| x.endpoint.rsplit(':').next()?.parse::<u64>().ok())
                                .unwrap_or(0);
                            (engine.clone(), url.clone(), Some(("127.0.0.1".to_string(), port)))
                        }
                        Prefillers::Gen1 { base, .. } => {
                            (String::new(), String::new(), Some(("127.0.0.1".to_string(), *base)))
                        }
                    };
                    PullRequest {
                        d_req_id: id.clone(),
                        transfer_id: tid.clone(),
                        local_blocks: blocks.clone(),
                        engine_id,
                        bootstrap_addr,
                        remote,
                    }
                })
                .collect();
            dec.peer.pull(reqs);
            // Pulls of one step reach the prefiller in the recorded worker order.
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        let deadline = tokio::time::Instant::now() + abort * 3 + Duration::from_secs(2);
        loop {
            let mut settled = true;
            for dec in &decoders {
                let s = dec.peer.status().await?;
                let known: BTreeSet<&str> = s
                    .finished
                    .iter()
                    .map(String::as_str)
                    .chain(s.failed.iter().map(|f| f.0.as_str()))
                    .chain(s.unsettled.iter().map(|u| u.0.as_str()))
                    .collect();
                if s.open_exchanges > 0
                    || dec.steps.get(k).is_some_and(|st| {
                        st.iter().any(|(id, _, b)| b.iter().any(|g| !g.is_empty()) && !known.contains(id.as_str()))
                    })
                {
                    settled = false;
                }
            }
            let mut sent = 0;
            for (_, peer) in prefillers.peers() {
                sent += peer.status().await?.wire.iter().filter(|(inbound, _)| !inbound).count();
            }
            for (key, tr) in &transfers {
                if let Ready::AfterReply(n) = tr.ready {
                    if sent >= n && !done_actions.contains(key) {
                        done_actions.push(key.clone());
                        for (_, peer) in prefillers.peers() {
                            let pid = if p.gen() == 1 { key.clone() } else { tr.p_req_id.clone() };
                            peer.finished(&pid, key, tr.blocks.clone());
                        }
                    }
                }
            }
            if let Some(n) = scenario.forget_layouts_after_reply {
                if sent >= n && !done_actions.iter().any(|a| a == "\u{0}forget") {
                    done_actions.push("\u{0}forget".into());
                    for (_, peer) in prefillers.peers() {
                        peer.forget_layouts();
                    }
                }
            }
            if settled || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // Expiries, then the outcomes.
    tokio::time::sleep(abort + Duration::from_millis(300)).await;
    let mut obs = Observation::default();
    for (conn, peer) in prefillers.peers() {
        let s = peer.status().await?;
        let mut replies: Vec<String> = s
            .wire
            .iter()
            .filter(|(inbound, _)| !inbound)
            .filter_map(|(_, fr)| fr.last())
            .map(|b| reply_summary(p, b))
            .collect();
        replies.sort();
        obs.prefillers.insert(
            conn.clone(),
            POutcome {
                freed: s.finished_sending.iter().filter(|x| !x.2).map(|x| x.0.clone()).collect(),
                writes: s.writes.iter().filter(|w| w.3 == 0).count(),
                bytes: s.writes.iter().filter(|w| w.3 == 0).map(|w| w.2).sum(),
                replies,
            },
        );
    }
    for dec in &decoders {
        let s = dec.peer.status().await?;
        let finished: BTreeSet<String> = s.finished.iter().cloned().collect();
        let failed: BTreeSet<String> = s.failed.iter().map(|f| f.0.clone()).collect();
        let landed = check_landed(dec, &finished, &failed, &transfers, scenario);
        obs.decoders.insert(
            dec.conn.clone(),
            DOutcome {
                finished,
                failed,
                invalid_blocks: s.failed.iter().flat_map(|f| f.2.clone()).collect(),
                unsettled: s.unsettled.iter().map(|u| u.0.clone()).collect(),
                landed,
            },
        );
        dec.server.abort();
    }
    Ok(obs)
}

/// A reply as the prefiller's revision reads it, without what varies between runs (`layout_id`, addresses).
fn reply_summary(p: &Side, bytes: &[u8]) -> String {
    if p.gen() == 1 {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    match p.trace.decode_reply(bytes) {
        Some(r) => {
            let ids = |v: &Option<mooncake_wire::typed::StrList>| {
                v.as_ref()
                    .map(|v| v.iter().collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>().join(","))
                    .unwrap_or_default()
            };
            let msg = r.err_msg.unwrap_or_default();
            // An address or a layout id in the text varies per run.
            let msg: String = msg
                .split_whitespace()
                .map(|w| if w.contains("127.0.0.1:") || w.starts_with("0x") { "…" } else { w })
                .collect::<Vec<_>>()
                .join(" ");
            format!("status {} ok [{}] err [{}] {msg}", r.status, ids(&r.ok_reqs), ids(&r.err_reqs))
        }
        None => format!("undecodable {}", hex::encode(bytes)),
    }
}

/// KV group of each decoder region: from its layer name and the scenario's groups, or by position (the caches
/// are registered group by group), or group 0.
fn region_groups(layout: &LayoutConfig, scenario: &Scenario) -> Vec<usize> {
    let n = layout.kv_caches_base_addr.len();
    if scenario.kv_groups.len() <= 1 {
        return vec![0; n];
    }
    if layout.registered_group_indices.len() == n {
        return layout.registered_group_indices.iter().map(|g| (*g).max(0) as usize).collect();
    }
    let by_name = |name: &str| -> Option<usize> {
        let idx: u64 = name.strip_prefix("model.layers.")?.split('.').next()?.parse().ok()?;
        scenario.kv_groups.iter().position(|g| g.layers.contains(&idx))
    };
    let named: Vec<Option<usize>> = layout.registered_layer_names.iter().map(|nm| by_name(nm)).collect();
    if named.iter().all(Option::is_some) && named.len() == n {
        return named.into_iter().map(|g| g.unwrap_or(0)).collect();
    }
    let per = n / scenario.kv_groups.len().max(1);
    (0..n).map(|k| (k / per.max(1)).min(scenario.kv_groups.len() - 1)).collect()
}

/// Every requested block of a finished (not failed) request holds words of its source block, and nothing
/// was written into a block no finished request owns.
fn check_landed(
    dec: &Dec,
    finished: &BTreeSet<String>,
    failed: &BTreeSet<String>,
    transfers: &[(String, crate::scenarios::Transfer)],
    scenario: &Scenario,
) -> Vec<String> {
    let mut problems = vec![];
    let groups = region_groups(&dec.layout, scenario);
    let mut want: HashMap<(usize, u64), u64> = HashMap::new();
    let mut owned: BTreeSet<u64> = BTreeSet::new();
    for (id, tid, blocks) in dec.steps.iter().flatten() {
        if !finished.contains(id) || failed.contains(id) {
            continue;
        }
        owned.extend(blocks.iter().flatten().copied());
        let Some((_, tr)) = transfers.iter().find(|(k, t)| k == tid || k == id || &t.transfer_id == tid) else {
            continue;
        };
        for (r, g) in groups.iter().enumerate() {
            let (Some(dst), Some(src)) = (blocks.get(*g).or(blocks.first()), tr.blocks.get(*g).or(tr.blocks.first()))
            else {
                continue;
            };
            let src = &src[src.len().saturating_sub(dst.len())..];
            for (db, pb) in dst.iter().zip(src) {
                want.insert((r, *db), *pb);
            }
        }
    }
    let mem = dec.memory.lock().unwrap_or_else(|p| p.into_inner());
    let cols = LayoutColumns::of(&dec.layout);
    for r in 0..cols.base.len() {
        for b in 0..dec.layout.num_blocks {
            let Some(bytes) = mem.read(cols.base[r] + b * cols.block_lens[r], cols.block_lens[r]) else { continue };
            let words: Vec<u64> = bytes
                .chunks(8)
                .filter(|c| c.len() == 8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            match want.get(&(r, b)) {
                Some(src) => {
                    if let Some(w) = words.iter().find(|w| decode_provenance(**w).is_none_or(|(_, sb, _)| sb != *src)) {
                        problems.push(format!("region {r} block {b}: word {w:#x} is not from source block {src}"));
                    }
                }
                None => {
                    if bytes.iter().any(|x| *x != 0) && !owned.contains(&b) {
                        problems.push(format!("region {r} block {b}: written, but no finished request owns it"));
                    }
                }
            }
            if problems.len() >= 5 {
                return problems;
            }
        }
    }
    problems
}

struct LayoutColumns {
    base: Vec<u64>,
    block_lens: Vec<u64>,
}

impl LayoutColumns {
    fn of(l: &LayoutConfig) -> LayoutColumns {
        LayoutColumns { base: l.kv_caches_base_addr.clone(), block_lens: l.block_lens.clone() }
    }
}

/// The decoder's view, for the cell's notes: the layout columns it sends.
pub fn decoder_columns(d: &Side, model: &Model) -> Option<crate::setup::Columns> {
    d.trace.decoders.iter().find_map(|x| x.layout_request.as_ref()).map(|r| columns(r, model))
}

/// `json!` of an observation, for reports.
pub fn to_json(o: &Observation) -> serde_json::Value {
    json!(o)
}
