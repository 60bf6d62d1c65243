//! The sans-IO decoder core (`mooncake_wire::proto::DecoderCore`) driven by operations the fuzzer chooses
//! (structure-aware, via `arbitrary`): the scheduler pulling batches of requests from up to three engines
//! behind two bootstrap servers, `/query` answers (tables of any TP/PP shape, or failures), replies on any
//! exchange ever opened (well-formed replies of every status that report the exchange's own requests,
//! unknown ones, echo the layout id or not; or raw bytes), socket failures, re-registration of the KV layout,
//! and time passing. The driver calls `handle_timeout` when `poll_timeout` says so and drains every event.
//!
//! Invariants:
//! * open exchanges ≤ `MAX_DECODER_EXCHANGES`; `poll_timeout` is never in the past once serviced;
//! * a `/query` is asked once per bootstrap server while pulls wait for it;
//! * an exchange is opened with a fresh id and a payload that decodes in the revision and pulls only
//!   requests still waiting; it is closed at most once;
//! * per request: `Failed` at most once and never after `Finished`; `Finished` exactly once and only for a
//!   request with blocks (or `Unsettled` once, where the revision leaves unreported requests waiting); a failure
//!   lists exactly the request's blocks;
//! * layout acknowledgement: a `LAYOUT_MISS` forgets the prefiller's acknowledgement, an echo of the current
//!   `layout_id` records it;
//! * at the end, once every query is answered and time passes the receive timeout, nothing is left: no
//!   pending pull, no open exchange, and every request with blocks finished or unsettled.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use mooncake_wire::limits;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::{
    DecoderConfig, DecoderCore, DecoderEvent, DecoderLayout, EngineTable, ExchangeId, PullRequest, QueryError,
    WireProfile,
};
use mooncake_wire::spec::behaviour::{FailureReport, FreeOnlySuccess};
use mooncake_wire::typed::{MooncakeXferResponse, Status};

use super::prefiller::profiles;

const ENGINES: [&str; 3] = ["e0", "e1", "e2"];
const BOOTSTRAPS: [&str; 2] = ["http://10.0.0.1:8998", "http://10.0.0.2:8998"];

/// The decoder's configuration; every number is reduced into range (revision modulo the generation-2 revisions,
/// TP 1, 2 or 4 and PP 1 or 2 with ranks modulo them, 1 to 3 layers, a layout id of four kinds).
#[derive(Arbitrary, Debug)]
pub struct Setup {
    revision: u8,
    tp_log: u8,
    tp_rank: u8,
    pp: u8,
    pp_rank: u8,
    layers: u8,
    layout_id: u8,
    /// Seconds of receive timeout; 0 keeps vLLM's (abort timeout + 60 s).
    recv_secs: u8,
}

#[derive(Arbitrary, Debug)]
/// One thing that happens to the decoder.
pub enum Op {
    /// The scheduler pulls a batch (its first 16 requests), each request with a fresh `d_req_id`: (transfer id
    /// number, local blocks per KV group (3 groups of 16 at most), route: engine `route % 3`, bootstrap server
    /// `route / 3 % 2`).
    Pull(Vec<(u8, Vec<Vec<u8>>, u8)>),
    /// The answer to one pending `/query`; nothing happens when none is pending.
    Query {
        /// Which pending query (modulo their number).
        which: u8,
        /// The engines' tables, up to 4 of (engine, log2 of TP size (modulo 4), PP size − 1 (modulo 3));
        /// `None`: the query fails.
        tables: Option<Vec<(u8, u8, u8)>>,
    },
    /// A reply arrives on an exchange ever opened, closed ones included; nothing happens when none was opened.
    Reply {
        /// Which exchange, in id order (modulo their number).
        which: u8,
        /// What the reply holds.
        reply: ReplySpec,
    },
    /// The socket of an exchange ever opened fails.
    Fail {
        /// Which exchange, in id order (modulo their number).
        which: u8,
    },
    /// Time passes, then a due timeout is handled.
    Advance {
        /// Seconds (modulo 1024).
        secs: u16,
        /// Nanoseconds (modulo 10⁹).
        nanos: u32,
    },
    /// Time jumps to the core's next deadline, if it has one, and the timeout is handled.
    ToNextTimeout,
    /// The decoder re-registers its KV caches.
    Reregister {
        /// The new layout id, of four kinds (`% 4`: zero, two fixed ids, an odd number).
        layout_id: u8,
        /// The new number of layers, 1 + `layers % 3`.
        layers: u8,
    },
}

#[derive(Arbitrary, Debug)]
/// The payload of a reply.
pub enum ReplySpec {
    /// A `MooncakeXferResponse`, encoded in the revision.
    Structured {
        /// Picks the status code (`% 7`) from 0, 1, 2, 3, 0, 1 and the unknown 9.
        status: u8,
        /// `ok_reqs` (the first 8): indices into the exchange's requests; an index past them names the
        /// unknown request `zz<i>`; empty leaves the field out.
        ok: Vec<u8>,
        /// `err_reqs`, as `ok`.
        err: Vec<u8>,
        /// Whether `err_msg` is set.
        msg: bool,
        /// Whether the reply echoes the decoder's current layout id.
        echo: bool,
    },
    /// These bytes, as they are.
    Raw(Vec<u8>),
}

/// One input of the target: what is set up, then the operations (at most the first 256 run).
#[derive(Arbitrary, Debug)]
pub struct Input {
    /// The configuration of the core(s).
    pub setup: Setup,
    /// The operations, in order.
    pub ops: Vec<Op>,
}

/// The target body: reads an [`Input`] from the fuzzer's bytes (bytes that do not make one are ignored) and
/// runs it with [`execute`].
pub fn run(data: &[u8]) {
    let u = Unstructured::new(data);
    let Ok(input) = Input::arbitrary_take_rest(u) else { return };
    execute(&input);
}

fn layout(layers: u8) -> DecoderLayout {
    let n = 1 + layers as u64 % 3;
    DecoderLayout {
        kv_caches_base_addr: (0..n).map(|l| WireInt::from_u64(0x7000_0000 + l * 0x100_0000)).collect(),
        block_lens: vec![WireInt::from_u64(4096); n as usize],
        kv_block_lens: vec![WireInt::from_u64(4096); n as usize],
        registered_layer_names: (0..n).map(|l| format!("model.layers.{l}.self_attn")).collect(),
        registered_layer_indices: (0..n).map(WireInt::from_u64).collect(),
        ..Default::default()
    }
}

fn layout_id(x: u8) -> u64 {
    match x % 4 {
        0 => 0,
        1 => 0x1234_5679,
        2 => 0x0123_4567_89ab_cdef,
        _ => 2 * x as u64 + 1,
    }
}

#[derive(Default)]
struct Req {
    blocks: Vec<u64>,
    failed: bool,
    finished: bool,
    unsettled: bool,
}

struct Xchg {
    addr: String,
    reqs: Vec<String>,
    closed: bool,
}

struct Harness {
    core: DecoderCore,
    profile: WireProfile,
    now: Instant,
    recv: Duration,
    layout_id: u64,
    reqs: HashMap<String, Req>,
    next_req: u32,
    queries: Vec<String>,
    exchanges: BTreeMap<ExchangeId, Xchg>,
    closed_unopened: HashSet<ExchangeId>,
}

/// Runs one input and checks the invariants above; panics with the broken one.
pub fn execute(input: &Input) {
    let s = &input.setup;
    let profile = profiles()[s.revision as usize % profiles().len()].clone();
    let tp = 1usize << (s.tp_log % 3);
    let pp = 1 + s.pp as usize % 2;
    let cfg = DecoderConfig {
        hostname: "10.0.0.9".into(),
        te_port: 17001,
        tp_rank: s.tp_rank as usize % tp,
        tp_size: tp,
        pp_rank: s.pp_rank as usize % pp,
        pp_size: pp,
        layout: layout(s.layers),
        layout_id: layout_id(s.layout_id),
    };
    let mut core = DecoderCore::new(profile.clone(), cfg);
    let recv = if s.recv_secs == 0 {
        profile.abort_timeout + Duration::from_secs(60)
    } else {
        Duration::from_secs(s.recv_secs as u64)
    };
    core.set_recv_timeout(recv);
    let layout_id = core.layout_id();
    let mut h = Harness {
        core,
        profile,
        now: Instant::now(),
        recv,
        layout_id,
        reqs: HashMap::new(),
        next_req: 0,
        queries: vec![],
        exchanges: BTreeMap::new(),
        closed_unopened: HashSet::new(),
    };
    for op in input.ops.iter().take(256) {
        h.apply(op);
        h.check_serviced();
    }
    h.finish();
}

fn tables(spec: &[(u8, u8, u8)]) -> BTreeMap<String, EngineTable> {
    let mut out = BTreeMap::new();
    for (e, tp_log, pp) in spec.iter().take(4) {
        let engine = ENGINES[*e as usize % ENGINES.len()];
        let (tp, pp) = (1usize << (tp_log % 4), 1 + *pp as usize % 3);
        let t: EngineTable =
            (0..tp).map(|r| (r, (0..pp).map(|p| (p, format!("tcp://{engine}-{r}-{p}:5555"))).collect())).collect();
        out.insert(engine.to_string(), t);
    }
    out
}

impl Harness {
    fn apply(&mut self, op: &Op) {
        let now = self.now;
        match op {
            Op::Pull(batch) => {
                let mut reqs = vec![];
                for (t, blocks, route) in batch.iter().take(16) {
                    self.next_req += 1;
                    let d = format!("r{}", self.next_req);
                    let local_blocks: Vec<Vec<u64>> =
                        blocks.iter().take(3).map(|g| g.iter().take(16).map(|b| *b as u64).collect()).collect();
                    self.reqs.insert(
                        d.clone(),
                        Req { blocks: local_blocks.iter().flatten().copied().collect(), ..Default::default() },
                    );
                    reqs.push(PullRequest {
                        d_req_id: d,
                        transfer_id: format!("t{t}"),
                        local_blocks,
                        engine_id: ENGINES[*route as usize % ENGINES.len()].to_string(),
                        bootstrap_addr: BOOTSTRAPS[*route as usize / ENGINES.len() % BOOTSTRAPS.len()].to_string(),
                        remote: None,
                    });
                }
                self.core.pull(now, reqs);
            }
            Op::Query { which, tables: t } => {
                if !self.queries.is_empty() {
                    let addr = self.queries.remove(*which as usize % self.queries.len());
                    let result = match t {
                        Some(spec) => Ok(tables(spec)),
                        None => Err(QueryError::Unanswered(format!("cannot connect to {addr}"))),
                    };
                    self.core.query_result(now, &addr, result);
                }
            }
            Op::Reply { which, reply } => {
                let Some((&id, x)) = self.exchanges.iter().nth(*which as usize % self.exchanges.len().max(1)) else {
                    return;
                };
                let addr = x.addr.clone();
                let payload = match reply {
                    ReplySpec::Raw(b) => b.clone(),
                    ReplySpec::Structured { status, ok, err, msg, echo } => {
                        let pick = |i: &u8| x.reqs.get(*i as usize).cloned().unwrap_or_else(|| format!("zz{i}"));
                        let mut r = MooncakeXferResponse::new(Status([0, 1, 2, 3, 0, 1, 9][*status as usize % 7]));
                        r.ok_reqs = (!ok.is_empty()).then(|| ok.iter().take(8).map(pick).collect());
                        r.err_reqs = (!err.is_empty()).then(|| err.iter().take(8).map(pick).collect());
                        r.err_msg = msg.then(|| "boom".to_string());
                        if *echo {
                            r.layout_id = WireInt::from_u64(self.layout_id);
                        }
                        self.profile.encode_response(&r).unwrap_or_else(|_| r.encode())
                    }
                };
                let was_open = !x.closed;
                self.core.handle_reply(now, id, &payload);
                if was_open && self.profile.layout_caching.is_some() {
                    if let Ok(r) = self.profile.decode_response(&payload) {
                        if r.status == Status::LAYOUT_MISS {
                            assert!(
                                !self.core.is_acked(&addr),
                                "a LAYOUT_MISS must forget the acknowledgement of {addr}"
                            );
                        } else if r.status != Status::ERROR
                            && self.layout_id != 0
                            && r.layout_id == WireInt::from_u64(self.layout_id)
                        {
                            assert!(self.core.is_acked(&addr), "an echo of the layout id must be recorded for {addr}");
                        }
                    }
                }
            }
            Op::Fail { which } => {
                if let Some((&id, _)) = self.exchanges.iter().nth(*which as usize % self.exchanges.len().max(1)) {
                    self.core.exchange_failed(id, "Connection refused");
                }
            }
            Op::Advance { secs, nanos } => {
                self.now +=
                    Duration::from_secs(*secs as u64 % 1024) + Duration::from_nanos(*nanos as u64 % 1_000_000_000);
                self.service();
            }
            Op::ToNextTimeout => {
                if let Some(t) = self.core.poll_timeout() {
                    self.now = self.now.max(t);
                }
                self.service();
            }
            Op::Reregister { layout_id: id, layers } => {
                self.core.reregister(layout(*layers), layout_id(*id));
                self.layout_id = self.core.layout_id();
            }
        }
        self.drain();
    }

    fn service(&mut self) {
        if self.core.poll_timeout().is_some_and(|t| t <= self.now) {
            self.core.handle_timeout(self.now);
        }
    }

    fn check_serviced(&mut self) {
        self.service();
        self.drain();
        if let Some(t) = self.core.poll_timeout() {
            assert!(t > self.now, "poll_timeout is in the past after servicing");
        }
        assert!(self.core.open_exchanges() <= limits::MAX_DECODER_EXCHANGES);
        let open = self.exchanges.values().filter(|x| !x.closed).count();
        assert_eq!(self.core.open_exchanges(), open, "open exchanges: core and events disagree");
    }

    fn drain(&mut self) {
        while let Some(ev) = self.core.poll_event() {
            match ev {
                DecoderEvent::Query { bootstrap_addr } => {
                    assert!(
                        !self.queries.contains(&bootstrap_addr),
                        "a second /query to {bootstrap_addr} while one is pending"
                    );
                    self.queries.push(bootstrap_addr);
                }
                DecoderEvent::Open { id, addr, payload } => {
                    assert!(
                        !self.exchanges.contains_key(&id) && !self.closed_unopened.contains(&id),
                        "exchange id {id:?} reused"
                    );
                    let m = self.profile.decode_metadata(&payload).unwrap_or_else(|e| {
                        panic!("an Open payload that does not decode in {}: {e}", self.profile.name())
                    });
                    let reqs: Vec<String> = m.req_blocks.iter().map(|(d, _)| d.clone()).collect();
                    for d in &reqs {
                        let r = self.reqs.get(d).unwrap_or_else(|| panic!("{d} was never pulled"));
                        assert!(!r.finished && !r.unsettled, "{d} pulled again after it settled");
                    }
                    assert!(!reqs.is_empty(), "an exchange that pulls nothing");
                    self.exchanges.insert(id, Xchg { addr, reqs, closed: false });
                }
                DecoderEvent::Close { id } => match self.exchanges.get_mut(&id) {
                    Some(x) => {
                        assert!(!x.closed, "exchange {id:?} closed twice");
                        x.closed = true;
                    }
                    None => assert!(self.closed_unopened.insert(id), "exchange {id:?} closed twice"),
                },
                DecoderEvent::Failed { d_req_id, invalid_blocks, failed_recving, .. } => {
                    let r = self
                        .reqs
                        .get_mut(&d_req_id)
                        .unwrap_or_else(|| panic!("{d_req_id} failed but was never pulled"));
                    assert!(!r.failed && !r.finished && !r.unsettled, "{d_req_id} failed twice or after it settled");
                    assert_ne!(
                        self.profile.rules.failure_report,
                        FailureReport::None,
                        "{d_req_id}: a failure reported by a revision that reports none"
                    );
                    if failed_recving {
                        assert!(invalid_blocks.is_empty(), "{d_req_id}: failed_recving with invalid blocks");
                    } else {
                        assert!(
                            !invalid_blocks.is_empty() && invalid_blocks == r.blocks,
                            "{d_req_id}: invalid blocks {invalid_blocks:?} are not its blocks {:?}",
                            r.blocks
                        );
                    }
                    r.failed = true;
                }
                DecoderEvent::Finished { d_req_id } => {
                    let r = self
                        .reqs
                        .get_mut(&d_req_id)
                        .unwrap_or_else(|| panic!("{d_req_id} finished but was never pulled"));
                    assert!(!r.finished && !r.unsettled, "{d_req_id} finished twice");
                    assert!(
                        !r.blocks.is_empty() || self.profile.rules.free_only_success == FreeOnlySuccess::Finished,
                        "{d_req_id} has no blocks, yet is reported finished"
                    );
                    r.finished = true;
                }
                DecoderEvent::Unsettled { d_req_id, .. } => {
                    let r = self
                        .reqs
                        .get_mut(&d_req_id)
                        .unwrap_or_else(|| panic!("{d_req_id} unsettled but was never pulled"));
                    assert!(!r.finished && !r.unsettled, "{d_req_id} settled twice");
                    r.unsettled = true;
                }
            }
        }
    }

    fn finish(mut self) {
        for _ in 0..16 {
            for addr in std::mem::take(&mut self.queries) {
                self.core.query_result(self.now, &addr, Err(QueryError::Unanswered("bootstrap server gone".into())));
                self.drain();
            }
            self.now += self.recv + Duration::from_secs(1);
            self.service();
            self.drain();
            if self.queries.is_empty() && self.core.open_exchanges() == 0 && self.core.pending_pulls() == 0 {
                break;
            }
        }
        assert_eq!(self.core.pending_pulls(), 0, "pulls left pending");
        assert_eq!(self.core.open_exchanges(), 0, "exchanges left open");
        assert!(self.core.poll_timeout().is_none(), "a timer left");
        for (d, r) in &self.reqs {
            if !r.blocks.is_empty() {
                assert!(r.finished || r.unsettled, "{d} never settled");
            }
        }
        for (id, x) in &self.exchanges {
            assert!(x.closed, "exchange {id:?} never closed");
        }
    }
}
