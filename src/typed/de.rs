//! A small toolkit for hand-written typed decoders that follow exactly the rules of the spec-driven decoder
//! (same acceptance, same error texts and paths); the contract test in `tests/typed_contract.rs` checks that
//! they do.

use std::collections::HashMap;
use std::hash::Hash;

use crate::codec::{DecodeError, DecodeErrorKind as K};
use crate::limits;
use crate::msgpack::{Kind, Obj, RawError, Reader, WireInt};

#[derive(Clone, Copy)]
pub(crate) enum Seg {
    Field(&'static str),
    Index(usize),
    DictValue,
}

pub(crate) struct De<'a> {
    pub r: Reader<'a>,
    depth: usize,
    path: Vec<Seg>,
}

pub(crate) type R<T> = Result<T, DecodeError>;

impl<'a> De<'a> {
    pub fn new(bytes: &'a [u8]) -> R<Self> {
        if bytes.len() > limits::MAX_FRAME_BYTES {
            return Err(DecodeError::new(K::FrameTooLarge { len: bytes.len() }));
        }
        Ok(De { r: Reader::new(bytes), depth: 0, path: Vec::with_capacity(8) })
    }

    pub fn finish(self) -> R<()> {
        if self.r.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::new(K::Trailing { offset: self.r.pos() }))
        }
    }

    #[cold]
    fn path_string(&self) -> String {
        let mut s = String::from("$");
        for seg in &self.path {
            match seg {
                Seg::Field(f) => {
                    s.push('.');
                    s.push_str(f);
                }
                Seg::Index(i) => {
                    s.push('[');
                    s.push_str(&i.to_string());
                    s.push(']');
                }
                Seg::DictValue => s.push_str("[...]"),
            }
        }
        s
    }

    #[cold]
    pub fn err(&self, kind: K) -> DecodeError {
        let mut e = DecodeError::new(kind);
        e.path = self.path_string();
        e
    }
    #[cold]
    pub fn key_err(&self, kind: K) -> DecodeError {
        let mut e = self.err(kind);
        e.in_key = true;
        e
    }
    #[cold]
    pub fn raw(e: RawError) -> DecodeError {
        DecodeError::new(match e {
            RawError::Truncated => K::Truncated,
            RawError::InvalidOpcode { op, offset } => K::InvalidOpcode { op, offset },
            RawError::TooDeep => K::TooDeep,
        })
    }
    #[cold]
    pub fn expected(&self, expected: &str, got: Kind) -> DecodeError {
        self.err(K::Expected { expected: expected.to_string(), got: got.msgspec_name() })
    }

    #[inline]
    pub fn obj(&mut self) -> R<Obj<'a>> {
        self.r.read_obj().map_err(Self::raw)
    }

    #[inline]
    pub fn with<T>(&mut self, seg: Seg, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.path.push(seg);
        let v = f(self)?;
        self.path.pop();
        Ok(v)
    }

    pub fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > limits::MAX_DEPTH {
            return Err(Self::raw(RawError::TooDeep));
        }
        Ok(())
    }
    pub fn leave(&mut self) {
        self.depth -= 1;
    }

    #[inline]
    pub fn int(&mut self) -> R<WireInt> {
        match self.obj()? {
            Obj::Int(i) => Ok(i),
            o => Err(self.expected("int", o.kind())),
        }
    }

    #[inline]
    pub fn utf8(b: &[u8]) -> R<String> {
        std::str::from_utf8(b).map(str::to_owned).map_err(|_| DecodeError::new(K::InvalidUtf8))
    }

    #[inline]
    pub fn str(&mut self) -> R<String> {
        match self.obj()? {
            Obj::Str(b) => Self::utf8(b),
            o => Err(self.expected("str", o.kind())),
        }
    }

    pub fn opt_str(&mut self) -> R<Option<String>> {
        match self.obj()? {
            Obj::Nil => Ok(None),
            Obj::Str(b) => Self::utf8(b).map(Some),
            o => Err(self.expected("str | null", o.kind())),
        }
    }

    /// Array header of a list (`expected` names the type in a mismatch: `array` or `array | null`).
    #[inline]
    pub fn array(&mut self, expected: &str) -> R<usize> {
        match self.obj()? {
            Obj::Array(n) => Ok(n),
            o => Err(self.expected(expected, o.kind())),
        }
    }

    /// Preallocation that never exceeds what the remaining input could hold.
    #[inline]
    pub fn cap(&self, n: usize) -> usize {
        n.min(self.r.remaining()).min(limits::MAX_PREALLOC_ELEMENTS)
    }

    pub fn list<T>(&mut self, n: usize, mut elem: impl FnMut(&mut Self) -> R<T>) -> R<Vec<T>> {
        self.enter()?;
        let mut out = Vec::with_capacity(self.cap(n));
        for i in 0..n {
            out.push(self.with(Seg::Index(i), &mut elem)?);
        }
        self.leave();
        Ok(out)
    }

    pub fn list_int(&mut self) -> R<Vec<WireInt>> {
        let n = self.array("array")?;
        self.list(n, |d| d.int())
    }

    pub fn list_str(&mut self) -> R<Vec<String>> {
        let n = self.array("array")?;
        self.list(n, |d| d.str())
    }

    pub fn opt_list_str(&mut self) -> R<Option<Vec<String>>> {
        match self.obj()? {
            Obj::Nil => Ok(None),
            Obj::Array(n) => self.list(n, |d| d.str()).map(Some),
            o => Err(self.expected("array | null", o.kind())),
        }
    }

    pub fn list_list_int(&mut self) -> R<Vec<Vec<WireInt>>> {
        let n = self.array("array")?;
        self.list(n, |d| d.list_int())
    }

    /// A struct encoded as a map: calls `field(index)` for each known key (last duplicate wins because the
    /// callback overwrites), skips unknown keys, then returns. `names` are the wire names in order.
    pub fn struct_map(&mut self, names: &[&'static str], mut field: impl FnMut(&mut Self, usize) -> R<()>) -> R<()> {
        let n = match self.obj()? {
            Obj::Map(n) => n,
            o => return Err(self.expected("object", o.kind())),
        };
        self.enter()?;
        for _ in 0..n {
            let op = self.r.peek_op().map_err(Self::raw)?;
            let kind = Kind::of_opcode(op);
            if kind != Kind::Str {
                let got = if kind == Kind::Nil { "null" } else { kind.msgspec_name() };
                return Err(self.key_err(K::Expected { expected: "str".into(), got }));
            }
            let key = match self.obj()? {
                Obj::Str(b) => b,
                _ => unreachable!("a str opcode reads as a str"),
            };
            match names.iter().position(|n| n.as_bytes() == key) {
                Some(i) => self.with(Seg::Field(names[i]), |d| field(d, i))?,
                None => self.r.skip_value(self.depth, limits::MAX_DEPTH).map_err(Self::raw)?,
            }
        }
        self.leave();
        Ok(())
    }

    #[inline]
    pub fn bytes(&mut self) -> R<Vec<u8>> {
        match self.obj()? {
            Obj::Bin(b) => Ok(b.to_vec()),
            o => Err(self.expected("bytes", o.kind())),
        }
    }

    /// A dict: `key` reads one key from its object head, `value` one value under `[...]`. As a Python dict
    /// (and the spec codec): the last duplicate wins, the first position stays; keys are found by hashing,
    /// so many keys cost linear time.
    pub fn dict<K: Eq + Hash + Clone, V>(
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
    pub fn tuple_len(&mut self, len: usize) -> R<()> {
        let n = self.array("array")?;
        if n != len {
            return Err(self.err(K::ArrayLength { expected: len, got: n }));
        }
        Ok(())
    }

    #[cold]
    pub fn missing(&self, name: &str) -> DecodeError {
        self.err(K::MissingField(name.to_string()))
    }
}
