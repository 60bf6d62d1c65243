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
use mooncake_wire::proto::WireProfile;
use mooncake_wire::spec::{Revision, Spec};

use crate::checks::{ExchangeChecker, HttpChecker, HttpX};
use crate::conversation::{ends_exchange, Exchange, Sent};
use crate::finding::{CheckId, Finding};
use crate::trace::Event;
use crate::validate::EventChecker;

/// A decoder connection: (tapped worker, routing id).
pub type ConnKey = (usize, Vec<u8>);

enum Item {
    Event(Event),
    Http(HttpX),
    Request(ConnKey, Sent),
    Reply(ConnKey, Vec<u8>, u64, usize),
}

struct Open {
    key: ConnKey,
    x: Exchange,
    sent: Instant,
    ended: bool,
}

struct Checkers {
    profile: WireProfile,
    events: EventChecker,
    http: Option<HttpChecker>,
    exchanges: ExchangeChecker,
}

pub struct Live {
    checkers: Option<Checkers>,
    backlog: Vec<(Item, Instant)>,
    /// Exchanges in the order their requests were sent, until they are checked.
    open: VecDeque<Open>,
    /// Connections that sent something that is no pull request: what comes back on them is not judged.
    quiet: HashSet<ConnKey>,
    reply_timeout: Option<Duration>,
    /// Exchanges checked so far.
    pub exchanges: u64,
}

/// The generation-2 revisions whose msgspec rules read this pull request and write it back byte for byte,
/// newest first — what the wire says about the deployment's release.
pub fn revisions_fitting(request: &[u8]) -> Vec<Arc<Revision>> {
    let mut out: Vec<Arc<Revision>> = Spec::builtin()
        .push()
        .revisions
        .iter()
        .filter(|r| r.generation == 2)
        .filter(|r| {
            let Some(c) = Codec::builtin(&r.revision) else { return false };
            c.decode("MooncakeXferMetadata", request)
                .ok()
                .and_then(|v| c.encode("MooncakeXferMetadata", &v).ok())
                .is_some_and(|b| b == request)
        })
        .cloned()
        .collect();
    out.reverse();
    out
}

impl Live {
    /// `reply_timeout`: how long an exchange may wait for its terminal reply before it is checked as it is
    /// (default: the revision's abort timeout plus vLLM's 60 s of decoder patience).
    pub fn new(reply_timeout: Option<Duration>) -> Live {
        Live {
            checkers: None,
            backlog: vec![],
            open: VecDeque::new(),
            quiet: HashSet::new(),
            reply_timeout,
            exchanges: 0,
        }
    }

    pub fn revision(&self) -> Option<&Arc<Revision>> {
        self.checkers.as_ref().map(|c| &c.profile.revision)
    }

    /// The revision is known: check everything kept so far.
    pub fn set_revision(&mut self, rev: Arc<Revision>) -> Result<Vec<Finding>, String> {
        if self.checkers.is_some() {
            return Ok(vec![]);
        }
        let profile = WireProfile::new(rev.clone(), Codec::builtin(&rev.revision).ok_or("not a built-in revision")?)?;
        let http = BootstrapSpec::new(rev.clone()).transpose().map_err(|e| e.to_string())?.map(HttpChecker::new);
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

    pub fn event(&mut self, ev: Event) -> Vec<Finding> {
        self.feed(Item::Event(ev), Instant::now())
    }
    pub fn http(&mut self, h: HttpX) -> Vec<Finding> {
        self.feed(Item::Http(h), Instant::now())
    }
    /// A decoder sent `sent.request` on connection `key` (decoded once the revision is known).
    pub fn request(&mut self, key: ConnKey, sent: Sent) -> Vec<Finding> {
        self.feed(Item::Request(key, sent), Instant::now())
    }
    /// The prefiller answered on connection `key` (event `seq`, `line`).
    pub fn reply(&mut self, key: ConnKey, bytes: Vec<u8>, seq: u64, line: usize) -> Vec<Finding> {
        self.feed(Item::Reply(key, bytes, seq, line), Instant::now())
    }

    fn feed(&mut self, item: Item, at: Instant) -> Vec<Finding> {
        let Some(c) = self.checkers.as_mut() else {
            self.backlog.push((item, at));
            return vec![];
        };
        let mut out = vec![];
        match item {
            Item::Event(ev) => out.extend(c.events.check(&ev)),
            Item::Http(h) => {
                if let Some(hc) = c.http.as_mut() {
                    out.extend(hc.push(&h));
                }
            }
            Item::Request(key, sent) => {
                let x = Exchange::new(Some(&c.profile), sent);
                // A request that is no pull (its own finding already) has nothing to wait for: it must not hold
                // back the checks of the exchanges after it, and whatever answers it is not judged.
                let pull = x.request.value().is_some();
                if !pull {
                    self.quiet.insert(key.clone());
                }
                self.open.push_back(Open { key, x, sent: at, ended: !pull });
            }
            Item::Reply(key, bytes, seq, line) => {
                let p = Some(&c.profile);
                match self.open.iter_mut().find(|o| o.key == key && !o.ended) {
                    Some(o) => {
                        let r = o.x.push_reply(p, bytes, Some(seq), Some(line));
                        o.ended = ends_exchange(p, &r.payload);
                    }
                    None => match self.open.iter_mut().rev().find(|o| o.key == key) {
                        // After the terminal reply, before the exchange was checked: the checks see it.
                        Some(o) => {
                            o.x.push_reply(p, bytes, Some(seq), Some(line));
                        }
                        None if self.quiet.contains(&key) => {}
                        None => out.push(Finding {
                            check: CheckId::SeqTerminal,
                            seq: Some(seq),
                            line: Some(line),
                            message: Some("reply".into()),
                            detail: "a reply on a connection with no pull waiting for one (after the terminal reply, or before any request)".into(),
                        }),
                    },
                }
            }
        }
        out.extend(self.drain(at, false));
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
    pub fn tick(&mut self) -> Vec<Finding> {
        self.drain(Instant::now(), false)
    }

    /// The tap stops: exchanges still waiting for a reply cannot be judged (returned as notes); the rest is
    /// checked, and the rules that wait for a later exchange are settled. Also returns how many exchanges
    /// were checked in all.
    pub fn finish(mut self) -> (Vec<Finding>, Vec<String>, u64) {
        let mut notes = vec![];
        let mut out = vec![];
        if self.checkers.is_none() && !self.backlog.is_empty() {
            notes.push(format!("{} events were not checked: the revision never became known (no pull request decoded; give --revision)", self.backlog.len()));
        }
        let waiting: Vec<Open> = self
            .open
            .iter()
            .filter(|o| !o.ended)
            .map(|o| Open { key: o.key.clone(), x: o.x.clone(), sent: o.sent, ended: false })
            .collect();
        self.open.retain(|o| o.ended);
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
    use crate::trace::{Role, Trace, ZmqDir};

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
        assert_eq!(revisions_fitting(&req).first().map(|r| r.revision.as_str()), Some("vllm-0.33.0"));
        assert!(revisions_fitting(b"garbage").is_empty());
        let mut live = Live::new(Some(Duration::from_millis(50)));
        let decodes = crate::conversation::decodes();
        // Before the revision is known nothing is judged; then the backlog is.
        assert!(live.request((0, vec![1]), x(0, &req)).is_empty());
        assert!(live.reply((0, vec![1]), reply.clone(), 3, 4).is_empty());
        assert_eq!(live.exchanges, 0);
        assert!(live.set_revision(Spec::builtin().revision("vllm-0.33.0").unwrap().clone()).unwrap().is_empty());
        assert_eq!(live.exchanges, 1, "a pull and its FINISH");
        // A pull nobody answers is judged once the reply timeout has passed.
        assert!(live.request((0, vec![2]), x(1, &req)).is_empty());
        assert!(live.tick().is_empty());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(checks(&live.tick()), [CheckId::SeqTerminal]);
        // A reply after the terminal one, its exchange already judged.
        assert_eq!(checks(&live.reply((0, vec![1]), reply.clone(), 5, 6)), [CheckId::SeqTerminal]);
        // Something that is no pull holds nothing back, and what answers it is not judged.
        assert!(live.request((0, vec![3]), x(2, b"garbage")).is_empty());
        assert!(live.reply((0, vec![3]), reply.clone(), 7, 8).is_empty());
        assert_eq!(live.exchanges, 3);
        // The tap stops while a pull waits: nothing to judge, a note says so.
        assert!(live.request((0, vec![4]), x(3, &req)).is_empty());
        // Each payload that reached an exchange was decoded once, when it did: the four requests and the
        // first reply (the backlog, once the revision was known); the replies no exchange waited for, never.
        assert_eq!(crate::conversation::decodes() - decodes, 5);
        let (f, notes, n) = live.finish();
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("still waiting for its terminal reply"));
        assert_eq!(n, 3);
    }
}
