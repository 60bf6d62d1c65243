//! The tap's relay loop without its sockets: decoder connections on two of the tap's ROUTERs, each read through
//! the ROUTER's framing (`mooncake_wire::zmtp::server::ServerFramer`) and given a routing id as
//! `mooncake_io::router` gives it (the `Identity` of READY, refused when another open connection on that ROUTER
//! has it; otherwise five bytes, a zero and a counter), their whole messages routed through the relay's leg
//! table (`mooncake_wire::zmtp::relay::Legs`, which the tap's relay thread keeps its DEALERs in), replies from
//! the real prefiller coming back on legs that may be closed, openings that fail, hang-ups and time passing.
//! The operations are chosen by the fuzzer (structure-aware, via `arbitrary`).
//!
//! Invariants, checked against a plain model of the table after every step:
//! * a message is forwarded on the leg of its ROUTER and routing id, with exactly the frames the framing read;
//!   a leg is opened for the first message of a key and for no other; a failed opening keeps nothing and
//!   closes nothing;
//! * at most `max_legs` legs; a new one beyond it closes exactly the least recently used leg (a message or a
//!   reply is a use);
//! * a reply reaches its leg while it is open and is dropped after it closed;
//! * `expire` closes exactly the legs idle for `idle` or longer, oldest first; afterwards `poll_timeout` is in
//!   the future, and it is `None` exactly when no leg is open;
//! * every leg opened is closed exactly once (by eviction, expiry, or at the end).
//!
//! What this does not reach: the relay thread's ZeroMQ sockets and polling, which are the driver's.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use mooncake_wire::zmtp::relay::{LegKey, Legs};
use mooncake_wire::zmtp::server::{Event, ServerFramer};
use mooncake_wire::zmtp::{greeting, put_frame, ready, FLAG_MORE};

/// Decoder connections the fuzzer may name (connection `c` is on ROUTER `c % 2`).
const CONNECTIONS: u8 = 8;

/// One step of a run.
#[derive(Arbitrary, Debug)]
pub enum Op {
    /// Connection `conn` (re)connects: greeting and READY, with this identity if any.
    Connect {
        /// Which connection.
        conn: u8,
        /// The READY `Identity` property.
        identity: Option<Vec<u8>>,
    },
    /// A whole message from connection `conn`, framed as a peer would send it.
    Message {
        /// Which connection.
        conn: u8,
        /// The message's frames.
        frames: Vec<Vec<u8>>,
    },
    /// Raw bytes from connection `conn`, after its handshake (its framing may refuse them: it hangs up). This
    /// and `Message` connect a connection not made yet first, without an identity.
    Bytes {
        /// Which connection.
        conn: u8,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// The real prefiller replies on the leg of connection `conn`'s current routing id (or its last one).
    Reply {
        /// Which connection.
        conn: u8,
    },
    /// Opening the next new leg fails (the DEALER cannot connect).
    FailNextOpen,
    /// Connection `conn` goes away (its leg stays until it idles out, as in the tap).
    Hangup {
        /// Which connection.
        conn: u8,
    },
    /// Time passes, then the relay's timer runs if due.
    Advance {
        /// Milliseconds.
        ms: u32,
    },
}

/// A run: the table's limits, then the steps.
#[derive(Arbitrary, Debug)]
pub struct Input {
    /// `max_legs` is 1 + this % 8.
    pub max_legs: u8,
    /// `idle` in milliseconds (1 + this).
    pub idle_ms: u16,
    /// The steps.
    pub ops: Vec<Op>,
}

/// The target body: reads an [`Input`] from the fuzzer's bytes (bytes that do not make one are ignored) and
/// runs it with [`execute`].
pub fn run(data: &[u8]) {
    let u = Unstructured::new(data);
    let Ok(input) = Input::arbitrary_take_rest(u) else { return };
    execute(&input);
}

/// One decoder connection as the ROUTER sees it.
struct Conn {
    framer: ServerFramer,
    /// Its routing id once its READY was accepted.
    rid: Option<Vec<u8>>,
    /// No raw bytes were fed to it: its next whole message is exactly the next `Message` op's frames.
    clean: bool,
}

/// The model: what the table should hold, by plain search.
#[derive(Default)]
struct Model {
    /// key → (leg serial, last use as (time, order)).
    legs: HashMap<LegKey, (u64, (Instant, u64))>,
}

impl Model {
    fn oldest(&self) -> Option<LegKey> {
        self.legs.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone())
    }
}

struct Harness {
    legs: Legs<u64>,
    model: Model,
    max_legs: usize,
    idle: Duration,
    now: Instant,
    order: u64,
    conns: HashMap<u8, Conn>,
    /// The last routing id each connection had (a reply may come for it after the connection went).
    last_rid: HashMap<u8, LegKey>,
    next_generated: u32,
    fail_next_open: bool,
    next_serial: u64,
    opened: HashSet<u64>,
    closed: HashSet<u64>,
}

/// Runs one input and checks every invariant above.
pub fn execute(input: &Input) {
    let max_legs = 1 + usize::from(input.max_legs % 8);
    let idle = Duration::from_millis(1 + u64::from(input.idle_ms));
    let mut h = Harness {
        legs: Legs::new(max_legs, idle),
        model: Model::default(),
        max_legs,
        idle,
        now: Instant::now(),
        order: 0,
        conns: HashMap::new(),
        last_rid: HashMap::new(),
        next_generated: 0,
        fail_next_open: false,
        next_serial: 0,
        opened: HashSet::new(),
        closed: HashSet::new(),
    };
    for op in input.ops.iter().take(256) {
        h.step(op);
        assert_eq!(h.legs.len(), h.model.legs.len(), "the table and the model hold different legs");
        assert!(h.legs.len() <= h.max_legs, "{} legs over the limit {}", h.legs.len(), h.max_legs);
    }
    for (_, serial) in h.legs.drain() {
        h.close(serial);
    }
    assert_eq!(h.opened, h.closed, "a leg opened and never closed");
}

impl Harness {
    fn step(&mut self, op: &Op) {
        match op {
            Op::Connect { conn, identity } => self.connect(conn % CONNECTIONS, identity.as_deref()),
            Op::Message { conn, frames } => {
                let c = conn % CONNECTIONS;
                let frames: Vec<Vec<u8>> = frames.iter().take(8).cloned().collect();
                let mut bytes = vec![];
                for (i, f) in frames.iter().enumerate() {
                    put_frame(&mut bytes, if i + 1 < frames.len() { FLAG_MORE } else { 0 }, f);
                }
                let clean = self.conns.get(&c).is_some_and(|x| x.clean && x.rid.is_some());
                let read = self.feed(c, &bytes);
                if clean {
                    // What the relay routes is exactly what the peer framed: nothing added, dropped or reordered.
                    let expect = if frames.is_empty() { vec![] } else { vec![frames] };
                    assert_eq!(read, expect, "the framing read another message than the one sent");
                }
            }
            Op::Bytes { conn, bytes } => {
                let c = conn % CONNECTIONS;
                self.feed(c, bytes);
                // After the feed: a connection it made has had raw bytes too.
                if let Some(x) = self.conns.get_mut(&c) {
                    x.clean = false;
                }
            }
            Op::Reply { conn } => self.reply(conn % CONNECTIONS),
            Op::FailNextOpen => self.fail_next_open = true,
            Op::Hangup { conn } => {
                self.conns.remove(&(conn % CONNECTIONS));
            }
            Op::Advance { ms } => {
                self.now += Duration::from_millis(u64::from(*ms));
                self.expire();
            }
        }
    }

    fn use_stamp(&mut self) -> (Instant, u64) {
        self.order += 1;
        (self.now, self.order)
    }

    fn close(&mut self, serial: u64) {
        assert!(self.opened.contains(&serial), "closed leg {serial} was never opened");
        assert!(self.closed.insert(serial), "leg {serial} closed twice");
    }

    /// A new connection: greeting, READY (with `identity`), accepted unless the identity is taken on its ROUTER.
    fn connect(&mut self, c: u8, identity: Option<&[u8]>) {
        let mut conn = Conn { framer: ServerFramer::new(), rid: None, clean: true };
        let _greeting = conn.framer.take_output();
        let props: Vec<(&str, &[u8])> = identity.map(|i| vec![("Identity", i)]).unwrap_or_default();
        conn.framer.feed(&greeting());
        conn.framer.feed(&ready("DEALER", &props));
        let mut events = vec![];
        if conn.framer.poll(&mut events).is_err() {
            return;
        }
        let Some(Event::Ready(id)) = events.into_iter().next() else { return };
        let front = usize::from(c % 2);
        let rid = match id {
            Some(id) => {
                let taken = self.conns.iter().any(|(o, x)| o % 2 == c % 2 && *o != c && x.rid.as_ref() == Some(&id));
                if taken {
                    // mooncake_io::router refuses a duplicate identity: the connection is closed.
                    self.conns.remove(&c);
                    return;
                }
                id
            }
            None => {
                self.next_generated += 1;
                [&[0u8][..], &self.next_generated.to_be_bytes()].concat()
            }
        };
        conn.framer.open();
        conn.rid = Some(rid.clone());
        self.last_rid.insert(c, (front, rid));
        self.conns.insert(c, conn);
    }

    /// Bytes from an open connection: every whole message it completes is routed (and returned); a framing
    /// error hangs up.
    fn feed(&mut self, c: u8, bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
        if !self.conns.contains_key(&c) {
            // Bytes on a connection not made yet: it connects first, without an identity.
            self.connect(c, None);
        }
        let Some(conn) = self.conns.get_mut(&c) else { return vec![] };
        let Some(rid) = conn.rid.clone() else { return vec![] };
        conn.framer.feed(bytes);
        let mut events = vec![];
        let failed = conn.framer.poll(&mut events).is_err();
        let mut read = vec![];
        for e in events {
            match e {
                Event::Message(frames) => {
                    self.route((usize::from(c % 2), rid.clone()), &frames);
                    read.push(frames);
                }
                Event::Ready(_) => panic!("a second READY after the handshake"),
            }
        }
        if failed {
            self.conns.remove(&c);
        }
        read
    }

    /// What the relay thread does with a decoder's message: its leg (opened if new), then forward.
    fn route(&mut self, key: LegKey, frames: &[Vec<u8>]) {
        let fail = std::mem::take(&mut self.fail_next_open);
        let serial = self.next_serial;
        let used = self.use_stamp();
        let known = self.model.legs.get(&key).map(|(s, _)| *s);
        let expect_evicted =
            if known.is_none() && self.model.legs.len() >= self.max_legs { self.model.oldest() } else { None };
        let r = self.legs.route(self.now, &key, || if fail { Err("refused") } else { Ok(serial) });
        match (known, r) {
            (Some(_), Err(_)) => panic!("an open leg was opened again"),
            (None, Err(_)) => {
                assert!(fail, "an opening failed that did not fail");
                return;
            }
            (Some(s), Ok(routed)) => {
                assert!(!routed.opened && routed.evicted.is_none(), "a known leg was reopened or evicted one");
                assert_eq!(*routed.leg, s, "the message went to another leg");
                self.model.legs.insert(key, (s, used));
            }
            (None, Ok(routed)) => {
                assert!(!fail, "a failed opening kept a leg");
                assert!(routed.opened, "a new key was not opened");
                assert_eq!(*routed.leg, serial);
                let evicted = routed.evicted;
                assert_eq!(evicted.as_ref().map(|(k, _)| k.clone()), expect_evicted, "not the least recently used");
                self.next_serial += 1;
                self.opened.insert(serial);
                if let Some((k, s)) = evicted {
                    assert_eq!(self.model.legs.remove(&k).map(|(m, _)| m), Some(s));
                    self.close(s);
                }
                self.model.legs.insert(key, (serial, used));
            }
        }
        assert!(!frames.is_empty(), "an empty message routed");
    }

    fn reply(&mut self, c: u8) {
        let Some(key) = self.last_rid.get(&c).cloned() else { return };
        let used = self.use_stamp();
        let got = self.legs.touch(self.now, &key).copied();
        match self.model.legs.get_mut(&key) {
            Some((s, u)) => {
                assert_eq!(got, Some(*s), "a reply did not reach its open leg");
                *u = used;
            }
            None => assert_eq!(got, None, "a reply reached a closed leg"),
        }
    }

    fn expire(&mut self) {
        let closed = self.legs.expire(self.now);
        let mut expect: Vec<(LegKey, (u64, (Instant, u64)))> = self
            .model
            .legs
            .iter()
            .filter(|(_, (_, (t, _)))| self.now.saturating_duration_since(*t) >= self.idle)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        expect.sort_by_key(|(_, (_, used))| *used);
        let expect: Vec<(LegKey, u64)> = expect.into_iter().map(|(k, (s, _))| (k, s)).collect();
        assert_eq!(closed, expect, "expire closed other legs than the idle ones, oldest first");
        for (k, s) in closed {
            self.model.legs.remove(&k);
            self.close(s);
        }
        match self.legs.poll_timeout() {
            None => assert!(self.model.legs.is_empty(), "no timer while legs are open"),
            Some(t) => {
                assert!(t > self.now, "a timer in the past after expiry");
                let oldest = self.model.legs.values().map(|(_, (t, o))| (*t, *o)).min().expect("a leg");
                assert_eq!(t, oldest.0 + self.idle, "the timer is not the oldest leg's");
            }
        }
    }
}
