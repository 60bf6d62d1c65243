//! One cell of the compatibility matrix, observed: the reference decoder at one revision pulls from the
//! reference prefiller (and a bootstrap server) at another, over real ZeroMQ, HTTP and TCP on 127.0.0.1, as
//! a recorded scenario drives them. Each worker is a `mooncake-peer testee` process driven through the testee
//! protocol (`conformance/TESTEE.md`), as any testee is: the runner does not link the peer it observes. Each
//! side is configured from its own revision's recording of the scenario (its layout, TP size, what it pulls),
//! so each behaves as a deployment of its revision would.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use mooncake_io::http::BootstrapServer;
use mooncake_testee_protocol::{
    Command, DecoderConfig, DecoderStatus, Done, LayoutConfig, PrefillerConfig, PrefillerStatus, Pull, RoleConfig,
    Started,
};
use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::proto::gen1::Gen1Profile;
use mooncake_wire::proto::memory::decode_provenance;
use mooncake_wire::proto::Registry;
use serde::Serialize;
use serde_json::json;

use crate::play::{apply, PrefillerControl, ReplyActions};
use crate::scenarios::{Model, Scenario, Transfer};
use crate::setup::gen1 as gen1_setup;
use crate::setup::{columns, decoder_layout, model_config, prefiller_config_with, prefiller_layout, D_BASE, P_BASE};
use crate::testee::{Testee, TesteeSpec};
use mooncake_trace::conversation::Conversation;

/// What a decoder worker reported and what landed in its memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DOutcome {
    /// Requests it reported finished.
    pub finished: BTreeSet<String>,
    /// Requests it reported failed.
    pub failed: BTreeSet<String>,
    /// Blocks its failures reported invalid.
    pub invalid_blocks: BTreeSet<u64>,
    /// Requests it will never report.
    pub unsettled: BTreeSet<String>,
    /// Bytes that are not where the finished requests say (empty: every requested block holds its source).
    pub landed: Vec<String>,
}

/// What a prefiller worker freed after delivering, and the bytes it wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct POutcome {
    /// The `p_req_id`s it freed after delivering (not on expiry).
    pub freed: BTreeSet<String>,
    /// Writes that succeeded.
    pub writes: usize,
    /// Bytes those writes moved.
    pub bytes: u64,
    /// Every reply it sent, as its revision reads it (status, id sets and error text; generation 1: the raw
    /// reply), sorted: what the decoder was told.
    pub replies: Vec<String>,
    /// The distinct replies it gave lease heartbeats (0.34.0 decoders): what renewal got from it. Not compared
    /// with the baseline (how many heartbeats come is timing); shown in the matrix.
    pub heartbeat_replies: BTreeSet<String>,
}

/// One run of a scenario between a decoder of one revision and a prefiller of another.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Observation {
    /// Each decoder worker's outcome, by connection id.
    pub decoders: BTreeMap<String, DOutcome>,
    /// Each prefiller worker's outcome, by connection id.
    pub prefillers: BTreeMap<String, POutcome>,
    /// The run could not be set up (an environment problem, not an outcome).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a testee worker of a cell could not be started or driven.
#[derive(Debug, thiserror::Error)]
enum WorkerError {
    /// The program did not start.
    #[error(transparent)]
    Start(#[from] crate::testee::StartError),
    /// A command to it failed: the testee refused it, or the testee is broken.
    #[error(transparent)]
    Command(#[from] crate::testee::TesteeError),
}

/// A command to a worker that failed, where a cell's run is driven.
impl From<crate::testee::TesteeError> for ObserveError {
    fn from(e: crate::testee::TesteeError) -> ObserveError {
        ObserveError::Worker(e.into())
    }
}

/// Why a cell's run could not be set up or driven (an [`Observation`]'s `error`).
#[derive(Debug, thiserror::Error)]
enum ObserveError {
    /// A testee worker failed.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// The reference cores cannot speak a side's revision.
    #[error(transparent)]
    Profile(#[from] mooncake_wire::proto::ProfileError),
    /// A side's recording does not give its workers' setup.
    #[error(transparent)]
    Setup(#[from] crate::setup::SetupError),
    /// The prefiller's revision has no bootstrap server.
    #[error("no bootstrap in this revision")]
    NoBootstrap,
    /// Its bootstrap server's spec does not load.
    #[error(transparent)]
    Bootstrap(#[from] mooncake_wire::spec::SpecError),
    /// The bootstrap server did not start.
    #[error(transparent)]
    Server(#[from] mooncake_io::http::HttpError),
    /// The generation-1 prefiller workers found no consecutive ports.
    #[error(transparent)]
    Ports(#[from] gen1_setup::NoConsecutivePorts<WorkerError>),
}

/// A side of a cell: its revision's recording of the scenario.
#[derive(Clone)]
pub struct Side {
    /// The recording.
    pub trace: Arc<Conversation>,
}

impl Side {
    fn gen(&self) -> u32 {
        self.trace.revision.generation
    }
}

/// Runs `scenario` with the decoder side of `d` and the prefiller side of `p`.
pub async fn observe(d: &Side, p: &Side, scenario: &Scenario, model: &Model, abort: Duration) -> Observation {
    let mut workers = vec![];
    let r = tokio::time::timeout(
        abort * 8 + Duration::from_secs(30),
        observe_inner(d, p, scenario, model, abort, &mut workers),
    )
    .await;
    for w in workers {
        w.stop().await;
    }
    match r {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => Observation { error: Some(e.to_string()), ..Default::default() },
        Err(_) => Observation { error: Some("the run did not end in time".into()), ..Default::default() },
    }
}

/// A `mooncake-peer testee` process in a role.
async fn worker(revision: &str, role: RoleConfig) -> Result<(Testee, Started), WorkerError> {
    let (mut t, _) = Testee::start(&TesteeSpec::Builtin).await?;
    match t.send::<Started>(&Command::start(revision, &role)).await {
        Ok(a) => Ok((t, a)),
        Err(e) => {
            t.stop().await;
            Err(e.into())
        }
    }
}

/// The prefiller workers of a cell, by recorded connection, and how a decoder finds them.
struct Prefillers {
    /// Generation 2: the bootstrap server (kept running), its URL and the engine id.
    boot: Option<(BootstrapServer, String, String)>,
    /// The first worker's ROUTER port (generation 1: the base port, worker `r` at base + r).
    port: u64,
    /// (recorded conn, worker index in the testee list).
    conns: Vec<(String, usize)>,
}

async fn start_prefillers(
    p: &Side,
    d: &Side,
    scenario: &Scenario,
    model: &Model,
    abort: Duration,
    workers: &mut Vec<Testee>,
) -> Result<Prefillers, ObserveError> {
    let t = &p.trace;
    let rev = &t.revision.revision;
    if p.gen() == 1 {
        let profile = Gen1Profile::new(t.revision.clone())?;
        let regions = gen1_setup::messages(t, &profile)?.first().map(|m| m.meta.kv_caches_base_addr.len()).unwrap_or(0);
        let ranks = gen1_setup::ranks(t);
        let n = ranks.len().max(1) as u64;
        let configs = (0..n).map(|r| {
            let mut c = PrefillerConfig::new(model_config(model), gen1_setup::layout(regions, model, n, P_BASE, r));
            c.tp_rank = r as i64;
            c.tp_size = n as i64;
            c.abort_timeout_s = Some(abort.as_secs_f64());
            c.record_wire = true;
            c
        });
        let (base, started) = bind_consecutive(rev, configs.collect()).await?;
        let first = workers.len();
        workers.extend(started);
        let conns = ranks.into_iter().map(|r| r.0).zip(first..).collect();
        return Ok(Prefillers { boot: None, port: base, conns });
    }
    // The bootstrap server belongs to the prefiller side; a generation-1 decoder never asks it anything.
    let rev_b = if d.gen() == 2 || p.gen() == 2 { t.revision.clone() } else { d.trace.revision.clone() };
    let spec = BootstrapSpec::new(rev_b).ok_or(ObserveError::NoBootstrap)??;
    let boot = BootstrapServer::start("127.0.0.1:0", Registry::new(spec)).await?;
    let url = boot.url();
    let mut order: Vec<usize> = (0..t.prefillers.len()).collect();
    order.sort_by_key(|&i| {
        t.http
            .iter()
            .position(|(r, _)| t.prefillers[i].register.is_some() && r.body == t.prefillers[i].register)
            .unwrap_or(usize::MAX)
    });
    let mut conns = vec![];
    let mut port = 0;
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
        let mut c = prefiller_config_with(pc, model, layout, &url);
        c.abort_timeout_s = Some(abort.as_secs_f64());
        c.record_wire = true;
        // A revision without leases ignores `kv_lease_duration`, as vLLM before 0.34.0 does.
        if t.revision.behaviour.kv_leases.as_ref().is_some_and(|i| i.value.get().is_some()) {
            c.kv_lease_duration_s = scenario.prefiller_kv_lease_s;
        }
        let (w, a) = worker(rev, RoleConfig::Prefiller(c)).await?;
        if port == 0 {
            // A generation-1 decoder addresses the worker by port arithmetic.
            port = a.endpoint.as_deref().and_then(|e| e.rsplit(':').next()?.parse().ok()).unwrap_or(0);
        }
        conns.push((pc.conn.clone(), workers.len()));
        workers.push(w);
    }
    let engine = t.prefillers.first().map(|p| p.engine_id.clone()).unwrap_or_default();
    Ok(Prefillers { boot: Some((boot, url, engine)), port, conns })
}

/// Generation-1 prefiller workers at consecutive ports on 127.0.0.1 (a decoder finds worker `r` at base + r),
/// trying a few bases.
async fn bind_consecutive(revision: &str, configs: Vec<PrefillerConfig>) -> Result<(u64, Vec<Testee>), ObserveError> {
    gen1_setup::at_consecutive_ports(configs.len() as u64, |r, bind| {
        let mut c = configs[r as usize].clone();
        c.bind = Some(bind);
        async move { worker(revision, RoleConfig::Prefiller(c)).await.map(|(w, _)| w) }
    })
    .await
}

/// A decoder worker of the cell, its layout and what it pulls.
struct Dec {
    conn: String,
    /// Index in the testee list.
    worker: usize,
    layout: LayoutConfig,
    /// Per step: (d_req_id, transfer_id, blocks per group).
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
    d: &Side,
    scenario: &Scenario,
    model: &Model,
    abort: Duration,
    workers: &mut Vec<Testee>,
) -> Result<Vec<Dec>, ObserveError> {
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
    let gen1_regions = if d.gen() == 1 {
        let profile = Gen1Profile::new(t.revision.clone())?;
        Some(
            gen1_setup::messages(t, &profile)?
                .first()
                .map(|m| m.meta.kv_caches_base_addr.len())
                .unwrap_or(model.num_layers as usize),
        )
    } else {
        None
    };
    for rank in 0..ranks {
        let mut c = match gen1_regions {
            Some(regions) => DecoderConfig::new(gen1_setup::layout(regions, model, ranks, D_BASE, rank)),
            None => {
                // The layout this revision's worker of that rank registered (any recorded rank, else the model's).
                let req = t
                    .decoders
                    .iter()
                    .filter_map(|x| x.layout_request.as_ref())
                    .find(|m| m.remote_tp_rank.as_u64() == Some(rank))
                    .or_else(|| t.decoders.iter().find_map(|x| x.layout_request.as_ref()));
                let mut c = DecoderConfig::new(match req {
                    Some(req) => decoder_layout(req, model),
                    None => gen1_setup::layout(model.num_layers as usize, model, ranks, D_BASE, rank),
                });
                c.tp_size = ranks as usize;
                c.pp_size = req.and_then(|r| r.remote_pp_size.as_u64()).unwrap_or(1) as usize;
                c.layout_id = req.and_then(|r| r.layout_id.as_u64()).unwrap_or(0);
                c
            }
        };
        c.tp_rank = rank as usize;
        c.recv_timeout_s = Some((abort * 2 + Duration::from_secs(1)).as_secs_f64());
        if t.revision.behaviour.lease_renewal.as_ref().is_some_and(|i| i.value.get().is_some()) {
            c.kv_lease_duration_s = scenario.decoder_kv_lease_s;
        }
        let layout = c.layout.clone();
        let (w, _) = worker(&t.revision.revision, RoleConfig::Decoder(c)).await?;
        out.push(Dec { conn: conn_of(rank), worker: workers.len(), layout, steps: steps.clone() });
        workers.push(w);
    }
    Ok(out)
}

/// The replies a prefiller worker sent to pulls (the last frame of each outbound message of its wire log), and
/// those it sent to lease heartbeats (0.34.0: a payload that reads as a heartbeat in whichever of the two
/// revisions has them — an older prefiller reads it as a pull it cannot decode — answered to the routing id
/// it came from).
fn replies_sent(d: &Side, p: &Side, s: &PrefillerStatus) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let frames = |e: &mooncake_testee_protocol::WireEntry| -> Vec<Vec<u8>> {
        e.frames.iter().filter_map(|h| hex::decode(h).ok()).collect()
    };
    let wire: Vec<(bool, Vec<Vec<u8>>)> = s.wire.iter().flatten().map(|e| (e.dir == "in", frames(e))).collect();
    let with_heartbeats = [&p.trace.profile, &d.trace.profile].into_iter().flatten().find(|x| x.has_heartbeat());
    let beat_rids: BTreeSet<Vec<u8>> = match with_heartbeats {
        Some(profile) => wire
            .iter()
            .filter(|(inbound, f)| {
                *inbound
                    && f.len() == 2
                    && matches!(profile.read_inbound(&f[1]), mooncake_wire::proto::Inbound::Heartbeat(_))
            })
            .map(|(_, f)| f[0].clone())
            .collect(),
        _ => BTreeSet::new(),
    };
    let (mut pulls, mut beats) = (vec![], vec![]);
    for (_, f) in wire.iter().filter(|(inbound, _)| !inbound) {
        let Some(last) = f.last() else { continue };
        match f.first().is_some_and(|rid| beat_rids.contains(rid)) {
            true => beats.push(last.clone()),
            false => pulls.push(last.clone()),
        }
    }
    (pulls, beats)
}

async fn observe_inner(
    d: &Side,
    p: &Side,
    scenario: &Scenario,
    model: &Model,
    abort: Duration,
    workers: &mut Vec<Testee>,
) -> Result<Observation, ObserveError> {
    let prefillers = start_prefillers(p, d, scenario, model, abort, workers).await?;
    let decoders = start_decoders(d, scenario, model, abort, workers).await?;
    let (transfers, told) = keyed_transfers(p, scenario);
    for (_, i) in &prefillers.conns {
        workers[*i].prepare(&told, scenario.fail_transfers).await?;
    }
    // The decoders' schedulers learn of their requests first (a revision without leases does nothing with
    // that), then the scenario's delay before the first pull.
    if scenario.announce {
        announce(&prefillers, &decoders, workers).await?;
    }
    tokio::time::sleep(Duration::from_secs_f64(scenario.pull_delay_s.max(0.0))).await;
    // Pull step by step, each decoder worker in turn; reply-driven actions as the replies come.
    let max_steps = decoders.iter().map(|x| x.steps.len()).max().unwrap_or(0);
    let mut actions = ReplyActions::new(scenario, &told);
    for k in 0..max_steps {
        pull_step(&prefillers, &decoders, k, workers).await?;
        let deadline = tokio::time::Instant::now() + abort * 3 + Duration::from_secs(2);
        loop {
            // Read before the replies: the steps a reply that settled the pull triggers are taken before the
            // next step starts.
            let done = settled(&decoders, k, workers).await?;
            let mut sent = 0;
            for (_, i) in &prefillers.conns {
                sent += replies_sent(d, p, &workers[*i].status().await?).0.len();
            }
            for step in actions.due(sent) {
                for (_, i) in &prefillers.conns {
                    apply(&step, &mut workers[*i]).await?;
                }
            }
            if done || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // Expiries, then the outcomes.
    tokio::time::sleep(abort + Duration::from_millis(300)).await;
    let mut obs = Observation::default();
    for (conn, i) in &prefillers.conns {
        obs.prefillers.insert(conn.clone(), prefiller_outcome(d, p, &mut workers[*i]).await?);
    }
    for dec in &decoders {
        let outcome = decoder_outcome(dec, &mut workers[dec.worker], &transfers, scenario).await?;
        obs.decoders.insert(dec.conn.clone(), outcome);
    }
    Ok(obs)
}

/// The scenario's transfers by the key a prefiller of `p`'s generation knows them by, and as the prefillers are
/// told of them. Generation 1 knows a request by one id on both sides: a generation-1 prefiller readies its
/// requests under the decoder's ids (what the recordings do); generation 2 under the transfer ids.
fn keyed_transfers(p: &Side, scenario: &Scenario) -> (Vec<(String, Transfer)>, Vec<Transfer>) {
    let pulls: Vec<&crate::scenarios::Pull> = scenario.pulls.iter().flatten().collect();
    let key_of = |tr: &Transfer| {
        let by_pull = pulls.iter().find(|x| x.transfer_id == tr.transfer_id).map(|x| x.d_req_id.clone());
        if p.gen() == 1 {
            by_pull.unwrap_or_else(|| tr.transfer_id.clone())
        } else {
            tr.transfer_id.clone()
        }
    };
    let transfers: Vec<(String, Transfer)> = scenario.transfers.iter().map(|tr| (key_of(tr), tr.clone())).collect();
    let told = transfers
        .iter()
        .map(|(key, tr)| Transfer {
            p_req_id: if p.gen() == 1 { key.clone() } else { tr.p_req_id.clone() },
            transfer_id: key.clone(),
            ..tr.clone()
        })
        .collect();
    (transfers, told)
}

/// Each decoder worker's scheduler is told of every request it will pull (generation 2, with a bootstrap).
async fn announce(prefillers: &Prefillers, decoders: &[Dec], workers: &mut [Testee]) -> Result<(), ObserveError> {
    let Some((_, bootstrap_addr, engine_id)) = &prefillers.boot else { return Ok(()) };
    for dec in decoders {
        let requests = dec
            .steps
            .iter()
            .flatten()
            .map(|(id, tid, _)| Pull {
                d_req_id: id.clone(),
                transfer_id: tid.clone(),
                engine_id: engine_id.clone(),
                bootstrap_addr: bootstrap_addr.clone(),
                ..Default::default()
            })
            .collect();
        workers[dec.worker].send::<Done>(&Command::Announce { requests }).await?;
    }
    Ok(())
}

/// Step `k` of every decoder worker, in turn (pulls of one step reach the prefiller in the recorded worker
/// order).
async fn pull_step(
    prefillers: &Prefillers,
    decoders: &[Dec],
    k: usize,
    workers: &mut [Testee],
) -> Result<(), ObserveError> {
    let (engine_id, bootstrap_addr) = match &prefillers.boot {
        Some((_, url, engine)) => (engine.clone(), url.clone()),
        None => (String::new(), String::new()),
    };
    for dec in decoders {
        let Some(step) = dec.steps.get(k) else { continue };
        let requests = step
            .iter()
            .map(|(id, tid, blocks)| Pull {
                d_req_id: id.clone(),
                transfer_id: tid.clone(),
                blocks: blocks.clone(),
                engine_id: engine_id.clone(),
                bootstrap_addr: bootstrap_addr.clone(),
                remote_host: Some("127.0.0.1".into()),
                remote_port: Some(prefillers.port),
                ..Default::default()
            })
            .collect();
        workers[dec.worker].send::<Done>(&Command::Pull { requests }).await?;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    Ok(())
}

/// Whether every decoder worker settled step `k`: no exchange open, and every request of the step that has
/// blocks finished, failed or given up on.
async fn settled(decoders: &[Dec], k: usize, workers: &mut [Testee]) -> Result<bool, ObserveError> {
    let mut settled = true;
    for dec in decoders {
        let s: DecoderStatus = workers[dec.worker].status().await?;
        let known: BTreeSet<&str> = s
            .finished
            .iter()
            .map(String::as_str)
            .chain(s.failed.iter().map(|f| f.d_req_id.as_str()))
            .chain(s.unsettled.iter().flatten().map(|u| u.d_req_id.as_str()))
            .collect();
        let waiting = dec.steps.get(k).is_some_and(|st| {
            st.iter().any(|(id, _, b)| b.iter().any(|g| !g.is_empty()) && !known.contains(id.as_str()))
        });
        settled &= s.open_exchanges == Some(0) && !waiting;
    }
    Ok(settled)
}

/// What a prefiller worker did: what it freed, wrote and replied.
async fn prefiller_outcome(d: &Side, p: &Side, w: &mut Testee) -> Result<POutcome, ObserveError> {
    let s: PrefillerStatus = w.status().await?;
    let (pulls, beats) = replies_sent(d, p, &s);
    let mut replies: Vec<String> = pulls.iter().map(|b| reply_summary(p, b)).collect();
    replies.sort();
    let heartbeat_replies: BTreeSet<String> = beats.iter().map(|b| reply_summary(p, b)).collect();
    let ok = s.writes.iter().filter(|w| w.ret == 0);
    Ok(POutcome {
        freed: s.freed(false).into_iter().collect(),
        writes: ok.clone().count(),
        bytes: ok.map(|w| w.bytes).sum(),
        replies,
        heartbeat_replies,
    })
}

/// What a decoder worker ended with, and what landed in its memory.
async fn decoder_outcome(
    dec: &Dec,
    w: &mut Testee,
    transfers: &[(String, Transfer)],
    scenario: &Scenario,
) -> Result<DOutcome, ObserveError> {
    let s: DecoderStatus = w.status().await?;
    let finished: BTreeSet<String> = s.finished.iter().cloned().collect();
    let failed: BTreeSet<String> = s.failed.iter().map(|f| f.d_req_id.clone()).collect();
    let l = &dec.layout;
    let memory = crate::play::read_regions(w, &l.kv_caches_base_addr, &l.block_lens, l.num_blocks).await;
    let landed = check_landed(dec, &memory, &finished, &failed, transfers, scenario);
    Ok(DOutcome {
        finished,
        failed,
        invalid_blocks: s.failed.iter().flat_map(|f| f.invalid_blocks.clone()).collect(),
        unsettled: s.unsettled.iter().flatten().map(|u| u.d_req_id.clone()).collect(),
        landed,
    })
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
/// was written into a block no finished request owns. `memory` holds each region as read (`None`: unreadable).
fn check_landed(
    dec: &Dec,
    memory: &[Option<Vec<u8>>],
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
    for (r, region) in memory.iter().enumerate() {
        let (Some(region), Some(&bl)) = (region, dec.layout.block_lens.get(r)) else { continue };
        for b in 0..dec.layout.num_blocks {
            let Some(bytes) = region.get((b * bl) as usize..((b + 1) * bl) as usize) else { continue };
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

/// The decoder's view, for the cell's notes: the layout columns it sends.
pub fn decoder_columns(d: &Side, model: &Model) -> Option<crate::setup::Columns> {
    d.trace.decoders.iter().find_map(|x| x.layout_request.as_ref()).map(|r| columns(r, model))
}

/// `json!` of an observation, for reports.
pub fn to_json(o: &Observation) -> serde_json::Value {
    json!(o)
}
