//! The integer domain of msgspec's MessagePack: a Python int in [-2^63, 2^64-1].

use std::fmt;

/// An integer as it travels: any value MessagePack can carry, from `i64::MIN` to `u64::MAX`.
///
/// Python's `int` annotation accepts this whole range, so every `int` field of the spec decodes into a
/// `WireInt`, never a narrower Rust type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct WireInt(i128);

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
    pub const MIN: WireInt = WireInt(i64::MIN as i128);
    pub const MAX: WireInt = WireInt(u64::MAX as i128);
    pub const ZERO: WireInt = WireInt(0);

    pub const fn from_u64(v: u64) -> Self {
        WireInt(v as i128)
    }
    pub const fn from_i64(v: i64) -> Self {
        WireInt(v as i128)
    }
    pub fn new(v: i128) -> Result<Self, IntRangeError> {
        if v < i64::MIN as i128 || v > u64::MAX as i128 {
            Err(IntRangeError(v))
        } else {
            Ok(WireInt(v))
        }
    }
    pub const fn get(self) -> i128 {
        self.0
    }
    pub fn as_u64(self) -> Option<u64> {
        u64::try_from(self.0).ok()
    }
    pub fn as_i64(self) -> Option<i64> {
        i64::try_from(self.0).ok()
    }
    pub fn as_usize(self) -> Option<usize> {
        usize::try_from(self.0).ok()
    }
    pub const fn is_negative(self) -> bool {
        self.0 < 0
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
        WireInt(v as i128)
    }
}
impl From<i32> for WireInt {
    fn from(v: i32) -> Self {
        WireInt(v as i128)
    }
}
impl From<usize> for WireInt {
    fn from(v: usize) -> Self {
        WireInt(v as i128)
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
        fmt::Display::fmt(&self.0, f)
    }
}
impl fmt::Display for WireInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
impl fmt::LowerHex for WireInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}
