//! Equality of decoded values for invariants: floats compare by their bits, so a NaN equals itself and
//! `-0.0` differs from `0.0` (a round trip must keep both, as msgspec does).

use mooncake_wire::codec::Value;

/// Whether `a` and `b` are the same value, floats compared by their bits (everywhere in the tree).
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Dict(x), Value::Dict(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k1, v1), (k2, v2))| same(k1, k2) && same(v1, v2))
        }
        (Value::Struct(x), Value::Struct(y)) => {
            x.meta == y.meta
                && x.fields.len() == y.fields.len()
                && x.fields.iter().zip(&y.fields).all(|(p, q)| same(p, q))
        }
        _ => a == b,
    }
}

/// Whether a value holds a NaN or an infinity (JSON, and so `to_builtins` output, cannot carry them plainly).
pub fn has_nonfinite(v: &Value) -> bool {
    match v {
        Value::Float(x) => !x.is_finite(),
        Value::List(x) | Value::Tuple(x) => x.iter().any(has_nonfinite),
        Value::Dict(d) => d.iter().any(|(k, x)| has_nonfinite(k) || has_nonfinite(x)),
        Value::Struct(s) => s.fields.iter().any(has_nonfinite),
        _ => false,
    }
}
