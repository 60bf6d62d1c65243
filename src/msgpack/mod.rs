//! MessagePack at the byte level: a bounds-checked cursor that reads one object head at a time, and a writer
//! that picks the encodings msgspec picks. Nothing here knows about structs or the spec.

mod int;
mod reader;
mod writer;

pub use int::{IntRangeError, WireInt};
pub use reader::{Obj, RawError, Reader};
pub(crate) use writer::Key;
pub use writer::Writer;

/// The kind of a MessagePack object, named as msgspec names it in its error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `nil` (`0xc0`).
    Nil,
    /// `true` / `false` (`0xc3` / `0xc2`).
    Bool,
    /// Any integer: fixints, `uint8`..`uint64`, `int8`..`int64`.
    Int,
    /// `float32` or `float64`.
    Float,
    /// A string (fixstr, `str8`..`str32`).
    Str,
    /// A binary (`bin8`..`bin32`).
    Bin,
    /// An array (fixarray, `array16`, `array32`).
    Array,
    /// A map (fixmap, `map16`, `map32`).
    Map,
    /// An extension (fixext, `ext8`..`ext32`).
    Ext,
    /// The reserved opcode `0xc1`.
    Reserved,
}

impl Kind {
    /// Classifies an opcode without reading anything after it.
    pub(crate) fn of_opcode(op: u8) -> Kind {
        match op {
            0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xd3 => Kind::Int,
            0x80..=0x8f | 0xde | 0xdf => Kind::Map,
            0x90..=0x9f | 0xdc | 0xdd => Kind::Array,
            0xa0..=0xbf | 0xd9..=0xdb => Kind::Str,
            0xc0 => Kind::Nil,
            0xc1 => Kind::Reserved,
            0xc2 | 0xc3 => Kind::Bool,
            0xc4..=0xc6 => Kind::Bin,
            0xc7..=0xc9 | 0xd4..=0xd8 => Kind::Ext,
            0xca | 0xcb => Kind::Float,
        }
    }

    /// msgspec's name for a value of this kind (`None` for nil in value position).
    pub(crate) fn msgspec_name(self) -> &'static str {
        match self {
            Kind::Nil => "None",
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Str => "str",
            Kind::Bin => "bytes",
            Kind::Array => "array",
            Kind::Map => "object",
            Kind::Ext => "ext",
            Kind::Reserved => "unknown",
        }
    }
}
