//! Turns what the tap saw into trace events — both sides of every ZeroMQ message, with the real prefiller
//! endpoints, so that the trace reads as if no tap had been there — writes them, checks them, and keeps the
//! header up to date (roles, endpoints, revision).

use std::collections::HashMap;
use std::sync::Arc;

use mooncake_wire::codec::{Codec, TyId};
use mooncake_wire::spec::{Revision, Spec};
use serde_json::{json, Value as J};

use super::live::{revisions_fitting, ConnKey, Fit, Live};
use super::relay::Obs;
use super::workers::Workers;
use super::writer::TraceWriter;
use super::{HttpSeen, Printer, Say, Seen, TapReport};
use indexmap::IndexMap;
use mooncake_trace::checks::HttpX;
use mooncake_trace::conversation::Sent;
use mooncake_trace::finding::Finding;
use mooncake_trace::trace::{Event, Header, HttpDir, HttpEvent, Role, ZmqDir, ZmqEvent, UNOBSERVABLE};

/// Where the trace's revision came from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RevisionFrom {
    /// `--revision`, resolved to this release.
    Given(String),
    /// Read off the first pull request: the newest revision whose rules give back its bytes, and the others
    /// that would too.
    Wire(Vec<String>),
    /// Nothing told yet: the newest generation-2 revision is assumed.
    Assumed,
}

/// What both sides' events of one ZeroMQ message the tap relayed share: the worker's real endpoint, the
/// payload read (its value, or its text when it is no msgpack value) and the decoder connection's socket id.
struct Relayed {
    endpoint: String,
    decoded: Option<J>,
    text: Option<String>,
    socket_id: Option<u64>,
}

/// What the header says about the tap itself (informational fields; readers ignore them).
pub(crate) struct Setup {
    pub(crate) scenario: String,
    pub(crate) bootstrap_url: String,
    pub(crate) upstream: Option<String>,
}

pub(crate) struct Recorder {
    writer: TraceWriter,
    live: Live,
    workers: Arc<Workers>,
    say: Printer,
    setup: Setup,
    started: i64,
    seq: u64,
    zmq: u64,
    http: u64,
    /// Pull requests seen (each opens an exchange).
    requests: usize,
    rev: Arc<Revision>,
    release: String,
    rev_from: RevisionFrom,
    /// Decoder conn of each connection, and of each decoder's transfer-engine session.
    conn_of_key: HashMap<ConnKey, String>,
    conn_of_session: HashMap<String, String>,
    /// The trace's socket id of each decoder connection (numbered in order of first use).
    socket_ids: HashMap<ConnKey, u64>,
    decoders: Vec<String>,
    endpoints: HashMap<String, Vec<String>>,
    any: (Codec, TyId),
    findings: Vec<Finding>,
    finding_count: u64,
    notes: Vec<String>,
    troubles: Vec<String>,
}

/// Why the recorder could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecorderError {
    /// The newest generation-2 revision's codec does not load.
    #[error(transparent)]
    Spec(#[from] mooncake_wire::spec::SpecError),
    /// Its `any` type does not compile.
    #[error(transparent)]
    Compile(#[from] mooncake_wire::codec::CompileError),
    /// The checks cannot run at the revision given.
    #[error(transparent)]
    Live(#[from] super::live::LiveError),
    /// The trace's header could not be written.
    #[error(transparent)]
    Write(#[from] super::writer::WriteError),
}

/// Findings and notes kept for the report (all are printed as they happen): a long tap next to a chatty rogue
/// peer must not grow without bound.
const KEPT: usize = 10_000;

fn newest_gen2() -> Arc<Revision> {
    Spec::builtin()
        .push()
        .revisions
        .iter()
        .rev()
        .find(|r| r.generation == 2)
        .cloned()
        .expect("the spec has generation-2 revisions")
}

impl Recorder {
    /// `revision`: from `--revision` (revision and release), or none (read off the wire).
    pub(crate) fn new(
        writer: TraceWriter,
        live: Live,
        workers: Arc<Workers>,
        say: Printer,
        setup: Setup,
        revision: Option<(Arc<Revision>, String)>,
    ) -> Result<Recorder, RecorderError> {
        let newest = newest_gen2();
        let mut any_codec = Codec::new(newest.clone())?;
        let any_ty = any_codec.type_of("any")?;
        let (rev, release, rev_from) = match revision {
            Some((r, rel)) => (r, rel.clone(), RevisionFrom::Given(rel)),
            None => (newest.clone(), newest.releases.last().cloned().unwrap_or_default(), RevisionFrom::Assumed),
        };
        let mut r = Recorder {
            writer,
            live,
            workers,
            say,
            setup,
            started: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0),
            seq: 0,
            zmq: 0,
            http: 0,
            requests: 0,
            rev: rev.clone(),
            release,
            rev_from: rev_from.clone(),
            conn_of_key: HashMap::new(),
            conn_of_session: HashMap::new(),
            socket_ids: HashMap::new(),
            decoders: vec![],
            endpoints: HashMap::new(),
            any: (any_codec, any_ty),
            findings: vec![],
            finding_count: 0,
            notes: vec![],
            troubles: vec![],
        };
        if matches!(rev_from, RevisionFrom::Given(_)) {
            let f = r.live.set_revision(rev)?;
            r.found(f);
        }
        let h = r.header();
        r.writer.set_header(&h)?;
        r.writer.sync_header()?;
        Ok(r)
    }

    fn note(&mut self, text: String) {
        (self.say)(Say::Note(&text));
        if self.notes.len() < KEPT {
            self.notes.push(text);
        }
    }

    fn found(&mut self, fs: Vec<Finding>) {
        for f in fs {
            (self.say)(Say::Finding(&f));
            self.finding_count += 1;
            if self.findings.len() < KEPT {
                self.findings.push(f);
            }
        }
    }

    fn trouble(&mut self, environment: bool, text: String) {
        if environment {
            (self.say)(Say::Note(&format!("environment: {text}")));
            self.troubles.push(text);
        } else {
            self.note(text);
        }
    }

    /// The header as it stands.
    fn header(&self) -> Header {
        let mut roles = IndexMap::new();
        let mut eps = IndexMap::new();
        if self.http > 0 {
            roles.insert("bootstrap".into(), Role::Bootstrap);
        }
        for w in self.workers.all() {
            roles.insert(w.conn.clone(), Role::Prefiller);
            eps.insert(w.conn.clone(), vec![w.real.clone()]);
        }
        for d in &self.decoders {
            roles.insert(d.clone(), Role::Decoder);
            eps.insert(d.clone(), self.endpoints.get(d).cloned().unwrap_or_default());
        }
        let (from, why) = match &self.rev_from {
            RevisionFrom::Given(_) => ("--revision".to_string(), String::new()),
            RevisionFrom::Wire(c) => (
                "the wire".to_string(),
                format!(
                    " The revision was read off the first pull request ({}); --revision pins it.",
                    if c.len() > 1 {
                        format!("its bytes also fit {}", c[1..].join(", "))
                    } else {
                        "no other revision fits its bytes".into()
                    }
                ),
            ),
            RevisionFrom::Assumed => (
                "assumed: the newest generation-2 revision (no pull request decoded)".to_string(),
                " No pull request told the revision: the newest generation-2 revision is assumed; --revision pins it."
                    .into(),
            ),
        };
        let tap = json!({
            "bootstrap": self.setup.bootstrap_url,
            "upstream": self.setup.upstream,
            "revision": self.rev.revision,
            "revision_from": from,
            "endpoints": self.workers.all().iter().map(|w| (w.real.clone(), json!(w.tap))).collect::<serde_json::Map<_, _>>(),
        });
        Header {
            format: mooncake_trace::trace::FORMAT.into(),
            format_version: 1,
            vllm_version: self.release.clone(),
            connector: "MooncakeConnector".into(),
            implementation: None,
            implementation_version: None,
            family: None,
            connector_generation: Some(2),
            scenario: self.setup.scenario.clone(),
            description: format!("Live traffic of a deployment, recorded by a tap between its decoders and prefillers. A tap sees only the wire: it cannot see transfer-engine calls or scheduler outcomes (`unobserved`).{why}"),
            recorded_by: format!("mooncake-conformance tap {}", env!("CARGO_PKG_VERSION")),
            roles,
            conn_endpoints: eps,
            recorded_at_unix: Some(self.started),
            observed_outcome: json!({}),
            transfer_engine_calls: vec![],
            error: (!self.troubles.is_empty()).then(|| self.troubles.join("; ")),
            unobserved: UNOBSERVABLE.map(String::from).to_vec(),
            recorded_from: None,
            transfer_engine_reads: None,
            tap: Some(tap),
        }
    }

    /// Untyped decode of a payload (as the recorder's `msgspec.msgpack.decode`), or its text.
    fn decoded(&self, payload: &[u8]) -> (Option<J>, Option<String>) {
        match self.any.0.decode_type(self.any.1, payload) {
            Ok(v) => (Some(Codec::to_json(&v)), None),
            Err(_) => (None, std::str::from_utf8(payload).ok().filter(|t| !t.is_empty()).map(String::from)),
        }
    }

    /// The trace's `socket_id` of a decoder connection: one DEALER of the decoder (a pull, a heartbeat).
    fn socket_id(&mut self, key: &ConnKey) -> u64 {
        let next = self.socket_ids.len() as u64 + 1;
        *self.socket_ids.entry(key.clone()).or_insert(next)
    }

    /// The decoder conn of a connection: the first message names it by the decoder's transfer-engine session
    /// (`remote_hostname:remote_port`), so one decoder worker's connections share a conn; a connection whose
    /// first message does not say gets a conn of its own.
    fn decoder_conn(&mut self, key: &ConnKey, decoded: Option<&J>) -> String {
        if let Some(c) = self.conn_of_key.get(key) {
            return c.clone();
        }
        let session = decoded
            .and_then(|d| Some(format!("{}:{}", d.get("remote_hostname")?.as_str()?, d.get("remote_port")?.as_u64()?)));
        let conn = match session.as_ref().and_then(|s| self.conn_of_session.get(s)) {
            Some(c) => c.clone(),
            None => {
                let c = format!("decoder{}", self.decoders.len());
                self.decoders.push(c.clone());
                if let Some(s) = session {
                    self.conn_of_session.insert(s, c.clone());
                }
                c
            }
        };
        self.conn_of_key.insert(key.clone(), conn.clone());
        conn
    }

    fn next_seq(&mut self) -> (u64, usize) {
        self.seq += 1;
        (self.seq, self.seq as usize + 1)
    }

    /// Appends an event to the trace and checks it.
    fn write(&mut self, ev: Event) {
        self.record(&ev);
        let f = self.live.event(ev);
        self.found(f);
    }

    /// Appends an event to the trace (its checks come with the request or reply it carries).
    fn record(&mut self, ev: &Event) {
        if let Err(e) = self.writer.append(ev) {
            self.trouble(true, format!("writing the trace: {e}"));
        }
    }

    pub(crate) fn handle(&mut self, s: Seen) {
        match s {
            Seen::Zmq(Obs::Request { worker, rid, frames }) => self.request(worker, rid, frames),
            Seen::Zmq(Obs::Reply { worker, rid, frames, delivered }) => self.reply(worker, rid, frames, delivered),
            // Forgotten with its connection, so that a long tap's memory stays bounded.
            Seen::Zmq(Obs::Closed { worker, rid }) => {
                self.conn_of_key.remove(&(worker, rid));
            }
            // The tap could not do its job (a socket it could not open): its surroundings failed.
            Seen::Zmq(Obs::Trouble(t)) => self.trouble(true, t),
            Seen::Http(h) => self.http_exchange(h),
            Seen::Trouble { environment, text } => self.trouble(environment, text),
        }
    }

    fn worker(&self, worker: usize) -> (String, String) {
        self.workers
            .get(worker)
            .map(|w| (w.conn, w.real))
            .unwrap_or_else(|| (format!("prefiller{worker}"), String::new()))
    }

    /// A pull request (or heartbeat) the tap relayed from a decoder to worker `worker`: the decoder's send and
    /// the prefiller's receive, and the request's checks. The first request of a tap not told its revision
    /// tells it.
    fn request(&mut self, worker: usize, rid: Vec<u8>, frames: Vec<Vec<u8>>) {
        let (pconn, real) = self.worker(worker);
        let payload = frames.last().cloned().unwrap_or_default();
        // The revision read off the first pull request: the decode that tells it is the request's decode.
        let fit =
            if self.rev_from == RevisionFrom::Assumed { revisions_fitting(&payload, Some(self.seq + 1)) } else { None };
        if let Some(Fit { revisions, .. }) = &fit {
            self.adopt_revision(revisions);
        }
        let (decoded, text) = self.decoded(&payload);
        let key = (worker, rid.clone());
        // One decoder connection of the tap's ROUTER is one DEALER of the decoder (a pull, a heartbeat).
        let socket_id = Some(self.socket_id(&key));
        let dconn = self.decoder_conn(&key, decoded.as_ref());
        let eps = self.endpoints.entry(dconn.clone()).or_default();
        if !eps.contains(&real) {
            eps.push(real.clone());
        }
        let m = Relayed { endpoint: real, decoded, text, socket_id };
        let d = self.zmq_event(&m, Role::Decoder, dconn.clone(), ZmqDir::Send, frames.clone());
        let (seq, line) = (d.seq, d.line);
        let d = Event::Zmq(d);
        self.record(&d);
        let p = self.zmq_event(&m, Role::Prefiller, pconn, ZmqDir::Recv, std::iter::once(rid).chain(frames).collect());
        let p = Event::Zmq(p);
        self.record(&p);
        self.zmq += 2;
        let x = Sent {
            index: self.requests,
            decoder: dconn,
            endpoint: m.endpoint,
            request: payload,
            seq: Some(seq),
            line: Some(line),
        };
        self.requests += 1;
        let f = self.live.request(key, x, vec![d, p], fit.map(|f| f.request));
        self.found(f);
    }

    /// Takes the revision read off the first pull request as the trace's (`fits`: the revisions whose rules
    /// give back its bytes, newest first) and checks what the tap kept so far with it.
    fn adopt_revision(&mut self, fits: &[Arc<Revision>]) {
        let first = fits[0].clone();
        self.rev = first.clone();
        self.release = first.releases.last().cloned().unwrap_or_default();
        self.rev_from = RevisionFrom::Wire(fits.iter().map(|r| r.revision.clone()).collect());
        let also = if fits.len() > 1 {
            format!(
                "; its bytes also fit {}",
                fits[1..].iter().map(|r| r.revision.as_str()).collect::<Vec<_>>().join(", ")
            )
        } else {
            String::new()
        };
        self.note(format!("revision read off the first pull request: {}{also} (--revision pins it)", first.revision));
        match self.live.set_revision(first) {
            Ok(f) => self.found(f),
            Err(e) => self.note(format!("cannot check {}: {e}", self.rev.revision)),
        }
    }

    /// A reply the tap relayed from worker `worker` to a decoder connection: the prefiller's send and, when
    /// the connection was still there to take it, the decoder's receive, and the reply's checks.
    fn reply(&mut self, worker: usize, rid: Vec<u8>, frames: Vec<Vec<u8>>, delivered: bool) {
        let (pconn, real) = self.worker(worker);
        let key = (worker, rid.clone());
        // One decoder connection of the tap's ROUTER is one DEALER of the decoder (a pull, a heartbeat).
        let socket_id = Some(self.socket_id(&key));
        let payload = frames.last().cloned().unwrap_or_default();
        let (decoded, text) = self.decoded(&payload);
        let dconn = self.decoder_conn(&key, None);
        let m = Relayed { endpoint: real, decoded, text, socket_id };
        let pf = std::iter::once(rid).chain(frames.iter().cloned()).collect();
        let p = self.zmq_event(&m, Role::Prefiller, pconn, ZmqDir::Send, pf);
        self.zmq += 1;
        if !delivered {
            let pseq = p.seq;
            self.write(Event::Zmq(p));
            // The decoder never received it: there is no decoder event to record.
            self.note(format!("seq {pseq}: a reply of {} to {dconn} could not be delivered: that decoder connection is gone (libzmq drops it, as it would have without the tap)", m.endpoint));
            return;
        }
        let p = Event::Zmq(p);
        self.record(&p);
        let d = self.zmq_event(&m, Role::Decoder, dconn, ZmqDir::Recv, frames);
        let (seq, line) = (d.seq, d.line);
        let d = Event::Zmq(d);
        self.record(&d);
        self.zmq += 1;
        let f = self.live.reply(key, payload, seq, line, vec![p, d]);
        self.found(f);
    }

    /// The next event of a message the tap relayed, as one side saw it: the decoder's DEALER, which connects,
    /// or the prefiller's ROUTER, which binds (its frames start with the connection's routing id).
    fn zmq_event(&mut self, m: &Relayed, side: Role, conn: String, dir: ZmqDir, frames: Vec<Vec<u8>>) -> ZmqEvent {
        let (seq, line) = self.next_seq();
        let (socket, bound) = if side == Role::Decoder { ("DEALER", false) } else { ("ROUTER", true) };
        ZmqEvent {
            seq,
            line,
            side,
            conn,
            socket: socket.into(),
            endpoint: m.endpoint.clone(),
            bound,
            dir,
            frames,
            decoded: raw_json(m.decoded.as_ref()),
            payload_text: m.text.clone(),
            note: bound.then(|| mooncake_trace::trace::ROUTING_ID_NOTE.to_string()),
            t: None,
            socket_id: m.socket_id,
        }
    }

    fn http_exchange(&mut self, h: HttpSeen) {
        let body = |raw: &[u8]| -> Option<J> {
            if raw.is_empty() {
                None
            } else {
                serde_json::from_slice(raw).ok()
            }
        };
        let text = |raw: &[u8]| String::from_utf8_lossy(raw).into_owned();
        let (qseq, qline) = self.next_seq();
        let req = HttpEvent {
            seq: qseq,
            line: qline,
            conn: "bootstrap".into(),
            dir: HttpDir::Request,
            method: h.method.clone(),
            path: h.path.clone(),
            status: None,
            body: body(&h.request),
            body_raw: text(&h.request),
            t: None,
        };
        let (rseq, rline) = self.next_seq();
        let resp = HttpEvent {
            seq: rseq,
            line: rline,
            conn: "bootstrap".into(),
            dir: HttpDir::Response,
            method: h.method.clone(),
            path: h.path.clone(),
            status: Some(h.status),
            body: body(&h.response),
            body_raw: text(&h.response),
            t: None,
        };
        self.http += 2;
        let x = HttpX {
            method: h.method,
            path: h.path,
            request: req.body.clone(),
            status: h.status,
            response: resp.body.clone(),
            seq: Some(rseq),
            line: Some(rline),
        };
        self.write(Event::Http(req));
        self.write(Event::Http(resp));
        let f = self.live.http(x);
        self.found(f);
    }

    /// Once a second: exchanges past the reply timeout are checked; the header catches up with what traffic
    /// told.
    pub(crate) fn tick(&mut self) {
        let f = self.live.tick();
        self.found(f);
        self.sync_header();
    }

    fn sync_header(&mut self) {
        let h = self.header();
        if let Err(e) = self.writer.set_header(&h).and_then(|()| self.writer.sync_header()) {
            self.trouble(true, format!("rewriting the trace header: {e}"));
        }
    }

    /// The tap stopped: the last checks, the final header.
    pub(crate) fn finish(mut self) -> TapReport {
        let live = std::mem::replace(&mut self.live, Live::new(None));
        let (f, notes, checked) = live.finish();
        self.found(f);
        for n in notes {
            self.note(n);
        }
        if self.rev_from == RevisionFrom::Assumed && self.zmq > 0 {
            self.note(format!("no pull request told the revision: the trace says {} (the newest generation-2 revision); --revision pins it", self.rev.revision));
        }
        self.sync_header();
        TapReport {
            path: self.writer.path().to_path_buf(),
            events: self.seq,
            zmq: self.zmq,
            http: self.http,
            exchanges: checked,
            requests: self.requests as u64,
            revision: self.rev.revision.clone(),
            findings: self.findings,
            finding_count: self.finding_count,
            notes: self.notes,
            troubles: self.troubles,
        }
    }
}

/// A decoded payload as the trace keeps it: its JSON text.
fn raw_json(v: Option<&J>) -> Option<Box<serde_json::value::RawValue>> {
    serde_json::value::to_raw_value(v?).ok()
}
