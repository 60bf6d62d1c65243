//! Decode and encode errors. [`DecodeError`]'s `Display` is msgspec's own message, word for word, so logs and
//! `err_msg` texts line up with vLLM's; the revision and message it happened in ride along for reports.

use std::fmt;

use crate::limits;
use crate::msgpack::WireInt;

#[derive(Clone, Debug, PartialEq)]
pub enum DecodeErrorKind {
    /// The input ended inside a value.
    Truncated,
    /// A complete value was followed by more bytes, starting at this offset.
    Trailing {
        offset: usize,
    },
    /// The reserved opcode `0xc1`.
    InvalidOpcode {
        op: u8,
        offset: usize,
    },
    /// Nesting deeper than [`limits::MAX_DEPTH`] (msgspec: Python's recursion limit).
    TooDeep,
    InvalidUtf8,
    /// The frame is larger than [`limits::MAX_FRAME_BYTES`] (a limit of ours; msgspec has none).
    FrameTooLarge {
        len: usize,
    },
    /// A value of the wrong kind: `expected` is msgspec's type name (`int`, `array | null`, ...).
    Expected {
        expected: String,
        got: &'static str,
    },
    /// A tuple of the wrong arity.
    ArrayLength {
        expected: usize,
        got: usize,
    },
    /// An `array_like` struct with too few elements.
    ArrayMinLength {
        min: usize,
        got: usize,
    },
    /// An `array_like` struct with `forbid_unknown_fields` and too many elements.
    ArrayMaxLength {
        max: usize,
        got: usize,
    },
    MissingField(String),
    UnknownField(String),
    InvalidEnum(WireInt),
    /// A tag value that is not this struct's tag, rendered as Python's repr.
    InvalidTag(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct DecodeError {
    pub kind: DecodeErrorKind,
    /// msgspec path: `$`, `.field`, `[i]`, `[...]` for dict values. Empty for byte-level errors.
    pub path: String,
    /// The error is about a map key at `path` (msgspec: `` `key` in `$...` ``).
    pub in_key: bool,
    /// Revision and message being decoded, when known.
    pub revision: Option<String>,
    pub message: Option<String>,
}

impl DecodeError {
    pub fn new(kind: DecodeErrorKind) -> Self {
        DecodeError { kind, path: String::new(), in_key: false, revision: None, message: None }
    }

    /// msgspec's exception class for this error.
    pub fn msgspec_class(&self) -> &'static str {
        use DecodeErrorKind::*;
        match self.kind {
            Truncated | Trailing { .. } | InvalidOpcode { .. } | InvalidUtf8 | FrameTooLarge { .. } => "DecodeError",
            TooDeep => "RecursionError",
            _ => "ValidationError",
        }
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
    pub path: String,
    pub msg: String,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} - at `{}`", self.msg, self.path)
    }
}
impl std::error::Error for EncodeError {}
