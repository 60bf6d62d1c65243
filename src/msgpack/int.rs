//! The integer domain of msgspec's MessagePack: a Python int in [-2^63, 2^64-1].

use std::fmt;

/// An integer as it travels: any value MessagePack can carry, from `i64::MIN` to `u64::MAX`.
///
/// Python's `int` annotation accepts this whole range, so every `int` field of the spec decodes into a
/// `WireInt`, never a narrower Rust type.
///
/// Held in 9 bytes (the 64-bit pattern and a sign flag, packed) rather than an `i128` (16 bytes, 16-aligned):
/// a production pull carries some 65,000 block ids, so this is most of a decoded message's memory.
/// The representation is canonical (`neg` exactly when the value is negative), so equality and hashing of
/// the fields are equality and hashing of the value; order is by value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C, packed)]
pub struct WireInt {
    /// The value's low 64 bits: the value itself when non-negative, its two's complement `i64` otherwise.
    bits: u64,
    neg: bool,
}

impl PartialOrd for WireInt {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for WireInt {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.get().cmp(&other.get())
    }
}

/// A value outside [-2^63, 2^64-1].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntRangeError(pub i128);

impl fmt::Display for IntRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "integer {} is outside the MessagePack range [-2^63, 2^64-1]", self.0)
    }
}
impl std::error::Error for IntRangeError {}

impl WireInt {
    /// The smallest wire integer, `-2^63` (`int64`, opcode `0xd3`).
    pub const MIN: WireInt = WireInt::from_i64(i64::MIN);
    /// The largest wire integer, `2^64-1` (`uint64`, opcode `0xcf`).
    pub const MAX: WireInt = WireInt::from_u64(u64::MAX);
    /// Zero.
    pub const ZERO: WireInt = WireInt::from_u64(0);

    /// A non-negative value.
    #[inline(always)]
    pub const fn from_u64(v: u64) -> Self {
        WireInt { bits: v, neg: false }
    }
    /// A signed 64-bit value.
    #[inline(always)]
    pub const fn from_i64(v: i64) -> Self {
        WireInt { bits: v as u64, neg: v < 0 }
    }
    /// Any value in `[-2^63, 2^64-1]`; outside it, the value itself as the error.
    pub fn new(v: i128) -> Result<Self, IntRangeError> {
        if v < i64::MIN as i128 || v > u64::MAX as i128 {
            Err(IntRangeError(v))
        } else if v < 0 {
            Ok(WireInt::from_i64(v as i64))
        } else {
            Ok(WireInt::from_u64(v as u64))
        }
    }
    /// The value, widened to `i128` (which holds the whole range).
    #[inline]
    pub const fn get(self) -> i128 {
        if self.neg {
            self.bits as i64 as i128
        } else {
            self.bits as i128
        }
    }
    /// The value as `u64`, `None` when negative.
    #[inline]
    pub fn as_u64(self) -> Option<u64> {
        if self.neg {
            None
        } else {
            Some(self.bits)
        }
    }
    /// The value as `i64`, `None` above `i64::MAX`.
    #[inline]
    pub fn as_i64(self) -> Option<i64> {
        let b = self.bits;
        if self.neg || b <= i64::MAX as u64 {
            Some(b as i64)
        } else {
            None
        }
    }
    /// The value as `usize` (a length or an index), `None` when negative or too large for this platform.
    pub fn as_usize(self) -> Option<usize> {
        usize::try_from(self.get()).ok()
    }
    /// Whether the value is below zero.
    pub const fn is_negative(self) -> bool {
        self.neg
    }
    /// The stored form: the low 64 bits and the sign (for the writer's bulk paths).
    #[inline(always)]
    pub(crate) const fn raw(self) -> (u64, bool) {
        (self.bits, self.neg)
    }
}

impl From<u64> for WireInt {
    fn from(v: u64) -> Self {
        WireInt::from_u64(v)
    }
}
impl From<i64> for WireInt {
    fn from(v: i64) -> Self {
        WireInt::from_i64(v)
    }
}
impl From<u32> for WireInt {
    fn from(v: u32) -> Self {
        WireInt::from_u64(v as u64)
    }
}
impl From<i32> for WireInt {
    fn from(v: i32) -> Self {
        WireInt::from_i64(v as i64)
    }
}
impl From<usize> for WireInt {
    fn from(v: usize) -> Self {
        WireInt::from_u64(v as u64)
    }
}
impl TryFrom<i128> for WireInt {
    type Error = IntRangeError;
    fn try_from(v: i128) -> Result<Self, IntRangeError> {
        WireInt::new(v)
    }
}

impl fmt::Debug for WireInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.get(), f)
    }
}
impl fmt::Display for WireInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.get(), f)
    }
}
impl fmt::LowerHex for WireInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.get(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn representation_is_canonical_and_ordered_by_value() {
        let vals: [i128; 9] =
            [i64::MIN as i128, -(1 << 32), -1, 0, 1, i64::MAX as i128, i64::MAX as i128 + 1, 1 << 63, u64::MAX as i128];
        for (i, &a) in vals.iter().enumerate() {
            let w = WireInt::new(a).unwrap();
            assert_eq!(w.get(), a);
            assert_eq!(w.is_negative(), a < 0);
            assert_eq!(w.as_u64(), u64::try_from(a).ok());
            assert_eq!(w.as_i64(), i64::try_from(a).ok());
            for &b in &vals[i..] {
                let v = WireInt::new(b).unwrap();
                assert_eq!(w.cmp(&v), a.cmp(&b), "{a} vs {b}");
                assert_eq!(w == v, a == b);
            }
        }
        assert_eq!(WireInt::from_i64(5), WireInt::from_u64(5));
        assert_eq!(WireInt::from(-1i32), WireInt::new(-1).unwrap());
        assert_eq!(WireInt::new(u64::MAX as i128 + 1), Err(IntRangeError(u64::MAX as i128 + 1)));
        assert_eq!(WireInt::new(i64::MIN as i128 - 1), Err(IntRangeError(i64::MIN as i128 - 1)));
        assert_eq!(std::mem::size_of::<WireInt>(), 9);
        assert_eq!(
            format!("{} {:?} {:x}", WireInt::MIN, WireInt::MAX, WireInt::from_u64(255)),
            "-9223372036854775808 18446744073709551615 ff"
        );
    }
}
