//! The tap's checks while traffic flows: every event through the same per-event checks as `validate`
//! ([`EventChecker`]), every bootstrap exchange through the revision's registry ([`HttpChecker`]), and every
//! decoder exchange, once it ended (a terminal reply, or no reply within the reply timeout), through the
//! protocol rules ([`ExchangeChecker`]) in the order the decoders sent them — so the findings are those
//! `validate` gives the finished trace. Until the revision is known (no `--revision`, nothing decoded yet)
//! what arrives is kept and checked once it is.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::codec::Codec;
use mooncake_wire::proto::{Inbound, WireProfile};
use mooncake_wire::spec::{Revision, Spec};

use mooncake_trace::checks::{heartbeat_reply_problem, ExchangeChecker, HttpChecker, HttpX};
use mooncake_trace::conversation::{decode_count, ends_exchange, Decoded, Exchange, Payload, Sent};
use mooncake_trace::finding::{CheckId, Finding};
use mooncake_trace::trace::Event;
use mooncake_trace::validate::EventChecker;

/// Why the checks cannot run at a revision.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LiveError {
    /// The spec has no built-in codec for it.
    #[error("not a built-in revision")]
    NotBuiltin,
    /// The protocol cores cannot speak it.
    #[error(transparent)]
    Profile(#[from] mooncake_wire::proto::ProfileError),
    /// Its bootstrap server's spec does not load.
    #[error(transparent)]
    Bootstrap(#[from] mooncake_wire::spec::SpecError),
}

/// A decoder connection: (tapped worker, routing id).
pub(crate) type ConnKey = (usize, Vec<u8>);

enum Item {
    Event(Event),
    Http(HttpX),
    /// A decoder's request, the events that recorded it (decoder and prefiller side) and its reading, if the
    /// revision was read off it.
    Request(ConnKey, Sent, Vec<Event>, Option<Box<Inbound>>),
    /// A prefiller's reply (bytes, seq and line of the decoder's event) and the events that recorded it.
    Reply(ConnKey, Vec<u8>, u64, usize, Vec<Event>),
}

struct Open {
    key: ConnKey,
    x: Exchange,
    sent: Instant,
    ended: bool,
}

/// A lease heartbeat (0.34.0) waiting for its reply.
struct OpenBeat {
    key: ConnKey,
    sent: Sent,
}

struct Checkers {
    profile: WireProfile,
    events: EventChecker,
    http: Option<HttpChecker>,
    exchanges: ExchangeChecker,
}

pub(crate) struct Live {
    checkers: Option<Checkers>,
    backlog: Vec<(Item, Instant)>,
    /// Exchanges in the order their requests were sent, until they are checked.
    open: VecDeque<Open>,
    /// Connections that sent something that is no pull request: what comes back on them is not judged.
    quiet: HashSet<ConnKey>,
    /// Lease heartbeats waiting for their reply.
    beats: Vec<OpenBeat>,
    reply_timeout: Option<Duration>,
    /// Exchanges checked so far.
    pub(crate) exchanges: u64,
}

/// What a decoder's request says about the deployment's revision: the generation-2 revisions whose msgspec
/// rules read it (as their prefiller reads a payload: a lease heartbeat where the revision has them, else a
/// pull) and write it back byte for byte, newest first, and the request as the first of them reads it.
pub(crate) struct Fit {
    pub(crate) revisions: Vec<Arc<Revision>>,
    /// The request, read: the conversation's decode of it (it is not decoded again).
    pub(crate) request: Inbound,
}

/// The revisions a request fits (see [`Fit`]), or `None` when none reads it back. The request is read once
/// per revision, newest first, until one reads it back; whether an older revision fits too is then whether
/// it writes that message to the same bytes (what its decode would have to give back), so it is not decoded
/// again. `seq`: the trace event of the request.
pub(crate) fn revisions_fitting(request: &[u8], seq: Option<u64>) -> Option<Fit> {
    let profiles: Vec<WireProfile> = Spec::builtin()
        .push()
        .revisions
        .iter()
        .rev()
        .filter(|r| r.generation == 2)
        .filter_map(|r| WireProfile::builtin(&r.revision).ok())
        .collect();
    let writes_back = |p: &WireProfile, r: &Inbound| match r {
        Inbound::Heartbeat(h) => p.has_heartbeat() && p.encode_heartbeat(h).is_ok_and(|b| b == request),
        Inbound::Pull(Ok(m)) => p.encode_metadata(m).is_ok_and(|b| b == request),
        Inbound::Pull(Err(_)) => false,
    };
    let (first, read) = profiles.iter().enumerate().find_map(|(i, p)| {
        decode_count::count(seq);
        let r = p.read_inbound(request);
        writes_back(p, &r).then_some((i, r))
    })?;
    let revisions = profiles[first..]
        .iter()
        .enumerate()
        .filter(|(i, p)| *i == 0 || writes_back(p, &read))
        .map(|(_, p)| p.revision.clone())
        .collect();
    Some(Fit { revisions, request: read })
}

impl Live {
    /// `reply_timeout`: how long an exchange may wait for its terminal reply before it is checked as it is
    /// (default: the revision's abort timeout plus vLLM's 60 s of decoder patience).
    pub(crate) fn new(reply_timeout: Option<Duration>) -> Live {
        Live {
            checkers: None,
            backlog: vec![],
            open: VecDeque::new(),
            quiet: HashSet::new(),
            beats: vec![],
            reply_timeout,
            exchanges: 0,
        }
    }

    /// The revision the checks run at, once known (the tests look at it).
    #[cfg(test)]
    pub(crate) fn revision(&self) -> Option<&Arc<Revision>> {
        self.checkers.as_ref().map(|c| &c.profile.revision)
    }

    /// The revision is known: check everything kept so far.
    pub(crate) fn set_revision(&mut self, rev: Arc<Revision>) -> Result<Vec<Finding>, LiveError> {
        if self.checkers.is_some() {
            return Ok(vec![]);
        }
        let profile = WireProfile::new(rev.clone(), Codec::builtin(&rev.revision).ok_or(LiveError::NotBuiltin)?)?;
        let http = BootstrapSpec::new(rev.clone()).transpose()?.map(HttpChecker::new);
        self.checkers =
            Some(Checkers { events: EventChecker::new(rev), http, exchanges: ExchangeChecker::new(&profile), profile });
        let mut out = vec![];
        for (item, at) in std::mem::take(&mut self.backlog) {
            out.extend(self.feed(item, at));
        }
        Ok(out)
    }

    fn timeout(&self) -> Duration {
        match (self.reply_timeout, &self.checkers) {
            (Some(t), _) => t,
            (None, Some(c)) => c.profile.abort_timeout + Duration::from_secs(60),
            (None, None) => Duration::from_secs(540),
        }
    }

    pub(crate) fn event(&mut self, ev: Event) -> Vec<Finding> {
        self.feed(Item::Event(ev), Instant::now())
    }
    pub(crate) fn http(&mut self, h: HttpX) -> Vec<Finding> {
        self.feed(Item::Http(h), Instant::now())
    }
    /// A decoder sent `sent.request` on connection `key`, recorded as `events`: decoded once the revision is
    /// known (unless `decoded`: the decode that told the revision), and the events checked with that decode.
    pub(crate) fn request(
        &mut self,
        key: ConnKey,
        sent: Sent,
        events: Vec<Event>,
        decoded: Option<Inbound>,
    ) -> Vec<Finding> {
        self.feed(Item::Request(key, sent, events, decoded.map(Box::new)), Instant::now())
    }
    /// The prefiller answered on connection `key` (the decoder's event `seq`, `line`), recorded as `events`:
    /// decoded once, and the events checked with that decode.
    pub(crate) fn reply(
        &mut self,
        key: ConnKey,
        bytes: Vec<u8>,
        seq: u64,
        line: usize,
        events: Vec<Event>,
    ) -> Vec<Finding> {
        self.feed(Item::Reply(key, bytes, seq, line, events), Instant::now())
    }

    fn feed(&mut self, item: Item, at: Instant) -> Vec<Finding> {
        let Some(c) = self.checkers.as_mut() else {
            self.backlog.push((item, at));
            return vec![];
        };
        let mut out = match item {
            Item::Event(ev) => c.events.check(&ev),
            Item::Http(h) => c.http.as_mut().map(|hc| hc.push(&h)).unwrap_or_default(),
            Item::Request(key, sent, events, decoded) => self.open_request(key, sent, &events, decoded, at),
            Item::Reply(key, bytes, seq, line, events) if self.beats.iter().any(|b| b.key == key) => {
                self.heartbeat_reply(key, bytes, (seq, line), &events)
            }
            Item::Reply(key, bytes, seq, line, events) => self.exchange_reply(key, bytes, (seq, line), &events),
        };
        out.extend(self.drain(at, false));
        out
    }

    /// A decoder's request: a lease heartbeat (its reply awaited) or a pull (opened as an exchange), its
    /// events checked with the payload read once.
    fn open_request(
        &mut self,
        key: ConnKey,
        sent: Sent,
        events: &[Event],
        decoded: Option<Box<Inbound>>,
        at: Instant,
    ) -> Vec<Finding> {
        let c = self.checkers.as_mut().expect("fed with checkers");
        let mut out = vec![];
        let read = match decoded {
            Some(r) => *r,
            None => {
                decode_count::count(sent.seq);
                c.profile.read_inbound(&sent.request)
            }
        };
        let m = match read {
            Inbound::Heartbeat(h) => {
                let payload = Payload { bytes: sent.request.clone(), decoded: Some(Ok(h)) };
                for ev in events {
                    out.extend(c.events.check_decoded(ev, Some((&c.profile, Decoded::Heartbeat(&payload)))));
                }
                self.beats.push(OpenBeat { key, sent });
                return out;
            }
            Inbound::Pull(m) => m,
        };
        let x = Exchange::decoded(sent, Some(m));
        for ev in events {
            out.extend(c.events.check_decoded(ev, Some((&c.profile, Decoded::Request(&x.request)))));
        }
        // A request that is no pull (its own finding already) has nothing to wait for: it must not hold back the
        // checks of the exchanges after it, and whatever answers it is not judged.
        let pull = x.request.value().is_some();
        if !pull {
            self.quiet.insert(key.clone());
        }
        self.open.push_back(Open { key, x, sent: at, ended: !pull });
        out
    }

    /// A heartbeat's one reply (LEASE-REPLY), decoded once. What answers it later is not judged, as for
    /// anything that is no pull.
    fn heartbeat_reply(
        &mut self,
        key: ConnKey,
        bytes: Vec<u8>,
        (seq, line): (u64, usize),
        events: &[Event],
    ) -> Vec<Finding> {
        let c = self.checkers.as_mut().expect("fed with checkers");
        let mut out = vec![];
        let i = self.beats.iter().position(|b| b.key == key).expect("a heartbeat waits on this key");
        let b = self.beats.remove(i);
        let reply = Payload::reply(Some(&c.profile), bytes, Some(seq));
        for ev in events {
            out.extend(c.events.check_decoded(ev, Some((&c.profile, Decoded::Reply(&reply)))));
        }
        if let Some(problem) = heartbeat_reply_problem(&c.profile, reply.value()) {
            out.push(
                Finding::new(CheckId::LeaseReply, problem)
                    .at(Some(seq), Some(line))
                    .about(format!("heartbeat ({} → {})", b.sent.decoder, b.sent.endpoint)),
            );
        }
        self.quiet.insert(key);
        out
    }

    /// A prefiller's reply: into the exchange waiting for it (or the last one on its connection, after the
    /// terminal reply), decoded once; on a connection with no pull waiting, `SEQ-TERMINAL`.
    fn exchange_reply(
        &mut self,
        key: ConnKey,
        bytes: Vec<u8>,
        (seq, line): (u64, usize),
        events: &[Event],
    ) -> Vec<Finding> {
        let c = self.checkers.as_mut().expect("fed with checkers");
        let p = Some(&c.profile);
        let mut out = vec![];
        let open = match self.open.iter_mut().find(|o| o.key == key && !o.ended) {
            Some(o) => Some(o),
            // After the terminal reply, before the exchange was checked: the checks see it.
            None => self.open.iter_mut().rev().find(|o| o.key == key),
        };
        // The reply is decoded once: into its exchange, or on its own (for its events' checks) when no exchange
        // waits for it.
        let alone;
        let mut missing = false;
        let payload = match open {
            Some(o) => {
                let ended = o.ended;
                let r = o.x.push_reply(p, bytes, Some(seq), Some(line));
                if !ended {
                    o.ended = ends_exchange(p, &r.payload);
                }
                Some(&r.payload)
            }
            None => {
                missing = !self.quiet.contains(&key);
                alone = (!events.is_empty()).then(|| Payload::reply(p, bytes, Some(seq)));
                alone.as_ref()
            }
        };
        for ev in events {
            out.extend(c.events.check_decoded(ev, payload.map(|d| (&c.profile, Decoded::Reply(d)))));
        }
        if missing {
            out.push(
                Finding::new(
                    CheckId::SeqTerminal,
                    "a reply on a connection with no pull waiting for one (after the terminal reply, or before any \
                     request)",
                )
                .at(Some(seq), Some(line))
                .about("reply"),
            );
        }
        out
    }

    /// Checks the exchanges that ended (or timed out), in the order they were sent.
    fn drain(&mut self, now: Instant, all: bool) -> Vec<Finding> {
        let timeout = self.timeout();
        let Some(c) = self.checkers.as_mut() else { return vec![] };
        let mut out = vec![];
        while let Some(o) = self.open.front() {
            if !(all || o.ended || now.duration_since(o.sent) >= timeout) {
                break;
            }
            let o = self.open.pop_front().expect("front");
            out.extend(c.exchanges.push(&o.x));
            self.exchanges += 1;
        }
        out
    }

    /// Time passed: exchanges that waited longer than the reply timeout are checked as they are (a prefiller
    /// that disappeared leaves a pull without a terminal reply).
    pub(crate) fn tick(&mut self) -> Vec<Finding> {
        self.drain(Instant::now(), false)
    }

    /// The tap stops: exchanges still waiting for a reply cannot be judged (returned as notes); the rest is
    /// checked, and the rules that wait for a later exchange are settled. Also returns how many exchanges
    /// were checked in all.
    pub(crate) fn finish(mut self) -> (Vec<Finding>, Vec<String>, u64) {
        let mut notes = vec![];
        let mut out = vec![];
        if self.checkers.is_none() && !self.backlog.is_empty() {
            let events: usize = self
                .backlog
                .iter()
                .map(|(item, _)| match item {
                    Item::Event(_) => 1,
                    Item::Http(_) => 0,
                    Item::Request(_, _, events, _) | Item::Reply(_, _, _, _, events) => events.len(),
                })
                .sum();
            notes.push(format!("{events} events were not checked: the revision never became known (no pull request decoded; give --revision)"));
        }
        let waiting: Vec<Open> = self
            .open
            .iter()
            .filter(|o| !o.ended)
            .map(|o| Open { key: o.key.clone(), x: o.x.clone(), sent: o.sent, ended: false })
            .collect();
        self.open.retain(|o| o.ended);
        for b in &self.beats {
            notes.push(format!(
                "a heartbeat ({} → {}, seq {}) was still waiting for its reply when the tap stopped: not checked",
                b.sent.decoder,
                b.sent.endpoint,
                b.sent.seq.unwrap_or(0)
            ));
        }
        for o in &waiting {
            notes.push(format!(
                "exchange {} ({} → {}, seq {}) was still waiting for its terminal reply when the tap stopped: not checked",
                o.x.index + 1,
                o.x.decoder,
                o.x.endpoint,
                o.x.seq.unwrap_or(0)
            ));
        }
        out.extend(self.drain(Instant::now(), true));
        if let Some(c) = self.checkers.take() {
            out.extend(c.exchanges.finish());
        }
        (out, notes, self.exchanges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mooncake_trace::trace::{Role, Trace, ZmqDir};

    /// The request and the reply of the bundled 0.33.0 single pull.
    fn pull() -> (Vec<u8>, Vec<u8>) {
        let t = Trace::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/vllm-0.33.0/a_single_success.jsonl"),
        )
        .unwrap();
        let d = |dir| t.zmq().find(|z| z.side == Role::Decoder && z.dir == dir).unwrap().frames[0].clone();
        (d(ZmqDir::Send), d(ZmqDir::Recv))
    }

    fn x(index: usize, request: &[u8]) -> Sent {
        Sent {
            index,
            decoder: "decoder0".into(),
            endpoint: "tcp://127.0.0.1:1".into(),
            request: request.to_vec(),
            seq: Some(1),
            line: Some(2),
        }
    }

    fn checks(f: &[Finding]) -> Vec<CheckId> {
        f.iter().map(|f| f.check).collect()
    }

    #[test]
    fn exchanges_are_checked_once_they_ended_or_waited_too_long() {
        let (req, reply) = pull();
        // 0.34.0 sends 0.33.0's pull byte for byte: both fit, the newest first.
        let fits: Vec<String> =
            revisions_fitting(&req, None).unwrap().revisions.iter().map(|r| r.revision.clone()).take(2).collect();
        assert_eq!(fits, ["vllm-0.34.0", "vllm-0.33.0"]);
        assert!(revisions_fitting(b"garbage", None).is_none());
        let mut live = Live::new(Some(Duration::from_millis(50)));
        let decodes = mooncake_trace::conversation::decode_count::decodes();
        // Before the revision is known nothing is judged; then the backlog is.
        assert!(live.request((0, vec![1]), x(0, &req), vec![], None).is_empty());
        assert!(live.reply((0, vec![1]), reply.clone(), 3, 4, vec![]).is_empty());
        assert_eq!(live.exchanges, 0);
        assert!(live.set_revision(Spec::builtin().revision("vllm-0.33.0").unwrap().clone()).unwrap().is_empty());
        assert_eq!(live.exchanges, 1, "a pull and its FINISH");
        // A pull nobody answers is judged once the reply timeout has passed.
        assert!(live.request((0, vec![2]), x(1, &req), vec![], None).is_empty());
        assert!(live.tick().is_empty());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(checks(&live.tick()), [CheckId::SeqTerminal]);
        // A reply after the terminal one, its exchange already judged.
        assert_eq!(checks(&live.reply((0, vec![1]), reply.clone(), 5, 6, vec![])), [CheckId::SeqTerminal]);
        // Something that is no pull holds nothing back, and what answers it is not judged.
        assert!(live.request((0, vec![3]), x(2, b"garbage"), vec![], None).is_empty());
        assert!(live.reply((0, vec![3]), reply.clone(), 7, 8, vec![]).is_empty());
        assert_eq!(live.exchanges, 3);
        // The tap stops while a pull waits: nothing to judge, a note says so.
        assert!(live.request((0, vec![4]), x(3, &req), vec![], None).is_empty());
        // Each payload that reached an exchange was decoded once, when it did: the four requests and the
        // first reply (the backlog, once the revision was known); the replies no exchange waited for and no
        // event needs, never.
        assert_eq!(mooncake_trace::conversation::decode_count::decodes() - decodes, 5);
        let (f, notes, n) = live.finish();
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("still waiting for its terminal reply"));
        assert_eq!(n, 3);
    }

    fn bundled_traces() -> Vec<Trace> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces");
        let mut out = vec![];
        for f in mooncake_trace::walk::files(&root, 1, &|p| mooncake_trace::walk::has_extension(p, "jsonl")).unwrap() {
            let t = Trace::load(&f).unwrap();
            if t.header.generation() == 2 && t.zmq().any(|z| z.side == Role::Decoder) {
                out.push(t);
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// The revisions a request fits, by the spec codec's decode and re-encode under each revision: what
    /// [`revisions_fitting`] gives with one decode (of the typed layer) per revision tried.
    fn fitting_by_spec_codec(request: &[u8]) -> Vec<String> {
        let mut out: Vec<String> = Spec::builtin()
            .push()
            .revisions
            .iter()
            .filter(|r| r.generation == 2)
            .filter(|r| {
                let c = Codec::builtin(&r.revision).unwrap();
                let back = |m: &str| c.decode(m, request).ok().and_then(|v| c.encode(m, &v).ok().map(|b| (v, b)));
                // A heartbeat (with ids) where the revision has one, as its prefiller reads it; else a pull.
                if r.message("MooncakeLeaseHeartbeat").is_some() {
                    if let Some((v, b)) = back("MooncakeLeaseHeartbeat") {
                        let ids = v
                            .field("lease_transfer_ids")
                            .and_then(|l| l.items())
                            .is_some_and(|mut l| l.next().is_some());
                        if ids {
                            return b == request;
                        }
                    }
                }
                back("MooncakeXferMetadata").is_some_and(|(_, b)| b == request)
            })
            .map(|r| r.revision.clone())
            .collect();
        out.reverse();
        out
    }

    #[test]
    fn the_revision_read_off_a_request_is_the_spec_codecs() {
        let mut requests = 0;
        for t in bundled_traces() {
            for z in t.zmq().filter(|z| z.side == Role::Decoder && z.dir == ZmqDir::Send) {
                let want = fitting_by_spec_codec(&z.frames[0]);
                let got = revisions_fitting(&z.frames[0], None);
                let got: Vec<String> =
                    got.map(|f| f.revisions.iter().map(|r| r.revision.clone()).collect()).unwrap_or_default();
                assert_eq!(got, want, "{} seq {}", t.path, z.seq);
                requests += 1;
            }
        }
        assert!(requests > 100, "{requests}");
    }

    /// The tap decodes each payload once: a request's decode (the one that told the revision, for the
    /// first) serves its exchange and the checks of both its events, a reply's likewise. Reading the revision
    /// off the first request decodes it once per newer revision that does not read it back.
    #[test]
    fn the_tap_decodes_each_payload_once() {
        for t in bundled_traces() {
            let mut live = Live::new(Some(Duration::from_secs(600)));
            let prefiller_side: Vec<&mooncake_trace::trace::ZmqEvent> =
                t.zmq().filter(|z| z.side == Role::Prefiller).collect();
            let mut used = vec![false; prefiller_side.len()];
            let mut counterpart = |z: &mooncake_trace::trace::ZmqEvent| {
                let dir = if z.dir == ZmqDir::Send { ZmqDir::Recv } else { ZmqDir::Send };
                let i = (0..prefiller_side.len()).find(|&i| {
                    !used[i] && prefiller_side[i].dir == dir && prefiller_side[i].frames.last() == z.frames.last()
                })?;
                used[i] = true;
                Some(Event::Zmq(prefiller_side[i].clone()))
            };
            mooncake_trace::conversation::decode_count::take();
            let (mut first, mut findings, mut tried) = (None, vec![], 0);
            for (n, z) in t.zmq().filter(|z| z.side == Role::Decoder).enumerate() {
                let key = (0, z.conn.as_bytes().to_vec());
                let payload = z.frames.last().unwrap().clone();
                let p = counterpart(z);
                if z.dir == ZmqDir::Send {
                    let fit = if live.revision().is_none() {
                        let fit = revisions_fitting(&payload, Some(z.seq)).unwrap();
                        tried = mooncake_trace::conversation::decode_count::take()[&Some(z.seq)];
                        findings.extend(live.set_revision(fit.revisions[0].clone()).unwrap());
                        first = Some(z.seq);
                        Some(fit.request)
                    } else {
                        None
                    };
                    let sent = Sent {
                        index: n,
                        decoder: z.conn.clone(),
                        endpoint: z.endpoint.clone(),
                        request: payload,
                        seq: Some(z.seq),
                        line: Some(z.line),
                    };
                    let events = [Some(Event::Zmq(z.clone())), p].into_iter().flatten().collect();
                    findings.extend(live.request(key, sent, events, fit));
                } else {
                    let events = [p, Some(Event::Zmq(z.clone()))].into_iter().flatten().collect();
                    findings.extend(live.reply(key, payload, z.seq, z.line, events));
                }
            }
            let per_event = mooncake_trace::conversation::decode_count::take();
            let (f, _, _) = live.finish();
            findings.extend(f);
            assert!(findings.is_empty(), "{}: {findings:?}", t.path);
            let decoder_side: Vec<Option<u64>> =
                t.zmq().filter(|z| z.side == Role::Decoder).map(|z| Some(z.seq)).filter(|s| *s != first).collect();
            assert_eq!(per_event.keys().copied().collect::<Vec<_>>(), decoder_side, "{}", t.path);
            let twice: Vec<_> = per_event.iter().filter(|(_, n)| **n != 1).collect();
            assert!(twice.is_empty(), "{}: payloads decoded more than once: {twice:?}", t.path);
            // The first request: one decode per revision tried, newest first, until one read it back.
            let rev = mooncake_trace::trace::revision_for(Spec::builtin(), &t.header).unwrap();
            let newer = Spec::builtin()
                .push()
                .revisions
                .iter()
                .rev()
                .filter(|r| r.generation == 2)
                .position(|r| r.revision == rev.revision)
                .unwrap();
            assert!(tried >= 1 && tried <= newer + 1, "{}: {tried} decodes of the first request", t.path);
            assert_eq!(per_event.get(&first).copied().unwrap_or(0), 0, "{}: the first request decoded again", t.path);
        }
    }
}
