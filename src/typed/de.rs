//! The runtime of the generated typed decoders (`src/typed/generated/`): reads each value as the spec-driven
//! decoder does (same acceptance, same error texts and paths — both build their errors with
//! `crate::codec::path`); `tests/suite/typed_contract.rs` checks that the generated code agrees with it.

use std::collections::HashMap;
use std::hash::Hash;

use super::{StrList, Strictness, Untyped};
use crate::codec::path;
use crate::codec::{DecodeError, DecodeErrorKind as K};
use crate::limits;
use crate::msgpack::{Kind, Obj, RawError, Reader, WireInt, Writer};

/// An int enum as the generated structs hold it (an open newtype over `i64`).
pub(crate) trait EnumMember: Copy + PartialEq {
    fn from_wire(v: i64) -> Self;
}

/// Writes a `list[str]`.
pub(crate) fn str_list<S: AsRef<str>>(w: &mut Writer, v: &[S]) {
    w.array_len(v.len());
    for s in v {
        w.str(s.as_ref());
    }
}

/// Writes a `list[list[int]]`.
pub(crate) fn int_lists(w: &mut Writer, v: &[Vec<WireInt>]) {
    w.array_len(v.len());
    for g in v {
        w.int_list(g);
    }
}

/// Writes a `list[str]` held as a [`StrList`].
pub(crate) fn write_str_list(w: &mut Writer, v: &StrList) {
    v.write(w);
}

/// An upper bound of the encoded size of a [`StrList`].
pub(crate) fn str_list_buf_len(v: &StrList) -> usize {
    5 + v.concatenated().len() + 5 * v.len()
}

/// An upper bound of the encoded size of a `list[str]`.
pub(crate) fn str_list_len<S: AsRef<str>>(v: &[S]) -> usize {
    5 + v.iter().map(|s| s.as_ref().len() + 5).sum::<usize>()
}

/// A path step; a field is named by its wire name.
pub(crate) type Seg = path::Seg<&'static str>;

pub(crate) struct De<'a> {
    pub(crate) r: Reader<'a>,
    depth: usize,
    path: Vec<Seg>,
}

pub(crate) type R<T> = Result<T, DecodeError>;

mod sealed {
    /// Keeps [`super::WireStr`] to the two string types the generated decoders know.
    #[allow(unnameable_types, reason = "the sealed-trait pattern: reachable as a bound, never to be named")]
    pub trait Sealed {}
    impl Sealed for String {}
    impl Sealed for &str {}
}

/// How a typed message holds its strings: owned (`String`, the default) or borrowed from the decoded input
/// (`&'a str`, no allocation per string).
pub trait WireStr<'a>: sealed::Sealed + AsRef<str> + Sized {
    /// The string as this representation holds it (a copy, or the borrowed slice itself).
    fn from_wire(s: &'a str) -> Self;
}
impl<'a> WireStr<'a> for String {
    #[inline]
    fn from_wire(s: &'a str) -> Self {
        s.to_owned()
    }
}
impl<'a> WireStr<'a> for &'a str {
    #[inline]
    fn from_wire(s: &'a str) -> Self {
        s
    }
}

impl<'a> De<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> R<Self> {
        if bytes.len() > limits::MAX_FRAME_BYTES {
            return Err(DecodeError::new(K::FrameTooLarge { len: bytes.len() }));
        }
        Ok(De { r: Reader::new(bytes), depth: 0, path: Vec::with_capacity(8) })
    }

    pub(crate) fn finish(self) -> R<()> {
        if self.r.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::new(K::Trailing { offset: self.r.pos() }))
        }
    }

    #[cold]
    pub(crate) fn err(&self, kind: K) -> DecodeError {
        path::at(kind, path::render(&self.path, |f| *f))
    }
    #[cold]
    pub(crate) fn key_err(&self, kind: K) -> DecodeError {
        path::in_key(kind, path::render(&self.path, |f| *f))
    }
    #[cold]
    pub(crate) fn raw(e: RawError) -> DecodeError {
        path::raw(e)
    }
    #[cold]
    pub(crate) fn expected(&self, expected: &str, got: Kind) -> DecodeError {
        self.err(K::Expected { expected: expected.to_string(), got: got.msgspec_name() })
    }

    #[inline]
    pub(crate) fn obj(&mut self) -> R<Obj<'a>> {
        self.r.read_obj().map_err(Self::raw)
    }

    #[inline]
    pub(crate) fn with<T>(&mut self, seg: Seg, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.path.push(seg);
        let v = f(self)?;
        self.path.pop();
        Ok(v)
    }

    pub(crate) fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > limits::MAX_DEPTH {
            return Err(Self::raw(RawError::TooDeep));
        }
        Ok(())
    }
    pub(crate) fn leave(&mut self) {
        self.depth -= 1;
    }

    /// An int; the fast path reads it in place, anything else goes through the general reader (and its error).
    #[inline]
    pub(crate) fn int(&mut self) -> R<WireInt> {
        if let Some(i) = self.r.try_int() {
            return Ok(i);
        }
        match self.obj()? {
            Obj::Int(i) => Ok(i),
            o => Err(self.expected("int", o.kind())),
        }
    }

    #[inline]
    pub(crate) fn utf8_ref(b: &'a [u8]) -> R<&'a str> {
        std::str::from_utf8(b).map_err(|_| DecodeError::new(K::InvalidUtf8))
    }

    /// A str, borrowed from the input.
    #[inline]
    pub(crate) fn str_ref(&mut self) -> R<&'a str> {
        if let Some(b) = self.r.try_str() {
            return Self::utf8_ref(b);
        }
        match self.obj()? {
            Obj::Str(b) => Self::utf8_ref(b),
            o => Err(self.expected("str", o.kind())),
        }
    }

    /// A str as the message holds it (owned or borrowed).
    #[inline]
    pub(crate) fn str<S: WireStr<'a>>(&mut self) -> R<S> {
        self.str_ref().map(S::from_wire)
    }

    pub(crate) fn opt_str<S: WireStr<'a>>(&mut self) -> R<Option<S>> {
        if let Some(b) = self.r.try_str() {
            return Self::utf8_ref(b).map(|s| Some(S::from_wire(s)));
        }
        match self.obj()? {
            Obj::Nil => Ok(None),
            Obj::Str(b) => Self::utf8_ref(b).map(|s| Some(S::from_wire(s))),
            o => Err(self.expected("str | null", o.kind())),
        }
    }

    /// Array header of a list (`expected` names the type in a mismatch: `array` or `array | null`).
    #[inline]
    pub(crate) fn array(&mut self, expected: &str) -> R<usize> {
        if let Some(n) = self.r.try_array() {
            return Ok(n);
        }
        match self.obj()? {
            Obj::Array(n) => Ok(n),
            o => Err(self.expected(expected, o.kind())),
        }
    }

    /// Preallocation that never exceeds what the remaining input could hold.
    #[inline]
    pub(crate) fn cap(&self, n: usize) -> usize {
        n.min(self.r.remaining()).min(limits::MAX_PREALLOC_ELEMENTS)
    }

    pub(crate) fn list<T>(&mut self, n: usize, mut elem: impl FnMut(&mut Self) -> R<T>) -> R<Vec<T>> {
        self.enter()?;
        let mut out = Vec::with_capacity(self.cap(n));
        for i in 0..n {
            out.push(self.with(Seg::Index(i), &mut elem)?);
        }
        self.leave();
        Ok(out)
    }

    /// `list[int]`. The hot loop of every metadata message: elements are read in place and the path is only
    /// pushed for an element that is not a whole int (whose error then comes from the general path).
    pub(crate) fn list_int(&mut self) -> R<Vec<WireInt>> {
        let n = self.array("array")?;
        self.enter()?;
        let mut out = Vec::with_capacity(self.cap(n));
        let mut i = 0;
        while i < n {
            i += self.r.read_int_run(n - i, &mut out);
            if i < n {
                out.push(self.with(Seg::Index(i), |d| d.int())?);
                i += 1;
            }
        }
        self.leave();
        Ok(out)
    }

    /// `list[str]`, like [`De::list_int`].
    pub(crate) fn list_str<S: WireStr<'a>>(&mut self) -> R<Vec<S>> {
        let n = self.array("array")?;
        self.strs(n)
    }

    fn strs<S: WireStr<'a>>(&mut self, n: usize) -> R<Vec<S>> {
        self.enter()?;
        let mut out = Vec::with_capacity(self.cap(n));
        for i in 0..n {
            match self.r.try_str() {
                Some(b) => out.push(S::from_wire(Self::utf8_ref(b)?)),
                None => out.push(self.with(Seg::Index(i), |d| d.str())?),
            }
        }
        self.leave();
        Ok(out)
    }

    /// `list[str] | None` into one buffer ([`StrList`]): elements are copied whole and UTF-8 is checked once
    /// over the buffer (with each element end a char boundary, which is the same as checking every element).
    /// Errors are those of checking element by element: an error at element `i` is reported only if
    /// elements `0..i` are valid UTF-8, else that is the error.
    pub(crate) fn opt_str_list(&mut self) -> R<Option<StrList>> {
        if let Some(n) = self.r.try_array() {
            return self.str_list_buf(n).map(Some);
        }
        match self.obj()? {
            Obj::Nil => Ok(None),
            Obj::Array(n) => self.str_list_buf(n).map(Some),
            o => Err(self.expected("array | null", o.kind())),
        }
    }

    fn str_list_buf(&mut self, n: usize) -> R<StrList> {
        self.enter()?;
        let mut text: Vec<u8> = Vec::new();
        let mut ends: Vec<u32> = Vec::with_capacity(self.cap(n));
        for i in 0..n {
            let b = match self.r.try_str() {
                Some(b) => b,
                None => match self.with(Seg::Index(i), |d| d.str_ref()) {
                    Ok(s) => s.as_bytes(),
                    Err(e) => {
                        return Err(if StrList::from_utf8_parts(text, ends).is_none() { Self::bad_utf8() } else { e })
                    }
                },
            };
            if i == 0 {
                // Ids of one list are about the same length: room for `n` of the first, at most the input left.
                text.reserve(b.len().saturating_mul(n).min(self.r.remaining() + b.len()));
            }
            text.extend_from_slice(b);
            // A frame is at most `limits::MAX_FRAME_BYTES` (64 MiB), so any end fits a u32.
            ends.push(text.len() as u32);
        }
        self.leave();
        StrList::from_utf8_parts(text, ends).ok_or_else(Self::bad_utf8)
    }

    #[cold]
    fn bad_utf8() -> DecodeError {
        DecodeError::new(K::InvalidUtf8)
    }

    pub(crate) fn list_list_int(&mut self) -> R<Vec<Vec<WireInt>>> {
        let n = self.array("array")?;
        self.list(n, |d| d.list_int())
    }

    /// A struct encoded as a map: calls `field(index)` for each known key (last duplicate wins because the
    /// callback overwrites), skips unknown keys, then returns. `names` are the wire names in order.
    pub(crate) fn struct_map(
        &mut self,
        names: &[&'static str],
        mut field: impl FnMut(&mut Self, usize) -> R<()>,
    ) -> R<()> {
        let n = match self.obj()? {
            Obj::Map(n) => n,
            o => return Err(self.expected("object", o.kind())),
        };
        self.enter()?;
        // Peers write fields in declaration order: try the one after the last match first.
        let mut guess = 0usize;
        for _ in 0..n {
            let key = match self.r.try_str() {
                Some(b) => b,
                None => self.struct_key_slow()?,
            };
            let i = if names.get(guess).is_some_and(|n| n.as_bytes() == key) {
                Some(guess)
            } else {
                names.iter().position(|n| n.as_bytes() == key)
            };
            match i {
                Some(i) => {
                    guess = i + 1;
                    self.with(Seg::Field(names[i]), |d| field(d, i))?
                }
                None => self.r.skip_value(self.depth, limits::MAX_DEPTH).map_err(Self::raw)?,
            }
        }
        self.leave();
        Ok(())
    }

    /// A `bytes` value (generated for a `bytes` field; no revision has one today, only `bytes` constants).
    #[inline]
    #[allow(dead_code)]
    pub(crate) fn bytes(&mut self) -> R<Vec<u8>> {
        match self.obj()? {
            Obj::Bin(b) => Ok(b.to_vec()),
            o => Err(self.expected("bytes", o.kind())),
        }
    }

    /// A dict: `key` reads one key from its object head, `value` one value under `[...]`. As a Python dict
    /// (and the spec codec): the last duplicate wins, the first position stays; keys are found by hashing,
    /// so many keys cost linear time.
    pub(crate) fn dict<K: Eq + Hash + Clone, V>(
        &mut self,
        mut key: impl FnMut(&mut Self, Obj<'a>) -> R<K>,
        mut value: impl FnMut(&mut Self) -> R<V>,
    ) -> R<Vec<(K, V)>> {
        let n = match self.obj()? {
            Obj::Map(n) => n,
            o => return Err(self.expected("object", o.kind())),
        };
        self.enter()?;
        let mut out: Vec<(K, V)> = Vec::with_capacity(self.cap(n / 2));
        let mut index: HashMap<K, usize> = HashMap::new();
        for _ in 0..n {
            let o = self.obj()?;
            let k = key(self, o)?;
            let v = self.with(Seg::DictValue, &mut value)?;
            match index.get(&k) {
                Some(&i) => out[i].1 = v,
                None => {
                    index.insert(k.clone(), out.len());
                    out.push((k, v));
                }
            }
        }
        self.leave();
        Ok(out)
    }

    /// A fixed-length tuple's array header: exactly `len` elements (msgspec's `tuple[A, B]` rule).
    pub(crate) fn tuple_len(&mut self, len: usize) -> R<()> {
        let n = self.array("array")?;
        if n != len {
            return Err(self.err(K::ArrayLength { expected: len, got: n }));
        }
        Ok(())
    }

    /// A struct key that is not a whole str: only the opcode is classified before a mismatch is reported
    /// (msgspec names nil `null` here); a str opcode that does not fit is truncated input.
    #[cold]
    fn struct_key_slow(&mut self) -> R<&'a [u8]> {
        let op = self.r.peek_op().map_err(Self::raw)?;
        if let Some(k) = path::struct_key_mismatch(Kind::of_opcode(op)) {
            return Err(self.key_err(k));
        }
        match self.obj()? {
            Obj::Str(b) => Ok(b),
            _ => unreachable!("a str opcode reads as a str"),
        }
    }

    /// An int enum value: one of `members`, or with [`Strictness::OpenStatus`] any value that fits an `i64`.
    #[inline]
    pub(crate) fn enum_member<E: EnumMember>(&mut self, members: &[E], strictness: Strictness) -> R<E> {
        let s = self.int()?;
        match s.as_i64().map(E::from_wire) {
            Some(e) if strictness == Strictness::OpenStatus || members.contains(&e) => Ok(e),
            _ => Err(self.err(K::InvalidEnum(s))),
        }
    }

    /// A `dict[str, V]` (`req_blocks`): the last duplicate wins, the first position stays, as a Python dict.
    /// Keys are borrowed from the input; past a small batch (where a linear scan is cheaper than hashing) their
    /// positions are found by hashing, so many keys cost linear time.
    pub(crate) fn str_dict<S: WireStr<'a>, V>(&mut self, mut value: impl FnMut(&mut Self) -> R<V>) -> R<Vec<(S, V)>> {
        let n = match self.obj()? {
            Obj::Map(n) => n,
            o => return Err(self.expected("object", o.kind())),
        };
        self.enter()?;
        let mut out: Vec<(S, V)> = Vec::with_capacity(self.cap(n / 2));
        let mut keys: Vec<&'a str> = Vec::with_capacity(out.capacity());
        let mut index: HashMap<&'a str, usize> = HashMap::new();
        for _ in 0..n {
            let key: &'a str = match self.r.try_str() {
                Some(b) => Self::utf8_ref(b)?,
                None => match self.obj()? {
                    Obj::Str(b) => Self::utf8_ref(b)?,
                    o => return Err(self.key_err(K::Expected { expected: "str".into(), got: o.kind().msgspec_name() })),
                },
            };
            let v = self.with(Seg::DictValue, &mut value)?;
            const SCAN: usize = 16;
            let existing =
                if keys.len() < SCAN { keys.iter().position(|k| *k == key) } else { index.get(key).copied() };
            match existing {
                Some(i) => out[i].1 = v,
                None => {
                    if keys.len() + 1 >= SCAN {
                        if index.is_empty() {
                            index.extend(keys.iter().enumerate().map(|(i, k)| (*k, i)));
                        }
                        index.insert(key, keys.len());
                    }
                    keys.push(key);
                    out.push((S::from_wire(key), v));
                }
            }
        }
        self.leave();
        Ok(out)
    }

    #[cold]
    pub(crate) fn missing(&self, name: &str) -> DecodeError {
        self.err(K::MissingField(name.to_string()))
    }

    /// A bool.
    pub(crate) fn bool(&mut self) -> R<bool> {
        match self.obj()? {
            Obj::Bool(b) => Ok(b),
            o => Err(self.expected("bool", o.kind())),
        }
    }

    /// An untyped value (`any`).
    pub(crate) fn any(&mut self) -> R<Untyped> {
        let o = self.obj()?;
        Untyped::decode_from(self, o)
    }

    /// A `list[T]` (or `tuple[T, ...]`) of any element type: `elem` reads one element under `[i]`.
    pub(crate) fn list_of<T>(&mut self, elem: impl FnMut(&mut Self) -> R<T>) -> R<Vec<T>> {
        let n = self.array("array")?;
        self.list(n, elem)
    }

    /// Element `i` of a tuple, read by `f` under `[i]`.
    #[inline]
    pub(crate) fn item<T>(&mut self, i: usize, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.with(Seg::Index(i), f)
    }

    /// A fixed-length tuple type (`tuple[A, B]`): exactly `len` elements, read by `f` (with [`De::item`]).
    pub(crate) fn tuple<T>(&mut self, len: usize, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.tuple_len(len)?;
        self.enter()?;
        let v = f(self)?;
        self.leave();
        Ok(v)
    }

    /// The array header of a tuple message (a struct encoded as an array of exactly `len` elements), entered:
    /// the caller reads the elements with [`De::item`] and then calls [`De::leave`]. As the spec codec reads an
    /// array-like struct: the depth is counted before the length is checked.
    pub(crate) fn tuple_struct(&mut self, len: usize) -> R<()> {
        let n = self.array("array")?;
        self.enter()?;
        if n != len {
            return Err(self.err(K::ArrayLength { expected: len, got: n }));
        }
        Ok(())
    }

    /// A `bytes` element that must equal `want` (a tuple's tag): msgspec's type check first, then the
    /// receiver's comparison, reported as the spec codec reports a constant mismatch (Python's repr).
    pub(crate) fn const_bytes(&mut self, want: &[u8]) -> R<()> {
        let b = match self.obj()? {
            Obj::Bin(b) => b,
            o => return Err(self.expected("bytes", o.kind())),
        };
        if b != want {
            return Err(self.err(K::InvalidTag(crate::codec::py_bytes_repr(b))));
        }
        Ok(())
    }

    /// A `dict[int, V]`: keys are ints (else msgspec's error at `key`), values read by `value` under `[...]`.
    pub(crate) fn int_dict<V>(&mut self, value: impl FnMut(&mut Self) -> R<V>) -> R<Vec<(WireInt, V)>> {
        self.dict(
            |d, o| match o {
                Obj::Int(i) => Ok(i),
                o => Err(d.key_err(K::Expected { expected: "int".into(), got: o.kind().msgspec_name() })),
            },
            value,
        )
    }
}

/// Element 0 of `bytes` when they start with a non-empty array whose first element is a bin.
pub(crate) fn first_bin_in_array(bytes: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(bytes);
    match (r.read_obj().ok()?, r.read_obj().ok()?) {
        (Obj::Array(n), Obj::Bin(b)) if n > 0 => Some(b),
        _ => None,
    }
}
