//! `pickle.dumps(obj, protocol=5)` (CPython 3.8 … 3.13, `Modules/_pickle.c`, byte-identical to `Lib/pickle.py`
//! for these types) for exactly the value shapes vLLM hashes into block hashes: `None`, `bool`, `int` of any
//! size, `float`, `str`, `bytes` and `tuple` (vLLM `kv_cache_utils.hash_block_tokens` pickles
//! `(parent_hash, tuple(token_ids), extra_keys)`; `init_none_hash` pickles the seed string).
//!
//! The bytes depend on object identity through the memo: an object pickled twice is written once and then
//! fetched with `BINGET`. vLLM's hashed values share objects only where CPython caches them, so identity is
//! modelled as: the empty and one-character Latin-1 strings, the empty and one-byte `bytes` objects (CPython
//! singletons), and the extra-key tag names vLLM writes as literals (`"lora"`, `"mm"`, `"cache_salt"`,
//! `"prompt_embeds"`, interned) are shared by value; every other value is its own object. A caller's string
//! equal to a tag name is therefore treated as the interned literal (what CPython does when the caller's
//! string is also an interned literal, but not for a string built at run time).
//!
//! Framing follows CPython: after `PROTO`, output goes into 64 KiB frames (`FRAME` + u64 length, omitted for
//! frames under 4 bytes), a frame is committed before an object is saved once it holds 64 KiB or more, and a
//! `str`/`bytes` payload of 64 KiB or more is written outside any frame.

use std::collections::HashMap;

use crate::hash::{PyInt, PyValue};

/// Extra-key tag names vLLM writes as string literals (0.31.0+, `kv_cache_utils.py`), hence interned.
pub(crate) const INTERNED_TAGS: &[&str] = &["lora", "mm", "cache_salt", "prompt_embeds"];

const FRAME_SIZE_TARGET: usize = 64 * 1024;
const FRAME_SIZE_MIN: usize = 4;

mod op {
    pub(crate) const PROTO: u8 = 0x80;
    pub(crate) const FRAME: u8 = 0x95;
    pub(crate) const STOP: u8 = b'.';
    pub(crate) const NONE: u8 = b'N';
    pub(crate) const NEWTRUE: u8 = 0x88;
    pub(crate) const NEWFALSE: u8 = 0x89;
    pub(crate) const BININT1: u8 = b'K';
    pub(crate) const BININT2: u8 = b'M';
    pub(crate) const BININT: u8 = b'J';
    pub(crate) const LONG1: u8 = 0x8a;
    pub(crate) const LONG4: u8 = 0x8b;
    pub(crate) const BINFLOAT: u8 = b'G';
    pub(crate) const SHORT_BINUNICODE: u8 = 0x8c;
    pub(crate) const BINUNICODE: u8 = b'X';
    pub(crate) const BINUNICODE8: u8 = 0x8d;
    pub(crate) const SHORT_BINBYTES: u8 = b'C';
    pub(crate) const BINBYTES: u8 = b'B';
    pub(crate) const BINBYTES8: u8 = 0x8e;
    pub(crate) const EMPTY_TUPLE: u8 = b')';
    pub(crate) const MARK: u8 = b'(';
    pub(crate) const TUPLE: u8 = b't';
    pub(crate) const TUPLE1: u8 = 0x85;
    pub(crate) const TUPLE2: u8 = 0x86;
    pub(crate) const TUPLE3: u8 = 0x87;
    pub(crate) const MEMOIZE: u8 = 0x94;
    pub(crate) const BINGET: u8 = b'h';
    pub(crate) const LONG_BINGET: u8 = b'j';
}

/// A value this pickler does not write (vLLM never hashes one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PickleError(pub String);

impl std::fmt::Display for PickleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for PickleError {}

/// Objects shared by value (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Shared {
    Str(String),
    Bytes(Vec<u8>),
}

struct Pickler {
    out: Vec<u8>,
    /// The current frame's contents, once framing has started.
    frame: Option<Vec<u8>>,
    memo: HashMap<Shared, u32>,
    memo_len: u32,
    depth: usize,
}

/// `pickle.dumps(value, protocol=5)`.
pub fn dumps(value: &PyValue) -> Result<Vec<u8>, PickleError> {
    let mut p =
        Pickler { out: vec![op::PROTO, 5], frame: Some(Vec::new()), memo: HashMap::new(), memo_len: 0, depth: 0 };
    p.save(value)?;
    p.write(&[op::STOP]);
    p.commit_frame(true);
    Ok(p.out)
}

impl Pickler {
    fn write(&mut self, data: &[u8]) {
        match &mut self.frame {
            Some(f) => f.extend_from_slice(data),
            None => self.out.extend_from_slice(data),
        }
    }

    fn commit_frame(&mut self, force: bool) {
        let Some(f) = &mut self.frame else { return };
        if f.len() >= FRAME_SIZE_TARGET || force {
            let data = std::mem::take(f);
            if data.len() >= FRAME_SIZE_MIN {
                self.out.push(op::FRAME);
                self.out.extend_from_slice(&(data.len() as u64).to_le_bytes());
            }
            self.out.extend_from_slice(&data);
        }
    }

    /// A payload of 64 KiB or more: the current frame ends and the data goes straight to the output.
    fn write_large(&mut self, header: &[u8], payload: &[u8]) {
        self.commit_frame(true);
        self.out.extend_from_slice(header);
        self.out.extend_from_slice(payload);
    }

    fn memoize(&mut self, shared: Option<Shared>) {
        self.write(&[op::MEMOIZE]);
        if let Some(s) = shared {
            self.memo.insert(s, self.memo_len);
        }
        self.memo_len += 1;
    }

    fn get(&mut self, idx: u32) {
        match u8::try_from(idx) {
            Ok(i) => self.write(&[op::BINGET, i]),
            Err(_) => {
                let mut b = vec![op::LONG_BINGET];
                b.extend_from_slice(&idx.to_le_bytes());
                self.write(&b);
            }
        }
    }

    fn save(&mut self, v: &PyValue) -> Result<(), PickleError> {
        self.commit_frame(false);
        match v {
            PyValue::None => self.write(&[op::NONE]),
            PyValue::Bool(b) => self.write(&[if *b { op::NEWTRUE } else { op::NEWFALSE }]),
            PyValue::Int(i) => self.save_int(i),
            PyValue::Float(f) => {
                let mut b = vec![op::BINFLOAT];
                b.extend_from_slice(&f.to_be_bytes());
                self.write(&b);
            }
            PyValue::Str(s) => {
                let shared = shared_str(s);
                if let Some(idx) = shared.as_ref().and_then(|k| self.memo.get(k)).copied() {
                    self.get(idx);
                    return Ok(());
                }
                let data = s.as_bytes();
                let n = data.len();
                let header = if n <= 0xff {
                    vec![op::SHORT_BINUNICODE, n as u8]
                } else if n > 0xffff_ffff {
                    [&[op::BINUNICODE8][..], &(n as u64).to_le_bytes()].concat()
                } else {
                    [&[op::BINUNICODE][..], &(n as u32).to_le_bytes()].concat()
                };
                if n >= FRAME_SIZE_TARGET {
                    self.write_large(&header, data);
                } else {
                    self.write(&header);
                    self.write(data);
                }
                self.memoize(shared);
            }
            PyValue::Bytes(data) => {
                let shared = (data.len() <= 1).then(|| Shared::Bytes(data.clone()));
                if let Some(idx) = shared.as_ref().and_then(|k| self.memo.get(k)).copied() {
                    self.get(idx);
                    return Ok(());
                }
                let n = data.len();
                let header = if n <= 0xff {
                    vec![op::SHORT_BINBYTES, n as u8]
                } else if n > 0xffff_ffff {
                    [&[op::BINBYTES8][..], &(n as u64).to_le_bytes()].concat()
                } else {
                    [&[op::BINBYTES][..], &(n as u32).to_le_bytes()].concat()
                };
                if n >= FRAME_SIZE_TARGET {
                    self.write_large(&header, data);
                } else {
                    self.write(&header);
                    self.write(data);
                }
                self.memoize(shared);
            }
            PyValue::Tuple(items) => {
                if items.is_empty() {
                    self.write(&[op::EMPTY_TUPLE]);
                    return Ok(());
                }
                self.depth += 1;
                if self.depth > crate::limits::MAX_HASHED_VALUE_DEPTH {
                    return Err(PickleError("RecursionError: maximum recursion depth exceeded while pickling an object".into()));
                }
                if items.len() <= 3 {
                    for x in items {
                        self.save(x)?;
                    }
                    self.write(&[[op::TUPLE1, op::TUPLE2, op::TUPLE3][items.len() - 1]]);
                } else {
                    self.write(&[op::MARK]);
                    for x in items {
                        self.save(x)?;
                    }
                    self.write(&[op::TUPLE]);
                }
                self.depth -= 1;
                self.memoize(None);
            }
            other => {
                return Err(PickleError(format!(
                    "pickling a {} is not supported: vLLM's block hashes pickle only None, bool, int, float, str, bytes and tuple",
                    other.type_name()
                )))
            }
        }
        Ok(())
    }

    fn save_int(&mut self, i: &PyInt) {
        if let Some(v) = i.to_i128() {
            if (0..=0xff).contains(&v) {
                return self.write(&[op::BININT1, v as u8]);
            }
            if (0..=0xffff).contains(&v) {
                let b = (v as u16).to_le_bytes();
                return self.write(&[op::BININT2, b[0], b[1]]);
            }
            if (-0x8000_0000..=0x7fff_ffff).contains(&v) {
                let mut b = vec![op::BININT];
                b.extend_from_slice(&(v as i32).to_le_bytes());
                return self.write(&b);
            }
        }
        let encoded = encode_long(i);
        let mut b = if encoded.len() < 256 {
            vec![op::LONG1, encoded.len() as u8]
        } else {
            [&[op::LONG4][..], &(encoded.len() as i32).to_le_bytes()].concat()
        };
        b.extend_from_slice(&encoded);
        self.write(&b);
    }
}

fn shared_str(s: &str) -> Option<Shared> {
    let mut chars = s.chars();
    let singleton = match (chars.next(), chars.next()) {
        (None, _) => true,
        (Some(c), None) => (c as u32) < 256,
        _ => false,
    };
    (singleton || INTERNED_TAGS.contains(&s)).then(|| Shared::Str(s.to_string()))
}

/// pickle's `encode_long`: two's complement little-endian in `(bit_length >> 3) + 1` bytes, with one
/// redundant `0xff` sign byte dropped for negative numbers; `0` is empty.
pub(crate) fn encode_long(i: &PyInt) -> Vec<u8> {
    let mut mag = decimal_to_le_bytes(i.to_string().trim_start_matches('-'));
    while mag.last() == Some(&0) {
        mag.pop();
    }
    if mag.is_empty() {
        return vec![];
    }
    let bit_length = (mag.len() - 1) * 8 + (8 - mag.last().unwrap().leading_zeros() as usize);
    let nbytes = (bit_length >> 3) + 1;
    let mut out = mag;
    out.resize(nbytes, 0);
    if i.is_negative() {
        // Two's complement of the magnitude in nbytes.
        let mut carry = true;
        for b in out.iter_mut() {
            *b = !*b;
            if carry {
                let (s, c) = b.overflowing_add(1);
                *b = s;
                carry = c;
            }
        }
        if out.len() > 1 && out[out.len() - 1] == 0xff && out[out.len() - 2] & 0x80 != 0 {
            out.pop();
        }
    }
    out
}

/// A non-negative decimal integer as little-endian bytes.
fn decimal_to_le_bytes(digits: &str) -> Vec<u8> {
    let mut out: Vec<u8> = vec![];
    for d in digits.bytes() {
        let mut carry = (d - b'0') as u32;
        for b in out.iter_mut() {
            let v = *b as u32 * 10 + carry;
            *b = v as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            out.push(carry as u8);
            carry >>= 8;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex::encode as hex;

    #[test]
    fn encode_long_matches_python() {
        for (v, want) in [
            ("0", ""),
            ("255", "ff00"),
            ("32767", "ff7f"),
            ("-256", "00ff"),
            ("-32768", "0080"),
            ("-128", "80"),
            ("127", "7f"),
            ("18446744073709551621", "050000000000000001"),
            ("-1", "ff"),
        ] {
            assert_eq!(hex(encode_long(&PyInt::parse(v).unwrap())), want, "{v}");
        }
    }

    #[test]
    fn documented_pickles() {
        // spec/README.md, "Store keys: a worked example": the seed string; an empty tuple has no frame.
        assert_eq!(
            hex(dumps(&PyValue::str("vllm-none-hash")).unwrap()),
            "80059512000000000000008c0e766c6c6d2d6e6f6e652d68617368942e"
        );
        assert_eq!(hex(dumps(&PyValue::Tuple(vec![])).unwrap()), "8005292e");
        // CPython 3.11 `pickle.dumps(tuple(json.loads('["a","a","ab","ab"]')), 5)`: the one-character string
        // is a singleton fetched from the memo, the two "ab" are distinct objects.
        let s = |x: &str| PyValue::str(x);
        let t = PyValue::Tuple(vec![s("a"), s("a"), s("ab"), s("ab")]);
        assert_eq!(hex(dumps(&t).unwrap()), "8005951400000000000000288c01619468008c026162948c0261629474942e");
        let big = PyInt::parse("1180591620717411303424").unwrap(); // 2**70
        let t = PyValue::Tuple(vec![
            PyValue::Bool(true),
            PyValue::None,
            PyValue::Float(1.5),
            PyValue::int(-1),
            PyValue::int(70000),
            PyValue::Int(big),
            PyValue::Bytes(vec![]),
            PyValue::Bytes(vec![]),
        ]);
        assert_eq!(
            hex(dumps(&t).unwrap()),
            "800595290000000000000028884e473ff80000000000004affffffff4a701101008a09000000000000000040430094680074942e"
        );
        assert!(dumps(&PyValue::List(vec![])).is_err());
    }
}
