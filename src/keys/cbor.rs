//! `cbor2.dumps(obj, canonical=True)` (cbor2 5.x, what vLLM's `sha256_cbor` / `xxhash_cbor` hash in
//! `vllm/utils/hashing.py`) for the value shapes vLLM hashes: `None`, `bool`, `int` of any size (beyond
//! ±2^64 as tag 2/3 bignums), `float` (the shortest of half, single and double that holds it exactly; NaN
//! and infinities as half), `str`, `bytes`, and `tuple`/`list` as arrays. Lengths and integers use the
//! shortest head.

use crate::hash::{PyInt, PyValue};

/// A value this encoder does not write (vLLM never hashes one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CborError(pub String);

impl std::fmt::Display for CborError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for CborError {}

/// Canonical CBOR of a Python value.
pub(crate) fn dumps(value: &PyValue) -> Result<Vec<u8>, CborError> {
    let mut out = Vec::new();
    encode(value, &mut out, 0)?;
    Ok(out)
}

fn head(major: u8, n: u64, out: &mut Vec<u8>) {
    let m = major << 5;
    if n < 24 {
        out.push(m | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[m | 24, n as u8]);
    } else if n <= 0xffff {
        out.push(m | 25);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= 0xffff_ffff {
        out.push(m | 26);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode(v: &PyValue, out: &mut Vec<u8>, depth: usize) -> Result<(), CborError> {
    match v {
        PyValue::None => out.push(0xf6),
        PyValue::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
        PyValue::Int(i) => encode_int(i, out),
        PyValue::Float(f) => encode_float(*f, out),
        PyValue::Str(s) => {
            head(3, s.len() as u64, out);
            out.extend_from_slice(s.as_bytes());
        }
        PyValue::Bytes(b) => {
            head(2, b.len() as u64, out);
            out.extend_from_slice(b);
        }
        PyValue::Tuple(items) | PyValue::List(items) => {
            if depth >= crate::limits::MAX_HASHED_VALUE_DEPTH {
                return Err(CborError("value nested too deeply".into()));
            }
            head(4, items.len() as u64, out);
            for x in items {
                encode(x, out, depth + 1)?;
            }
        }
        other => return Err(CborError(format!("CBOR of a {} is not supported: vLLM's block hashes encode only None, bool, int, float, str, bytes and tuple", other.type_name()))),
    }
    Ok(())
}

fn encode_int(i: &PyInt, out: &mut Vec<u8>) {
    if let Some(v) = i.to_i128() {
        if (0..=u64::MAX as i128).contains(&v) {
            return head(0, v as u64, out);
        }
        if (-(u64::MAX as i128) - 1..0).contains(&v) {
            return head(1, (-(v + 1)) as u64, out);
        }
    }
    // Bignum: tag 2 with the big-endian magnitude, or tag 3 with that of -1 - n.
    let (tag, mag) = if i.is_negative() {
        let n = crate::keys::pickle::encode_long(i); // two's complement, little-endian
                                                     // -1 - n for negative n is the bitwise complement of n's two's complement.
        let mut m: Vec<u8> = n.iter().map(|b| !b).collect();
        while m.last() == Some(&0) {
            m.pop();
        }
        (3u64, m)
    } else {
        let mut m = crate::keys::pickle::encode_long(i);
        while m.last() == Some(&0) {
            m.pop();
        }
        (2u64, m)
    };
    head(6, tag, out);
    head(2, mag.len() as u64, out);
    out.extend(mag.iter().rev());
}

fn encode_float(f: f64, out: &mut Vec<u8>) {
    if f.is_nan() {
        return out.extend_from_slice(&[0xf9, 0x7e, 0x00]);
    }
    if f.is_infinite() {
        return out.extend_from_slice(if f > 0.0 { &[0xf9, 0x7c, 0x00] } else { &[0xf9, 0xfc, 0x00] });
    }
    let single = f as f32;
    if single as f64 == f && single.is_finite() {
        if let Some(h) = f16_exact(f) {
            out.push(0xf9);
            out.extend_from_slice(&h.to_be_bytes());
        } else {
            out.push(0xfa);
            out.extend_from_slice(&single.to_be_bytes());
        }
    } else {
        out.push(0xfb);
        out.extend_from_slice(&f.to_be_bytes());
    }
}

/// The IEEE binary16 bits of a finite double, if it holds it exactly.
fn f16_exact(x: f64) -> Option<u16> {
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a == 0.0 {
        return Some(sign);
    }
    if a >= 2f64.powi(-14) {
        let bits = a.to_bits();
        let e = ((bits >> 52) & 0x7ff) as i32 - 1023;
        let mant = bits & ((1u64 << 52) - 1);
        if e > 15 || mant & ((1u64 << 42) - 1) != 0 {
            return None;
        }
        Some(sign | (((e + 15) as u16) << 10) | (mant >> 42) as u16)
    } else {
        let m = a * 2f64.powi(24);
        if m.fract() != 0.0 || m >= 1024.0 {
            return None;
        }
        Some(sign | m as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex::encode as hex;

    #[test]
    fn matches_cbor2_canonical() {
        let c = |v: PyValue| hex(dumps(&v).unwrap());
        assert_eq!(c(PyValue::str("vllm-none-hash")), "6e766c6c6d2d6e6f6e652d68617368");
        assert_eq!(
            c(PyValue::Tuple(vec![
                PyValue::Bytes(vec![0; 2]),
                PyValue::Tuple(vec![
                    PyValue::int(0),
                    PyValue::int(23),
                    PyValue::int(24),
                    PyValue::int(-1),
                    PyValue::int(-25)
                ]),
                PyValue::None
            ])),
            "8342000085001718182038".to_string() + "18f6"
        );
        assert_eq!(c(PyValue::int(u64::MAX)), "1bffffffffffffffff");
        assert_eq!(c(PyValue::Int(PyInt::parse("18446744073709551616").unwrap())), "c249010000000000000000");
        assert_eq!(c(PyValue::Int(PyInt::parse("-18446744073709551616").unwrap())), "3bffffffffffffffff");
        assert_eq!(c(PyValue::Int(PyInt::parse("-18446744073709551617").unwrap())), "c349010000000000000000");
        assert_eq!(c(PyValue::Float(1.5)), "f93e00");
        assert_eq!(c(PyValue::Float(-0.0)), "f98000");
        assert_eq!(c(PyValue::Float(65504.0)), "f97bff");
        assert_eq!(c(PyValue::Float(5.960464477539063e-8)), "f90001");
        assert_eq!(c(PyValue::Float(100000.0)), "fa47c35000");
        assert_eq!(c(PyValue::Float(0.1)), "fb3fb999999999999a");
        assert_eq!(c(PyValue::Float(f64::NAN)), "f97e00");
        assert_eq!(c(PyValue::Float(1e300)), "fb7e37e43c8800759c");
    }
}
