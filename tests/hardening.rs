// The counting global allocator below is unsafe code (`unsafe_code` is denied everywhere but here and in
// `io/tests/suite/signals.rs`' libc calls): it forwards every call to the system allocator.
#![allow(unsafe_code)]
//! Hostile inputs are refused, or handled within the limits of `src/limits.rs`, with the heap they cost
//! measured: this test binary counts every allocation of the thread that decodes (a counting global allocator)
//! and asserts the peak stays under a bound derived from the limits and the input's own length — never from a
//! length the input declares.
//!
//! The bound ([`linear_bound`]): every value costs at least one input byte, so a decode yields at most `len`
//! values; each lives in a `Vec` (up to twice its length in capacity, three times while the vector grows),
//! dict entries are pairs and are indexed once more by key, and strings copy their bytes. 16 values' worth of
//! bytes per input byte covers all of it; on top, preallocation is capped at `MAX_PREALLOC_ELEMENTS` per open
//! container (the spec types nest at most a few levels), plus a fixed 64 KiB for paths, errors and the like.
//! A map that repeats one key costs that capped preallocation and one entry, however often the key comes.
//! Inputs that declare a huge length but do not contain it get a much tighter bound: a few KiB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use mooncake_wire::codec::{Codec, DecodeErrorKind, Value};
use mooncake_wire::keys::grammar::{Fields, KeyParseError};
use mooncake_wire::keys::spec::StoreKeySpec;
use mooncake_wire::limits::{
    self, MAX_DEPTH, MAX_FRAME_BYTES, MAX_PREALLOC_ELEMENTS, MAX_STORE_KEY_BYTES, MAX_STORE_KEY_SEPARATORS,
};
use mooncake_wire::msgpack::{WireInt, Writer};
use mooncake_wire::plan::{GroupKind, LayerSpec, Producer, ProducerConfig, RegisteredLayout};
use mooncake_wire::proto::{
    DecoderConfig, DecoderCore, DecoderEvent, EngineTable, PeerId, PrefillerCore, PullRequest, WireProfile,
};
use mooncake_wire::spec::Spec;
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse, ReqBlocks, Status};

// ---- the counting allocator ------------------------------------------------------------------------------

struct Counting;

thread_local! {
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    let _ = CURRENT.try_with(|c| {
        let v = c.get() + delta;
        c.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are plain thread-locals
// with const initializers (no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        track(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Counted as a new block first, then the old one freed: a moving realloc holds both for a moment.
            track(new_size as isize);
            track(-(layout.size() as isize));
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result with the peak of bytes it held on the heap at once (this thread only).
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let r = f();
    let peak = PEAK.with(Cell::get) - base;
    (r, peak.max(0) as usize)
}

const FIXED: usize = 64 * 1024;
/// Spec types nest a few containers deep (`dict[str, tuple[str, list[list[int]]]]` is the deepest): at most this
/// many preallocations are alive at once.
const TYPE_DEPTH: usize = 6;
/// "Declared but absent": what a refusal may cost.
const TIGHT: usize = 8 * 1024;

/// The largest element any decoder preallocates for: a dict entry of values, a typed `req_blocks` entry.
const PREALLOC_ELEMENT: usize = 128;

/// What preallocation alone may cost: `MAX_PREALLOC_ELEMENTS` elements in each open container.
fn prealloc_bound() -> usize {
    assert!(
        std::mem::size_of::<(Value, Value)>() <= PREALLOC_ELEMENT
            && std::mem::size_of::<(String, ReqBlocks)>() <= PREALLOC_ELEMENT
    );
    TYPE_DEPTH * MAX_PREALLOC_ELEMENTS * PREALLOC_ELEMENT + FIXED
}

fn linear_bound(len: usize) -> usize {
    16 * std::mem::size_of::<Value>() * len + prealloc_bound()
}

// ---- inputs ----------------------------------------------------------------------------------------------

fn str_(w: &mut Writer, s: &str) {
    w.str(s);
}

/// A 0.33.0 `MooncakeXferMetadata` map with every required field, `field` (if named) replaced by `raw` bytes.
fn metadata_with(field: &str, raw: &[u8]) -> Vec<u8> {
    let base: Vec<(&str, Vec<u8>)> = vec![
        ("remote_hostname", vec![0xa1, b'h']),
        ("remote_port", vec![0x01]),
        ("remote_tp_size", vec![0x01]),
        ("remote_tp_rank", vec![0x00]),
        ("req_blocks", vec![0x80]),
        ("kv_caches_base_addr", vec![0x90]),
        ("block_lens", vec![0x90]),
        ("kv_block_lens", vec![0x90]),
    ];
    let mut entries: Vec<(&str, Vec<u8>)> = base.into_iter().filter(|(n, _)| *n != field).collect();
    entries.push((field, raw.to_vec()));
    let mut w = Writer::new();
    w.map_len(entries.len());
    for (n, v) in entries {
        str_(&mut w, n);
        w.raw(&v);
    }
    w.into_bytes()
}

fn response_with(field: &str, raw: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.map_len(if field == "status" { 1 } else { 2 });
    if field != "status" {
        str_(&mut w, "status");
        w.uint(0);
    }
    str_(&mut w, field);
    w.raw(raw);
    w.into_bytes()
}

/// Heads that declare 2^32-1 elements or bytes of every kind.
const HUGE_HEADS: [(&str, &[u8]); 6] = [
    ("array32", b"\xdd\xff\xff\xff\xff"),
    ("map32", b"\xdf\xff\xff\xff\xff"),
    ("str32", b"\xdb\xff\xff\xff\xff"),
    ("bin32", b"\xc6\xff\xff\xff\xff"),
    ("ext32", b"\xc9\xff\xff\xff\xff\x01"),
    ("array16", b"\xdc\xff\xff"),
];

fn codecs() -> Vec<std::sync::Arc<Codec>> {
    Spec::builtin().push().revisions.iter().map(|r| Codec::builtin(&r.revision).unwrap()).collect()
}

/// Every decoder of a frame: the spec-driven one of every revision for every message, and the typed ones.
fn decode_everywhere(frame: &[u8], mut check: impl FnMut(&str, Result<(), DecodeErrorKind>, usize)) {
    for c in codecs() {
        for m in c.messages().map(String::from).collect::<Vec<_>>() {
            let (r, peak) = peak_of(|| c.decode(&m, frame).map(|_| ()).map_err(|e| e.kind));
            check(&format!("{} {m}", c.revision().revision), r, peak);
        }
    }
    let (r, peak) = peak_of(|| MooncakeXferMetadata::decode(frame).map(|_| ()).map_err(|e| e.kind));
    check("typed MooncakeXferMetadata", r, peak);
    let (r, peak) = peak_of(|| MooncakeXferResponse::decode(frame).map(|_| ()).map_err(|e| e.kind));
    check("typed MooncakeXferResponse", r, peak);
}

fn warm_up() {
    for c in codecs() {
        for m in c.messages().map(String::from).collect::<Vec<_>>() {
            let _ = c.decode(&m, b"\x80");
        }
    }
}

// ---- declared lengths ------------------------------------------------------------------------------------

#[test]
fn huge_declared_lengths_cost_nothing() {
    warm_up();
    let mut cases = 0;
    let meta_fields = mooncake_wire::typed::METADATA_FIELDS.iter().chain(["unknown_field"].iter());
    let mut frames: Vec<(String, Vec<u8>)> =
        HUGE_HEADS.iter().map(|(k, h)| (format!("{k} frame"), h.to_vec())).collect();
    for f in meta_fields {
        for (k, h) in HUGE_HEADS {
            frames.push((format!("{k} as MooncakeXferMetadata.{f}"), metadata_with(f, h)));
        }
    }
    for f in mooncake_wire::typed::RESPONSE_FIELDS.iter().chain(["unknown_field"].iter()) {
        for (k, h) in HUGE_HEADS {
            frames.push((format!("{k} as MooncakeXferResponse.{f}"), response_with(f, h)));
        }
    }
    // Inside req_blocks: a value tuple, its block list, a group.
    for (k, h) in HUGE_HEADS {
        let inner = [&b"\x81\xa1d\x92\xa1t\x91"[..], h].concat();
        frames.push((format!("{k} as a block group"), metadata_with("req_blocks", &inner)));
        let inner = [&b"\x81\xa1d\x92\xa1t"[..], h].concat();
        frames.push((format!("{k} as a block list"), metadata_with("req_blocks", &inner)));
        let inner = [&b"\x81\xa1d"[..], h].concat();
        frames.push((format!("{k} as a req_blocks value"), metadata_with("req_blocks", &inner)));
    }
    for (what, frame) in &frames {
        decode_everywhere(frame, |who, r, peak| {
            assert!(r.is_err(), "{who}: {what} must be refused");
            assert!(peak <= TIGHT, "{who}: {what} cost {peak} bytes (bound {TIGHT})");
            cases += 1;
        });
    }
    println!("{cases} decodes of inputs declaring 2^32-1 (or 2^16-1) elements refused, each within {TIGHT} bytes");
}

#[test]
fn declared_lengths_larger_than_the_data_cost_only_the_data() {
    warm_up();
    // kv_caches_base_addr declares 2^32-1 ints and holds a million: truncated, and the heap follows the
    // million (the input), not the 2^32-1.
    let n = 1_000_000;
    let body = [&b"\xdd\xff\xff\xff\xff"[..], &vec![0x01u8; n]].concat();
    let frame = metadata_with("kv_caches_base_addr", &body);
    let mut worst = 0usize;
    decode_everywhere(&frame, |who, r, peak| {
        assert!(r.is_err(), "{who}");
        assert!(
            peak <= linear_bound(frame.len()),
            "{who}: {peak} bytes for {} input bytes (bound {})",
            frame.len(),
            linear_bound(frame.len())
        );
        worst = worst.max(peak);
    });
    // A tight check of the same: a few values' worth per input byte, far below what 2^32-1 elements would take.
    assert!(worst < 4 * std::mem::size_of::<Value>() * frame.len(), "{worst} bytes");
    println!(
        "2^32-1 declared, {n} present: at most {worst} bytes ({:.1} per input byte)",
        worst as f64 / frame.len() as f64
    );
}

// ---- nesting ---------------------------------------------------------------------------------------------

#[test]
fn deep_nesting_is_refused_without_recursion_or_memory() {
    warm_up();
    let depth = 1_000_000;
    let mut nested = vec![0x91u8; depth];
    nested.push(0x01);
    let frames = [
        ("an unknown metadata field", metadata_with("zz", &nested)),
        ("an unknown response field", response_with("zz", &nested)),
        ("a block group", metadata_with("registered_shared_group_ids", &nested)),
        ("the frame", nested.clone()),
    ];
    // On a small stack: the decoders recurse along the spec type, never along the input.
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            warm_up();
            for (what, frame) in &frames {
                decode_everywhere(frame, |who, r, peak| {
                    assert!(r.is_err(), "{who}: {depth} nested arrays in {what} must be refused");
                    assert!(peak <= TIGHT + MAX_DEPTH * 16, "{who}: {what} cost {peak} bytes");
                });
            }
        })
        .unwrap()
        .join()
        .unwrap();
    // Exactly at the limit in an ignored field: MAX_DEPTH containers in all are accepted, one more is not.
    let c = Codec::builtin("vllm-0.33.0").unwrap();
    for (extra, ok) in [(MAX_DEPTH - 1, true), (MAX_DEPTH, false)] {
        let mut inner = vec![0x91u8; extra - 1];
        inner.extend_from_slice(&[0x90]);
        let frame = response_with("zz", &inner);
        let r = c.decode("MooncakeXferResponse", &frame);
        assert_eq!(r.is_ok(), ok, "{extra} nested in an ignored field: {:?}", r.err());
        if !ok {
            assert_eq!(r.unwrap_err().kind, DecodeErrorKind::TooDeep);
        }
        assert_eq!(MooncakeXferResponse::decode(&frame).is_ok(), ok);
    }
}

// ---- strings and integers --------------------------------------------------------------------------------

#[test]
fn long_strings_cost_their_length_once() {
    warm_up();
    let len = 16 * 1024 * 1024;
    let mut w = Writer::new();
    w.str(&"x".repeat(len));
    let s = w.into_bytes();
    let frame = metadata_with("remote_hostname", &s);
    let (r, peak) = peak_of(|| MooncakeXferMetadata::decode(&frame));
    assert_eq!(r.unwrap().remote_hostname.len(), len);
    assert!(peak <= len + FIXED, "typed: {peak} bytes for a {len}-byte string");
    let c = Codec::builtin("vllm-0.33.0").unwrap();
    let (r, peak) = peak_of(|| c.decode("MooncakeXferMetadata", &frame).map(|_| ()));
    r.unwrap();
    assert!(peak <= len + FIXED, "spec: {peak} bytes for a {len}-byte string");
    // The same string with invalid UTF-8 at its end: refused before anything is copied.
    let mut bad_str = s.clone();
    *bad_str.last_mut().unwrap() = 0xff;
    let bad = metadata_with("remote_hostname", &bad_str);
    decode_everywhere(&bad, |who, r, peak| {
        if who.contains("MooncakeXferMetadata") && !who.contains("0.13.0") {
            assert_eq!(r, Err(DecodeErrorKind::InvalidUtf8), "{who}");
        }
        assert!(peak <= TIGHT, "{who}: {peak} bytes to refuse a {len}-byte string");
    });
}

#[test]
fn extreme_integers_decode_exactly_and_are_refused_where_they_do_not_fit() {
    let c = Codec::builtin("vllm-0.33.0").unwrap();
    let max = b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff";
    let min = b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00";
    for f in ["remote_port", "remote_tp_size", "remote_tp_rank", "remote_pp_size", "layout_id"] {
        for (raw, v) in [(&max[..], WireInt::MAX), (&min[..], WireInt::MIN)] {
            let frame = metadata_with(f, raw);
            let t = MooncakeXferMetadata::decode(&frame).unwrap();
            let s = c.decode("MooncakeXferMetadata", &frame).unwrap();
            assert_eq!(s.field(f).unwrap().as_int(), Some(v), "{f}");
            assert_eq!(t.encode(), c.encode("MooncakeXferMetadata", &s).unwrap(), "{f}");
        }
    }
    // In lists and block ids too.
    let blocks = [&b"\x81\xa1d\x92\xa1t\x91\x92"[..], max, min].concat();
    let t = MooncakeXferMetadata::decode(&metadata_with("req_blocks", &blocks)).unwrap();
    assert_eq!(t.req_blocks[0].1.blocks, vec![vec![WireInt::MAX, WireInt::MIN]]);
    // An enum has no such member.
    let r = MooncakeXferResponse::decode(&response_with("status", max)).unwrap_err();
    assert_eq!(r.msgspec_message(), "Invalid enum value 18446744073709551615 - at `$.status`");
}

// ---- frames ----------------------------------------------------------------------------------------------

#[test]
fn oversize_frames_are_refused_before_any_work() {
    warm_up();
    // A frame one byte over the limit is refused for its size, whatever it holds, without copying it.
    let mut frame = metadata_with("remote_hostname", &[0xc4, 0x00]);
    frame.resize(MAX_FRAME_BYTES + 1, 0);
    decode_everywhere(&frame, |who, r, peak| {
        assert_eq!(r, Err(DecodeErrorKind::FrameTooLarge { len: MAX_FRAME_BYTES + 1 }), "{who}");
        assert!(peak <= TIGHT, "{who}: {peak} bytes to refuse an oversize frame");
    });
    // At the limit it is decoded (and refused here for its trailing bytes).
    frame.truncate(MAX_FRAME_BYTES);
    let r = Codec::builtin("vllm-0.33.0").unwrap().decode("MooncakeXferMetadata", &frame).unwrap_err();
    assert!(matches!(r.kind, DecodeErrorKind::Expected { .. } | DecodeErrorKind::Trailing { .. }), "{r:?}");
    // The prefiller answers an oversize pull with an ERROR and keeps nothing.
    let mut p = prefiller();
    let now = Instant::now();
    frame.push(0);
    let (_, peak) = peak_of(|| p.handle_frames(now, vec![b"peer".to_vec(), std::mem::take(&mut frame)]));
    let reply = MooncakeXferResponse::decode(&p.poll_transmit().unwrap().payload).unwrap();
    assert_eq!(reply.status, Status::ERROR);
    assert!(reply.err_msg.unwrap().contains("limits::MAX_FRAME_BYTES"));
    assert_eq!((p.open_exchanges(), p.tracked_transfers()), (0, 0));
    // What it held at once is the reply, not a second copy of the frame (which it was handed and drops).
    assert!(peak <= TIGHT, "{peak} bytes");
}

// ---- many requests and many pulls -----------------------------------------------------------------------

fn many_requests(n: usize) -> Vec<u8> {
    let mut w = Writer::new();
    w.map_len(n);
    for i in 0..n {
        w.str(&format!("d{i}"));
        w.array_len(2);
        w.str(&format!("t{i}"));
        w.array_len(1);
        w.array_len(1);
        w.uint(i as u64);
    }
    metadata_with("req_blocks", w.as_bytes())
}

#[test]
fn many_requests_cost_linear_memory() {
    warm_up();
    let n = 200_000;
    let frame = many_requests(n);
    let c = Codec::builtin("vllm-0.33.0").unwrap();
    let (t, peak_t) = peak_of(|| MooncakeXferMetadata::decode(&frame).unwrap());
    assert_eq!(t.req_blocks.len(), n);
    let (s, peak_s) = peak_of(|| c.decode("MooncakeXferMetadata", &frame).unwrap());
    assert_eq!(s.field("req_blocks").unwrap().as_dict().unwrap().len(), n);
    drop((t, s));
    for (who, peak) in [("typed", peak_t), ("spec", peak_s)] {
        assert!(peak <= linear_bound(frame.len()), "{who}: {peak} bytes for {} input bytes", frame.len());
    }
    println!("{n} requests in {} bytes: typed {peak_t} bytes, spec {peak_s} bytes at peak", frame.len());
    // The same key 200,000 times: one entry (last wins), and memory for one.
    let mut w = Writer::new();
    w.map_len(n);
    for i in 0..n {
        w.str("d");
        w.array_len(2);
        w.str("t");
        w.array_len(1);
        w.array_len(1);
        w.uint(i as u64);
    }
    let frame = metadata_with("req_blocks", w.as_bytes());
    let (t, peak) = peak_of(|| MooncakeXferMetadata::decode(&frame).unwrap());
    assert_eq!(
        t.req_blocks,
        vec![(
            "d".to_string(),
            ReqBlocks { transfer_id: "t".into(), blocks: vec![vec![WireInt::from((n - 1) as u64)]] }
        )]
    );
    // What it may cost is the preallocation for the 200,000 entries the map declares (capped), not 200,000.
    assert!(peak <= prealloc_bound(), "typed: {peak} bytes for one request sent {n} times");
    let (_, peak) = peak_of(|| c.decode("MooncakeXferMetadata", &frame).unwrap());
    assert!(peak <= prealloc_bound(), "spec: {peak} bytes for one request sent {n} times");
}

fn prefiller() -> PrefillerCore<Producer> {
    let names = vec!["model.layers.0.self_attn".to_string()];
    let producer = Producer {
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
        layout: RegisteredLayout {
            kv_caches_base_addr: vec![0x1000_0000],
            block_lens: vec![4096],
            kv_block_lens: vec![4096],
            registered_layer_names: names.clone(),
            registered_layer_indices: vec![0],
            registered_group_indices: vec![0],
            registered_shared_group_ids: vec![],
            registered_row_offsets: vec![-1],
        },
        has_opaque_packed_row: false,
        layer_groups: HashMap::new(),
        layer_specs: names.into_iter().map(|n| (n, LayerSpec::Attention { padded: false, nvfp4: false })).collect(),
        rules: mooncake_wire::plan::PlanRules::newest(),
        column_check: mooncake_wire::plan::PlanRules::newest_column_check(),
    };
    PrefillerCore::new(WireProfile::builtin("vllm-0.33.0").unwrap(), producer)
}

fn pull(d: &str, tp_size: WireInt, tp_rank: WireInt, pp: WireInt) -> MooncakeXferMetadata {
    MooncakeXferMetadata {
        remote_hostname: "10.0.0.9".into(),
        remote_port: 17001u64.into(),
        remote_tp_size: tp_size,
        remote_tp_rank: tp_rank,
        remote_pp_size: pp,
        req_blocks: vec![(d.into(), ReqBlocks { transfer_id: format!("t-{d}"), blocks: vec![vec![1u64.into()]] })],
        kv_caches_base_addr: vec![0x7000_0000u64.into()],
        block_lens: vec![4096u64.into()],
        kv_block_lens: vec![4096u64.into()],
        registered_layer_names: vec!["model.layers.0.self_attn".into()],
        registered_layer_indices: vec![0u64.into()],
        registered_group_indices: vec![0u64.into()],
        registered_row_offsets: vec![WireInt::from(-1i64)],
        ..Default::default()
    }
}

#[test]
fn absurd_parallel_sizes_are_refused_without_allocating_them() {
    let mut p = prefiller();
    let now = Instant::now();
    let one = WireInt::from(1u64);
    let cases = [
        ("tp size 2^64-1", pull("a", WireInt::MAX, WireInt::ZERO, one), "remote_tp_size = 18446744073709551615"),
        ("tp size 2^63-1", pull("b", WireInt::from(i64::MAX), WireInt::ZERO, one), "exceed the limit of 65536"),
        ("tp size -2^63", pull("c", WireInt::MIN, WireInt::ZERO, one), ""),
        ("tp rank 2^64-1", pull("d", one, WireInt::MAX, one), ""),
        ("pp size 2^64-1", pull("e", one, WireInt::ZERO, WireInt::MAX), "remote_pp_size"),
        ("pp size 2^63-1", pull("f", one, WireInt::ZERO, WireInt::from(i64::MAX)), ""),
    ];
    for (what, m, want) in cases {
        let payload = m.encode();
        let (_, peak) = peak_of(|| p.handle_frames(now, vec![b"peer".to_vec(), payload]));
        assert!(peak <= 64 * 1024, "{what}: {peak} bytes");
        let r = match p.poll_transmit() {
            Some(t) => MooncakeXferResponse::decode(&t.payload).unwrap(),
            None => {
                // Accepted as a pull: it waits for its transfer and times out like any other.
                assert!(want.is_empty(), "{what}: expected a refusal mentioning {want:?}");
                continue;
            }
        };
        assert_eq!(r.status, Status::ERROR, "{what}: {r:?}");
        assert!(r.err_msg.as_deref().unwrap().contains(want), "{what}: {:?}", r.err_msg);
    }
    p.handle_timeout(now + Duration::from_secs(481));
    while p.poll_transmit().is_some() {}
    assert_eq!((p.open_exchanges(), p.tracked_transfers()), (0, 0));
}

#[test]
fn a_flood_of_pulls_stops_at_the_exchange_limits() {
    // Prefiller: MAX_PREFILLER_EXCHANGES pulls wait at once; the next is answered ERROR at once.
    let mut p = prefiller();
    let now = Instant::now();
    let one = WireInt::from(1u64);
    let payloads: Vec<Vec<u8>> = (0..=limits::MAX_PREFILLER_EXCHANGES)
        .map(|i| pull(&format!("d{i}"), one, WireInt::ZERO, one).encode())
        .collect();
    for (i, b) in payloads.into_iter().enumerate() {
        p.handle_frames(now, vec![format!("peer{i}").into_bytes(), b]);
    }
    assert_eq!(p.open_exchanges(), limits::MAX_PREFILLER_EXCHANGES);
    let t = p.poll_transmit().expect("the pull over the limit is answered");
    assert_eq!(t.peer, PeerId(format!("peer{}", limits::MAX_PREFILLER_EXCHANGES).into_bytes()));
    let r = MooncakeXferResponse::decode(&t.payload).unwrap();
    assert_eq!(
        (r.status, r.err_msg.as_deref()),
        (Status::ERROR, Some("Mooncake prefiller is serving 65536 pulls already; retry later."))
    );
    assert!(p.poll_transmit().is_none());
    p.handle_timeout(now + Duration::from_secs(480));
    let mut timeouts = 0;
    while p.poll_transmit().is_some() {
        timeouts += 1;
    }
    assert_eq!(timeouts, limits::MAX_PREFILLER_EXCHANGES);
    assert_eq!((p.open_exchanges(), p.tracked_transfers()), (0, 0));

    // Decoder: at most MAX_DECODER_EXCHANGES open; requests beyond fail locally (and are still settled).
    let cfg = DecoderConfig {
        hostname: "10.0.0.9".into(),
        te_port: 17001,
        tp_rank: 0,
        tp_size: 1,
        pp_rank: 0,
        pp_size: 1,
        layout: Default::default(),
        layout_id: 0,
    };
    let mut d = DecoderCore::new(WireProfile::builtin("vllm-0.33.0").unwrap(), cfg);
    let table: EngineTable =
        [(0usize, [(0usize, "tcp://p:1".to_string())].into_iter().collect())].into_iter().collect();
    let req = |i: usize| PullRequest {
        d_req_id: format!("d{i}"),
        transfer_id: format!("t{i}"),
        local_blocks: vec![vec![1]],
        engine_id: "e".into(),
        bootstrap_addr: "http://b".into(),
        remote: None,
    };
    d.pull(now, vec![req(0)]);
    d.query_result(now, "http://b", Ok([("e".to_string(), table)].into_iter().collect()));
    for i in 1..=limits::MAX_DECODER_EXCHANGES {
        d.pull(now, vec![req(i)]);
    }
    assert_eq!(d.open_exchanges(), limits::MAX_DECODER_EXCHANGES);
    let events: Vec<DecoderEvent> = std::iter::from_fn(|| d.poll_event()).collect();
    let failed: Vec<&DecoderEvent> = events.iter().filter(|e| matches!(e, DecoderEvent::Failed { .. })).collect();
    assert_eq!(failed.len(), 1);
    assert!(
        matches!(failed[0], DecoderEvent::Failed { d_req_id, reason, .. } if *d_req_id == format!("d{}", limits::MAX_DECODER_EXCHANGES) && reason == "transfer failed: too many pulls in flight")
    );
}

// ---- store keys ------------------------------------------------------------------------------------------

#[test]
fn store_keys_are_bounded_in_length_separators_readings_and_time() {
    let spec = StoreKeySpec::builtin();
    let g = spec.vllm_grammar("0.33.0").unwrap();
    let long = "x".repeat(MAX_STORE_KEY_BYTES + 1);
    let (r, peak) = peak_of(|| g.parse(&long, &Fields::new()));
    assert_eq!(r, Err(KeyParseError::TooLong { len: MAX_STORE_KEY_BYTES + 1 }));
    assert!(peak <= TIGHT);
    let seps = "@".repeat(MAX_STORE_KEY_SEPARATORS + 1);
    assert_eq!(
        g.parse(&seps, &Fields::new()),
        Err(KeyParseError::TooManySeparators { count: MAX_STORE_KEY_SEPARATORS + 1 })
    );
    // The worst key under the limits: every separator could end a free-text field.
    for g in &spec.grammars {
        for key in [
            "@".repeat(MAX_STORE_KEY_SEPARATORS),
            format!("{}@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@ab", "m@".repeat(MAX_STORE_KEY_SEPARATORS - 6)),
            format!("{}@8@3@abc", "@1".repeat(MAX_STORE_KEY_SEPARATORS - 3)),
        ] {
            let start = Instant::now();
            let (r, peak) = peak_of(|| g.parse(&key, &Fields::new()));
            let took = start.elapsed();
            if let Err(KeyParseError::Ambiguous { readings, .. }) = &r {
                assert!(readings.len() <= limits::MAX_STORE_KEY_READINGS + 1);
            }
            assert!(took < Duration::from_secs(2), "{}: {took:?} for a {}-byte key", g.name, key.len());
            assert!(peak <= 4 * 1024 * 1024, "{}: {peak} bytes for a {}-byte key", g.name, key.len());
        }
    }
}
