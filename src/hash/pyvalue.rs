//! A Python value tree, as far as vLLM's hashed values need one: what `json.dumps`, `pickle` and `cbor2`
//! see. Unlike JSON it keeps tuples apart from lists, ints of any size apart from floats, non-finite floats,
//! bytes, sets and dicts whose keys are not strings.
//!
//! The comparison and equality functions here follow CPython's `<` and `==` for these types, because
//! `json.dumps(sort_keys=True)` sorts a dict's items with `list.sort()` (see [`super::timsort`]).

use std::cmp::Ordering;
use std::fmt;

/// A Python `int` of any size. Values that fit an `i128` are kept as one (the common case, compared without
/// allocating); larger ones as sign and decimal magnitude (no leading zeros).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyInt(IntRepr);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum IntRepr {
    Small(i128),
    /// Always outside the `i128` range.
    Big {
        neg: bool,
        digits: String,
    },
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
        let digits = if trimmed.is_empty() { "0" } else { trimmed };
        if digits.len() <= 39 {
            if let Ok(m) = digits.parse::<u128>() {
                if !neg && m <= i128::MAX as u128 {
                    return Some(PyInt(IntRepr::Small(m as i128)));
                }
                if neg && m <= i128::MAX as u128 + 1 {
                    return Some(PyInt(IntRepr::Small((m as i128).wrapping_neg())));
                }
            }
        }
        Some(PyInt(IntRepr::Big { neg, digits: digits.to_string() }))
    }
    pub(crate) fn is_negative(&self) -> bool {
        match &self.0 {
            IntRepr::Small(v) => *v < 0,
            IntRepr::Big { neg, .. } => *neg,
        }
    }
    /// Number of decimal digits of the magnitude (what CPython's `int` → `str` limit counts).
    pub(crate) fn num_digits(&self) -> usize {
        match &self.0 {
            IntRepr::Small(v) => v.unsigned_abs().to_string().len(),
            IntRepr::Big { digits, .. } => digits.len(),
        }
    }
    pub(crate) fn to_i128(&self) -> Option<i128> {
        match &self.0 {
            IntRepr::Small(v) => Some(*v),
            IntRepr::Big { .. } => None,
        }
    }
    pub(crate) fn to_i64(&self) -> Option<i64> {
        self.to_i128().and_then(|v| i64::try_from(v).ok())
    }
    /// Exact ordering of two ints.
    pub(crate) fn cmp_int(&self, other: &PyInt) -> Ordering {
        match (&self.0, &other.0) {
            (IntRepr::Small(a), IntRepr::Small(b)) => a.cmp(b),
            (IntRepr::Small(_), IntRepr::Big { neg, .. }) => {
                if *neg {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            (IntRepr::Big { neg, .. }, IntRepr::Small(_)) => {
                if *neg {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (IntRepr::Big { neg: na, digits: da }, IntRepr::Big { neg: nb, digits: db }) => match (na, nb) {
                (false, true) => Ordering::Greater,
                (true, false) => Ordering::Less,
                (false, false) => cmp_magnitude(da, db),
                (true, true) => cmp_magnitude(db, da),
            },
        }
    }
    /// Exact ordering against a float, as CPython compares `int` with `float`; `None` when `f` is NaN.
    pub(crate) fn cmp_float(&self, f: f64) -> Option<Ordering> {
        if f.is_nan() {
            return None;
        }
        if f.is_infinite() {
            return Some(if f > 0.0 { Ordering::Less } else { Ordering::Greater });
        }
        let whole = f.trunc();
        // |whole| < 2^127 converts to i128 exactly; larger floats compare through their exact decimal text
        // (every finite double's integer part is an integer, which Rust prints exactly with `{:.0}`).
        let by_whole = if whole.abs() < 1.7e38 {
            PyInt(IntRepr::Small(whole as i128))
        } else {
            let sign = if f > 0.0 { Ordering::Less } else { Ordering::Greater };
            let IntRepr::Big { digits, .. } = &self.0 else {
                return Some(sign); // an i128 is smaller in magnitude than any float from 1.7e38 up
            };
            // Magnitudes many digits apart need no exact text.
            let float_digits = whole.abs().log10().floor() as usize + 1;
            if digits.len() + 1 < float_digits {
                return Some(sign);
            }
            if float_digits + 1 < digits.len() {
                return Some(if self.is_negative() { Ordering::Less } else { Ordering::Greater });
            }
            PyInt::parse(&format!("{whole:.0}")).expect("a finite float's integer part prints as an integer")
        };
        match self.cmp_int(&by_whole) {
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
        match &self.0 {
            IntRepr::Small(v) => write!(f, "{v}"),
            IntRepr::Big { neg, digits } => write!(f, "{}{digits}", if *neg { "-" } else { "" }),
        }
    }
}

macro_rules! int_from {
    ($($t:ty),*) => {$(
        impl From<$t> for PyInt {
            fn from(v: $t) -> PyInt {
                PyInt(IntRepr::Small(v as i128))
            }
        }
    )*};
}
int_from!(i8, i16, i32, i64, isize, i128, u8, u16, u32, u64, usize);

impl From<u128> for PyInt {
    fn from(v: u128) -> PyInt {
        match i128::try_from(v) {
            Ok(s) => PyInt(IntRepr::Small(s)),
            Err(_) => PyInt(IntRepr::Big { neg: false, digits: v.to_string() }),
        }
    }
}

/// A Python value.
#[derive(Clone, Debug, PartialEq)]
pub enum PyValue {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An `int` of any size.
    Int(PyInt),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// A `bytes`.
    Bytes(Vec<u8>),
    /// A `list`.
    List(Vec<PyValue>),
    /// A `tuple`.
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
    /// The exception class (`TypeError`, `ValueError`).
    pub kind: &'static str,
    /// `str(exception)`.
    pub message: String,
}

impl PyError {
    pub(crate) fn new(kind: &'static str, message: impl Into<String>) -> PyError {
        PyError { kind, message: message.into() }
    }
    pub(crate) fn type_error(message: impl Into<String>) -> PyError {
        PyError { kind: "TypeError", message: message.into() }
    }
    pub(crate) fn value_error(message: impl Into<String>) -> PyError {
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
    /// An `int`.
    pub fn int(v: impl Into<PyInt>) -> PyValue {
        PyValue::Int(v.into())
    }
    /// A `str`.
    pub fn str(s: impl Into<String>) -> PyValue {
        PyValue::Str(s.into())
    }

    /// `dict(items)`: a later item whose key equals an earlier one (`1 == 1.0 == True`) replaces the value and
    /// keeps the first key and its position, as CPython does. Unhashable keys raise `TypeError`.
    pub fn dict(items: impl IntoIterator<Item = (PyValue, PyValue)>) -> Result<PyValue, PyError> {
        let mut out: Vec<(PyValue, PyValue)> = Vec::new();
        let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for (k, v) in items {
            k.check_hashable()?;
            match equality_class(&k) {
                None => out.push((k, v)),
                Some(class) => match index.get(&class) {
                    Some(&i) => out[i].1 = v,
                    None => {
                        index.insert(class, out.len());
                        out.push((k, v));
                    }
                },
            }
        }
        Ok(PyValue::Dict(out))
    }

    /// A dict from string keys (always distinct in the caller's map).
    pub(crate) fn str_dict<'a>(items: impl IntoIterator<Item = (&'a str, PyValue)>) -> PyValue {
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
    pub(crate) fn type_name(&self) -> &'static str {
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

/// A text that two hashable values share exactly when Python finds them `==` (`1`, `1.0` and `True` share
/// one); `None` for values equal to nothing (a NaN, or a tuple holding one).
fn equality_class(v: &PyValue) -> Option<String> {
    Some(match v {
        PyValue::None => "n".into(),
        PyValue::Bool(b) => format!("i{}", *b as u8),
        PyValue::Int(i) => format!("i{i}"),
        PyValue::Float(f) if f.is_nan() => return None,
        PyValue::Float(f) if f.is_finite() && f.fract() == 0.0 => format!("i{f:.0}").replace("i-0", "i0"),
        PyValue::Float(f) => format!("f{}", f.to_bits()),
        PyValue::Str(s) => format!("s{s}"),
        PyValue::Bytes(b) => format!("b{}", hex::encode(b)),
        PyValue::Tuple(items) => {
            let mut out = String::from("t(");
            for x in items {
                let c = equality_class(x)?;
                out.push_str(&format!("{}:{c}", c.len()));
            }
            out.push(')');
            out
        }
        PyValue::List(_) | PyValue::Dict(_) | PyValue::Set(_) => return None,
    })
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
pub(crate) fn py_eq(a: &PyValue, b: &PyValue) -> bool {
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
pub(crate) fn py_lt(a: &PyValue, b: &PyValue) -> Result<bool, PyError> {
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
        assert_eq!(PyInt::parse("1".repeat(400).as_str()).unwrap().cmp_float(-1e300), Some(Ordering::Greater));
        assert_eq!(PyInt::parse(&format!("-{}", "1".repeat(400))).unwrap().cmp_float(1e300), Some(Ordering::Less));
        assert_eq!(PyInt::parse(&format!("-{}", "1".repeat(50))).unwrap().cmp_float(-1e300), Some(Ordering::Greater));
        assert_eq!(PyInt::from(i128::MIN).cmp_float(-1e300), Some(Ordering::Greater));
        // 2**200 exactly, against the float 2**200 and its neighbours.
        let p200 = PyInt::parse("1606938044258990275541962092341162602522202993782792835301376").unwrap();
        assert_eq!(p200.cmp_float(2f64.powi(200)), Some(Ordering::Equal));
        assert_eq!(p200.cmp_float(f64::from_bits(2f64.powi(200).to_bits() + 1)), Some(Ordering::Less));
        assert_eq!(p200.cmp_float(f64::from_bits(2f64.powi(200).to_bits() - 1)), Some(Ordering::Greater));
        assert_eq!(PyInt::from(0i64).cmp_float(f64::NAN), None);
    }

    #[test]
    fn python_comparisons() {
        let t = PyValue::Bool(true);
        assert!(py_eq(&t, &PyValue::int(1)) && py_eq(&t, &PyValue::Float(1.0)));
        assert!(!py_eq(&PyValue::Float(f64::NAN), &PyValue::Float(f64::NAN)));
        assert_eq!(
            py_lt(&PyValue::str("b"), &PyValue::int(1)).unwrap_err().to_string(),
            "TypeError: '<' not supported between instances of 'str' and 'int'"
        );
        assert!(py_lt(&PyValue::str("Z"), &PyValue::str("a")).unwrap());
        assert!(py_lt(&PyValue::str("\u{ffff}"), &PyValue::str("\u{1f600}")).unwrap());
        let tup = |v: Vec<PyValue>| PyValue::Tuple(v);
        assert!(py_lt(&tup(vec![PyValue::int(1), PyValue::None]), &tup(vec![PyValue::int(2), PyValue::None])).unwrap());
        assert!(
            py_lt(&tup(vec![PyValue::int(1), PyValue::None]), &tup(vec![PyValue::int(1), PyValue::str("x")])).is_err()
        );
        let d = PyValue::dict(vec![(PyValue::int(1), PyValue::str("a")), (PyValue::Bool(true), PyValue::str("b"))])
            .unwrap();
        assert_eq!(d, PyValue::Dict(vec![(PyValue::int(1), PyValue::str("b"))]));
        assert_eq!(
            PyValue::dict(vec![(PyValue::List(vec![]), PyValue::None)]).unwrap_err().message,
            "unhashable type: 'list'"
        );
        // Equal keys of different types merge; NaNs never do; -0.0 == 0.
        let keys = vec![
            PyValue::Float(-0.0),
            PyValue::int(0),
            PyValue::Float(f64::NAN),
            PyValue::Float(f64::NAN),
            PyValue::Float(2.5),
            PyValue::Float(2.5),
            PyValue::Tuple(vec![PyValue::int(1), PyValue::str("a")]),
            PyValue::Tuple(vec![PyValue::Bool(true), PyValue::str("a")]),
            PyValue::Float(1e300),
            PyValue::Int(PyInt::parse(&format!("{:.0}", 1e300)).unwrap()),
        ];
        let PyValue::Dict(d) = PyValue::dict(keys.into_iter().map(|k| (k, PyValue::None))).unwrap() else { panic!() };
        assert_eq!(d.len(), 6);
    }
}
