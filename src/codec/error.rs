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

/// Why a type cannot be compiled against a revision's names: a message whose spec does not hold together
/// (reported as a `SpecError` when a codec is built), or a type expression given to [`Codec::type_of`].
///
/// [`Codec::type_of`]: super::Codec::type_of
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// A type expression that does not parse.
    #[error(transparent)]
    Parse(#[from] crate::spec::TypeParseError),
    /// A name that is no struct, enum or alias of the revision (or of the scope compiled).
    #[error("unknown type `{0}`")]
    UnknownType(String),
    /// An alias whose definition comes back to itself.
    #[error("alias `{0}` refers to itself")]
    SelfAlias(String),
    /// A struct `rename` mode msgspec does not have.
    #[error("unsupported rename mode `{0}`")]
    RenameMode(String),
    /// A default that is not a literal the spec supports.
    #[error(transparent)]
    Literal(#[from] crate::spec::LiteralError),
    /// An int literal outside the MessagePack range.
    #[error(transparent)]
    IntRange(#[from] crate::msgpack::IntRangeError),
    /// An int literal that is no member of the field's enum.
    #[error("{0} is not a member")]
    NotAMember(i128),
    /// A literal of another kind than the field's type (rendered as the spec writes it).
    #[error("default `{0}` does not fit the field's type")]
    DoesNotFit(String),
    /// A field of a tuple message with a default (tuple messages have none).
    #[error("{owner}.{field}: a tuple message has no defaults")]
    TupleDefault {
        /// The message.
        owner: String,
        /// The field.
        field: String,
    },
    /// A `tag` option on something other than a msgspec struct.
    #[error("{0}: only msgspec structs can be tagged")]
    TagNotMsgspec(String),
    /// The error is about the default of this field.
    #[error("{owner}.{field}: {source}")]
    Default {
        /// The struct.
        owner: String,
        /// The field.
        field: String,
        /// What is wrong with its default.
        source: Box<CompileError>,
    },
    /// The error is about the `const` value of this field.
    #[error("{owner}.{field}: const: {source}")]
    Const {
        /// The struct.
        owner: String,
        /// The field.
        field: String,
        /// What is wrong with its constant.
        source: Box<CompileError>,
    },
}

/// Why JSON (`msgspec.to_builtins` output) is not a value of the type asked for ([`Codec::from_json`]). Every
/// variant but [`FromJsonError::NoMessage`] names the JSON path it happened at (`$.field[0]`), and its text
/// starts with it.
///
/// [`Codec::from_json`]: super::Codec::from_json
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FromJsonError {
    /// The codec's revision has no message of that name.
    #[error("no message {0}")]
    NoMessage(String),
    /// JSON of another kind than the type takes.
    #[error("{path}: expected {expected}, found {found}")]
    Expected {
        /// JSON path.
        path: String,
        /// What the type takes (`an integer`, `an array of 2 elements`, or the type's name).
        expected: String,
        /// The JSON found, rendered.
        found: String,
    },
    /// A `bytes` value whose string is not base64.
    #[error("{path}: bad base64")]
    BadBase64 {
        /// JSON path.
        path: String,
    },
    /// An enum value given as a number that is not an `i64`.
    #[error("{path}: bad enum value {value}")]
    BadEnumValue {
        /// JSON path.
        path: String,
        /// The number, rendered.
        value: String,
    },
    /// An enum value given as a number that is no member of the enum.
    #[error("{path}: {value} is not a member")]
    NotAMember {
        /// JSON path.
        path: String,
        /// The number, rendered.
        value: String,
    },
    /// An enum value given by a name that is no member of the enum.
    #[error("{path}: no member {name}")]
    NoMember {
        /// JSON path.
        path: String,
        /// The name given.
        name: String,
    },
    /// A dict key that does not read as JSON of the key type.
    #[error("{path}: bad key {key:?}")]
    BadKey {
        /// JSON path of the dict.
        path: String,
        /// The key.
        key: String,
    },
    /// An object key the struct does not define.
    #[error("{path}: {owner} has no field `{field}`")]
    UnknownField {
        /// JSON path of the struct.
        path: String,
        /// The struct.
        owner: String,
        /// The key.
        field: String,
    },
    /// A field without a default that the object leaves out.
    #[error("{path}: missing required field `{field}`")]
    MissingField {
        /// JSON path of the struct.
        path: String,
        /// The field.
        field: String,
    },
}
