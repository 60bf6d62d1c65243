//! `replay --play prefiller --listen`: the runner's prefiller listens where an external decoder (started and
//! driven by the user) will pull, registered with the runner's bootstrap server; the decoder's requests are
//! compared with the recording (its own addresses and layout id mapped). Its outcomes cannot be read.
//!
//! The scenario's transfers become ready when the decoder's first request arrives (or `ready_after` the
//! start), so a decoder started after the instructions are printed finds them as vLLM's did. The runner's own
//! replies and transfer-engine writes are compared with the recording too: when they deviate (the decoder came
//! too late, its engine was unreachable) the case is broken, whatever the requests looked like.

use std::fmt::Write as _;
use std::time::Duration;

use mooncake_io::http::BootstrapServer;
use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::proto::{Registry, WireProfile};

use super::deviation::{deviations, LiveMap, Writes};
use super::{compare_requests, own_prefiller, pull_steps};
use crate::counterpart::OwnPrefiller;
use crate::play::prefiller_side::split_heartbeats;
use crate::play::{apply, CaseCtx, PlayError, PrefillerControl, ReplyActions};
use crate::scenarios::Ready;

pub(super) async fn play(
    ctx: &mut CaseCtx<'_>,
    endpoint: &str,
    bootstrap: &str,
    timeout: Duration,
    ready_after: Option<Duration>,
) -> Result<(), PlayError> {
    let t = ctx.t;
    let profile = ctx.profile()?;
    let [p] = t.prefillers.as_slice() else {
        return Err(PlayError::ListenPrefillers { scenario: t.scenario().to_string(), prefillers: t.prefillers.len() });
    };
    let spec = BootstrapSpec::new(t.revision.clone()).ok_or(PlayError::NoBootstrap)?.map_err(PlayError::runner)?;
    let boot = BootstrapServer::start(bootstrap, Registry::new(spec)).await.map_err(PlayError::runner)?;
    let lease = ctx.scenario.prefiller_kv_lease_s;
    let mut peer = own_prefiller(t, p, ctx.model(), lease, endpoint, boot.url()).await?;
    for tr in &ctx.scenario.transfers {
        peer.allocate(tr).await?;
    }
    if ctx.scenario.fail_transfers > 0 {
        peer.fail(ctx.scenario.fail_transfers).await?;
    }
    // Instructions the person driving the decoder needs while the runner waits (a closed stderr is ignored).
    let say = instructions(ctx, &peer, &p.engine_id, &boot.url(), timeout);
    let _ = std::io::Write::write_all(&mut std::io::stderr(), say.as_bytes());
    serve(ctx, &profile, &mut peer, timeout, ready_after).await?;
    let mut status = peer.status().await?;
    status.wire = split_heartbeats(&profile, std::mem::take(&mut status.wire)).0;
    let map = LiveMap::from_requests(t, &profile, &status);
    for d in deviations(t, &profile, &status, &map, Writes::Descriptors) {
        ctx.sink.broken(d);
    }
    ctx.found_all(crate::play::te_checks::findings(std::mem::take(&mut status.te_issues)));
    let same = crate::crossver::Pairing::same(&t.revision);
    ctx.found_all(compare_requests(t, &profile, &same, &[(p.conn.clone(), status.wire)], None)?);
    Ok(())
}

/// What the person driving the decoder is told: where the prefiller is and what to pull.
fn instructions(ctx: &CaseCtx<'_>, peer: &OwnPrefiller, engine_id: &str, url: &str, timeout: Duration) -> String {
    let mut say = String::new();
    let _ = writeln!(
        say,
        "{}: prefiller {} (engine {engine_id}) registered with {url}; waiting up to {} for the decoder to pull:",
        ctx.id,
        peer.endpoint,
        crate::play::secs(timeout)
    );
    let blocks = |rb: &mooncake_wire::typed::ReqBlocks| {
        let b: Vec<Vec<u64>> = rb.blocks.iter().map(|g| g.iter().map(|b| b.as_u64().unwrap_or(0)).collect()).collect();
        serde_json::to_string(&b).unwrap_or_default()
    };
    for d in &ctx.t.decoders {
        for step in pull_steps(ctx.t, &d.conn) {
            let reqs: Vec<String> = step
                .req_blocks
                .iter()
                .map(|(d, rb)| format!("{d} ({}, blocks {})", rb.transfer_id, blocks(rb)))
                .collect();
            let _ = writeln!(say, "  {}: pull {}", d.conn, reqs.join(", "));
        }
    }
    say
}

/// Serves until every recorded request arrived and every recorded reply was sent, or `timeout`: the early
/// transfers made ready once due, the reply-keyed steps taken as replies go out.
async fn serve(
    ctx: &CaseCtx<'_>,
    profile: &WireProfile,
    peer: &mut OwnPrefiller,
    timeout: Duration,
    ready_after: Option<Duration>,
) -> Result<(), PlayError> {
    let t = ctx.t;
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    let mut readied = false;
    let mut actions = ReplyActions::new(&ctx.scenario, &ctx.scenario.transfers);
    let replies_due: usize = t.exchanges.iter().map(|x| x.replies.len()).sum();
    loop {
        let wire = split_heartbeats(profile, peer.status().await?.wire).0;
        let sent = wire.iter().filter(|(i, _)| !*i).count();
        let arrived = wire.iter().filter(|(i, _)| *i).count();
        let due = match ready_after {
            Some(d) => started.elapsed() >= d,
            None => arrived > 0,
        };
        if due && !readied {
            readied = true;
            for tr in ctx.scenario.transfers.iter().filter(|tr| tr.ready == Ready::Before) {
                peer.ready(tr).await?;
            }
        }
        for step in actions.due(sent) {
            apply(&step, peer).await?;
        }
        if (arrived >= t.exchanges.len() && sent >= replies_due) || tokio::time::Instant::now() >= deadline {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
