//! The recorded-trace format (`conformance/traces/README.md`, format_version 1): a typed parser whose errors
//! name the line and field. Unknown fields are ignored, as the format requires.

use std::path::Path;
use std::sync::Arc;

use indexmap::IndexMap;
use mooncake_wire::spec::{Revision, Spec};
use serde::Deserialize;
use serde_json::Value as J;

use crate::jsonl;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Decoder,
    Prefiller,
    Bootstrap,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Decoder => "decoder",
            Role::Prefiller => "prefiller",
            Role::Bootstrap => "bootstrap",
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
pub struct TeCall {
    pub session: String,
    pub n: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Header {
    pub format: String,
    pub format_version: u32,
    pub vllm_version: String,
    pub connector: String,
    /// Protocol family (`spec/<family>/`): absent = `push`; `pull` for vllm-ascend's pull connectors.
    #[serde(default)]
    pub family: Option<String>,
    /// Absent in the earliest recordings: generation 2.
    #[serde(default)]
    pub connector_generation: Option<u32>,
    pub scenario: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub recorded_by: String,
    pub roles: IndexMap<String, Role>,
    #[serde(default)]
    pub conn_endpoints: IndexMap<String, Vec<String>>,
    #[serde(default)]
    pub recorded_at_unix: Option<i64>,
    #[serde(default)]
    pub observed_outcome: J,
    #[serde(default)]
    pub transfer_engine_calls: Vec<TeCall>,
    #[serde(default)]
    pub error: Option<String>,
    /// What the recorder could not see (a tap sees only the wire): any of [`UNOBSERVABLE`]. The matching
    /// header values are empty, and the checks that need them do not apply to the trace.
    #[serde(default)]
    pub unobserved: Vec<String>,
}

/// What a recording can leave out, declared in the header's `unobserved`: the transfer-engine calls (a tap
/// sees no memory traffic) and the connector APIs' outcomes (a tap sees no scheduler).
pub const UNOBSERVABLE: [&str; 2] = ["transfer_engine_calls", "observed_outcome"];

impl Header {
    pub fn generation(&self) -> u32 {
        self.connector_generation.unwrap_or(2)
    }
    /// The recording saw `what` (one of [`UNOBSERVABLE`]).
    pub fn observed(&self, what: &str) -> bool {
        !self.unobserved.iter().any(|u| u == what)
    }
    /// `unobserved` names only known items, and their values are empty.
    fn check_unobserved(&self) -> Result<(), String> {
        for u in &self.unobserved {
            if !UNOBSERVABLE.contains(&u.as_str()) {
                return Err(format!("unobserved: {u:?} is none of {UNOBSERVABLE:?}"));
            }
        }
        if !self.observed("transfer_engine_calls") && !self.transfer_engine_calls.is_empty() {
            return Err("unobserved names transfer_engine_calls, but the header lists some".into());
        }
        let empty = match &self.observed_outcome {
            J::Null => true,
            J::Object(m) => m.is_empty(),
            _ => false,
        };
        if !self.observed("observed_outcome") && !empty {
            return Err("unobserved names observed_outcome, but the header has one".into());
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZmqDir {
    Send,
    Recv,
}

#[derive(Clone, Debug)]
pub struct ZmqEvent {
    pub seq: u64,
    pub line: usize,
    pub side: Role,
    pub conn: String,
    pub socket: String,
    pub endpoint: String,
    pub bound: bool,
    pub dir: ZmqDir,
    pub frames: Vec<Vec<u8>>,
    pub decoded: Option<J>,
    pub payload_text: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpDir {
    Request,
    Response,
}

#[derive(Clone, Debug)]
pub struct HttpEvent {
    pub seq: u64,
    pub line: usize,
    pub conn: String,
    pub dir: HttpDir,
    pub method: String,
    pub path: String,
    pub status: Option<u16>,
    pub body: Option<J>,
    pub body_raw: String,
}

#[derive(Clone, Debug)]
pub enum Event {
    Zmq(ZmqEvent),
    Http(HttpEvent),
}

impl Event {
    pub fn seq(&self) -> u64 {
        match self {
            Event::Zmq(z) => z.seq,
            Event::Http(h) => h.seq,
        }
    }
    pub fn line(&self) -> usize {
        match self {
            Event::Zmq(z) => z.line,
            Event::Http(h) => h.line,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Trace {
    pub path: String,
    pub header: Header,
    pub events: Vec<Event>,
}

#[derive(Deserialize)]
struct RawZmq {
    seq: u64,
    side: Role,
    conn: String,
    socket: String,
    endpoint: String,
    bound: bool,
    dir: ZmqDir,
    frames: Vec<String>,
    #[serde(default)]
    decoded: Option<J>,
    #[serde(default)]
    payload_text: Option<String>,
}

#[derive(Deserialize)]
struct RawHttp {
    seq: u64,
    conn: String,
    dir: HttpDir,
    method: String,
    path: String,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    body: Option<J>,
    #[serde(default)]
    body_raw: String,
}

pub const FORMAT: &str = "mooncake-trace";

impl Trace {
    pub fn load(path: &Path) -> Result<Trace, String> {
        let lines = jsonl::read(path)?;
        Self::from_lines(&path.display().to_string(), lines)
    }

    /// A trace on disk or bundled into the binary.
    pub fn load_input(input: &jsonl::Input) -> Result<Trace, String> {
        Self::from_lines(&input.name(), input.lines()?)
    }

    pub fn from_lines(path: &str, lines: Vec<jsonl::Line>) -> Result<Trace, String> {
        let mut it = lines.into_iter();
        let first = it
            .next()
            .ok_or_else(|| format!("{path}: an empty file, not a trace (its first line must be the trace header)"))?;
        let header_format = first.value.get("format").and_then(J::as_str).map(String::from);
        if let Some(f) = header_format.as_deref().filter(|f| *f != FORMAT) {
            let hint = if f.starts_with("mooncake-vectors") || f.starts_with("mooncake-golden") {
                " (a vector file: check it with `vectors`)"
            } else {
                ""
            };
            return Err(format!(
                "{path}:{}: not a trace: the header's format is `{f}`, expected `{FORMAT}`{hint}",
                first.no
            ));
        }
        let header: Header =
            serde_json::from_value(first.value).map_err(|e| format!("{path}:{}: header: {e}", first.no))?;
        if header.format_version != 1 {
            return Err(format!(
                "{path}:{}: header: format_version {} is not supported (1)",
                first.no, header.format_version
            ));
        }
        header.check_unobserved().map_err(|e| format!("{path}:{}: header: {e}", first.no))?;
        let mut events = Vec::new();
        let mut last_seq = 0;
        for l in it {
            let kind = l.value.get("kind").and_then(J::as_str).unwrap_or("").to_string();
            let ev = match kind.as_str() {
                "zmq" => {
                    let r: RawZmq =
                        serde_json::from_value(l.value).map_err(|e| format!("{path}:{}: zmq event: {e}", l.no))?;
                    let frames = r
                        .frames
                        .iter()
                        .enumerate()
                        .map(|(i, f)| hex::decode(f).map_err(|e| format!("{path}:{}: frames[{i}]: not hex: {e}", l.no)))
                        .collect::<Result<_, _>>()?;
                    Event::Zmq(ZmqEvent {
                        seq: r.seq,
                        line: l.no,
                        side: r.side,
                        conn: r.conn,
                        socket: r.socket,
                        endpoint: r.endpoint,
                        bound: r.bound,
                        dir: r.dir,
                        frames,
                        decoded: r.decoded,
                        payload_text: r.payload_text,
                    })
                }
                "http" => {
                    let r: RawHttp =
                        serde_json::from_value(l.value).map_err(|e| format!("{path}:{}: http event: {e}", l.no))?;
                    Event::Http(HttpEvent {
                        seq: r.seq,
                        line: l.no,
                        conn: r.conn,
                        dir: r.dir,
                        method: r.method,
                        path: r.path,
                        status: r.status,
                        body: r.body,
                        body_raw: r.body_raw,
                    })
                }
                other => return Err(format!("{path}:{}: kind: {other:?} is neither \"zmq\" nor \"http\"", l.no)),
            };
            if ev.seq() <= last_seq {
                return Err(format!("{path}:{}: seq: {} does not increase (previous {last_seq})", l.no, ev.seq()));
            }
            last_seq = ev.seq();
            events.push(ev);
        }
        Ok(Trace { path: path.to_string(), header, events })
    }

    pub fn zmq(&self) -> impl Iterator<Item = &ZmqEvent> {
        self.events.iter().filter_map(|e| match e {
            Event::Zmq(z) => Some(z),
            _ => None,
        })
    }
    pub fn http(&self) -> impl Iterator<Item = &HttpEvent> {
        self.events.iter().filter_map(|e| match e {
            Event::Http(h) => Some(h),
            _ => None,
        })
    }
}

/// The revision a push trace was recorded with (its header's vLLM release), through the spec's resolver.
pub fn revision_for(spec: &Spec, vllm_version: &str) -> Result<Arc<Revision>, String> {
    spec.resolve_in_family("push", vllm_version).map(|r| r.revision).map_err(|e| e.to_string())
}

/// Which role sent the message an event carries.
pub fn sender(z: &ZmqEvent) -> Role {
    match (z.side, z.dir) {
        (side, ZmqDir::Send) => side,
        (Role::Decoder, ZmqDir::Recv) => Role::Prefiller,
        (_, ZmqDir::Recv) => Role::Decoder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(header: &str) -> Result<Trace, String> {
        let lines = vec![crate::jsonl::Line { no: 1, value: serde_json::from_str(header).unwrap() }];
        Trace::from_lines("t.jsonl", lines)
    }

    #[test]
    fn unobserved_names_known_items_whose_values_are_empty() {
        let base = r#""format": "mooncake-trace", "format_version": 1, "vllm_version": "0.33.0", "connector": "c", "scenario": "s", "roles": {}"#;
        let t = parse(&format!(
            r#"{{{base}, "unobserved": ["transfer_engine_calls", "observed_outcome"], "observed_outcome": {{}}}}"#
        ))
        .unwrap();
        assert!(!t.header.observed("transfer_engine_calls") && !t.header.observed("observed_outcome"));
        assert!(parse(&format!("{{{base}}}")).unwrap().header.observed("observed_outcome"));
        let e = parse(&format!(r#"{{{base}, "unobserved": ["memory"]}}"#)).unwrap_err();
        assert!(e.contains("unobserved: \"memory\" is none of"), "{e}");
        let e = parse(&format!(r#"{{{base}, "unobserved": ["transfer_engine_calls"], "transfer_engine_calls": [{{"session": "a:1", "n": 1, "bytes": 8}}]}}"#)).unwrap_err();
        assert!(e.contains("lists some"), "{e}");
        let e = parse(&format!(
            r#"{{{base}, "unobserved": ["observed_outcome"], "observed_outcome": {{"finished_sending": {{}}}}}}"#
        ))
        .unwrap_err();
        assert!(e.contains("has one"), "{e}");
    }
}
