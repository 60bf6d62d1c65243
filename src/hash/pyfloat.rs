//! CPython's `repr(float)`: the shortest digit string that reads back as the same double
//! (`PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0)`), written in fixed notation when the decimal point
//! falls within 16 digits of the first digit (`1e-05` → exponent, `0.0001` → fixed, `1e+16` → exponent,
//! `1000000000000000.0` → fixed), with `.0` added to whole numbers and a signed, at least two-digit exponent.
//! Non-finite values are `inf`, `-inf`, `nan`; `json.dumps` writes them as `Infinity`, `-Infinity`, `NaN`.

/// `repr(x)` for a finite or non-finite double.
pub(crate) fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let sci = shortest_sci(x);
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` always has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // CPython's `decpt`: the decimal point sits after `decpt` digits (0.d1d2... × 10^decpt).
    let decpt = exp + 1;
    let mut out = String::with_capacity(digits.len() + 8);
    if neg {
        out.push('-');
    }
    if decpt <= -4 || decpt > 16 {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        out.push('e');
        out.push(if e < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", e.unsigned_abs()));
    } else if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        out.push_str(&digits);
    } else {
        let d = decpt as usize;
        if digits.len() <= d {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', d - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..d]);
            out.push('.');
            out.push_str(&digits[d..]);
        }
    }
    out
}

/// The shortest digits that read back as `x`, as `d[.ddd]e<exp>`, chosen as David Gay's dtoa mode 0 (which
/// CPython uses) chooses them: among the shortest round-trip strings the one nearest to `x`, and on a tie the
/// one with an even last digit. Rust's `{:e}` gives the same length but breaks ties upwards
/// (`-901974502998910.25` → `…910.3`, CPython `…910.2`), so the tie is re-decided with Rust's exact,
/// round-half-even formatting at that length, kept only when it still reads back as `x`.
fn shortest_sci(x: f64) -> String {
    let shortest = format!("{x:e}");
    let mantissa = shortest.split_once('e').map_or(shortest.as_str(), |(m, _)| m);
    let n = mantissa.bytes().filter(u8::is_ascii_digit).count();
    let nearest = format!("{:.*e}", n.saturating_sub(1), x);
    if nearest != shortest && nearest.parse::<f64>() == Ok(x) {
        nearest
    } else {
        shortest
    }
}

#[cfg(test)]
mod tests {
    use super::float_repr;

    #[test]
    #[allow(clippy::approx_constant)] // 3.141592653589793 is a literal under test, not π
    fn matches_cpython_repr() {
        for (x, want) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (3.141592653589793, "3.141592653589793"),
            (123456789.123, "123456789.123"),
            (-6.514056013008414e-27, "-6.514056013008414e-27"),
            (9999999999999998.0, "9999999999999998.0"),
            // A tie between two shortest strings: CPython keeps the even digit.
            (-901_974_502_998_910.3, "-901974502998910.2"),
            (0.3, "0.3"),
            // Three times the smallest subnormal, from its bits: `2.0f64.powi(-1074)` is 0 where it is not
            // constant-folded (`powi` goes through 2^1074 = inf), as in an unoptimised build.
            (f64::from_bits(3), "1.5e-323"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(float_repr(x), want, "{x:e}");
        }
    }
}
