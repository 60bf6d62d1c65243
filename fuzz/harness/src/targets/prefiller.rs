//! The sans-IO prefiller core (`mooncake_wire::proto::PrefillerCore`) with vLLM 0.33.0's transfer planner,
//! driven by a sequence of operations the fuzzer chooses (structure-aware, via `arbitrary`): the scheduler
//! allocating, finishing and aborting requests, decoders pulling (well-formed pulls of any TP/PP shape, with
//! or without a layout, cached or not, optionally corrupted; or raw frames), the transfer engine completing
//! writes (or failing), and time passing. The driver acts like `reference-impl`: it calls `handle_timeout`
//! when the time from `poll_timeout` has come, and drains every output after each input.
//!
//! Invariants:
//! * limits: open pulls ≤ `MAX_PREFILLER_EXCHANGES`, cached layouts ≤ the spec's `max_peer_layouts`;
//! * `poll_timeout` is never in the past once the core has been serviced, and is `None` while nothing is
//!   tracked (no open exchange, no transfer);
//! * every reply decodes in the revision; per pull: `CONTINUE`* then exactly one terminal reply (none only
//!   for an admitted pull of no requests), nothing after it — except where the revision's `reply_rounds` is
//!   `err-then-ok` (0.16.0 – 0.18.1): a last round with per-request failures sends its error `FINISH`, then
//!   one ok `FINISH` naming the ready requests again; a request is reported at most once per pull in each
//!   list, in both only as error then ok under `err-then-ok`, and only requests of that pull are reported;
//! * write ids are fresh; a transfer is freed (`FinishedSending`) at most once per finish, only after the
//!   scheduler finished it, by the request that owns it, and by expiry only after the abort timeout;
//! * at the end, after every write completes and time passes the abort timeout, nothing is left: no open
//!   pull, no tracked transfer, every finished transfer freed, every pull answered — except the transfers a
//!   revision whose `heterogeneous_tp` is `refused-when-ready` refused for a larger decoder TP, which it never
//!   frees (0.16.0 – 0.18.1, as vLLM).

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use mooncake_wire::limits;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::plan::{GroupKind, LayerSpec, Producer, ProducerConfig, RegisteredLayout};
use mooncake_wire::proto::{PeerId, PrefillerCore, PrefillerEvent, WireProfile, WriteId};
use mooncake_wire::spec::behaviour::{HeterogeneousTp, ReplyRounds};
use mooncake_wire::spec::Spec;
use mooncake_wire::typed::{MooncakeXferMetadata, ReqBlocks, Status};

/// Generation-2 revisions the cores speak.
pub fn profiles() -> &'static [WireProfile] {
    static P: OnceLock<Vec<WireProfile>> = OnceLock::new();
    P.get_or_init(|| {
        Spec::builtin().push().revisions.iter().filter_map(|r| WireProfile::builtin(&r.revision).ok()).collect()
    })
}

const LOCAL_BASE: i64 = 0x1000_0000;
const REMOTE_BASE: u64 = 0x7000_0000;
const BLOCK: i64 = 4096;

/// The prefiller's configuration; every number is reduced into range (revision modulo the generation-2
/// revisions, TP 1, 2 or 4 with the rank modulo it, 1, 2 or 8 KV heads, MLA or not, 1 to 3 layers).
#[derive(Arbitrary, Debug)]
pub struct Setup {
    revision: u8,
    tp_log: u8,
    tp_rank: u8,
    heads: u8,
    mla: bool,
    layers: u8,
    /// Seconds; 0 keeps the spec's default.
    abort_secs: u8,
}

#[derive(Arbitrary, Debug)]
#[allow(clippy::large_enum_variant)] // fuzz input, built once per operation
/// One thing that happens to the prefiller.
pub enum Op {
    /// The scheduler allocates request `p<p>` for transfer `t<t>`.
    Allocate {
        /// The request's number.
        p: u8,
        /// The transfer's number.
        t: u8,
    },
    /// The prefill of request `p<p>` (transfer `t<t>`) finished: its blocks can be pulled.
    Finish {
        /// The request's number.
        p: u8,
        /// The transfer's number.
        t: u8,
        /// Its blocks per KV group (4 groups of 32 at most).
        blocks: Vec<Vec<u8>>,
    },
    /// The scheduler aborts transfer `t<t>`.
    Abort {
        /// The transfer's number.
        t: u8,
    },
    /// A decoder pulls, on a fresh DEALER.
    Pull(PullSpec),
    /// A raw message (its first 4 frames): two frames with a non-empty first one are a pull with that payload
    /// on a fresh DEALER; anything else is handed to the core as it is (and must be refused).
    Raw {
        /// The frames.
        frames: Vec<Vec<u8>>,
    },
    /// The transfer engine completes one outstanding write; nothing happens when none is outstanding.
    Complete {
        /// Which write (modulo their number).
        which: u8,
        /// Whether it failed (return code -1) rather than succeeded (0).
        fail: bool,
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
    /// The prefiller forgets every cached decoder layout.
    ClearLayouts,
}

/// A well-formed pull, encoded in the revision: the decoder's TP/PP shape, host, layout and layout id, and up to 16
/// requests; optionally one byte of the payload corrupted.
#[derive(Arbitrary, Debug)]
pub struct PullSpec {
    tp_log: u8,
    tp_rank: u8,
    pp: u8,
    layout: LayoutSpec,
    layout_id: u8,
    host: u8,
    reqs: Vec<(u8, u8, Vec<Vec<u8>>)>,
    corrupt: Option<(u16, u8)>,
}

/// The KV layout a pull carries.
#[derive(Arbitrary, Debug)]
pub enum LayoutSpec {
    /// Region lengths that fit the TP ratio.
    Matching,
    /// No layout (a cached-layout pull).
    Without,
    /// Each column from the fuzzer.
    /// (The first 8 of each column are sent.)
    Columns {
        /// `kv_caches_base_addr`.
        bases: Vec<u32>,
        /// `block_lens`.
        lens: Vec<i16>,
        /// `kv_block_lens`.
        kv_lens: Vec<i16>,
        /// `registered_layer_names`: the layer number of each (modulo 4).
        names: Vec<u8>,
        /// `registered_layer_indices`.
        indices: Vec<i8>,
        /// `registered_group_indices`.
        groups: Vec<i8>,
        /// `registered_shared_group_ids` (the first 4 of each).
        shared: Vec<Vec<i8>>,
        /// `registered_row_offsets`.
        rows: Vec<i16>,
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

struct PullRecord {
    /// The request ids of the pull as the prefiller decodes it; `None` when it cannot decode it.
    reqs: Option<Vec<String>>,
    reported_ok: HashSet<String>,
    reported_err: HashSet<String>,
    terminal: bool,
    /// The terminal reply named failed requests (under `err-then-ok`, the ok reply of its round follows).
    terminal_had_errors: bool,
    /// That ok reply came.
    second_finish: bool,
}

struct Harness {
    core: PrefillerCore<Producer>,
    profile: WireProfile,
    now: Instant,
    abort: Duration,
    max_layouts: usize,
    pulls: HashMap<PeerId, PullRecord>,
    next_peer: u32,
    writes: Vec<WriteId>,
    seen_writes: HashSet<WriteId>,
    /// Transfer id → (owner, when finished) for transfers finished and not freed or aborted.
    ready: HashMap<String, (String, Instant)>,
    /// Transfers allocated and neither finished nor aborted yet.
    allocated: HashSet<String>,
    /// This worker's TP size.
    local_tp: i64,
    /// Transfers pulled by a decoder TP the revision refuses (never freed, by the revision's rule).
    refused: HashSet<String>,
}

fn producer(s: &Setup, profile: &WireProfile) -> Producer {
    let tp = 1i64 << (s.tp_log % 3);
    let layers = 1 + s.layers as usize % 3;
    let names: Vec<String> = (0..layers).map(|l| format!("model.layers.{l}.self_attn")).collect();
    let layout = RegisteredLayout {
        kv_caches_base_addr: (0..layers as i64).map(|l| LOCAL_BASE + l * 0x100_0000).collect(),
        block_lens: vec![BLOCK; layers],
        kv_block_lens: vec![BLOCK; layers],
        registered_layer_indices: (0..layers as i64).collect(),
        registered_group_indices: vec![0; layers],
        registered_shared_group_ids: vec![],
        registered_row_offsets: vec![-1; layers],
        registered_layer_names: names.clone(),
    };
    Producer {
        config: ProducerConfig {
            tp_rank: s.tp_rank as i64 % tp,
            tp_size: tp,
            pp_size: 1,
            total_num_kv_heads: [1, 2, 8][s.heads as usize % 3],
            use_mla: s.mla,
            groups: vec![GroupKind::Attention],
            physical_blocks_per_logical: 1,
            blocks_first: s.mla,
        },
        rules: profile.rules.plan,
        column_check: profile.rules.equal_length.clone(),
        layout,
        has_opaque_packed_row: false,
        layer_groups: HashMap::new(),
        layer_specs: names.into_iter().map(|n| (n, LayerSpec::Attention { padded: false, nvfp4: false })).collect(),
    }
}

/// Runs one input and checks the invariants above; panics with the broken one.
pub fn execute(input: &Input) {
    let profile = profiles()[input.setup.revision as usize % profiles().len()].clone();
    let planner = producer(&input.setup, &profile);
    let local = planner.clone();
    let mut core = PrefillerCore::new(profile.clone(), planner);
    let abort = if input.setup.abort_secs == 0 {
        profile.abort_timeout
    } else {
        Duration::from_secs(input.setup.abort_secs as u64)
    };
    core.set_abort_timeout(abort);
    let max_layouts = profile.layout_caching.as_ref().map_or(0, |l| l.max_peer_layouts);
    let mut h = Harness {
        core,
        profile,
        now: Instant::now(),
        abort,
        max_layouts,
        pulls: HashMap::new(),
        next_peer: 0,
        writes: vec![],
        seen_writes: HashSet::new(),
        ready: HashMap::new(),
        allocated: HashSet::new(),
        local_tp: local.config.tp_size,
        refused: HashSet::new(),
    };
    for op in input.ops.iter().take(256) {
        h.apply(op, &local);
        h.check_serviced();
    }
    h.finish();
}

impl Harness {
    fn apply(&mut self, op: &Op, local: &Producer) {
        let now = self.now;
        match op {
            Op::Allocate { p, t } => {
                let t = format!("t{t}");
                if !self.ready.contains_key(&t) {
                    self.allocated.insert(t.clone());
                }
                self.core.request_allocated(now, &format!("p{p}"), &t);
            }
            Op::Finish { p, t, blocks } => {
                let t = format!("t{t}");
                let p = format!("p{p}");
                let blocks: Vec<Vec<u64>> =
                    blocks.iter().take(4).map(|g| g.iter().take(32).map(|b| *b as u64).collect()).collect();
                self.allocated.remove(&t);
                self.ready.insert(t.clone(), (p.clone(), now));
                self.core.request_finished(now, &p, &t, blocks);
            }
            Op::Abort { t } => {
                let t = format!("t{t}");
                self.allocated.remove(&t);
                self.ready.remove(&t);
                self.core.request_aborted(now, &t);
            }
            Op::Pull(spec) => {
                let m = pull_message(spec, local);
                let mut payload = self.profile.encode_metadata(&m).unwrap_or_else(|_| m.encode());
                if let Some((at, x)) = spec.corrupt {
                    if !payload.is_empty() {
                        let i = at as usize % payload.len();
                        payload[i] ^= x.max(1);
                    }
                }
                self.send(payload);
            }
            Op::Raw { frames } => {
                let mut frames: Vec<Vec<u8>> = frames.iter().take(4).cloned().collect();
                if frames.len() == 2 && !frames[0].is_empty() {
                    let payload = frames.pop().expect("2 frames");
                    self.send(payload);
                } else {
                    // Not [routing id, payload]: refused without a reply.
                    if let Some(f) = frames.first_mut() {
                        if !f.is_empty() {
                            f.insert(0, 0xff);
                        }
                    }
                    self.core.handle_frames(now, frames);
                }
            }
            Op::Complete { which, fail } => {
                if !self.writes.is_empty() {
                    let id = self.writes.remove(*which as usize % self.writes.len());
                    self.core.write_complete(now, id, if *fail { -1 } else { 0 });
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
            Op::ClearLayouts => self.core.clear_layout_cache(),
        }
        self.drain();
    }

    /// One pull on a fresh DEALER (a fresh routing id), as vLLM's decoder sends it.
    fn send(&mut self, payload: Vec<u8>) {
        self.next_peer += 1;
        let peer = PeerId([&[0u8][..], &self.next_peer.to_be_bytes()].concat());
        let m = self.profile.decode_metadata(&payload).ok();
        let reqs = m.as_ref().map(|m| m.req_blocks.iter().map(|(d, _)| d.clone()).collect());
        // `heterogeneous_tp = refused-when-ready` (0.16.0 - 0.18.1): a pull from a larger decoder TP is refused
        // when its request becomes ready, and that request is never freed (as in vLLM).
        if let Some(m) = &m {
            let refused = self.profile.rules.heterogeneous_tp == HeterogeneousTp::RefusedWhenReady
                && m.remote_tp_size.as_i64().is_some_and(|t| t > self.local_tp);
            if refused {
                self.refused.extend(m.req_blocks.iter().map(|(_, b)| b.transfer_id.clone()));
            }
        }
        self.pulls.insert(
            peer.clone(),
            PullRecord {
                reqs,
                reported_ok: HashSet::new(),
                reported_err: HashSet::new(),
                terminal: false,
                terminal_had_errors: false,
                second_finish: false,
            },
        );
        self.core.handle_frames(self.now, vec![peer.0, payload]);
    }

    /// What a driver does when the timer fires: handle the timeout if it is due.
    fn service(&mut self) {
        if self.core.poll_timeout().is_some_and(|t| t <= self.now) {
            self.core.handle_timeout(self.now);
        }
    }

    fn check_serviced(&mut self) {
        self.service();
        self.drain();
        if let Some(t) = self.core.poll_timeout() {
            assert!(t > self.now, "poll_timeout is in the past after servicing: {:?} before now", self.now - t);
        }
        assert!(self.core.open_exchanges() <= limits::MAX_PREFILLER_EXCHANGES);
        // A timer is only ever kept for something tracked: one left by a finished pull or a freed transfer
        // would live until the abort timeout, one per pull. An expired transfer id is tracked too: it is
        // remembered (for the expired-pull reply) until the abort timeout has passed since it expired.
        if self.core.open_exchanges() == 0 && self.core.tracked_transfers() == 0 && self.core.remembered_expired() == 0
        {
            assert_eq!(self.core.poll_timeout(), None, "a timer outlives every exchange and transfer");
        }
        assert!(
            self.core.cached_layouts() <= self.max_layouts,
            "{} cached layouts, limit {}",
            self.core.cached_layouts(),
            self.max_layouts
        );
    }

    fn drain(&mut self) {
        while let Some(t) = self.core.poll_transmit() {
            let r = self
                .profile
                .decode_response(&t.payload)
                .unwrap_or_else(|e| panic!("a reply that does not decode in {}: {e}", self.profile.name()));
            assert!(self.profile.knows_status(r.status), "status {:?} is not one of {}", r.status, self.profile.name());
            let rec =
                self.pulls.get_mut(&t.peer).unwrap_or_else(|| panic!("a reply to {:?}, which sent nothing", t.peer));
            let err_then_ok = self.profile.rules.reply_rounds == ReplyRounds::ErrThenOk;
            let has_errors = r.err_reqs.as_ref().is_some_and(|e| !e.is_empty());
            if rec.terminal {
                assert!(
                    err_then_ok
                        && rec.terminal_had_errors
                        && !rec.second_finish
                        && r.status == Status::FINISH
                        && !has_errors,
                    "a reply after the terminal one: {r:?}"
                );
                rec.second_finish = true;
            }
            if self.profile.is_terminal(r.status) && !rec.terminal {
                rec.terminal = true;
                rec.terminal_had_errors = has_errors;
            }
            for (d, ok) in
                r.ok_reqs.iter().flatten().map(|d| (d, true)).chain(r.err_reqs.iter().flatten().map(|d| (d, false)))
            {
                let d = &d.to_owned();
                let reqs = rec
                    .reqs
                    .as_ref()
                    .unwrap_or_else(|| panic!("requests reported for a pull that does not decode: {r:?}"));
                assert!(reqs.contains(d), "{d} is not a request of this pull: {r:?}");
                if ok {
                    assert!(rec.reported_ok.insert(d.clone()), "{d} reported ok twice in one pull: {r:?}");
                    assert!(
                        err_then_ok || !rec.reported_err.contains(d),
                        "{d} reported failed, then ok, in one pull: {r:?}"
                    );
                } else {
                    assert!(rec.reported_err.insert(d.clone()), "{d} reported failed twice in one pull: {r:?}");
                    assert!(!rec.reported_ok.contains(d), "{d} reported ok, then failed, in one pull: {r:?}");
                }
            }
            if matches!(r.status, Status::ERROR | Status::LAYOUT_MISS) {
                assert!(r.err_msg.is_some(), "an {:?} without err_msg", r.status);
            }
        }
        while let Some(ev) = self.core.poll_event() {
            match ev {
                PrefillerEvent::Write { id, descriptors, .. } => {
                    assert!(self.seen_writes.insert(id), "write id {id:?} reused");
                    assert!(!descriptors.is_empty(), "a write of nothing");
                    self.writes.push(id);
                }
                PrefillerEvent::FinishedSending { p_req_id, transfer_id, expired } => {
                    let (owner, at) = self
                        .ready
                        .remove(&transfer_id)
                        .unwrap_or_else(|| panic!("{transfer_id} freed but not finished (or freed twice)"));
                    assert_eq!(p_req_id, owner, "{transfer_id} freed for the wrong request");
                    if expired {
                        assert!(self.now > at + self.abort, "{transfer_id} expired before the abort timeout");
                    }
                }
                PrefillerEvent::Rejected { peer, .. } => {
                    assert!(!self.pulls.contains_key(&peer), "a well-formed message was rejected without a reply")
                }
            }
        }
    }

    /// Every write completes, the scheduler resolves every allocated request, time passes: nothing is left.
    fn finish(mut self) {
        for t in std::mem::take(&mut self.allocated) {
            self.core.request_aborted(self.now, &t);
        }
        for _ in 0..16 {
            while let Some(id) = self.writes.pop() {
                self.core.write_complete(self.now, id, 0);
                self.drain();
            }
            self.now += self.abort + Duration::from_secs(1);
            self.service();
            self.drain();
            if self.writes.is_empty() && self.core.open_exchanges() == 0 && self.core.poll_timeout().is_none() {
                break;
            }
        }
        assert_eq!(self.core.open_exchanges(), 0, "pulls left open");
        assert!(self.writes.is_empty(), "writes left");
        let never_freed: Vec<&String> = self.ready.keys().filter(|t| !self.refused.contains(*t)).collect();
        assert!(never_freed.is_empty(), "finished transfers never freed: {never_freed:?}");
        assert_eq!(self.core.tracked_transfers(), self.ready.len(), "transfers left tracked");
        assert!(self.core.poll_timeout().is_none(), "a timer left");
        for (peer, rec) in &self.pulls {
            let needs_answer = rec.reqs.as_ref().is_none_or(|r| !r.is_empty());
            assert!(rec.terminal || !needs_answer, "pull {peer:?} never got a terminal reply");
        }
    }
}

fn wire(v: impl IntoIterator<Item = i64>) -> Vec<WireInt> {
    v.into_iter().map(WireInt::from_i64).collect()
}

fn pull_message(s: &PullSpec, local: &Producer) -> MooncakeXferMetadata {
    let tp = 1i64 << (s.tp_log % 4);
    let rank = if s.tp_rank == 255 { tp } else { s.tp_rank as i64 % tp };
    let mut m = MooncakeXferMetadata {
        remote_hostname: format!("10.0.0.{}", s.host % 3),
        remote_port: WireInt::from_u64(17000),
        remote_tp_size: WireInt::from_i64(tp),
        remote_tp_rank: WireInt::from_i64(rank),
        remote_pp_size: WireInt::from_i64(1 + (s.pp % 3) as i64),
        layout_id: match s.layout_id % 8 {
            0..=3 => WireInt::ZERO,
            4 => WireInt::from_u64(0x1234_5679),
            5 => WireInt::from_u64(0xabcd_ef01),
            6 => WireInt::from_u64(u64::MAX),
            _ => WireInt::from_u64(s.layout_id as u64),
        },
        ..Default::default()
    };
    for (d, t, blocks) in s.reqs.iter().take(16) {
        let key = format!("d{d}");
        let value = ReqBlocks {
            transfer_id: format!("t{t}"),
            blocks: blocks
                .iter()
                .take(4)
                .map(|g| g.iter().take(32).map(|b| WireInt::from_u64(*b as u64)).collect())
                .collect(),
        };
        // A dict: the last value wins, the first position stays.
        match m.req_blocks.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => m.req_blocks.push((key, value)),
        }
    }
    let l = &local.layout;
    let n = l.kv_caches_base_addr.len();
    match &s.layout {
        LayoutSpec::Without => {}
        LayoutSpec::Matching => {
            let heads = local.config.total_num_kv_heads;
            let (lt, rt) = (local.config.tp_size.min(heads), tp.min(heads));
            let len = if lt >= rt { BLOCK * (lt / rt) } else { (BLOCK / (rt / lt)).max(1) };
            m.kv_caches_base_addr = (0..n as u64).map(|i| WireInt::from_u64(REMOTE_BASE + i * 0x100_0000)).collect();
            m.block_lens = wire(vec![len; n]);
            m.kv_block_lens = wire(vec![len; n]);
            m.registered_layer_names = l.registered_layer_names.clone();
            m.registered_layer_indices = wire(l.registered_layer_indices.clone());
            m.registered_group_indices = wire(l.registered_group_indices.clone());
            m.registered_row_offsets = wire(l.registered_row_offsets.clone());
        }
        LayoutSpec::Columns { bases, lens, kv_lens, names, indices, groups, shared, rows } => {
            m.kv_caches_base_addr = bases.iter().take(8).map(|b| WireInt::from_u64(*b as u64)).collect();
            m.block_lens = wire(lens.iter().take(8).map(|x| *x as i64));
            m.kv_block_lens = wire(kv_lens.iter().take(8).map(|x| *x as i64));
            m.registered_layer_names =
                names.iter().take(8).map(|x| format!("model.layers.{}.self_attn", x % 4)).collect();
            m.registered_layer_indices = wire(indices.iter().take(8).map(|x| *x as i64));
            m.registered_group_indices = wire(groups.iter().take(8).map(|x| *x as i64));
            m.registered_shared_group_ids =
                shared.iter().take(8).map(|g| wire(g.iter().take(4).map(|x| *x as i64))).collect();
            m.registered_row_offsets = wire(rows.iter().take(8).map(|x| *x as i64));
        }
    }
    m
}
