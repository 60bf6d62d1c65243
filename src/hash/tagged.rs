//! Python values written as JSON, with the tags of `conformance/vectors/GOLDEN.md` for what JSON cannot
//! carry: `{"$tuple": [..]}`, `{"$bytes": "<hex>"}`, `{"$float": "nan" | "inf" | "-inf"}`,
//! `{"$int": "<decimal>"}`, `{"$dict_items": [[k, v], ..]}` (a dict whose keys are not all strings) and
//! `{"$set": [..]}`. An object with exactly one of these keys is the tagged value; any other object is a
//! dict with string keys. JSON integers are ints, JSON numbers with a fraction or exponent are floats.

use serde_json::Value as J;

use super::pyvalue::{PyInt, PyValue};
use super::{HashError, TaggedProblem};

/// Converts a tagged JSON value. Errors name the JSON path of the bad tag, or are the `TypeError` Python
/// raises building the value (an unhashable dict key).
pub fn from_tagged_json(v: &J) -> Result<PyValue, HashError> {
    convert(v, "$")
}

fn bad<T>(path: &str, problem: TaggedProblem) -> Result<T, HashError> {
    Err(HashError::Tagged { path: path.to_string(), problem })
}

fn convert(v: &J, path: &str) -> Result<PyValue, HashError> {
    Ok(match v {
        J::Null => PyValue::None,
        J::Bool(b) => PyValue::Bool(*b),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                PyValue::int(i)
            } else if let Some(u) = n.as_u64() {
                PyValue::int(u)
            } else {
                match n.as_f64() {
                    Some(f) => PyValue::Float(f),
                    None => return bad(path, TaggedProblem::NotRepresentable(n.to_string())),
                }
            }
        }
        J::String(s) => PyValue::Str(s.clone()),
        J::Array(items) => PyValue::List(seq(items, path)?),
        J::Object(map) => {
            if map.len() == 1 {
                let (tag, body) = map.iter().next().expect("one entry");
                let at = format!("{path}.{tag}");
                match tag.as_str() {
                    "$tuple" => return Ok(PyValue::Tuple(seq(array(body, &at)?, &at)?)),
                    "$set" => return Ok(PyValue::Set(seq(array(body, &at)?, &at)?)),
                    "$bytes" => {
                        return match hex::decode(string(body, &at)?) {
                            Ok(b) => Ok(PyValue::Bytes(b)),
                            Err(_) => bad(&at, TaggedProblem::NotHex),
                        };
                    }
                    "$int" => {
                        let text = string(body, &at)?;
                        return match PyInt::parse(text) {
                            Some(i) => Ok(PyValue::Int(i)),
                            None => bad(&at, TaggedProblem::NotDecimal(text.to_string())),
                        };
                    }
                    "$float" => {
                        return Ok(PyValue::Float(match string(body, &at)? {
                            "nan" => f64::NAN,
                            "inf" => f64::INFINITY,
                            "-inf" => f64::NEG_INFINITY,
                            other => return bad(&at, TaggedProblem::NotSpecialFloat(other.to_string())),
                        }))
                    }
                    "$dict_items" => {
                        let mut items = Vec::new();
                        for (i, pair) in array(body, &at)?.iter().enumerate() {
                            let p = format!("{at}[{i}]");
                            match pair.as_array().map(Vec::as_slice) {
                                Some([k, v]) => {
                                    items.push((convert(k, &format!("{p}[0]"))?, convert(v, &format!("{p}[1]"))?))
                                }
                                _ => return bad(&p, TaggedProblem::NotPair),
                            }
                        }
                        return Ok(PyValue::dict(items)?);
                    }
                    _ => {}
                }
            }
            PyValue::Dict(
                map.iter()
                    .map(|(k, v)| Ok((PyValue::Str(k.clone()), convert(v, &format!("{path}.{k}"))?)))
                    .collect::<Result<_, HashError>>()?,
            )
        }
    })
}

fn seq(items: &[J], path: &str) -> Result<Vec<PyValue>, HashError> {
    items.iter().enumerate().map(|(i, x)| convert(x, &format!("{path}[{i}]"))).collect()
}

fn array<'a>(v: &'a J, path: &str) -> Result<&'a Vec<J>, HashError> {
    v.as_array().map_or_else(|| bad(path, TaggedProblem::NotArray), Ok)
}

fn string<'a>(v: &'a J, path: &str) -> Result<&'a str, HashError> {
    v.as_str().map_or_else(|| bad(path, TaggedProblem::NotString), Ok)
}

/// JSON text with every integer literal outside the 64-bit range rewritten as `{"$int": "<literal>"}`, or `None`
/// when there is none. JSON parsers without arbitrary precision (serde_json's default) read such literals as
/// floats, while Python reads them as exact ints; with the tag they stay exact. Text inside strings is left
/// alone.
pub fn tag_wide_integers(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < b.len() && (b[i].is_ascii_digit() || matches!(b[i], b'.' | b'e' | b'E' | b'+' | b'-')) {
                    i += 1;
                }
                let lit = &text[start..i];
                let integral = !lit.contains(['.', 'e', 'E']) && lit.len() > usize::from(lit.starts_with('-'));
                if integral && lit.parse::<i64>().is_err() && lit.parse::<u64>().is_err() {
                    let o = out.get_or_insert_with(String::new);
                    o.push_str(&text[copied..start]);
                    o.push_str(&format!("{{\"$int\": \"{lit}\"}}"));
                    copied = i;
                }
            }
            _ => i += 1,
        }
    }
    out.map(|mut o| {
        o.push_str(&text[copied..]);
        o
    })
}

/// Python values back to tagged JSON (the inverse of [`from_tagged_json`]); ints outside ±2^53 use `$int`.
pub fn to_tagged_json(v: &PyValue) -> J {
    to_json(v, true)
}

/// Python values as the golden vectors write outputs: like [`to_tagged_json`], but tuples are plain arrays.
pub fn to_output_json(v: &PyValue) -> J {
    to_json(v, false)
}

fn to_json(v: &PyValue, tag_tuples: bool) -> J {
    let to_tagged_json = |x: &PyValue| to_json(x, tag_tuples);
    match v {
        PyValue::None => J::Null,
        PyValue::Bool(b) => J::Bool(*b),
        PyValue::Int(i) => match i.to_i64() {
            Some(n) if n.unsigned_abs() < (1u64 << 53) => J::from(n),
            _ => serde_json::json!({ "$int": i.to_string() }),
        },
        PyValue::Float(f) if f.is_finite() => J::from(*f),
        PyValue::Float(f) => serde_json::json!({ "$float": super::pyfloat::float_repr(*f) }),
        PyValue::Str(s) => J::String(s.clone()),
        PyValue::Bytes(b) => serde_json::json!({ "$bytes": hex::encode(b) }),
        PyValue::List(items) => J::Array(items.iter().map(to_tagged_json).collect()),
        PyValue::Tuple(items) if !tag_tuples => J::Array(items.iter().map(to_tagged_json).collect()),
        PyValue::Tuple(items) => serde_json::json!({ "$tuple": items.iter().map(to_tagged_json).collect::<Vec<_>>() }),
        PyValue::Set(items) => serde_json::json!({ "$set": items.iter().map(to_tagged_json).collect::<Vec<_>>() }),
        PyValue::Dict(items) if items.iter().all(|(k, _)| matches!(k, PyValue::Str(_))) => {
            let mut m = serde_json::Map::new();
            for (k, v) in items {
                if let PyValue::Str(k) = k {
                    m.insert(k.clone(), to_tagged_json(v));
                }
            }
            J::Object(m)
        }
        PyValue::Dict(items) => {
            serde_json::json!({ "$dict_items": items.iter().map(|(k, v)| J::Array(vec![to_tagged_json(k), to_tagged_json(v)])).collect::<Vec<_>>() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_integers_are_tagged() {
        assert_eq!(tag_wide_integers(r#"[1, -9223372036854775808, 18446744073709551615, 1.5e300]"#), None);
        assert_eq!(
            tag_wide_integers(r#"{"a": [18446744073709551621, "99999999999999999999"], "b": -9223372036854775809}"#)
                .unwrap(),
            r#"{"a": [{"$int": "18446744073709551621"}, "99999999999999999999"], "b": {"$int": "-9223372036854775809"}}"#
        );
        assert_eq!(
            tag_wide_integers(r#"["\"", 123456789012345678901]"#).unwrap(),
            r#"["\"", {"$int": "123456789012345678901"}]"#
        );
    }

    #[test]
    fn tags_round_trip() {
        let j: J = serde_json::from_str(r#"{"a": {"$tuple": [1, 2.5, {"$float": "-inf"}]}, "b": {"$dict_items": [[1, {"$bytes": "00ff"}], [null, {"$set": []}]]}, "c": {"$int": "-123456789012345678901234567890"}, "d": 1.0}"#).unwrap();
        let v = from_tagged_json(&j).unwrap();
        let PyValue::Dict(items) = &v else { panic!() };
        assert_eq!(items[3].1, PyValue::Float(1.0));
        assert_eq!(to_tagged_json(&v), j);
        assert!(from_tagged_json(&serde_json::json!({"$int": "1.5"})).unwrap_err().to_string().contains("$.$int"));
        assert_eq!(
            from_tagged_json(&serde_json::json!({"$dict_items": [[[1], 2]]})).unwrap_err().to_string(),
            "TypeError: unhashable type: 'list'"
        );
    }
}
