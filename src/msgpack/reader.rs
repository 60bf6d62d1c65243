//! A bounds-checked MessagePack cursor. It never reads past the end of its slice, never panics, and never
//! allocates: strings and binaries are returned as borrowed slices, containers as their declared length.

use super::{Kind, WireInt};

/// One object head. Scalars are read whole (a string's bytes, an int's payload), containers only up to their
/// length, as msgspec does before it checks the type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Obj<'a> {
    /// `nil`.
    Nil,
    /// A boolean.
    Bool(bool),
    /// An integer of any width.
    Int(WireInt),
    /// A float; a `float32` is widened to `f64`.
    Float(f64),
    /// Raw string bytes, UTF-8 not yet checked.
    Str(&'a [u8]),
    /// Binary bytes.
    Bin(&'a [u8]),
    /// An array head: its declared element count (the elements follow).
    Array(usize),
    /// A map head: its declared pair count (the keys and values follow).
    Map(usize),
    /// An extension: its type tag and data.
    Ext(i8, &'a [u8]),
}

impl Obj<'_> {
    /// The kind of this object.
    pub fn kind(&self) -> Kind {
        match self {
            Obj::Nil => Kind::Nil,
            Obj::Bool(_) => Kind::Bool,
            Obj::Int(_) => Kind::Int,
            Obj::Float(_) => Kind::Float,
            Obj::Str(_) => Kind::Str,
            Obj::Bin(_) => Kind::Bin,
            Obj::Array(_) => Kind::Array,
            Obj::Map(_) => Kind::Map,
            Obj::Ext(..) => Kind::Ext,
        }
    }
}

/// Byte-level failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawError {
    /// The input ended inside an object.
    Truncated,
    /// The reserved opcode `0xc1` at this offset.
    InvalidOpcode {
        /// The opcode byte.
        op: u8,
        /// Its offset in the buffer.
        offset: usize,
    },
    /// Containers nested deeper than allowed.
    TooDeep,
}

/// The whole int at the start of `b` and its length, or `None` if `b` does not start with one. The opcodes of
/// block ids and sizes come first.
#[inline(always)]
fn first_int(b: &[u8]) -> Option<(WireInt, usize)> {
    Some(match *b {
        [op @ 0x00..=0x7f, ..] => (WireInt::from_u64(op as u64), 1),
        [0xcd, x, y, ..] => (WireInt::from_u64(u16::from_be_bytes([x, y]) as u64), 3),
        [0xcc, x, ..] => (WireInt::from_u64(x as u64), 2),
        [0xce, a, b, c, d, ..] => (WireInt::from_u64(u32::from_be_bytes([a, b, c, d]) as u64), 5),
        [0xcf, a, b, c, d, e, f, g, h, ..] => (WireInt::from_u64(u64::from_be_bytes([a, b, c, d, e, f, g, h])), 9),
        [op @ 0xe0..=0xff, ..] => (WireInt::from_i64(op as i8 as i64), 1),
        [0xd0, x, ..] => (WireInt::from_i64(x as i8 as i64), 2),
        [0xd1, x, y, ..] => (WireInt::from_i64(i16::from_be_bytes([x, y]) as i64), 3),
        [0xd2, a, b, c, d, ..] => (WireInt::from_i64(i32::from_be_bytes([a, b, c, d]) as i64), 5),
        [0xd3, a, b, c, d, e, f, g, h, ..] => (WireInt::from_i64(i64::from_be_bytes([a, b, c, d, e, f, g, h])), 9),
        _ => return None,
    })
}

/// `a == b` for slices of the same length, compared 8 bytes at a time in place (struct keys are short: a call
/// to `memcmp` would cost more than the compare). The first word settles most misses (a str head is first).
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap_or([0; 8]));
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a == b;
    }
    let mut at = 0;
    while at + 8 < n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    // The last 8 bytes, overlapping the previous word.
    word(a, n - 8) == word(b, n - 8)
}

/// The opcode bytes of four consecutive 3-byte objects in a little-endian 16-byte load, and their value when
/// all four are `uint16` (`0xcd`).
const QUAD_OPS_MASK: u128 = 0xff | 0xff << 24 | 0xff << 48 | 0xff << 72;
const QUAD_OPS_UINT16: u128 = 0xcd | 0xcd << 24 | 0xcd << 48 | 0xcd << 72;

/// A cursor over one MessagePack buffer; see the module documentation.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    /// Offset of the next unread byte.
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The next opcode, not consumed.
    #[inline]
    pub(crate) fn peek_op(&self) -> Result<u8, RawError> {
        self.buf.get(self.pos).copied().ok_or(RawError::Truncated)
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, RawError> {
        let b = self.peek_op()?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], RawError> {
        if n > self.remaining() {
            return Err(RawError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    fn be<const N: usize>(&mut self) -> Result<[u8; N], RawError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    #[inline]
    fn len8(&mut self) -> Result<usize, RawError> {
        Ok(self.byte()? as usize)
    }
    #[inline]
    fn len16(&mut self) -> Result<usize, RawError> {
        Ok(u16::from_be_bytes(self.be()?) as usize)
    }
    #[inline]
    fn len32(&mut self) -> Result<usize, RawError> {
        Ok(u32::from_be_bytes(self.be()?) as usize)
    }

    /// Reads one object head (see [`Obj`]).
    #[inline]
    pub fn read_obj(&mut self) -> Result<Obj<'a>, RawError> {
        let offset = self.pos;
        let op = self.byte()?;
        Ok(match op {
            0x00..=0x7f => Obj::Int(WireInt::from_u64(op as u64)),
            0xe0..=0xff => Obj::Int(WireInt::from_i64(op as i8 as i64)),
            0x80..=0x8f => Obj::Map((op & 0x0f) as usize),
            0x90..=0x9f => Obj::Array((op & 0x0f) as usize),
            0xa0..=0xbf => Obj::Str(self.take((op & 0x1f) as usize)?),
            0xc0 => Obj::Nil,
            0xc1 => return Err(RawError::InvalidOpcode { op, offset }),
            0xc2 => Obj::Bool(false),
            0xc3 => Obj::Bool(true),
            0xc4 => {
                let n = self.len8()?;
                Obj::Bin(self.take(n)?)
            }
            0xc5 => {
                let n = self.len16()?;
                Obj::Bin(self.take(n)?)
            }
            0xc6 => {
                let n = self.len32()?;
                Obj::Bin(self.take(n)?)
            }
            0xc7..=0xc9 => {
                let n = match op {
                    0xc7 => self.len8()?,
                    0xc8 => self.len16()?,
                    _ => self.len32()?,
                };
                let t = self.byte()? as i8;
                Obj::Ext(t, self.take(n)?)
            }
            0xca => Obj::Float(f32::from_be_bytes(self.be()?) as f64),
            0xcb => Obj::Float(f64::from_be_bytes(self.be()?)),
            0xcc => Obj::Int(WireInt::from_u64(self.byte()? as u64)),
            0xcd => Obj::Int(WireInt::from_u64(u16::from_be_bytes(self.be()?) as u64)),
            0xce => Obj::Int(WireInt::from_u64(u32::from_be_bytes(self.be()?) as u64)),
            0xcf => Obj::Int(WireInt::from_u64(u64::from_be_bytes(self.be()?))),
            0xd0 => Obj::Int(WireInt::from_i64(self.byte()? as i8 as i64)),
            0xd1 => Obj::Int(WireInt::from_i64(i16::from_be_bytes(self.be()?) as i64)),
            0xd2 => Obj::Int(WireInt::from_i64(i32::from_be_bytes(self.be()?) as i64)),
            0xd3 => Obj::Int(WireInt::from_i64(i64::from_be_bytes(self.be()?))),
            0xd4..=0xd8 => {
                let n = 1usize << (op - 0xd4);
                let t = self.byte()? as i8;
                Obj::Ext(t, self.take(n)?)
            }
            0xd9 => {
                let n = self.len8()?;
                Obj::Str(self.take(n)?)
            }
            0xda => {
                let n = self.len16()?;
                Obj::Str(self.take(n)?)
            }
            0xdb => {
                let n = self.len32()?;
                Obj::Str(self.take(n)?)
            }
            0xdc => Obj::Array(self.len16()?),
            0xdd => Obj::Array(self.len32()?),
            0xde => Obj::Map(self.len16()?),
            0xdf => Obj::Map(self.len32()?),
        })
    }

    /// Fast path of [`Reader::read_obj`] for the hot loops of the decoders: if the next object is a whole
    /// integer, reads it; otherwise consumes nothing and returns `None` (the caller then takes the general
    /// path, which reports the exact error). Accepts exactly the opcodes `read_obj` reads as `Obj::Int`.
    #[inline(always)]
    pub(crate) fn try_int(&mut self) -> Option<WireInt> {
        let (v, n) = first_int(self.buf.get(self.pos..)?)?;
        self.pos += n;
        Some(v)
    }

    /// Reads up to `max` consecutive whole integers into `out` and returns how many it read; stops, consuming
    /// nothing more, at the first object that is not a whole integer (the caller reports it through the general
    /// path). The hot loop of `list[int]`: values are gathered in a small local array (cursor and position stay
    /// in registers, no capacity check per element) and appended to `out` a chunk at a time.
    #[inline]
    pub(crate) fn read_int_run(&mut self, max: usize, out: &mut Vec<WireInt>) -> usize {
        const CHUNK: usize = 32;
        if max < CHUNK / 2 {
            // A short list: element by element, without setting up the chunk.
            for k in 0..max {
                match self.try_int() {
                    Some(v) => out.push(v),
                    None => return k,
                }
            }
            return max;
        }
        let mut rest = self.buf.get(self.pos..).unwrap_or_default();
        let mut chunk = [WireInt::ZERO; CHUNK];
        let mut k = 0;
        while k < max {
            let want = (max - k).min(CHUNK);
            let mut j = 0;
            while j < want {
                // Four uint16 in a row (block ids of a pool above 256 blocks): one 16-byte load, one compare.
                if j + 4 <= want {
                    if let Some(w) = rest.first_chunk::<16>() {
                        let x = u128::from_le_bytes(*w);
                        if x & QUAD_OPS_MASK == QUAD_OPS_UINT16 {
                            let u16_at = |i: usize| WireInt::from_u64(u16::from_be_bytes([w[i], w[i + 1]]) as u64);
                            chunk[j] = u16_at(1);
                            chunk[j + 1] = u16_at(4);
                            chunk[j + 2] = u16_at(7);
                            chunk[j + 3] = u16_at(10);
                            rest = &rest[12..];
                            j += 4;
                            continue;
                        }
                    }
                }
                let (v, tail) = match *rest {
                    [op @ 0x00..=0x7f, ref tail @ ..] => (WireInt::from_u64(op as u64), tail),
                    [0xcd, x, y, ref tail @ ..] => (WireInt::from_u64(u16::from_be_bytes([x, y]) as u64), tail),
                    _ => match first_int(rest) {
                        Some((v, n)) => (v, rest.get(n..).unwrap_or_default()),
                        None => break,
                    },
                };
                chunk[j] = v;
                rest = tail;
                j += 1;
            }
            out.extend_from_slice(&chunk[..j]);
            k += j;
            if j < want {
                break;
            }
        }
        self.pos = self.buf.len() - rest.len();
        k
    }

    /// Fast path for strings, like [`Reader::try_int`]: the raw bytes of a whole str object (UTF-8 not
    /// checked), or `None` with nothing consumed.
    #[inline(always)]
    pub(crate) fn try_str(&mut self) -> Option<&'a [u8]> {
        let rest = self.buf.get(self.pos..)?;
        let (&op, after) = rest.split_first()?;
        let (len, head): (usize, usize) = match op {
            0xa0..=0xbf => ((op & 0x1f) as usize, 1),
            0xd9 => (*after.first()? as usize, 2),
            0xda => (u16::from_be_bytes(*after.first_chunk()?) as usize, 3),
            0xdb => (u32::from_be_bytes(*after.first_chunk()?) as usize, 5),
            _ => return None,
        };
        let s = rest.get(head..head.checked_add(len)?)?;
        self.pos += head + len;
        Some(s)
    }

    /// Consumes `bytes` if the input continues with exactly them (a struct key as encoders write it).
    #[inline(always)]
    pub(crate) fn eat(&mut self, bytes: &[u8]) -> bool {
        let hit = self.buf.get(self.pos..self.pos + bytes.len()).is_some_and(|rest| same_bytes(rest, bytes));
        if hit {
            self.pos += bytes.len();
        }
        hit
    }

    /// Fast path for array heads, like [`Reader::try_int`].
    #[inline(always)]
    pub(crate) fn try_array(&mut self) -> Option<usize> {
        self.try_head(0x90, 0xdc, 0xdd)
    }

    /// Fast path for map heads, like [`Reader::try_int`].
    #[inline(always)]
    pub(crate) fn try_map(&mut self) -> Option<usize> {
        self.try_head(0x80, 0xde, 0xdf)
    }

    /// A container head: the fix form (`fix` to `fix + 15`), or the 16- or 32-bit one.
    #[inline(always)]
    fn try_head(&mut self, fix: u8, op16: u8, op32: u8) -> Option<usize> {
        let rest = self.buf.get(self.pos..)?;
        let (&op, after) = rest.split_first()?;
        let (n, head) = if op & 0xf0 == fix {
            ((op & 0x0f) as usize, 1)
        } else if op == op16 {
            (u16::from_be_bytes(*after.first_chunk()?) as usize, 3)
        } else if op == op32 {
            (u32::from_be_bytes(*after.first_chunk()?) as usize, 5)
        } else {
            return None;
        };
        self.pos += head;
        Some(n)
    }

    /// Skips one whole value. `depth` is the number of containers already open around it; the value may open
    /// containers up to a total of `max_depth`. Iterative: the Rust stack does not grow with the input.
    pub(crate) fn skip_value(&mut self, depth: usize, max_depth: usize) -> Result<(), RawError> {
        // Number of values still to skip at each open level, innermost last. Bounded by max_depth.
        let mut pending: Vec<usize> = Vec::new();
        let mut todo: usize = 1;
        loop {
            while todo == 0 {
                match pending.pop() {
                    Some(t) => todo = t,
                    None => return Ok(()),
                }
            }
            todo -= 1;
            let n = match self.read_obj()? {
                Obj::Array(n) => n,
                Obj::Map(n) => n.checked_mul(2).ok_or(RawError::Truncated)?,
                _ => continue,
            };
            if depth + pending.len() + 1 > max_depth {
                return Err(RawError::TooDeep);
            }
            pending.push(todo);
            todo = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    #[test]
    fn reads_every_int_width() {
        for (hex, v) in [
            ("00", 0i128),
            ("7f", 127),
            ("cc80", 128),
            ("cdffff", 65535),
            ("ce00010000", 65536),
            ("cfffffffffffffffff", u64::MAX as i128),
            ("ff", -1),
            ("e0", -32),
            ("d080", -128),
            ("d18000", -32768),
            ("d280000000", i32::MIN as i128),
            ("d38000000000000000", i64::MIN as i128),
            ("d005", 5),
        ] {
            let b = h(hex);
            let mut r = Reader::new(&b);
            assert_eq!(r.read_obj(), Ok(Obj::Int(WireInt::new(v).unwrap())), "{hex}");
            assert!(r.is_empty());
        }
    }

    /// Every opcode followed by every length of payload up to 10 bytes: the fast paths read exactly what
    /// `read_obj` reads as an int / str / array head, and consume nothing otherwise.
    #[test]
    fn fast_paths_agree_with_read_obj() {
        for op in 0..=255u8 {
            for len in 0..=10usize {
                let mut b = vec![op];
                b.extend((0..len).map(|i| (i as u8).wrapping_mul(37).wrapping_add(op)));
                // Make lengths of str/array heads small so that the body may fit.
                if matches!(op, 0xd9..=0xdd) && len > 0 {
                    for x in b[1..].iter_mut().take(4) {
                        *x = 0;
                    }
                    if let Some(last) = b.get_mut(match op {
                        0xd9 => 1,
                        0xda | 0xdc => 2,
                        _ => 4,
                    }) {
                        *last = 2;
                    }
                }
                let want = Reader::new(&b).read_obj();
                let mut r = Reader::new(&b);
                let mut full = Reader::new(&b);
                let _ = full.read_obj();
                match (r.try_int(), want) {
                    (Some(v), Ok(Obj::Int(w))) => assert_eq!((v, r.pos()), (w, full.pos()), "{b:02x?}"),
                    (None, Ok(Obj::Int(_))) => panic!("try_int missed an int: {b:02x?}"),
                    (Some(_), _) => panic!("try_int read a non-int: {b:02x?}"),
                    (None, _) => assert_eq!(r.pos(), 0),
                }
                let mut r = Reader::new(&b);
                match (r.try_str(), want) {
                    (Some(s), Ok(Obj::Str(w))) => assert_eq!((s, r.pos()), (w, full.pos()), "{b:02x?}"),
                    (None, Ok(Obj::Str(_))) => panic!("try_str missed a str: {b:02x?}"),
                    (Some(_), _) => panic!("try_str read a non-str: {b:02x?}"),
                    (None, _) => assert_eq!(r.pos(), 0),
                }
                let mut r = Reader::new(&b);
                match (r.try_array(), want) {
                    (Some(n), Ok(Obj::Array(w))) => assert_eq!((n, r.pos()), (w, full.pos()), "{b:02x?}"),
                    (None, Ok(Obj::Array(_))) => panic!("try_array missed an array: {b:02x?}"),
                    (Some(_), _) => panic!("try_array read a non-array: {b:02x?}"),
                    (None, _) => assert_eq!(r.pos(), 0),
                }
                let mut r = Reader::new(&b);
                match (r.try_map(), want) {
                    (Some(n), Ok(Obj::Map(w))) => assert_eq!((n, r.pos()), (w, full.pos()), "{b:02x?}"),
                    (None, Ok(Obj::Map(_))) => panic!("try_map missed a map: {b:02x?}"),
                    (Some(_), _) => panic!("try_map read a non-map: {b:02x?}"),
                    (None, _) => assert_eq!(r.pos(), 0),
                }
            }
        }
    }

    /// `eat` consumes exactly a matching prefix, whatever its length (the word-wise compare of `same_bytes`
    /// around 8 and 16 bytes), and nothing on a mismatch in any byte or on input too short.
    #[test]
    fn eat_matches_exact_prefixes() {
        for n in 0..40usize {
            let key: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(29).wrapping_add(3)).collect();
            let mut input = key.clone();
            input.extend_from_slice(b"tail");
            let mut r = Reader::new(&input);
            assert!(r.eat(&key), "{n}");
            assert_eq!(r.pos(), n);
            for flip in 0..n {
                let mut other = input.clone();
                other[flip] ^= 0x40;
                let mut r = Reader::new(&other);
                assert!(!r.eat(&key), "{n} bytes, byte {flip} differs");
                assert_eq!(r.pos(), 0);
            }
            if n > 0 {
                let mut r = Reader::new(&key[..n - 1]);
                assert!(!r.eat(&key), "{n}: input too short");
                assert_eq!(r.pos(), 0);
            }
        }
    }

    /// The leading ints of `b`, one `read_obj` at a time.
    fn ints_by_read_obj(b: &[u8]) -> Vec<WireInt> {
        let mut want = vec![];
        let mut r = Reader::new(b);
        while let Ok(Obj::Int(i)) = r.clone().read_obj() {
            r.read_obj().unwrap();
            want.push(i);
        }
        want
    }

    /// `read_int_run(max)` on `b` reads the first `max` of `want` (all of them if fewer) and stops where as
    /// many `read_obj` calls stop.
    fn assert_run_reads_as_read_obj(b: &[u8], max: usize, want: &[WireInt], tail: &str) {
        let mut r = Reader::new(b);
        let mut got = vec![];
        let k = r.read_int_run(max, &mut got);
        assert_eq!(k, max.min(want.len()), "{tail} {max}");
        assert_eq!(got, want[..k], "{tail} {max}");
        let mut skip = Reader::new(b);
        for _ in 0..k {
            skip.read_obj().unwrap();
        }
        assert_eq!(r.pos(), skip.pos(), "{tail} {max}");
    }

    /// A run of ints of every width, then a non-int: `read_int_run` reads the ints, stops before the rest.
    #[test]
    fn int_runs_stop_at_the_first_non_int() {
        let ints = "05ff cc80 cdffff ce00010000 cfffffffffffffffff d080 d18000 d280000000 d38000000000000000";
        let ints: String = ints.split(' ').collect::<Vec<_>>().repeat(9).concat();
        let n = 10 * 9;
        for tail in ["", "c0", "a161", "cd00"] {
            let b = h(&format!("{ints}{tail}"));
            let want = ints_by_read_obj(&b);
            assert_eq!(want.len(), n);
            for max in [0, 1, 31, 32, 33, n, n + 5] {
                assert_run_reads_as_read_obj(&b, max, &want, tail);
            }
        }
    }

    /// Runs of uint16 of every length up to 13 (the four-at-a-time path and its fallbacks), between other
    /// ints, cut by every `max` and ended by a non-int or a truncated uint16: the same reading as `read_obj`.
    #[test]
    fn uint16_runs_read_as_read_obj_does() {
        let mut ints = String::new();
        for run in 0..14 {
            for k in 0..run {
                ints.push_str(&format!("cd{:04x}", 0x100 + 977 * k + run));
            }
            ints.push_str(["05", "cc80", "ce00010000", "d18000"][run % 4]);
        }
        for tail in ["", "c0", "cd00", "cd", "cdffff"] {
            let b = h(&format!("{ints}{tail}"));
            let want = ints_by_read_obj(&b);
            for max in 0..=want.len() + 1 {
                assert_run_reads_as_read_obj(&b, max, &want, tail);
            }
        }
    }

    #[test]
    fn truncation_and_reserved() {
        for hex in ["", "cc", "cd00", "a3616263"[..6].as_ref(), "d9", "c405", "dc00", "d4", "cb0000"] {
            let b = h(hex);
            assert_eq!(Reader::new(&b).read_obj(), Err(RawError::Truncated), "{hex}");
        }
        let b = h("c1");
        assert_eq!(Reader::new(&b).read_obj(), Err(RawError::InvalidOpcode { op: 0xc1, offset: 0 }));
    }

    #[test]
    fn huge_declared_lengths_cost_nothing() {
        let b = h("ddffffffff");
        assert_eq!(Reader::new(&b).read_obj(), Ok(Obj::Array(u32::MAX as usize)));
        let b = h("dbffffffff41");
        assert_eq!(Reader::new(&b).read_obj(), Err(RawError::Truncated));
        assert_eq!(Reader::new(&h("ddffffffff")).skip_value(0, 10), Err(RawError::Truncated));
    }

    #[test]
    fn skip_is_bounded_by_depth() {
        let mut deep = vec![0x91u8; 50];
        deep.push(0x01);
        assert_eq!(Reader::new(&deep).skip_value(0, 50), Ok(()));
        assert_eq!(Reader::new(&deep).skip_value(0, 49), Err(RawError::TooDeep));
        assert_eq!(Reader::new(&deep).skip_value(1, 50), Err(RawError::TooDeep));
        let mixed = h("82a16192c0c3a162d40102");
        let mut r = Reader::new(&mixed);
        assert_eq!(r.skip_value(0, 4), Ok(()));
        assert!(r.is_empty());
    }
}
