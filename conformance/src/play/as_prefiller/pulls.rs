//! The pulls of a decoder case: each decoder testee is told to pull what the recorded decoder pulled, step by
//! step, and the case waits for every decoder to settle each step, taking the scenario's reply-keyed steps
//! meanwhile.

use std::time::Duration;

use mooncake_testee_protocol::{Command, DecoderStatus, Done, Pull};
use mooncake_wire::proto::WireProfile;
use mooncake_wire::typed::{MooncakeXferMetadata, ReqBlocks};

use super::{pull_steps, Sides};
use crate::play::{fire, CaseCtx, PlayError, PrefillerSide, ReplyActions};
use crate::testee::Testee;
use mooncake_trace::conversation::Conversation;
use mooncake_trace::finding::{CheckId, Finding};

/// Each recorded decoder conn's pulls, in order (`pull_steps`).
pub(super) struct Steps(pub(super) Vec<(String, Vec<MooncakeXferMetadata>)>);

impl Steps {
    pub(super) fn of(t: &Conversation) -> Steps {
        Steps(t.decoders.iter().map(|d| (d.conn.clone(), pull_steps(t, &d.conn))).collect())
    }

    /// Decoder `conn`'s pulls.
    pub(super) fn of_conn(&self, conn: &str) -> &[MooncakeXferMetadata] {
        self.0.iter().find(|(c, _)| c == conn).map(|(_, s)| s.as_slice()).unwrap_or(&[])
    }

    /// The decoders with a `k`-th pull, in the order the recording shows them sending it.
    fn order_at(&self, t: &Conversation, k: usize) -> Vec<(&str, &MooncakeXferMetadata)> {
        let mut order: Vec<(&str, &MooncakeXferMetadata)> =
            self.0.iter().filter_map(|(c, s)| Some((c.as_str(), s.get(k)?))).collect();
        order.sort_by_key(|(conn, m)| {
            t.exchanges
                .iter()
                .filter(|x| x.decoder == *conn)
                .find(|x| x.request.value().is_some_and(|r| r.req_blocks == m.req_blocks))
                .map(|x| x.send_seq())
                .unwrap_or(u64::MAX)
        });
        order
    }

    /// Replies the recording shows for the exchanges of pull steps `0..=k` (of every decoder).
    fn recorded_replies_through(&self, t: &Conversation, k: usize) -> usize {
        t.exchanges
            .iter()
            .filter(|x| {
                let Some(m) = x.request.value() else { return false };
                self.of_conn(&x.decoder).iter().take(k + 1).any(|s| s.req_blocks == m.req_blocks)
            })
            .map(|x| x.replies.len())
            .sum()
    }
}

/// What a decoder testee is told to pull for one request of a recorded pull.
struct PullOf {
    engine: String,
    bootstrap: String,
}

impl PullOf {
    fn pull(&self, d_req_id: &str, rb: &ReqBlocks) -> Pull {
        Pull {
            d_req_id: d_req_id.to_string(),
            transfer_id: rb.transfer_id.clone(),
            blocks: rb.blocks.iter().map(|g| g.iter().map(|b| b.as_u64().unwrap_or(0)).collect()).collect(),
            engine_id: self.engine.clone(),
            bootstrap_addr: self.bootstrap.clone(),
            ..Default::default()
        }
    }

    fn pulls(&self, m: &MooncakeXferMetadata) -> Vec<Pull> {
        m.req_blocks.iter().map(|(d, rb)| self.pull(d, rb)).collect()
    }
}

/// Every decoder pulls its recorded pulls step by step; after each step, the case waits until every decoder
/// settled it (`D-SETTLE` when one does not in time).
pub(super) async fn pull_all(
    ctx: &mut CaseCtx<'_>,
    profile: &WireProfile,
    bootstrap: &str,
    steps: &Steps,
    sides: &mut Sides,
) -> Result<(), PlayError> {
    let engine = ctx.t.prefillers.first().map(|p| p.engine_id.clone()).unwrap_or_default();
    let pull_of = PullOf { engine, bootstrap: bootstrap.to_string() };
    // The decoder's scheduler learns of its requests before it pulls them (vLLM's `on_new_request`); with a
    // lease it renews them from now on. Then the scenario's delay before the first pull.
    if ctx.scenario.announce {
        for (conn, st) in &steps.0 {
            let Some(te) = decoder(&mut sides.decoders, conn) else { continue };
            let requests = st.iter().flat_map(|m| pull_of.pulls(m)).collect();
            te.send::<Done>(&Command::Announce { requests }).await?;
        }
    }
    tokio::time::sleep(Duration::from_secs_f64(ctx.scenario.pull_delay_s.max(0.0))).await;
    let transfers = ctx.scenario.transfers.clone();
    let mut actions = ReplyActions::new(&ctx.scenario, &transfers);
    let max_steps = steps.0.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
    for k in 0..max_steps {
        send_step(ctx, profile, &pull_of, steps, k, sides).await?;
        settle_step(ctx, profile, steps, k, sides, &mut actions).await?;
    }
    Ok(())
}

fn decoder<'s>(decoders: &'s mut [(String, Testee)], conn: &str) -> Option<&'s mut Testee> {
    decoders.iter_mut().find(|(c, _)| c == conn).map(|(_, te)| te)
}

/// Step `k`: decoders pull in the order the recording shows, each next one once our prefiller has the pull of
/// the one before (vLLM's decoder workers of one engine step do not race in the recordings).
async fn send_step(
    ctx: &CaseCtx<'_>,
    profile: &WireProfile,
    pull_of: &PullOf,
    steps: &Steps,
    k: usize,
    sides: &mut Sides,
) -> Result<(), PlayError> {
    let inbound_base = wire_count(&sides.prefillers, profile, true).await;
    for (n, (conn, m)) in steps.order_at(ctx.t, k).into_iter().enumerate() {
        if let (true, Some(base)) = (n > 0, inbound_base) {
            let until = tokio::time::Instant::now() + Duration::from_secs(2) + ctx.opts.slack;
            while tokio::time::Instant::now() < until
                && wire_count(&sides.prefillers, profile, true).await.is_some_and(|c| c < base + n)
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let Some(te) = decoder(&mut sides.decoders, conn) else { continue };
        te.send::<Done>(&Command::Pull { requests: pull_of.pulls(m) }).await?;
    }
    Ok(())
}

/// Waits until every decoder testee settled step `k`, taking the reply-keyed steps meanwhile.
async fn settle_step(
    ctx: &mut CaseCtx<'_>,
    profile: &WireProfile,
    steps: &Steps,
    k: usize,
    sides: &mut Sides,
    actions: &mut ReplyActions<'_>,
) -> Result<(), PlayError> {
    let deadline = tokio::time::Instant::now() + ctx.abort() * 2 + ctx.opts.slack;
    loop {
        // Whether every decoder settled is read before the replies below: a reply that settled a pull is in
        // the wire log by then, so the actions it triggers fire before the next step starts. Replies the
        // recording shows for the pulls so far may still be to come from our prefiller.
        let wait_replies = wire_count(&sides.prefillers, profile, false)
            .await
            .is_some_and(|n| n < steps.recorded_replies_through(ctx.t, k));
        let mut settled = true;
        for (conn, te) in sides.decoders.iter_mut() {
            let s: DecoderStatus = te.status().await?;
            settled &= decoder_settled(ctx.t, &s, conn, steps.of_conn(conn).get(k), wait_replies);
        }
        let sent = replies_sent(sides, profile).await?;
        fire(actions, sent, &mut sides.prefillers).await?;
        if settled {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let f = Finding::new(CheckId::DSettle, "the decoder did not settle its pulls in time");
            ctx.found(f.about(format!("pull {}", k + 1)));
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether decoder `conn` settled its pull `m`: no pull or exchange open beyond what vLLM's decoder left
/// waiting, and every request of the pull that has blocks has an outcome — or is one vLLM left waiting that the
/// testee says it gave up on (`unsettled`), or, for a testee that does not say, once the recorded replies have
/// all been sent (`!wait_replies`).
fn decoder_settled(
    t: &Conversation,
    s: &DecoderStatus,
    conn: &str,
    m: Option<&MooncakeXferMetadata>,
    wait_replies: bool,
) -> bool {
    let stuck = super::recorded_stuck(t, conn);
    if s.pending_pulls.unwrap_or(u64::MAX) > stuck.len() as u64 || s.open_exchanges != Some(0) {
        return false;
    }
    let done: Vec<&String> = s.finished.iter().chain(s.failed.iter().map(|x| &x.d_req_id)).collect();
    let given_up: Option<Vec<&String>> = s.unsettled.as_ref().map(|a| a.iter().map(|x| &x.d_req_id).collect());
    let Some(m) = m else { return true };
    m.req_blocks.iter().all(|(d, rb)| {
        let no_blocks = !rb.blocks.iter().any(|g| !g.is_empty());
        no_blocks
            || done.contains(&d)
            || (stuck.contains(d)
                && match &given_up {
                    Some(g) => g.contains(&d),
                    None => !wait_replies,
                })
    })
}

/// Replies sent so far: from our prefillers' wire logs, or (two testees) the requests the decoders settled.
async fn replies_sent(sides: &mut Sides, profile: &WireProfile) -> Result<usize, PlayError> {
    if let Some(n) = wire_count(&sides.prefillers, profile, false).await {
        return Ok(n);
    }
    let mut sent = 0;
    for (_, te) in sides.decoders.iter_mut() {
        let s: DecoderStatus = te.status().await?;
        sent += s.finished.len() + s.failed.len();
    }
    Ok(sent)
}

/// Messages our prefillers received (`inbound`: the pulls) or sent (the replies) so far, from their wire logs;
/// `None` when one is another testee.
async fn wire_count(prefillers: &[(String, PrefillerSide)], profile: &WireProfile, inbound: bool) -> Option<usize> {
    let mut n = 0;
    for (_, p) in prefillers {
        n += p.wire(profile).await?.iter().filter(|(i, _)| *i == inbound).count();
    }
    Some(n)
}
