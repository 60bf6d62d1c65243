//! Decode and encode errors. [`DecodeError`]'s `Display` is msgspec's own message, word for word, so logs and
//! `err_msg` texts line up with vLLM's; the revision and message it happened in ride along for reports.

use std::fmt;

use crate::limits;
use crate::msgpack::WireInt;

#[derive(Clone, Debug, PartialEq)]
/// What went wrong while decoding, with msgspec's meaning.
pub enum DecodeErrorKind {
    /// The input ended inside a value.
    Truncated,
    /// A complete value was followed by more bytes, starting at this offset.
    Trailing {
        /// Where the extra bytes start.
        offset: usize,
    },
    /// The reserved opcode `0xc1`.
    InvalidOpcode {
        /// The opcode byte.
        op: u8,
        /// Its offset in the input.
        offset: usize,
    },
    /// Nesting deeper than [`limits::MAX_DEPTH`] (msgspec: Python's recursion limit).
    TooDeep,
    /// A `str` that is not valid UTF-8.
    InvalidUtf8,
    /// The frame is larger than [`limits::MAX_FRAME_BYTES`] (a limit of ours; msgspec has none).
    FrameTooLarge {
        /// The frame's length in bytes.
        len: usize,
    },
    /// A value of the wrong kind: `expected` is msgspec's type name (`int`, `array | null`, ...).
    Expected {
        /// msgspec's name of the type expected.
        expected: String,
        /// The MessagePack kind found.
        got: &'static str,
    },
    /// A tuple of the wrong arity.
    ArrayLength {
        /// Elements the tuple takes.
        expected: usize,
        /// Elements found.
        got: usize,
    },
    /// An `array_like` struct with too few elements.
    ArrayMinLength {
        /// Elements the struct needs at least.
        min: usize,
        /// Elements found.
        got: usize,
    },
    /// An `array_like` struct with `forbid_unknown_fields` and too many elements.
    ArrayMaxLength {
        /// Elements the struct takes at most.
        max: usize,
        /// Elements found.
        got: usize,
    },
    /// A required field is absent (its wire name).
    MissingField(String),
    /// A field the struct does not define, with `forbid_unknown_fields` (its name).
    UnknownField(String),
    /// An int that is no member of the enum.
    InvalidEnum(WireInt),
    /// A tag value that is not this struct's tag, rendered as Python's repr.
    InvalidTag(String),
}

#[derive(Clone, Debug, PartialEq)]
/// A decode failure: its kind, where in the value it happened, and (when known) the revision and message.
pub struct DecodeError {
    /// What went wrong.
    pub kind: DecodeErrorKind,
    /// msgspec path: `$`, `.field`, `[i]`, `[...]` for dict values. Empty for byte-level errors.
    pub path: String,
    /// The error is about a map key at `path` (msgspec: `` `key` in `$...` ``).
    pub in_key: bool,
    /// Revision and message being decoded, when known.
    pub revision: Option<String>,
    /// The message being decoded, when known.
    pub message: Option<String>,
}

impl DecodeError {
    pub(crate) fn new(kind: DecodeErrorKind) -> Self {
        DecodeError { kind, path: String::new(), in_key: false, revision: None, message: None }
    }

    /// The text msgspec 0.23.0 raises for the same input.
    pub fn msgspec_message(&self) -> String {
        use DecodeErrorKind::*;
        let body = match &self.kind {
            Truncated => return "Input data was truncated".into(),
            Trailing { offset } => {
                return format!("MessagePack data is malformed: trailing characters (byte {offset})")
            }
            InvalidOpcode { op, offset } => {
                return format!("MessagePack data is malformed: invalid opcode '\\x{op:02x}' (byte {offset})")
            }
            TooDeep => return "maximum recursion depth exceeded while deserializing an object".into(),
            InvalidUtf8 => return "Invalid UTF-8 encoded string".into(),
            FrameTooLarge { len } => {
                return format!(
                    "frame of {len} bytes exceeds the limit of {} bytes (limits::MAX_FRAME_BYTES)",
                    limits::MAX_FRAME_BYTES
                )
            }
            Expected { expected, got } => format!("Expected `{expected}`, got `{got}`"),
            ArrayLength { expected, got } => format!("Expected `array` of length {expected}, got {got}"),
            ArrayMinLength { min, got } => format!("Expected `array` of at least length {min}, got {got}"),
            ArrayMaxLength { max, got } => format!("Expected `array` of at most length {max}, got {got}"),
            MissingField(f) => format!("Object missing required field `{f}`"),
            UnknownField(f) => format!("Object contains unknown field `{f}`"),
            InvalidEnum(v) => format!("Invalid enum value {v}"),
            InvalidTag(repr) => format!("Invalid value {repr}"),
        };
        if self.in_key {
            format!("{body} - at `key` in `{}`", self.path)
        } else if self.path.is_empty() || self.path == "$" {
            body
        } else {
            format!("{body} - at `{}`", self.path)
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.revision, &self.message) {
            (Some(r), Some(m)) => write!(f, "{r} {m}: ")?,
            (None, Some(m)) => write!(f, "{m}: ")?,
            _ => {}
        }
        f.write_str(&self.msgspec_message())
    }
}
impl std::error::Error for DecodeError {}

/// A value that does not fit the spec type it is encoded as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodeError {
    /// msgspec path of the value that does not fit (`$.field[0]`).
    pub path: String,
    /// What is wrong with it.
    pub msg: String,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} - at `{}`", self.msg, self.path)
    }
}
impl std::error::Error for EncodeError {}
