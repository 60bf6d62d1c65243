//! Which MessagePack map keys msgspec folds into one Python dict entry. msgspec decodes a map into a `dict`,
//! so keys follow Python's equality: `1`, `True` and `1.0` are one key, `0`, `False`, `0.0` and `-0.0` are
//! one key, every NaN is a key of its own, and `b"a"` differs from `"a"`. The entry keeps the first key and
//! its position and takes the last value (msgspec 0.23.0; `tests/any_map_keys.rs` checks it against msgspec).

use crate::msgpack::Obj;

/// A key's identity under Python equality, hashable, borrowed from the input.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PyKey<'a> {
    None,
    /// Ints, bools and integral floats, by value.
    Num(i128),
    /// Other finite and infinite floats, by their bits.
    Float(u64),
    Str(&'a [u8]),
    Bytes(&'a [u8]),
}

/// What a key's head says about finding its earlier occurrence.
#[derive(Debug, PartialEq)]
pub(crate) enum Identity<'a> {
    Key(PyKey<'a>),
    /// NaN: equal to nothing, so always a new entry.
    Unique,
    /// An array, map or ext: compared by decoded value, if at all.
    Other,
}

impl<'a> Identity<'a> {
    pub(crate) fn of(obj: &Obj<'a>) -> Identity<'a> {
        Identity::Key(match *obj {
            Obj::Nil => PyKey::None,
            Obj::Bool(b) => PyKey::Num(b as i128),
            Obj::Int(i) => PyKey::Num(i.get()),
            Obj::Float(x) if x.is_nan() => return Identity::Unique,
            // Integral floats below 2^127 convert exactly (and -0.0 becomes 0).
            Obj::Float(x) if x.fract() == 0.0 && x.abs() < 1.0e38 => PyKey::Num(x as i128),
            Obj::Float(x) => PyKey::Float(x.to_bits()),
            Obj::Str(b) => PyKey::Str(b),
            Obj::Bin(b) => PyKey::Bytes(b),
            Obj::Array(_) | Obj::Map(_) | Obj::Ext(..) => return Identity::Other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgpack::WireInt;

    fn key(o: Obj<'static>) -> Identity<'static> {
        Identity::of(&o)
    }

    #[test]
    fn python_equality_of_keys() {
        let one = key(Obj::Int(WireInt::from_u64(1)));
        assert_eq!(one, key(Obj::Bool(true)));
        assert_eq!(one, key(Obj::Float(1.0)));
        assert_eq!(key(Obj::Int(WireInt::from_u64(0))), key(Obj::Float(-0.0)));
        assert_eq!(key(Obj::Int(WireInt::from_i64(-5))), key(Obj::Float(-5.0)));
        // 2^64-1 has no float: 2.0**64 is another number (Python: `2**64-1 == 2.0**64` is False).
        assert_ne!(key(Obj::Int(WireInt::MAX)), key(Obj::Float(18446744073709551616.0)));
        assert_eq!(key(Obj::Float(18446744073709551616.0)), Identity::Key(PyKey::Num(1i128 << 64)));
        assert_ne!(one, key(Obj::Float(1.5)));
        assert_eq!(key(Obj::Float(f64::NAN)), Identity::Unique);
        assert_eq!(key(Obj::Float(f64::INFINITY)), Identity::Key(PyKey::Float(f64::INFINITY.to_bits())));
        assert_ne!(key(Obj::Str(b"a")), key(Obj::Bin(b"a")));
        assert_eq!(key(Obj::Array(0)), Identity::Other);
    }
}
