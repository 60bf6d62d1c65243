//! CPython's `json.dumps(obj, sort_keys=True)` with every other option at its default: separators `", "` and
//! `": "`, `ensure_ascii=True`, `allow_nan=True` (C encoder `Modules/_json.c`, CPython 3.11).
//!
//! * A dict's items are sorted with `list.sort()` on `(key, value)` tuples (`timsort`), so keys of
//!   types that do not order raise `TypeError: '<' not supported between instances of ...`; an empty dict is
//!   written `{}` without sorting.
//! * Keys may be `str`, `float` (its repr), `bool`/`None` (`true`, `false`, `null`) or `int` (decimal);
//!   any other key raises `TypeError: keys must be str, int, float, bool or None, not <type>`.
//! * Tuples are arrays; bytes, sets and other objects raise `TypeError: Object of type <type> is not JSON
//!   serializable`; ints longer than 4300 digits raise CPython's `int` → `str` `ValueError`.
//! * Strings escape `"`, `\`, `\n`, `\r`, `\t`, `\b`, `\f`, every other char below U+0020 or from U+007F up
//!   as `\uxxxx` (lowercase hex), astral chars as a surrogate pair.

use super::pyfloat::float_repr;
use super::pyvalue::{py_eq, py_lt, PyError, PyValue};
use super::timsort::list_sort;
use crate::limits::MAX_HASHED_VALUE_DEPTH;

/// CPython's default `sys.get_int_max_str_digits()` (3.11+): converting a longer int to text raises.
pub(crate) const INT_MAX_STR_DIGITS: usize = 4300;

/// `json.dumps(value, sort_keys=True)`.
pub fn dumps_sorted(value: &PyValue) -> Result<String, PyError> {
    let mut out = String::new();
    encode(value, &mut out, 0)?;
    Ok(out)
}

fn encode(v: &PyValue, out: &mut String, depth: usize) -> Result<(), PyError> {
    match v {
        PyValue::None => out.push_str("null"),
        PyValue::Bool(true) => out.push_str("true"),
        PyValue::Bool(false) => out.push_str("false"),
        PyValue::Str(s) => encode_str(s, out),
        PyValue::Int(i) => {
            if i.num_digits() > INT_MAX_STR_DIGITS {
                return Err(int_too_long());
            }
            out.push_str(&i.to_string());
        }
        PyValue::Float(f) => out.push_str(&float_json(*f)),
        PyValue::List(items) | PyValue::Tuple(items) => {
            let depth = enter(depth)?;
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                encode(item, out, depth)?;
            }
            out.push(']');
        }
        PyValue::Dict(items) => {
            let depth = enter(depth)?;
            if items.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            let order = sorted_item_order(items)?;
            out.push('{');
            for (n, &i) in order.iter().enumerate() {
                let (k, val) = &items[i];
                if n > 0 {
                    out.push_str(", ");
                }
                let key = match k {
                    PyValue::Str(s) => s.clone(),
                    PyValue::Float(f) => float_json(*f),
                    PyValue::Bool(true) => "true".into(),
                    PyValue::Bool(false) => "false".into(),
                    PyValue::None => "null".into(),
                    PyValue::Int(i) => {
                        if i.num_digits() > INT_MAX_STR_DIGITS {
                            return Err(int_too_long());
                        }
                        i.to_string()
                    }
                    other => {
                        return Err(PyError::type_error(format!(
                            "keys must be str, int, float, bool or None, not {}",
                            other.type_name()
                        )))
                    }
                };
                encode_str(&key, out);
                out.push_str(": ");
                encode(val, out, depth)?;
            }
            out.push('}');
        }
        PyValue::Bytes(_) | PyValue::Set(_) => {
            return Err(PyError::type_error(format!("Object of type {} is not JSON serializable", v.type_name())))
        }
    }
    Ok(())
}

fn enter(depth: usize) -> Result<usize, PyError> {
    if depth >= MAX_HASHED_VALUE_DEPTH {
        return Err(PyError {
            kind: "RecursionError",
            message: "maximum recursion depth exceeded while encoding a JSON object".into(),
        });
    }
    Ok(depth + 1)
}

fn int_too_long() -> PyError {
    PyError::value_error(format!(
        "Exceeds the limit ({INT_MAX_STR_DIGITS} digits) for integer string conversion; use sys.set_int_max_str_digits() to increase the limit"
    ))
}

/// The order `sorted(d.items())` puts a dict's items in: `list.sort()` over `(key, value)` tuples.
fn sorted_item_order(items: &[(PyValue, PyValue)]) -> Result<Vec<usize>, PyError> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    list_sort(&mut order, &mut |a: &usize, b: &usize| {
        let ((ka, va), (kb, vb)) = (&items[*a], &items[*b]);
        // Tuple `<`: the first elements that are not `==` decide.
        if py_eq(ka, kb) {
            py_lt(va, vb)
        } else {
            py_lt(ka, kb)
        }
    })?;
    Ok(order)
}

/// A float as the JSON encoder writes it: `repr`, or `NaN` / `Infinity` / `-Infinity`.
pub(crate) fn float_json(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        float_repr(f)
    }
}

/// A string with `ensure_ascii` escapes, in double quotes.
pub(crate) fn encode_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='\u{7e}' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04x}", u));
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::pyvalue::PyInt;

    fn s(v: &str) -> PyValue {
        PyValue::str(v)
    }

    #[test]
    fn dumps_like_python() {
        let d = PyValue::str_dict([("b", PyValue::int(1)), ("a", s("x"))]);
        assert_eq!(dumps_sorted(&d).unwrap(), r#"{"a": "x", "b": 1}"#);
        assert_eq!(dumps_sorted(&PyValue::Dict(vec![])).unwrap(), "{}");
        let d = PyValue::str_dict([("model", s("modèle/é")), ("e", s("😀\u{7f}\u{0}\n\"\\/"))]);
        assert_eq!(
            dumps_sorted(&d).unwrap(),
            r#"{"e": "\ud83d\ude00\u007f\u0000\n\"\\/", "model": "mod\u00e8le/\u00e9"}"#
        );
        let d = PyValue::dict(vec![
            (PyValue::Float(1.5), PyValue::Tuple(vec![PyValue::None, PyValue::Bool(true)])),
            (PyValue::int(1), PyValue::List(vec![])),
            (PyValue::Bool(false), PyValue::Float(f64::NEG_INFINITY)),
        ])
        .unwrap();
        assert_eq!(dumps_sorted(&d).unwrap(), r#"{"false": -Infinity, "1": [], "1.5": [null, true]}"#);
    }

    #[test]
    fn errors_like_python() {
        let mixed = PyValue::dict(vec![(PyValue::int(1), s("a")), (s("b"), PyValue::int(2))]).unwrap();
        assert_eq!(
            dumps_sorted(&mixed).unwrap_err().to_string(),
            "TypeError: '<' not supported between instances of 'str' and 'int'"
        );
        let bytes = PyValue::str_dict([("b", PyValue::Bytes(vec![0, 1]))]);
        assert_eq!(
            dumps_sorted(&bytes).unwrap_err().to_string(),
            "TypeError: Object of type bytes is not JSON serializable"
        );
        let tuple_key = PyValue::dict(vec![(PyValue::Tuple(vec![]), PyValue::None)]).unwrap();
        assert_eq!(
            dumps_sorted(&tuple_key).unwrap_err().to_string(),
            "TypeError: keys must be str, int, float, bool or None, not tuple"
        );
        let huge = PyValue::Int(PyInt::parse(&"9".repeat(4301)).unwrap());
        assert!(dumps_sorted(&huge)
            .unwrap_err()
            .to_string()
            .starts_with("ValueError: Exceeds the limit (4300 digits)"));
        assert!(dumps_sorted(&PyValue::Int(PyInt::parse(&"9".repeat(4300)).unwrap())).is_ok());
        // Nesting: CPython (called from module level) encodes a dict holding 993 nested lists, not 994.
        let nest = |n: usize| (0..n).fold(PyValue::List(vec![]), |v, _| PyValue::List(vec![v]));
        assert!(dumps_sorted(&PyValue::str_dict([("a", nest(992))])).is_ok());
        assert_eq!(dumps_sorted(&PyValue::str_dict([("a", nest(993))])).unwrap_err().kind, "RecursionError");
    }
}
