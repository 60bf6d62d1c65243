//! The recorded-trace parser (`trace/src/trace.rs`, via `jsonl::read_from`), then the trace model and
//! the validator over whatever it accepts. The input is the text of a trace file.
//!
//! Invariants:
//! * line numbers are 1-based and increase; event `seq` strictly increases; each event sits on its own line;
//! * frames are the hex of the recorded text (case-insensitive);
//! * printing the parsed trace back to JSON Lines and parsing that gives the same trace (the parser loses
//!   nothing it keeps), and validating both gives the same findings;
//! * the trace model and the validator never panic, and every finding names a check.

use mooncake_trace::conversation::Conversation;
use mooncake_trace::jsonl;
use mooncake_trace::trace::{Event, HttpDir, Role, Trace, ZmqDir};
use mooncake_trace::validate;
use serde_json::{json, Value as J};

/// The target body: runs the input through the code under test and checks the invariants above; panics when one
/// breaks, ignores an input it cannot use.
pub fn run(data: &[u8]) {
    let Ok(lines) = jsonl::read_from("fuzz", data) else { return };
    let mut prev = 0;
    for l in &lines {
        assert!(l.no > prev, "line numbers must increase");
        prev = l.no;
    }
    let header = lines.first().map(|l| l.value.clone());
    let originals: Vec<(usize, J)> = lines.iter().map(|l| (l.no, l.value.clone())).collect();
    let trace = match Trace::from_lines("fuzz", lines) {
        Ok(t) => t,
        Err(e) => {
            assert!(e.to_string().starts_with("fuzz:"), "errors name the file and line: {e}");
            return;
        }
    };
    let mut last = (0u64, 0usize);
    for ev in &trace.events {
        assert!(ev.seq() > last.0 && ev.line() > last.1, "seq and line must increase");
        last = (ev.seq(), ev.line());
        if let Event::Zmq(z) = ev {
            let raw = &originals.iter().find(|(no, _)| *no == z.line).expect("an event comes from a line").1;
            for (i, f) in z.frames.iter().enumerate() {
                let text = raw["frames"][i].as_str().expect("frames are strings");
                assert_eq!(text.to_ascii_lowercase(), hex::encode(f), "frame {i} of line {}", z.line);
            }
        }
    }

    let printed = print(header.as_ref().expect("a parsed trace has a header"), &trace);
    let lines2 = jsonl::read_from("printed", printed.as_bytes())
        .unwrap_or_else(|e| panic!("a printed trace must read: {e}\n{printed}"));
    let again =
        Trace::from_lines("fuzz", lines2).unwrap_or_else(|e| panic!("a printed trace must parse: {e}\n{printed}"));
    assert_eq!(print(header.as_ref().unwrap(), &again), printed, "parse(print(trace)) != trace");

    let report = validate::validate(trace.clone());
    for f in &report.findings {
        assert!(
            !f.check.as_str().is_empty() && !f.detail.is_empty(),
            "a finding names its check and says what is wrong"
        );
    }
    assert!(report.zmq_payloads + report.http_events <= trace.events.len());
    let key = |r: &mooncake_trace::finding::TraceReport| {
        r.findings.iter().map(|f| (f.check, f.seq, f.message.clone())).collect::<Vec<_>>()
    };
    assert_eq!(key(&validate::validate(again)), key(&report), "validating the printed trace gives other findings");
    let _ = Conversation::new(trace);
}

fn role(r: Role) -> &'static str {
    r.as_str()
}

/// The trace as JSON Lines: the original header object, then one line per event with every field the parser
/// keeps (absent optional fields are left out, which the format reads as their defaults).
pub fn print(header: &J, t: &Trace) -> String {
    let mut out = serde_json::to_string(header).expect("JSON");
    out.push('\n');
    for ev in &t.events {
        let mut v = match ev {
            Event::Zmq(z) => json!({
                "kind": "zmq", "seq": z.seq, "side": role(z.side), "conn": z.conn, "socket": z.socket,
                "endpoint": z.endpoint, "bound": z.bound,
                "dir": match z.dir { ZmqDir::Send => "send", ZmqDir::Recv => "recv" },
                "frames": z.frames.iter().map(hex::encode).collect::<Vec<_>>(),
            }),
            Event::Http(h) => json!({
                "kind": "http", "seq": h.seq, "conn": h.conn,
                "dir": match h.dir { HttpDir::Request => "request", HttpDir::Response => "response" },
                "method": h.method, "path": h.path, "body_raw": h.body_raw,
            }),
        };
        let m = v.as_object_mut().expect("object");
        match ev {
            Event::Zmq(z) => {
                if let Some(d) = z.decoded.as_deref().and_then(|d| serde_json::from_str::<J>(d.get()).ok()) {
                    m.insert("decoded".into(), d);
                }
                if let Some(p) = &z.payload_text {
                    m.insert("payload_text".into(), J::String(p.clone()));
                }
                if let Some(t) = z.t {
                    m.insert("t".into(), json!(t));
                }
                if let Some(id) = z.socket_id {
                    m.insert("socket_id".into(), json!(id));
                }
            }
            Event::Http(h) => {
                if let Some(s) = h.status {
                    m.insert("status".into(), json!(s));
                }
                if let Some(b) = &h.body {
                    m.insert("body".into(), b.clone());
                }
                if let Some(t) = h.t {
                    m.insert("t".into(), json!(t));
                }
            }
        }
        out.push_str(&serde_json::to_string(&v).expect("JSON"));
        out.push('\n');
    }
    out
}
