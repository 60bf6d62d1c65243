//! The spec's type language: `int`, `str`, `bool`, `float`, `bytes`, `list[T]`, `dict[K, V]`,
//! `tuple[A, B]`, `tuple[T, ...]` (any length), `optional[T]` (also written `T | None`), `any` (Python's `Any`:
//! whatever MessagePack holds), and names of aliases, enums and structs.
//! Documented in `spec/README.md` ("Types").

use std::fmt;

/// A type of the spec's type language (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TypeExpr {
    /// `int`: any integer MessagePack carries.
    Int,
    /// `str`.
    Str,
    /// `bool`.
    Bool,
    /// `float`.
    Float,
    /// `bytes`.
    Bytes,
    /// `list[T]`.
    List(Box<TypeExpr>),
    /// `dict[K, V]`.
    Dict(Box<TypeExpr>, Box<TypeExpr>),
    /// `tuple[A, B, …]`: exactly these elements.
    Tuple(Vec<TypeExpr>),
    /// `tuple[T, ...]`: a tuple of any length (an array on the wire, like a list).
    VarTuple(Box<TypeExpr>),
    /// `optional[T]` (or `T | None`): `T` or nil.
    Optional(Box<TypeExpr>),
    /// `any`: Python's `typing.Any` — any MessagePack value, decoded untyped.
    Any,
    /// An alias, enum or struct of the same revision.
    Named(String),
}

/// A type expression that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeParseError {
    /// The whole expression.
    pub input: String,
    /// Byte offset of the problem.
    pub at: usize,
    /// What is wrong there.
    pub msg: String,
}

impl fmt::Display for TypeParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad type `{}` at offset {}: {}", self.input, self.at, self.msg)
    }
}
impl std::error::Error for TypeParseError {}

struct Parser<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn err<T>(&self, msg: impl Into<String>) -> Result<T, TypeParseError> {
        Err(TypeParseError { input: self.s.to_string(), at: self.pos, msg: msg.into() })
    }
    fn ws(&mut self) {
        while self.s[self.pos..].starts_with(' ') {
            self.pos += 1;
        }
    }
    fn eat(&mut self, c: char) -> bool {
        self.ws();
        if self.s[self.pos..].starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: char) -> Result<(), TypeParseError> {
        if self.eat(c) {
            Ok(())
        } else {
            self.err(format!("expected `{c}`"))
        }
    }
    fn ident(&mut self) -> Result<&'a str, TypeParseError> {
        self.ws();
        let start = self.pos;
        for (i, c) in self.s[start..].char_indices() {
            if !(c.is_ascii_alphanumeric() || c == '_') {
                self.pos = start + i;
                break;
            }
            self.pos = start + i + c.len_utf8();
        }
        if self.pos == start {
            return self.err("expected a type name");
        }
        Ok(&self.s[start..self.pos])
    }
    fn args(&mut self) -> Result<Vec<TypeExpr>, TypeParseError> {
        self.expect('[')?;
        let mut out = vec![self.union()?];
        while self.eat(',') {
            out.push(self.union()?);
        }
        self.expect(']')?;
        Ok(out)
    }
    fn atom(&mut self) -> Result<TypeExpr, TypeParseError> {
        let name = self.ident()?;
        let at = self.pos;
        let arity = |p: &Self, args: Vec<TypeExpr>, n: usize| -> Result<Vec<TypeExpr>, TypeParseError> {
            if args.len() == n {
                Ok(args)
            } else {
                Err(TypeParseError { input: p.s.to_string(), at, msg: format!("`{name}` takes {n} argument(s)") })
            }
        };
        Ok(match name {
            "int" => TypeExpr::Int,
            "str" => TypeExpr::Str,
            "bool" => TypeExpr::Bool,
            "float" => TypeExpr::Float,
            "bytes" => TypeExpr::Bytes,
            "any" => TypeExpr::Any,
            "list" => {
                let a = self.args()?;
                let mut a = arity(self, a, 1)?;
                TypeExpr::List(Box::new(a.remove(0)))
            }
            "optional" => {
                let a = self.args()?;
                let mut a = arity(self, a, 1)?;
                TypeExpr::Optional(Box::new(a.remove(0)))
            }
            "dict" => {
                let a = self.args()?;
                let mut a = arity(self, a, 2)?;
                let v = a.remove(1);
                TypeExpr::Dict(Box::new(a.remove(0)), Box::new(v))
            }
            "tuple" => {
                // `tuple[T, ...]`: one element type and an ellipsis.
                self.expect('[')?;
                let first = self.union()?;
                let mut out = vec![first];
                let mut var = false;
                while self.eat(',') {
                    self.ws();
                    if self.s[self.pos..].starts_with("...") {
                        self.pos += 3;
                        var = true;
                        break;
                    }
                    out.push(self.union()?);
                }
                self.expect(']')?;
                match (var, out.len()) {
                    (false, _) => TypeExpr::Tuple(out),
                    (true, 1) => TypeExpr::VarTuple(Box::new(out.remove(0))),
                    (true, _) => {
                        return Err(TypeParseError {
                            input: self.s.to_string(),
                            at,
                            msg: "`...` follows exactly one element type: `tuple[T, ...]`".into(),
                        })
                    }
                }
            }
            "None" => return self.err("`None` is only allowed as `T | None`"),
            _ => TypeExpr::Named(name.to_string()),
        })
    }
    fn union(&mut self) -> Result<TypeExpr, TypeParseError> {
        let t = self.atom()?;
        if self.eat('|') {
            let n = self.ident()?;
            if n != "None" {
                return self.err("only `T | None` unions are supported");
            }
            return Ok(TypeExpr::Optional(Box::new(t)));
        }
        Ok(t)
    }
}

impl TypeExpr {
    /// Parses a type expression (`optional[list[int]]`).
    pub fn parse(s: &str) -> Result<TypeExpr, TypeParseError> {
        let mut p = Parser { s, pos: 0 };
        let t = p.union()?;
        p.ws();
        if p.pos != s.len() {
            return p.err("unexpected trailing text");
        }
        Ok(t)
    }

    /// Python annotation syntax (`list[ReqId] | None`), as the vLLM source writes it.
    pub fn python(&self) -> String {
        match self {
            TypeExpr::Optional(t) => format!("{} | None", t.python()),
            TypeExpr::List(t) => format!("list[{}]", t.python()),
            TypeExpr::Dict(k, v) => format!("dict[{}, {}]", k.python(), v.python()),
            TypeExpr::Tuple(ts) => format!("tuple[{}]", ts.iter().map(|t| t.python()).collect::<Vec<_>>().join(", ")),
            TypeExpr::VarTuple(t) => format!("tuple[{}, ...]", t.python()),
            TypeExpr::Any => "Any".into(),
            other => other.to_string(),
        }
    }

    /// Every name this type mentions.
    pub(crate) fn names(&self, out: &mut Vec<String>) {
        match self {
            TypeExpr::Named(n) => out.push(n.clone()),
            TypeExpr::List(t) | TypeExpr::Optional(t) | TypeExpr::VarTuple(t) => t.names(out),
            TypeExpr::Dict(k, v) => {
                k.names(out);
                v.names(out);
            }
            TypeExpr::Tuple(ts) => ts.iter().for_each(|t| t.names(out)),
            _ => {}
        }
    }
}

impl fmt::Display for TypeExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeExpr::Int => f.write_str("int"),
            TypeExpr::Str => f.write_str("str"),
            TypeExpr::Bool => f.write_str("bool"),
            TypeExpr::Float => f.write_str("float"),
            TypeExpr::Bytes => f.write_str("bytes"),
            TypeExpr::List(t) => write!(f, "list[{t}]"),
            TypeExpr::Dict(k, v) => write!(f, "dict[{k}, {v}]"),
            TypeExpr::Tuple(ts) => {
                f.write_str("tuple[")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str("]")
            }
            TypeExpr::Optional(t) => write!(f, "optional[{t}]"),
            TypeExpr::VarTuple(t) => write!(f, "tuple[{t}, ...]"),
            TypeExpr::Any => f.write_str("any"),
            TypeExpr::Named(n) => f.write_str(n),
        }
    }
}

impl<'de> serde::Deserialize<'de> for TypeExpr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TypeExpr::parse(&s).map_err(serde::de::Error::custom)
    }
}
impl serde::Serialize for TypeExpr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in [
            "int",
            "dict[ReqId, tuple[TransferId, list[list[int]]]]",
            "optional[list[ReqId]]",
            "tuple[int, str, bytes]",
            "dict[int, dict[int, WorkerAddr]]",
            "list[list[tuple[int, ...]]]",
            "dict[int, tuple[dict[str, any], list[int]]]",
        ] {
            assert_eq!(TypeExpr::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(TypeExpr::parse("list[str] | None").unwrap().to_string(), "optional[list[str]]");
        assert_eq!(TypeExpr::parse("optional[list[str]]").unwrap().python(), "list[str] | None");
    }

    #[test]
    fn rejects_malformed() {
        for s in ["", "list", "list[int", "dict[int]", "int | str", "list[int]]", "None", "tuple[]"] {
            assert!(TypeExpr::parse(s).is_err(), "{s}");
        }
    }
}
