//! `RUNNER-DEVIATION`: whether the runner's own prefiller(s) behaved as the recorded ones did — every recorded
//! reply sent and no other (as a multiset, the live decoder's session and layout id mapped), and the recorded
//! transfer-engine writes made (session, descriptors, bytes). A decoder case whose runner side deviated proves
//! nothing about the decoder: it is broken (`error`), not a pass or a fail — unless the decoder under test
//! caused the deviation (its requests differ from the recording, or its transfer-engine target refused writes
//! the scenario did not fail), which its own findings then report.

use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::WireProfile;
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse};

use crate::counterpart::OwnStatus;
use crate::play::prefiller_side::split_heartbeats;
use crate::play::{CaseCtx, PrefillerSide};
use mooncake_trace::conversation::Conversation;
use mooncake_trace::finding::CheckId;
use mooncake_trace::reply::show_reply;
use mooncake_trace::trace::ZmqDir;

/// Findings about what the decoder sent: when one is there, the runner's replies differing from the recording
/// follow from it.
const DECODER_SENT: [CheckId; 5] =
    [CheckId::RequestCount, CheckId::RequestDiff, CheckId::RequestDecode, CheckId::RequestSession, CheckId::ZmqFrames];

/// Recorded values → the live ones a reply or a write carries.
#[derive(Default)]
pub(super) struct LiveMap {
    /// Recorded decoder session (`host:port`) → the live decoder's.
    pub(super) sessions: Vec<(String, String)>,
    /// Recorded layout id → the live decoder's (a reply echoes the id of the request it answers).
    pub(super) layout_ids: Vec<(WireInt, WireInt)>,
}

impl LiveMap {
    /// From the requests that reached the runner's prefiller, paired in order with the recorded ones: all
    /// `replay --listen` knows of an external decoder.
    pub(super) fn from_requests(t: &Conversation, profile: &WireProfile, status: &OwnStatus) -> LiveMap {
        let mut map = LiveMap::default();
        let recorded: Vec<MooncakeXferMetadata> =
            t.exchanges.iter().filter_map(|x| x.request.value().cloned()).collect();
        let live = live_requests(profile, status);
        for (r, l) in recorded.iter().zip(&live) {
            let (a, b) = (session_of(r), session_of(l));
            if !map.sessions.iter().any(|(x, _)| *x == a) {
                map.sessions.push((a, b));
            }
            if !map.layout_ids.iter().any(|(x, _)| *x == r.layout_id) {
                map.layout_ids.push((r.layout_id, l.layout_id));
            }
        }
        map
    }

    /// From the decoder testees `run` started: each recorded decoder's session and layout id → its live
    /// session (`sessions`, by conn) and the layout id its requests carry (a testee at a revision without
    /// layout caching sends none).
    fn from_decoders(
        t: &Conversation,
        profile: &WireProfile,
        status: &OwnStatus,
        sessions: &std::collections::HashMap<String, String>,
    ) -> LiveMap {
        let mut map = LiveMap::default();
        let live = live_requests(profile, status);
        for d in &t.decoders {
            let (Some(req), Some(session)) = (&d.layout_request, sessions.get(&d.conn)) else { continue };
            map.sessions.push((session_of(req), session.clone()));
            let sent = live.iter().find(|l| session_of(l) == *session);
            if let Some(l) = sent.filter(|_| !map.layout_ids.iter().any(|(x, _)| *x == req.layout_id)) {
                map.layout_ids.push((req.layout_id, l.layout_id));
            }
        }
        map
    }
}

/// The pulls that reached the runner's prefillers, decoded, in the order they arrived.
fn live_requests(profile: &WireProfile, status: &OwnStatus) -> Vec<MooncakeXferMetadata> {
    let inbound = status.wire.iter().filter(|(i, _)| *i);
    inbound.filter_map(|(_, f)| f.get(1).and_then(|b| profile.decode_metadata(b).ok())).collect()
}

/// A pull's transfer-engine session, `host:port`.
fn session_of(m: &MooncakeXferMetadata) -> String {
    format!("{}:{}", m.remote_hostname, m.remote_port)
}

/// How the runner's prefillers (`status`: their wire logs and writes, merged) deviated from the recording, one
/// message per deviation. `Writes::Descriptors` compares the descriptor count of each write too;
/// `Writes::Bytes` only its session and bytes (a setup derived from the trace may pair blocks into other runs).
pub(super) fn deviations(
    t: &Conversation,
    profile: &WireProfile,
    status: &OwnStatus,
    map: &LiveMap,
    writes: Writes,
) -> Vec<String> {
    let mut out = vec![];
    let mut live: Vec<Option<MooncakeXferResponse>> = status
        .wire
        .iter()
        .filter(|(i, _)| !*i)
        .map(|(_, f)| f.last().and_then(|b| profile.decode_response(b).ok()))
        .collect();
    for (k, x) in t.exchanges.iter().enumerate() {
        for (j, reply) in x.replies.iter().enumerate() {
            let Some(want) = reply.payload.value().map(|w| mapped(w, map)) else { continue };
            match live.iter().position(|l| l.as_ref().is_some_and(|l| mooncake_trace::checks::same_reply(l, &want))) {
                Some(i) => live[i] = None,
                None => out.push(format!(
                    "the runner's prefiller never sent the recorded reply {} of exchange {} ({}); it sent {}",
                    j + 1,
                    k + 1,
                    show_reply(&want),
                    live.iter().flatten().map(show_reply).collect::<Vec<_>>().join(", ")
                )),
            }
        }
    }
    // A reply the recorded prefiller sent but its decoder never received (vLLM 0.16.0's second FINISH after the
    // first, to a decoder that had stopped reading) is not in any exchange, yet the runner's prefiller rightly
    // sends it too.
    let unreceived = recorded_sends(t, profile);
    for l in live.iter_mut() {
        if l.as_ref().is_some_and(|l| unreceived.iter().any(|r| mooncake_trace::checks::same_reply(l, &mapped(r, map))))
        {
            *l = None;
        }
    }
    let extra: Vec<String> = live.iter().flatten().map(show_reply).collect();
    if !extra.is_empty() {
        out.push(format!("the runner's prefiller sent replies the recording does not have: {}", extra.join(", ")));
    }
    out.extend(write_deviation(t, status, map, writes));
    out
}

/// What of the runner's transfer-engine writes [`deviations`] compares with the recorded calls.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Writes {
    /// Session, descriptor count and bytes of each write.
    Descriptors,
    /// Session and bytes of each write.
    Bytes,
}

/// Every reply the recorded prefillers sent, as the trace's prefiller side logged it.
fn recorded_sends(t: &Conversation, profile: &WireProfile) -> Vec<MooncakeXferResponse> {
    let sent = t.trace.zmq().filter(|z| z.side == crate::role::Role::Prefiller && z.dir == ZmqDir::Send);
    sent.filter_map(|z| profile.decode_response(z.frames.last()?).ok()).collect()
}

/// A recorded reply as the live decoder should get it: sessions in its error message and its layout id mapped.
fn mapped(want: &MooncakeXferResponse, map: &LiveMap) -> MooncakeXferResponse {
    let mut want = want.clone();
    if let Some(m) = &mut want.err_msg {
        for (a, b) in &map.sessions {
            *m = m.replace(a, b);
        }
    }
    if let Some((_, l)) = map.layout_ids.iter().find(|(r, _)| *r == want.layout_id) {
        want.layout_id = *l;
    }
    want
}

/// The runner's transfer-engine writes (session mapped back, descriptors, bytes) against the recorded calls,
/// when the trace has them.
fn write_deviation(t: &Conversation, status: &OwnStatus, map: &LiveMap, writes: Writes) -> Option<String> {
    if !crate::play::applies(&t.trace.header, CheckId::TeCalls) {
        return None;
    }
    let back = |s: &str| map.sessions.iter().find(|(_, b)| b == s).map(|(a, _)| a.clone()).unwrap_or(s.to_string());
    let show = |(s, n, b): &(String, u64, u64)| match writes {
        Writes::Descriptors => format!("({s}, {n}, {b})"),
        Writes::Bytes => format!("({s}, {b})"),
    };
    let n = |n: u64| if writes == Writes::Descriptors { n } else { 0 };
    let mut got: Vec<(String, u64, u64)> =
        status.writes.iter().map(|(s, d, b, _)| (back(s), n(*d as u64), *b)).collect();
    let mut want: Vec<(String, u64, u64)> =
        t.trace.header.transfer_engine_calls.iter().map(|c| (c.session.clone(), n(c.n), c.bytes)).collect();
    got.sort();
    want.sort();
    let what = if writes == Writes::Descriptors { "session, descriptors, bytes" } else { "session, bytes" };
    let list = |v: &[(String, u64, u64)]| v.iter().map(show).collect::<Vec<_>>().join(", ");
    (got != want).then(|| {
        format!(
            "the runner's transfer-engine writes ({what}) [{}] differ from the recorded [{}]",
            list(&got),
            list(&want)
        )
    })
}

/// `run`'s decoder case: the runner's own prefillers (not prefiller testees) against the recording, once the
/// decoders are done. `sessions`: each recorded decoder conn's live transfer-engine session. A deviation makes
/// the case broken, unless the decoder caused it (a finding about what it sent, or more refused writes than
/// the scenario failed on purpose): then the case fails on the decoder's findings and the deviation is noted.
pub(super) async fn check_own(
    ctx: &CaseCtx<'_>,
    profile: &WireProfile,
    prefillers: &[(String, PrefillerSide)],
    sessions: &std::collections::HashMap<String, String>,
) {
    let mut merged = OwnStatus::default();
    for (_, p) in prefillers {
        let PrefillerSide::Ours(own) = p else { return };
        let Ok(s) = own.status().await else { return };
        merged.wire.extend(split_heartbeats(profile, s.wire).0);
        merged.writes.extend(s.writes);
    }
    let map = LiveMap::from_decoders(ctx.t, profile, &merged, sessions);
    // A decoder case checks what landed, not how the runner's own writes were cut into descriptors.
    let found = deviations(ctx.t, profile, &merged, &map, Writes::Bytes);
    if found.is_empty() {
        return;
    }
    let refused = merged.writes.iter().filter(|w| w.3 != 0).count();
    if ctx.findings.iter().any(|f| DECODER_SENT.contains(&f.check)) || refused > ctx.scenario.fail_transfers {
        let why = "it follows from what the decoder under test sent or refused (its findings)";
        ctx.sink.not_checked("RUNNER-DEVIATION", format!("{why}: {}", found.join("; ")));
    } else {
        found.into_iter().for_each(|d| ctx.sink.broken(d));
    }
}
