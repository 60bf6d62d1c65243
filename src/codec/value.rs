//! The value tree the spec-driven codec decodes into and encodes from.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::strlist::{Iter as StrListIter, StrList};
use crate::msgpack::WireInt;

/// A decoded value, shaped by the spec type it was decoded as.
///
/// Lists come in three forms: the decoder makes a `list[int]` an [`Value::IntList`] (the ints packed, 9 bytes
/// each) and a `list[str]` a [`Value::StrList`] (every element in one buffer), any other list a
/// [`Value::List`]. The encoder takes either form for those types, and equality does not tell them apart
/// (`List([Int(1)]) == IntList([1])`); [`Value::items`] walks any of them.
#[derive(Clone, Debug)]
pub enum Value {
    /// Python `None` (MessagePack nil).
    None,
    /// A `bool`.
    Bool(bool),
    /// An `int`, up to the full unsigned and signed 64-bit range.
    Int(WireInt),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// `bytes`.
    Bytes(Vec<u8>),
    /// A `list` of any element type.
    List(Vec<Value>),
    /// A `list[int]`, packed.
    IntList(Vec<WireInt>),
    /// A `list[str]`, its elements in one buffer.
    StrList(StrList),
    /// A `tuple` (an array with a fixed arity or `tuple[T, ...]`).
    Tuple(Vec<Value>),
    /// Entries in insertion order (a Python dict's order); keys are unique.
    Dict(Vec<(Value, Value)>),
    /// An int enum member.
    Enum(EnumValue),
    /// A struct.
    Struct(StructValue),
}

impl PartialEq for Value {
    /// Structural equality, with a list equal to the same elements in any of the three list forms.
    fn eq(&self, other: &Value) -> bool {
        use Value as V;
        match (self, other) {
            (V::None, V::None) => true,
            (V::Bool(a), V::Bool(b)) => a == b,
            (V::Int(a), V::Int(b)) => a == b,
            (V::Float(a), V::Float(b)) => a == b,
            (V::Str(a), V::Str(b)) => a == b,
            (V::Bytes(a), V::Bytes(b)) => a == b,
            (V::List(a), V::List(b)) | (V::Tuple(a), V::Tuple(b)) => a == b,
            (V::IntList(a), V::IntList(b)) => a == b,
            (V::StrList(a), V::StrList(b)) => a == b,
            (V::Dict(a), V::Dict(b)) => a == b,
            (V::Enum(a), V::Enum(b)) => a == b,
            (V::Struct(a), V::Struct(b)) => a == b,
            (V::List(_) | V::IntList(_) | V::StrList(_), V::List(_) | V::IntList(_) | V::StrList(_)) => {
                let (a, b) = (self.items().expect("a list"), other.items().expect("a list"));
                a.len() == b.len() && a.zip(b).all(|(x, y)| x == y)
            }
            _ => false,
        }
    }
}

/// The elements of a list in any of its forms, or of a tuple ([`Value::items`]): borrowed from a
/// [`Value::List`] or [`Value::Tuple`], made on the fly from the packed forms.
#[derive(Clone)]
pub enum Items<'a> {
    /// Of a [`Value::List`] or [`Value::Tuple`].
    Values(std::slice::Iter<'a, Value>),
    /// Of a [`Value::IntList`], each a [`Value::Int`].
    Ints(std::slice::Iter<'a, WireInt>),
    /// Of a [`Value::StrList`], each a [`Value::Str`].
    Strs(StrListIter<'a>),
}

impl<'a> Iterator for Items<'a> {
    type Item = Cow<'a, Value>;
    fn next(&mut self) -> Option<Cow<'a, Value>> {
        match self {
            Items::Values(it) => it.next().map(Cow::Borrowed),
            Items::Ints(it) => it.next().map(|i| Cow::Owned(Value::Int(*i))),
            Items::Strs(it) => it.next().map(|s| Cow::Owned(Value::Str(s.to_owned()))),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            Items::Values(it) => it.len(),
            Items::Ints(it) => it.len(),
            Items::Strs(it) => it.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Items<'_> {}

/// A member of an enum: its name (from the spec) and its wire value.
#[derive(Clone, Debug, PartialEq)]
pub struct EnumValue {
    /// The member's Python name.
    pub name: Arc<str>,
    /// Its value on the wire.
    pub value: i64,
}

/// Names shared by every value of one struct.
#[derive(Debug, PartialEq, Eq)]
pub struct StructMeta {
    /// The struct's class name.
    pub name: String,
    /// Its field names, in declaration order.
    pub field_names: Vec<String>,
}

/// A struct value: every declared field, in declaration order, defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct StructValue {
    /// Name and field names, shared by every value of the struct.
    pub meta: Arc<StructMeta>,
    /// Field values, in declaration order.
    pub fields: Vec<Value>,
}

impl StructValue {
    pub(crate) fn name(&self) -> &str {
        &self.meta.name
    }
    /// The value of a field, by Python name.
    pub fn get(&self, field: &str) -> Option<&Value> {
        let i = self.meta.field_names.iter().position(|n| n == field)?;
        self.fields.get(i)
    }
    #[cfg(test)]
    pub(crate) fn get_mut(&mut self, field: &str) -> Option<&mut Value> {
        let i = self.meta.field_names.iter().position(|n| n == field)?;
        self.fields.get_mut(i)
    }
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.meta.field_names.iter().map(String::as_str).zip(self.fields.iter())
    }
}

impl Value {
    /// The int, if this is one.
    pub fn as_int(&self) -> Option<WireInt> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Enum(e) => Some(WireInt::from_i64(e.value)),
            _ => None,
        }
    }
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// Elements of a [`Value::List`] or [`Value::Tuple`] (not of the packed list forms: see [`Value::items`]).
    pub fn as_seq(&self) -> Option<&[Value]> {
        match self {
            Value::List(v) | Value::Tuple(v) => Some(v),
            _ => None,
        }
    }
    /// Elements of a list in any form, or of a tuple.
    pub fn items(&self) -> Option<Items<'_>> {
        match self {
            Value::List(v) | Value::Tuple(v) => Some(Items::Values(v.iter())),
            Value::IntList(v) => Some(Items::Ints(v.iter())),
            Value::StrList(v) => Some(Items::Strs(v.iter())),
            _ => None,
        }
    }
    /// A packed `list[int]`.
    #[cfg(test)]
    pub(crate) fn as_int_list(&self) -> Option<&[WireInt]> {
        match self {
            Value::IntList(v) => Some(v),
            _ => None,
        }
    }
    /// A packed `list[str]`.
    #[cfg(test)]
    pub(crate) fn as_str_list(&self) -> Option<&StrList> {
        match self {
            Value::StrList(v) => Some(v),
            _ => None,
        }
    }
    /// The struct, if this is one.
    pub fn as_struct(&self) -> Option<&StructValue> {
        match self {
            Value::Struct(s) => Some(s),
            _ => None,
        }
    }
    /// The entries, if this is a dict.
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
    pub(crate) fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}
impl From<WireInt> for Value {
    fn from(i: WireInt) -> Value {
        Value::Int(i)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
/// A packed `list[int]`.
impl From<Vec<WireInt>> for Value {
    fn from(v: Vec<WireInt>) -> Value {
        Value::IntList(v)
    }
}
/// A packed `list[str]`.
impl From<StrList> for Value {
    fn from(v: StrList) -> Value {
        Value::StrList(v)
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
            Value::List(_) | Value::IntList(_) | Value::StrList(_) | Value::Tuple(_) => {
                let (o, c) = if matches!(self, Value::Tuple(_)) { ("(", ")") } else { ("[", "]") };
                f.write_str(o)?;
                for (i, x) in self.items().into_iter().flatten().enumerate() {
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
