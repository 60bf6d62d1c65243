//! Cross-revision operation sequences: a decoder core at one push revision against a prefiller core at another
//! (generation 1 included: `Gen1Decoder` / `Gen1Prefiller`), wired by an in-harness network with a bootstrap
//! table, simulated memory (the prefiller's holds the provenance pattern of `conformance/TESTEE.md`) and a
//! simulated clock. The fuzzer picks the pair, the timeouts and the operations: requests allocated, finished
//! (with the prefiller blocks to send), aborted; pulls of any of them (optionally with one destination block
//! too few, with their transfer-engine writes failing, or held back until released); the prefiller forgetting
//! its cached layouts; the decoder re-registering its layout; time passing.
//!
//! What is expected of the pair comes from the library's `diff` (the source the compatibility matrix
//! `schema/push/compat-matrix.md` is checked against): the rows concerning a decoder at this revision and a
//! prefiller at that one ([`prediction`]). Where no row concerning that direction breaks — same revision, or a
//! pair `diff` finds compatible — every *clean* pull (every request of it finished on the prefiller before the
//! pull, pulled for the first time, as many destination blocks as source blocks, its writes neither failed nor
//! held) must work at once: each request `Finished` and not failed, its destination blocks holding
//! exactly the provenance words of its source blocks, the transfer freed by the pull (not expired). Pairs
//! whose `diff` rows break (always, or when something is sent, or left to review) get the safety invariants
//! only, which every pair gets:
//!
//! * per request: `Failed`, `Finished` and `Unsettled` each at most once, never both `Finished` and
//!   `Unsettled`; at the end every request with blocks finished or unsettled;
//! * per transfer: freed at most once, only after it was finished and never after an abort, for its own
//!   request, by expiry only after the abort timeout;
//! * no write outside its blocks: every non-zero word of the decoder's memory is the provenance word of a
//!   source block some pull mapped to that destination block, at the same region and offset;
//! * `poll_timeout` never in the past once serviced; at the end no pending pull, open exchange, tracked
//!   transfer or timer on either side — except what generation 1 keeps by design (the entry of a request
//!   aborted before its prefill, an entry a pull named and no delivery freed).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use mooncake_wire::diff::{diff, Age, Effect, Verdict};
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::plan::{GroupKind, LayerSpec, Producer, ProducerConfig, RegisteredLayout};
use mooncake_wire::proto::gen1::{Gen1Decoder, Gen1DecoderConfig, Gen1Prefiller, Gen1Profile};
use mooncake_wire::proto::memory::{perform_write, provenance_bytes, provenance_word, Memory};
use mooncake_wire::proto::{
    DecoderConfig, DecoderCore, DecoderEvent, DecoderLayout, DecoderMachine, EngineTable, ExchangeId, PeerId,
    PrefillerCore, PrefillerEvent, PrefillerMachine, PullRequest, SocketKind, WireProfile, WriteId,
};
use mooncake_wire::spec::{Revision, Spec};

const LAYERS: usize = 2;
const BLOCK: u64 = 64;
const P_BLOCKS: u64 = 32;
const D_BLOCKS: u64 = 48;
const P_BASE: u64 = 0x1000_0000;
const D_BASE: u64 = 0x7000_0000;
const STRIDE: u64 = 0x10_0000;
const HOST: &str = "10.0.0.9";
const TE_PORT: u64 = 17001;
const P_ADDR: &str = "tcp://10.0.0.1:17100";
const ENGINE: &str = "e0";
const BOOTSTRAP: &str = "http://10.0.0.1:8998";

/// What `diff` says of a decoder at one revision against a prefiller at another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prediction {
    /// No row concerning this direction breaks (or the same revision).
    Works,
    /// Some row breaks, when something is sent, or is left to a reviewer: its subject.
    Breaks(String),
}

/// Every push revision the cores speak (generation 1 and 2), in family order.
pub fn revisions() -> &'static [Arc<Revision>] {
    static R: OnceLock<Vec<Arc<Revision>>> = OnceLock::new();
    R.get_or_init(|| {
        Spec::builtin().push().revisions.iter().filter(|r| r.generation == 1 || r.generation == 2).cloned().collect()
    })
}

/// Whether a verdict's peers (`new D → old P`; `new → old` for rows of no role) concern a decoder that is the
/// newer side (`d_new`) and a prefiller that is the other.
fn concerns(v: &Verdict, d_new: bool) -> bool {
    v.peers.fit_decoder_at(if d_new { Age::New } else { Age::Old })
}

/// The prediction for the pair (decoder at revision index `d`, prefiller at `p`), from `diff`, computed once.
pub fn prediction(d: usize, p: usize) -> &'static Prediction {
    static M: OnceLock<Vec<Vec<Prediction>>> = OnceLock::new();
    let m = M.get_or_init(|| {
        let revs = revisions();
        (0..revs.len())
            .map(|di| {
                (0..revs.len())
                    .map(|pi| {
                        if di == pi {
                            return Prediction::Works;
                        }
                        let d_new = di > pi;
                        let (old, new) = if d_new { (&revs[pi], &revs[di]) } else { (&revs[di], &revs[pi]) };
                        let report = diff(old, new);
                        for c in &report.changes {
                            for v in [&c.old_reads_new, &c.new_reads_old] {
                                if concerns(v, d_new) && v.effect != Effect::Compatible {
                                    return Prediction::Breaks(c.subject.clone());
                                }
                            }
                        }
                        Prediction::Works
                    })
                    .collect()
            })
            .collect()
    });
    &m[d][p]
}

/// Counters over every input run in this process (the smoke test prints them).
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Inputs run.
    pub inputs: u64,
    /// Inputs whose pair [`prediction`] says works.
    pub works_pairs: u64,
    /// Clean pulls of such pairs, whose results were checked.
    pub clean_pulls_checked: u64,
    /// Requests of those pulls found finished (their destination bytes are checked next).
    pub requests_finished: u64,
}

static INPUTS: AtomicU64 = AtomicU64::new(0);
static WORKS: AtomicU64 = AtomicU64::new(0);
static CLEAN: AtomicU64 = AtomicU64::new(0);
static FINISHED: AtomicU64 = AtomicU64::new(0);

/// The counters so far.
pub fn counts() -> Counts {
    Counts {
        inputs: INPUTS.load(Ordering::Relaxed),
        works_pairs: WORKS.load(Ordering::Relaxed),
        clean_pulls_checked: CLEAN.load(Ordering::Relaxed),
        requests_finished: FINISHED.load(Ordering::Relaxed),
    }
}

/// The pair and its timeouts.
#[derive(Arbitrary, Debug)]
pub struct Setup {
    /// Index of the decoder's revision in [`revisions`] (modulo their number).
    pub decoder: u8,
    /// Index of the prefiller's revision in [`revisions`] (modulo their number).
    pub prefiller: u8,
    /// Seconds; 0 keeps the revision's.
    pub abort_secs: u8,
    /// Seconds; 0 keeps the revision's.
    pub recv_secs: u8,
    /// The decoder's first layout id, of four kinds (`% 4`: zero, two fixed ids, an odd number).
    pub layout_id: u8,
}

#[derive(Arbitrary, Debug)]
/// One thing that happens. Transfers are `t0` to `t7` (`t % 8`), each owned by its request `p-t<n>`.
pub enum Op {
    /// The scheduler allocates the transfer's request (not after it was finished or aborted).
    Allocate {
        /// The transfer.
        t: u8,
    },
    /// The prefill finished (allocating the request first if needed; not after it was finished or aborted).
    Ready {
        /// The transfer.
        t: u8,
        /// Source blocks after the first (`t`): up to 3, modulo the prefiller's block count, duplicates dropped.
        blocks: Vec<u8>,
    },
    /// The scheduler aborts the transfer (only before its prefill finished).
    Abort {
        /// The transfer.
        t: u8,
    },
    /// Pull these transfers; `short`: one destination block too few; `fail`: the transfer-engine writes of this
    /// pull fail; `hold`: they complete only at the next `Release`.
    Pull {
        /// The transfers (the first 4, repeats skipped).
        ts: Vec<u8>,
        /// One destination block too few.
        short: bool,
        /// The writes fail.
        fail: bool,
        /// The writes are held.
        hold: bool,
    },
    /// Every held write completes.
    Release,
    /// Time passes.
    Advance {
        /// Seconds (modulo 64).
        secs: u16,
        /// Milliseconds (modulo 1000).
        millis: u16,
    },
    /// Time jumps to the earlier of the two cores' next deadlines.
    ToNextTimeout,
    /// The prefiller forgets every cached decoder layout.
    ClearLayouts,
    /// A generation-2 decoder re-registers its layout under a new layout id (generation 1 ignores it).
    Reregister {
        /// The new layout id, as [`Setup::layout_id`].
        layout_id: u8,
    },
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

#[allow(clippy::large_enum_variant)] // one per fuzz input
enum Dec {
    G1(Gen1Decoder),
    G2(DecoderCore),
}

impl Dec {
    fn m(&mut self) -> &mut dyn DecoderMachine {
        match self {
            Dec::G1(d) => d,
            Dec::G2(d) => d,
        }
    }
    fn r(&self) -> &dyn DecoderMachine {
        match self {
            Dec::G1(d) => d,
            Dec::G2(d) => d,
        }
    }
}

#[derive(Default)]
struct Req {
    transfer: String,
    blocks: usize,
    failed: bool,
    finished: bool,
    unsettled: bool,
}

#[derive(Default, Clone)]
struct Transfer {
    p_req: String,
    allocated: bool,
    /// Source blocks, once finished.
    blocks: Option<Vec<u64>>,
    finished_at: Option<Instant>,
    aborted: bool,
    freed: bool,
    pulled: bool,
}

struct Net {
    /// `decoder × prefiller` revisions, for messages.
    pair: String,
    /// Generation 1's prefiller leaves the entry of a request aborted before its prefill finished behind, as
    /// vLLM does (`Gen1Prefiller::request_aborted`), and a pull naming it waits for it forever; an entry a pull
    /// named never expires.
    p_gen1: bool,
    named_leftover: bool,
    /// A generation-1 transfer expired after a pull named it (while the pull waited for another): when that
    /// pull's write then completes, vLLM's sender raises on the missing entry, answers an error, and the
    /// entries it deleted before it are never reported freed. The end check allows for those.
    gen1_lost: bool,
    dec: Dec,
    pre: Box<dyn PrefillerMachine>,
    d_gen1: bool,
    now: Instant,
    abort: Duration,
    recv: Duration,
    pmem: Memory,
    dmem: Memory,
    fail_writes: bool,
    hold: bool,
    held: Vec<(WriteId, i64)>,
    routes: HashMap<ExchangeId, PeerId>,
    by_peer: HashMap<PeerId, ExchangeId>,
    next_routing: u32,
    reqs: HashMap<String, Req>,
    transfers: BTreeMap<String, Transfer>,
    next_req: u32,
    /// Transfer → the destination blocks of every pull of it (mapped to its source blocks at the end: a pull
    /// may come before the prefill finished).
    pulled_to: HashMap<String, Vec<Vec<u64>>>,
    d_cursor: u64,
    layout_id: u64,
}

fn layout_columns(base: u64) -> RegisteredLayout {
    RegisteredLayout {
        kv_caches_base_addr: (0..LAYERS as i64).map(|l| (base + l as u64 * STRIDE) as i64).collect(),
        block_lens: vec![BLOCK as i64; LAYERS],
        kv_block_lens: vec![BLOCK as i64; LAYERS],
        registered_layer_indices: (0..LAYERS as i64).collect(),
        registered_group_indices: vec![0; LAYERS],
        registered_shared_group_ids: vec![],
        registered_row_offsets: vec![-1; LAYERS],
        registered_layer_names: (0..LAYERS).map(|l| format!("model.layers.{l}.self_attn")).collect(),
    }
}

fn decoder_layout() -> DecoderLayout {
    let l = layout_columns(D_BASE);
    let w = |v: &[i64]| v.iter().map(|x| WireInt::from_i64(*x)).collect();
    DecoderLayout {
        kv_caches_base_addr: w(&l.kv_caches_base_addr),
        block_lens: w(&l.block_lens),
        kv_block_lens: w(&l.kv_block_lens),
        registered_layer_names: l.registered_layer_names.clone(),
        registered_layer_indices: w(&l.registered_layer_indices),
        registered_group_indices: w(&l.registered_group_indices),
        registered_shared_group_ids: vec![],
        registered_row_offsets: w(&l.registered_row_offsets),
    }
}

fn producer(
    rules: mooncake_wire::plan::PlanRules,
    column_check: Option<mooncake_wire::spec::behaviour::EqualLengthFields>,
) -> Producer {
    let layout = layout_columns(P_BASE);
    Producer {
        config: ProducerConfig {
            tp_rank: 0,
            tp_size: 1,
            pp_size: 1,
            total_num_kv_heads: 8,
            use_mla: false,
            groups: vec![GroupKind::Attention],
            physical_blocks_per_logical: 1,
            blocks_first: false,
        },
        rules,
        column_check,
        layer_specs: layout
            .registered_layer_names
            .iter()
            .map(|n| (n.clone(), LayerSpec::Attention { padded: false, nvfp4: false }))
            .collect(),
        layout,
        has_opaque_packed_row: false,
        layer_groups: HashMap::new(),
    }
}

fn odd_id(x: u8) -> u64 {
    match x % 4 {
        0 => 0,
        1 => 0x1234_5679,
        2 => 0x0123_4567_89ab_cdef,
        _ => 2 * x as u64 + 1,
    }
}

/// Runs one input and checks the invariants above; panics with the broken one.
pub fn execute(input: &Input) {
    INPUTS.fetch_add(1, Ordering::Relaxed);
    let revs = revisions();
    let (di, pi) = (input.setup.decoder as usize % revs.len(), input.setup.prefiller as usize % revs.len());
    let (drev, prev) = (&revs[di], &revs[pi]);
    let works = *prediction(di, pi) == Prediction::Works;
    if works {
        WORKS.fetch_add(1, Ordering::Relaxed);
    }
    let (pre, default_abort): (Box<dyn PrefillerMachine>, Duration) = if prev.generation == 1 {
        let prof = Gen1Profile::builtin(&prev.revision).expect("a generation-1 profile");
        let abort = prof.abort_timeout;
        let planner = producer(prof.plan_rules().expect("generation-1 plan rules"), None);
        (Box::new(Gen1Prefiller::new(prof, planner)), abort)
    } else {
        let prof = WireProfile::builtin(&prev.revision).expect("a generation-2 profile");
        let abort = prof.abort_timeout;
        let planner = producer(prof.rules.plan, prof.rules.equal_length.clone());
        (Box::new(PrefillerCore::new(prof, planner)), abort)
    };
    let abort =
        if input.setup.abort_secs == 0 { default_abort } else { Duration::from_secs(input.setup.abort_secs as u64) };
    let (dec, default_recv) = if drev.generation == 1 {
        let prof = Gen1Profile::builtin(&drev.revision).expect("a generation-1 profile");
        let recv = prof.recv_timeout;
        let cfg = Gen1DecoderConfig {
            hostname: HOST.into(),
            te_port: TE_PORT,
            tp_rank: 0,
            kv_caches_base_addr: (0..LAYERS as u64).map(|l| D_BASE + l * STRIDE).collect(),
        };
        (Dec::G1(Gen1Decoder::new(prof, cfg)), recv)
    } else {
        let prof = WireProfile::builtin(&drev.revision).expect("a generation-2 profile");
        let recv = prof.abort_timeout + Duration::from_secs(60);
        let cfg = DecoderConfig {
            hostname: HOST.into(),
            te_port: TE_PORT,
            tp_rank: 0,
            tp_size: 1,
            pp_rank: 0,
            pp_size: 1,
            layout: decoder_layout(),
            layout_id: odd_id(input.setup.layout_id),
        };
        (Dec::G2(DecoderCore::new(prof, cfg)), recv)
    };
    let recv =
        if input.setup.recv_secs == 0 { default_recv } else { Duration::from_secs(input.setup.recv_secs as u64) };
    let mut pmem = Memory::default();
    let mut dmem = Memory::default();
    for l in 0..LAYERS as u64 {
        let len = (BLOCK * P_BLOCKS) as usize;
        let bytes = provenance_bytes(l, BLOCK, len);
        pmem.register(P_BASE + l * STRIDE, len, |k| bytes[k]);
        dmem.register(D_BASE + l * STRIDE, (BLOCK * D_BLOCKS) as usize, |_| 0);
    }
    let mut net = Net {
        pair: format!("decoder {} × prefiller {}", drev.revision, prev.revision),
        p_gen1: prev.generation == 1,
        named_leftover: false,
        gen1_lost: false,
        d_gen1: drev.generation == 1,
        dec,
        pre,
        now: Instant::now(),
        abort,
        recv,
        pmem,
        dmem,
        fail_writes: false,
        hold: false,
        held: vec![],
        routes: HashMap::new(),
        by_peer: HashMap::new(),
        next_routing: 1,
        reqs: HashMap::new(),
        transfers: BTreeMap::new(),
        next_req: 0,
        pulled_to: HashMap::new(),
        d_cursor: 0,
        layout_id: 0,
    };
    net.pre.set_abort_timeout(abort);
    match &mut net.dec {
        Dec::G1(d) => d.set_recv_timeout(recv),
        Dec::G2(d) => {
            d.set_recv_timeout(recv);
            net.layout_id = d.layout_id();
        }
    }
    for op in input.ops.iter().take(128) {
        net.apply(op, works);
        net.service();
    }
    net.finish();
}

impl Net {
    fn apply(&mut self, op: &Op, works: bool) {
        let now = self.now;
        match op {
            Op::Allocate { t } => {
                let id = format!("t{}", t % 8);
                let x = self.transfers.entry(id.clone()).or_default();
                if x.blocks.is_some() || x.aborted {
                    return;
                }
                x.allocated = true;
                x.p_req = format!("p-{id}");
                let p = x.p_req.clone();
                self.pre.request_allocated(now, &p, &id);
            }
            Op::Ready { t, blocks } => {
                let id = format!("t{}", t % 8);
                let x = self.transfers.entry(id.clone()).or_default();
                if x.blocks.is_some() || x.aborted {
                    return;
                }
                // Distinct source blocks (a prefill's blocks are distinct).
                let mut b: Vec<u64> = vec![*t as u64 % P_BLOCKS];
                for v in blocks.iter().take(3) {
                    let v = *v as u64 % P_BLOCKS;
                    if !b.contains(&v) {
                        b.push(v);
                    }
                }
                x.p_req = format!("p-{id}");
                let p = x.p_req.clone();
                if !x.allocated {
                    x.allocated = true;
                    self.pre.request_allocated(now, &p, &id);
                }
                x.blocks = Some(b.clone());
                x.finished_at = Some(now);
                self.pre.request_finished(now, &p, &id, vec![b]);
            }
            Op::Abort { t } => {
                let id = format!("t{}", t % 8);
                let Some(x) = self.transfers.get_mut(&id) else { return };
                // The scheduler aborts a request whose prefill has not finished (a finished one is the
                // prefiller's to free).
                if x.blocks.is_some() || x.aborted {
                    return;
                }
                x.aborted = true;
                self.pre.request_aborted(now, &id);
            }
            Op::Pull { ts, short, fail, hold } => {
                self.fail_writes = *fail;
                self.hold = *hold;
                self.pull(ts, *short, works);
                self.fail_writes = false;
                self.hold = false;
            }
            Op::Release => {
                for (id, ret) in std::mem::take(&mut self.held) {
                    self.pre.write_complete(self.now, id, ret);
                }
            }
            Op::Advance { secs, millis } => {
                self.now += Duration::from_secs(*secs as u64 % 64) + Duration::from_millis(*millis as u64 % 1000);
            }
            Op::ToNextTimeout => {
                let next = [self.pre.poll_timeout(), self.dec.r().poll_timeout()].into_iter().flatten().min();
                if let Some(t) = next {
                    self.now = self.now.max(t);
                }
            }
            Op::ClearLayouts => self.pre.clear_layout_cache(),
            Op::Reregister { layout_id } => {
                if let Dec::G2(d) = &mut self.dec {
                    d.reregister(decoder_layout(), odd_id(*layout_id));
                    self.layout_id = d.layout_id();
                }
            }
        }
        self.settle();
    }

    fn pull(&mut self, ts: &[u8], short: bool, works: bool) {
        let mut reqs = vec![];
        let mut clean = !self.hold && !self.fail_writes && !short;
        let mut checks = vec![];
        let mut seen = HashSet::new();
        for t in ts.iter().take(4) {
            let id = format!("t{}", t % 8);
            if !seen.insert(id.clone()) {
                continue;
            }
            let x = self.transfers.get(&id).cloned().unwrap_or_default();
            // Generation 1 knows a transfer by the decoder's request id: a request is pulled once.
            if self.d_gen1 && x.pulled {
                continue;
            }
            if x.aborted && x.blocks.is_none() {
                self.named_leftover = true;
            }
            let n = x.blocks.as_ref().map_or(2, |b| b.len());
            let ready = x.blocks.is_some() && !x.freed && !x.aborted && !x.pulled && n > 0;
            clean &= ready;
            let n_local = if short { n.saturating_sub(1) } else { n };
            let local: Vec<u64> = (0..n_local as u64).map(|k| (self.d_cursor + k) % D_BLOCKS).collect();
            self.d_cursor = (self.d_cursor + n_local as u64) % D_BLOCKS;
            self.pulled_to.entry(id.clone()).or_default().push(local.clone());
            self.next_req += 1;
            let d_req = if self.d_gen1 { id.clone() } else { format!("r{}", self.next_req) };
            self.reqs.insert(d_req.clone(), Req { transfer: id.clone(), blocks: local.len(), ..Default::default() });
            self.transfers.entry(id.clone()).or_default().pulled = true;
            checks.push((d_req.clone(), id.clone(), local.clone(), x.blocks.clone().unwrap_or_default()));
            reqs.push(PullRequest {
                d_req_id: d_req,
                transfer_id: id,
                local_blocks: vec![local],
                engine_id: ENGINE.into(),
                bootstrap_addr: BOOTSTRAP.into(),
                remote: Some(("10.0.0.1".into(), 17100)),
            });
        }
        if reqs.is_empty() {
            return;
        }
        self.dec.m().pull(self.now, reqs);
        self.settle();
        if !(works && clean) {
            return;
        }
        CLEAN.fetch_add(1, Ordering::Relaxed);
        for (d_req, tid, local, src) in checks {
            let r = &self.reqs[&d_req];
            assert!(
                r.finished && !r.failed && !r.unsettled,
                "a clean pull of {tid} did not finish at once (finished {}, failed {}, unsettled {}), though diff finds the pair compatible",
                r.finished,
                r.failed,
                r.unsettled
            );
            FINISHED.fetch_add(1, Ordering::Relaxed);
            for l in 0..LAYERS as u64 {
                for (lb, sb) in local.iter().zip(&src) {
                    let got = self.dmem.read(D_BASE + l * STRIDE + lb * BLOCK, BLOCK).expect("registered");
                    let want = &self.pmem.read(P_BASE + l * STRIDE + sb * BLOCK, BLOCK).expect("registered");
                    assert_eq!(got, *want, "{tid}: region {l} block {lb} does not hold source block {sb}");
                }
            }
            let x = &self.transfers[&tid];
            assert!(x.freed, "{tid}: finished on the decoder, yet the prefiller did not free it");
        }
    }

    /// Delivers everything pending until nothing moves (no time passes).
    fn settle(&mut self) {
        for _ in 0..100_000 {
            let mut moved = false;
            while let Some(ev) = self.dec.m().poll_event() {
                moved = true;
                self.on_decoder(ev);
            }
            while let Some(t) = self.pre.poll_transmit() {
                moved = true;
                if let Some(id) = self.by_peer.get(&t.peer).copied() {
                    self.dec.m().handle_reply(self.now, id, &t.payload);
                }
            }
            while let Some(ev) = self.pre.poll_event() {
                moved = true;
                self.on_prefiller(ev);
            }
            if !moved {
                return;
            }
        }
        panic!("the network never settles");
    }

    fn on_decoder(&mut self, ev: DecoderEvent) {
        let now = self.now;
        match ev {
            DecoderEvent::Query { bootstrap_addr } => {
                assert_eq!(bootstrap_addr, BOOTSTRAP, "a /query to a server no request named");
                let table: EngineTable = [(0usize, [(0usize, P_ADDR.to_string())].into_iter().collect())].into();
                self.dec.m().query_result(now, &bootstrap_addr, Ok([(ENGINE.to_string(), table)].into()));
            }
            DecoderEvent::Open { id, addr: _, payload } => {
                assert!(!self.routes.contains_key(&id), "exchange id {id:?} reused");
                let peer = PeerId([&[0u8][..], &self.next_routing.to_be_bytes()].concat());
                self.next_routing += 1;
                self.routes.insert(id, peer.clone());
                self.by_peer.insert(peer.clone(), id);
                let frames = match self.dec.r().socket_kind() {
                    SocketKind::Req => vec![peer.0, vec![], payload],
                    SocketKind::Dealer => vec![peer.0, payload],
                };
                self.pre.handle_frames(now, frames);
            }
            DecoderEvent::Close { id } => {
                if let Some(peer) = self.routes.remove(&id) {
                    self.by_peer.remove(&peer);
                }
            }
            DecoderEvent::Finished { d_req_id } => {
                let r = self.reqs.get_mut(&d_req_id).unwrap_or_else(|| panic!("{d_req_id} finished, never pulled"));
                assert!(!r.finished && !r.unsettled, "{d_req_id} finished twice or after it was left unsettled");
                r.finished = true;
            }
            DecoderEvent::Failed { d_req_id, .. } => {
                let r = self.reqs.get_mut(&d_req_id).unwrap_or_else(|| panic!("{d_req_id} failed, never pulled"));
                assert!(!r.failed && !r.finished && !r.unsettled, "{d_req_id} failed twice or after it settled");
                r.failed = true;
            }
            DecoderEvent::Unsettled { d_req_id, .. } => {
                let r = self.reqs.get_mut(&d_req_id).unwrap_or_else(|| panic!("{d_req_id} unsettled, never pulled"));
                assert!(!r.finished && !r.unsettled, "{d_req_id} settled twice");
                r.unsettled = true;
            }
        }
    }

    fn on_prefiller(&mut self, ev: PrefillerEvent) {
        match ev {
            PrefillerEvent::Write { id, session, descriptors } => {
                let ret = if self.fail_writes {
                    -1
                } else if session == format!("{HOST}:{TE_PORT}") {
                    perform_write(&self.pmem, &mut self.dmem, &descriptors)
                } else {
                    -1
                };
                if self.hold {
                    self.held.push((id, ret));
                } else {
                    self.pre.write_complete(self.now, id, ret);
                }
            }
            PrefillerEvent::FinishedSending { p_req_id, transfer_id, expired } => {
                let x = self
                    .transfers
                    .get_mut(&transfer_id)
                    .unwrap_or_else(|| panic!("{transfer_id} freed, but the scheduler never allocated it"));
                assert!(x.blocks.is_some(), "{transfer_id} freed before its prefill finished");
                assert!(!x.aborted, "{transfer_id} freed after it was aborted");
                assert!(!x.freed, "{transfer_id} freed twice");
                assert_eq!(p_req_id, x.p_req, "{transfer_id} freed for another request");
                if expired {
                    let at = x.finished_at.expect("finished");
                    assert!(self.now >= at + self.abort, "{transfer_id} expired before the abort timeout");
                    self.gen1_lost |= self.p_gen1 && x.pulled;
                }
                x.freed = true;
            }
            PrefillerEvent::Rejected { .. } => {}
        }
    }

    /// What a driver does when the timer fires.
    fn service(&mut self) {
        for _ in 0..64 {
            let mut fired = false;
            if self.pre.poll_timeout().is_some_and(|t| t <= self.now) {
                self.pre.handle_timeout(self.now);
                fired = true;
            }
            if self.dec.r().poll_timeout().is_some_and(|t| t <= self.now) {
                self.dec.m().handle_timeout(self.now);
                fired = true;
            }
            self.settle();
            if !fired {
                break;
            }
        }
        for t in [self.pre.poll_timeout(), self.dec.r().poll_timeout()].into_iter().flatten() {
            assert!(t > self.now, "poll_timeout is in the past after servicing");
        }
    }

    fn finish(mut self) {
        self.hold = false;
        for (id, ret) in std::mem::take(&mut self.held) {
            self.pre.write_complete(self.now, id, ret);
        }
        self.settle();
        let pending: Vec<String> = self
            .transfers
            .iter()
            .filter(|(_, x)| x.allocated && x.blocks.is_none() && !x.aborted)
            .map(|(k, _)| k.clone())
            .collect();
        for id in pending {
            self.transfers.get_mut(&id).expect("listed").aborted = true;
            self.pre.request_aborted(self.now, &id);
        }
        self.settle();
        for _ in 0..16 {
            self.now += self.abort.max(self.recv) + Duration::from_secs(1);
            self.service();
            if self.pre.poll_timeout().is_none() && self.dec.r().poll_timeout().is_none() {
                break;
            }
        }
        let pair = &self.pair;
        let d = self.dec.r();
        assert_eq!(d.pending_pulls(), 0, "{pair}: pulls left pending");
        assert_eq!(d.open_exchanges(), 0, "{pair}: exchanges left open");
        assert!(d.poll_timeout().is_none(), "{pair}: a decoder timer left");
        // Generation 1 keeps, as vLLM does, the entry of a request aborted before its prefill finished, and
        // stops expiring an entry once a pull names it (`unknown_transfer = done-at-first-unknown`,
        // `transfer_failure = kept-forever`): only a delivery frees it then.
        let kept = |x: &Transfer| {
            self.p_gen1
                && !x.freed
                && ((x.allocated && x.aborted && x.blocks.is_none()) || (x.blocks.is_some() && x.pulled))
        };
        let leftover = self.transfers.values().filter(|x| kept(x)).count();
        if self.gen1_lost {
            assert!(self.pre.tracked_transfers() <= leftover, "{pair}: transfers left tracked");
        } else {
            assert_eq!(self.pre.tracked_transfers(), leftover, "{pair}: transfers left tracked");
        }
        // A generation-1 pull waits without a bound for a request whose prefill never finished.
        let waits_forever = self.p_gen1
            && (self.named_leftover || self.transfers.values().any(|x| x.pulled && x.allocated && x.blocks.is_none()));
        if !waits_forever {
            assert_eq!(self.pre.open_exchanges(), 0, "{pair}: prefiller exchanges left open");
        }
        assert!(self.pre.poll_timeout().is_none(), "{pair}: a prefiller timer left");
        for (id, x) in &self.transfers {
            let lost = self.gen1_lost && x.pulled;
            if x.blocks.is_some() && !x.aborted && !kept(x) && !lost {
                assert!(x.freed, "{pair}: {id} finished, never freed");
            }
        }
        for (d, r) in &self.reqs {
            if r.blocks > 0 {
                assert!(r.finished || r.unsettled, "{pair}: {d} (of {}) never settled", r.transfer);
            }
        }
        // No write outside its blocks. A pull with fewer destination blocks than source blocks may take the
        // source's first or last ones (a prefix the decoder had cached).
        let mut mapped: HashMap<u64, HashSet<u64>> = HashMap::new();
        for (tid, pulls) in &self.pulled_to {
            let Some(src) = self.transfers.get(tid).and_then(|x| x.blocks.as_ref()) else { continue };
            for local in pulls {
                for (l, s) in local.iter().zip(src) {
                    mapped.entry(*l).or_default().insert(*s);
                }
                for (l, s) in local.iter().rev().zip(src.iter().rev()) {
                    mapped.entry(*l).or_default().insert(*s);
                }
            }
        }
        for l in 0..LAYERS as u64 {
            let region = self.dmem.region(D_BASE + l * STRIDE).expect("registered");
            for (i, w) in region.chunks(8).enumerate() {
                let word = u64::from_le_bytes(w.try_into().expect("8 bytes"));
                if word == 0 {
                    continue;
                }
                let (block, off) = (i as u64 * 8 / BLOCK, i as u64 * 8 % BLOCK);
                let ok = mapped.get(&block).is_some_and(|s| s.iter().any(|sb| provenance_word(l, *sb, off) == word));
                assert!(ok, "region {l} block {block} offset {off} holds {word:#x}, which no pull mapped there");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every revision against itself, and every pair `diff` finds compatible: a finished request pulled once
    /// works at once (the strong check runs and passes), also after the prefiller forgot cached layouts.
    #[test]
    fn a_ready_transfer_pulled_works_at_every_compatible_pair() {
        let n = revisions().len();
        let before = counts().clean_pulls_checked;
        let mut pairs = 0;
        for d in 0..n {
            for p in 0..n {
                if *prediction(d, p) != Prediction::Works {
                    continue;
                }
                pairs += 1;
                let pull = |t: u8| Op::Pull { ts: vec![t], short: false, fail: false, hold: false };
                let ops = vec![
                    Op::Ready { t: 1, blocks: vec![3, 4] },
                    Op::Ready { t: 2, blocks: vec![7] },
                    pull(1),
                    Op::ClearLayouts,
                    pull(2),
                    Op::Ready { t: 3, blocks: vec![9] },
                    Op::Advance { secs: 1, millis: 0 },
                    pull(3),
                ];
                let setup = Setup { decoder: d as u8, prefiller: p as u8, abort_secs: 0, recv_secs: 0, layout_id: 1 };
                execute(&Input { setup, ops });
            }
        }
        assert!(pairs >= n);
        assert_eq!(counts().clean_pulls_checked - before, 3 * pairs as u64, "every pull was clean and checked");
    }
}
