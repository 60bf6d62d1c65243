//! The runner plays the generation-1 decoder(s); the testees are prefiller workers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_io::backend::serve_engine;
use mooncake_io::layout::LayoutExt;
use mooncake_io::reactor::{Incoming, Reactor};
use mooncake_testee_protocol::{self as proto, Command, LayoutConfig, PrefillerStatus, RoleConfig, Started};
use mooncake_wire::msgpack::WireInt;
use serde_json::Value as J;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::transfers_by_request_id;
use crate::play::{bounded, fire, CaseCtx, PlayError, PrefillerControl, PrefillerSide, ReplyActions};
use crate::scenarios::Transfer;
use crate::setup::gen1::{columns_of, expected, layout, Gen1Setup, Msg};
use crate::setup::{check_landed_columns, model_config, D_BASE, P_BASE};
use crate::testee::Testee;
use mooncake_trace::finding::{CheckId, Finding};

/// One of the runner's decoder workers: its memory and the transfer-engine server the prefillers write into
/// (stopped when dropped).
struct LiveDecoder {
    session: String,
    recorded_session: String,
    memory: Arc<Mutex<mooncake_wire::proto::memory::Memory>>,
    layout: LayoutConfig,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for LiveDecoder {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The runner plays the decoder(s); the testees are prefiller workers.
pub(crate) async fn as_decoder(ctx: &mut CaseCtx<'_>) -> Result<(), PlayError> {
    let setup = Gen1Setup::new(ctx.t, ctx.model(), &ctx.scenario)?;
    let transfers = transfers_by_request_id(&setup);
    let mut sides: Vec<(String, PrefillerSide)> = vec![];
    let limit = Duration::from_secs(120) + setup.abort * 4;
    let r = bounded(limit, "the case", play_case(ctx, &setup, &transfers, &mut sides)).await.and_then(|x| x);
    for (_, side) in sides {
        side.stop().await;
    }
    r
}

async fn play_case(
    ctx: &mut CaseCtx<'_>,
    setup: &Gen1Setup,
    transfers: &[Transfer],
    sides: &mut Vec<(String, PrefillerSide)>,
) -> Result<(), PlayError> {
    let endpoints = start_prefillers(ctx, setup, transfers, sides).await?;
    let decoders = start_decoders(ctx, setup).await?;
    let done_msgs = replay(ctx, setup, &endpoints, &decoders, transfers, sides).await?;
    check_writes(ctx, sides, &decoders).await?;
    check_landed(ctx, setup, &decoders, &done_msgs);
    // Once every timeout has passed: what the prefiller freed, and what it keeps.
    tokio::time::sleep(setup.abort + Duration::from_millis(200)).await;
    check_freed_and_kept(ctx, setup, sides).await
}

/// One prefiller testee per recorded worker, all prepared with the scenario's transfers once all are up. Returns the live endpoint
/// of each recorded one.
async fn start_prefillers(
    ctx: &CaseCtx<'_>,
    setup: &Gen1Setup,
    transfers: &[Transfer],
    sides: &mut Vec<(String, PrefillerSide)>,
) -> Result<HashMap<String, String>, PlayError> {
    let model = ctx.model();
    let mut endpoints = HashMap::new();
    for (conn, endpoint, rank) in &setup.workers {
        let (mut te, _) = Testee::start_logged(&ctx.opts.testee, ctx.opts.testee_log.as_ref()).await?;
        let l = layout(setup.regions, model, setup.p_tp, P_BASE, *rank);
        let mut cfg = proto::PrefillerConfig::new(model_config(model), l);
        cfg.tp_rank = *rank as i64;
        cfg.tp_size = setup.p_tp as i64;
        cfg.abort_timeout_s = Some(model.abort_timeout_s);
        let a: Started = te
            .send(&Command::start(&ctx.pairing.testee.revision, &RoleConfig::Prefiller(cfg)))
            .await
            .map_err(PlayError::starting("prefiller", conn))?;
        let live = a.endpoint.ok_or(PlayError::Unsaid { role: "prefiller", what: "endpoint" })?;
        endpoints.insert(endpoint.clone(), live);
        sides.push((conn.clone(), PrefillerSide::Testee(te)));
    }
    // Once every worker is up, as in the recording: a testee that takes seconds to start must not let the
    // transfers of the workers started before it expire.
    for (_, side) in sides.iter_mut() {
        side.prepare(transfers, ctx.scenario.fail_transfers).await?;
    }
    Ok(endpoints)
}

/// Our decoder workers: memory and a transfer-engine server each, by recorded conn.
async fn start_decoders(ctx: &CaseCtx<'_>, setup: &Gen1Setup) -> Result<HashMap<String, LiveDecoder>, PlayError> {
    let mut decoders = HashMap::new();
    for (i, conn) in setup.d_conns.iter().enumerate() {
        let l = layout(setup.regions, ctx.model(), setup.d_tp, D_BASE, i as u64);
        let memory = Arc::new(Mutex::new(l.memory(false)));
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(PlayError::runner)?;
        let port = listener.local_addr().map_err(PlayError::runner)?.port();
        let server = tokio::spawn(serve_engine(listener, memory.clone()));
        let recorded_session = setup
            .msgs
            .iter()
            .find(|m| &m.decoder == conn)
            .map(|m| format!("{}:{}", m.meta.remote_hostname, m.meta.remote_port))
            .unwrap_or_default();
        let session = format!("127.0.0.1:{port}");
        decoders.insert(conn.clone(), LiveDecoder { session, recorded_session, memory, layout: l, server });
    }
    Ok(decoders)
}

/// Every recorded message replayed on a REQ of its own, in recorded order, its reply compared with the
/// recorded one. Returns the messages answered done.
async fn replay(
    ctx: &mut CaseCtx<'_>,
    setup: &Gen1Setup,
    endpoints: &HashMap<String, String>,
    decoders: &HashMap<String, LiveDecoder>,
    transfers: &[Transfer],
    sides: &mut [(String, PrefillerSide)],
) -> Result<Vec<usize>, PlayError> {
    let zctx = zmq::Context::new();
    let (in_tx, mut in_rx) = mpsc::unbounded_channel();
    let reactor = Reactor::start(&zctx, in_tx).map_err(PlayError::runner)?;
    let mut actions = ReplyActions::new(&ctx.scenario, transfers);
    let (mut replies_seen, mut done_msgs) = (0usize, vec![]);
    for (k, m) in setup.msgs.iter().enumerate() {
        let live_ep = endpoints.get(&m.endpoint).ok_or_else(|| PlayError::NoLivePrefiller(m.endpoint.clone()))?;
        let dec = &decoders[&m.decoder];
        let (host, port) = dec.session.rsplit_once(':').expect("host:port");
        let mut meta = m.meta.clone();
        meta.remote_hostname = host.to_string();
        meta.remote_port = WireInt::from_u64(port.parse().expect("port"));
        meta.kv_caches_base_addr = dec.layout.kv_caches_base_addr.iter().map(|a| WireInt::from_u64(*a)).collect();
        reactor.open_req(k as u64, live_ep, setup.profile.encode_request(&meta).map_err(PlayError::runner)?);
        let msg = format!("message {} ({} → {})", k + 1, m.decoder, m.endpoint);
        let at = |f: Finding| f.at(Some(m.seq), Some(m.line)).about(msg.clone());
        let got = loop {
            match tokio::time::timeout(setup.abort * 2 + ctx.opts.slack, in_rx.recv()).await {
                Ok(Some(Incoming::Dealer { id, frames })) if id == k as u64 => break Some(frames),
                Ok(Some(Incoming::DealerError { error, .. })) => {
                    ctx.found(at(Finding::new(CheckId::ZmqConnect, error)));
                    break None;
                }
                Ok(Some(_)) => {}
                _ => break None,
            }
        };
        reactor.close_dealer(k as u64);
        let (found, replied, done) = compare_reply(setup, got, m);
        ctx.found_all(found.into_iter().map(at));
        replies_seen += replied as usize;
        if done {
            done_msgs.push(k);
        }
        fire(&mut actions, replies_seen, sides).await?;
    }
    Ok(done_msgs)
}

/// A message's live reply (`got`) against its recorded one: the findings, whether a reply came where one was
/// recorded, and whether it was the recorded `trans_done`.
fn compare_reply(setup: &Gen1Setup, got: Option<Vec<Vec<u8>>>, m: &Msg) -> (Vec<Finding>, bool, bool) {
    let profile = &setup.profile;
    let (frames, want) = match (got, &m.reply) {
        (None, Some(want)) => {
            let detail = format!("no reply (recorded: {})", String::from_utf8_lossy(want));
            return (vec![Finding::new(CheckId::ReplyMissing, detail)], false, false);
        }
        (Some(_), None) => {
            return (vec![Finding::new(CheckId::ReplyExtra, "a reply where vLLM's prefiller sent none")], false, false)
        }
        (None, None) => return (vec![], false, false),
        (Some(frames), Some(want)) => (frames, want),
    };
    let mut out = vec![];
    if frames.len() != 1 {
        let detail = format!("{} frames at the REQ; the prefiller must send [routing_id, \"\", reply]", frames.len());
        out.push(Finding::new(CheckId::ZmqFrames, detail));
    }
    let got = frames.last().cloned().unwrap_or_default();
    if ![&profile.done, &profile.error].contains(&&got) {
        let detail = format!("reply {:?} is none of the spec's constants", String::from_utf8_lossy(&got));
        out.push(Finding::new(CheckId::ZmqRaw, detail));
    }
    if &got != want {
        let detail = format!("{:?} vs recorded {:?}", String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
        out.push(Finding::new(CheckId::ReplyDiff, detail));
    }
    let done = &got == want && got == profile.done;
    (out, true, done)
}

/// `TE-CALLS`: transfer-engine writes, as a multiset of (recorded session, descriptors, bytes).
async fn check_writes(
    ctx: &mut CaseCtx<'_>,
    sides: &mut [(String, PrefillerSide)],
    decoders: &HashMap<String, LiveDecoder>,
) -> Result<(), PlayError> {
    let recorded = |live: &str| decoders.values().find(|d| d.session == live).map(|d| d.recorded_session.clone());
    crate::play::check_te_calls(ctx, sides, recorded).await
}

/// `LANDED`: the blocks of the messages answered done, in our decoders' memory.
fn check_landed(ctx: &mut CaseCtx<'_>, setup: &Gen1Setup, decoders: &HashMap<String, LiveDecoder>, done: &[usize]) {
    let model = ctx.model();
    let scale = (model.block_bytes(setup.p_tp) / model.block_bytes(setup.d_tp).max(1)).max(1);
    for conn in &setup.d_conns {
        let dec = &decoders[conn];
        let exp: Vec<(usize, u64, u64)> = done
            .iter()
            .map(|k| &setup.msgs[*k])
            .filter(|m| &m.decoder == conn)
            .flat_map(|m| expected(m, &setup.by_id, setup.regions, scale))
            .collect();
        let mem = dec.memory.lock().expect("memory");
        let cols = columns_of(&dec.layout);
        let problems = check_landed_columns(&cols, model.num_blocks, &exp, setup.p_tp == setup.d_tp, |r, b| {
            let bl = *cols.block_lens.get(r)?;
            mem.read(cols.base.get(r)? + b * bl, bl).map(|s| s.to_vec())
        });
        for p in problems.into_iter().take(5) {
            ctx.found(Finding::new(CheckId::Landed, p).about(format!("memory of {conn}")));
        }
    }
}

/// `P-FINISHED-SENDING` and `P-STATE-LEAK` once every timeout has passed: what each prefiller freed, against
/// vLLM's, and that it keeps no more than the revision keeps by design.
async fn check_freed_and_kept(
    ctx: &mut CaseCtx<'_>,
    setup: &Gen1Setup,
    sides: &mut [(String, PrefillerSide)],
) -> Result<(), PlayError> {
    let profile = &setup.profile;
    let kept_by_design =
        matches!(profile.transfer_failure, mooncake_wire::spec::behaviour::TransferFailure::KeptForever);
    let failed: u64 = setup
        .msgs
        .iter()
        .filter(|m| m.reply.as_ref() == Some(&profile.error))
        .map(|m| m.meta.request_ids.len() as u64)
        .sum();
    let kept = if kept_by_design { failed } else { 0 };
    let header = &ctx.t.trace.header;
    let want_all = header.observed_outcome.get("finished_sending").and_then(J::as_object).cloned().unwrap_or_default();
    for (conn, side) in sides.iter_mut() {
        let Some(te) = side.testee() else { continue };
        let s: PrefillerStatus = te.status().await?;
        let want: Vec<String> = want_all
            .get(conn)
            .and_then(J::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
            .unwrap_or_default();
        if let Some(detail) = crate::play::freed_mismatch(&s, &want).filter(|_| ctx.applies(CheckId::PFinishedSending))
        {
            ctx.found(Finding::new(CheckId::PFinishedSending, detail).about(conn.clone()));
        }
        let (tr, ex) = (s.tracked_transfers, s.open_exchanges);
        if tr.is_none_or(|n| n > kept) || ex != Some(0) {
            let detail = format!(
                "{tr:?} transfers and {ex:?} exchanges tracked after the abort timeout ({kept} kept forever by design)"
            );
            ctx.found(Finding::new(CheckId::PStateLeak, detail).about(conn.clone()));
        }
    }
    Ok(())
}
