//! The runner plays the recorded pull decoder worker(s); the testee is the prefiller worker.

use std::collections::HashMap;
use std::time::Duration;

use mooncake_io::engine::client::Request;
use mooncake_io::engine::EngineClient;
use mooncake_io::reactor::{Incoming, Reactor};
use mooncake_testee_protocol::{Command, Done, PrefillerConfig, PrefillerStatus, RoleConfig, Started};
use serde_json::Value as J;
use tokio::sync::mpsc;

use super::{bases, check_metadata, provenance_block, runs, ACK};
use crate::play::{bounded, CaseCtx, PlayError};
use crate::setup::pull::{PullMsg, PullSetup};
use crate::setup::{model_config, P_BASE};
use crate::testee::Testee;
use mooncake_trace::finding::{CheckId, Finding};

/// The runner plays the decoder worker(s); the testee is the prefiller worker.
pub(crate) async fn as_decoder(ctx: &mut CaseCtx<'_>) -> Result<(), PlayError> {
    let setup = PullSetup::new(ctx.t, &ctx.opts.scenarios)?;
    let (mut te, _) = Testee::start_logged(&ctx.opts.testee, ctx.opts.testee_log.as_ref()).await?;
    let limit = Duration::from_secs(60) + setup.abort * 4;
    let r = bounded(limit, "the case", play_case(ctx, &setup, &mut te)).await.and_then(|x| x);
    te.stop().await;
    r
}

async fn play_case(ctx: &mut CaseCtx<'_>, setup: &PullSetup, te: &mut Testee) -> Result<(), PlayError> {
    let endpoint = start_prefiller(ctx, setup, te).await?;
    let engine = EngineClient::strict();
    replay(ctx, setup, &endpoint, &engine).await?;
    ctx.found_all(crate::play::te_checks::findings(engine.issues()));
    check_freed(ctx, setup, te).await
}

/// Starts the prefiller testee with the recorded regions and engine id, and readies the scenario's requests.
/// Returns its ROUTER endpoint.
async fn start_prefiller(ctx: &CaseCtx<'_>, setup: &PullSetup, te: &mut Testee) -> Result<String, PlayError> {
    let conn = setup.prefillers.first().map(String::as_str).unwrap_or("prefiller0");
    let mut model = model_config(ctx.model());
    model.block_size = Some(ctx.model().block_size);
    let mut cfg = PrefillerConfig::new(model, setup.layout(P_BASE));
    cfg.engine_id = setup.engine_id.clone();
    cfg.abort_timeout_s = Some(setup.abort.as_secs_f64());
    let started: Started = te
        .send(&Command::start(&ctx.pairing.testee.revision, &RoleConfig::Prefiller(cfg)))
        .await
        .map_err(PlayError::starting("prefiller", conn))?;
    let live = started.endpoint.ok_or(PlayError::Unsaid { role: "prefiller", what: "endpoint" })?;
    for p in &setup.pulls {
        let (id, blocks) = (p.request.clone(), vec![p.prefiller_blocks.clone()]);
        te.send::<Done>(&Command::Ready { p_req_id: id.clone(), transfer_id: id, blocks }).await?;
    }
    Ok(live)
}

/// Every recorded message sent as recorded, on a REQ of its own, in recorded order; before a completion, the
/// scenario's blocks of its request read from the prefiller's engine with the metadata that decoder got.
async fn replay(
    ctx: &mut CaseCtx<'_>,
    setup: &PullSetup,
    endpoint: &str,
    engine: &EngineClient,
) -> Result<(), PlayError> {
    let zctx = zmq::Context::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let reactor = Reactor::start(&zctx, tx).map_err(PlayError::runner)?;
    let mut metadata: HashMap<String, J> = HashMap::new();
    let wait = setup.abort * 2 + ctx.opts.slack;
    for (k, m) in setup.msgs.iter().enumerate() {
        let about = format!("message {} of {}", k + 1, m.conn);
        if let Some(req) = &m.done_for {
            let found = read_request(setup, engine, metadata.get(&m.conn), req).await;
            ctx.found_all(found.into_iter().map(|f| f.about(format!("read of {req} by {}", m.conn))));
        }
        reactor.open_req(k as u64, endpoint, m.request.clone());
        let got = await_reply(&mut rx, k as u64, wait).await;
        reactor.close_dealer(k as u64);
        let mut found = vec![];
        if let Some(j) = compare_reply(setup, got, m, &mut found) {
            metadata.insert(m.conn.clone(), j);
        }
        ctx.found_all(found.into_iter().map(|f| f.at(Some(m.seq), Some(m.line)).about(about.clone())));
    }
    Ok(())
}

/// The reply on REQ `id`: `Ok(None)` when none came in time, `Err` when the REQ failed.
async fn await_reply(
    rx: &mut mpsc::UnboundedReceiver<Incoming>,
    id: u64,
    wait: Duration,
) -> Result<Option<Vec<Vec<u8>>>, String> {
    loop {
        match tokio::time::timeout(wait, rx.recv()).await {
            Ok(Some(Incoming::Dealer { id: got, frames })) if got == id => return Ok(Some(frames)),
            Ok(Some(Incoming::DealerError { id: got, error })) if got == id => return Err(error),
            Ok(Some(_)) => {}
            _ => return Ok(None),
        }
    }
}

/// A live reply against the recorded one: `ZMQ-CONNECT`, `REPLY-MISSING`, `REPLY-EXTRA`, `ZMQ-FRAMES`, then a
/// metadata reply's checks or a completion's `ACK`. Returns the metadata's JSON when it decodes.
fn compare_reply(
    setup: &PullSetup,
    got: Result<Option<Vec<Vec<u8>>>, String>,
    m: &PullMsg,
    out: &mut Vec<Finding>,
) -> Option<J> {
    let frames = match (got, &m.reply) {
        (Err(e), _) => {
            out.push(Finding::new(CheckId::ZmqConnect, e));
            return None;
        }
        (Ok(None), Some(want)) => {
            let detail = format!("no reply (recorded: {} bytes)", want.len());
            out.push(Finding::new(CheckId::ReplyMissing, detail));
            return None;
        }
        (Ok(Some(_)), None) => {
            out.push(Finding::new(CheckId::ReplyExtra, "a reply where vllm-ascend's prefiller sent none"));
            return None;
        }
        (Ok(None), None) => return None,
        (Ok(Some(frames)), Some(_)) => frames,
    };
    if frames.len() != 1 {
        let detail = format!("{} frames at the REQ; the prefiller must send [routing_id, \"\", reply]", frames.len());
        out.push(Finding::new(CheckId::ZmqFrames, detail));
    }
    let payload = frames.last().cloned().unwrap_or_default();
    if m.done_for.is_none() {
        return check_metadata(setup, &payload, out);
    }
    if payload != ACK {
        let detail = format!("{:?} where the raw ACK was recorded", String::from_utf8_lossy(&payload));
        out.push(Finding::new(CheckId::ZmqRaw, detail));
    }
    None
}

/// Reads request `req`'s blocks (the scenario's) from the prefiller's engine at the session its metadata names
/// and compares them with its provenance pattern (`LANDED`). A read the recorder made fail is not made: the
/// recorded decoder read nothing.
async fn read_request(setup: &PullSetup, engine: &EngineClient, meta: Option<&J>, req: &str) -> Vec<Finding> {
    let Some(p) = setup.pull(req) else {
        return vec![Finding::new(CheckId::CaseSetup, format!("the scenario has no request {req}"))];
    };
    let Some(meta) = meta.filter(|_| !p.fail_read) else { return vec![] };
    let session = format!("{}:{}", meta["local_ip"].as_str().unwrap_or("127.0.0.1"), meta["te_rpc_port"]);
    let (base, lens) = (bases(meta), crate::setup::pull::ints(&meta["block_lens"]));
    let bl = |r: usize| lens.get(r).copied().unwrap_or(setup.block_len);
    let plan = runs(p, base.len());
    let reqs =
        plan.iter().map(|(r, p0, _, n)| Request::Read { addr: base[*r] + p0 * bl(*r), len: n * bl(*r) }).collect();
    let data = match engine.transfer(&session, reqs).await {
        Ok(d) => d,
        Err(e) => return vec![Finding::new(CheckId::Landed, format!("reading from {session}: {e}"))],
    };
    let mut out = vec![];
    for ((r, p0, _, n), got) in plan.iter().zip(data) {
        let want: Vec<u8> = (*p0..p0 + n).flat_map(|b| provenance_block(*r, b, bl(*r))).collect();
        if got != want && out.len() < 5 {
            let detail = format!("region {r}, blocks {p0}..{}: the bytes read are not the prefiller's", p0 + n);
            out.push(Finding::new(CheckId::Landed, detail));
        }
    }
    out
}

/// `P-FINISHED-SENDING` and `P-STATE-LEAK`: what the prefiller freed, against vllm-ascend's, and that it keeps
/// nothing (each request was completed).
async fn check_freed(ctx: &mut CaseCtx<'_>, setup: &PullSetup, te: &mut Testee) -> Result<(), PlayError> {
    let conn = setup.prefillers.first().cloned().unwrap_or_default();
    let want: Vec<String> = ctx.t.trace.header.observed_outcome["finished_sending"][&conn]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        .unwrap_or_default();
    let until = tokio::time::Instant::now() + ctx.opts.slack;
    let s: PrefillerStatus = loop {
        let s: PrefillerStatus = te.status().await?;
        if s.finished_sending.len() >= want.len() || tokio::time::Instant::now() >= until {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    if let Some(detail) = crate::play::freed_mismatch(&s, &want).filter(|_| ctx.applies(CheckId::PFinishedSending)) {
        ctx.found(Finding::new(CheckId::PFinishedSending, detail).about(conn.clone()));
    }
    if s.tracked_transfers != Some(0) || s.open_exchanges != Some(0) {
        let (tr, ex) = (crate::play::count(s.tracked_transfers), crate::play::count(s.open_exchanges));
        let detail = format!("{tr} requests and {ex} exchanges tracked after every completion");
        ctx.found(Finding::new(CheckId::PStateLeak, detail).about(conn));
    }
    Ok(())
}
