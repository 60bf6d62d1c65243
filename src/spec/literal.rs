//! Default values in the spec, written as Python literals: `None`, `True`, `False`, integers, floats,
//! quoted strings, `b"..."`, and the empty containers `[]`, `{}`, `()`. A `default_factory` of `list`,
//! `dict` or `set` is the matching empty container.

use std::fmt;

/// A field's default value.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer.
    Int(i128),
    /// A float.
    Float(f64),
    /// A quoted string (no escapes).
    Str(String),
    /// `b"..."` (no escapes).
    Bytes(Vec<u8>),
    /// `[]`, or `default_factory = "list"`.
    EmptyList,
    /// `{}`, or `default_factory = "dict"`.
    EmptyDict,
    /// `()`.
    EmptyTuple,
}

/// A default that is not a literal the spec supports.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LiteralError {
    /// Text that is none of the supported literals.
    #[error("unsupported default literal `{0}`")]
    Unsupported(String),
    /// A `default_factory` other than `list` or `dict`.
    #[error("unsupported default_factory `{0}` (list or dict)")]
    UnsupportedFactory(String),
    /// A string literal without its closing quote.
    #[error("unterminated string literal {0}")]
    Unterminated(String),
    /// A string literal with a backslash or an inner quote.
    #[error("escapes are not supported in string literals: {0}")]
    Escape(String),
    /// A field with both `default` and `default_factory`.
    #[error("field `{0}` has both default and default_factory")]
    BothDefaults(String),
}

impl Literal {
    /// Reads a Python literal as the spec writes defaults.
    pub fn parse(s: &str) -> Result<Literal, LiteralError> {
        let t = s.trim();
        Ok(match t {
            "None" => Literal::None,
            "True" => Literal::Bool(true),
            "False" => Literal::Bool(false),
            "[]" => Literal::EmptyList,
            "{}" => Literal::EmptyDict,
            "()" => Literal::EmptyTuple,
            _ if t.starts_with("b\"") || t.starts_with("b'") => Literal::Bytes(unquote(&t[1..])?.into_bytes()),
            _ if t.starts_with('"') || t.starts_with('\'') => Literal::Str(unquote(t)?),
            _ => {
                if let Ok(i) = t.parse::<i128>() {
                    Literal::Int(i)
                } else if let Ok(f) = t.parse::<f64>() {
                    Literal::Float(f)
                } else {
                    return Err(LiteralError::Unsupported(s.to_string()));
                }
            }
        })
    }

    /// The value a `default_factory` produces.
    pub fn from_factory(name: &str) -> Result<Literal, LiteralError> {
        match name {
            "list" => Ok(Literal::EmptyList),
            "dict" => Ok(Literal::EmptyDict),
            _ => Err(LiteralError::UnsupportedFactory(name.to_string())),
        }
    }
}

fn unquote(t: &str) -> Result<String, LiteralError> {
    let q = t.chars().next().unwrap();
    if t.len() < 2 || !t.ends_with(q) {
        return Err(LiteralError::Unterminated(t.to_string()));
    }
    let inner = &t[1..t.len() - 1];
    if inner.contains('\\') || inner.contains(q) {
        return Err(LiteralError::Escape(t.to_string()));
    }
    Ok(inner.to_string())
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::None => f.write_str("None"),
            Literal::Bool(true) => f.write_str("True"),
            Literal::Bool(false) => f.write_str("False"),
            Literal::Int(i) => write!(f, "{i}"),
            Literal::Float(x) => write!(f, "{x:?}"),
            Literal::Str(s) => write!(f, "{s:?}"),
            Literal::Bytes(b) => write!(f, "b{:?}", String::from_utf8_lossy(b)),
            Literal::EmptyList => f.write_str("[]"),
            Literal::EmptyDict => f.write_str("{}"),
            Literal::EmptyTuple => f.write_str("()"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parses() {
        assert_eq!(Literal::parse("None").unwrap(), Literal::None);
        assert_eq!(Literal::parse("1").unwrap(), Literal::Int(1));
        assert_eq!(Literal::parse("-5").unwrap(), Literal::Int(-5));
        assert_eq!(Literal::parse("0.5").unwrap(), Literal::Float(0.5));
        assert_eq!(Literal::parse("'ok'").unwrap(), Literal::Str("ok".into()));
        assert_eq!(Literal::parse("b''").unwrap(), Literal::Bytes(vec![]));
        assert!(Literal::parse("nope").is_err());
        assert!(Literal::parse("'a\\'").is_err());
    }
}
