//! What a decoder sent to the runner's prefillers, against the recording (`REQUEST-*`, `ZMQ-FRAMES`,
//! `WIRE-CANONICAL`), and the protocol checks on the live conversation.

use std::collections::HashMap;

use mooncake_wire::codec::Codec;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::WireProfile;

use crate::crossver::Pairing;
use crate::play::PlayError;
use mooncake_trace::checks::check_exchanges;
use mooncake_trace::conversation::{Conversation, Exchange, Sent};
use mooncake_trace::finding::{CheckId, Finding};
use mooncake_trace::jsonl::first_difference;

/// A ROUTER wire log: (inbound, frames) in order.
type Wire = Vec<(bool, Vec<Vec<u8>>)>;

/// Compares what a decoder sent to each of the runner's prefillers (their wire logs) with the recording, and
/// runs the protocol checks on the live conversation. `sessions` maps a recorded decoder conn to the live
/// decoder's transfer-engine session; `None` for an external decoder, whose own addresses and `layout_id`
/// are mapped too (only their count and presence are compared).
pub fn compare_requests(
    t: &Conversation,
    profile: &WireProfile,
    pairing: &Pairing,
    wires: &[(String, Wire)],
    sessions: Option<&HashMap<String, String>>,
) -> Result<Vec<Finding>, PlayError> {
    let mut out = vec![];
    let mut live_xs: Vec<Exchange> = vec![];
    for (conn, wire) in wires {
        let first = live_xs.len();
        live_xs.extend(live_exchanges(profile, conn, wire, first));
        let arrived = &live_xs[first..];
        let recorded: Vec<&Exchange> =
            t.exchanges.iter().filter(|x| x.prefiller.as_deref() == Some(conn.as_str())).collect();
        if arrived.len() != recorded.len() {
            let detail = format!("{} requests arrived, vLLM's decoder sent {}", arrived.len(), recorded.len());
            out.push(Finding::new(CheckId::RequestCount, detail).about(conn.clone()));
        }
        let inbound: Vec<&Vec<Vec<u8>>> = wire.iter().filter(|(i, _)| *i).map(|(_, f)| f).collect();
        for (n, (frames, lx, rx)) in pair_with_recorded(&inbound, arrived, &recorded, sessions).into_iter().enumerate()
        {
            let msg = format!("{conn} request {}", n + 1);
            let found = compare_request(profile, pairing, frames, lx, rx, sessions)?;
            out.extend(found.into_iter().map(|f| f.about(msg.clone())));
        }
    }
    out.extend(check_exchanges(profile, &live_xs));
    Ok(out)
}

/// The live conversation of one prefiller, each payload decoded once (replies by routing id): what the
/// comparisons and the protocol checks read. Indexes start at `first`.
fn live_exchanges(profile: &WireProfile, conn: &str, wire: &Wire, first: usize) -> Vec<Exchange> {
    let mut xs = vec![];
    for frames in wire.iter().filter(|(i, _)| *i).map(|(_, f)| f) {
        let rid = frames.first().cloned().unwrap_or_default();
        let sent = Sent {
            index: first + xs.len(),
            decoder: "decoder".into(),
            endpoint: conn.to_string(),
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
        xs.push(x);
    }
    xs
}

/// Each arriving request paired with a recorded one from the same decoder (decoders pull concurrently, so
/// arrival order across decoders is not the recorded order); within one decoder, in order.
fn pair_with_recorded<'w>(
    inbound: &[&'w Vec<Vec<u8>>],
    arrived: &'w [Exchange],
    recorded: &[&'w Exchange],
    sessions: Option<&HashMap<String, String>>,
) -> Vec<(&'w Vec<Vec<u8>>, &'w Exchange, &'w Exchange)> {
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
    pairs
}

/// One live request (`frames`, decoded as `lx`) against its recorded one `rx`.
fn compare_request(
    profile: &WireProfile,
    pairing: &Pairing,
    frames: &[Vec<u8>],
    lx: &Exchange,
    rx: &Exchange,
    sessions: Option<&HashMap<String, String>>,
) -> Result<Vec<Finding>, PlayError> {
    let mut out = vec![];
    if frames.len() != 2 {
        let detail = format!("{} frames at the ROUTER; a decoder sends exactly one frame", frames.len());
        out.push(Finding::new(CheckId::ZmqFrames, detail));
    }
    // [routing_id, payload]: any other frame was already reported.
    let bytes = &lx.request.bytes;
    let mut got = match lx.request.decoded.clone().expect("decoded with the trace's profile") {
        Err(e) => {
            out.push(Finding::new(CheckId::RequestDecode, e.msgspec_message()));
            return Ok(out);
        }
        Ok(got) => got,
    };
    if let Some(detail) = pairing.non_canonical_for_testee("MooncakeXferMetadata", bytes) {
        out.push(Finding::new(CheckId::WireCanonical, detail));
    }
    let want = rx.request.value().ok_or(PlayError::RecordedRequestUndecodable)?;
    // The decoder's own address and transfer-engine port differ per run.
    let live_session = format!("{}:{}", got.remote_hostname, got.remote_port);
    match sessions {
        Some(sessions) if sessions.get(&rx.decoder) != Some(&live_session) => {
            let detail = format!(
                "remote_hostname:remote_port {live_session} is not the decoder's transfer-engine endpoint {:?}",
                sessions.get(&rx.decoder)
            );
            out.push(Finding::new(CheckId::RequestSession, detail));
        }
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
    if let (Ok(gv), Ok(wv)) = (profile.metadata_value(&got), profile.metadata_value(&want)) {
        let (gj, wj) = (Codec::to_json(&gv), Codec::to_json(&wv));
        if !mooncake_trace::jsonl::eq_ordered(&gj, &wj) {
            out.push(Finding::new(CheckId::RequestDiff, first_difference(&gj, &wj, "$").unwrap_or_default()));
        }
    }
    Ok(out)
}
