//! The runner plays the recorded prefiller(s) against decoder testee(s): it runs the bootstrap server and one
//! prefiller of its own (the spec's sans-IO core with vLLM's planner, `crate::counterpart`) per recorded
//! prefiller worker, registered as recorded, makes the scenario's transfers ready, tells each decoder testee to
//! pull what the recorded decoder pulled (`pulls.rs`), and compares every request the testee sends with the
//! recorded one, its own address and port mapped (`requests.rs`). Then it checks the decoder's outcomes against
//! vLLM's, the bytes that landed in its memory, and that no state is left behind (`outcomes.rs`).
//! `replay --listen` serves an external decoder instead (`listen.rs`).

mod deviation;
mod listen;
mod outcomes;
mod pulls;
mod requests;

pub use requests::compare_requests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_io::http::BootstrapServer;
use mooncake_io::layout::LayoutExt;
use mooncake_testee_protocol::{Command, DecoderConfig, RoleConfig, Started};
use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::codec::Codec;
use mooncake_wire::proto::{PrefillerCore, Registry, WireProfile};
use mooncake_wire::typed::MooncakeXferMetadata;
use serde_json::Value as J;

use super::{bounded, Case, CaseCtx, PlayError, PlayOptions, PrefillerControl, PrefillerSide};
use crate::counterpart::{OwnConfig, OwnPrefiller, Registration};
use crate::scenarios::Model;
use crate::setup::{decoder_layout, prefiller_planner};
use crate::testee::Testee;
use mooncake_trace::conversation::{Conversation, PrefillerConn};
use mooncake_trace::finding::Finding;

/// The prefillers of a case (the runner's own, or testees) and its decoder testees, by recorded conn.
struct Sides {
    prefillers: Vec<(String, PrefillerSide)>,
    decoders: Vec<(String, Testee)>,
}

impl Sides {
    async fn stop(self) {
        for (_, te) in self.decoders {
            te.stop().await;
        }
        for (_, p) in self.prefillers {
            p.stop().await;
        }
    }
}

/// The pulls of a decoder conn, in order: consecutive requests with the same `req_blocks` (a fan-out to
/// several prefillers, or a resend after LAYOUT_MISS) are one pull.
pub(crate) fn pull_steps(t: &mooncake_trace::conversation::Conversation, conn: &str) -> Vec<MooncakeXferMetadata> {
    let mut steps: Vec<MooncakeXferMetadata> = vec![];
    for x in t.exchanges.iter().filter(|x| x.decoder == conn) {
        let Some(m) = x.request.value() else { continue };
        if steps.last().is_none_or(|s| s.req_blocks != m.req_blocks) {
            steps.push(m.clone());
        }
    }
    steps
}

/// Tests a decoder testee against the runner's own prefiller(s).
/// The testee is started at `ctx.pairing.testee`; the runner's prefillers speak the trace's revision.
pub(crate) async fn play(ctx: &mut CaseCtx<'_>) -> Result<(), PlayError> {
    match &ctx.opts.external {
        super::External::Listen { endpoint, bootstrap, timeout, ready_after } => {
            listen::play(ctx, endpoint, bootstrap, *timeout, *ready_after).await
        }
        _ => play_with(ctx, None).await,
    }
}

/// Two testees against each other: `prefiller` serves the pulls of `opts.testee` (the decoder). Wire-level
/// comparisons need the runner's own prefiller and are left out; outcomes, landed bytes and state are checked
/// on both sides.
pub async fn play_pair(
    case: &Case,
    opts: &PlayOptions,
    prefiller: &crate::testee::TesteeSpec,
) -> Result<Vec<Finding>, PlayError> {
    let pairing = crate::crossver::Pairing::same(&case.model.revision);
    let setup = crate::derive::case_setup(&case.id, &case.model, &opts.scenarios, case.role, &opts.derived)
        .map_err(Box::new)?;
    let mut ctx = CaseCtx::new(case, opts, &pairing, setup.scenario);
    play_with(&mut ctx, Some(prefiller)).await?;
    Ok(ctx.findings)
}

async fn play_with(ctx: &mut CaseCtx<'_>, p_spec: Option<&crate::testee::TesteeSpec>) -> Result<(), PlayError> {
    let spec = BootstrapSpec::new(ctx.t.revision.clone()).ok_or(PlayError::NoBootstrap)?.map_err(PlayError::runner)?;
    let boot = BootstrapServer::start("127.0.0.1:0", Registry::new(spec)).await.map_err(PlayError::runner)?;
    let mut sides = Sides { prefillers: vec![], decoders: vec![] };
    let limit = Duration::from_secs(120) + ctx.abort() * 4;
    let r = bounded(limit, "the case", play_case(ctx, p_spec, &boot, &mut sides)).await.and_then(|x| x);
    sides.stop().await;
    drop(boot);
    r
}

async fn play_case(
    ctx: &mut CaseCtx<'_>,
    p_spec: Option<&crate::testee::TesteeSpec>,
    boot: &BootstrapServer,
    sides: &mut Sides,
) -> Result<(), PlayError> {
    let profile = ctx.profile()?;
    start_prefillers(ctx, p_spec, boot, &mut sides.prefillers).await?;
    let sessions = start_decoders(ctx, &mut sides.decoders).await?;
    // The scenario starts once every worker is up, as in the recording (tools/record: workers first, then the
    // transfers): a decoder testee that takes seconds to start must not find the transfers expired.
    for (_, side) in sides.prefillers.iter_mut() {
        side.prepare(&ctx.scenario.transfers, ctx.scenario.fail_transfers).await?;
    }
    let steps = pulls::Steps::of(ctx.t);
    pulls::pull_all(ctx, &profile, &boot.url(), &steps, sides).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // What the decoder sent, per prefiller worker, against the recording.
    let mut wires = vec![];
    for (conn, p) in &sides.prefillers {
        if let Some(w) = p.wire(&profile).await {
            wires.push((conn.clone(), w));
        }
    }
    let own: Vec<&PrefillerSide> = sides.prefillers.iter().map(|(_, p)| p).collect();
    ctx.found_all(super::te_checks::check_engines(&own).await);
    ctx.found_all(compare_requests(ctx.t, &profile, ctx.pairing, &wires, Some(&sessions))?);
    outcomes::check_renewal(ctx, &profile, sides).await?;
    for (conn, te) in sides.decoders.iter_mut() {
        outcomes::check_decoder(ctx, &profile, &steps, conn, te).await?;
    }
    deviation::check_own(ctx, &profile, &sides.prefillers, &sessions).await;
    outcomes::check_prefiller_testees(ctx, &mut sides.prefillers).await
}

/// Our prefillers (or prefiller testees), registered in the recorded order (prepared with the scenario's
/// transfers once the decoders are up).
async fn start_prefillers(
    ctx: &CaseCtx<'_>,
    p_spec: Option<&crate::testee::TesteeSpec>,
    boot: &BootstrapServer,
    prefillers: &mut Vec<(String, PrefillerSide)>,
) -> Result<(), PlayError> {
    let (t, model, lease) = (ctx.t, ctx.model(), ctx.scenario.prefiller_kv_lease_s);
    for p in ctx.prefillers_in_register_order() {
        let side = match p_spec {
            None => PrefillerSide::Ours(own_prefiller(t, p, model, lease, "tcp://127.0.0.1:*", boot.url()).await?),
            Some(spec) => {
                let (mut te, _) = Testee::start_logged(spec, ctx.opts.testee_log.as_ref()).await?;
                let mut cfg = crate::setup::prefiller_config(t, p, model, &boot.url())?;
                cfg.kv_lease_duration_s = lease;
                te.send::<Started>(&Command::start(&t.revision.revision, &RoleConfig::Prefiller(cfg)))
                    .await
                    .map_err(PlayError::starting("prefiller", &p.conn))?;
                PrefillerSide::Testee(te)
            }
        };
        prefillers.push((p.conn.clone(), side));
    }
    Ok(())
}

/// One decoder testee per recorded decoder worker, configured as it registered. Returns each one's
/// transfer-engine session by recorded conn.
async fn start_decoders(
    ctx: &CaseCtx<'_>,
    decoders: &mut Vec<(String, Testee)>,
) -> Result<HashMap<String, String>, PlayError> {
    let model = ctx.model();
    let mut sessions = HashMap::new();
    for d in &ctx.t.decoders {
        let Some(req) = &d.layout_request else { continue };
        let (mut testee, _) = Testee::start_logged(&ctx.opts.testee, ctx.opts.testee_log.as_ref()).await?;
        let mut cfg = DecoderConfig::new(decoder_layout(req, model));
        cfg.tp_rank = req.remote_tp_rank.as_u64().unwrap_or(0) as usize;
        cfg.tp_size = req.remote_tp_size.as_u64().unwrap_or(1) as usize;
        cfg.pp_size = req.remote_pp_size.as_u64().unwrap_or(1) as usize;
        cfg.layout_id = req.layout_id.as_u64().unwrap_or(0);
        cfg.abort_timeout_s = Some(model.abort_timeout_s);
        cfg.kv_lease_duration_s = ctx.scenario.decoder_kv_lease_s;
        let a: Started = testee
            .send(&Command::start(&ctx.pairing.testee.revision, &RoleConfig::Decoder(cfg)))
            .await
            .map_err(PlayError::starting("decoder", &d.conn))?;
        sessions.insert(d.conn.clone(), a.session.unwrap_or_default());
        decoders.push((d.conn.clone(), testee));
    }
    Ok(sessions)
}

/// The runner's own prefiller standing in for recorded worker `p`, bound at `bind` and registered with the
/// bootstrap server at `bootstrap`, speaking the trace's revision.
async fn own_prefiller(
    t: &Conversation,
    p: &PrefillerConn,
    model: &Model,
    lease: Option<f64>,
    bind: &str,
    bootstrap: String,
) -> Result<OwnPrefiller, PlayError> {
    let profile = WireProfile::new(t.revision.clone(), Codec::builtin(&t.revision.revision).expect("built-in"))
        .map_err(PlayError::runner)?;
    let (layout, planner) = prefiller_planner(t, p, model, &profile)?;
    let mut core = PrefillerCore::new(profile, planner);
    core.set_abort_timeout(Duration::from_secs_f64(model.abort_timeout_s));
    core.set_kv_lease_duration(lease.map(Duration::from_secs_f64)).map_err(PlayError::runner)?;
    let register = Registration {
        url: bootstrap,
        engine_id: p.engine_id.clone(),
        dp_rank: p.dp_rank,
        tp_rank: p.tp_rank,
        pp_rank: p.pp_rank,
    };
    let cfg = OwnConfig { bind: bind.to_string(), register: Some(register) };
    Ok(OwnPrefiller::start(cfg, core, Arc::new(Mutex::new(layout.memory(true)))).await?)
}

/// The requests of a decoder conn that vLLM's decoder never reported (`observed_outcome.not_finished`,
/// `"conn:req"` entries, at the top level or in a per-decoder or per-pull object).
fn recorded_stuck(t: &Conversation, conn: &str) -> Vec<String> {
    let mut out = vec![];
    let mut visit = |o: &J| {
        for e in o.get("not_finished").and_then(J::as_array).into_iter().flatten().filter_map(J::as_str) {
            if let Some((c, r)) = e.split_once(':') {
                if c == conn && !out.contains(&r.to_string()) {
                    out.push(r.to_string());
                }
            }
        }
    };
    let o = &t.trace.header.observed_outcome;
    visit(o);
    if let Some(m) = o.as_object() {
        for v in m.values().filter(|v| v.is_object()) {
            visit(v);
        }
    }
    out
}
