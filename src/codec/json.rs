//! Value trees as JSON: [`to_json`] is `msgspec.to_builtins` (what the vector files hold), [`from_json`] reads
//! such JSON back guided by a spec type (for `encode` on the command line and for tests).

use serde_json::{Map, Number, Value as J};

use super::compile::{Plan, Ty, TyId};
use super::error::FromJsonError;
use super::value::{StructValue, Value};
use crate::msgpack::WireInt;

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64_encode(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                s.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fn b64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes() {
        acc = acc << 6 | B64.iter().position(|&x| x == c)? as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

fn int_json(i: WireInt) -> J {
    match (i.as_u64(), i.as_i64()) {
        (Some(u), _) => J::Number(u.into()),
        (None, Some(s)) => J::Number(s.into()),
        _ => unreachable!("WireInt is always within u64 or i64"),
    }
}

/// `msgspec.to_builtins`: structs become objects of every field in order, tuples arrays, enums their value,
/// bytes base64 text, dict keys their string form.
pub(crate) fn to_json(v: &Value) -> J {
    match v {
        Value::None => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => int_json(*i),
        // JSON has no NaN or infinities: tagged as in the golden files (`{"$float": "inf"}`).
        Value::Float(x) => Number::from_f64(*x).map(J::Number).unwrap_or_else(|| {
            let mut m = Map::new();
            m.insert(
                "$float".into(),
                J::String(if x.is_nan() {
                    "nan".into()
                } else if *x > 0.0 {
                    "inf".into()
                } else {
                    "-inf".into()
                }),
            );
            J::Object(m)
        }),
        Value::Str(s) => J::String(s.clone()),
        Value::Bytes(b) => J::String(b64_encode(b)),
        Value::List(xs) | Value::Tuple(xs) => J::Array(xs.iter().map(to_json).collect()),
        Value::IntList(xs) => J::Array(xs.iter().map(|i| int_json(*i)).collect()),
        Value::StrList(xs) => J::Array(xs.iter().map(|s| J::String(s.to_owned())).collect()),
        Value::Dict(d) => {
            let mut m = Map::new();
            for (k, x) in d {
                let key = match k {
                    Value::Str(s) => s.clone(),
                    other => match to_json(other) {
                        J::String(s) => s,
                        j => j.to_string(),
                    },
                };
                m.insert(key, to_json(x));
            }
            J::Object(m)
        }
        Value::Enum(e) => J::Number(e.value.into()),
        Value::Struct(s) => {
            let mut m = Map::new();
            for (n, x) in s.iter() {
                m.insert(n.to_string(), to_json(x));
            }
            J::Object(m)
        }
    }
}

/// JSON as an untyped (`any`) value: objects become dicts with str keys, integers ints, other numbers floats.
fn any_from_json(j: &J) -> Value {
    match j {
        J::Null => Value::None,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Value::Int(u.into()),
            (None, Some(i)) => Value::Int(i.into()),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::Str(s.clone()),
        J::Array(xs) => Value::List(xs.iter().map(any_from_json).collect()),
        J::Object(m) => Value::Dict(m.iter().map(|(k, x)| (Value::Str(k.clone()), any_from_json(x))).collect()),
    }
}

/// Reads JSON as a value of type `ty`: the inverse of [`to_json`]. Struct objects may leave out defaulted
/// fields; unknown keys are an error.
pub(crate) fn from_json(plan: &Plan, ty: TyId, j: &J, path: &str) -> Result<Value, FromJsonError> {
    let bad = |what: &str| {
        Err(FromJsonError::Expected { path: path.to_string(), expected: what.to_string(), found: j.to_string() })
    };
    Ok(match (&plan.types[ty as usize], j) {
        (Ty::Optional(_), J::Null) => Value::None,
        (Ty::Optional(inner), _) => from_json(plan, *inner, j, path)?,
        (Ty::Int, J::Number(n)) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Value::Int(u.into()),
            (None, Some(i)) => Value::Int(i.into()),
            _ => return bad("an integer"),
        },
        (Ty::Float, J::Number(n)) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        (Ty::Bool, J::Bool(b)) => Value::Bool(*b),
        (Ty::Str, J::String(s)) => Value::Str(s.clone()),
        (Ty::Bytes, J::String(s)) => {
            Value::Bytes(b64_decode(s).ok_or_else(|| FromJsonError::BadBase64 { path: path.to_string() })?)
        }
        (Ty::Enum(e), J::Number(n)) => {
            let w = n
                .as_i64()
                .map(WireInt::from)
                .ok_or_else(|| FromJsonError::BadEnumValue { path: path.to_string(), value: n.to_string() })?;
            Value::Enum(
                plan.enums[*e as usize]
                    .member(w)
                    .ok_or_else(|| FromJsonError::NotAMember { path: path.to_string(), value: n.to_string() })?,
            )
        }
        (Ty::Enum(e), J::String(name)) => {
            let en = &plan.enums[*e as usize];
            let (n, v) = en
                .members
                .iter()
                .find(|(n, _)| &**n == name)
                .ok_or_else(|| FromJsonError::NoMember { path: path.to_string(), name: name.clone() })?;
            Value::Enum(super::value::EnumValue { name: n.clone(), value: *v })
        }
        (Ty::List(elem), J::Array(xs)) => Value::list_of(
            &plan.types[*elem as usize],
            xs.iter()
                .enumerate()
                .map(|(i, x)| from_json(plan, *elem, x, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        (Ty::VarTuple(elem), J::Array(xs)) => Value::Tuple(
            xs.iter()
                .enumerate()
                .map(|(i, x)| from_json(plan, *elem, x, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        (Ty::Any, _) => any_from_json(j),
        (Ty::Tuple(elems), J::Array(xs)) => {
            if xs.len() != elems.len() {
                return bad(&format!("an array of {} elements", elems.len()));
            }
            Value::Tuple(
                elems
                    .iter()
                    .zip(xs)
                    .enumerate()
                    .map(|(i, (e, x))| from_json(plan, *e, x, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        }
        (Ty::Dict(kt, vt), J::Object(m)) => {
            let mut out = Vec::with_capacity(m.len());
            for (k, x) in m {
                let key = match &plan.types[*kt as usize] {
                    Ty::Str => Value::Str(k.clone()),
                    _ => {
                        let kj: J = serde_json::from_str(k)
                            .map_err(|_| FromJsonError::BadKey { path: path.to_string(), key: k.clone() })?;
                        from_json(plan, *kt, &kj, &format!("{path}[key]"))?
                    }
                };
                out.push((key, from_json(plan, *vt, x, &format!("{path}[...]"))?));
            }
            Value::Dict(out)
        }
        (Ty::Struct(sid), J::Object(m)) => {
            let st = &plan.structs[*sid as usize];
            for k in m.keys() {
                if !st.fields.iter().any(|f| &f.name == k) {
                    return Err(FromJsonError::UnknownField {
                        path: path.to_string(),
                        owner: st.meta.name.clone(),
                        field: k.clone(),
                    });
                }
            }
            let mut fields = Vec::with_capacity(st.fields.len());
            for f in &st.fields {
                fields.push(match (m.get(&f.name), &f.default) {
                    (Some(x), _) => from_json(plan, f.ty, x, &format!("{path}.{}", f.name))?,
                    (None, Some(d)) => d.clone(),
                    (None, None) if f.const_value.is_some() => f.const_value.clone().unwrap_or(Value::None),
                    (None, None) => {
                        return Err(FromJsonError::MissingField { path: path.to_string(), field: f.name.clone() })
                    }
                });
            }
            Value::Struct(StructValue { meta: st.meta.clone(), fields })
        }
        (t, _) => return bad(&format!("{t:?}").to_lowercase()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn base64_round_trip() {
        for b in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0xff, 0x00, 0x10]] {
            assert_eq!(b64_decode(&b64_encode(b)).unwrap(), b);
        }
        assert_eq!(b64_encode(b"ab"), "YWI=");
    }
}
