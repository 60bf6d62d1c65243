//! `mooncake-conformance validate`: checks recorded traces against the spec.
//!
//! Every check has a stable id (documented in `conformance/CHECKS.md`); a finding names the trace, the event
//! (`seq`, line), the message and the path inside it.

use std::path::Path;
use std::sync::Arc;

use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::codec::{Codec, Value};
use mooncake_wire::spec::{Revision, Spec};
use serde::Serialize;

use crate::trace::{Event, HttpDir, Role, Trace, ZmqDir, ZmqEvent};

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub check: &'static str,
    pub seq: Option<u64>,
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct TraceReport {
    pub path: String,
    pub scenario: String,
    /// The project `vllm_version` is a release (or commit) of: `vLLM`, or for a pull trace its revision's
    /// project (`vllm-ascend`).
    pub project: String,
    pub vllm_version: String,
    pub revision: Option<String>,
    pub zmq_payloads: usize,
    pub http_events: usize,
    pub findings: Vec<Finding>,
}

impl TraceReport {
    pub fn ok(&self) -> bool {
        self.findings.is_empty()
    }
}

/// The revision a trace was recorded with.
pub fn revision_for(spec: &Spec, vllm_version: &str) -> Option<Arc<Revision>> {
    spec.push().for_release(vllm_version).cloned()
}

/// Which role sent the message an event carries.
pub fn sender(z: &ZmqEvent) -> Role {
    match (z.side, z.dir) {
        (side, ZmqDir::Send) => side,
        (Role::Decoder, ZmqDir::Recv) => Role::Prefiller,
        (_, ZmqDir::Recv) => Role::Decoder,
    }
}

pub fn validate_file(path: &Path) -> TraceReport {
    match Trace::load(path) {
        Ok(t) => validate(&t),
        Err(e) => TraceReport {
            path: path.display().to_string(),
            scenario: String::new(),
            project: String::new(),
            vllm_version: String::new(),
            revision: None,
            zmq_payloads: 0,
            http_events: 0,
            findings: vec![Finding { check: "TRACE-FORMAT", seq: None, line: None, message: None, detail: e }],
        },
    }
}

/// The protocol checks of `checks.rs` over a recorded trace.
fn protocol_checks(t: &Trace, rev: &Arc<Revision>, out: &mut Vec<Finding>) {
    let Ok(model) = crate::trace_model::TraceModel::new(t.clone()) else { return };
    if let Some(profile) = &model.profile {
        let xs: Vec<crate::checks::Xchg> = model
            .exchanges
            .iter()
            .map(|x| crate::checks::Xchg {
                index: x.index,
                decoder: x.decoder.clone(),
                endpoint: x.endpoint.clone(),
                request: x.request.clone(),
                replies: x.replies.iter().map(|(b, _, _)| b.clone()).collect(),
                seq: Some(x.send_seq),
                line: Some(x.send_line),
            })
            .collect();
        out.extend(crate::checks::check_exchanges(profile, &xs));
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
        findings: vec![],
    };
    if t.header.family.as_deref() == Some("pull") {
        return crate::validate_pull::validate(t, rep);
    }
    let Some(rev) = revision_for(Spec::builtin(), &t.header.vllm_version) else {
        rep.findings.push(Finding {
            check: "TRACE-REVISION",
            seq: None,
            line: Some(1),
            message: None,
            detail: format!("no spec revision covers vLLM {}", t.header.vllm_version),
        });
        return rep;
    };
    rep.revision = Some(rev.revision.clone());
    if rev.generation != t.header.generation() {
        rep.findings.push(Finding {
            check: "TRACE-REVISION",
            seq: None,
            line: Some(1),
            message: None,
            detail: format!("header says connector generation {}, {} is generation {}", t.header.generation(), rev.revision, rev.generation),
        });
    }
    let codec = Codec::builtin(&rev.revision).expect("built-in revision");
    let mut boot = BootstrapSpec::new(rev.clone()).map(|r| r.expect("built-in bootstrap models compile"));
    for ev in &t.events {
        match ev {
            Event::Zmq(z) => {
                rep.zmq_payloads += 1;
                check_zmq(&rev, &codec, z, &mut rep.findings);
            }
            Event::Http(h) => {
                rep.http_events += 1;
                let find = |detail: String| Finding { check: "HTTP-BODY", seq: Some(h.seq), line: Some(h.line), message: Some(format!("{} {}", h.method, h.path)), detail };
                let Some(b) = boot.as_mut() else {
                    rep.findings.push(Finding { check: "HTTP-ROUTE", ..find(format!("{} has no bootstrap server", rev.revision)) });
                    continue;
                };
                if b.route(&h.method, &h.path).is_none() {
                    rep.findings.push(Finding { check: "HTTP-ROUTE", ..find(format!("{} {} is not a bootstrap route", h.method, h.path)) });
                    continue;
                }
                // The exact body text must parse to the recorded body.
                let raw: Option<serde_json::Value> = if h.body_raw.is_empty() { None } else { serde_json::from_str(&h.body_raw).ok() };
                if raw.as_ref() != h.body.as_ref().filter(|b| !b.is_null()) {
                    rep.findings.push(Finding { check: "HTTP-BODY-RAW", ..find("body_raw does not parse to body".into()) });
                }
                let r = match h.dir {
                    HttpDir::Request => b.check_request(&h.method, &h.path, h.body.as_ref()),
                    HttpDir::Response => match h.status {
                        Some(s) => b.check_response(&h.method, &h.path, s, h.body.as_ref()).map(|_| ()),
                        None => Err("response without a status".into()),
                    },
                };
                if let Err(e) = r {
                    rep.findings.push(find(e));
                }
            }
        }
    }
    protocol_checks(t, &rev, &mut rep.findings);
    rep
}

fn check_zmq(rev: &Revision, codec: &Codec, z: &ZmqEvent, out: &mut Vec<Finding>) {
    let from = sender(z);
    let Some(msg) = rev.message_from(from.as_str()) else {
        out.push(Finding { check: "ZMQ-FRAMES", seq: Some(z.seq), line: Some(z.line), message: None, detail: format!("{} sends nothing in {}", from.as_str(), rev.revision) });
        return;
    };
    let find = |check: &'static str, detail: String| Finding { check, seq: Some(z.seq), line: Some(z.line), message: Some(msg.name.clone()), detail };
    // Socket type of this side.
    if let Some(sock) = rev.transport.sockets.get(z.side.as_str()) {
        if sock.socket_type != z.socket {
            out.push(find("ZMQ-SOCKET", format!("{} uses a {} socket, the spec says {}", z.side.as_str(), z.socket, sock.socket_type)));
        }
        if sock.binds != z.bound {
            out.push(find("ZMQ-SOCKET", format!("{} bound={}, the spec says binds={}", z.side.as_str(), z.bound, sock.binds)));
        }
    }
    // Frame layout as seen by this side.
    let layout = if z.side == from { &msg.frames_sent } else { &msg.frames_received };
    if z.frames.len() != layout.len() {
        out.push(find("ZMQ-FRAMES", format!("{} frames, the spec says {} ({})", z.frames.len(), layout.len(), layout.join(", "))));
        return;
    }
    let mut payload: &[u8] = &[];
    for (i, (f, name)) in z.frames.iter().zip(layout).enumerate() {
        match name.as_str() {
            "empty" if !f.is_empty() => out.push(find("ZMQ-FRAMES", format!("frame {i} should be the empty delimiter, has {} bytes", f.len()))),
            "routing_id" if f.is_empty() => out.push(find("ZMQ-FRAMES", format!("frame {i} should be a routing id, is empty"))),
            "payload" => payload = f,
            _ => {}
        }
    }
    match msg.encoding.as_str() {
        "raw" => {
            if !msg.constants.iter().any(|c| c.bytes.as_bytes() == payload) {
                let names: Vec<_> = msg.constants.iter().map(|c| c.name.as_str()).collect();
                out.push(find("ZMQ-RAW", format!("payload {:?} is none of {names:?}", String::from_utf8_lossy(payload))));
            }
        }
        _ => match codec.decode(&msg.name, payload) {
            Err(e) => out.push(find("ZMQ-DECODE", e.msgspec_message())),
            Ok(v) => match codec.encode(&msg.name, &v) {
                Ok(b) if b == payload => {}
                Ok(b) => out.push(find("ZMQ-REENCODE", format!("re-encoding differs from the recorded bytes: ours {} vs recorded {}", hex::encode(b), hex::encode(payload)))),
                Err(e) => out.push(find("ZMQ-REENCODE", e.to_string())),
            },
        },
    }
}

/// Decodes the payload of a ZMQ event as the message its direction implies, for other modules.
pub fn decode_event(rev: &Revision, codec: &Codec, z: &ZmqEvent) -> Option<(String, Value)> {
    let msg = rev.message_from(sender(z).as_str())?;
    if msg.encoding != "msgpack" {
        return None;
    }
    let payload = z.frames.last()?;
    codec.decode(&msg.name, payload).ok().map(|v| (msg.name.clone(), v))
}
