//! `mooncake-conformance validate`: checks recorded traces against the spec.
//!
//! Every check has a stable id (documented in `conformance/CHECKS.md`); a finding names the trace, the event
//! (`seq`, line), the message and the path inside it.

use std::path::Path;
use std::sync::Arc;

use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::codec::{Codec, Value};
use mooncake_wire::spec::{Revision, Spec};

use crate::finding::{CheckId, Finding, TraceReport};
use crate::trace::{revision_for, sender, Event, HttpDir, Trace, ZmqEvent};

pub fn validate_file(path: &Path) -> TraceReport {
    validate_input(&crate::jsonl::Input::File(path.to_path_buf()))
}

/// [`validate_file`] for a file on disk or bundled into the binary.
pub fn validate_input(input: &crate::jsonl::Input) -> TraceReport {
    match Trace::load_input(input) {
        Ok(t) => validate(&t),
        Err(e) => TraceReport {
            path: input.name(),
            scenario: String::new(),
            project: String::new(),
            vllm_version: String::new(),
            revision: None,
            zmq_payloads: 0,
            http_events: 0,
            unobserved: vec![],
            findings: vec![Finding { check: CheckId::TraceFormat, seq: None, line: None, message: None, detail: e }],
        },
    }
}

/// The protocol checks of `checks.rs` over a recorded trace.
fn protocol_checks(t: &Trace, rev: &Arc<Revision>, out: &mut Vec<Finding>) {
    let Ok(model) = crate::trace_model::TraceModel::new(t.clone()) else { return };
    if let Some(profile) = &model.profile {
        out.extend(crate::checks::check_exchanges(profile, &model.exchanges));
    }
    if let Some(Ok(spec)) = BootstrapSpec::new(rev.clone()) {
        let log: Vec<crate::checks::HttpX> = model
            .http
            .iter()
            .filter_map(|(req, resp)| {
                let resp = resp.as_ref()?;
                Some(crate::checks::HttpX {
                    method: req.method.clone(),
                    path: req.path.clone(),
                    request: req.body.clone(),
                    status: resp.status?,
                    response: resp.body.clone(),
                    seq: Some(resp.seq),
                    line: Some(resp.line),
                })
            })
            .collect();
        out.extend(crate::checks::check_http(spec, &log));
    }
}

pub fn validate(t: &Trace) -> TraceReport {
    let mut rep = TraceReport {
        path: t.path.clone(),
        scenario: t.header.scenario.clone(),
        project: "vLLM".into(),
        vllm_version: t.header.vllm_version.clone(),
        revision: None,
        zmq_payloads: 0,
        http_events: 0,
        unobserved: t.header.unobserved.clone(),
        findings: vec![],
    };
    if t.events.is_empty() {
        rep.findings.push(Finding {
            check: CheckId::TraceEmpty,
            seq: None,
            line: Some(1),
            message: None,
            detail: "no events after the header line: nothing to check".into(),
        });
        return rep;
    }
    if t.header.family.as_deref() == Some("pull") {
        return crate::validate_pull::validate(t, rep);
    }
    let rev = match revision_for(Spec::builtin(), &t.header.vllm_version) {
        Ok(r) => r,
        Err(e) => {
            rep.findings.push(Finding {
                check: CheckId::TraceRevision,
                seq: None,
                line: Some(1),
                message: None,
                detail: format!("vllm_version: {e}"),
            });
            return rep;
        }
    };
    rep.revision = Some(rev.revision.clone());
    if rev.generation != t.header.generation() {
        rep.findings.push(Finding {
            check: CheckId::TraceRevision,
            seq: None,
            line: Some(1),
            message: None,
            detail: format!(
                "header says connector generation {}, {} is generation {}",
                t.header.generation(),
                rev.revision,
                rev.generation
            ),
        });
    }
    let mut checker = EventChecker::new(rev.clone());
    for ev in &t.events {
        match ev {
            Event::Zmq(_) => rep.zmq_payloads += 1,
            Event::Http(_) => rep.http_events += 1,
        }
        rep.findings.extend(checker.check(ev));
    }
    protocol_checks(t, &rev, &mut rep.findings);
    rep
}

/// The checks of one event on its own (socket, frames, decoding and re-encoding of a ZeroMQ payload; route
/// and bodies of an HTTP event): what `validate` runs on every event of a trace, and the tap on every event
/// as it happens.
pub struct EventChecker {
    rev: Arc<Revision>,
    codec: Arc<Codec>,
    boot: Option<BootstrapSpec>,
}

impl EventChecker {
    pub fn new(rev: Arc<Revision>) -> EventChecker {
        let codec = Codec::builtin(&rev.revision).expect("built-in revision");
        let boot = BootstrapSpec::new(rev.clone()).map(|r| r.expect("built-in bootstrap models compile"));
        EventChecker { rev, codec, boot }
    }

    pub fn revision(&self) -> &Arc<Revision> {
        &self.rev
    }

    pub fn check(&mut self, ev: &Event) -> Vec<Finding> {
        let mut out = vec![];
        match ev {
            Event::Zmq(z) => check_zmq(&self.rev, &self.codec, z, &mut out),
            Event::Http(h) => {
                let find = |detail: String| Finding {
                    check: CheckId::HttpBody,
                    seq: Some(h.seq),
                    line: Some(h.line),
                    message: Some(format!("{} {}", h.method, h.path)),
                    detail,
                };
                let Some(b) = self.boot.as_mut() else {
                    out.push(Finding {
                        check: CheckId::HttpRoute,
                        ..find(format!("{} has no bootstrap server", self.rev.revision))
                    });
                    return out;
                };
                if b.route(&h.method, &h.path).is_none() {
                    out.push(Finding {
                        check: CheckId::HttpRoute,
                        ..find(format!("{} {} is not a bootstrap route", h.method, h.path))
                    });
                    return out;
                }
                // The exact body text must parse to the recorded body.
                let raw: Option<serde_json::Value> =
                    if h.body_raw.is_empty() { None } else { serde_json::from_str(&h.body_raw).ok() };
                if raw.as_ref() != h.body.as_ref().filter(|b| !b.is_null()) {
                    out.push(Finding { check: CheckId::HttpBodyRaw, ..find("body_raw does not parse to body".into()) });
                }
                let r = match h.dir {
                    HttpDir::Request => b.check_request(&h.method, &h.path, h.body.as_ref()).map_err(|e| e.to_string()),
                    HttpDir::Response => match h.status {
                        Some(s) => b
                            .check_response(&h.method, &h.path, s, h.body.as_ref())
                            .map(|_| ())
                            .map_err(|e| e.to_string()),
                        None => Err("response without a status".to_string()),
                    },
                };
                if let Err(e) = r {
                    out.push(find(e));
                }
            }
        }
        out
    }
}

fn check_zmq(rev: &Revision, codec: &Codec, z: &ZmqEvent, out: &mut Vec<Finding>) {
    let from = sender(z);
    let Some(msg) = rev.message_from(from.as_str()) else {
        out.push(Finding {
            check: CheckId::ZmqFrames,
            seq: Some(z.seq),
            line: Some(z.line),
            message: None,
            detail: format!("{} sends nothing in {}", from.as_str(), rev.revision),
        });
        return;
    };
    let find = |check: CheckId, detail: String| Finding {
        check,
        seq: Some(z.seq),
        line: Some(z.line),
        message: Some(msg.name.clone()),
        detail,
    };
    // Socket type of this side.
    if let Some(sock) = rev.transport.sockets.get(z.side.as_str()) {
        if sock.socket_type != z.socket {
            out.push(find(
                CheckId::ZmqSocket,
                format!("{} uses a {} socket, the spec says {}", z.side.as_str(), z.socket, sock.socket_type),
            ));
        }
        if sock.binds != z.bound {
            out.push(find(
                CheckId::ZmqSocket,
                format!("{} bound={}, the spec says binds={}", z.side.as_str(), z.bound, sock.binds),
            ));
        }
    }
    // Frame layout as seen by this side.
    let layout = if z.side == from { &msg.frames_sent } else { &msg.frames_received };
    if z.frames.len() != layout.len() {
        out.push(find(
            CheckId::ZmqFrames,
            format!("{} frames, the spec says {} ({})", z.frames.len(), layout.len(), layout.join(", ")),
        ));
        return;
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
    match msg.encoding.as_str() {
        "raw" => {
            if !msg.constants.iter().any(|c| c.bytes.as_bytes() == payload) {
                let names: Vec<_> = msg.constants.iter().map(|c| c.name.as_str()).collect();
                out.push(find(
                    CheckId::ZmqRaw,
                    format!("payload {:?} is none of {names:?}", String::from_utf8_lossy(payload)),
                ));
            }
        }
        _ => match spec_decode(codec, &msg.name, payload) {
            Err(e) => out.push(find(CheckId::ZmqDecode, e.msgspec_message())),
            Ok(v) => match codec.encode(&msg.name, &v) {
                Ok(b) if b == payload => {}
                Ok(b) => out.push(find(
                    CheckId::ZmqReencode,
                    format!(
                        "re-encoding differs from the recorded bytes: ours {} vs recorded {}",
                        hex::encode(b),
                        hex::encode(payload)
                    ),
                )),
                Err(e) => out.push(find(CheckId::ZmqReencode, e.to_string())),
            },
        },
    }
}

/// The per-event decode of a payload with the spec codec (once per ZeroMQ payload of a trace).
fn spec_decode(codec: &Codec, message: &str, payload: &[u8]) -> Result<Value, mooncake_wire::codec::DecodeError> {
    #[cfg(test)]
    tests::SPEC_DECODES.with(|d| d.set(d.get() + 1));
    codec.decode(message, payload)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::trace::Role;

    thread_local! {
        /// Spec-codec decodes on this thread so far (`spec_decode`).
        pub(super) static SPEC_DECODES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn traces(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                traces(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }

    /// `validate` decodes each payload of a trace once: the per-event checks each ZeroMQ payload with the
    /// spec codec, the conversation each payload a decoder sent or received with the revision's profile —
    /// and the protocol checks none (they read the conversation's messages).
    #[test]
    fn validate_decodes_each_payload_once() {
        let mut files = vec![];
        traces(&Path::new(env!("CARGO_MANIFEST_DIR")).join("traces"), &mut files);
        files.sort();
        let (mut checked, mut typed_total) = (0, 0);
        for f in &files {
            let t = Trace::load(f).unwrap();
            let (typed0, spec0) = (crate::conversation::decodes(), SPEC_DECODES.with(|d| d.get()));
            let rep = validate(&t);
            let (typed, spec) = (crate::conversation::decodes() - typed0, SPEC_DECODES.with(|d| d.get()) - spec0);
            assert!(rep.ok(), "{}: {:?}", f.display(), rep.findings);
            let rev = revision_for(Spec::builtin(), &t.header.vllm_version).unwrap();
            let msgpack = |z: &&ZmqEvent| rev.message_from(sender(z).as_str()).is_some_and(|m| m.encoding == "msgpack");
            assert_eq!(spec, t.zmq().filter(msgpack).count(), "{}: spec-codec decodes", f.display());
            assert_eq!(spec, rep.zmq_payloads - t.zmq().filter(|z| !msgpack(z)).count());
            // The conversation: every request and reply of the decoders, once (generation 1 has no profile).
            let decoder_side = t.zmq().filter(|z| z.side == Role::Decoder).count();
            let model = crate::trace_model::TraceModel::new(t.clone()).unwrap();
            let in_conversation: usize = model.exchanges.iter().map(|x| 1 + x.replies.len()).sum();
            if model.profile.is_some() {
                assert_eq!(in_conversation, decoder_side, "{}", f.display());
                assert_eq!(typed, decoder_side, "{}: typed decodes, one per decoder-side payload", f.display());
                checked += 1;
                typed_total += typed;
            } else {
                assert_eq!(typed, 0, "{}", f.display());
            }
        }
        assert!(checked > 100 && typed_total > 200, "{checked} traces, {typed_total} payloads");
    }

    /// The protocol checks hold a revision's rules, not its codec: nothing in them decodes.
    #[test]
    fn the_protocol_checks_decode_nothing() {
        let code: String = include_str!("checks.rs")
            .lines()
            .map(|l| l.find("//").map_or(l, |i| &l[..i]))
            .collect::<Vec<_>>()
            .join("\n");
        for call in ["decode_metadata", "decode_response", "decode(", "decode_with", "Codec", "Payload::"] {
            assert!(!code.contains(call), "checks.rs calls {call}");
        }
    }
}
