//! A Python value tree, as far as vLLM's hashed values need one: what `json.dumps`, `pickle` and `cbor2`
//! see. Unlike JSON it keeps tuples apart from lists, ints of any size apart from floats, non-finite floats,
//! bytes, sets and dicts whose keys are not strings.
//!
//! The comparison and equality functions here follow CPython's `<` and `==` for these types, because
//! `json.dumps(sort_keys=True)` sorts a dict's items with `list.sort()` (see [`super::timsort`]).

use std::cmp::Ordering;
use std::fmt;

/// A Python `int` of any size: sign and decimal magnitude (no leading zeros; zero is `"0"`, never negative).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyInt {
    neg: bool,
    digits: String,
}

impl PyInt {
    /// Parses an optional sign followed by ASCII decimal digits (leading zeros allowed, as in `int("007")`).
    pub fn parse(text: &str) -> Option<PyInt> {
        let (neg, body) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let trimmed = body.trim_start_matches('0');
        let digits = if trimmed.is_empty() { "0".to_string() } else { trimmed.to_string() };
        Some(PyInt { neg: neg && digits != "0", digits })
    }
    pub fn is_negative(&self) -> bool {
        self.neg
    }
    /// The decimal magnitude.
    pub fn magnitude(&self) -> &str {
        &self.digits
    }
    /// Number of decimal digits of the magnitude (what CPython's `int` → `str` limit counts).
    pub fn num_digits(&self) -> usize {
        self.digits.len()
    }
    pub fn to_i128(&self) -> Option<i128> {
        let m: u128 = self.digits.parse().ok()?;
        if self.neg {
            if m <= i128::MAX as u128 + 1 {
                Some((m as i128).wrapping_neg())
            } else {
                None
            }
        } else {
            i128::try_from(m).ok()
        }
    }
    pub fn to_i64(&self) -> Option<i64> {
        self.to_i128().and_then(|v| i64::try_from(v).ok())
    }
    /// Exact ordering of two ints.
    pub fn cmp_int(&self, other: &PyInt) -> Ordering {
        match (self.neg, other.neg) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => cmp_magnitude(&self.digits, &other.digits),
            (true, true) => cmp_magnitude(&other.digits, &self.digits),
        }
    }
    /// Exact ordering against a float, as CPython compares `int` with `float`; `None` when `f` is NaN.
    pub fn cmp_float(&self, f: f64) -> Option<Ordering> {
        if f.is_nan() {
            return None;
        }
        if f.is_infinite() {
            return Some(if f > 0.0 { Ordering::Less } else { Ordering::Greater });
        }
        // Every finite double's integer part is an exact integer; Rust prints it exactly with `{:.0}`.
        let whole = f.trunc();
        let whole_int = PyInt::parse(&format!("{whole:.0}")).expect("a finite float's integer part prints as an integer");
        match self.cmp_int(&whole_int) {
            Ordering::Equal => {
                let frac = f - whole;
                Some(if frac > 0.0 {
                    Ordering::Less
                } else if frac < 0.0 {
                    Ordering::Greater
                } else {
                    Ordering::Equal
                })
            }
            o => Some(o),
        }
    }
}

fn cmp_magnitude(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

impl fmt::Display for PyInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.neg {
            f.write_str("-")?;
        }
        f.write_str(&self.digits)
    }
}

macro_rules! int_from {
    (signed: $($s:ty),*; unsigned: $($u:ty),*) => {
        $(impl From<$s> for PyInt {
            fn from(v: $s) -> PyInt {
                PyInt { neg: v < 0, digits: (v as i128).unsigned_abs().to_string() }
            }
        })*
        $(impl From<$u> for PyInt {
            fn from(v: $u) -> PyInt {
                PyInt { neg: false, digits: (v as u128).to_string() }
            }
        })*
    };
}
int_from!(signed: i8, i16, i32, i64, isize, i128; unsigned: u8, u16, u32, u64, usize, u128);

/// A Python value.
#[derive(Clone, Debug, PartialEq)]
pub enum PyValue {
    None,
    Bool(bool),
    Int(PyInt),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<PyValue>),
    Tuple(Vec<PyValue>),
    /// Items in insertion order; keys are distinct under Python `==` (see [`PyValue::dict`]).
    Dict(Vec<(PyValue, PyValue)>),
    /// Elements in iteration order.
    Set(Vec<PyValue>),
}

/// A Python exception: its type name and `str(exception)`. Displays as vLLM's vectors write errors:
/// `TypeError: Object of type bytes is not JSON serializable`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyError {
    pub kind: &'static str,
    pub message: String,
}

impl PyError {
    pub fn type_error(message: impl Into<String>) -> PyError {
        PyError { kind: "TypeError", message: message.into() }
    }
    pub fn value_error(message: impl Into<String>) -> PyError {
        PyError { kind: "ValueError", message: message.into() }
    }
}

impl fmt::Display for PyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}
impl std::error::Error for PyError {}

impl PyValue {
    pub fn int(v: impl Into<PyInt>) -> PyValue {
        PyValue::Int(v.into())
    }
    pub fn str(s: impl Into<String>) -> PyValue {
        PyValue::Str(s.into())
    }

    /// `dict(items)`: a later item whose key equals an earlier one (`1 == 1.0 == True`) replaces the value and
    /// keeps the first key and its position, as CPython does. Unhashable keys raise `TypeError`.
    pub fn dict(items: impl IntoIterator<Item = (PyValue, PyValue)>) -> Result<PyValue, PyError> {
        let mut out: Vec<(PyValue, PyValue)> = Vec::new();
        for (k, v) in items {
            k.check_hashable()?;
            match out.iter_mut().find(|(ek, _)| py_eq(ek, &k)) {
                Some(slot) => slot.1 = v,
                None => out.push((k, v)),
            }
        }
        Ok(PyValue::Dict(out))
    }

    /// A dict from string keys (always distinct in the caller's map).
    pub fn str_dict<'a>(items: impl IntoIterator<Item = (&'a str, PyValue)>) -> PyValue {
        PyValue::Dict(items.into_iter().map(|(k, v)| (PyValue::str(k), v)).collect())
    }

    fn check_hashable(&self) -> Result<(), PyError> {
        match self {
            PyValue::List(_) | PyValue::Dict(_) | PyValue::Set(_) => {
                Err(PyError::type_error(format!("unhashable type: '{}'", self.type_name())))
            }
            PyValue::Tuple(items) => items.iter().try_for_each(PyValue::check_hashable),
            _ => Ok(()),
        }
    }

    /// `type(v).__name__`.
    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::None => "NoneType",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::Bytes(_) => "bytes",
            PyValue::List(_) => "list",
            PyValue::Tuple(_) => "tuple",
            PyValue::Dict(_) => "dict",
            PyValue::Set(_) => "set",
        }
    }
}

/// A number as CPython compares it (`bool` is an `int`).
enum Num<'a> {
    Int(std::borrow::Cow<'a, PyInt>),
    Float(f64),
}

fn as_num(v: &PyValue) -> Option<Num<'_>> {
    match v {
        PyValue::Bool(b) => Some(Num::Int(std::borrow::Cow::Owned(PyInt::from(*b as u8)))),
        PyValue::Int(i) => Some(Num::Int(std::borrow::Cow::Borrowed(i))),
        PyValue::Float(f) => Some(Num::Float(*f)),
        _ => None,
    }
}

/// `a <=> b` for numbers; `None` when unordered (a NaN is involved).
fn num_cmp(a: &Num<'_>, b: &Num<'_>) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp_int(y)),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(y),
        (Num::Int(x), Num::Float(y)) => x.cmp_float(*y),
        (Num::Float(x), Num::Int(y)) => y.cmp_float(*x).map(Ordering::reverse),
    }
}

/// Python `a == b` (never raises for these types; NaN is unequal to everything, itself included, since
/// values built from input never share one NaN object).
pub fn py_eq(a: &PyValue, b: &PyValue) -> bool {
    if let (Some(x), Some(y)) = (as_num(a), as_num(b)) {
        return num_cmp(&x, &y) == Some(Ordering::Equal);
    }
    match (a, b) {
        (PyValue::None, PyValue::None) => true,
        (PyValue::Str(x), PyValue::Str(y)) => x == y,
        (PyValue::Bytes(x), PyValue::Bytes(y)) => x == y,
        (PyValue::List(x), PyValue::List(y)) | (PyValue::Tuple(x), PyValue::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (PyValue::Dict(x), PyValue::Dict(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.iter().any(|(k2, v2)| py_eq(k, k2) && py_eq(v, v2)))
        }
        (PyValue::Set(x), PyValue::Set(y)) => x.len() == y.len() && x.iter().all(|e| y.iter().any(|f| py_eq(e, f))),
        _ => false,
    }
}

fn unorderable(a: &PyValue, b: &PyValue) -> PyError {
    PyError::type_error(format!("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name()))
}

/// Python `a < b`, including the `TypeError` CPython raises for unorderable types. Sequences compare
/// element-wise: the first pair that is not `==` decides with `<`; otherwise the shorter one is smaller.
pub fn py_lt(a: &PyValue, b: &PyValue) -> Result<bool, PyError> {
    if let (Some(x), Some(y)) = (as_num(a), as_num(b)) {
        return Ok(num_cmp(&x, &y) == Some(Ordering::Less));
    }
    match (a, b) {
        (PyValue::Str(x), PyValue::Str(y)) => Ok(x < y),
        (PyValue::Bytes(x), PyValue::Bytes(y)) => Ok(x < y),
        (PyValue::List(x), PyValue::List(y)) | (PyValue::Tuple(x), PyValue::Tuple(y)) => seq_lt(x, y),
        // Sets order by inclusion (proper subset).
        (PyValue::Set(x), PyValue::Set(y)) => Ok(x.len() < y.len() && x.iter().all(|e| y.iter().any(|f| py_eq(e, f)))),
        _ => Err(unorderable(a, b)),
    }
}

fn seq_lt(x: &[PyValue], y: &[PyValue]) -> Result<bool, PyError> {
    for (p, q) in x.iter().zip(y) {
        if !py_eq(p, q) {
            return py_lt(p, q);
        }
    }
    Ok(x.len() < y.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_parse_and_compare_exactly() {
        let big = PyInt::parse("-0000123456789012345678901234567890").unwrap();
        assert_eq!(big.to_string(), "-123456789012345678901234567890");
        assert_eq!(PyInt::parse("-0").unwrap().to_string(), "0");
        assert!(PyInt::parse("1_0").is_none() && PyInt::parse("").is_none() && PyInt::parse("-").is_none());
        assert_eq!(PyInt::from(-5i64).cmp_int(&PyInt::from(3u64)), Ordering::Less);
        assert_eq!(PyInt::from(-5i64).cmp_int(&PyInt::from(-30i64)), Ordering::Greater);
        // 2**53 + 1 is not equal to the float 2**53 (CPython compares exactly).
        let p = PyInt::parse("9007199254740993").unwrap();
        assert_eq!(p.cmp_float(9007199254740992.0), Some(Ordering::Greater));
        assert_eq!(PyInt::from(2i64).cmp_float(2.5), Some(Ordering::Less));
        assert_eq!(PyInt::from(-2i64).cmp_float(-2.5), Some(Ordering::Greater));
        assert_eq!(PyInt::from(3i64).cmp_float(3.0), Some(Ordering::Equal));
        assert_eq!(PyInt::parse("1".repeat(400).as_str()).unwrap().cmp_float(f64::MAX), Some(Ordering::Greater));
        assert_eq!(PyInt::from(0i64).cmp_float(f64::NAN), None);
    }

    #[test]
    fn python_comparisons() {
        let t = PyValue::Bool(true);
        assert!(py_eq(&t, &PyValue::int(1)) && py_eq(&t, &PyValue::Float(1.0)));
        assert!(!py_eq(&PyValue::Float(f64::NAN), &PyValue::Float(f64::NAN)));
        assert_eq!(py_lt(&PyValue::str("b"), &PyValue::int(1)).unwrap_err().to_string(), "TypeError: '<' not supported between instances of 'str' and 'int'");
        assert!(py_lt(&PyValue::str("Z"), &PyValue::str("a")).unwrap());
        assert!(py_lt(&PyValue::str("\u{ffff}"), &PyValue::str("\u{1f600}")).unwrap());
        let tup = |v: Vec<PyValue>| PyValue::Tuple(v);
        assert!(py_lt(&tup(vec![PyValue::int(1), PyValue::None]), &tup(vec![PyValue::int(2), PyValue::None])).unwrap());
        assert!(py_lt(&tup(vec![PyValue::int(1), PyValue::None]), &tup(vec![PyValue::int(1), PyValue::str("x")])).is_err());
        let d = PyValue::dict(vec![(PyValue::int(1), PyValue::str("a")), (PyValue::Bool(true), PyValue::str("b"))]).unwrap();
        assert_eq!(d, PyValue::Dict(vec![(PyValue::int(1), PyValue::str("b"))]));
        assert_eq!(PyValue::dict(vec![(PyValue::List(vec![]), PyValue::None)]).unwrap_err().message, "unhashable type: 'list'");
    }
}
