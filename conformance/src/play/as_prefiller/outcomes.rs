//! What a decoder case checks once the pulls settled: lease renewals, the decoders' outcomes against vLLM's,
//! their state, the bytes in their memory, and — with a prefiller testee — its completions and state.

use std::time::Duration;

use mooncake_testee_protocol::{DecoderStatus, PrefillerStatus};
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::WireProfile;
use mooncake_wire::typed::MooncakeXferMetadata;
use serde_json::Value as J;

use super::pulls::Steps;
use super::Sides;
use crate::play::{CaseCtx, PlayError, PrefillerSide};
use crate::setup::{check_landed, expected_blocks_scaled, stride_scale};
use crate::testee::Testee;
use mooncake_trace::conversation::Conversation;
use mooncake_trace::finding::{CheckId, Finding};

/// `LEASE-RENEWAL`, when every prefiller is the runner's own (it sees the heartbeats).
pub(super) async fn check_renewal(
    ctx: &mut CaseCtx<'_>,
    profile: &WireProfile,
    sides: &mut Sides,
) -> Result<(), PlayError> {
    let mut beats = vec![];
    for (conn, p) in &sides.prefillers {
        if let Some(b) = p.heartbeats(profile).await {
            beats.push((conn.clone(), b));
        }
    }
    if beats.len() != sides.prefillers.len() {
        return Ok(());
    }
    let mut leased = vec![];
    for (conn, te) in sides.decoders.iter_mut() {
        let s: DecoderStatus = te.status().await?;
        leased.push((conn.clone(), s.leased));
    }
    ctx.found_all(renewal_findings(ctx.t, profile, &beats, &leased));
    Ok(())
}

/// `LEASE-RENEWAL`: the heartbeats that reached each of the runner's prefillers against the recorded ones —
/// some where the recording has some, none where it has none, naming only recorded transfer ids — and no
/// decoder still renewing once its pulls settled (`leased`, where the testee says).
fn renewal_findings(
    t: &Conversation,
    profile: &WireProfile,
    beats: &[(String, Vec<Vec<u8>>)],
    leased: &[(String, Option<u64>)],
) -> Vec<Finding> {
    let mut out = vec![];
    for (conn, got) in beats {
        let recorded: Vec<&mooncake_trace::conversation::Heartbeat> =
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

/// A decoder testee's outcomes against vLLM's (`D-OUTCOME`), its state (`D-STATE-LEAK`) and the bytes in its
/// memory (`LANDED`).
pub(super) async fn check_decoder(
    ctx: &mut CaseCtx<'_>,
    profile: &WireProfile,
    steps: &Steps,
    conn: &str,
    te: &mut Testee,
) -> Result<(), PlayError> {
    let s: DecoderStatus = te.status().await?;
    let mut finished = s.finished.clone();
    finished.sort();
    if ctx.applies(CheckId::DOutcome) {
        check_outcome(ctx, conn, &s, &finished);
    }
    let stuck = super::recorded_stuck(ctx.t, conn);
    if s.pending_pulls.unwrap_or(u64::MAX) > stuck.len() as u64 || s.open_exchanges != Some(0) {
        let detail = format!(
            "{} pulls and {} exchanges still open ({} left waiting by vLLM)",
            crate::play::count(s.pending_pulls),
            crate::play::count(s.open_exchanges),
            stuck.len()
        );
        ctx.found(Finding::new(CheckId::DStateLeak, detail).about(conn));
    }
    let Some(req) = ctx.t.decoders.iter().find(|d| d.conn == conn).and_then(|d| d.layout_request.clone()) else {
        return Ok(());
    };
    let delivered: Vec<&String> = finished.iter().filter(|d| !s.failed.iter().any(|x| &x.d_req_id == *d)).collect();
    let expected = expected_landing(ctx, profile, &req, steps.of_conn(conn), &delivered);
    let cols = crate::setup::columns(&req, ctx.model());
    let memory = crate::play::read_testee_memory(te, &cols, ctx.model().num_blocks).await;
    let p_tp = ctx.t.prefillers.first().map(|p| p.tp_size).unwrap_or(1);
    let same_tp = req.remote_tp_size == WireInt::from(p_tp as u64);
    let problems = check_landed(&req, ctx.model().num_blocks, &expected, same_tp, |r, b| memory.get(&(r, b)).cloned());
    for p in problems.into_iter().take(5) {
        ctx.found(Finding::new(CheckId::Landed, p).about(format!("memory of {conn}")));
    }
    Ok(())
}

/// `D-OUTCOME`: the requests the decoder finished (sorted: `finished`) and the blocks of those it failed, against
/// what vLLM's decoder finished and reported invalid.
fn check_outcome(ctx: &mut CaseCtx<'_>, conn: &str, s: &DecoderStatus, finished: &[String]) {
    let header = &ctx.t.trace.header;
    let outcome = header.observed_outcome.get(conn).cloned().unwrap_or_else(|| header.observed_outcome.clone());
    let list = |v: Option<&J>| -> Vec<String> {
        v.and_then(J::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    let finished_in = |o: Option<&J>| list(o.and_then(|o| o.get("finished_recving")).and_then(|o| o.get(conn)));
    let mut want_fin: Vec<String> = if outcome.get("pull1").is_some() {
        ["pull1", "pull2", "pull3"].iter().flat_map(|p| finished_in(outcome.get(*p))).collect()
    } else {
        finished_in(Some(&outcome))
    };
    want_fin.sort();
    if finished != want_fin {
        let detail = format!("finished {finished:?}, vLLM's decoder finished {want_fin:?}");
        ctx.found(Finding::new(CheckId::DOutcome, detail).about(conn));
    }
    let errors = outcome.get("load_errors").and_then(|o| o.get(conn));
    let numbers = |key: &str| -> Vec<u64> {
        let values = errors.and_then(|o| o.get(key)).and_then(J::as_array);
        values.map(|a| a.iter().filter_map(J::as_u64).collect()).unwrap_or_default()
    };
    // What the decoder told its scheduler, as TESTEE.md's `failed` entries say it: the blocks it reports invalid
    // (flattened over KV groups), and the requests it reports in `failed_recving` instead.
    let got_invalid = sorted_set(s.failed.iter().flat_map(|f| f.invalid_blocks.iter().copied()));
    let want_invalid = sorted_set(numbers("invalid_block_ids"));
    if got_invalid != want_invalid {
        let detail = format!("blocks reported invalid {got_invalid:?}, vLLM reported {want_invalid:?}");
        ctx.found(Finding::new(CheckId::DOutcome, detail).about(conn));
    }
    let got_failed_recving = sorted_set(s.failed.iter().filter(|f| f.failed_recving).map(|f| f.d_req_id.clone()));
    let want_failed_recving = sorted_set(list(errors.and_then(|o| o.get("failed_reqs"))));
    if got_failed_recving != want_failed_recving {
        let detail = format!(
            "requests reported in failed_recving {got_failed_recving:?}, vLLM reported {want_failed_recving:?}"
        );
        ctx.found(Finding::new(CheckId::DOutcome, detail).about(conn));
    }
}

/// The values sorted, each once.
fn sorted_set<T: Ord>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = values.into_iter().collect();
    v.sort();
    v.dedup();
    v
}

/// The (region, block, source block) writes a decoder should hold: the blocks of the requests it finished
/// without failing (`delivered`), planned with the trace revision's rules.
fn expected_landing(
    ctx: &CaseCtx<'_>,
    profile: &WireProfile,
    req: &MooncakeXferMetadata,
    pulls: &[MooncakeXferMetadata],
    delivered: &[&String],
) -> Vec<(usize, u64, u64)> {
    let scale = stride_scale(profile, req, ctx.model(), ctx.t);
    let groups = profile.rules.plan.block_groups;
    let mut expected = vec![];
    for step in pulls {
        for d in delivered {
            if let Some(e) = expected_blocks_scaled(req, step, d, &ctx.scenario, groups, scale) {
                expected.extend(e.blocks);
            }
        }
    }
    expected
}

/// With a prefiller testee: its completions (`P-FINISHED-SENDING`) and its tables (`P-STATE-LEAK`), once it is
/// idle or the abort timeout has passed.
pub(super) async fn check_prefiller_testees(
    ctx: &mut CaseCtx<'_>,
    prefillers: &mut [(String, PrefillerSide)],
) -> Result<(), PlayError> {
    for (conn, p) in prefillers.iter_mut() {
        let Some(te) = p.testee() else { continue };
        let want: Vec<String> = ctx
            .t
            .trace
            .header
            .observed_outcome
            .get("finished_sending")
            .and_then(|o| o.get(conn.as_str()))
            .and_then(J::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
            .unwrap_or_default();
        let deadline = tokio::time::Instant::now() + ctx.wait();
        let (s, idle) = loop {
            let s: PrefillerStatus = te.status().await?;
            let idle = s.tracked_transfers == Some(0) && s.open_exchanges == Some(0);
            if idle || tokio::time::Instant::now() >= deadline {
                break (s, idle);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if let Some(detail) = crate::play::freed_mismatch(&s, &want).filter(|_| ctx.applies(CheckId::PFinishedSending))
        {
            ctx.found(Finding::new(CheckId::PFinishedSending, detail).about(conn.clone()));
        }
        if !idle {
            let detail = format!(
                "{} transfers and {} exchanges still tracked",
                crate::play::count(s.tracked_transfers),
                crate::play::count(s.open_exchanges)
            );
            ctx.found(Finding::new(CheckId::PStateLeak, detail).about(conn.clone()));
        }
    }
    Ok(())
}
