//! The runner plays the generation-1 prefiller worker(s) (the spec's core, `crate::counterpart`); the testees
//! are decoder workers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_io::layout::{producer_with, LayoutExt};
use mooncake_testee_protocol::{Command, DecoderConfig, DecoderStatus, Done, LayoutConfig, Pull, RoleConfig, Started};
use mooncake_wire::proto::gen1::{unsigned_int, Gen1Prefiller, Gen1Profile};
use serde_json::Value as J;

use super::transfers_by_request_id;
use crate::counterpart::{OwnConfig, OwnPrefiller};
use crate::play::{bounded, CaseCtx, PlayError, PrefillerControl, PrefillerSide};
use crate::scenarios::Model;
use crate::setup::gen1::{
    at_consecutive_ports, columns_of, expected, layout, ranks, Gen1Setup, Msg, NoConsecutivePorts,
};
use crate::setup::{check_landed_columns, model_config, D_BASE, P_BASE};
use crate::testee::Testee;
use mooncake_trace::finding::{CheckId, Finding};

/// A decoder testee and the layout it was started with, by recorded conn.
type Decoders = Vec<(String, Testee, LayoutConfig)>;

/// The runner plays the prefiller worker(s); the testees are decoder workers.
pub(crate) async fn as_prefiller(ctx: &mut CaseCtx<'_>) -> Result<(), PlayError> {
    let setup = Gen1Setup::new(ctx.t, ctx.model(), &ctx.scenario)?;
    let (base, peers) = bind_workers(&setup.profile, setup.p_tp, setup.regions, ctx.model(), setup.abort).await?;
    let mut sides: Vec<PrefillerSide> = peers.into_iter().map(PrefillerSide::Ours).collect();
    let mut decoders: Decoders = vec![];
    let limit = Duration::from_secs(120) + setup.abort * 4;
    let r = bounded(limit, "the case", play_case(ctx, &setup, base, &mut sides, &mut decoders)).await.and_then(|x| x);
    for (_, te, _) in decoders {
        te.stop().await;
    }
    drop(sides);
    r
}

async fn play_case(
    ctx: &mut CaseCtx<'_>,
    setup: &Gen1Setup,
    base: u64,
    sides: &mut [PrefillerSide],
    decoders: &mut Decoders,
) -> Result<(), PlayError> {
    start_decoders(ctx, setup, decoders).await?;
    // The scenario starts once every worker is up, as in the recording (tools/record: workers first, then the
    // transfers): a decoder testee that takes seconds to start must not find the transfers expired.
    for side in sides.iter_mut() {
        side.prepare(&transfers_by_request_id(setup), ctx.scenario.fail_transfers).await?;
    }
    pull_all(ctx, setup, base, decoders).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    ctx.found_all(crate::play::te_checks::check_engines(&sides.iter().collect::<Vec<_>>()).await);
    compare_requests(ctx, setup, sides).await?;
    for (conn, te, l) in decoders.iter_mut() {
        check_decoder(ctx, setup, conn, te, l).await?;
    }
    Ok(())
}

/// Binds one generation-1 prefiller of the runner's own per rank at consecutive ports on 127.0.0.1 (base +
/// rank), trying a few bases.
async fn bind_workers(
    profile: &Gen1Profile,
    ranks: u64,
    regions: usize,
    model: &Model,
    abort: Duration,
) -> Result<(u64, Vec<OwnPrefiller>), PlayError> {
    let plan_rules = profile.plan_rules().map_err(PlayError::runner)?;
    let workers: Result<_, NoConsecutivePorts<PlayError>> = at_consecutive_ports(ranks, |r, bind| {
        let l = layout(regions, model, ranks, P_BASE, r);
        let planner = producer_with(r as i64, ranks as i64, 1, &model_config(model), &l, plan_rules, None);
        let profile = profile.clone();
        async move {
            let mut core = Gen1Prefiller::new(profile, planner.map_err(PlayError::runner)?);
            core.set_abort_timeout(abort);
            Ok(OwnPrefiller::start(OwnConfig { bind, register: None }, core, Arc::new(Mutex::new(l.memory(true))))
                .await?)
        }
    })
    .await;
    workers.map_err(|e| PlayError::Ports(Box::new(e)))
}

/// One decoder testee per recorded decoder worker.
async fn start_decoders(ctx: &CaseCtx<'_>, setup: &Gen1Setup, decoders: &mut Decoders) -> Result<(), PlayError> {
    for (rank, conn) in setup.d_conns.iter().enumerate() {
        let (mut te, _) = Testee::start_logged(&ctx.opts.testee, ctx.opts.testee_log.as_ref()).await?;
        let l = layout(setup.regions, ctx.model(), setup.d_tp, D_BASE, rank as u64);
        let mut cfg = DecoderConfig::new(l.clone());
        cfg.tp_rank = rank;
        cfg.tp_size = setup.d_tp as usize;
        cfg.recv_timeout_s = Some((setup.abort * 2 + ctx.opts.slack).as_secs_f64());
        te.send::<Started>(&Command::start(&ctx.pairing.testee.revision, &RoleConfig::Decoder(cfg)))
            .await
            .map_err(PlayError::starting("decoder", conn))?;
        decoders.push((conn.clone(), te, l));
    }
    Ok(())
}

/// Each recorded message is one scheduler step of its decoder worker: the decoder testee is told to pull it
/// from the workers at `base`, and the case waits until it settled (no exchange open; `D-SETTLE` when not in
/// time).
async fn pull_all(
    ctx: &mut CaseCtx<'_>,
    setup: &Gen1Setup,
    base: u64,
    decoders: &mut Decoders,
) -> Result<(), PlayError> {
    for m in &setup.msgs {
        let Some((_, te, _)) = decoders.iter_mut().find(|(c, _, _)| *c == m.decoder) else { continue };
        let reqs: Vec<Pull> = m
            .meta
            .request_ids
            .iter()
            .zip(&m.meta.block_ids)
            .map(|(d, b)| Pull {
                d_req_id: d.clone(),
                blocks: if b.is_empty() { vec![] } else { vec![b.iter().map(|x| unsigned_int(*x)).collect()] },
                remote_host: Some("127.0.0.1".into()),
                remote_port: Some(base),
                ..Default::default()
            })
            .collect();
        te.send::<Done>(&Command::Pull { requests: reqs }).await?;
        let until = tokio::time::Instant::now() + setup.abort * 2 + ctx.opts.slack * 2;
        if !crate::play::settled(te, until, |s| s.open_exchanges == Some(0)).await? {
            let f = Finding::new(CheckId::DSettle, "the decoder did not settle its pull in time");
            ctx.found(f.at(Some(m.seq), Some(m.line)).about(format!("{} message", m.decoder)));
        }
    }
    Ok(())
}

/// What each prefiller worker received, against the recording.
async fn compare_requests(ctx: &mut CaseCtx<'_>, setup: &Gen1Setup, sides: &[PrefillerSide]) -> Result<(), PlayError> {
    let mut got: Vec<(String, Vec<Vec<u8>>)> = vec![];
    for (i, side) in sides.iter().enumerate() {
        let Some(own) = side.own() else { continue };
        let s = own.status().await?;
        let conn = setup.workers.get(i).map(|w| w.0.clone()).unwrap_or_default();
        got.extend(s.wire.into_iter().filter(|(inbound, _)| *inbound).map(|(_, fr)| (conn.clone(), fr)));
    }
    if got.len() != setup.msgs.len() {
        let detail = format!("{} requests arrived, vLLM's decoder sent {}", got.len(), setup.msgs.len());
        ctx.found(Finding::new(CheckId::RequestCount, detail).about("requests"));
    }
    let workers = ranks(ctx.t);
    for (k, (conn, frames)) in got.iter().enumerate() {
        let msg = format!("request {} at {conn}", k + 1);
        let at_worker = |w: &Msg| workers.iter().any(|r| &r.0 == conn && r.1 == w.endpoint);
        let found = compare_request(&setup.profile, &setup.msgs, frames, at_worker);
        ctx.found_all(found.into_iter().map(|f| f.about(msg.clone())));
    }
    Ok(())
}

/// One request that arrived at a worker (`frames`) against the recorded message with its request ids that
/// `at_worker` says was sent to that worker.
fn compare_request(
    profile: &Gen1Profile,
    msgs: &[Msg],
    frames: &[Vec<u8>],
    at_worker: impl Fn(&Msg) -> bool,
) -> Vec<Finding> {
    let mut out = vec![];
    if frames.len() != 3 || !frames[1].is_empty() {
        let detail = format!("{} frames at the ROUTER; a REQ sends [routing_id, \"\", payload]", frames.len());
        out.push(Finding::new(CheckId::ZmqFrames, detail));
    }
    let Some(bytes) = frames.last() else { return out };
    let live = match profile.decode_request(bytes) {
        Err(e) => {
            out.push(Finding::new(CheckId::RequestDecode, e.to_string()));
            return out;
        }
        Ok(live) => live,
    };
    let canonical = match mooncake_wire::codec::Codec::builtin(&profile.revision.revision) {
        Some(codec) => mooncake_trace::canonical::mismatch(&codec, "MooncakeAgentMetadata", bytes),
        None => Some(format!("{} has no codec", profile.revision.revision)),
    };
    if let Some(detail) = canonical {
        out.push(Finding::new(CheckId::WireCanonical, detail));
    }
    let Some(w) = msgs.iter().find(|w| w.meta.request_ids == live.request_ids && at_worker(w)) else {
        let detail = format!("request ids {:?}: no such request recorded at this worker", live.request_ids);
        out.push(Finding::new(CheckId::RequestDiff, detail));
        return out;
    };
    let mut d = vec![];
    if live.block_ids != w.meta.block_ids {
        d.push(format!("$.block_ids: {:?} vs recorded {:?}", live.block_ids, w.meta.block_ids));
    }
    if live.kv_caches_base_addr.len() != w.meta.kv_caches_base_addr.len() {
        d.push(format!(
            "$.kv_caches_base_addr: {} regions vs recorded {}",
            live.kv_caches_base_addr.len(),
            w.meta.kv_caches_base_addr.len()
        ));
    }
    if !d.is_empty() {
        out.push(Finding::new(CheckId::RequestDiff, d.join("; ")).at(Some(w.seq), Some(w.line)));
    }
    out
}

/// A decoder testee's outcomes against vLLM's (`D-OUTCOME`), its state (`D-STATE-LEAK`) and the blocks of the
/// requests it finished in its memory (`LANDED`).
async fn check_decoder(
    ctx: &mut CaseCtx<'_>,
    setup: &Gen1Setup,
    conn: &str,
    te: &mut Testee,
    l: &LayoutConfig,
) -> Result<(), PlayError> {
    let s: DecoderStatus = te.status().await?;
    let outcome = &ctx.t.trace.header.observed_outcome;
    let o = outcome.get(conn).filter(|o| o.get("finished_recving").is_some()).unwrap_or(outcome);
    let mut want_fin: Vec<String> = o
        .get("finished_recving")
        .and_then(|x| x.get(conn))
        .and_then(J::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        .unwrap_or_default();
    let mut got_fin = s.finished.clone();
    want_fin.sort();
    got_fin.sort();
    let mut found = vec![];
    if got_fin != want_fin && ctx.applies(CheckId::DOutcome) {
        found.push(Finding::new(
            CheckId::DOutcome,
            format!("finished {got_fin:?}, vLLM's decoder finished {want_fin:?}"),
        ));
    }
    if !s.failed.is_empty() {
        found.push(Finding::new(CheckId::DOutcome, "reported failed requests; a generation-1 decoder reports none"));
    }
    if s.open_exchanges != Some(0) {
        let detail = format!("{} exchanges still open", crate::play::count(s.open_exchanges));
        found.push(Finding::new(CheckId::DStateLeak, detail));
    }
    ctx.found_all(found.into_iter().map(|f| f.about(conn)));
    // Landed bytes of the requests it finished.
    let model = ctx.model();
    let scale = (model.block_bytes(setup.p_tp) / model.block_bytes(setup.d_tp).max(1)).max(1);
    let exp: Vec<(usize, u64, u64)> = setup
        .msgs
        .iter()
        .filter(|m| m.decoder == conn && m.meta.request_ids.iter().all(|d| got_fin.contains(d)))
        .flat_map(|m| expected(m, &setup.by_id, setup.regions, scale))
        .collect();
    let cols = columns_of(l);
    let mem = crate::play::read_testee_memory(te, &cols, model.num_blocks).await;
    let same_tp = setup.p_tp == setup.d_tp;
    for p in check_landed_columns(&cols, model.num_blocks, &exp, same_tp, |r, b| mem.get(&(r, b)).cloned())
        .into_iter()
        .take(5)
    {
        ctx.found(Finding::new(CheckId::Landed, p).about(format!("memory of {conn}")));
    }
    Ok(())
}
