//! A bounds-checked MessagePack cursor. It never reads past the end of its slice, never panics, and never
//! allocates: strings and binaries are returned as borrowed slices, containers as their declared length.

use super::{Kind, WireInt};

/// One object head. Scalars are read whole (a string's bytes, an int's payload), containers only up to their
/// length, as msgspec does before it checks the type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Obj<'a> {
    Nil,
    Bool(bool),
    Int(WireInt),
    Float(f64),
    /// Raw string bytes, UTF-8 not yet checked.
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Array(usize),
    Map(usize),
    Ext(i8, &'a [u8]),
}

impl Obj<'_> {
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
    InvalidOpcode { op: u8, offset: usize },
    /// Containers nested deeper than allowed.
    TooDeep,
}

#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    /// Offset of the next unread byte.
    pub fn pos(&self) -> usize {
        self.pos
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The next opcode, not consumed.
    #[inline]
    pub fn peek_op(&self) -> Result<u8, RawError> {
        self.buf.get(self.pos).copied().ok_or(RawError::Truncated)
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, RawError> {
        let b = self.peek_op()?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], RawError> {
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
            0xc7 | 0xc8 | 0xc9 => {
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

    /// Skips one whole value. `depth` is the number of containers already open around it; the value may open
    /// containers up to a total of `max_depth`. Iterative: the Rust stack does not grow with the input.
    pub fn skip_value(&mut self, depth: usize, max_depth: usize) -> Result<(), RawError> {
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
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
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
