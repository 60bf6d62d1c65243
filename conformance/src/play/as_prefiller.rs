//! The runner plays the recorded prefiller(s) against decoder testee(s): it runs the bootstrap server and one
//! prefiller of its own (the spec's sans-IO core with vLLM's planner, `crate::counterpart`) per recorded
//! prefiller worker, registered as recorded, makes the scenario's transfers ready, tells each decoder testee to pull what the recorded decoder
//! pulled, and compares every request the testee sends with the recorded one (its own address and port
//! mapped). Then it checks the decoder's outcomes against vLLM's, the bytes that landed in its memory, and that
//! no state is left behind.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::conversation::{Conversation, PrefillerConn};
use crate::counterpart::{OwnConfig, OwnPrefiller, OwnStatus, Registration};
use mooncake_io::http::BootstrapServer;
use mooncake_io::layout::LayoutExt;
use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::codec::Codec;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::{PrefillerCore, Registry, WireProfile};
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse};
use serde_json::Value as J;

use super::{bounded, Case, PlayError, PlayOptions};
use crate::checks::check_exchanges;
use crate::conversation::{Exchange, Sent};
use crate::finding::{CheckId, Finding};
use crate::jsonl::first_difference;
use crate::scenarios::Model;
use crate::scenarios::Ready;
use crate::setup::{check_landed, decoder_layout, expected_blocks_scaled, prefiller_planner, stride_scale};
use crate::testee::{Testee, TesteeError};
use mooncake_testee_protocol::{
    Command, DecoderConfig, DecoderStatus, Done, Memory, PrefillerStatus, Pull, RoleConfig, Started,
};

/// The pulls of a decoder conn, in order: consecutive requests with the same `req_blocks` (a fan-out to
/// several prefillers, or a resend after LAYOUT_MISS) are one pull.
pub(crate) fn pull_steps(t: &crate::conversation::Conversation, conn: &str) -> Vec<MooncakeXferMetadata> {
    let mut steps: Vec<MooncakeXferMetadata> = vec![];
    for x in t.exchanges.iter().filter(|x| x.decoder == conn) {
        let Some(m) = x.request.value() else { continue };
        if steps.last().is_none_or(|s| s.req_blocks != m.req_blocks) {
            steps.push(m.clone());
        }
    }
    steps
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

/// The prefiller side of a decoder case: the runner's own prefiller (whose wire log lets it compare every
/// request), or another testee (interoperability of two implementations).
#[allow(clippy::large_enum_variant)] // one per case, never moved in a loop
enum PSide {
    Ours(OwnPrefiller),
    Testee(Testee),
}

impl PSide {
    async fn allocate(&mut self, p: &str, t: &str) -> Result<(), TesteeError> {
        match self {
            PSide::Ours(x) => x.allocated(p, t),
            PSide::Testee(x) => {
                x.send::<Done>(&Command::Allocate { p_req_id: p.to_string(), transfer_id: t.to_string() }).await?;
            }
        }
        Ok(())
    }
    async fn ready(&mut self, p: &str, t: &str, blocks: &[Vec<u64>]) -> Result<(), TesteeError> {
        match self {
            PSide::Ours(x) => x.finished(p, t, blocks.to_vec()),
            PSide::Testee(x) => {
                x.send::<Done>(&Command::Ready {
                    p_req_id: p.to_string(),
                    transfer_id: t.to_string(),
                    blocks: blocks.to_vec(),
                })
                .await?;
            }
        }
        Ok(())
    }
    async fn fail(&mut self, n: usize) -> Result<(), TesteeError> {
        match self {
            PSide::Ours(x) => x.fail_next_writes(n, -1),
            PSide::Testee(x) => {
                x.send::<Done>(&Command::FailNextTransfer { count: n as u64, ret: -1 }).await?;
            }
        }
        Ok(())
    }
    async fn forget(&mut self) -> Result<(), TesteeError> {
        match self {
            PSide::Ours(x) => x.forget_layouts(),
            PSide::Testee(x) => {
                x.send::<Done>(&Command::ForgetLayouts).await?;
            }
        }
        Ok(())
    }
    /// Every ROUTER message of the pulls, when the runner owns the prefiller (lease heartbeats and their
    /// replies left out: [`PSide::heartbeats`]).
    async fn wire(&self, profile: &WireProfile) -> Option<Vec<(bool, Vec<Vec<u8>>)>> {
        Some(split_heartbeats(profile, self.all_wire().await?).0)
    }
    /// The lease heartbeats that reached the runner's prefiller (their payloads), when it owns it.
    async fn heartbeats(&self, profile: &WireProfile) -> Option<Vec<Vec<u8>>> {
        let (_, beats) = split_heartbeats(profile, self.all_wire().await?);
        Some(beats.into_iter().filter(|(inbound, _)| *inbound).filter_map(|(_, f)| f.get(1).cloned()).collect())
    }
    async fn all_wire(&self) -> Option<Vec<(bool, Vec<Vec<u8>>)>> {
        match self {
            PSide::Ours(x) => x.status().await.ok().map(|s| s.wire),
            PSide::Testee(_) => None,
        }
    }
}

/// A ROUTER wire log split into the pulls' traffic and the lease heartbeats' (0.34.0): a payload the
/// revision's prefiller reads as a heartbeat, and what was sent back to its routing id (each heartbeat comes on
/// a DEALER of its own).
fn split_heartbeats(
    profile: &WireProfile,
    wire: Vec<(bool, Vec<Vec<u8>>)>,
) -> (Vec<(bool, Vec<Vec<u8>>)>, Vec<(bool, Vec<Vec<u8>>)>) {
    if !profile.has_heartbeat() {
        return (wire, vec![]);
    }
    let beat_rids: std::collections::HashSet<Vec<u8>> = wire
        .iter()
        .filter(|(inbound, f)| {
            *inbound
                && f.len() == 2
                && matches!(profile.read_inbound(&f[1]), mooncake_wire::proto::Inbound::Heartbeat(_))
        })
        .filter_map(|(_, f)| f.first().cloned())
        .collect();
    wire.into_iter().partition(|(_, f)| f.first().is_none_or(|rid| !beat_rids.contains(rid)))
}

/// Tests a decoder testee against the runner's own prefiller(s).
/// The testee is started at `pairing.testee`; the runner's prefillers speak the trace's revision.
pub async fn play(
    case: &Case,
    opts: &PlayOptions,
    pairing: &crate::crossver::Pairing,
) -> Result<Vec<Finding>, PlayError> {
    play_with(case, opts, None, pairing).await
}

/// Two testees against each other: `prefiller` serves the pulls of `opts.testee` (the decoder). Wire-level
/// comparisons need the runner's own prefiller and are left out; outcomes, landed bytes and state are checked
/// on both sides.
pub async fn play_pair(
    case: &Case,
    opts: &PlayOptions,
    prefiller: &crate::testee::TesteeSpec,
) -> Result<Vec<Finding>, PlayError> {
    play_with(case, opts, Some(prefiller), &crate::crossver::Pairing::same(&case.model.revision)).await
}

async fn play_with(
    case: &Case,
    opts: &PlayOptions,
    p_spec: Option<&crate::testee::TesteeSpec>,
    pairing: &crate::crossver::Pairing,
) -> Result<Vec<Finding>, PlayError> {
    if let super::External::Listen { endpoint, bootstrap, timeout, ready_after } = &opts.external {
        return play_listen(case, opts, endpoint, bootstrap, *timeout, *ready_after).await;
    }
    let t = &case.model;
    let profile = t.profile.clone().ok_or(PlayError::NoProfile)?;
    let sc = &opts.scenarios;
    let scenario = opts.scenario_for(t);
    let model = &sc.model;
    let abort = Duration::from_secs_f64(model.abort_timeout_s);
    let mut out = vec![];

    let spec = BootstrapSpec::new(t.revision.clone()).ok_or(PlayError::NoBootstrap)?.map_err(PlayError::runner)?;
    let boot = BootstrapServer::start("127.0.0.1:0", Registry::new(spec)).await.map_err(PlayError::runner)?;
    let mut prefillers: Vec<(String, PSide)> = vec![];
    let mut testees: Vec<(String, Testee)> = vec![];
    let result = async {
        // Our prefillers, registered in the recorded order.
        let mut order: Vec<usize> = (0..t.prefillers.len()).collect();
        order.sort_by_key(|&i| {
            t.http
                .iter()
                .position(|(r, _)| t.prefillers[i].register.is_some() && r.body == t.prefillers[i].register)
                .unwrap_or(usize::MAX)
        });
        for &i in &order {
            let p = &t.prefillers[i];
            let mut side = match p_spec {
                None => PSide::Ours(
                    own_prefiller(t, p, model, scenario.prefiller_kv_lease_s, "tcp://127.0.0.1:*", boot.url()).await?,
                ),
                Some(spec) => {
                    let (mut te, _) = Testee::start_logged(spec, opts.testee_log.as_ref()).await?;
                    let mut cfg = crate::setup::prefiller_config(t, p, model, &boot.url())?;
                    cfg.kv_lease_duration_s = scenario.prefiller_kv_lease_s;
                    te.send::<Started>(&Command::start(&t.revision.revision, &RoleConfig::Prefiller(cfg)))
                        .await
                        .map_err(PlayError::starting("prefiller", &p.conn))?;
                    PSide::Testee(te)
                }
            };
            for tr in &scenario.transfers {
                side.allocate(&tr.p_req_id, &tr.transfer_id).await?;
                if tr.ready == Ready::Before {
                    side.ready(&tr.p_req_id, &tr.transfer_id, &tr.blocks).await?;
                }
            }
            if scenario.fail_transfers > 0 {
                side.fail(scenario.fail_transfers).await?;
            }
            prefillers.push((p.conn.clone(), side));
        }
        // One decoder testee per recorded decoder worker, configured as it registered.
        let mut sessions: HashMap<String, String> = HashMap::new();
        for d in &t.decoders {
            let Some(req) = &d.layout_request else { continue };
            let (mut testee, _) = Testee::start_logged(&opts.testee, opts.testee_log.as_ref()).await?;
            let mut cfg = DecoderConfig::new(decoder_layout(req, model));
            cfg.tp_rank = req.remote_tp_rank.as_u64().unwrap_or(0) as usize;
            cfg.tp_size = req.remote_tp_size.as_u64().unwrap_or(1) as usize;
            cfg.pp_size = req.remote_pp_size.as_u64().unwrap_or(1) as usize;
            cfg.layout_id = req.layout_id.as_u64().unwrap_or(0);
            cfg.abort_timeout_s = Some(model.abort_timeout_s);
            cfg.kv_lease_duration_s = scenario.decoder_kv_lease_s;
            let a: Started = testee
                .send(&Command::start(&pairing.testee.revision, &RoleConfig::Decoder(cfg)))
                .await
                .map_err(PlayError::starting("decoder", &d.conn))?;
            sessions.insert(d.conn.clone(), a.session.unwrap_or_default());
            testees.push((d.conn.clone(), testee));
        }
        let engine = t.prefillers.first().map(|p| p.engine_id.clone()).unwrap_or_default();
        // Pull step by step; after each step, the scenario's actions that the replies so far trigger.
        let steps: Vec<(String, Vec<MooncakeXferMetadata>)> =
            t.decoders.iter().map(|d| (d.conn.clone(), pull_steps(t, &d.conn))).collect();
        let max_steps = steps.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
        let pull_of = |d: &String, rb: &mooncake_wire::typed::ReqBlocks| Pull {
            d_req_id: d.clone(),
            transfer_id: rb.transfer_id.clone(),
            blocks: rb.blocks.iter().map(|g| g.iter().map(|b| b.as_u64().unwrap_or(0)).collect()).collect(),
            engine_id: engine.clone(),
            bootstrap_addr: boot.url(),
            ..Default::default()
        };
        // The decoder's scheduler learns of its requests before it pulls them (vLLM's `on_new_request`); with
        // a lease it renews them from now on. Then the scenario's delay before the first pull.
        if scenario.announce {
            for (conn, st) in &steps {
                let Some((_, te)) = testees.iter_mut().find(|(c, _)| c == conn) else { continue };
                let requests = st.iter().flat_map(|m| m.req_blocks.iter().map(|(d, rb)| pull_of(d, rb))).collect();
                te.send::<Done>(&Command::Announce { requests }).await?;
            }
        }
        tokio::time::sleep(Duration::from_secs_f64(scenario.pull_delay_s.max(0.0))).await;
        let mut done_actions: Vec<String> = vec![];
        for k in 0..max_steps {
            // Decoders pull in the order the recording shows: each next one once our prefiller has the pull
            // of the one before (vLLM's decoder workers of one engine step do not race in the recordings).
            let mut order: Vec<&(String, Vec<MooncakeXferMetadata>)> =
                steps.iter().filter(|(_, s)| s.len() > k).collect();
            order.sort_by_key(|(conn, st)| {
                t.exchanges
                    .iter()
                    .filter(|x| &x.decoder == conn)
                    .find(|x| x.request.value().is_some_and(|m| m.req_blocks == st[k].req_blocks))
                    .map(|x| x.send_seq())
                    .unwrap_or(u64::MAX)
            });
            let inbound_base = inbound_count(&prefillers, &profile).await;
            for (n, (conn, s)) in order.into_iter().enumerate() {
                if let (true, Some(base)) = (n > 0, inbound_base) {
                    let until = tokio::time::Instant::now() + Duration::from_secs(2) + opts.slack;
                    while tokio::time::Instant::now() < until
                        && inbound_count(&prefillers, &profile).await.is_some_and(|c| c < base + n)
                    {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
                let Some(m) = s.get(k) else { continue };
                let Some((_, te)) = testees.iter_mut().find(|(c, _)| c == conn) else { continue };
                let reqs: Vec<Pull> = m.req_blocks.iter().map(|(d, rb)| pull_of(d, rb)).collect();
                te.send::<Done>(&Command::Pull { requests: reqs }).await?;
            }
            // Wait until every decoder testee settled this step, firing reply-driven actions meanwhile.
            let deadline = tokio::time::Instant::now() + abort * 2 + opts.slack;
            loop {
                // Whether every decoder settled, read before the replies below: a reply that settled a pull
                // is in the wire log by then, so the actions it triggers fire before the next step starts.
                let mut settled = true;
                // Whether replies the recording shows for the pulls so far are still to come from our prefiller.
                let mut wait_replies = false;
                {
                    let mut sent_now = 0;
                    let mut known = true;
                    for (_, p) in &prefillers {
                        match p.wire(&profile).await {
                            Some(w) => sent_now += w.iter().filter(|(inbound, _)| !inbound).count(),
                            None => known = false,
                        }
                    }
                    if known && sent_now < recorded_replies_through(t, &steps, k) {
                        wait_replies = true;
                    }
                }
                for (conn, te) in testees.iter_mut() {
                    let s: DecoderStatus = te.status().await?;
                    // Requests vLLM's decoder never reported may stay pending in the testee, as in vLLM.
                    let stuck = recorded_stuck(t, conn);
                    if s.pending_pulls.unwrap_or(u64::MAX) > stuck.len() as u64 || s.open_exchanges != Some(0) {
                        settled = false;
                    }
                    // Every request of this step that has blocks must have an outcome (or none, as recorded).
                    let done: Vec<String> =
                        s.finished.iter().cloned().chain(s.failed.iter().map(|x| x.d_req_id.clone())).collect();
                    // A request vLLM left waiting is settled once the testee says it gave up on it (`unsettled`),
                    // or, for a testee that does not say, once the recorded replies have all been sent.
                    let given_up: Option<Vec<String>> =
                        s.unsettled.as_ref().map(|a| a.iter().map(|x| x.d_req_id.clone()).collect());
                    if let Some(m) = steps.iter().find(|(c, _)| c == conn).and_then(|(_, s)| s.get(k)) {
                        for (d, rb) in &m.req_blocks {
                            if !rb.blocks.iter().any(|g| !g.is_empty()) || done.contains(d) {
                                continue;
                            }
                            let ok = stuck.contains(d)
                                && match &given_up {
                                    Some(g) => g.contains(d),
                                    None => !wait_replies,
                                };
                            if !ok {
                                settled = false;
                            }
                        }
                    }
                }
                // Replies sent so far: from our prefiller's wire log, or (two testees) the requests the
                // decoder has settled.
                let mut sent = 0;
                let mut have_wire = true;
                for (_, p) in &prefillers {
                    match p.wire(&profile).await {
                        Some(w) => sent += w.iter().filter(|(inbound, _)| !inbound).count(),
                        None => have_wire = false,
                    }
                }
                if !have_wire {
                    sent = 0;
                    for (_, te) in testees.iter_mut() {
                        let s: DecoderStatus = te.status().await?;
                        sent += s.finished.len() + s.failed.len();
                    }
                }
                for tr in &scenario.transfers {
                    if let Ready::AfterReply(n) = tr.ready {
                        if sent >= n && !done_actions.contains(&tr.transfer_id) {
                            done_actions.push(tr.transfer_id.clone());
                            for (_, p) in prefillers.iter_mut() {
                                p.ready(&tr.p_req_id, &tr.transfer_id, &tr.blocks).await?;
                            }
                        }
                    }
                }
                if let Some(n) = scenario.forget_layouts_after_reply {
                    if sent >= n && !done_actions.iter().any(|a| a == "forget") {
                        done_actions.push("forget".into());
                        for (_, p) in prefillers.iter_mut() {
                            p.forget().await?;
                        }
                    }
                }
                if settled {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    out.push(
                        Finding::new(CheckId::DSettle, "the decoder did not settle its pulls in time")
                            .about(format!("pull {}", k + 1)),
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;

        // What the decoder sent, per prefiller worker, against the recording.
        let mut wires = vec![];
        for (conn, p) in &prefillers {
            if let Some(w) = p.wire(&profile).await {
                wires.push((conn.clone(), w));
            }
        }
        out.extend(compare_requests(t, &profile, pairing, &wires, Some(&sessions))?);
        // The decoder's lease heartbeats against the recorded ones (0.34.0).
        let mut beats = vec![];
        for (conn, p) in &prefillers {
            if let Some(b) = p.heartbeats(&profile).await {
                beats.push((conn.clone(), b));
            }
        }
        if beats.len() == prefillers.len() {
            let mut leased = vec![];
            for (conn, te) in testees.iter_mut() {
                let s: DecoderStatus = te.status().await?;
                leased.push((conn.clone(), s.leased));
            }
            out.extend(check_renewal(t, &profile, &beats, &leased));
        }

        // Outcomes against vLLM's (where the recording saw them).
        let outcomes = super::applies(&t.trace.header, CheckId::DOutcome);
        for (conn, te) in testees.iter_mut() {
            let s: DecoderStatus = te.status().await?;
            let outcome = t
                .trace
                .header
                .observed_outcome
                .get(conn.as_str())
                .cloned()
                .unwrap_or_else(|| t.trace.header.observed_outcome.clone());
            let list = |v: Option<&J>| -> Vec<String> {
                v.and_then(J::as_array)
                    .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                    .unwrap_or_default()
            };
            let mut want_fin: Vec<String> = if outcome.get("pull1").is_some() {
                ["pull1", "pull2", "pull3"]
                    .iter()
                    .flat_map(|p| {
                        list(outcome.get(*p).and_then(|o| o.get("finished_recving")).and_then(|o| o.get(conn.as_str())))
                    })
                    .collect()
            } else {
                list(outcome.get("finished_recving").and_then(|o| o.get(conn.as_str())))
            };
            let mut got_fin = s.finished.clone();
            want_fin.sort();
            got_fin.sort();
            if outcomes && got_fin != want_fin {
                out.push(
                    Finding::new(
                        CheckId::DOutcome,
                        format!("finished {got_fin:?}, vLLM's decoder finished {want_fin:?}"),
                    )
                    .about(conn.clone()),
                );
            }
            let mut want_invalid: Vec<u64> = outcome
                .get("load_errors")
                .and_then(|o| o.get(conn.as_str()))
                .and_then(|o| o.get("invalid_block_ids"))
                .and_then(J::as_array)
                .map(|a| a.iter().filter_map(J::as_u64).collect())
                .unwrap_or_default();
            // The blocks of the failed requests (TESTEE.md reports failed request ids; their blocks are what
            // vLLM reports invalid).
            let failed_ids: Vec<String> = s.failed.iter().map(|x| x.d_req_id.clone()).collect();
            let mut got_invalid: Vec<u64> = steps
                .iter()
                .filter(|(c, _)| c == conn)
                .flat_map(|(_, st)| st.iter())
                .flat_map(|m| m.req_blocks.iter())
                .filter(|(d, _)| failed_ids.contains(d))
                .flat_map(|(_, rb)| rb.blocks.iter().flatten().filter_map(|b| b.as_u64()))
                .collect();
            want_invalid.sort();
            got_invalid.sort();
            got_invalid.dedup();
            if outcomes && got_invalid != want_invalid {
                out.push(
                    Finding::new(
                        CheckId::DOutcome,
                        format!("blocks reported invalid {got_invalid:?}, vLLM reported {want_invalid:?}"),
                    )
                    .about(conn.clone()),
                );
            }
            let stuck = recorded_stuck(t, conn);
            if s.pending_pulls.unwrap_or(u64::MAX) > stuck.len() as u64 || s.open_exchanges != Some(0) {
                out.push(
                    Finding::new(
                        CheckId::DStateLeak,
                        format!(
                            "{} pulls and {} exchanges still open ({} left waiting by vLLM)",
                            super::count(s.pending_pulls),
                            super::count(s.open_exchanges),
                            stuck.len()
                        ),
                    )
                    .about(conn.clone()),
                );
            }
            // Bytes in the decoder's memory.
            let Some(req) = t.decoders.iter().find(|d| &d.conn == conn).and_then(|d| d.layout_request.clone()) else {
                continue;
            };
            let mut expected = vec![];
            for step in steps.iter().filter(|(c, _)| c == conn).flat_map(|(_, s)| s) {
                for d in got_fin.iter().filter(|d| !s.failed.iter().any(|x| &x.d_req_id == *d)) {
                    if let Some(e) = expected_blocks_scaled(
                        &req,
                        step,
                        d,
                        &scenario,
                        profile.rules.plan.block_groups,
                        stride_scale(&profile, &req, model, t),
                    ) {
                        expected.extend(e.blocks);
                    }
                }
            }
            let p_tp = t.prefillers.first().map(|p| p.tp_size).unwrap_or(1);
            let same_tp = req.remote_tp_size == WireInt::from(p_tp as u64);
            let mut mem: HashMap<(usize, u64), Vec<u8>> = HashMap::new();
            let cols = crate::setup::columns(&req, model);
            for r in 0..req.kv_caches_base_addr.len() {
                let (Some(&base), Some(&bl)) = (cols.base.get(r), cols.block_lens.get(r)) else { continue };
                if let Ok(a) = te.send::<Memory>(&Command::ReadMemory { addr: base, len: bl * model.num_blocks }).await
                {
                    if let Ok(bytes) = hex::decode(&a.hex) {
                        for b in 0..model.num_blocks {
                            mem.insert((r, b), bytes[(b * bl) as usize..((b + 1) * bl) as usize].to_vec());
                        }
                    }
                }
            }
            for p in check_landed(&req, model.num_blocks, &expected, same_tp, |r, b| mem.get(&(r, b)).cloned())
                .into_iter()
                .take(5)
            {
                out.push(Finding::new(CheckId::Landed, p).about(format!("memory of {conn}")));
            }
        }
        // With a prefiller testee: its completions and its tables too.
        for (conn, p) in prefillers.iter_mut() {
            let PSide::Testee(te) = p else { continue };
            let want: Vec<String> = t
                .trace
                .header
                .observed_outcome
                .get("finished_sending")
                .and_then(|o| o.get(conn.as_str()))
                .and_then(J::as_array)
                .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                .unwrap_or_default();
            let deadline = tokio::time::Instant::now() + abort + opts.slack;
            loop {
                let s: PrefillerStatus = te.status().await?;
                let idle = s.tracked_transfers == Some(0) && s.open_exchanges == Some(0);
                if idle || tokio::time::Instant::now() >= deadline {
                    if let Some(detail) = super::freed_mismatch(&s, &want)
                        .filter(|_| super::applies(&t.trace.header, CheckId::PFinishedSending))
                    {
                        out.push(Finding::new(CheckId::PFinishedSending, detail).about(conn.clone()));
                    }
                    if !idle {
                        out.push(
                            Finding::new(
                                CheckId::PStateLeak,
                                format!(
                                    "{} transfers and {} exchanges still tracked",
                                    super::count(s.tracked_transfers),
                                    super::count(s.open_exchanges)
                                ),
                            )
                            .about(conn.clone()),
                        );
                    }
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok::<(), PlayError>(())
    };
    let r = bounded(Duration::from_secs(120) + abort * 4, "the case", result).await.and_then(|x| x);
    for (_, te) in testees {
        te.stop().await;
    }
    for (_, p) in prefillers {
        if let PSide::Testee(te) = p {
            te.stop().await;
        }
    }
    drop(boot);
    r.map(|_| out)
}

/// Compares what a decoder sent to each of the runner's prefillers (their wire logs) with the recording, and
/// runs the protocol checks on the live conversation. `sessions` maps a recorded decoder conn to the live
/// decoder's transfer-engine session; `None` for an external decoder, whose own addresses and `layout_id`
/// are mapped too (only their count and presence are compared).
pub fn compare_requests(
    t: &crate::conversation::Conversation,
    profile: &WireProfile,
    pairing: &crate::crossver::Pairing,
    wires: &[(String, Vec<(bool, Vec<Vec<u8>>)>)],
    sessions: Option<&HashMap<String, String>>,
) -> Result<Vec<Finding>, PlayError> {
    let mut out = vec![];
    let mut live_xs: Vec<Exchange> = vec![];
    for (conn, wire) in wires {
        let inbound: Vec<&Vec<Vec<u8>>> = wire.iter().filter(|(i, _)| *i).map(|(_, f)| f).collect();
        // The live conversation of this prefiller, each payload decoded once (replies by routing id): what
        // the comparisons below and the protocol checks read.
        let first = live_xs.len();
        for frames in &inbound {
            let rid = frames.first().cloned().unwrap_or_default();
            let sent = Sent {
                index: live_xs.len(),
                decoder: "decoder".into(),
                endpoint: conn.clone(),
                request: frames.get(1).cloned().unwrap_or_default(),
                seq: None,
                line: None,
            };
            let mut x = Exchange::new(Some(profile), sent);
            for (_, f2) in wire.iter().filter(|(i, f2)| !*i && f2.first() == Some(&rid)) {
                if let Some(b) = f2.get(1) {
                    x.push_reply(Some(profile), b.clone(), None, None);
                }
            }
            live_xs.push(x);
        }
        let arrived = &live_xs[first..];
        let recorded: Vec<&crate::conversation::Exchange> =
            t.exchanges.iter().filter(|x| x.prefiller.as_deref() == Some(conn.as_str())).collect();
        if inbound.len() != recorded.len() {
            out.push(
                Finding::new(
                    CheckId::RequestCount,
                    format!("{} requests arrived, vLLM's decoder sent {}", inbound.len(), recorded.len()),
                )
                .about(conn.clone()),
            );
        }
        // Pair each arriving request with a recorded one from the same decoder (decoders pull concurrently,
        // so arrival order across decoders is not the recorded order); within one decoder, in order.
        let mut used = vec![false; recorded.len()];
        let mut pairs = vec![];
        for (frames, lx) in inbound.iter().zip(arrived) {
            let from = lx.request.value().and_then(|m| {
                let s = format!("{}:{}", m.remote_hostname, m.remote_port);
                sessions.and_then(|ss| ss.iter().find(|(_, v)| **v == s).map(|(k, _)| k.clone()))
            });
            let pick = (0..recorded.len())
                .find(|&i| !used[i] && from.as_ref().is_none_or(|d| *d == recorded[i].decoder))
                .or_else(|| (0..recorded.len()).find(|&i| !used[i]));
            if let Some(i) = pick {
                used[i] = true;
                pairs.push((*frames, lx, recorded[i]));
            }
        }
        for (n, (frames, lx, rx)) in pairs.into_iter().enumerate() {
            let msg = format!("{conn} request {}", n + 1);
            if frames.len() != 2 {
                out.push(
                    Finding::new(
                        CheckId::ZmqFrames,
                        format!("{} frames at the ROUTER; a decoder sends exactly one frame", frames.len()),
                    )
                    .about(msg.clone()),
                );
            }
            // [routing_id, payload]: any other frame was already reported.
            let bytes = &lx.request.bytes;
            match lx.request.decoded.clone().expect("decoded with the trace's profile") {
                Err(e) => out.push(Finding::new(CheckId::RequestDecode, e.msgspec_message()).about(msg)),
                Ok(mut got) => {
                    if !pairing.canonical_for_testee("MooncakeXferMetadata", bytes) {
                        out.push(
                            Finding::new(
                                CheckId::WireCanonical,
                                format!("{} is not msgspec's encoding of that value", hex::encode(bytes)),
                            )
                            .about(msg.clone()),
                        );
                    }
                    let want = rx.request.value().ok_or(PlayError::RecordedRequestUndecodable)?;
                    // The decoder's own address and transfer-engine port differ per run.
                    let live_session = format!("{}:{}", got.remote_hostname, got.remote_port);
                    match sessions {
                        Some(sessions) if sessions.get(&rx.decoder) != Some(&live_session) => out.push(Finding::new(CheckId::RequestSession, format!("remote_hostname:remote_port {live_session} is not the decoder's transfer-engine endpoint {:?}", sessions.get(&rx.decoder))).about(msg.clone())),
                        Some(_) => {}
                        None => {
                            // An external decoder's memory and registration id are its own.
                            if got.kv_caches_base_addr.len() == want.kv_caches_base_addr.len() {
                                got.kv_caches_base_addr = want.kv_caches_base_addr.clone();
                            }
                            if (got.layout_id == WireInt::ZERO) == (want.layout_id == WireInt::ZERO) {
                                got.layout_id = want.layout_id;
                            }
                        }
                    }
                    got.remote_hostname = want.remote_hostname.clone();
                    got.remote_port = want.remote_port;
                    let (got, want) = (pairing.project_request(&got), pairing.project_request(want));
                    let (gv, wv) = (profile.metadata_value(&got), profile.metadata_value(&want));
                    if let (Ok(gv), Ok(wv)) = (gv, wv) {
                        let (gj, wj) = (Codec::to_json(&gv), Codec::to_json(&wv));
                        if !crate::jsonl::eq_ordered(&gj, &wj) {
                            out.push(
                                Finding::new(CheckId::RequestDiff, first_difference(&gj, &wj, "$").unwrap_or_default())
                                    .about(msg),
                            );
                        }
                    }
                }
            }
        }
    }
    out.extend(check_exchanges(profile, &live_xs));
    Ok(out)
}

/// `replay --play prefiller --listen`: the runner's prefiller listens where an external decoder (started and
/// driven by the user) will pull, registered with the runner's bootstrap server; the decoder's requests are
/// compared with the recording (its own addresses and layout id mapped). Its outcomes cannot be read.
///
/// The scenario's transfers become ready when the decoder's first request arrives (or `ready_after` the
/// start), so a decoder started after the instructions are printed finds them as vLLM's did. The runner's own
/// replies and transfer-engine writes are compared with the recording too: when they deviate (the decoder came
/// too late, its engine was unreachable) the case is broken, whatever the requests looked like.
async fn play_listen(
    case: &Case,
    opts: &PlayOptions,
    endpoint: &str,
    bootstrap: &str,
    timeout: Duration,
    ready_after: Option<Duration>,
) -> Result<Vec<Finding>, PlayError> {
    let t = &case.model;
    let profile = t.profile.clone().ok_or(PlayError::NoProfile)?;
    let sc = &opts.scenarios;
    let scenario = opts.scenario_for(t);
    let model = &sc.model;
    let [p] = t.prefillers.as_slice() else {
        return Err(PlayError::ListenPrefillers { scenario: t.scenario().to_string(), prefillers: t.prefillers.len() });
    };
    let spec = BootstrapSpec::new(t.revision.clone()).ok_or(PlayError::NoBootstrap)?.map_err(PlayError::runner)?;
    let boot = BootstrapServer::start(bootstrap, Registry::new(spec)).await.map_err(PlayError::runner)?;
    let peer = own_prefiller(t, p, model, scenario.prefiller_kv_lease_s, endpoint, boot.url()).await?;
    for tr in &scenario.transfers {
        peer.allocated(&tr.p_req_id, &tr.transfer_id);
    }
    if scenario.fail_transfers > 0 {
        peer.fail_next_writes(scenario.fail_transfers, -1);
    }
    let started = tokio::time::Instant::now();
    let mut readied = false;
    let mut say = String::new();
    let _ = writeln!(
        say,
        "{}: prefiller {} (engine {}) registered with {}; waiting up to {} for the decoder to pull:",
        case.id,
        peer.endpoint,
        p.engine_id,
        boot.url(),
        super::secs(timeout)
    );
    for d in &t.decoders {
        for step in pull_steps(t, &d.conn) {
            let blocks = |rb: &mooncake_wire::typed::ReqBlocks| {
                serde_json::to_string(
                    &rb.blocks
                        .iter()
                        .map(|g| g.iter().map(|b| b.as_u64().unwrap_or(0)).collect::<Vec<_>>())
                        .collect::<Vec<_>>(),
                )
                .unwrap_or_default()
            };
            let reqs: Vec<String> = step
                .req_blocks
                .iter()
                .map(|(d, rb)| format!("{d} ({}, blocks {})", rb.transfer_id, blocks(rb)))
                .collect();
            let _ = writeln!(say, "  {}: pull {}", d.conn, reqs.join(", "));
        }
    }
    // Instructions the person driving the decoder needs while the runner waits (a closed stderr is ignored).
    let _ = std::io::Write::write_all(&mut std::io::stderr(), say.as_bytes());
    let want = t.exchanges.len();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut done: Vec<String> = vec![];
    loop {
        let wire = split_heartbeats(&profile, peer.status().await?.wire).0;
        let sent = wire.iter().filter(|(i, _)| !*i).count();
        let arrived = wire.iter().any(|(i, _)| *i);
        let due = match ready_after {
            Some(d) => started.elapsed() >= d,
            None => arrived,
        };
        if due && !readied {
            readied = true;
            for tr in scenario.transfers.iter().filter(|tr| tr.ready == Ready::Before) {
                peer.finished(&tr.p_req_id, &tr.transfer_id, tr.blocks.clone());
            }
        }
        for tr in &scenario.transfers {
            if matches!(tr.ready, Ready::AfterReply(n) if sent >= n) && !done.contains(&tr.transfer_id) {
                done.push(tr.transfer_id.clone());
                peer.finished(&tr.p_req_id, &tr.transfer_id, tr.blocks.clone());
            }
        }
        if scenario.forget_layouts_after_reply.is_some_and(|n| sent >= n) && !done.iter().any(|d| d == "forget") {
            done.push("forget".into());
            peer.forget_layouts();
        }
        let replies_due: usize = t.exchanges.iter().map(|x| x.replies.len()).sum();
        if wire.iter().filter(|(i, _)| *i).count() >= want && sent >= replies_due {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut status = peer.status().await?;
    status.wire = split_heartbeats(&profile, std::mem::take(&mut status.wire)).0;
    runner_deviations(t, &profile, &status, &opts.sink);
    compare_requests(t, &profile, &crate::crossver::Pairing::same(&t.revision), &[(p.conn.clone(), status.wire)], None)
}

/// The runner's own side in `--listen`: its replies (as a multiset, sessions in error messages mapped to the
/// live decoder's) and its transfer-engine writes (session, descriptors, bytes) against the recording. Every
/// deviation is reported to `sink` as breaking the case.
fn runner_deviations(t: &Conversation, profile: &WireProfile, status: &OwnStatus, sink: &super::CaseSink) {
    use crate::reply::show_reply;
    // Recorded decoder session → the live decoder's (from the requests that arrived).
    let mut sessions: Vec<(String, String)> = vec![];
    // Recorded layout id → the live decoder's (a reply echoes the id of the request it answers).
    let mut layout_ids: Vec<(WireInt, WireInt)> = vec![];
    let recorded_reqs: Vec<MooncakeXferMetadata> =
        t.exchanges.iter().filter_map(|x| x.request.value().cloned()).collect();
    let live_reqs: Vec<MooncakeXferMetadata> = status
        .wire
        .iter()
        .filter(|(i, _)| *i)
        .filter_map(|(_, f)| f.get(1).and_then(|b| profile.decode_metadata(b).ok()))
        .collect();
    for (r, l) in recorded_reqs.iter().zip(&live_reqs) {
        let (a, b) =
            (format!("{}:{}", r.remote_hostname, r.remote_port), format!("{}:{}", l.remote_hostname, l.remote_port));
        if !sessions.iter().any(|(x, _)| *x == a) {
            sessions.push((a, b));
        }
        if !layout_ids.iter().any(|(x, _)| *x == r.layout_id) {
            layout_ids.push((r.layout_id, l.layout_id));
        }
    }
    let mut live: Vec<Option<MooncakeXferResponse>> = status
        .wire
        .iter()
        .filter(|(i, _)| !*i)
        .map(|(_, f)| f.last().and_then(|b| profile.decode_response(b).ok()))
        .collect();
    for (k, x) in t.exchanges.iter().enumerate() {
        for (j, reply) in x.replies.iter().enumerate() {
            let Some(mut want) = reply.payload.value().cloned() else { continue };
            if let Some(m) = &mut want.err_msg {
                for (a, b) in &sessions {
                    *m = m.replace(a, b);
                }
            }
            if let Some((_, l)) = layout_ids.iter().find(|(r, _)| *r == want.layout_id) {
                want.layout_id = *l;
            }
            match live.iter().position(|l| l.as_ref().is_some_and(|l| crate::checks::same_reply(l, &want))) {
                Some(i) => live[i] = None,
                None => sink.broken(format!(
                    "the runner's prefiller never sent the recorded reply {} of exchange {} ({}); it sent {}",
                    j + 1,
                    k + 1,
                    show_reply(&want),
                    live.iter().flatten().map(show_reply).collect::<Vec<_>>().join(", ")
                )),
            }
        }
    }
    let extra: Vec<String> = live.iter().flatten().map(show_reply).collect();
    if !extra.is_empty() {
        sink.broken(format!("the runner's prefiller sent replies the recording does not have: {}", extra.join(", ")));
    }
    if super::applies(&t.trace.header, CheckId::TeCalls) {
        let map = |s: &str| sessions.iter().find(|(_, b)| b == s).map(|(a, _)| a.clone()).unwrap_or(s.to_string());
        let mut got: Vec<(String, u64, u64)> =
            status.writes.iter().map(|(s, n, b, _)| (map(s), *n as u64, *b)).collect();
        let mut want: Vec<(String, u64, u64)> =
            t.trace.header.transfer_engine_calls.iter().map(|c| (c.session.clone(), c.n, c.bytes)).collect();
        got.sort();
        want.sort();
        if got != want {
            sink.broken(format!(
                "the runner's transfer-engine writes (session, descriptors, bytes) {got:?} differ from the recorded {want:?}"
            ));
        }
    }
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

/// `LEASE-RENEWAL`: the heartbeats that reached each of the runner's prefillers against the recorded ones —
/// some where the recording has some, none where it has none, naming only recorded transfer ids — and no
/// decoder still renewing once its pulls settled (`leased`, where the testee says).
fn check_renewal(
    t: &Conversation,
    profile: &WireProfile,
    beats: &[(String, Vec<Vec<u8>>)],
    leased: &[(String, Option<u64>)],
) -> Vec<Finding> {
    let mut out = vec![];
    for (conn, got) in beats {
        let recorded: Vec<&crate::conversation::Heartbeat> =
            t.heartbeats.iter().filter(|h| h.prefiller.as_deref() == Some(conn.as_str())).collect();
        let msg = format!("heartbeats to {conn}");
        match (recorded.is_empty(), got.is_empty()) {
            (false, true) => out.push(
                Finding::new(
                    CheckId::LeaseRenewal,
                    format!("none arrived; vLLM's decoder sent {} (it renews its leased requests)", recorded.len()),
                )
                .about(msg.clone()),
            ),
            (true, false) => out.push(
                Finding::new(
                    CheckId::LeaseRenewal,
                    format!("{} arrived; vLLM's decoder sent none to this prefiller", got.len()),
                )
                .about(msg.clone()),
            ),
            _ => {}
        }
        let known: std::collections::BTreeSet<&str> =
            recorded.iter().flat_map(|h| h.transfer_ids()).map(String::as_str).collect();
        for (n, bytes) in got.iter().enumerate() {
            let mooncake_wire::proto::Inbound::Heartbeat(h) = profile.read_inbound(bytes) else { continue };
            let unknown: Vec<&String> = h.lease_transfer_ids.iter().filter(|i| !known.contains(i.as_str())).collect();
            if !recorded.is_empty() && !unknown.is_empty() {
                out.push(
                    Finding::new(
                        CheckId::LeaseRenewal,
                        format!("renews {unknown:?}, which vLLM's decoder never renewed (it renewed {known:?})"),
                    )
                    .about(format!("{msg}: heartbeat {}", n + 1)),
                );
            }
        }
    }
    for (conn, n) in leased {
        if let Some(n) = n.filter(|n| *n > 0) {
            out.push(
                Finding::new(CheckId::LeaseRenewal, format!("still renews {n} requests after its pulls settled"))
                    .about(conn.clone()),
            );
        }
    }
    out
}

/// Replies the recording shows for the exchanges of pull steps `0..=k` (of every decoder).
fn recorded_replies_through(t: &Conversation, steps: &[(String, Vec<MooncakeXferMetadata>)], k: usize) -> usize {
    t.exchanges
        .iter()
        .filter(|x| {
            let Some(m) = x.request.value() else { return false };
            steps
                .iter()
                .filter(|(c, _)| *c == x.decoder)
                .any(|(_, st)| st.iter().take(k + 1).any(|s| s.req_blocks == m.req_blocks))
        })
        .map(|x| x.replies.len())
        .sum()
}

/// Pulls our prefillers have received so far (from their wire logs); `None` when one is another testee.
async fn inbound_count(prefillers: &[(String, PSide)], profile: &WireProfile) -> Option<usize> {
    let mut n = 0;
    for (_, p) in prefillers {
        n += p.wire(profile).await?.iter().filter(|(inbound, _)| *inbound).count();
    }
    Some(n)
}
