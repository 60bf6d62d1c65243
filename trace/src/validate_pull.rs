//! `validate` for traces of the pull family (header `family = "pull"`, `spec/pull/*.toml`): the socket and frame
//! checks of push traces, plus pairing — a side that sends several messages (the decoder's `GetMetaMsg` and
//! `DoneRecvingMsg` tuples) is matched by the payload, and every reply must be the `answered_by` of the request
//! its connection sent last (metadata for a query, the raw `ACK` for a completion).
//!
//! Check ids are those of `conformance/CHECKS.md`, plus `PULL-PAIRING`.

use std::collections::HashMap;
use std::sync::Arc;

use mooncake_wire::codec::Codec;
use mooncake_wire::spec::{Revision, TransportMessage};

use crate::finding::{CheckId, Finding, TraceReport};
use crate::trace::{sender, Event, Trace, ZmqEvent};

/// The checks of a pull-family trace, read with `rev` (the pull revision its header resolves to: the one covering
/// its `vllm_version`, a vllm-ascend release, or for an unreleased revision the one named
/// `<project>-<vllm_version>`, `main@3e486e317`); `rep` has the revision set.
pub(crate) fn validate(t: &Trace, rev: Arc<Revision>, mut rep: TraceReport) -> TraceReport {
    rep.project = match rev.project() {
        "vllm" => "vLLM".into(),
        p => p.into(),
    };
    if rev.generation != t.header.generation() {
        let detail = format!(
            "header says connector generation {}, {} is generation {}",
            t.header.generation(),
            rev.revision,
            rev.generation
        );
        rep.findings.push(Finding::new(CheckId::TraceRevision, detail).at_line(1));
    }
    let codec = Codec::builtin(&rev.revision).expect("built-in revision");
    // Per (conn, endpoint): the request the connection sent last, still unanswered.
    let mut pending: HashMap<(String, String), String> = HashMap::new();
    for ev in &t.events {
        match ev {
            Event::Zmq(z) => {
                rep.zmq_payloads += 1;
                if let Some(msg) = check_event(&rev, &codec, z, &mut rep.findings) {
                    pair(&rev, z, &msg, &mut pending, &mut rep.findings);
                }
            }
            Event::Http(h) => {
                rep.http_events += 1;
                rep.findings.push(
                    Finding::new(CheckId::HttpRoute, format!("{} has no HTTP server", rev.revision))
                        .at(Some(h.seq), Some(h.line)),
                );
            }
        }
    }
    rep
}

/// Socket, frames and payload of one event; the message it carries, when one fits.
fn check_event(rev: &Revision, codec: &Codec, z: &ZmqEvent, out: &mut Vec<Finding>) -> Option<String> {
    let from = sender(z);
    let find = |check: CheckId, detail: String| Finding::new(check, detail).at(Some(z.seq), Some(z.line));
    let candidates: Vec<&TransportMessage> =
        rev.transport.messages.iter().filter(|m| m.from == from.as_str()).collect();
    if candidates.is_empty() {
        out.push(find(CheckId::ZmqFrames, format!("{} sends nothing in {}", from.as_str(), rev.revision)));
        return None;
    }
    if let Some(sock) = rev.transport.sockets.get(z.side.as_str()) {
        if sock.socket_type != z.socket || sock.binds != z.bound {
            let detail = format!(
                "{}: a {} socket with bound={}, the spec says {} with binds={}",
                z.side.as_str(),
                z.socket,
                z.bound,
                sock.socket_type,
                sock.binds
            );
            out.push(find(CheckId::ZmqSocket, detail));
        }
    }
    // Every message of one sender has the same frame layout on each side.
    let m0 = candidates[0];
    let layout = if z.side == from { &m0.frames_sent } else { &m0.frames_received };
    let payload = check_frames(z, layout, &find, out)?;
    match identify(codec, z, &candidates, payload, out) {
        Ok(message) => Some(message),
        Err(errors) => {
            let detail = format!("the payload is none of {}'s messages — {}", from.as_str(), errors.join("; "));
            out.push(find(CheckId::ZmqDecode, detail));
            None
        }
    }
}

/// The payload frame of an event whose frames should be `layout` (frame names: `empty`, `routing_id`,
/// `payload`; no payload frame reads as an empty payload), with a `ZMQ-FRAMES` finding for each frame that is
/// not what its place says; `None` when there are not as many frames as the layout has. `find` makes a finding
/// of the event. Push traces check their frames with it too.
pub(crate) fn check_frames<'a>(
    z: &'a ZmqEvent,
    layout: &[String],
    find: &dyn Fn(CheckId, String) -> Finding,
    out: &mut Vec<Finding>,
) -> Option<&'a [u8]> {
    if z.frames.len() != layout.len() {
        out.push(find(
            CheckId::ZmqFrames,
            format!("{} frames, the spec says {} ({})", z.frames.len(), layout.len(), layout.join(", ")),
        ));
        return None;
    }
    let mut payload: &[u8] = &[];
    for (i, (f, name)) in z.frames.iter().zip(layout).enumerate() {
        match name.as_str() {
            "empty" if !f.is_empty() => out.push(find(
                CheckId::ZmqFrames,
                format!("frame {i} should be the empty delimiter, has {} bytes", f.len()),
            )),
            "routing_id" if f.is_empty() => {
                out.push(find(CheckId::ZmqFrames, format!("frame {i} should be a routing id, is empty")))
            }
            "payload" => payload = f,
            _ => {}
        }
    }
    Some(payload)
}

/// Which of its sender's messages (`candidates`) a payload is: the first that is a raw constant equal to it,
/// or a msgpack value that decodes and re-encodes to the same bytes. One that decodes but re-encodes to other
/// bytes is taken too, with a `ZMQ-REENCODE` finding. `Err`: why each candidate is not it.
fn identify(
    codec: &Codec,
    z: &ZmqEvent,
    candidates: &[&TransportMessage],
    payload: &[u8],
    out: &mut Vec<Finding>,
) -> Result<String, Vec<String>> {
    let mut errors = vec![];
    let decode = |message: &str| {
        crate::conversation::decode_count::count(Some(z.seq));
        codec.decode(message, payload)
    };
    for m in candidates {
        match m.encoding.as_str() {
            "raw" if m.constants.iter().any(|c| c.bytes.as_bytes() == payload) => return Ok(m.name.clone()),
            "raw" => errors.push(format!(
                "{}: none of {:?}",
                m.name,
                m.constants.iter().map(|c| c.name.as_str()).collect::<Vec<_>>()
            )),
            _ => match decode(&m.name) {
                Ok(v) => match codec.encode(&m.name, &v) {
                    Ok(b) if b == payload => return Ok(m.name.clone()),
                    Ok(b) => {
                        let f = Finding::new(CheckId::ZmqReencode, reencoding_differs(&b, payload));
                        out.push(f.at(Some(z.seq), Some(z.line)).about(&m.name));
                        return Ok(m.name.clone());
                    }
                    Err(e) => errors.push(format!("{}: {e}", m.name)),
                },
                Err(e) => errors.push(format!("{}: {}", m.name, e.msgspec_message())),
            },
        }
    }
    Err(errors)
}

/// The detail of a `ZMQ-REENCODE` finding whose re-encoding (`ours`) is not the bytes recorded.
pub(crate) fn reencoding_differs(ours: &[u8], recorded: &[u8]) -> String {
    format!(
        "re-encoding differs from the recorded bytes: ours {} vs recorded {}",
        hex::encode(ours),
        hex::encode(recorded)
    )
}

/// A reply must answer the request its connection sent last; a request must not overtake an unanswered one.
fn pair(
    rev: &Revision,
    z: &ZmqEvent,
    msg: &str,
    pending: &mut HashMap<(String, String), String>,
    out: &mut Vec<Finding>,
) {
    let Some(m) = rev.message(msg) else { return };
    let find = |detail: String| Finding::new(CheckId::PullPairing, detail).at(Some(z.seq), Some(z.line)).about(msg);
    // Pair on the decoder's own events (its REQ connection is one conversation); the prefiller's ROUTER events
    // interleave every decoder and are checked by decoding only.
    if z.side.as_str() != "decoder" {
        return;
    }
    let key = (z.conn.clone(), z.endpoint.clone());
    if m.answered_by.is_some() {
        if let Some(prev) = pending.insert(key, msg.to_string()) {
            out.push(find(format!("sent before {prev} was answered")));
        }
    } else {
        match pending.remove(&key) {
            None => out.push(find("a reply to no request".into())),
            Some(req) => {
                let want = rev.message(&req).and_then(|r| r.answered_by.clone()).unwrap_or_default();
                if want != msg {
                    out.push(find(format!("{req} is answered by {want}, not {msg}")));
                }
            }
        }
    }
}
