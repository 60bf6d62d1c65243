//! The recorded-trace format (`conformance/traces/README.md`, format_version 1): a typed parser whose errors
//! name the line and field. Unknown fields are ignored, as the format requires.

use std::path::Path;
use std::sync::Arc;

use indexmap::IndexMap;
use mooncake_wire::limits;
use mooncake_wire::spec::{ResolveError, Revision, Spec};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value as J;

use crate::jsonl;

/// What a recorded connection (`conn`) is: a role of the header's `roles`, or the `side` of a ZMQ event. It is
/// the testee protocol's role (the same three peers, spelled the same: `decoder`, `prefiller`, `bootstrap`), so a
/// trace's roles, a case's role and the `start` command that makes a testee take it are one type.
pub use mooncake_testee_protocol::Role;

/// One transfer-engine write the recorder saw (one `batch_transfer_sync_write` call).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct TeCall {
    /// The decoder's session, `host:te_port`.
    pub session: String,
    /// How many descriptors the call had.
    pub n: u64,
    /// The sum of their lengths, in bytes.
    pub bytes: u64,
}

/// A trace's first line: what was recorded, and how. Read by [`Trace::load`] and written (by the tap) through
/// this same type.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// The format's version; only 1 is read.
    pub format_version: u32,
    /// The vLLM release the connector came from (`0.33.0`).
    pub vllm_version: String,
    /// The connector's class name (`MooncakeConnector`).
    pub connector: String,
    /// Absent for vLLM's own connector; otherwise the implementation that was recorded, as
    /// `spec/implementations/` names it (`mooncake`). `vllm_version` is then the vLLM release it ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<String>,
    /// That implementation's package release (`0.3.13.post1`); with `implementation` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation_version: Option<String>,
    /// Protocol family (`spec/<family>/`): absent = `push`; `pull` for vllm-ascend's pull connectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// Absent in the earliest recordings: generation 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_generation: Option<u32>,
    /// The scenario's id (`a_single_success`, ...; `conformance/scenarios.toml`).
    pub scenario: String,
    /// One sentence on what happens in it.
    #[serde(default)]
    pub description: String,
    /// What recorded it (`tools/record (mooncake-wire)`, a tap).
    #[serde(default)]
    pub recorded_by: String,
    /// Every connection id (a worker's name, or `bootstrap`) and its role.
    pub roles: IndexMap<String, Role>,
    /// The ZeroMQ endpoints each connection used: connect addresses of a DEALER, bound address of a ROUTER.
    #[serde(default)]
    pub conn_endpoints: IndexMap<String, Vec<String>>,
    /// When the recording started, in Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at_unix: Option<i64>,
    /// What the connector APIs reported afterwards (`conformance/traces/README.md` §2.4); empty when
    /// unobserved.
    #[serde(default)]
    pub observed_outcome: J,
    /// The transfer-engine writes, in call order; empty when unobserved.
    #[serde(default)]
    pub transfer_engine_calls: Vec<TeCall>,
    /// The recording harness's exception text; `None` when the scenario ran to completion.
    #[serde(default)]
    pub error: Option<String>,
    /// What the recorder could not see (a tap sees only the wire): any of [`UNOBSERVABLE`]. The matching
    /// header values are empty, and the checks that need them do not apply to the trace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unobserved: Vec<String>,
    /// What a pull recording was made from (`conformance/traces-pull/`: the code that ran, what was faked);
    /// no check reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_from: Option<String>,
    /// The transfer-engine reads a pull recording's decoders made (`tools/ascend`: connection, session, count,
    /// bytes, return code); no check reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_engine_reads: Option<J>,
    /// A tap's own record: its bootstrap front and upstream, the revision and how it was told, its endpoints;
    /// no check reads it. (Named, not a flattened map of unknown keys: serde would buffer every unknown key's
    /// value, however large, where it now skips it.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tap: Option<J>,
}

/// What a recording can leave out, declared in the header's `unobserved`: the transfer-engine calls (a tap
/// sees no memory traffic) and the connector APIs' outcomes (a tap sees no scheduler).
pub const UNOBSERVABLE: [&str; 2] = ["transfer_engine_calls", "observed_outcome"];

impl Header {
    /// What was recorded: the vLLM release (`0.13.0`) for vLLM's own connector, or `<implementation>-<release>`
    /// (`mooncake-0.3.13.post1`) for another implementation's.
    pub fn source(&self) -> String {
        match &self.implementation {
            Some(name) => {
                mooncake_wire::spec::Implementation::label(name, self.implementation_version.as_deref().unwrap_or("?"))
            }
            None => self.vllm_version.clone(),
        }
    }
    /// The header field the revision is resolved from, for messages: `implementation` or `vllm_version`.
    pub fn revision_field(&self) -> &'static str {
        if self.implementation.is_some() {
            "implementation"
        } else {
            "vllm_version"
        }
    }
    /// The connector generation: `connector_generation`, or 2 when the header leaves it out.
    pub fn generation(&self) -> u32 {
        self.connector_generation.unwrap_or(2)
    }
    /// The recording saw `what` (one of [`UNOBSERVABLE`]).
    pub fn observed(&self, what: &str) -> bool {
        !self.unobserved.iter().any(|u| u == what)
    }
    /// `unobserved` names only known items, and their values are empty.
    fn check_unobserved(&self) -> Result<(), UnobservedError> {
        for u in &self.unobserved {
            if !UNOBSERVABLE.contains(&u.as_str()) {
                return Err(UnobservedError::Unknown(u.clone()));
            }
        }
        if !self.observed("transfer_engine_calls") && !self.transfer_engine_calls.is_empty() {
            return Err(UnobservedError::EngineCalls);
        }
        let empty = match &self.observed_outcome {
            J::Null => true,
            J::Object(m) => m.is_empty(),
            _ => false,
        };
        if !self.observed("observed_outcome") && !empty {
            return Err(UnobservedError::Outcome);
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
/// Whether a ZeroMQ event is a send or a receive, seen from the event's connection.
#[serde(rename_all = "lowercase")]
pub enum ZmqDir {
    /// The application sent the message.
    Send,
    /// The application received it.
    Recv,
}

/// One message sent or received on a ZeroMQ socket.
#[derive(Clone, Debug)]
pub struct ZmqEvent {
    /// Its place in the trace (1-based, increasing): the order the taps fired.
    pub seq: u64,
    /// Its line number in the file.
    pub line: usize,
    /// The role of the connection that sent or received it.
    pub side: Role,
    /// The connection (worker) id.
    pub conn: String,
    /// The socket type: `ROUTER`, `DEALER` or (generation 1) `REQ`.
    pub socket: String,
    /// The connect address, or the ROUTER's bound `tcp://host:port`.
    pub endpoint: String,
    /// Whether this is the bound (ROUTER) side.
    pub bound: bool,
    /// Sent or received.
    pub dir: ZmqDir,
    /// The frames as the application passed or got them (on a ROUTER, frame 0 is the routing id).
    pub frames: Vec<Vec<u8>>,
    /// The recorder's untyped decoding of the last frame as JSON; `None` when it is not MessagePack. Lossy
    /// (integer widths, bin/str, tuple/list): byte checks use `frames`. Kept as the recorded JSON text: nothing
    /// checks it, and a value built from it would cost many times its size.
    pub decoded: Option<Box<RawValue>>,
    /// The last frame as text when it is not MessagePack (generation 1's `trans_done` / `trans_error`).
    pub payload_text: Option<String>,
    /// Prose for a reader of the file (on the bound side: what frame 0 is); no check reads it.
    pub note: Option<String>,
    /// Seconds since the scenario's start (CLOCK_MONOTONIC; negative during the set-up before it), where the
    /// recording has it.
    pub t: Option<f64>,
    /// The socket's id, unique in the trace (two DEALERs of one decoder to one endpoint differ), where the
    /// recording has it.
    pub socket_id: Option<u64>,
}

/// Whether an HTTP event is a request or its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpDir {
    /// The client's request.
    Request,
    /// The server's answer.
    Response,
}

/// One bootstrap HTTP request or response, recorded on the server side.
#[derive(Clone, Debug)]
pub struct HttpEvent {
    /// Its place in the trace (1-based, increasing).
    pub seq: u64,
    /// Its line number in the file.
    pub line: usize,
    /// The connection id (`bootstrap`).
    pub conn: String,
    /// Request or response.
    pub dir: HttpDir,
    /// The HTTP method (`POST`, `GET`).
    pub method: String,
    /// The path, with a query string if there was one (`/register`, `/query`).
    pub path: String,
    /// The status code (responses only).
    pub status: Option<u16>,
    /// The body parsed as JSON; `None` when empty or not JSON.
    pub body: Option<J>,
    /// The body's exact text.
    pub body_raw: String,
    /// Seconds since the scenario's start, where the recording has it (as [`ZmqEvent::t`]).
    pub t: Option<f64>,
}

/// One event of a trace, after the header.
#[derive(Clone, Debug)]
pub enum Event {
    /// A ZeroMQ message.
    Zmq(ZmqEvent),
    /// A bootstrap HTTP message.
    Http(HttpEvent),
}

impl Event {
    /// Its `seq`.
    pub fn seq(&self) -> u64 {
        match self {
            Event::Zmq(z) => z.seq,
            Event::Http(h) => h.seq,
        }
    }
    /// Its line number in the file.
    pub fn line(&self) -> usize {
        match self {
            Event::Zmq(z) => z.line,
            Event::Http(h) => h.line,
        }
    }
}

/// A parsed trace file (`conformance/traces/README.md`).
#[derive(Clone, Debug)]
pub struct Trace {
    /// Where it came from (a path, or the name of a bundled file), for messages.
    pub path: String,
    /// Its first line.
    pub header: Header,
    /// The other lines, in `seq` order.
    pub events: Vec<Event>,
}

/// An event line's `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Zmq,
    Http,
}

/// A ZeroMQ event line as the file has it: read by [`Trace::load`], written by [`ZmqEvent::line_json`] (the
/// fields in the recorder's key order).
#[derive(Deserialize, Serialize)]
struct RawZmq {
    seq: u64,
    kind: Kind,
    side: Role,
    conn: String,
    socket: String,
    endpoint: String,
    bound: bool,
    dir: ZmqDir,
    frames: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decoded: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    payload_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    socket_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    t: Option<f64>,
}

/// An HTTP event line as the file has it: read by [`Trace::load`], written by [`HttpEvent::line_json`].
#[derive(Deserialize, Serialize)]
struct RawHttp {
    seq: u64,
    kind: Kind,
    conn: String,
    dir: HttpDir,
    method: String,
    path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(default)]
    body: Option<Box<RawValue>>,
    #[serde(default)]
    body_raw: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    t: Option<f64>,
}

/// The note a tap writes on a ZeroMQ line of the bound (ROUTER) side.
pub const ROUTING_ID_NOTE: &str = "frame 0 is the ZMQ routing id seen by the ROUTER (not a ZMTP payload frame)";

impl ZmqEvent {
    /// The event as its trace line, through the same type [`Trace::load`] reads it with.
    pub fn line_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(&RawZmq {
            seq: self.seq,
            kind: Kind::Zmq,
            side: self.side,
            conn: self.conn.clone(),
            socket: self.socket.clone(),
            endpoint: self.endpoint.clone(),
            bound: self.bound,
            dir: self.dir,
            frames: self.frames.iter().map(hex::encode).collect(),
            decoded: self.decoded.clone(),
            note: self.note.clone(),
            payload_text: self.payload_text.clone(),
            socket_id: self.socket_id,
            t: self.t,
        })
    }
}

impl HttpEvent {
    /// The event as its trace line, through the same type [`Trace::load`] reads it with.
    pub fn line_json(&self) -> Result<String, serde_json::Error> {
        let body = self.body.as_ref().map(serde_json::value::to_raw_value).transpose()?;
        serde_json::to_string(&RawHttp {
            seq: self.seq,
            kind: Kind::Http,
            conn: self.conn.clone(),
            dir: self.dir,
            method: self.method.clone(),
            path: self.path.clone(),
            status: self.status,
            body,
            body_raw: self.body_raw.clone(),
            t: self.t,
        })
    }
}

impl Event {
    /// The event as its trace line (without the newline).
    pub fn line_json(&self) -> Result<String, serde_json::Error> {
        match self {
            Event::Zmq(z) => z.line_json(),
            Event::Http(h) => h.line_json(),
        }
    }
}

/// The header's `format` of a trace.
pub const FORMAT: &str = "mooncake-trace";

/// A header's `unobserved` list that does not hold together.
#[derive(Debug, thiserror::Error)]
pub enum UnobservedError {
    /// It names an item that is not one of [`UNOBSERVABLE`].
    #[error("unobserved: {0:?} is none of {UNOBSERVABLE:?}")]
    Unknown(String),
    /// It names `transfer_engine_calls`, yet the header lists some.
    #[error("unobserved names transfer_engine_calls, but the header lists some")]
    EngineCalls,
    /// It names `observed_outcome`, yet the header has one.
    #[error("unobserved names observed_outcome, but the header has one")]
    Outcome,
}

/// Why a file is not a valid trace; every text names the file and, past reading, the line.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file cannot be read as JSON lines.
    #[error(transparent)]
    Read(#[from] jsonl::JsonlError),
    /// An HTTP event's `body` is larger than any bootstrap body.
    #[error(
        "{path}:{line}: http event: body of {len} bytes, larger than {} (limits::MAX_HTTP_BODY_BYTES)",
        limits::MAX_HTTP_BODY_BYTES
    )]
    BodyTooLarge {
        /// The file.
        path: String,
        /// The event's line.
        line: usize,
        /// The body's JSON text length.
        len: usize,
    },
    /// The file has no lines.
    #[error("{path}: an empty file, not a trace (its first line must be the trace header)")]
    Empty {
        /// The file.
        path: String,
    },
    /// The header's `format` is another one.
    #[error(
        "{path}:{line}: not a trace: the header's format is `{format}`, expected `{FORMAT}`{}",
        vector_hint(format)
    )]
    NotATrace {
        /// The file.
        path: String,
        /// The header's line.
        line: usize,
        /// The header's format.
        format: String,
    },
    /// The header does not parse.
    #[error("{path}:{line}: header: {source}")]
    Header {
        /// The file.
        path: String,
        /// The header's line.
        line: usize,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// The header's `format_version` is not 1.
    #[error("{path}:{line}: header: format_version {version} is not supported (1)")]
    FormatVersion {
        /// The file.
        path: String,
        /// The header's line.
        line: usize,
        /// The version found.
        version: u32,
    },
    /// The header's `unobserved` list does not hold together.
    #[error("{path}:{line}: header: {source}")]
    Unobserved {
        /// The file.
        path: String,
        /// The header's line.
        line: usize,
        /// What is wrong.
        source: UnobservedError,
    },
    /// An event does not parse.
    #[error("{path}:{line}: {kind} event: {source}")]
    Event {
        /// The file.
        path: String,
        /// The event's line.
        line: usize,
        /// `zmq` or `http`.
        kind: &'static str,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// A ZMQ frame is not hex.
    #[error("{path}:{line}: frames[{index}]: not hex: {source}")]
    FrameHex {
        /// The file.
        path: String,
        /// The event's line.
        line: usize,
        /// The frame's index.
        index: usize,
        /// The decoder's complaint.
        source: hex::FromHexError,
    },
    /// An event's `kind` is neither `zmq` nor `http`.
    #[error("{path}:{line}: kind: {kind:?} is neither \"zmq\" nor \"http\"")]
    Kind {
        /// The file.
        path: String,
        /// The event's line.
        line: usize,
        /// The kind found.
        kind: String,
    },
    /// An event's `t` is outside what a recording can hold (`MAX_TRACE_SECONDS` either side of the start).
    #[error("{path}:{line}: t: {t} s is outside ±{MAX_TRACE_SECONDS} s of the scenario's start")]
    Time {
        /// The file.
        path: String,
        /// The event's line.
        line: usize,
        /// The time found.
        t: f64,
    },
    /// An event's `seq` does not increase.
    #[error("{path}:{line}: seq: {seq} does not increase (previous {previous})")]
    Seq {
        /// The file.
        path: String,
        /// The event's line.
        line: usize,
        /// Its seq.
        seq: u64,
        /// The previous event's seq.
        previous: u64,
    },
}

fn vector_hint(format: &str) -> &'static str {
    if format.starts_with("mooncake-vectors") || format.starts_with("mooncake-golden") {
        " (a vector file: check it with `vectors`)"
    } else {
        ""
    }
}

/// How far from the scenario's start an event's `t` may be, in seconds (a day): times size the waits of a case.
pub const MAX_TRACE_SECONDS: f64 = 86_400.0;

impl Trace {
    /// Reads and parses the trace file at `path`; the error names the file, line and field.
    pub fn load(path: &Path) -> Result<Trace, TraceError> {
        Self::load_input(&jsonl::Input::File(path.to_path_buf()))
    }

    /// A trace on disk or bundled into the binary, read a line at a time: each line is parsed straight into
    /// the header or an event (fields the format does not read are skipped, not built), so reading costs about
    /// one line beyond the events kept.
    pub fn load_input(input: &jsonl::Input) -> Result<Trace, TraceError> {
        let path = input.name();
        let mut b = TraceBuilder::new(&path);
        input.visit_lines(|no, text| b.line(no, text))?;
        b.finish()
    }

    /// [`Trace::load_input`] over any buffered reader (bytes in memory); `path` names it in errors.
    pub fn from_reader(path: &str, r: impl std::io::BufRead) -> Result<Trace, TraceError> {
        let mut b = TraceBuilder::new(path);
        jsonl::visit_lines(path, r, |no, text| b.line(no, text))?;
        b.finish()
    }

    /// Parses a trace from JSON lines already read (`path` names it in errors): the header, then the events,
    /// whose `seq` must increase.
    pub fn from_lines(path: &str, lines: Vec<jsonl::Line>) -> Result<Trace, TraceError> {
        let mut b = TraceBuilder::new(path);
        for l in lines {
            b.line(l.no, &l.value.to_string())?;
        }
        b.finish()
    }

    /// Its ZeroMQ events, in order.
    pub fn zmq(&self) -> impl Iterator<Item = &ZmqEvent> {
        self.events.iter().filter_map(|e| match e {
            Event::Zmq(z) => Some(z),
            _ => None,
        })
    }
    /// Its HTTP events, in order.
    pub fn http(&self) -> impl Iterator<Item = &HttpEvent> {
        self.events.iter().filter_map(|e| match e {
            Event::Http(h) => Some(h),
            _ => None,
        })
    }
}

/// The two fields a line is dispatched on, read without building the rest: a string, or nothing (any other
/// value, however large, is skipped).
#[derive(Deserialize)]
struct Peek {
    #[serde(default, deserialize_with = "string_or_none")]
    format: Option<String>,
    #[serde(default, deserialize_with = "string_or_none")]
    kind: Option<String>,
}

fn string_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any value")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

/// A trace being read, one line at a time.
struct TraceBuilder<'a> {
    path: &'a str,
    header: Option<Header>,
    events: Vec<Event>,
    last_seq: u64,
}

impl<'a> TraceBuilder<'a> {
    fn new(path: &'a str) -> Self {
        TraceBuilder { path, header: None, events: vec![], last_seq: 0 }
    }

    fn line(&mut self, no: usize, text: &str) -> Result<(), TraceError> {
        let path = self.path;
        let peek: Peek = serde_json::from_str(text).map_err(|source| jsonl::JsonlError::NotJson {
            name: path.into(),
            line: no,
            source,
        })?;
        if self.header.is_none() {
            return self.header_line(no, text, peek);
        }
        let ev = match peek.kind.as_deref().unwrap_or("") {
            "zmq" => {
                let r: RawZmq = serde_json::from_str(text).map_err(|source| TraceError::Event {
                    path: path.into(),
                    line: no,
                    kind: "zmq",
                    source,
                })?;
                zmq_event(path, no, r)?
            }
            "http" => {
                let r: RawHttp = serde_json::from_str(text).map_err(|source| TraceError::Event {
                    path: path.into(),
                    line: no,
                    kind: "http",
                    source,
                })?;
                Event::Http(HttpEvent {
                    seq: r.seq,
                    line: no,
                    conn: r.conn,
                    dir: r.dir,
                    method: r.method,
                    path: r.path,
                    status: r.status,
                    body: http_body(path, no, r.body.as_deref())?,
                    body_raw: r.body_raw,
                    t: r.t,
                })
            }
            other => return Err(TraceError::Kind { path: path.into(), line: no, kind: other.into() }),
        };
        let t = match &ev {
            Event::Zmq(z) => z.t,
            Event::Http(h) => h.t,
        };
        if let Some(t) = t.filter(|t| t.is_nan() || t.abs() > MAX_TRACE_SECONDS) {
            return Err(TraceError::Time { path: path.into(), line: no, t });
        }
        if ev.seq() <= self.last_seq {
            return Err(TraceError::Seq { path: path.into(), line: no, seq: ev.seq(), previous: self.last_seq });
        }
        self.last_seq = ev.seq();
        self.events.push(ev);
        Ok(())
    }

    fn header_line(&mut self, no: usize, text: &str, peek: Peek) -> Result<(), TraceError> {
        let path = self.path;
        if let Some(f) = peek.format.as_deref().filter(|f| *f != FORMAT) {
            return Err(TraceError::NotATrace { path: path.into(), line: no, format: f.into() });
        }
        let header: Header =
            serde_json::from_str(text).map_err(|source| TraceError::Header { path: path.into(), line: no, source })?;
        if header.format_version != 1 {
            return Err(TraceError::FormatVersion { path: path.into(), line: no, version: header.format_version });
        }
        header.check_unobserved().map_err(|source| TraceError::Unobserved { path: path.into(), line: no, source })?;
        self.header = Some(header);
        Ok(())
    }

    fn finish(self) -> Result<Trace, TraceError> {
        let header = self.header.ok_or_else(|| TraceError::Empty { path: self.path.into() })?;
        Ok(Trace { path: self.path.to_string(), header, events: self.events })
    }
}

/// An HTTP event's `body` as a JSON value, if it is not larger than a bootstrap body may be.
fn http_body(path: &str, no: usize, raw: Option<&RawValue>) -> Result<Option<J>, TraceError> {
    let Some(raw) = raw else { return Ok(None) };
    let len = raw.get().len();
    if len > limits::MAX_HTTP_BODY_BYTES {
        return Err(TraceError::BodyTooLarge { path: path.into(), line: no, len });
    }
    let body: J = serde_json::from_str(raw.get()).map_err(|source| TraceError::Event {
        path: path.into(),
        line: no,
        kind: "http",
        source,
    })?;
    Ok(Some(body).filter(|b| !b.is_null()))
}

fn zmq_event(path: &str, no: usize, r: RawZmq) -> Result<Event, TraceError> {
    let frames = r
        .frames
        .iter()
        .enumerate()
        .map(|(index, f)| {
            hex::decode(f).map_err(|source| TraceError::FrameHex { path: path.into(), line: no, index, source })
        })
        .collect::<Result<_, _>>()?;
    Ok(Event::Zmq(ZmqEvent {
        seq: r.seq,
        line: no,
        side: r.side,
        conn: r.conn,
        socket: r.socket,
        endpoint: r.endpoint,
        bound: r.bound,
        dir: r.dir,
        frames,
        decoded: r.decoded,
        payload_text: r.payload_text,
        note: r.note,
        t: r.t,
        socket_id: r.socket_id,
    }))
}

/// The revision a push trace was recorded with, through the spec's resolver: its header's vLLM release, or
/// for another implementation's recording the revision that implementation speaks ([`Header::source`]).
pub fn revision_for(spec: &Spec, header: &Header) -> Result<Arc<Revision>, ResolveError> {
    revision_in(spec, "push", header)
}

/// [`revision_for`] in any family.
pub fn revision_in(spec: &Spec, family: &str, header: &Header) -> Result<Arc<Revision>, ResolveError> {
    let Some(name) = &header.implementation else {
        return spec.resolve_in_family(family, &header.vllm_version).map(|r| r.revision);
    };
    let version = header.implementation_version.as_deref().unwrap_or_default();
    let fail = |message: String, suggestions: Vec<String>| ResolveError { name: name.clone(), message, suggestions };
    let Some(imp) = spec.implementation(name) else {
        let known: Vec<String> = spec.implementations.iter().map(|i| i.name.clone()).collect();
        return Err(fail(
            format!("implementation `{name}`: not in spec/implementations/ (known: {})", known.join(", ")),
            known,
        ));
    };
    if imp.family != family {
        return Err(fail(format!("implementation `{name}` speaks the {} family, not {family}", imp.family), vec![]));
    }
    if !imp.covers_release(version) {
        return Err(fail(
            format!(
                "implementation_version {version:?}: not a release of {name} the spec covers ({})",
                imp.releases.join(", ")
            ),
            imp.releases.clone(),
        ));
    }
    spec.revision(&imp.speaks)
        .cloned()
        .ok_or_else(|| fail(format!("implementation `{name}` speaks `{}`, which the spec lacks", imp.speaks), vec![]))
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

    fn parse(header: &str) -> Result<Trace, TraceError> {
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
        let e = parse(&format!(r#"{{{base}, "unobserved": ["memory"]}}"#)).unwrap_err().to_string();
        assert!(e.contains("unobserved: \"memory\" is none of"), "{e}");
        let e = parse(&format!(r#"{{{base}, "unobserved": ["transfer_engine_calls"], "transfer_engine_calls": [{{"session": "a:1", "n": 1, "bytes": 8}}]}}"#)).unwrap_err().to_string();
        assert!(e.contains("lists some"), "{e}");
        let e = parse(&format!(
            r#"{{{base}, "unobserved": ["observed_outcome"], "observed_outcome": {{"finished_sending": {{}}}}}}"#
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("has one"), "{e}");
    }

    #[test]
    fn an_implementation_recording_is_read_with_the_revision_it_speaks() {
        let header = |imp: &str| {
            parse(&format!(
                r#"{{"format": "mooncake-trace", "format_version": 1, "vllm_version": "0.12.0", "connector": "c", "scenario": "s", "roles": {{}}{imp}}}"#
            ))
            .unwrap()
            .header
        };
        let spec = Spec::builtin();
        let speaks = &spec.implementation("mooncake").unwrap().speaks;
        let h = header(r#", "implementation": "mooncake", "implementation_version": "0.3.13.post1""#);
        assert_eq!(&revision_for(spec, &h).unwrap().revision, speaks);
        assert_eq!(h.source(), "mooncake-0.3.13.post1");
        assert_eq!(h.revision_field(), "implementation");
        // Without the implementation, 0.12.0 is a vLLM release the spec does not cover.
        let plain = header("");
        assert!(revision_for(spec, &plain).is_err());
        assert_eq!(plain.source(), "0.12.0");
        for (imp, want) in [
            (r#", "implementation": "mooncake", "implementation_version": "0.3.14""#, "not a release of mooncake"),
            (r#", "implementation": "mooncake""#, "not a release of mooncake"),
            (r#", "implementation": "lmcache", "implementation_version": "1.0""#, "implementation `lmcache`: not in"),
        ] {
            let e = revision_for(spec, &header(imp)).unwrap_err().to_string();
            assert!(e.contains(want), "{imp}: {e}");
        }
        let e = revision_in(spec, "pull", &h).unwrap_err().to_string();
        assert!(e.contains("speaks the push family, not pull"), "{e}");
    }
}
