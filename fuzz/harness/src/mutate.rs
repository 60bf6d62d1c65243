//! A libFuzzer-style mutator, without coverage instrumentation: byte-level mutations (erase, insert, change
//! bytes and bits, integers at width boundaries, copy parts, cross over with another corpus input, dictionary
//! tokens) and MessagePack-aware ones that keep the document's shape plausible (replace a whole value with a
//! value from another input, drop or duplicate a container element and fix the count, re-encode a head in a
//! wider form, set a declared length to an edge value, change a value's type). Stacked 1–5 deep (mostly 1),
//! as libFuzzer does. Used by the smoke runs of the byte-oriented targets and by the differential fuzzer ([`crate::diff`]).

use mooncake_wire::codec::testgen::Rng;
use mooncake_wire::msgpack::{Kind, Obj, Reader};

/// One value of a MessagePack document: where it starts, where its head ends, where it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Offset of its first byte.
    pub start: usize,
    /// Offset just past its head (type byte, length, and for a scalar its payload).
    pub head_end: usize,
    /// Offset just past its last byte; `head_end` when the value is not [`complete`](Span::complete).
    pub end: usize,
    /// Its MessagePack type.
    pub kind: Kind,
    /// Elements (arrays) or entries (maps) the head declares.
    pub count: usize,
    /// Containers it is nested in (0 for the document's value).
    pub depth: usize,
    /// The value ends within the input (its whole extent is known).
    pub complete: bool,
}

const MAX_SPANS: usize = 4096;
const MAX_SCAN_DEPTH: usize = 64;

/// Every value of `data` read as one MessagePack document, in document order, as far as it parses.
pub fn spans(data: &[u8]) -> Vec<Span> {
    let mut out = Vec::new();
    scan(data, 0, 0, &mut out);
    out
}

fn scan(data: &[u8], pos: usize, depth: usize, out: &mut Vec<Span>) -> Option<usize> {
    if depth > MAX_SCAN_DEPTH || out.len() >= MAX_SPANS || pos >= data.len() {
        return None;
    }
    let mut r = Reader::new(&data[pos..]);
    let obj = r.read_obj().ok()?;
    let head_end = pos + r.pos();
    let (kind, count, children) = match obj {
        Obj::Array(n) => (Kind::Array, n, n),
        Obj::Map(n) => (Kind::Map, n, n.checked_mul(2)?),
        o => (o.kind(), 0, 0),
    };
    let idx = out.len();
    out.push(Span { start: pos, head_end, end: head_end, kind, count, depth, complete: children == 0 });
    let mut p = head_end;
    for _ in 0..children {
        p = scan(data, p, depth + 1, out)?;
    }
    out[idx].end = p;
    out[idx].complete = true;
    Some(p)
}

/// Byte strings libFuzzer's `ChangeBinaryInteger` and our edge values use.
const INTERESTING: &[u64] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    i64::MAX as u64,
    1 << 63,
    u64::MAX,
];

fn rand_range(rng: &mut Rng, len: usize) -> (usize, usize) {
    let a = rng.below(len + 1);
    let b = rng.below(len + 1);
    (a.min(b), a.max(b))
}

/// Mutates `data` (one to five stacked mutations), crossing over with `corpus` and inserting `dict` tokens.
/// The result is at most `max_len` bytes.
pub fn mutate(rng: &mut Rng, data: &[u8], corpus: &[Vec<u8>], dict: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let mut d = data.to_vec();
    // Mostly one or two mutations (a mutant close to a valid input is more often valid), up to five.
    let depth = match rng.below(16) {
        0..=7 => 1,
        8..=11 => 2,
        12..=13 => 3,
        14 => 4,
        _ => 5,
    };
    for _ in 0..depth {
        let before = d.clone();
        mutate_once(rng, &mut d, corpus, dict);
        if d.len() > max_len {
            d.truncate(max_len);
        }
        if d == before && rng.chance(50) {
            // libFuzzer retries a mutation that changed nothing.
            mutate_once(rng, &mut d, corpus, dict);
        }
    }
    d
}

fn mutate_once(rng: &mut Rng, d: &mut Vec<u8>, corpus: &[Vec<u8>], dict: &[Vec<u8>]) {
    if d.is_empty() {
        d.push(rng.next_u64() as u8);
        return;
    }
    match rng.below(20) {
        0 => {
            let (a, b) = rand_range(rng, d.len());
            let b = b.min(a + 1 + rng.below(16));
            d.drain(a..b);
        }
        1 => {
            let at = rng.below(d.len() + 1);
            d.insert(at, rng.next_u64() as u8);
        }
        2 => {
            let at = rng.below(d.len() + 1);
            let b = *rng.pick(&[0u8, 0xff, 0x90, 0x80, 0xc0, 0x91, 0x81]);
            let most = if rng.chance(10) { 2000 } else { 16 };
            let n = 1 + rng.below(most);
            d.splice(at..at, std::iter::repeat_n(b, n));
        }
        3 => {
            let at = rng.below(d.len());
            d[at] = rng.next_u64() as u8;
        }
        4 => {
            let at = rng.below(d.len());
            d[at] ^= 1 << rng.below(8);
        }
        5 => {
            let (a, b) = rand_range(rng, d.len());
            let b = b.min(a + 8);
            if b > a + 1 {
                for i in (a + 1..b).rev() {
                    let j = a + rng.below(i - a + 1);
                    d.swap(i, j);
                }
            }
        }
        6 => {
            let w = *rng.pick(&[1usize, 2, 4, 8]);
            if d.len() >= w {
                let at = rng.below(d.len() - w + 1);
                let mut v = [0u8; 8];
                v[8 - w..].copy_from_slice(&d[at..at + w]);
                let x = u64::from_be_bytes(v);
                let y = match rng.below(3) {
                    0 => x.wrapping_add(rng.below(33) as u64).wrapping_sub(16),
                    1 => *rng.pick(INTERESTING),
                    _ => x.swap_bytes() >> (64 - 8 * w as u32),
                };
                d[at..at + w].copy_from_slice(&y.to_be_bytes()[8 - w..]);
            }
        }
        7 => {
            let (a, b) = rand_range(rng, d.len());
            let part = d[a..b].to_vec();
            let at = rng.below(d.len() + 1);
            if rng.chance(50) {
                d.splice(at..at, part);
            } else {
                let end = (at + part.len()).min(d.len());
                d.splice(at..end, part);
            }
        }
        8 if !corpus.is_empty() => {
            let other = rng.pick(corpus);
            let (a, b) = rand_range(rng, d.len());
            let (c, e) = rand_range(rng, other.len());
            d.splice(a..b, other[c..e].iter().copied());
        }
        9 | 10 if !dict.is_empty() => {
            let tok = rng.pick(dict);
            let at = rng.below(d.len() + 1);
            if rng.chance(50) {
                d.splice(at..at, tok.iter().copied());
            } else {
                let end = (at + tok.len()).min(d.len());
                d.splice(at..end, tok.iter().copied());
            }
        }
        _ => structural(rng, d, corpus, dict),
    }
}

fn complete_spans(d: &[u8]) -> Vec<Span> {
    spans(d).into_iter().filter(|s| s.complete).collect()
}

/// The head of a container or string of `kind` declaring `n`, in a width at least `min_width` (0 = fix).
fn head(kind: Kind, n: usize, min_width: u8) -> Vec<u8> {
    let (fix, fix_max, w8, w16, w32): (u8, usize, Option<u8>, u8, u8) = match kind {
        Kind::Array => (0x90, 15, None, 0xdc, 0xdd),
        Kind::Map => (0x80, 15, None, 0xde, 0xdf),
        Kind::Str => (0xa0, 31, Some(0xd9), 0xda, 0xdb),
        _ => (0, 0, Some(0xc4), 0xc5, 0xc6),
    };
    if min_width == 0 && n <= fix_max && fix != 0 {
        vec![fix | n as u8]
    } else if let (Some(op), true) = (w8, min_width <= 1 && n <= 0xff) {
        vec![op, n as u8]
    } else if min_width <= 2 && n <= 0xffff {
        let mut v = vec![w16];
        v.extend_from_slice(&(n as u16).to_be_bytes());
        v
    } else {
        let mut v = vec![w32];
        v.extend_from_slice(&(n.min(u32::MAX as usize) as u32).to_be_bytes());
        v
    }
}

fn structural(rng: &mut Rng, d: &mut Vec<u8>, corpus: &[Vec<u8>], dict: &[Vec<u8>]) {
    let sp = complete_spans(d);
    if sp.is_empty() {
        d.insert(0, *rng.pick(&[0x80u8, 0x90, 0xc0, 0xa0, 0xdf]));
        return;
    }
    let s = *rng.pick(&sp);
    match rng.below(6) {
        // Replace a whole value by a value of another input (or a dictionary token).
        0 => {
            let donor: Option<Vec<u8>> = if !corpus.is_empty() && rng.chance(75) {
                let o = rng.pick(corpus);
                let os = complete_spans(o);
                (!os.is_empty()).then(|| {
                    let t = rng.pick(&os);
                    o[t.start..t.end].to_vec()
                })
            } else if !dict.is_empty() {
                Some(rng.pick(dict).clone())
            } else {
                None
            };
            if let Some(v) = donor {
                d.splice(s.start..s.end, v);
            }
        }
        // Drop or duplicate one element of a container and fix its count.
        1 | 2 if matches!(s.kind, Kind::Array | Kind::Map) && s.count > 0 => {
            let per = if s.kind == Kind::Map { 2 } else { 1 };
            let children: Vec<Span> = sp
                .iter()
                .filter(|c| c.depth == s.depth + 1 && c.start >= s.head_end && c.end <= s.end)
                .copied()
                .collect();
            if children.len() < per * s.count {
                return;
            }
            let k = rng.below(s.count);
            let (a, b) = (children[k * per].start, children[k * per + per - 1].end);
            let width = head_width(d[s.start]);
            let (new_count, body): (usize, Vec<u8>) = if rng.chance(50) {
                let mut body = d[s.head_end..a].to_vec();
                body.extend_from_slice(&d[b..s.end]);
                (s.count - 1, body)
            } else {
                let mut body = d[s.head_end..b].to_vec();
                body.extend_from_slice(&d[a..s.end]);
                (s.count + 1, body)
            };
            let mut v = head(s.kind, new_count, width);
            v.extend(body);
            d.splice(s.start..s.end, v);
        }
        // Re-encode a head or an int in a wider form (valid, non-canonical).
        3 => {
            let widened: Option<Vec<u8>> = match s.kind {
                Kind::Array | Kind::Map => Some(head(s.kind, s.count, 1 + rng.below(3) as u8)),
                Kind::Str | Kind::Bin => {
                    let mut r = Reader::new(&d[s.start..s.end]);
                    match r.read_obj() {
                        Ok(Obj::Str(b)) | Ok(Obj::Bin(b)) => {
                            let mut v = head(s.kind, b.len(), 1 + rng.below(3) as u8);
                            v.extend_from_slice(b);
                            Some(v)
                        }
                        _ => None,
                    }
                }
                Kind::Int => {
                    let mut r = Reader::new(&d[s.start..s.end]);
                    match r.read_obj() {
                        Ok(Obj::Int(i)) => Some(match (i.as_u64(), i.as_i64()) {
                            (Some(u), _) if rng.chance(50) => [&[0xcf][..], &u.to_be_bytes()].concat(),
                            (_, Some(x)) => [&[0xd3][..], &x.to_be_bytes()].concat(),
                            (Some(u), None) => [&[0xcf][..], &u.to_be_bytes()].concat(),
                            (None, None) => return,
                        }),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(v) = widened {
                d.splice(
                    s.start..s.head_end.max(if matches!(s.kind, Kind::Str | Kind::Bin | Kind::Int) {
                        s.end
                    } else {
                        s.head_end
                    }),
                    v,
                );
            }
        }
        // Set a declared length to an edge value, keeping the head's width.
        4 if matches!(s.kind, Kind::Array | Kind::Map | Kind::Str | Kind::Bin) => {
            let n = *rng.pick(&[
                0usize,
                1,
                s.count.saturating_sub(1),
                s.count + 1,
                15,
                16,
                31,
                32,
                255,
                256,
                0xffff,
                0x1_0000,
                u32::MAX as usize,
            ]);
            let v = head(s.kind, n, head_width(d[s.start]));
            d.splice(s.start..s.head_end, v);
        }
        // Replace a value by a scalar of another kind.
        _ => {
            let v: Vec<u8> = match rng.below(8) {
                0 => vec![0xc0],
                1 => vec![0xc3],
                2 => vec![0xff],
                3 => vec![0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0],
                4 => vec![0xa1, b'x'],
                5 => vec![0xc4, 0x01, 0x00],
                6 => vec![0xd4, 0x01, 0x00],
                _ => vec![0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            };
            d.splice(s.start..s.end, v);
        }
    }
}

/// 0 for fix heads, else the size class of the length field (1, 2 or 4 bytes → 1, 2, 3).
fn head_width(op: u8) -> u8 {
    match op {
        0xc4 | 0xd9 => 1,
        0xc5 | 0xda | 0xdc | 0xde => 2,
        0xc6 | 0xdb | 0xdd | 0xdf => 3,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_a_document() {
        // {"a": [1, 2], "b": nil}
        let d = [0x82, 0xa1, b'a', 0x92, 0x01, 0x02, 0xa1, b'b', 0xc0];
        let s = spans(&d);
        assert_eq!(s.len(), 7);
        assert_eq!((s[0].start, s[0].end, s[0].count, s[0].complete), (0, 9, 2, true));
        assert_eq!((s[2].start, s[2].head_end, s[2].end, s[2].depth), (3, 4, 6, 1));
        // A truncated document: the root is incomplete, its complete children are still listed.
        let s = spans(&d[..5]);
        assert!(!s[0].complete && s[1].complete);
    }

    #[test]
    fn mutations_change_inputs_and_respect_the_length_limit() {
        let mut rng = Rng::new(1);
        let d = vec![0x82, 0xa1, b'a', 0x92, 0x01, 0x02, 0xa1, b'b', 0xc0];
        let corpus = vec![d.clone(), vec![0x91, 0xa3, b'x', b'y', b'z']];
        let mut changed = 0;
        for _ in 0..2000 {
            let m = mutate(&mut rng, &d, &corpus, &[vec![0xdd, 0xff, 0xff, 0xff, 0xff]], 64);
            assert!(m.len() <= 64);
            changed += (m != d) as usize;
        }
        assert!(changed > 1800, "{changed} of 2000 mutations changed the input");
    }
}
