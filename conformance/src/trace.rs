//! The recorded-trace format (`conformance/traces/README.md`, format_version 1): a typed parser whose errors
//! name the line and field. Unknown fields are ignored, as the format requires.

use std::path::Path;

use indexmap::IndexMap;
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
}

impl Header {
    pub fn generation(&self) -> u32 {
        self.connector_generation.unwrap_or(2)
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

    pub fn from_lines(path: &str, lines: Vec<jsonl::Line>) -> Result<Trace, String> {
        let mut it = lines.into_iter();
        let first = it.next().ok_or_else(|| format!("{path}: empty trace"))?;
        let header: Header = serde_json::from_value(first.value).map_err(|e| format!("{path}:{}: header: {e}", first.no))?;
        if header.format != FORMAT {
            return Err(format!("{path}:{}: header: format is {:?}, expected {FORMAT:?}", first.no, header.format));
        }
        if header.format_version != 1 {
            return Err(format!("{path}:{}: header: format_version {} is not supported (1)", first.no, header.format_version));
        }
        let mut events = Vec::new();
        let mut last_seq = 0;
        for l in it {
            let kind = l.value.get("kind").and_then(J::as_str).unwrap_or("").to_string();
            let ev = match kind.as_str() {
                "zmq" => {
                    let r: RawZmq = serde_json::from_value(l.value).map_err(|e| format!("{path}:{}: zmq event: {e}", l.no))?;
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
                    let r: RawHttp = serde_json::from_value(l.value).map_err(|e| format!("{path}:{}: http event: {e}", l.no))?;
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
