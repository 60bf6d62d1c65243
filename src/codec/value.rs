//! The value tree the spec-driven codec decodes into and encodes from.

use std::fmt;
use std::sync::Arc;

use crate::msgpack::WireInt;

/// A decoded value, shaped by the spec type it was decoded as.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(WireInt),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// Entries in insertion order (a Python dict's order); keys are unique.
    Dict(Vec<(Value, Value)>),
    Enum(EnumValue),
    Struct(StructValue),
}

/// A member of an enum: its name (from the spec) and its wire value.
#[derive(Clone, Debug, PartialEq)]
pub struct EnumValue {
    pub name: Arc<str>,
    pub value: i64,
}

/// Names shared by every value of one struct.
#[derive(Debug, PartialEq, Eq)]
pub struct StructMeta {
    pub name: String,
    pub field_names: Vec<String>,
}

/// A struct value: every declared field, in declaration order, defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct StructValue {
    pub meta: Arc<StructMeta>,
    pub fields: Vec<Value>,
}

impl StructValue {
    pub fn name(&self) -> &str {
        &self.meta.name
    }
    pub fn get(&self, field: &str) -> Option<&Value> {
        let i = self.meta.field_names.iter().position(|n| n == field)?;
        self.fields.get(i)
    }
    pub fn get_mut(&mut self, field: &str) -> Option<&mut Value> {
        let i = self.meta.field_names.iter().position(|n| n == field)?;
        self.fields.get_mut(i)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.meta.field_names.iter().map(String::as_str).zip(self.fields.iter())
    }
}

impl Value {
    pub fn as_int(&self) -> Option<WireInt> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Enum(e) => Some(WireInt::from_i64(e.value)),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// Elements of a list or tuple.
    pub fn as_seq(&self) -> Option<&[Value]> {
        match self {
            Value::List(v) | Value::Tuple(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_struct(&self) -> Option<&StructValue> {
        match self {
            Value::Struct(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_dict(&self) -> Option<&[(Value, Value)]> {
        match self {
            Value::Dict(d) => Some(d),
            _ => None,
        }
    }
    /// A field of a struct value.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.as_struct()?.get(name)
    }
    pub fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }
}

/// Python's `repr()` of a `bytes` object (`b'get_meta_msg'`, `b"it's"`, `b'\\x00'`): msgspec quotes it in
/// "Invalid value" errors, so a tag mismatch reads exactly as Python prints it.
pub fn py_bytes_repr(b: &[u8]) -> String {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') { b'"' } else { b'\'' };
    let mut s = String::with_capacity(b.len() + 3);
    s.push('b');
    s.push(quote as char);
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            _ if c == quote => {
                s.push('\\');
                s.push(c as char);
            }
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push(quote as char);
    s
}

impl fmt::Display for Value {
    /// Python-like rendering, for reports.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::None => f.write_str("None"),
            Value::Bool(true) => f.write_str("True"),
            Value::Bool(false) => f.write_str("False"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Bytes(b) => f.write_str(&py_bytes_repr(b)),
            Value::List(v) | Value::Tuple(v) => {
                let (o, c) = if matches!(self, Value::List(_)) { ("[", "]") } else { ("(", ")") };
                f.write_str(o)?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str(c)
            }
            Value::Dict(d) => {
                f.write_str("{")?;
                for (i, (k, v)) in d.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
            Value::Enum(e) => write!(f, "{}", e.name),
            Value::Struct(s) => {
                write!(f, "{}(", s.meta.name)?;
                for (i, (n, v)) in s.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{n}={v}")?;
                }
                f.write_str(")")
            }
        }
    }
}
