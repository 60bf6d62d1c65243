//! A MessagePack writer that makes msgspec's choices: the smallest width, the unsigned family for every
//! non-negative integer, float64 for every float, str (never bin) for text.

use super::WireInt;

/// A growing MessagePack buffer; each method appends one object (or a container head) as msgspec encodes it.
#[derive(Default, Debug, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Writer { buf: Vec::new() }
    }
    /// An empty writer with room for `n` bytes.
    pub fn with_capacity(n: usize) -> Self {
        Writer { buf: Vec::with_capacity(n) }
    }
    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }
    /// Number of bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// Appends bytes as they are (an object encoded elsewhere).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// `nil`.
    pub fn nil(&mut self) {
        self.buf.push(0xc0);
    }
    /// A boolean.
    pub fn bool(&mut self, v: bool) {
        self.buf.push(if v { 0xc3 } else { 0xc2 });
    }

    /// A non-negative integer in the smallest encoding: positive fixint, then `uint8`, `uint16`, `uint32`,
    /// `uint64`.
    #[inline]
    pub fn uint(&mut self, v: u64) {
        // The opcode and the big-endian value in the low bytes of one word, written as one fixed-size copy
        // and cut back to the encoding's length: no branch per width on the writing side, no call.
        let (word, n) = if v < 0x80 {
            (v as u128, 1)
        } else if v <= u8::MAX as u64 {
            (0xcc | (v as u128) << 8, 2)
        } else if v <= u16::MAX as u64 {
            (0xcd | ((v as u16).swap_bytes() as u128) << 8, 3)
        } else if v <= u32::MAX as u64 {
            (0xce | ((v as u32).swap_bytes() as u128) << 8, 5)
        } else {
            (0xcf | (v.swap_bytes() as u128) << 8, 9)
        };
        self.word(word, n);
    }

    /// The first `n` bytes of `word` (little-endian).
    #[inline(always)]
    fn word(&mut self, word: u128, n: usize) {
        let at = self.buf.len();
        self.buf.extend_from_slice(&word.to_le_bytes());
        self.buf.truncate(at + n);
    }

    /// A signed integer: a non-negative one as [`Writer::uint`] writes it, a negative one as negative fixint or the
    /// smallest of `int8`..`int64`.
    #[inline]
    pub fn sint(&mut self, v: i64) {
        if v >= 0 {
            self.uint(v as u64);
        } else if v >= -32 {
            self.buf.push(v as i8 as u8);
        } else if v >= i8::MIN as i64 {
            self.buf.extend_from_slice(&[0xd0, v as i8 as u8]);
        } else if v >= i16::MIN as i64 {
            self.buf.push(0xd1);
            self.buf.extend_from_slice(&(v as i16).to_be_bytes());
        } else if v >= i32::MIN as i64 {
            self.buf.push(0xd2);
            self.buf.extend_from_slice(&(v as i32).to_be_bytes());
        } else {
            self.buf.push(0xd3);
            self.buf.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// A wire integer, as [`Writer::uint`] or [`Writer::sint`] writes it.
    #[inline]
    pub fn int(&mut self, v: WireInt) {
        match v.as_u64() {
            Some(u) => self.uint(u),
            // In range and negative, so it fits i64.
            None => self.sint(v.get() as i64),
        }
    }

    /// A `list[int]`: the array head, then the elements gathered in a small local buffer (cursor in a
    /// register, no capacity check per element) that is appended a chunk at a time. Four 16-bit values in a
    /// row (block ids) are written after one range check as four overlapping 4-byte stores of their 12 bytes;
    /// other values that fit 32 bits as one 8-byte store cut back to their length.
    #[inline]
    pub fn int_list(&mut self, v: &[WireInt]) {
        self.array_len(v.len());
        self.ints(v);
    }

    /// The elements of [`Writer::int_list`] without the array head (for a list written in pieces).
    pub(crate) fn ints(&mut self, v: &[WireInt]) {
        const CHUNK: usize = 512;
        if v.len() < 8 {
            // A short list: element by element, without setting up the chunk.
            for &i in v {
                self.int(i);
            }
            return;
        }
        let mut chunk = [0u8; CHUNK + 16];
        let mut at = 0usize;
        let mut rest = v;
        loop {
            if at > CHUNK {
                self.buf.extend_from_slice(&chunk[..at]);
                at = 0;
            }
            if let [a, b, c, d, tail @ ..] = rest {
                let ((a, na), (b, nb), (c, nc), (d, nd)) = (a.raw(), b.raw(), c.raw(), d.raw());
                // All four non-negative and in [256, 2^16): one branch for the four.
                let uint16 = |v: u64| v.wrapping_sub(0x100) < 0xff00;
                if !(na | nb | nc | nd) & uint16(a) & uint16(b) & uint16(c) & uint16(d) {
                    // Four overlapping 4-byte stores of `0xcd hi lo` (the fourth byte is overwritten next).
                    chunk[at..at + 4].copy_from_slice(&uint16_bytes(a).to_le_bytes());
                    chunk[at + 3..at + 7].copy_from_slice(&uint16_bytes(b).to_le_bytes());
                    chunk[at + 6..at + 10].copy_from_slice(&uint16_bytes(c).to_le_bytes());
                    chunk[at + 9..at + 13].copy_from_slice(&uint16_bytes(d).to_le_bytes());
                    at += 12;
                    rest = tail;
                    continue;
                }
            }
            let Some((&i, tail)) = rest.split_first() else { break };
            rest = tail;
            at += match i.as_u64() {
                Some(u) if u <= 0xffff_ffff => {
                    let (word, n) = if u < 0x80 {
                        (u, 1)
                    } else if u <= 0xff {
                        (0xcc | u << 8, 2)
                    } else if u <= 0xffff {
                        (0xcd | ((u as u16).swap_bytes() as u64) << 8, 3)
                    } else {
                        (0xce | ((u as u32).swap_bytes() as u64) << 8, 5)
                    };
                    chunk[at..at + 8].copy_from_slice(&word.to_le_bytes());
                    n
                }
                Some(u) => {
                    chunk[at] = 0xcf;
                    chunk[at + 1..at + 9].copy_from_slice(&u.to_be_bytes());
                    9
                }
                // In range and negative, so it fits i64: the smallest signed form, as `sint` writes it.
                None => {
                    let s = i.get() as i64;
                    let (op, n) = if s >= -32 {
                        (s as u8, 0)
                    } else if s >= i8::MIN as i64 {
                        (0xd0, 1)
                    } else if s >= i16::MIN as i64 {
                        (0xd1, 2)
                    } else if s >= i32::MIN as i64 {
                        (0xd2, 4)
                    } else {
                        (0xd3, 8)
                    };
                    chunk[at] = op;
                    chunk[at + 1..at + 1 + n].copy_from_slice(&s.to_be_bytes()[8 - n..]);
                    1 + n
                }
            };
        }
        self.buf.extend_from_slice(&chunk[..at]);
    }

    /// A float, always as `float64` (`0xcb`), as msgspec writes every Python float.
    pub fn f64(&mut self, v: f64) {
        self.buf.push(0xcb);
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    fn head(&mut self, fix: u8, fix_max: usize, op8: Option<u8>, op16: u8, op32: u8, n: usize) {
        if n <= fix_max {
            self.buf.push(fix | n as u8);
        } else if let (Some(op), true) = (op8, n <= u8::MAX as usize) {
            self.buf.extend_from_slice(&[op, n as u8]);
        } else if n <= u16::MAX as usize {
            self.buf.push(op16);
            self.buf.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            self.buf.push(op32);
            self.buf.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }

    /// Writes a [`Key`]: a short one as one fixed-size copy (no call to copy a few bytes), cut back to its
    /// length.
    #[inline]
    pub(crate) fn key(&mut self, k: &Key) {
        match k {
            Key::Short(bytes, len) => {
                let at = self.buf.len();
                self.buf.extend_from_slice(bytes);
                self.buf.truncate(at + *len as usize);
            }
            Key::Long(bytes) => self.buf.extend_from_slice(bytes),
        }
    }

    /// A string in the smallest head (fixstr up to 31 bytes, then `str8`, `str16`, `str32`).
    #[inline]
    pub fn str(&mut self, s: &str) {
        self.str_bytes(s.as_bytes());
    }

    /// A str from bytes the caller knows to be UTF-8 (a slice of a checked buffer, at element bounds).
    #[inline]
    pub(crate) fn str_bytes(&mut self, s: &[u8]) {
        match s.len() {
            n @ 0..=31 => self.buf.push(0xa0 | n as u8),
            n @ 32..=255 => self.buf.extend_from_slice(&[0xd9, n as u8]),
            n => self.head(0xa0, 31, Some(0xd9), 0xda, 0xdb, n),
        }
        self.buf.extend_from_slice(s);
    }
    /// A binary in the smallest head (`bin8`, `bin16`, `bin32`).
    pub fn bin(&mut self, b: &[u8]) {
        let n = b.len();
        if n <= u8::MAX as usize {
            self.buf.extend_from_slice(&[0xc4, n as u8]);
        } else if n <= u16::MAX as usize {
            self.buf.push(0xc5);
            self.buf.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            self.buf.push(0xc6);
            self.buf.extend_from_slice(&(n as u32).to_be_bytes());
        }
        self.buf.extend_from_slice(b);
    }
    #[cfg(feature = "testing")]
    pub(crate) fn ext(&mut self, tag: i8, data: &[u8]) {
        let n = data.len();
        match n {
            1 => self.buf.push(0xd4),
            2 => self.buf.push(0xd5),
            4 => self.buf.push(0xd6),
            8 => self.buf.push(0xd7),
            16 => self.buf.push(0xd8),
            _ if n <= u8::MAX as usize => self.buf.extend_from_slice(&[0xc7, n as u8]),
            _ if n <= u16::MAX as usize => {
                self.buf.push(0xc8);
                self.buf.extend_from_slice(&(n as u16).to_be_bytes());
            }
            _ => {
                self.buf.push(0xc9);
                self.buf.extend_from_slice(&(n as u32).to_be_bytes());
            }
        }
        self.buf.push(tag as u8);
        self.buf.extend_from_slice(data);
    }
    /// An array head for `n` elements (fixarray up to 15, then `array16`, `array32`); the elements follow.
    #[inline]
    pub fn array_len(&mut self, n: usize) {
        if n <= 15 {
            self.buf.push(0x90 | n as u8);
        } else {
            self.head(0x90, 15, None, 0xdc, 0xdd, n);
        }
    }
    /// A map head for `n` pairs (fixmap up to 15, then `map16`, `map32`); the pairs follow.
    #[inline]
    pub fn map_len(&mut self, n: usize) {
        self.head(0x80, 15, None, 0xde, 0xdf, n);
    }

    /// Starts a struct written as a map whose header width is chosen, as msgspec does, from the number of
    /// *declared* entries; the entry count is patched by [`Writer::finish_struct_map`].
    pub(crate) fn begin_struct_map(&mut self, declared: usize) -> StructHeader {
        let at = self.buf.len();
        let width = if declared < 16 {
            self.buf.push(0x80);
            HeaderWidth::Fix
        } else if declared <= u16::MAX as usize {
            self.buf.extend_from_slice(&[0xde, 0, 0]);
            HeaderWidth::W16
        } else {
            self.buf.extend_from_slice(&[0xdf, 0, 0, 0, 0]);
            HeaderWidth::W32
        };
        StructHeader { at, width }
    }
    pub(crate) fn finish_struct_map(&mut self, h: StructHeader, written: usize) {
        match h.width {
            HeaderWidth::Fix => self.buf[h.at] = 0x80 | written as u8,
            HeaderWidth::W16 => self.buf[h.at + 1..h.at + 3].copy_from_slice(&(written as u16).to_be_bytes()),
            HeaderWidth::W32 => self.buf[h.at + 1..h.at + 5].copy_from_slice(&(written as u32).to_be_bytes()),
        }
    }
}

/// A str written often (a struct key), encoded once: up to [`Key::SHORT`] bytes in a fixed-size array, so
/// that writing it is one copy of a constant size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// The encoding in the first `.1` bytes, zeros after.
    Short([u8; Key::SHORT], u8),
    Long(Box<[u8]>),
}

impl Key {
    pub(crate) const SHORT: usize = 32;

    /// The MessagePack encoding of the str `s`.
    pub(crate) fn str(s: &str) -> Key {
        let mut w = Writer::new();
        w.str(s);
        let b = w.into_bytes();
        if b.len() <= Key::SHORT {
            let mut a = [0u8; Key::SHORT];
            a[..b.len()].copy_from_slice(&b);
            Key::Short(a, b.len() as u8)
        } else {
            Key::Long(b.into_boxed_slice())
        }
    }

    /// The encoded bytes.
    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Short(a, n) => &a[..*n as usize],
            Key::Long(b) => b,
        }
    }
}

/// `0xcd` and the two big-endian bytes of `u`, in the low 3 bytes (little-endian order) of the result.
#[inline(always)]
fn uint16_bytes(u: u64) -> u32 {
    0xcd | ((u as u16).swap_bytes() as u32) << 8
}

#[derive(Clone, Copy, Debug)]
enum HeaderWidth {
    Fix,
    W16,
    W32,
}

/// Where a struct's map header sits, for patching its entry count.
#[derive(Clone, Copy, Debug)]
#[must_use]
pub(crate) struct StructHeader {
    at: usize,
    width: HeaderWidth,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(w: &Writer) -> String {
        hex::encode(w.as_bytes())
    }

    #[test]
    fn ints_match_msgspec() {
        // Table from msgspec 0.23.0 (measured): non-negative values always use the unsigned family.
        for (v, want) in [
            (0i128, "00"),
            (127, "7f"),
            (128, "cc80"),
            (255, "ccff"),
            (256, "cd0100"),
            (65535, "cdffff"),
            (65536, "ce00010000"),
            ((1 << 32) - 1, "ceffffffff"),
            (1 << 32, "cf0000000100000000"),
            (u64::MAX as i128, "cfffffffffffffffff"),
            (-1, "ff"),
            (-32, "e0"),
            (-33, "d0df"),
            (-128, "d080"),
            (-129, "d1ff7f"),
            (-32768, "d18000"),
            (-32769, "d2ffff7fff"),
            (-(1 << 31), "d280000000"),
            (-(1 << 31) - 1, "d3ffffffff7fffffff"),
            (i64::MIN as i128, "d38000000000000000"),
        ] {
            let mut w = Writer::new();
            w.int(WireInt::new(v).unwrap());
            assert_eq!(written(&w), want, "{v}");
        }
    }

    #[test]
    fn int_list_writes_what_int_writes() {
        // Every width boundary on both sides, long enough to cross the chunk flushes several times.
        let mut vals = vec![];
        for b in [0i128, 1, 31, 32, 33, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, u64::MAX as i128] {
            vals.push(b);
            if b > 0 {
                vals.push(-b);
                vals.push(-b - 1);
            }
        }
        vals.push(i64::MIN as i128);
        vals.retain(|v| WireInt::new(*v).is_ok());
        let ints: Vec<WireInt> = vals.iter().cycle().take(vals.len() * 40).map(|v| WireInt::new(*v).unwrap()).collect();
        let check = |part: &[WireInt]| {
            let mut want = Writer::new();
            want.array_len(part.len());
            for i in part {
                want.int(*i);
            }
            let mut got = Writer::new();
            got.int_list(part);
            assert_eq!(written(&got), written(&want), "{} elements: {part:?}", part.len());
        };
        for n in [0, 1, 7, 8, 9, 15, 16, 100, ints.len()] {
            check(&ints[..n]);
        }
        // Short lists (written element by element): every run of up to 8, from every position.
        for n in 0..=8 {
            for start in 0..vals.len() - n {
                check(&ints[start..start + n]);
            }
        }
    }

    /// Runs of every length up to 13 of values in [256, 2^16) (the four-at-a-time path), each run broken by a
    /// value just outside that range, negative or wide: the same bytes as one `int` per element.
    #[test]
    fn uint16_runs_write_what_int_writes() {
        let mut vals = vec![];
        for run in 0..14i128 {
            for k in 0..run {
                vals.push([256, 65535, 0x1234, 0x100 + 977 * k][(k % 4) as usize]);
            }
            vals.push([255, 65536, -300, 0, 1 << 40, -1][(run % 6) as usize]);
        }
        let ints: Vec<WireInt> = vals.iter().map(|v| WireInt::new(*v).unwrap()).collect();
        for start in 0..4 {
            let mut want = Writer::new();
            want.array_len(ints.len() - start);
            for i in &ints[start..] {
                want.int(*i);
            }
            let mut got = Writer::new();
            got.int_list(&ints[start..]);
            assert_eq!(written(&got), written(&want), "from {start}");
        }
    }

    #[test]
    fn keys_write_what_str_writes() {
        for n in [0, 1, 30, 31, 32, 40, 300] {
            let s = "k".repeat(n);
            let mut want = Writer::new();
            want.str(&s);
            let k = Key::str(&s);
            assert_eq!(k.as_bytes(), want.as_bytes(), "{n}");
            assert_eq!(matches!(k, Key::Short(..)), want.len() <= Key::SHORT, "{n}");
            let mut got = Writer::new();
            got.uint(7);
            got.key(&k);
            got.uint(8);
            let mut want = Writer::new();
            want.uint(7);
            want.str(&s);
            want.uint(8);
            assert_eq!(written(&got), written(&want), "{n}");
        }
    }

    #[test]
    fn lengths_and_struct_headers() {
        let mut w = Writer::new();
        w.str(&"x".repeat(31));
        assert_eq!(&written(&w)[..2], "bf");
        let mut w = Writer::new();
        w.str(&"x".repeat(32));
        assert_eq!(&written(&w)[..4], "d920");
        let mut w = Writer::new();
        w.array_len(16);
        w.map_len(16);
        assert_eq!(written(&w), "dc0010de0010");
        // 16 declared fields and one written: map16 holding one entry, as msgspec writes it.
        let mut w = Writer::new();
        let h = w.begin_struct_map(16);
        w.str("a");
        w.uint(1);
        w.finish_struct_map(h, 1);
        assert_eq!(written(&w), "de0001a16101");
        let mut w = Writer::new();
        let h = w.begin_struct_map(15);
        w.str("a");
        w.uint(1);
        w.finish_struct_map(h, 1);
        assert_eq!(written(&w), "81a16101");
    }
}
