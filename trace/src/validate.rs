//! `mooncake-conformance validate`: checks recorded traces against the spec.
//!
//! Every check has a stable id (documented in `conformance/CHECKS.md`); a finding names the trace, the event
//! (`seq`, line), the message and the path inside it.

use std::path::Path;
use std::sync::Arc;

use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::codec::Codec;
use mooncake_wire::proto::WireProfile;
use mooncake_wire::spec::{Revision, Spec, TransportMessage};

use crate::conversation::{decode_count, Conversation, Decoded, Reading};
use crate::finding::{CheckId, Finding, TraceReport};
use crate::trace::{revision_in, sender, Event, HttpDir, Trace, ZmqEvent};
use crate::validate_pull::{check_frames, reencoding_differs};

/// Validates the trace file at `path`; an unreadable or malformed file is a finding of the report, not an error.
pub fn validate_file(path: &Path) -> TraceReport {
    validate_input(&crate::jsonl::Input::File(path.to_path_buf()))
}

/// [`validate_file`] for a file on disk or bundled into the binary.
pub fn validate_input(input: &crate::jsonl::Input) -> TraceReport {
    match Trace::load_input(input) {
        Ok(t) => validate(t),
        Err(e) => TraceReport {
            path: input.name(),
            scenario: String::new(),
            project: String::new(),
            vllm_version: String::new(),
            revision: None,
            zmq_payloads: 0,
            http_events: 0,
            unobserved: vec![],
            findings: vec![Finding::new(CheckId::TraceFormat, e.to_string())],
        },
    }
}

/// The protocol checks of `checks.rs` over the conversation of a recorded trace.
fn protocol_checks(c: &Conversation, out: &mut Vec<Finding>) {
    if let Some(profile) = &c.profile {
        out.extend(crate::checks::check_exchanges(profile, &c.exchanges));
        out.extend(crate::checks::check_heartbeats(profile, &c.heartbeats));
    }
    if let Some(Ok(spec)) = BootstrapSpec::new(c.revision.clone()) {
        let log: Vec<crate::checks::HttpX> = c
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

/// Validates a trace: the checks of each event ([`EventChecker`]), then the protocol checks of its
/// conversation. Each ZeroMQ payload is decoded once: those of the decoders' exchanges by the conversation
/// (whose decode the per-event checks read), the others by the per-event checks.
pub fn validate(t: Trace) -> TraceReport {
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
    if let Some(name) = &t.header.implementation {
        rep.project = name.clone();
        rep.vllm_version = t.header.implementation_version.clone().unwrap_or_default();
    }
    if t.events.is_empty() {
        rep.findings
            .push(Finding::new(CheckId::TraceEmpty, "no events after the header line: nothing to check").at_line(1));
        return rep;
    }
    // One resolution for both families: the pull family's own, every other header the push family's.
    let pull = t.header.family.as_deref() == Some("pull");
    if pull {
        // Which project `vllm_version` belongs to is known only from the revision that covers it.
        rep.project = "pull".into();
    }
    let rev = match revision_in(Spec::builtin(), if pull { "pull" } else { "push" }, &t.header) {
        Ok(r) => r,
        Err(e) => {
            rep.findings
                .push(Finding::new(CheckId::TraceRevision, format!("{}: {e}", t.header.revision_field())).at_line(1));
            return rep;
        }
    };
    rep.revision = Some(rev.revision.clone());
    if pull {
        return crate::validate_pull::validate(&t, rev, rep);
    }
    let c = Conversation::with_revision(t, rev);
    let (zmq, http) = c.trace.events.iter().fold((0, 0), |(z, h), ev| match ev {
        Event::Zmq(_) => (z + 1, h),
        Event::Http(_) => (z, h + 1),
    });
    (rep.zmq_payloads, rep.http_events) = (zmq, http);
    rep.findings.extend(conversation_findings(&c));
    rep
}

/// A trace that does not pass `validate`, refused by the commands that play it: what it would set up is not
/// what its header says (a header relabelled to another release, payloads that are not its revision's).
#[derive(Debug, thiserror::Error)]
#[error("{name}: does not validate ({count} finding{}; the first: {first}); `mooncake-conformance validate {name}` lists them", if *count == 1 { "" } else { "s" })]
pub struct InvalidTrace {
    /// How the trace is named.
    pub name: String,
    /// How many findings `validate` has.
    pub count: usize,
    /// The first of them, as `validate` prints it (its detail cut to 300 characters).
    pub first: String,
}

/// Refuses a trace whose conversation `validate` finds anything in.
pub fn must_validate(name: &str, c: &Conversation) -> Result<(), InvalidTrace> {
    let findings = if c.is_pull() {
        let rep = TraceReport { path: name.to_string(), ..TraceReport::default() };
        crate::validate_pull::validate(&c.trace, c.revision.clone(), rep).findings
    } else {
        conversation_findings(c)
    };
    let Some(f) = findings.first() else { return Ok(()) };
    let at = f.seq.map(|s| format!(" seq {s}")).unwrap_or_default();
    let first = format!("[{}]{at}: {}", f.check, crate::finding::clip(&f.detail, 300));
    Err(InvalidTrace { name: name.to_string(), count: findings.len(), first })
}

/// Every finding of `validate` on a push-family trace whose conversation is already read: the header's
/// connector generation against its revision's, the checks of each event, then the protocol checks. `run` uses
/// it to refuse a trace that does not validate before playing it (a header relabelled to another release would
/// otherwise set up the cases of that release).
pub(crate) fn conversation_findings(c: &Conversation) -> Vec<Finding> {
    let mut out = vec![];
    let rev = &c.revision;
    if rev.generation != c.trace.header.generation() {
        let detail = format!(
            "header says connector generation {}, {} is generation {}",
            c.trace.header.generation(),
            rev.revision,
            rev.generation
        );
        out.push(Finding::new(CheckId::TraceRevision, detail).at_line(1));
    }
    let mut checker = EventChecker::new(rev.clone());
    for ev in &c.trace.events {
        let decoded = match ev {
            Event::Zmq(z) => c.profile.as_ref().zip(c.decoded_at(z.seq)),
            Event::Http(_) => None,
        };
        out.extend(checker.check_decoded(ev, decoded));
    }
    protocol_checks(c, &mut out);
    out
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
    /// The checker of a built-in revision (panics on another: the revisions of traces are built in).
    pub fn new(rev: Arc<Revision>) -> EventChecker {
        let codec = Codec::builtin(&rev.revision).expect("built-in revision");
        let boot = BootstrapSpec::new(rev.clone()).map(|r| r.expect("built-in bootstrap models compile"));
        EventChecker { rev, codec, boot }
    }

    /// The revision it checks against.
    pub fn revision(&self) -> &Arc<Revision> {
        &self.rev
    }

    /// The checks of an event whose payload nothing decoded yet (it is decoded here, if it has one).
    pub fn check(&mut self, ev: &Event) -> Vec<Finding> {
        self.check_decoded(ev, None)
    }

    /// The checks of an event; `decoded`: the decode of its payload the conversation already made (and the
    /// profile it was made with), which the ZeroMQ checks then read instead of decoding the payload again.
    pub fn check_decoded(&mut self, ev: &Event, decoded: Option<(&WireProfile, Decoded<'_>)>) -> Vec<Finding> {
        let mut out = vec![];
        match ev {
            Event::Zmq(z) => check_zmq(&self.rev, &self.codec, z, decoded, &mut out),
            Event::Http(h) => {
                let find = |check: CheckId, detail: String| {
                    Finding::new(check, detail).at(Some(h.seq), Some(h.line)).about(format!("{} {}", h.method, h.path))
                };
                let Some(b) = self.boot.as_mut() else {
                    out.push(find(CheckId::HttpRoute, format!("{} has no bootstrap server", self.rev.revision)));
                    return out;
                };
                if b.route(&h.method, &h.path).is_none() {
                    out.push(find(CheckId::HttpRoute, format!("{} {} is not a bootstrap route", h.method, h.path)));
                    return out;
                }
                // The exact body text must parse to the recorded body.
                let raw: Option<serde_json::Value> =
                    if h.body_raw.is_empty() { None } else { serde_json::from_str(&h.body_raw).ok() };
                if raw.as_ref() != h.body.as_ref().filter(|b| !b.is_null()) {
                    out.push(find(CheckId::HttpBodyRaw, "body_raw does not parse to body".into()));
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
                    out.push(find(CheckId::HttpBody, e));
                }
            }
        }
        out
    }
}

fn check_zmq(
    rev: &Revision,
    codec: &Codec,
    z: &ZmqEvent,
    decoded: Option<(&WireProfile, Decoded<'_>)>,
    out: &mut Vec<Finding>,
) {
    let from = sender(z);
    // The message the conversation read in the payload (a pull or, from 0.34.0, a lease heartbeat), else the
    // first message of the sending side; a payload no one read yet is classified below, as the receiver does.
    let read_as = decoded.as_ref().and_then(|(_, d)| rev.message(d.message()));
    let Some(msg) = read_as.or_else(|| rev.message_from(from.as_str())) else {
        let detail = format!("{} sends nothing in {}", from.as_str(), rev.revision);
        out.push(Finding::new(CheckId::ZmqFrames, detail).at(Some(z.seq), Some(z.line)));
        return;
    };
    let find =
        |check: CheckId, detail: String| Finding::new(check, detail).at(Some(z.seq), Some(z.line)).about(&msg.name);
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
    let Some(payload) = check_frames(z, layout, &find, out) else { return };
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
        _ => {
            if let Some((check, detail)) = msgpack_problem(rev, codec, z, msg, payload, decoded) {
                out.push(find(check, detail));
            }
        }
    }
}

/// What is wrong with a msgpack payload read as `msg`: it does not decode, or its value re-encodes to other
/// bytes. The conversation's decode of these bytes as this message is read if it made one (`decoded`), else
/// the spec codec's.
fn msgpack_problem(
    rev: &Revision,
    codec: &Codec,
    z: &ZmqEvent,
    msg: &TransportMessage,
    payload: &[u8],
    decoded: Option<(&WireProfile, Decoded<'_>)>,
) -> Option<(CheckId, String)> {
    let reading = decoded
        .filter(|(_, d)| d.message() == msg.name && d.bytes() == payload)
        .and_then(|(profile, d)| d.reading(profile))
        .unwrap_or_else(|| spec_reading(codec, rev, &msg.name, payload, z.seq));
    match reading {
        Err(e) => Some((CheckId::ZmqDecode, e.msgspec_message())),
        Ok(Ok(b)) if b == payload => None,
        Ok(Ok(b)) => Some((CheckId::ZmqReencode, reencoding_differs(&b, payload))),
        Ok(Err(e)) => Some((CheckId::ZmqReencode, e.to_string())),
    }
}

/// The spec codec's reading of a payload no one decoded yet: its decode, and the re-encoding of the value. A
/// payload for a revision's first decoder message is first tried as the lease heartbeat where the revision has
/// one (as its prefiller reads it: a heartbeat with at least one id), within the same reading.
fn spec_reading(codec: &Codec, rev: &Revision, message: &str, payload: &[u8], seq: u64) -> Reading {
    decode_count::count(Some(seq));
    let first_from_decoder = rev.message_from("decoder").is_some_and(|m| m.name == message);
    if let (true, Some(h)) = (first_from_decoder, rev.message(HEARTBEAT)) {
        if let Ok(v) = codec.decode(&h.name, payload) {
            let ids = v.field("lease_transfer_ids").and_then(|l| l.items()).is_some_and(|mut l| l.next().is_some());
            if ids {
                return Ok(codec.encode(&h.name, &v).map_err(Into::into));
            }
        }
    }
    let v = codec.decode(message, payload)?;
    Ok(codec.encode(message, &v).map_err(Into::into))
}

/// The lease heartbeat's message name (0.34.0).
const HEARTBEAT: &str = "MooncakeLeaseHeartbeat";

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;
    use crate::trace::Role;

    fn traces(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        let jsonl = |p: &Path| crate::walk::has_extension(p, "jsonl");
        out.extend(crate::walk::files(dir, crate::walk::MAX_DEPTH, &jsonl).unwrap());
    }

    /// The decodes `validate` makes of each event's payload, typed (the conversation's) and spec-driven (the
    /// per-event checks') alike, by event seq; `None` counts decodes no event is behind.
    fn decodes_per_event(t: Trace) -> (TraceReport, BTreeMap<Option<u64>, usize>) {
        decode_count::take();
        let rep = validate(t);
        (rep, decode_count::take())
    }

    /// `validate` decodes each payload of a trace once, overall: every msgpack ZeroMQ payload exactly once
    /// (the decoders' through the conversation, typed, whose decode the per-event checks and the protocol
    /// checks read; the others by the per-event checks), no payload twice, nothing that is no payload.
    #[test]
    fn validate_decodes_each_payload_once() {
        // The bundled traces are the conformance crate's: absent from this crate's package, present in the
        // repository (scripts/package-check.sh runs the packaged crate's tests).
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = manifest.join("../conformance");
        if !root.exists() {
            assert!(manifest.join("Cargo.toml.orig").exists(), "conformance/ is missing from the repository");
            println!("SKIPPED: validate decodes each payload once — conformance/traces is not in the packaged crate");
            return;
        }
        let mut files = vec![];
        traces(&root.join("traces"), &mut files);
        traces(&root.join("traces-pull"), &mut files);
        files.sort();
        let (mut payloads, mut typed_traces) = (0, 0);
        for f in &files {
            let t = Trace::load(f).unwrap();
            let pull = t.header.family.as_deref() == Some("pull");
            let rev = revision_in(Spec::builtin(), if pull { "pull" } else { "push" }, &t.header).unwrap();
            let msgpack: Vec<u64> = t
                .zmq()
                .filter(|z| rev.message_from(sender(z).as_str()).is_some_and(|m| m.encoding == "msgpack"))
                .map(|z| z.seq)
                .collect();
            let c = Conversation::new(t.clone()).ok();
            let c_trace = t.clone();
            let (rep, per_event) = decodes_per_event(t.clone());
            assert!(rep.ok(), "{}: {:?}", f.display(), rep.findings);
            // A pull-family payload is matched to one of its sender's messages by content: it is decoded as
            // each msgpack message of its sender in turn until one reads it back (at most once per message).
            let most = |seq: u64| {
                let z = c_trace.zmq().find(|z| z.seq == seq).expect("a decode of an event");
                let from = sender(z);
                let candidates = rev.transport.messages.iter().filter(|m| m.from == from.as_str());
                if pull {
                    candidates.filter(|m| m.encoding == "msgpack").count()
                } else {
                    1
                }
            };
            let twice: Vec<_> =
                per_event.iter().filter(|(s, n)| s.is_none() || **n != 1 && **n > most(s.unwrap())).collect();
            assert!(twice.is_empty(), "{}: payloads decoded more than once (seq, decodes): {twice:?}", f.display());
            let decoded: Vec<u64> = per_event.keys().map(|s| s.expect("every decode is of an event")).collect();
            if !pull {
                assert_eq!(decoded, msgpack, "{}: the msgpack payloads and the payloads decoded", f.display());
            }
            payloads += decoded.len();
            // Generation 2: every payload a decoder sent or received is in the conversation, decoded there.
            if let Some(c) = c.filter(|c| c.profile.is_some()) {
                let decoder_side: Vec<u64> = t.zmq().filter(|z| z.side == Role::Decoder).map(|z| z.seq).collect();
                assert!(decoder_side.iter().all(|s| c.decoded_at(*s).is_some()), "{}", f.display());
                typed_traces += 1;
            }
        }
        assert!(typed_traces > 100 && payloads > 500, "{typed_traces} generation-2 traces, {payloads} payloads");
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

#[cfg(test)]
mod heartbeat_tests {
    use super::*;
    use mooncake_wire::typed::{MooncakeLeaseHeartbeat, MooncakeXferMetadata, MooncakeXferResponse, ReqBlocks, Status};

    const EP: &str = "tcp://127.0.0.1:5000";

    fn zmq(seq: u64, side: &str, dir: &str, socket: u64, payload: &[u8], rid: bool) -> serde_json::Value {
        let mut frames = vec![];
        if rid {
            frames.push(hex::encode([0u8, 1, 2, socket as u8]));
        }
        frames.push(hex::encode(payload));
        let (sock, bound) = if side == "prefiller" { ("ROUTER", true) } else { ("DEALER", false) };
        let conn = if side == "prefiller" { "prefiller0" } else { "decoder0" };
        serde_json::json!({"seq": seq, "kind": "zmq", "side": side, "conn": conn, "socket": sock, "endpoint": EP,
            "bound": bound, "dir": dir, "frames": frames, "socket_id": socket, "t": seq as f64 / 10.0})
    }

    /// A 0.34.0 trace where a heartbeat and a pull of one decoder go to one prefiller at the same time, their
    /// replies interleaved: the sockets tell them apart.
    fn trace(heartbeat_reply: &MooncakeXferResponse) -> Trace {
        let hb = MooncakeLeaseHeartbeat { lease_transfer_ids: vec!["xfer-1".into()] }.encode();
        let pull = MooncakeXferMetadata {
            remote_hostname: "127.0.0.1".into(),
            remote_port: 17001u64.into(),
            remote_tp_size: 1u64.into(),
            remote_pp_size: 1u64.into(),
            req_blocks: vec![(
                "d-req-1".to_string(),
                ReqBlocks { transfer_id: "xfer-1".into(), blocks: vec![vec![3u64.into()]] },
            )]
            .into_iter()
            .collect(),
            kv_caches_base_addr: vec![4096u64.into()],
            block_lens: vec![64u64.into()],
            kv_block_lens: vec![64u64.into()],
            registered_layer_names: vec!["l0".into()],
            registered_layer_indices: vec![0u64.into()],
            ..Default::default()
        }
        .encode();
        let mut ok = MooncakeXferResponse::new(Status::FINISH);
        ok.ok_reqs = Some(["d-req-1"].into());
        let (ok, hr) = (ok.encode(), heartbeat_reply.encode());
        let header = serde_json::json!({"format": "mooncake-trace", "format_version": 1, "vllm_version": "0.34.0",
            "connector": "MooncakeConnector", "connector_generation": 2, "scenario": "hb", "description": "",
            "recorded_by": "test", "roles": {"prefiller0": "prefiller", "decoder0": "decoder"},
            "conn_endpoints": {"prefiller0": [EP], "decoder0": [EP]}, "recorded_at_unix": 0,
            "observed_outcome": {}, "transfer_engine_calls": [], "error": null});
        let events = [
            zmq(1, "decoder", "send", 1, &hb, false),
            zmq(2, "decoder", "send", 2, &pull, false),
            zmq(3, "prefiller", "recv", 3, &hb, true),
            zmq(4, "prefiller", "recv", 4, &pull, true),
            zmq(5, "prefiller", "send", 4, &ok, true),
            zmq(6, "decoder", "recv", 2, &ok, false),
            zmq(7, "prefiller", "send", 3, &hr, true),
            zmq(8, "decoder", "recv", 1, &hr, false),
        ];
        let text: String = std::iter::once(header).chain(events).map(|v| format!("{v}\n")).collect();
        Trace::from_lines("hb.jsonl", crate::jsonl::read_from("hb.jsonl", text.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn a_heartbeat_is_read_apart_from_the_pull_beside_it() {
        let t = trace(&MooncakeXferResponse::new(Status::FINISH));
        let c = Conversation::new(t.clone()).unwrap();
        assert_eq!((c.exchanges.len(), c.heartbeats.len()), (1, 1));
        assert_eq!(c.heartbeats[0].transfer_ids(), ["xfer-1"]);
        assert_eq!(c.heartbeats[0].replies.len(), 1, "the heartbeat's reply, though the pull's came first");
        assert_eq!(c.exchanges[0].replies.len(), 1);
        assert_eq!(c.heartbeats[0].t, Some(0.1));
        let rep = validate(t);
        assert!(rep.ok(), "{:?}", rep.findings);
    }

    #[test]
    fn a_heartbeat_reply_the_revision_never_gives_is_a_finding() {
        let mut r = MooncakeXferResponse::new(Status::ERROR);
        r.err_msg = Some("lease refused".into());
        let rep = validate(trace(&r));
        let f: Vec<_> = rep.findings.iter().map(|f| (f.check, f.detail.clone())).collect();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].0, CheckId::LeaseReply);
        assert!(f[0].1.contains("kv_lease_duration is not set on this prefill instance."), "{f:?}");
        let mut refused = MooncakeXferResponse::new(Status::ERROR);
        refused.err_msg = Some("kv_lease_duration is not set on this prefill instance.".into());
        assert!(validate(trace(&refused)).ok());
    }
}
