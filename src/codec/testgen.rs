//! Random inputs for tests, differential runs against msgspec, benchmarks and fuzz seeds: valid values of
//! any spec type, non-canonical (but valid) encodings of them, and byte-level mutations.
//!
//! Deterministic for a seed; no dependency on an external RNG crate.

use super::compile::{Plan, TagValue, Ty, TyId};
use super::value::{StructValue, Value};
use crate::msgpack::{WireInt, Writer};

/// SplitMix64: small, fast, good enough for test generation.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (the same seed gives the same sequence).
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    /// The next pseudo-random 64-bit number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// True with the given probability in percent.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent as usize
    }
    /// One element of a non-empty slice, uniformly.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Integers at every width boundary, both families.
const INT_EDGES: &[i128] = &[
    0,
    1,
    127,
    128,
    255,
    256,
    65535,
    65536,
    4294967295,
    4294967296,
    9223372036854775807,
    9223372036854775808,
    18446744073709551615,
    -1,
    -32,
    -33,
    -128,
    -129,
    -32768,
    -32769,
    -2147483648,
    -2147483649,
    -9223372036854775808,
];

pub(crate) fn random_int(rng: &mut Rng) -> WireInt {
    match rng.below(4) {
        0 => WireInt::new(*rng.pick(INT_EDGES)).expect("in range"),
        1 => WireInt::from_u64(rng.below(200) as u64),
        2 => WireInt::from_u64(rng.next_u64() >> rng.below(64)),
        _ => WireInt::from_i64(-((rng.next_u64() >> (1 + rng.below(63))) as i64)),
    }
}

const CHARS: &[&str] = &[
    "a",
    "z",
    "0",
    "-",
    "_",
    ".",
    " ",
    "é",
    "ß",
    "한",
    "文",
    "🚀",
    "\u{2028}",
    "\u{feff}",
    "\u{7f}",
    "\u{10fffd}",
    "\"",
    "\\",
];

pub(crate) fn random_str(rng: &mut Rng) -> String {
    let len = match rng.below(10) {
        0 => 0,
        1 => *rng.pick(&[31usize, 32, 255, 256]),
        2 => rng.below(300),
        _ => rng.below(12),
    };
    let mut s = String::new();
    while s.len() < len {
        if rng.chance(70) {
            s.push((b'a' + rng.below(26) as u8) as char);
        } else {
            let c: &str = CHARS[rng.below(CHARS.len())];
            s.push_str(c);
        }
    }
    // Exact byte length for the boundary cases when it is reachable with ASCII.
    if s.len() > len && s.is_char_boundary(len) {
        s.truncate(len);
    }
    s
}

/// Size knob: larger values give longer collections.
#[derive(Clone, Copy, Debug)]
pub struct Size(pub usize);

fn coll_len(rng: &mut Rng, size: Size) -> usize {
    match rng.below(12) {
        0 => 0,
        1 => *rng.pick(&[15usize, 16]),
        2 => rng.below(size.0.max(1) * 8 + 1),
        _ => rng.below(size.0.max(1) + 1),
    }
}

/// A random valid value of type `ty`.
pub fn random_value(plan: &Plan, ty: TyId, rng: &mut Rng, size: Size) -> Value {
    random_value_depth(plan, ty, rng, size, 0)
}

fn random_value_depth(plan: &Plan, ty: TyId, rng: &mut Rng, size: Size, depth: usize) -> Value {
    let small = Size(if depth > 2 { 1 } else { size.0 });
    match &plan.types[ty as usize] {
        Ty::Int => Value::Int(random_int(rng)),
        Ty::Str => Value::Str(random_str(rng)),
        Ty::Bool => Value::Bool(rng.chance(50)),
        Ty::Float => Value::Float(*rng.pick(&[0.0, -0.0, 1.5, -2.25, 1e300, 3.0e-310, f64::INFINITY])),
        Ty::Bytes => Value::Bytes((0..rng.below(40)).map(|_| rng.next_u64() as u8).collect()),
        Ty::Optional(t) => {
            if rng.chance(30) {
                Value::None
            } else {
                random_value_depth(plan, *t, rng, size, depth)
            }
        }
        Ty::List(t) => Value::list_of(
            &plan.types[*t as usize],
            (0..coll_len(rng, small)).map(|_| random_value_depth(plan, *t, rng, small, depth + 1)).collect(),
        ),
        Ty::Tuple(ts) => Value::Tuple(ts.iter().map(|t| random_value_depth(plan, *t, rng, small, depth + 1)).collect()),
        Ty::VarTuple(t) => Value::Tuple(
            (0..coll_len(rng, small)).map(|_| random_value_depth(plan, *t, rng, small, depth + 1)).collect(),
        ),
        Ty::Any => random_any(rng, depth),
        Ty::Dict(k, v) => {
            let n = coll_len(rng, small);
            let mut out: Vec<(Value, Value)> = Vec::with_capacity(n);
            for _ in 0..n {
                let key = random_value_depth(plan, *k, rng, small, depth + 1);
                if out.iter().all(|(x, _)| *x != key) {
                    out.push((key, random_value_depth(plan, *v, rng, small, depth + 1)));
                }
            }
            Value::Dict(out)
        }
        Ty::Enum(e) => {
            let en = &plan.enums[*e as usize];
            let (n, v) = rng.pick(&en.members);
            Value::Enum(super::value::EnumValue { name: n.clone(), value: *v })
        }
        Ty::Struct(s) => {
            let st = &plan.structs[*s as usize];
            let fields = st
                .fields
                .iter()
                .map(|f| match &f.default {
                    _ if f.const_value.is_some() => f.const_value.clone().unwrap_or(Value::None),
                    Some(d) if rng.chance(35) => d.clone(),
                    _ => random_value_depth(plan, f.ty, rng, size, depth + 1),
                })
                .collect();
            Value::Struct(StructValue { meta: st.meta.clone(), fields })
        }
    }
}

/// A random untyped value (`any`): scalars, and lists and str-keyed dicts of them.
fn random_any(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 3 { 6 } else { 8 }) {
        0 => Value::None,
        1 => Value::Bool(rng.chance(50)),
        2 => Value::Int(random_int(rng)),
        3 => Value::Float(*rng.pick(&[0.5, -2.25, 1e300])),
        4 => Value::Str(random_str(rng)),
        5 => Value::Bytes((0..rng.below(8)).map(|_| rng.next_u64() as u8).collect()),
        6 => Value::List((0..rng.below(4)).map(|_| random_any(rng, depth + 1)).collect()),
        _ => {
            let mut out: Vec<(Value, Value)> = vec![];
            for _ in 0..rng.below(4) {
                let k = Value::Str(random_str(rng));
                if out.iter().all(|(x, _)| *x != k) {
                    out.push((k, random_any(rng, depth + 1)));
                }
            }
            Value::Dict(out)
        }
    }
}

/// Encodes a valid value in a random *non-canonical* but valid way: wider int and length formats, struct keys
/// reordered, unknown keys, duplicated keys, defaults written out, explicit nil for optional fields left at
/// None. msgspec decodes it to the same value.
pub fn noncanonical(plan: &Plan, ty: TyId, v: &Value, rng: &mut Rng) -> Vec<u8> {
    let mut w = Writer::new();
    nc_value(plan, ty, v, rng, &mut w);
    w.into_bytes()
}

#[allow(clippy::too_many_arguments)] // one per msgpack length form, read in the order the format lists them
fn nc_len(w: &mut Writer, rng: &mut Rng, n: usize, fix: u8, fix_max: usize, op16: u8, op32: u8, op8: Option<u8>) {
    let choice = rng.below(4);
    if choice == 0 && n <= fix_max {
        w.raw(&[fix | n as u8]);
    } else if choice == 1 && op8.is_some() && n <= 255 {
        w.raw(&[op8.unwrap(), n as u8]);
    } else if choice <= 2 && n <= 65535 {
        w.raw(&[op16]);
        w.raw(&(n as u16).to_be_bytes());
    } else {
        w.raw(&[op32]);
        w.raw(&(n as u32).to_be_bytes());
    }
}

fn nc_int(w: &mut Writer, rng: &mut Rng, i: WireInt) {
    let v = i.get();
    let mut options: Vec<u8> = vec![];
    if (0..=127).contains(&v) || (-32..0).contains(&v) {
        options.push(0);
    }
    for (op, lo, hi) in [
        (0xccu8, 0i128, u8::MAX as i128),
        (0xcd, 0, u16::MAX as i128),
        (0xce, 0, u32::MAX as i128),
        (0xcf, 0, u64::MAX as i128),
        (0xd0, i8::MIN as i128, i8::MAX as i128),
        (0xd1, i16::MIN as i128, i16::MAX as i128),
        (0xd2, i32::MIN as i128, i32::MAX as i128),
        (0xd3, i64::MIN as i128, i64::MAX as i128),
    ] {
        if (lo..=hi).contains(&v) {
            options.push(op);
        }
    }
    match *rng.pick(&options) {
        0 => w.int(i),
        0xcc => w.raw(&[0xcc, v as u8]),
        0xcd => {
            w.raw(&[0xcd]);
            w.raw(&(v as u16).to_be_bytes())
        }
        0xce => {
            w.raw(&[0xce]);
            w.raw(&(v as u32).to_be_bytes())
        }
        0xcf => {
            w.raw(&[0xcf]);
            w.raw(&(v as u64).to_be_bytes())
        }
        0xd0 => w.raw(&[0xd0, v as i8 as u8]),
        0xd1 => {
            w.raw(&[0xd1]);
            w.raw(&(v as i16).to_be_bytes())
        }
        0xd2 => {
            w.raw(&[0xd2]);
            w.raw(&(v as i32).to_be_bytes())
        }
        _ => {
            w.raw(&[0xd3]);
            w.raw(&(v as i64).to_be_bytes())
        }
    }
}

fn nc_str(w: &mut Writer, rng: &mut Rng, s: &str) {
    nc_len(w, rng, s.len(), 0xa0, 31, 0xda, 0xdb, Some(0xd9));
    w.raw(s.as_bytes());
}

/// A random unknown value to insert under an unknown key.
fn junk(w: &mut Writer, rng: &mut Rng, depth: usize) {
    match rng.below(if depth > 2 { 6 } else { 8 }) {
        0 => w.nil(),
        1 => w.bool(rng.chance(50)),
        2 => w.int(random_int(rng)),
        3 => w.f64(1.25),
        4 => w.str(&random_str(rng)),
        5 => w.ext(rng.below(127) as i8, &[1, 2, 3, 4]),
        6 => {
            let n = rng.below(4);
            w.array_len(n);
            for _ in 0..n {
                junk(w, rng, depth + 1);
            }
        }
        _ => {
            let n = rng.below(3);
            w.map_len(n);
            for _ in 0..n {
                w.str(&random_str(rng));
                junk(w, rng, depth + 1);
            }
        }
    }
}

fn nc_value(plan: &Plan, ty: TyId, v: &Value, rng: &mut Rng, w: &mut Writer) {
    match (&plan.types[ty as usize], v) {
        (Ty::Optional(_), Value::None) => w.nil(),
        (Ty::Optional(t), v) => nc_value(plan, *t, v, rng, w),
        (Ty::Int, Value::Int(i)) => nc_int(w, rng, *i),
        (Ty::Enum(_), Value::Enum(e)) => nc_int(w, rng, WireInt::from_i64(e.value)),
        (Ty::Str, Value::Str(s)) => nc_str(w, rng, s),
        (Ty::Bool, Value::Bool(b)) => w.bool(*b),
        (Ty::Bytes, Value::Bytes(b)) => {
            // bin8 / bin16 / bin32, whichever can hold it.
            match rng.below(3) {
                0 if b.len() <= 255 => w.raw(&[0xc4, b.len() as u8]),
                0 | 1 if b.len() <= 65535 => {
                    w.raw(&[0xc5]);
                    w.raw(&(b.len() as u16).to_be_bytes());
                }
                _ => {
                    w.raw(&[0xc6]);
                    w.raw(&(b.len() as u32).to_be_bytes());
                }
            }
            w.raw(b);
        }
        (Ty::Float, Value::Float(x)) => {
            if rng.chance(30) && (*x as f32) as f64 == *x {
                w.raw(&[0xca]);
                w.raw(&(*x as f32).to_be_bytes());
            } else {
                w.f64(*x)
            }
        }
        (Ty::List(t), xs @ (Value::List(_) | Value::IntList(_) | Value::StrList(_))) => {
            let xs = xs.items().expect("a list");
            nc_len(w, rng, xs.len(), 0x90, 15, 0xdc, 0xdd, None);
            for x in xs {
                nc_value(plan, *t, &x, rng, w);
            }
        }
        (Ty::VarTuple(t), Value::Tuple(xs) | Value::List(xs)) => {
            nc_len(w, rng, xs.len(), 0x90, 15, 0xdc, 0xdd, None);
            for x in xs {
                nc_value(plan, *t, x, rng, w);
            }
        }
        (Ty::Any, v) => nc_any(w, rng, v),
        (Ty::Tuple(ts), Value::Tuple(xs)) => {
            nc_len(w, rng, xs.len(), 0x90, 15, 0xdc, 0xdd, None);
            for (t, x) in ts.iter().zip(xs) {
                nc_value(plan, *t, x, rng, w);
            }
        }
        (Ty::Dict(kt, vt), Value::Dict(d)) => {
            // Optionally repeat an entry first with another valid value of the same type: the last one wins
            // and the key keeps its first position.
            let dup = if !d.is_empty() && rng.chance(20) { Some(rng.below(d.len())) } else { None };
            nc_len(w, rng, d.len() + dup.is_some() as usize, 0x80, 15, 0xde, 0xdf, None);
            for (i, (k, x)) in d.iter().enumerate() {
                nc_value(plan, *kt, k, rng, w);
                if dup == Some(i) {
                    let other = random_value(plan, *vt, rng, Size(2));
                    nc_value(plan, *vt, &other, rng, w);
                } else {
                    nc_value(plan, *vt, x, rng, w);
                }
            }
            if let Some(i) = dup {
                nc_value(plan, *kt, &d[i].0, rng, w);
                nc_value(plan, *vt, &d[i].1, rng, w);
            }
        }
        (Ty::Struct(s), Value::Struct(sv)) => {
            let st = &plan.structs[*s as usize];
            if st.array_like {
                nc_len(w, rng, st.declared, 0x90, 15, 0xdc, 0xdd, None);
                if let Some((_, t)) = &st.tag {
                    match t {
                        TagValue::Str(s) => nc_str(w, rng, s),
                        TagValue::Int(i) => nc_int(w, rng, WireInt::from_i64(*i)),
                    }
                }
                for (f, x) in st.fields.iter().zip(&sv.fields) {
                    nc_value(plan, f.ty, x, rng, w);
                }
                return;
            }
            // (key, value writer) entries, then shuffled.
            let mut entries: Vec<Vec<u8>> = vec![];
            let mut sub = |f: &dyn Fn(&mut Writer, &mut Rng), rng: &mut Rng| {
                let mut w2 = Writer::new();
                f(&mut w2, rng);
                entries.push(w2.into_bytes());
            };
            for (f, x) in st.fields.iter().zip(&sv.fields) {
                let at_default = f.default.as_ref() == Some(x);
                if at_default && !rng.chance(25) {
                    continue;
                }
                let name = f.wire_name.clone();
                let (ft, xv) = (f.ty, x.clone());
                if !forbid(st) && rng.chance(10) {
                    // A duplicate whose first value is valid too (msgspec decodes every occurrence).
                    let first = random_value(plan, ft, rng, Size(1));
                    let n2 = name.clone();
                    sub(
                        &move |w: &mut Writer, rng: &mut Rng| {
                            nc_str(w, rng, &n2);
                            nc_value(plan, ft, &first, rng, w);
                        },
                        rng,
                    );
                }
                sub(
                    &move |w: &mut Writer, rng: &mut Rng| {
                        nc_str(w, rng, &name);
                        nc_value(plan, ft, &xv, rng, w);
                    },
                    rng,
                );
            }
            if !forbid(st) {
                for _ in 0..rng.below(3) {
                    sub(
                        &|w: &mut Writer, rng: &mut Rng| {
                            let k = format!("zz_unknown_{}", rng.below(1000));
                            nc_str(w, rng, &k);
                            junk(w, rng, 0);
                        },
                        rng,
                    );
                }
            }
            // Shuffle, but keep each duplicate's two occurrences in order (the later one must win).
            let n = entries.len();
            let mut order: Vec<usize> = (0..n).collect();
            if rng.chance(60) {
                for i in (1..n).rev() {
                    order.swap(i, rng.below(i + 1));
                }
            }
            let mut tagged = vec![];
            if let Some((field, t)) = &st.tag {
                let mut w2 = Writer::new();
                nc_str(&mut w2, rng, field);
                match t {
                    TagValue::Str(s) => nc_str(&mut w2, rng, s),
                    TagValue::Int(i) => nc_int(&mut w2, rng, WireInt::from_i64(*i)),
                }
                tagged.push(w2.into_bytes());
            }
            nc_len(w, rng, n + tagged.len(), 0x80, 15, 0xde, 0xdf, None);
            for t in &tagged {
                w.raw(t);
            }
            // Stable order for duplicates: emit entries sorted by `order`, but a duplicate pair shares the
            // same field, so sorting by original index within equal field names preserves their order.
            let mut emitted: Vec<usize> = order;
            stable_fix_duplicates(&mut emitted, &entries);
            for i in emitted {
                w.raw(&entries[i]);
            }
        }
        // Values that do not fit their type are not generated here.
        (_, v) => panic!("noncanonical: value {v} does not fit its type"),
    }
}

/// An untyped value written with non-canonical widths (the decoder reads it back as the same value).
fn nc_any(w: &mut Writer, rng: &mut Rng, v: &Value) {
    match v {
        Value::None => w.nil(),
        Value::Bool(b) => w.bool(*b),
        Value::Int(i) => nc_int(w, rng, *i),
        Value::Enum(e) => nc_int(w, rng, WireInt::from_i64(e.value)),
        Value::Float(x) => w.f64(*x),
        Value::Str(s) => nc_str(w, rng, s),
        Value::Bytes(b) => w.bin(b),
        Value::List(_) | Value::IntList(_) | Value::StrList(_) | Value::Tuple(_) => {
            let xs = v.items().expect("a list");
            nc_len(w, rng, xs.len(), 0x90, 15, 0xdc, 0xdd, None);
            for x in xs {
                nc_any(w, rng, &x);
            }
        }
        Value::Dict(d) => {
            nc_len(w, rng, d.len(), 0x80, 15, 0xde, 0xdf, None);
            for (k, x) in d {
                nc_any(w, rng, k);
                nc_any(w, rng, x);
            }
        }
        Value::Struct(s) => panic!("noncanonical: a {} value in an `any` field", s.name()),
    }
}

fn forbid(st: &super::compile::CStruct) -> bool {
    st.forbid_unknown_fields
}

/// Reorders so that entries with the same key bytes appear in their original relative order.
fn stable_fix_duplicates(order: &mut [usize], entries: &[Vec<u8>]) {
    let key_of = |e: &Vec<u8>| -> Vec<u8> {
        // The key is a str at the start of the entry; its length prefix depends on the format chosen.
        let (hdr, len) = match e[0] {
            0xa0..=0xbf => (1, (e[0] & 0x1f) as usize),
            0xd9 => (2, e[1] as usize),
            0xda => (3, u16::from_be_bytes([e[1], e[2]]) as usize),
            _ => (5, u32::from_be_bytes([e[1], e[2], e[3], e[4]]) as usize),
        };
        e[hdr..hdr + len].to_vec()
    };
    let keys: Vec<Vec<u8>> = entries.iter().map(key_of).collect();
    let n = order.len();
    for i in 0..n {
        for j in i + 1..n {
            if keys[order[i]] == keys[order[j]] && order[i] > order[j] {
                order.swap(i, j);
            }
        }
    }
}

/// A byte-level mutation of a valid encoding: flip, insert, delete, truncate, overwrite with a marker,
/// or append trailing bytes. Most results are invalid; some stay valid.
pub fn mutate(bytes: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = bytes.to_vec();
    const MARKERS: &[u8] = &[
        0xc0, 0xc1, 0xc2, 0xc3, 0xcc, 0xcd, 0xcf, 0xd3, 0xca, 0xcb, 0xa1, 0xd9, 0xc4, 0x90, 0x91, 0xdc, 0xdd, 0x80,
        0x81, 0xde, 0xdf, 0xd4, 0xc7, 0xff, 0x00, 0x7f,
    ];
    for _ in 0..1 + rng.below(2) {
        if b.is_empty() {
            b.push(*rng.pick(MARKERS));
            continue;
        }
        let i = rng.below(b.len());
        match rng.below(7) {
            0 => b[i] ^= 1 << rng.below(8),
            1 => b[i] = *rng.pick(MARKERS),
            2 => b.insert(i, *rng.pick(MARKERS)),
            3 => {
                b.remove(i);
            }
            4 => b.truncate(i),
            5 => b.push(*rng.pick(MARKERS)),
            _ => {
                // Invalid UTF-8 inside a string.
                b[i] = 0xff;
            }
        }
    }
    b
}
