//! Python semantics the planner's messages and arithmetic depend on: integer `//` and `%` (floor rounding,
//! `ZeroDivisionError` texts of CPython 3.11+), list indexing (negative indices count from the end), and the
//! `repr` of tuples, lists and strings that vLLM's f-strings produce.

use super::error::{ExceptionKind, PlanError};

/// `a // b` on Python integers (rounds toward negative infinity).
pub(crate) fn floordiv(a: i128, b: i128) -> Result<i128, PlanError> {
    if b == 0 {
        return Err(PlanError::new(ExceptionKind::ZeroDivisionError, "integer division or modulo by zero"));
    }
    let q = a / b;
    Ok(if a % b != 0 && ((a < 0) != (b < 0)) { q - 1 } else { q })
}

/// `a % b` on Python integers (the result takes the sign of `b`).
pub(crate) fn modulo(a: i128, b: i128) -> Result<i128, PlanError> {
    if b == 0 {
        return Err(PlanError::new(ExceptionKind::ZeroDivisionError, "integer modulo by zero"));
    }
    let r = a % b;
    Ok(if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r })
}

/// `list[i]` with Python's negative indexing; `IndexError: list index out of range` outside.
pub(crate) fn index<T>(list: &[T], i: i64) -> Result<&T, PlanError> {
    let len = list.len() as i128;
    let j = if i < 0 { i as i128 + len } else { i as i128 };
    if (0..len).contains(&j) {
        Ok(&list[j as usize])
    } else {
        Err(PlanError::list_index())
    }
}

/// Narrows an exact intermediate result to `i64`, naming the quantity when it does not fit.
pub(crate) fn to_i64(v: i128, what: &str) -> Result<i64, PlanError> {
    i64::try_from(v).map_err(|_| PlanError::out_of_range(what))
}

/// `repr(tuple_of_ints)`: `()`, `(3,)`, `(0, 1)`.
pub(crate) fn tuple_repr(items: &[i64]) -> String {
    match items {
        [] => "()".into(),
        [one] => format!("({one},)"),
        _ => format!("({})", join(items)),
    }
}

/// `repr(list_of_ints)`: `[]`, `[0, 1]`.
pub(crate) fn list_repr(items: &[i64]) -> String {
    format!("[{}]", join(items))
}

fn join(items: &[i64]) -> String {
    items.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// `repr(s)` of a Python `str`: single quotes unless the text holds a `'` and no `"`; backslash, the quote,
/// `\t`, `\n`, `\r` and other control characters escaped.
pub(crate) fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_division_and_modulo_follow_python() {
        // Python: 7 // -2 == -4, -7 // 2 == -4, 7 % -2 == -1, -7 % 2 == 1.
        assert_eq!(floordiv(7, -2).unwrap(), -4);
        assert_eq!(floordiv(-7, 2).unwrap(), -4);
        assert_eq!(floordiv(-8, 2).unwrap(), -4);
        assert_eq!(floordiv(7, 2).unwrap(), 3);
        assert_eq!(modulo(7, -2).unwrap(), -1);
        assert_eq!(modulo(-7, 2).unwrap(), 1);
        assert_eq!(modulo(-8, -3).unwrap(), -2);
        assert_eq!(modulo(6, -3).unwrap(), 0);
        assert_eq!(floordiv(1, 0).unwrap_err().to_string(), "ZeroDivisionError: integer division or modulo by zero");
        assert_eq!(modulo(1, 0).unwrap_err().to_string(), "ZeroDivisionError: integer modulo by zero");
    }

    #[test]
    fn negative_list_indices_count_from_the_end() {
        let l = [10, 20, 30];
        assert_eq!(*index(&l, -1).unwrap(), 30);
        assert_eq!(*index(&l, -3).unwrap(), 10);
        assert!(index(&l, -4).is_err());
        assert!(index(&l, 3).is_err());
    }

    #[test]
    fn reprs() {
        assert_eq!(tuple_repr(&[]), "()");
        assert_eq!(tuple_repr(&[3]), "(3,)");
        assert_eq!(tuple_repr(&[0, -1]), "(0, -1)");
        assert_eq!(list_repr(&[4, 5]), "[4, 5]");
        assert_eq!(str_repr("a.b"), "'a.b'");
        assert_eq!(str_repr("it's"), "\"it's\"");
        assert_eq!(str_repr("'\""), "'\\'\"'");
        assert_eq!(str_repr("a\nb\\"), "'a\\nb\\\\'");
    }
}
