//! The typed layer, generated from `spec/` (issue 16): for every revision of both families, one Rust struct per
//! MessagePack struct of the spec with its field list, required mask, defaults, decoder and encoder; the int
//! enums as open newtypes with the terminal flags of the spec; the control-tuple tags as an open newtype; the
//! raw reply constants; and a table of every revision for dispatch. The output is
//! `src/typed/generated/push.rs`, `src/typed/generated/pull.rs` and (the push family's conversions to and
//! from its newest revision) `src/typed/generated/via_newest.rs`, committed and kept fresh by
//! `tests/generated.rs` like `schema/` (`BLESS=1 cargo test --test generated` rewrites them).
//!
//! The generated decoders are straight-line code over the toolkit of `src/typed/de.rs` (the same path and
//! error stack as the spec-driven codec, `src/codec/path.rs`); they hold no rule of their own, so a revision
//! added to `spec/` needs no hand edit here. The type vocabulary: `str` (and aliases of it), `int`, `bool`,
//! `bytes`, `any`, lists and `tuple[T, ...]` of any of these, fixed tuples, `dict` with `int` or `str` keys,
//! `optional[str]`, `optional[list[str]]`, an int enum, a nested struct encoded as a map, and the push
//! family's `req_blocks` value (`tuple[str, list[list[int]]]` or, before 0.20.0, `tuple[str, list[int]]`,
//! held as [`crate::typed::ReqBlocks`]). Messages are `msgspec.Struct`s encoded as maps, dataclasses, and
//! tuples (whose `bytes` constants, the control tags, are checked and written but not stored). Anything else
//! is an error naming the field, so a revision using a new type fails to generate instead of generating
//! something wrong.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::spec::{EnumDef, Family, FieldDef, Literal, Revision, Spec, StructDef, StructKind, TypeExpr};

/// Where the generated push layer is written, relative to the repository root.
pub const PUSH_PATH: &str = "src/typed/generated/push.rs";
/// Where the generated pull layer (vllm-ascend) is written, relative to the repository root.
pub const PULL_PATH: &str = "src/typed/generated/pull.rs";
/// Where the conversions between each push revision and the newest are written (`from_newest`, `to_newest`,
/// the `…_VIA_NEWEST` codecs the sans-IO cores use): apart from `push.rs`, so a change to the newest revision
/// shows in the older revisions' conversions only.
pub(crate) const VIA_NEWEST_PATH: &str = "src/typed/generated/via_newest.rs";

/// Why the typed layer cannot be generated from a spec ([`sources`]): something the spec says that the
/// generator does not write, or revisions of a family that do not agree (a tag, an enum member).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GenerateError {
    /// The spec has no family of this name (`push`, `pull`).
    #[error("the spec has no {0} family")]
    NoFamily(&'static str),
    /// A family without a revision, or without a released one.
    #[error("the {family} family has no {}revision", if *.released { "released " } else { "" })]
    NoRevision {
        /// The family.
        family: String,
        /// A released revision was looked for.
        released: bool,
    },
    /// A type the generator has no Rust shape for.
    #[error("unsupported type {ty}{}", .why.map(|w| format!(" ({w})")).unwrap_or_default())]
    UnsupportedType {
        /// The type, as the spec writes it.
        ty: String,
        /// What rules it out, when more than its kind.
        why: Option<&'static str>,
    },
    /// A struct that holds itself (directly or through others).
    #[error("struct {0} holds itself")]
    HoldsItself(String),
    /// A default (or fallback) value the generator cannot write for a field of this shape.
    #[error("unsupported default {default} for a field of shape {shape}")]
    UnsupportedDefault {
        /// The literal, rendered.
        default: String,
        /// The field's Rust shape, rendered.
        shape: String,
    },
    /// An int default outside the MessagePack range.
    #[error("default {0} is out of the wire's range")]
    DefaultOutOfRange(i128),
    /// A message name that is no struct of the revision.
    #[error("{revision}: no struct {name}")]
    NoStruct {
        /// The revision.
        revision: String,
        /// The name.
        name: String,
    },
    /// A struct kind and options the generator does not write (array-like, tagged, renamed, ...).
    #[error("{revision}: {name} is a {kind} with options {options}, which the generator does not write")]
    UnsupportedStruct {
        /// The revision.
        revision: String,
        /// The struct.
        name: String,
        /// Its kind, rendered.
        kind: String,
        /// Its options, rendered.
        options: String,
    },
    /// A struct with more fields than a required-field mask holds.
    #[error("{revision}: {name} has more than 64 fields")]
    TooManyFields {
        /// The revision.
        revision: String,
        /// The struct.
        name: String,
    },
    /// A default or constant that is not a literal the spec supports.
    #[error(transparent)]
    Literal(#[from] crate::spec::LiteralError),
    /// A tuple message's constant other than `bytes` (rendered).
    #[error("a constant {0} (only bytes constants are written)")]
    UnsupportedConstant(String),
    /// A constant on a field of a map-encoded struct.
    #[error("a constant in a map-encoded struct")]
    ConstantInMap,
    /// A default on a field of a tuple message.
    #[error("a tuple has no defaults")]
    TupleDefault,
    /// A field the newest revision has and an older one lacks, with no value it stands at when absent.
    #[error("no value it stands at when absent")]
    NoFallback,
    /// Two field shapes the generated conversions cannot turn into each other.
    #[error("no conversion from {from} to {to}")]
    NoConversion {
        /// The source shape, rendered.
        from: String,
        /// The target shape, rendered.
        to: String,
    },
    /// A control tuple whose tag differs from an earlier revision's, or a tag another message had.
    #[error("{revision}: {name} is tagged {tag} here; {earlier} was tagged {earlier_tag} before")]
    TagClash {
        /// The revision.
        revision: String,
        /// The message.
        name: String,
        /// Its tag here (Python bytes repr).
        tag: String,
        /// The message seen with either before.
        earlier: String,
        /// Its tag then.
        earlier_tag: String,
    },
    /// An enum that is not an `IntEnum`.
    #[error("{revision}: enum {name} is a {kind}, not an IntEnum")]
    NotIntEnum {
        /// The revision.
        revision: String,
        /// The enum.
        name: String,
        /// Its kind.
        kind: String,
    },
    /// An enum value named differently than in an earlier revision.
    #[error("{revision}: {name} value {value} is {member} here and {earlier} before")]
    MemberRenamed {
        /// The revision.
        revision: String,
        /// The enum.
        name: String,
        /// The value, rendered.
        value: String,
        /// Its name here.
        member: String,
        /// Its name before.
        earlier: String,
    },
    /// The error is about this field of a struct of a revision.
    #[error("{revision}: {owner}.{field}: {source}")]
    InField {
        /// The revision.
        revision: String,
        /// The struct.
        owner: String,
        /// The field.
        field: String,
        /// What is wrong.
        source: Box<GenerateError>,
    },
}

/// Every generated typed source, as (path relative to the repository root, contents).
pub fn sources(spec: &Spec) -> Result<BTreeMap<String, String>, GenerateError> {
    let push = spec.family("push").ok_or(GenerateError::NoFamily("push"))?;
    let pull = spec.family("pull").ok_or(GenerateError::NoFamily("pull"))?;
    Ok(BTreeMap::from([
        (PUSH_PATH.to_string(), family_types(push)?),
        (VIA_NEWEST_PATH.to_string(), via_newest(push)?),
        (PULL_PATH.to_string(), family_types(pull)?),
    ]))
}

/// The Rust shape of one field's spec type: the push family's hot shapes by name (their decoders are the
/// hand-tuned loops of `de.rs`), anything else as a [`Gt`] tree.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Shape {
    Str,
    Int,
    ListInt,
    ListStr,
    ListListInt,
    OptStr,
    OptListStr,
    /// An int enum of the revision, by its spec name.
    Enum(String),
    /// `dict[str, tuple[str, list[list[int]]]]`.
    ReqBlocks,
    /// `dict[str, tuple[str, list[int]]]` (flat block lists, before 0.20.0).
    FlatReqBlocks,
    /// Any other type of the vocabulary.
    Gen(Gt),
}

/// A type of the general vocabulary, recursively.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Gt {
    Int,
    Str,
    Bool,
    Bytes,
    /// Python's `Any`: [`crate::typed::Untyped`].
    Any,
    /// `list[T]` or `tuple[T, ...]` (the same on the wire).
    List(Box<Gt>),
    Tuple(Vec<Gt>),
    /// A dict with `int` or `str` keys, held as its entries in wire order.
    Dict(Box<Gt>, Box<Gt>),
    /// A struct of the same revision encoded as a map; `generic` when it holds strings (so is `…Of<S>`), `eq`
    /// when it can derive `Eq` (holds no `any`).
    Struct {
        name: String,
        generic: bool,
        eq: bool,
    },
}

fn resolve<'a>(rev: &'a Revision, t: &'a TypeExpr) -> &'a TypeExpr {
    let mut t = t;
    while let TypeExpr::Named(n) = t {
        match rev.aliases.get(n) {
            Some(a) => t = &a.ty,
            None => break,
        }
    }
    t
}

/// `stack`: the structs being resolved (a struct holding itself is refused).
fn shape(rev: &Revision, t: &TypeExpr, stack: &mut Vec<String>) -> Result<Shape, GenerateError> {
    use TypeExpr as T;
    let r = |t| resolve(rev, t);
    let fast = match r(t) {
        T::Str => Some(Shape::Str),
        T::Int => Some(Shape::Int),
        T::Named(n) if rev.enums.get(n).is_some_and(|e| e.kind == "IntEnum") => Some(Shape::Enum(n.clone())),
        T::List(e) => match r(e) {
            T::Int => Some(Shape::ListInt),
            T::Str => Some(Shape::ListStr),
            T::List(e2) if *r(e2) == T::Int => Some(Shape::ListListInt),
            _ => None,
        },
        T::Optional(e) => match r(e) {
            T::Str => Some(Shape::OptStr),
            T::List(e2) if *r(e2) == T::Str => Some(Shape::OptListStr),
            _ => return Err(GenerateError::UnsupportedType { ty: t.to_string(), why: None }),
        },
        T::Dict(k, v) if *r(k) == T::Str => match r(v) {
            T::Tuple(items) if items.len() == 2 && *r(&items[0]) == T::Str => match r(&items[1]) {
                T::List(e) if *r(e) == T::Int => Some(Shape::FlatReqBlocks),
                T::List(e) if matches!(r(e), T::List(e2) if *r(e2) == T::Int) => Some(Shape::ReqBlocks),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    };
    match fast {
        Some(s) => Ok(s),
        None => gt(rev, t, stack).map(Shape::Gen),
    }
}

fn gt(rev: &Revision, t: &TypeExpr, stack: &mut Vec<String>) -> Result<Gt, GenerateError> {
    use TypeExpr as T;
    Ok(match resolve(rev, t) {
        T::Int => Gt::Int,
        T::Str => Gt::Str,
        T::Bool => Gt::Bool,
        T::Bytes => Gt::Bytes,
        T::Any => Gt::Any,
        T::List(e) | T::VarTuple(e) => Gt::List(Box::new(gt(rev, e, stack)?)),
        T::Tuple(items) => Gt::Tuple(items.iter().map(|e| gt(rev, e, stack)).collect::<Result<_, _>>()?),
        T::Dict(k, v) => {
            let k = gt(rev, k, stack)?;
            if !matches!(k, Gt::Int | Gt::Str) {
                return Err(GenerateError::UnsupportedType {
                    ty: t.to_string(),
                    why: Some("dict keys are int or str"),
                });
            }
            Gt::Dict(Box::new(k), Box::new(gt(rev, v, stack)?))
        }
        T::Named(n) if rev.structs.contains_key(n) => {
            if stack.contains(n) {
                return Err(GenerateError::HoldsItself(n.clone()));
            }
            stack.push(n.clone());
            let m = Message::resolve(rev, n, stack);
            stack.pop();
            let m = m?;
            if m.kind == Kind::Tuple {
                return Err(GenerateError::UnsupportedType {
                    ty: t.to_string(),
                    why: Some("a tuple message inside another type"),
                });
            }
            Gt::Struct { name: n.clone(), generic: m.generic(), eq: m.is_eq() }
        }
        _ => return Err(GenerateError::UnsupportedType { ty: t.to_string(), why: None }),
    })
}

impl Gt {
    fn rust(&self) -> String {
        match self {
            Gt::Int => "WireInt".into(),
            Gt::Str => "S".into(),
            Gt::Bool => "bool".into(),
            Gt::Bytes => "Vec<u8>".into(),
            Gt::Any => "Untyped".into(),
            Gt::List(e) => format!("Vec<{}>", e.rust()),
            Gt::Tuple(items) => tuple_of(items.iter().map(Gt::rust).collect()),
            Gt::Dict(k, v) => format!("Vec<({}, {})>", k.rust(), v.rust()),
            Gt::Struct { name, generic: true, .. } => format!("{name}Of<S>"),
            Gt::Struct { name, .. } => name.clone(),
        }
    }
    fn has_strings(&self) -> bool {
        match self {
            Gt::Str => true,
            Gt::List(e) => e.has_strings(),
            Gt::Tuple(items) => items.iter().any(Gt::has_strings),
            Gt::Dict(k, v) => k.has_strings() || v.has_strings(),
            Gt::Struct { generic, .. } => *generic,
            Gt::Int | Gt::Bool | Gt::Bytes | Gt::Any => false,
        }
    }
    fn is_eq(&self) -> bool {
        match self {
            Gt::Any => false,
            Gt::List(e) => e.is_eq(),
            Gt::Tuple(items) => items.iter().all(Gt::is_eq),
            Gt::Dict(k, v) => k.is_eq() && v.is_eq(),
            Gt::Struct { eq, .. } => *eq,
            Gt::Int | Gt::Str | Gt::Bool | Gt::Bytes => true,
        }
    }
    /// Structs this type holds, by name.
    fn structs(&self, out: &mut Vec<String>) {
        match self {
            Gt::List(e) => e.structs(out),
            Gt::Tuple(items) => items.iter().for_each(|e| e.structs(out)),
            Gt::Dict(k, v) => {
                k.structs(out);
                v.structs(out)
            }
            Gt::Struct { name, .. } => out.push(name.clone()),
            _ => {}
        }
    }
    /// An expression decoding one value with `d` (a `&mut De`).
    fn decode(&self) -> String {
        match self {
            Gt::Int => "d.int()?".into(),
            Gt::Str => "d.str()?".into(),
            Gt::Bool => "d.bool()?".into(),
            Gt::Bytes => "d.bytes()?".into(),
            Gt::Any => "d.any()?".into(),
            Gt::List(e) => match &**e {
                Gt::Int => "d.list_int()?".into(),
                Gt::Str => "d.list_str()?".into(),
                Gt::List(e2) if **e2 == Gt::Int => "d.list_list_int()?".into(),
                e => format!("d.list_of(|d| Ok({}))?", e.decode()),
            },
            Gt::Tuple(items) => {
                let parts: Vec<String> =
                    items.iter().enumerate().map(|(i, e)| format!("d.item({i}, |d| Ok({}))?", e.decode())).collect();
                format!("d.tuple({}, |d| Ok({}))?", items.len(), tuple_of(parts))
            }
            Gt::Dict(k, v) => match **k {
                Gt::Str => format!("d.str_dict(|d| Ok({}))?", v.decode()),
                _ => format!("d.int_dict(|d| Ok({}))?", v.decode()),
            },
            Gt::Struct { name, generic: true, .. } => format!("{name}Of::decode_in(d, strictness)?"),
            Gt::Struct { name, .. } => format!("{name}::decode_in(d, strictness)?"),
        }
    }
    /// Statements writing `r` (an expression of type `&T`) to `w`; `depth` names the loop variables.
    fn encode(&self, r: &str, depth: usize) -> String {
        match self {
            Gt::Int => format!("w.int(*{r});"),
            Gt::Str => format!("w.str({r}.as_ref());"),
            Gt::Bool => format!("w.bool(*{r});"),
            Gt::Bytes => format!("w.bin({r});"),
            Gt::Any | Gt::Struct { .. } => format!("{r}.encode_into(w);"),
            Gt::List(e) => match &**e {
                Gt::Int => format!("w.int_list({r});"),
                Gt::Str => format!("str_list(w, {r});"),
                Gt::List(e2) if **e2 == Gt::Int => format!("int_lists(w, {r});"),
                e => format!(
                    "w.array_len({r}.len());\nfor x{depth} in {r}.iter() {{\n{}\n}}",
                    indent(&e.encode(&format!("x{depth}"), depth + 1))
                ),
            },
            Gt::Tuple(items) => {
                let mut s = format!("w.array_len({});", items.len());
                for (i, e) in items.iter().enumerate() {
                    s.push('\n');
                    s.push_str(&e.encode(&format!("(&{r}.{i})"), depth));
                }
                s
            }
            Gt::Dict(k, v) => format!(
                "w.map_len({r}.len());\nfor (k{depth}, x{depth}) in {r}.iter() {{\n{}\n{}\n}}",
                indent(&k.encode(&format!("k{depth}"), depth + 1)),
                indent(&v.encode(&format!("x{depth}"), depth + 1))
            ),
        }
    }
    /// An upper bound of the encoded size of `r` (`&T`), for the writer's first allocation (`any`: a guess).
    fn len_hint(&self, r: &str, depth: usize) -> String {
        match self {
            Gt::Int => "9".into(),
            Gt::Bool => "1".into(),
            Gt::Str => format!("({r}.as_ref().len() + 5)"),
            Gt::Bytes => format!("({r}.len() + 5)"),
            Gt::Any => "16".into(),
            Gt::Struct { .. } => format!("{r}.encoded_len_hint()"),
            Gt::List(e) if **e == Gt::Int => format!("(5 + 9 * {r}.len())"),
            Gt::List(e) => format!(
                "(5 + {r}.iter().map(|x{depth}| {}).sum::<usize>())",
                e.len_hint(&format!("x{depth}"), depth + 1)
            ),
            Gt::Tuple(items) => {
                let parts: Vec<String> =
                    items.iter().enumerate().map(|(i, e)| e.len_hint(&format!("(&{r}.{i})"), depth)).collect();
                format!("(1 + {})", parts.join(" + "))
            }
            Gt::Dict(k, v) => format!(
                "(5 + {r}.iter().map(|(k{depth}, x{depth})| {} + {}).sum::<usize>())",
                k.len_hint(&format!("k{depth}"), depth + 1),
                v.len_hint(&format!("x{depth}"), depth + 1)
            ),
        }
    }
    /// `r` (`&T` with borrowed strings) with owned strings.
    fn owned(&self, r: &str, depth: usize) -> String {
        if !self.has_strings() {
            return format!("{r}.clone()");
        }
        match self {
            Gt::Str => format!("{r}.to_string()"),
            Gt::List(e) => {
                format!("{r}.iter().map(|x{depth}| {}).collect()", e.owned(&format!("x{depth}"), depth + 1))
            }
            Gt::Tuple(items) => {
                let parts: Vec<String> =
                    items.iter().enumerate().map(|(i, e)| e.owned(&format!("(&{r}.{i})"), depth)).collect();
                tuple_of(parts)
            }
            Gt::Dict(k, v) => format!(
                "{r}.iter().map(|(k{depth}, x{depth})| ({}, {})).collect()",
                k.owned(&format!("k{depth}"), depth + 1),
                v.owned(&format!("x{depth}"), depth + 1)
            ),
            Gt::Struct { .. } => format!("{r}.to_owned_message()"),
            _ => unreachable!("only the shapes above hold strings"),
        }
    }
    fn neutral(&self) -> String {
        match self {
            Gt::Int => "WireInt::ZERO".into(),
            Gt::Str => "S::default()".into(),
            Gt::Bool => "false".into(),
            Gt::Any => "Untyped::Nil".into(),
            Gt::Bytes | Gt::List(_) | Gt::Dict(..) => "Vec::new()".into(),
            Gt::Tuple(items) => tuple_of(items.iter().map(Gt::neutral).collect()),
            Gt::Struct { .. } => "Default::default()".into(),
        }
    }
}

/// A Rust tuple of `parts` (a one-element tuple keeps its comma).
fn tuple_of(parts: Vec<String>) -> String {
    if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}

impl Shape {
    fn rust(&self) -> String {
        match self {
            Shape::Str => "S".into(),
            Shape::Int => "WireInt".into(),
            Shape::ListInt => "Vec<WireInt>".into(),
            Shape::ListStr => "Vec<S>".into(),
            Shape::ListListInt => "Vec<Vec<WireInt>>".into(),
            Shape::OptStr => "Option<S>".into(),
            Shape::OptListStr => "Option<StrList>".into(),
            Shape::Enum(n) => n.clone(),
            Shape::ReqBlocks => "Vec<(S, ReqBlocksOf<S>)>".into(),
            Shape::FlatReqBlocks => "Vec<(S, FlatReqBlocksOf<S>)>".into(),
            Shape::Gen(g) => g.rust(),
        }
    }
    fn decode(&self) -> String {
        match self {
            Shape::Str => "d.str()?".into(),
            Shape::Int => "d.int()?".into(),
            Shape::ListInt => "d.list_int()?".into(),
            Shape::ListStr => "d.list_str()?".into(),
            Shape::ListListInt => "d.list_list_int()?".into(),
            Shape::OptStr => "d.opt_str()?".into(),
            Shape::OptListStr => "d.opt_str_list()?".into(),
            Shape::Enum(e) => format!("d.enum_member(&{}, strictness)?", enum_members_const(e)),
            Shape::ReqBlocks => "d.str_dict(De::blocks_value)?".into(),
            Shape::FlatReqBlocks => "d.str_dict(De::flat_blocks_value)?".into(),
            Shape::Gen(g) => g.decode(),
        }
    }
    /// Statements writing `v` (an expression of this shape, by reference) to `w`.
    fn encode(&self, v: &str) -> String {
        match self {
            Shape::Str => format!("w.str({v}.as_ref());"),
            Shape::Int => format!("w.int({v});"),
            Shape::ListInt => format!("w.int_list(&{v});"),
            Shape::ListStr => format!("str_list(w, &{v});"),
            Shape::ListListInt => format!("int_lists(w, &{v});"),
            Shape::OptStr => format!("if let Some(s) = &{v} {{ w.str(s.as_ref()) }} else {{ w.nil() }}"),
            Shape::OptListStr => format!("if let Some(l) = &{v} {{ write_str_list(w, l) }} else {{ w.nil() }}"),
            Shape::Enum(_) => format!("w.sint({v}.0);"),
            Shape::ReqBlocks | Shape::FlatReqBlocks => format!("encode_req_blocks(w, &{v});"),
            Shape::Gen(g) => g.encode(&format!("(&{v})"), 0),
        }
    }
    /// An upper bound of the encoded size of `v` (for the writer's first allocation).
    fn len_hint(&self, v: &str) -> String {
        match self {
            Shape::Str => format!("{v}.as_ref().len() + 5"),
            Shape::Int | Shape::Enum(_) => "9".into(),
            Shape::ListInt => format!("5 + 9 * {v}.len()"),
            Shape::ListStr => format!("str_list_len(&{v})"),
            Shape::ListListInt => format!("5 + {v}.iter().map(|g| 5 + 9 * g.len()).sum::<usize>()"),
            Shape::OptStr => format!("{v}.as_ref().map_or(1, |s| s.as_ref().len() + 5)"),
            Shape::OptListStr => format!("{v}.as_ref().map_or(1, str_list_buf_len)"),
            Shape::ReqBlocks | Shape::FlatReqBlocks => format!("req_blocks_len(&{v})"),
            Shape::Gen(g) => g.len_hint(&format!("(&{v})"), 0),
        }
    }
    /// The field of a borrowed message as an owned one.
    fn to_owned(&self, v: &str) -> String {
        match self {
            Shape::Str => format!("{v}.to_string()"),
            Shape::Int | Shape::Enum(_) => v.to_string(),
            Shape::ListInt | Shape::ListListInt => format!("{v}.clone()"),
            Shape::ListStr => format!("{v}.iter().map(|s| s.to_string()).collect()"),
            Shape::OptStr => format!("{v}.map(str::to_string)"),
            Shape::OptListStr => format!("{v}.clone()"),
            Shape::ReqBlocks | Shape::FlatReqBlocks => {
                format!("{v}.iter().map(|(k, b)| (k.to_string(), b.to_owned_blocks())).collect()")
            }
            Shape::Gen(g) => g.owned(&format!("(&{v})"), 0),
        }
    }
    /// The value a field holds when absent: the literal of `Revision::fallback_value` (its spec default, or
    /// for a required field the neutral value of its type), or for a type without one (a struct, a tuple) its
    /// `Default`.
    fn default_value(
        &self,
        fallback: Option<&Literal>,
        enums: &BTreeMap<String, EnumDef>,
    ) -> Result<String, GenerateError> {
        Ok(match (self, fallback) {
            (Shape::Str | Shape::Gen(Gt::Str), Some(Literal::Str(s))) if s.is_empty() => "S::default()".into(),
            (Shape::Int | Shape::Gen(Gt::Int), Some(Literal::Int(n))) => int_expr(*n)?,
            (
                Shape::ListInt | Shape::ListStr | Shape::ListListInt | Shape::Gen(Gt::List(_)),
                Some(Literal::EmptyList),
            )
            | (Shape::ReqBlocks | Shape::FlatReqBlocks | Shape::Gen(Gt::Dict(..)), Some(Literal::EmptyDict)) => {
                "Vec::new()".into()
            }
            (Shape::OptStr | Shape::OptListStr, Some(Literal::None)) => "None".into(),
            (Shape::Enum(n), Some(Literal::Int(v))) => {
                match enums.get(n).and_then(|e| e.members.iter().find(|m| i128::from(m.value) == *v)) {
                    Some(m) => format!("{n}::{}", m.name),
                    None => format!("{n}({v})"),
                }
            }
            (Shape::Gen(Gt::Bool), Some(Literal::Bool(b))) => b.to_string(),
            (Shape::Gen(g), None) => g.neutral(),
            (s, d) => {
                return Err(GenerateError::UnsupportedDefault { default: format!("{d:?}"), shape: format!("{s:?}") })
            }
        })
    }
    /// Whether `v` equals `default` (`omit_defaults` leaves such a field out; a conversion can drop it).
    fn is_default(&self, v: &str, default: &Literal) -> Result<String, GenerateError> {
        Ok(match (self, default) {
            (Shape::Str, Literal::Str(s)) if s.is_empty() => format!("{v}.as_ref().is_empty()"),
            (Shape::Int, Literal::Int(n)) => format!("{v} == {}", int_expr(*n)?),
            (Shape::Enum(_), Literal::Int(n)) => format!("{v}.0 == {n}"),
            (Shape::ListInt | Shape::ListStr | Shape::ListListInt | Shape::Gen(Gt::List(_)), Literal::EmptyList)
            | (Shape::ReqBlocks | Shape::FlatReqBlocks | Shape::Gen(Gt::Dict(..)), Literal::EmptyDict) => {
                format!("{v}.is_empty()")
            }
            (Shape::OptStr | Shape::OptListStr, Literal::None) => format!("{v}.is_none()"),
            (Shape::Gen(Gt::Bool), Literal::Bool(b)) => format!("{v} == {b}"),
            (s, d) => {
                return Err(GenerateError::UnsupportedDefault { default: format!("{d:?}"), shape: format!("{s:?}") })
            }
        })
    }
    fn has_strings(&self) -> bool {
        match self {
            Shape::Int | Shape::ListInt | Shape::ListListInt | Shape::Enum(_) => false,
            Shape::Gen(g) => g.has_strings(),
            _ => true,
        }
    }
    fn is_eq(&self) -> bool {
        match self {
            Shape::Gen(g) => g.is_eq(),
            _ => true,
        }
    }
}

fn int_expr(n: i128) -> Result<String, GenerateError> {
    if n >= 0 && n <= u64::MAX as i128 {
        Ok(format!("WireInt::from_u64({n})"))
    } else if n >= i64::MIN as i128 {
        Ok(format!("WireInt::from_i64({n})"))
    } else {
        Err(GenerateError::DefaultOutOfRange(n))
    }
}

/// A Rust module name for a revision: `vllm-0.16.0..0.18.1` → `vllm_0_16_0_to_0_18_1`,
/// `vllm-ascend-main@3e486e317` → `vllm_ascend_main_3e486e317`.
pub fn module_name(revision: &str) -> String {
    revision
        .replace("..", "_to_")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect()
}

fn doc(out: &mut String, indent: &str, text: &str) {
    for line in wrap(text, 110 - indent.len()) {
        let _ = writeln!(out, "{indent}/// {line}");
    }
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![];
    let mut cur = String::new();
    for w in text.split_whitespace() {
        if !cur.is_empty() && cur.len() + 1 + w.len() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    // Square brackets would read as intra-doc links.
    lines.into_iter().map(|l| l.replace('[', "\\[").replace(']', "\\]")).collect()
}

fn rust_str(s: &str) -> String {
    format!("{s:?}")
}

/// How a message is laid out on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A map of its fields in declaration order (`msgspec.Struct`, or a dataclass: never omitting defaults).
    Map,
    /// A tuple: an array of exactly its elements.
    Tuple,
}

/// One field of a message: its definition, Rust shape, default, and (a tuple's tag) the bytes it must hold.
struct Field<'a> {
    def: &'a FieldDef,
    shape: Shape,
    /// The spec default.
    default: Option<Literal>,
    /// What the field stands at when absent (`Revision::fallback_value`).
    fallback: Option<Literal>,
    /// A `bytes` constant: checked and written, not stored.
    constant: Option<Vec<u8>>,
}

/// One message struct of one revision, as the parts the generator writes.
struct Message<'a> {
    name: &'a str,
    def: &'a StructDef,
    kind: Kind,
    omit_defaults: bool,
    fields: Vec<Field<'a>>,
}

impl<'a> Message<'a> {
    fn new(rev: &'a Revision, name: &'a str) -> Result<Self, GenerateError> {
        Self::resolve(rev, name, &mut vec![name.to_string()])
    }

    fn resolve(rev: &'a Revision, name: &'a str, stack: &mut Vec<String>) -> Result<Self, GenerateError> {
        let (name, def) = rev
            .structs
            .get_key_value(name)
            .ok_or_else(|| GenerateError::NoStruct { revision: rev.revision.clone(), name: name.to_string() })?;
        let o = &def.options;
        let kind = match def.kind {
            StructKind::MsgspecStruct
                if !o.array_like && o.tag.is_none() && o.rename.is_none() && !o.forbid_unknown_fields =>
            {
                Kind::Map
            }
            StructKind::Dataclass => Kind::Map,
            StructKind::Tuple => Kind::Tuple,
            _ => {
                return Err(GenerateError::UnsupportedStruct {
                    revision: rev.revision.clone(),
                    name: name.clone(),
                    kind: format!("{:?}", def.kind),
                    options: format!("{o:?}"),
                })
            }
        };
        if def.fields.len() > 64 {
            return Err(GenerateError::TooManyFields { revision: rev.revision.clone(), name: name.clone() });
        }
        let mut fields = vec![];
        for f in &def.fields {
            let ctx = |e: GenerateError| GenerateError::InField {
                revision: rev.revision.clone(),
                owner: name.clone(),
                field: f.name.clone(),
                source: Box::new(e),
            };
            let shape = shape(rev, &f.ty, stack).map_err(ctx)?;
            let default = f.default_literal().map_err(|e| ctx(e.into()))?;
            let constant = match (&f.const_value, kind) {
                (None, _) => None,
                (Some(c), Kind::Tuple) => match (Literal::parse(c).map_err(|e| ctx(e.into()))?, &shape) {
                    (Literal::Bytes(b), Shape::Gen(Gt::Bytes)) => Some(b),
                    (l, _) => return Err(ctx(GenerateError::UnsupportedConstant(format!("{l:?}")))),
                },
                (Some(_), Kind::Map) => return Err(ctx(GenerateError::ConstantInMap)),
            };
            if kind == Kind::Tuple && default.is_some() {
                return Err(ctx(GenerateError::TupleDefault));
            }
            let fallback = rev.fallback_value(f).map_err(|e| ctx(e.into()))?;
            fields.push(Field { def: f, shape, default, fallback, constant });
        }
        Ok(Message { name, def, kind, omit_defaults: def.kind == StructKind::MsgspecStruct && o.omit_defaults, fields })
    }

    /// Fields held in the Rust struct (a tuple's constants are not).
    fn stored(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields.iter().filter(|f| f.constant.is_none())
    }

    /// Whether the struct holds strings, so is generic over how it holds them (`…Of<S>`).
    fn generic(&self) -> bool {
        self.stored().any(|f| f.shape.has_strings())
    }

    fn is_eq(&self) -> bool {
        self.stored().all(|f| f.shape.is_eq())
    }

    /// The tag in element 0, if this is a tuple whose first element is a bytes constant.
    fn tag(&self) -> Option<&[u8]> {
        match self.kind {
            Kind::Tuple => self.fields.first()?.constant.as_deref(),
            Kind::Map => None,
        }
    }

    /// What makes two revisions' structs the same Rust code: names, shapes, defaults, options, constants, the
    /// members of the enums they hold and the structs they hold (recursively).
    fn key(&self, rev: &Revision) -> Result<String, GenerateError> {
        let mut k = format!("{}|{:?}|{:?}|", self.name, self.def.kind, self.def.options);
        let mut nested = vec![];
        for f in &self.fields {
            let _ = write!(k, "{}:{:?}:{:?}:{:?};", f.def.name, f.shape, f.default, f.constant);
            match &f.shape {
                Shape::Enum(e) => {
                    let m: Vec<(i64, &str)> = rev.enums[e].members.iter().map(|m| (m.value, m.name.as_str())).collect();
                    let _ = write!(k, "{m:?};");
                }
                Shape::Gen(g) => g.structs(&mut nested),
                _ => {}
            }
        }
        for n in nested {
            let _ = write!(k, "<{}>", Message::new(rev, &n)?.key(rev)?);
        }
        Ok(k)
    }

    fn required_mask(&self) -> u64 {
        self.fields.iter().enumerate().filter(|(_, f)| f.def.required()).fold(0, |m, (i, _)| m | 1 << i)
    }

    /// The Rust type of the struct with strings held as `s` (`…Of<S>`, or the plain name without strings).
    fn ty(&self, s: &str) -> String {
        if self.generic() {
            format!("{}Of<{s}>", self.name)
        } else {
            self.name.to_string()
        }
    }

    /// The names a later revision re-exports.
    fn names(&self) -> String {
        let n = self.name;
        if self.generic() {
            format!("{n}, {n}Of, {n}Ref")
        } else {
            format!("{n}, {n}Ref")
        }
    }
}

impl Message<'_> {
    fn write(&self, out: &mut String, rev: &Revision, enums: &BTreeMap<String, EnumDef>) -> Result<(), GenerateError> {
        let n = self.name;
        let generic = self.generic();
        // `impl` headers and the type, generic or not.
        let of_s = self.ty("S");
        let plain = |bound: &str| if generic { format!("<S{bound}>") } else { String::new() };
        // The struct.
        let strings =
            if generic { format!(" Strings held as `S`: see [`{n}`] and [`{n}Ref`].") } else { String::new() };
        doc(
            out,
            "    ",
            &format!(
                "{} (`{}` `[structs.{n}]`, {}).{strings}",
                self.def.doc.trim_end_matches('.'),
                rev.revision,
                self.def.source
            ),
        );
        if let Kind::Tuple = self.kind {
            let consts: Vec<String> = self
                .fields
                .iter()
                .enumerate()
                .filter_map(|(i, f)| f.constant.as_ref().map(|c| format!("element {i} is always `{}`", py_bytes(c))))
                .collect();
            let tail = if consts.is_empty() {
                String::new()
            } else {
                format!("; {} (checked, not stored)", consts.join(", "))
            };
            doc(out, "    ", &format!("On the wire: an array of exactly {} elements{tail}.", self.fields.len()));
        }
        let eq = if self.is_eq() { ", Eq" } else { "" };
        let _ = writeln!(out, "    #[derive(Clone, Debug, PartialEq{eq})]\n    pub struct {of_s} {{");
        for f in self.stored() {
            let req = match &f.default {
                None => "Required.".to_string(),
                Some(_) => format!("Default `{}`.", f.def.default_display()),
            };
            doc(out, "        ", &format!("{} {req}", f.def.doc));
            let _ = writeln!(out, "        pub {}: {},", f.def.name, f.shape.rust());
        }
        let _ = writeln!(out, "    }}\n");
        if generic {
            doc(out, "    ", &format!("{} with owned strings.", n));
            let _ = writeln!(out, "    pub type {n} = {n}Of<String>;");
            doc(
                out,
                "    ",
                &format!("{} with strings borrowed from the decoded bytes (no allocation per string).", n),
            );
            let _ = writeln!(out, "    pub type {n}Ref<'a> = {n}Of<&'a str>;\n");
        } else {
            doc(out, "    ", &format!("{n} (it holds no strings: the same type as [`{n}`])."));
            let _ = writeln!(out, "    pub type {n}Ref<'a> = {n};\n");
        }

        // Field list, mask, tag.
        let _ = writeln!(out, "    impl{} {of_s} {{", plain(""));
        let _ = writeln!(
            out,
            "        /// Wire names in declaration order{}.",
            if self.kind == Kind::Tuple { " (a tuple's elements)" } else { "" }
        );
        let names: Vec<String> = self.fields.iter().map(|f| rust_str(&f.def.name)).collect();
        let _ = writeln!(out, "        pub const FIELDS: [&'static str; {}] = [{}];", names.len(), names.join(", "));
        let _ = writeln!(out, "        /// Bit `i` set: field `i` has no default and must be on the wire.");
        let _ = writeln!(out, "        pub const REQUIRED: u64 = {:#b};", self.required_mask());
        if let Some(tag) = self.tag() {
            let _ = writeln!(
                out,
                "        /// The tag in element 0 (`{}`).\n        pub const TAG: ControlTag = ControlTag::{};",
                py_bytes(tag),
                upper_snake(n)
            );
        }
        let _ = writeln!(out, "    }}\n");

        // Default.
        let _ = writeln!(out, "    impl{} Default for {of_s} {{", plain(": Default"));
        let _ =
            writeln!(out, "        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.");
        let _ = writeln!(out, "        fn default() -> Self {{\n            {n}{} {{", if generic { "Of" } else { "" });
        for f in self.stored() {
            let _ = writeln!(
                out,
                "                {}: {},",
                f.def.name,
                f.shape.default_value(f.fallback.as_ref(), enums)?
            );
        }
        let _ = writeln!(out, "            }}\n        }}\n    }}\n");

        // Constructor from the required fields.
        let req: Vec<&Field> = self.stored().filter(|f| f.def.required()).collect();
        let _ = writeln!(out, "    impl{} {of_s} {{", plain(": Default"));
        let _ = writeln!(out, "        /// The message with these required fields and every other at its default.");
        let args: Vec<String> = req.iter().map(|f| format!("{}: {}", f.def.name, f.shape.rust())).collect();
        let names: Vec<String> = req.iter().map(|f| f.def.name.clone()).collect();
        let _ = writeln!(out, "        pub fn new({}) -> Self {{", args.join(", "));
        let init = if names.is_empty() { String::new() } else { format!("{}, ", names.join(", ")) };
        let _ = writeln!(
            out,
            "            {n}{} {{ {init}..Self::default() }}\n        }}\n    }}\n",
            if generic { "Of" } else { "" }
        );

        // Decode.
        if generic {
            let _ = writeln!(out, "    impl<'a, S: WireStr<'a> + Default> {of_s} {{");
        } else {
            let _ = writeln!(out, "    impl {of_s} {{");
        }
        let lt = if generic { "'a " } else { "" };
        let _ = writeln!(out, "        /// Decodes as msgspec does with {}'s class.", rev.revision);
        let _ = writeln!(out, "        pub fn decode(bytes: &{lt}[u8]) -> Result<Self, DecodeError> {{");
        let _ = writeln!(out, "            Self::decode_with(bytes, Strictness::Msgspec)\n        }}\n");
        let _ = writeln!(out, "        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.");
        let _ = writeln!(
            out,
            "        pub fn decode_with(bytes: &{lt}[u8], strictness: Strictness) -> Result<Self, DecodeError> {{"
        );
        let _ = writeln!(out, "            let mut d = De::new(bytes)?;");
        let _ = writeln!(out, "            let v = Self::decode_in(&mut d, strictness)?;");
        let _ = writeln!(out, "            d.finish()?;\n            Ok(v)\n        }}\n");
        let _ = writeln!(out, "        /// Decodes one value at the reader's position (inside a frame).");
        let de_lt = if generic { "'a" } else { "'_" };
        let _ = writeln!(
            out,
            "        pub(crate) fn decode_in(d: &mut De<{de_lt}>, strictness: Strictness) -> Result<Self, DecodeError> {{"
        );
        match self.kind {
            Kind::Map => {
                let _ = writeln!(out, "            let mut v = Self::default();");
                let _ = writeln!(out, "            let mut seen = 0u64;");
                let _ = writeln!(out, "            d.struct_map(&Self::FIELDS, |d, i| {{");
                let _ = writeln!(out, "                seen |= 1 << i;");
                let _ = writeln!(out, "                match i {{");
                let last = self.fields.len().saturating_sub(1);
                for (i, f) in self.fields.iter().enumerate() {
                    let arm = if i == last { "_".to_string() } else { i.to_string() };
                    let _ = writeln!(out, "                    {arm} => v.{} = {},", f.def.name, f.shape.decode());
                }
                if self.fields.is_empty() {
                    let _ = writeln!(out, "                    _ => {{}}");
                }
                let _ = writeln!(out, "                }}\n                Ok(())\n            }})?;");
                let _ = writeln!(out, "            let missing = Self::REQUIRED & !seen;");
                let _ = writeln!(out, "            if missing != 0 {{\n                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));\n            }}");
                let _ = writeln!(out, "            Ok(v)\n        }}\n    }}\n");
            }
            Kind::Tuple => {
                let _ = writeln!(out, "            d.tuple_struct(Self::FIELDS.len())?;");
                for (i, f) in self.fields.iter().enumerate() {
                    match &f.constant {
                        Some(c) => {
                            let _ = writeln!(out, "            d.item({i}, |d| d.const_bytes({}))?;", byte_lit(c));
                        }
                        None => {
                            let _ = writeln!(
                                out,
                                "            let {} = d.item({i}, |d| Ok({}))?;",
                                f.def.name,
                                f.shape.decode()
                            );
                        }
                    }
                }
                let _ = writeln!(out, "            d.leave();");
                let names: Vec<&str> = self.stored().map(|f| f.def.name.as_str()).collect();
                let _ = writeln!(
                    out,
                    "            Ok({n}{} {{ {} }})\n        }}\n    }}\n",
                    if generic { "Of" } else { "" },
                    names.join(", ")
                );
            }
        }

        // to_owned_message.
        if generic {
            let _ = writeln!(out, "    impl {n}Ref<'_> {{\n        /// The same message with owned strings.");
            let _ = writeln!(out, "        pub fn to_owned_message(&self) -> {n} {{\n            {n}Of {{");
            for f in self.stored() {
                let _ = writeln!(
                    out,
                    "                {}: {},",
                    f.def.name,
                    f.shape.to_owned(&format!("self.{}", f.def.name))
                );
            }
            let _ = writeln!(out, "            }}\n        }}\n    }}\n");
        }

        // Encode.
        let _ = writeln!(out, "    impl{} {of_s} {{", plain(": AsRef<str>"));
        let _ = writeln!(
            out,
            "        /// Encodes as msgspec does ({}).",
            match (self.kind, self.omit_defaults) {
                (Kind::Tuple, _) => "an array of every element",
                (Kind::Map, true) => "declaration order, defaults omitted",
                (Kind::Map, false) => "declaration order",
            }
        );
        let _ = writeln!(out, "        pub fn encode(&self) -> Vec<u8> {{");
        let _ = writeln!(out, "            let mut w = Writer::with_capacity(self.encoded_len_hint());");
        let _ = writeln!(out, "            self.encode_into(&mut w);\n            w.into_bytes()\n        }}\n");
        let hints: Vec<String> = self
            .fields
            .iter()
            .map(|f| match &f.constant {
                Some(c) => format!("{}", c.len() + 5),
                None if self.kind == Kind::Tuple => f.shape.len_hint(&format!("self.{}", f.def.name)),
                None => format!("{} + {}", f.def.name.len() + 1, f.shape.len_hint(&format!("self.{}", f.def.name))),
            })
            .collect();
        let _ = writeln!(
            out,
            "        pub(crate) fn encoded_len_hint(&self) -> usize {{\n            5{}\n        }}\n",
            hints.iter().map(|h| format!("\n                + {h}")).collect::<String>()
        );
        let _ = writeln!(out, "        /// Appends the encoding to `w`.");
        let _ = writeln!(out, "        pub fn encode_into(&self, w: &mut Writer) {{");
        match self.kind {
            Kind::Tuple => {
                let _ = writeln!(out, "            w.array_len(Self::FIELDS.len());");
                for f in &self.fields {
                    let body = match &f.constant {
                        Some(c) => format!("w.bin({});", byte_lit(c)),
                        None => f.shape.encode(&format!("self.{}", f.def.name)),
                    };
                    for l in body.lines() {
                        let _ = writeln!(out, "            {l}");
                    }
                }
                let _ = writeln!(out, "        }}\n    }}\n");
            }
            Kind::Map => {
                let _ = writeln!(out, "            let h = w.begin_struct_map(Self::FIELDS.len());");
                let _ = writeln!(out, "            let mut n = 0;");
                for f in &self.fields {
                    let v = format!("self.{}", f.def.name);
                    let body = format!("w.str({});\n{}\nn += 1;", rust_str(&f.def.name), f.shape.encode(&v));
                    match &f.default {
                        Some(lit) if self.omit_defaults => {
                            let _ = writeln!(out, "            if !({}) {{", f.shape.is_default(&v, lit)?);
                            for l in body.lines() {
                                let _ = writeln!(out, "                {l}");
                            }
                            let _ = writeln!(out, "            }}");
                        }
                        _ => {
                            for l in body.lines() {
                                let _ = writeln!(out, "            {l}");
                            }
                        }
                    }
                }
                let _ = writeln!(out, "            w.finish_struct_map(h, n);\n        }}\n    }}\n");
            }
        }
        Ok(())
    }
}

/// Python's `repr()` of bytes, for docs.
fn py_bytes(b: &[u8]) -> String {
    crate::codec::py_bytes_repr(b)
}

/// A Rust byte-string literal of `b`.
fn byte_lit(b: &[u8]) -> String {
    let mut s = String::from("b\"");
    for &c in b {
        match c {
            b'"' | b'\\' => {
                s.push('\\');
                s.push(c as char);
            }
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    s.push('"');
    s
}

impl Message<'_> {
    /// `from_newest` and `to_newest`: this revision's struct from and to the newest revision's, field by field
    /// by name. A field only the newest has must hold its default (or, required there, its neutral value) to
    /// be said here; an enum value must be one this revision defines; grouped block lists become flat ones
    /// when this revision's are flat. A pair of shapes with no rule is an error naming the field.
    fn write_via_newest(
        &self,
        out: &mut String,
        newest: &Message,
        rev: &Revision,
        enums: &BTreeMap<String, EnumDef>,
    ) -> Result<(), GenerateError> {
        let n = self.name;
        let ctx = |f: &str| {
            let field = f.to_string();
            move |e: GenerateError| GenerateError::InField {
                revision: rev.revision.clone(),
                owner: n.to_string(),
                field,
                source: Box::new(e),
            }
        };
        let mine = |name: &str| self.fields.iter().find(|g| g.def.name == name);
        let theirs = |name: &str| newest.fields.iter().find(|g| g.def.name == name);
        let _ = writeln!(out, "    impl {n} {{");
        doc(out, "        ", &format!("This revision's `{n}` holding what the newest revision's `n` holds. `Err` names what cannot be said here: a field this revision lacks that is off its default, an enum value it does not define, more than one block group where block lists are flat."));
        let _ = writeln!(out, "        pub fn from_newest(n: &newest::{n}) -> Result<Self, ConvertError> {{");
        for f in &newest.fields {
            if mine(&f.def.name).is_some() {
                continue;
            }
            let v = format!("n.{}", f.def.name);
            let check = match &f.fallback {
                Some(lit) => f.shape.is_default(&v, lit),
                None => Err(GenerateError::NoFallback),
            }
            .map_err(ctx(&f.def.name))?;
            let _ = writeln!(out, "            if !({check}) {{");
            let _ = writeln!(
                out,
                "                return Err(ConvertError::Lacking {{ field: \"{}\".into(), value: format!(\"{{:?}}\", {v}) }});",
                f.def.name
            );
            let _ = writeln!(out, "            }}");
        }
        for f in &self.fields {
            if let Shape::Enum(e) = &f.shape {
                if theirs(&f.def.name).is_some() {
                    let _ = writeln!(out, "            if !{}.contains(&n.{}) {{", enum_members_const(e), f.def.name);
                    let _ =
                        writeln!(
                        out,
                        "                return Err(ConvertError::NotAMember {{ enum_name: \"{e}\".into(), value: n.{}.to_string() }});",
                        f.def.name
                    );
                    let _ = writeln!(out, "            }}");
                }
            }
        }
        let _ = writeln!(out, "            Ok({n}Of {{");
        for f in &self.fields {
            let expr = match theirs(&f.def.name) {
                None => f.shape.default_value(f.fallback.as_ref(), enums)?,
                Some(w) => convert(&w.shape, &f.shape, &format!("n.{}", f.def.name), true).map_err(ctx(&f.def.name))?,
            };
            let _ = writeln!(out, "                {}: {expr},", f.def.name);
        }
        let _ = writeln!(out, "            }})\n        }}\n");
        doc(out, "        ", &format!("The newest revision's `{n}` holding this message's values; the fields this revision lacks at their defaults."));
        let _ = writeln!(out, "        pub fn to_newest(&self) -> newest::{n} {{");
        let _ = writeln!(out, "            let mut m = newest::{n}::default();");
        for f in &self.fields {
            if let Some(w) = theirs(&f.def.name) {
                let expr =
                    convert(&f.shape, &w.shape, &format!("self.{}", f.def.name), false).map_err(ctx(&f.def.name))?;
                let _ = writeln!(out, "            m.{} = {expr};", f.def.name);
            }
        }
        let _ = writeln!(out, "            m\n        }}\n    }}\n");
        Ok(())
    }
}

/// The expression turning `v` (owned strings, shape `from`) into shape `to`; `fallible` adds `?` where the
/// conversion can fail.
fn convert(from: &Shape, to: &Shape, v: &str, fallible: bool) -> Result<String, GenerateError> {
    Ok(match (from, to) {
        (Shape::Enum(a), Shape::Enum(b)) if a == b => v.to_string(),
        (a, b) if a == b => format!("{v}.clone()"),
        (Shape::ReqBlocks, Shape::FlatReqBlocks) if fallible => format!("flatten_req_blocks(&{v})?"),
        (Shape::FlatReqBlocks, Shape::ReqBlocks) => format!("group_req_blocks(&{v})"),
        (a, b) => return Err(GenerateError::NoConversion { from: format!("{a:?}"), to: format!("{b:?}") }),
    })
}

fn upper_snake(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(c.to_ascii_uppercase());
    }
    s
}

fn enum_members_const(e: &str) -> String {
    upper_snake(e) + "_MEMBERS"
}

/// The structs a revision's module holds: its MessagePack messages in transport order, then every other
/// struct of the revision (those nested in them) in spec order.
fn revision_structs(rev: &Revision) -> Vec<&str> {
    let mut out: Vec<&str> =
        rev.transport.messages.iter().filter(|t| t.encoding == "msgpack").map(|t| t.name.as_str()).collect();
    for name in rev.structs.keys() {
        if !out.contains(&name.as_str()) {
            out.push(name);
        }
    }
    out
}

/// Every control-tuple tag of the family (element 0 of a tuple message, a bytes constant), by message, in
/// the order first seen; one message keeps one tag and one tag one message.
fn family_tags(fam: &Family) -> Result<Vec<(String, Vec<u8>)>, GenerateError> {
    let mut out: Vec<(String, Vec<u8>)> = vec![];
    for rev in &fam.revisions {
        for name in revision_structs(rev) {
            let msg = Message::new(rev, name)?;
            let Some(tag) = msg.tag() else { continue };
            match out.iter().find(|(m, t)| m == name || t == tag) {
                Some((m, t)) if m != name || t != tag => {
                    return Err(GenerateError::TagClash {
                        revision: rev.revision.clone(),
                        name: name.to_string(),
                        tag: py_bytes(tag),
                        earlier: m.clone(),
                        earlier_tag: py_bytes(t),
                    })
                }
                Some(_) => {}
                None => out.push((name.to_string(), tag.to_vec())),
            }
        }
    }
    Ok(out)
}

fn write_control_tag(out: &mut String, tags: &[(String, Vec<u8>)]) {
    doc(out, "", "The tag in element 0 of a control tuple: a MessagePack bin the receiver compares (a str with the same letters does not match). An open newtype: a constant for every tag any revision defines, named after its message, and any other bytes representable, so a report can show what a peer sent.");
    let _ = writeln!(out, "#[derive(Clone, PartialEq, Eq, Hash)]\npub struct ControlTag(pub Cow<'static, [u8]>);\n");
    let _ = writeln!(out, "impl ControlTag {{");
    for (m, t) in tags {
        let _ = writeln!(out, "    /// Element 0 of `{m}`: `{}`.", py_bytes(t));
        let _ =
            writeln!(out, "    pub const {}: ControlTag = ControlTag(Cow::Borrowed({}));", upper_snake(m), byte_lit(t));
    }
    let items: Vec<String> =
        tags.iter().map(|(m, _)| format!("(ControlTag::{}, {})", upper_snake(m), rust_str(m))).collect();
    let _ = writeln!(out, "\n    /// Every tag any revision defines, with the message it starts.");
    let _ =
        writeln!(out, "    pub const ALL: [(ControlTag, &'static str); {}] = [{}];\n", items.len(), items.join(", "));
    let _ =
        writeln!(out, "    /// The tag's bytes.\n    pub fn as_bytes(&self) -> &[u8] {{\n        &self.0\n    }}\n");
    let _ = writeln!(out, "    /// The message this tag starts, if some revision defines it.");
    let _ = writeln!(out, "    pub fn message(&self) -> Option<&'static str> {{\n        Self::ALL.iter().find(|(t, _)| t == self).map(|(_, m)| *m)\n    }}\n");
    let _ = writeln!(
        out,
        "    /// Element 0 of a payload, when the payload starts with an array whose first element is a bin."
    );
    let _ = writeln!(out, "    pub fn first_of(bytes: &[u8]) -> Option<ControlTag> {{\n        first_bin_in_array(bytes).map(|b| ControlTag(Cow::Owned(b.to_vec())))\n    }}\n}}\n");
    let _ = writeln!(out, "impl fmt::Debug for ControlTag {{\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {{\n        f.write_str(&py_bytes_repr(&self.0))\n    }}\n}}\n");
    let _ = writeln!(out, "impl fmt::Display for ControlTag {{\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {{\n        fmt::Debug::fmt(self, f)\n    }}\n}}\n");
}

/// The revision's control tuples as one enum, matched by element 0 as the receiver does.
fn write_control_msg(out: &mut String, tagged: &[&Message]) {
    let Some(first) = tagged.first() else { return };
    let generic = tagged.iter().any(|m| m.generic());
    let eq = if tagged.iter().all(|m| m.is_eq()) { ", Eq" } else { "" };
    let of_s = if generic { "ControlMsgOf<S>" } else { "ControlMsg" };
    doc(out, "    ", &format!("A control tuple of this revision, matched to its message by element 0 (its [`ControlTag`]) as the receiver matches it. A payload whose element 0 is no tag of this revision decodes as `{}`, whose error then says what is wrong.", first.name));
    let _ = writeln!(out, "    #[derive(Clone, Debug, PartialEq{eq})]\n    pub enum {of_s} {{");
    for m in tagged {
        let _ = writeln!(out, "        /// Element 0 is `{}`.", py_bytes(m.tag().unwrap_or_default()));
        let _ = writeln!(out, "        {}({}),", m.name, m.ty("S"));
    }
    let _ = writeln!(out, "    }}\n");
    if generic {
        let _ = writeln!(
            out,
            "    /// A control tuple with owned strings.\n    pub type ControlMsg = ControlMsgOf<String>;"
        );
        let _ = writeln!(
            out,
            "    /// A control tuple borrowing its strings.\n    pub type ControlMsgRef<'a> = ControlMsgOf<&'a str>;\n"
        );
        let _ = writeln!(out, "    impl<'a, S: WireStr<'a> + Default> ControlMsgOf<S> {{");
    } else {
        let _ = writeln!(out, "    /// The same type (no strings).\n    pub type ControlMsgRef<'a> = ControlMsg;\n");
        let _ = writeln!(out, "    impl ControlMsg {{");
    }
    let lt = if generic { "'a " } else { "" };
    let _ = writeln!(out, "        /// Decodes as the message element 0 names.");
    let _ = writeln!(out, "        pub fn decode(bytes: &{lt}[u8]) -> Result<Self, DecodeError> {{");
    let _ = writeln!(out, "            match ControlTag::first_of(bytes) {{");
    for m in &tagged[1..] {
        let ty = if m.generic() { format!("{}Of", m.name) } else { m.name.to_string() };
        let _ = writeln!(
            out,
            "                Some(t) if t == ControlTag::{} => {ty}::decode(bytes).map(Self::{}),",
            upper_snake(m.name),
            m.name
        );
    }
    let ty = if first.generic() { format!("{}Of", first.name) } else { first.name.to_string() };
    let _ = writeln!(out, "                _ => {ty}::decode(bytes).map(Self::{}),", first.name);
    let _ = writeln!(out, "            }}\n        }}\n    }}\n");
    let bound = if generic { "<S: AsRef<str>> " } else { " " };
    let _ = writeln!(out, "    impl{bound}{of_s} {{\n        /// Encodes the message.\n        pub fn encode(&self) -> Vec<u8> {{\n            match self {{");
    for m in tagged {
        let _ = writeln!(out, "                Self::{}(m) => m.encode(),", m.name);
    }
    let _ = writeln!(out, "            }}\n        }}\n    }}\n");
}

const HEADER: &str = "// @generated from spec/{fam}/ by mooncake-wire (src/generate/typed_rs.rs). Do not edit: change spec/ and\n// regenerate with `BLESS=1 cargo test --test generated`.\n";

/// One family's typed messages: its enums and control tags, then one module per revision.
fn family_types(fam: &Family) -> Result<String, GenerateError> {
    let f = &fam.name;
    let enums = family_enums(fam)?;
    let tags = family_tags(fam)?;
    let mut out = HEADER.replace("{fam}", f);
    let _ =
        writeln!(out, "\n//! The {f} family's typed messages, one module per revision (generated from `spec/{f}/`).\n");
    let _ = writeln!(
        out,
        "#![allow(clippy::all, missing_docs, unused_variables, unused_mut, unused_imports, unused_parens)]\n"
    );
    let _ = writeln!(out, "use std::borrow::Cow;\nuse std::fmt;\n");
    let _ = writeln!(
        out,
        "use crate::typed::blocks::{{encode_req_blocks, req_blocks_len}};
use crate::typed::de::{{first_bin_in_array, int_lists, str_list, str_list_buf_len, str_list_len, write_str_list, De, EnumMember, WireStr}};"
    );
    let _ = writeln!(
        out,
        "use crate::typed::{{FlatReqBlocksOf, GeneratedRevision, ReqBlocksOf, StrList, Strictness, Untyped}};"
    );
    let _ =
        writeln!(out, "use crate::codec::{{py_bytes_repr, DecodeError}};\nuse crate::msgpack::{{WireInt, Writer}};\n");
    for (name, e) in &enums {
        write_enum(&mut out, name, e);
    }
    if !tags.is_empty() {
        write_control_tag(&mut out, &tags);
    }
    // Revisions: each struct written once, where its shape first appears; later revisions re-export it.
    let mut first_seen: BTreeMap<String, String> = BTreeMap::new();
    let mut table = vec![];
    for rev in &fam.revisions {
        let m = module_name(&rev.revision);
        let raw: Vec<(String, String)> = rev
            .transport
            .messages
            .iter()
            .filter(|t| t.encoding == "raw")
            .flat_map(|t| t.constants.iter().map(|c| (c.name.clone(), c.bytes.clone())))
            .collect();
        let releases = if rev.releases.is_empty() { "unreleased".to_string() } else { rev.releases.join(", ") };
        doc(&mut out, "", &format!("`{}` ({releases}): {}", rev.revision, rev.summary));
        let _ = writeln!(out, "pub mod {m} {{\n    use super::*;\n");
        let _ = writeln!(
            out,
            "    /// The spec revision of this module.\n    pub const REVISION: &str = {};",
            rust_str(&rev.revision)
        );
        let cite = match (f.as_str(), rev.generation) {
            ("push", 1) => "`spec/PROTOCOL.md#gen1`".to_string(),
            ("push", _) => "`spec/PROTOCOL.md#gen2`".to_string(),
            _ => format!("within the {f} family, `spec/README.md`"),
        };
        let _ = writeln!(out, "    /// Generation ({cite}).\n    pub const GENERATION: u32 = {};\n", rev.generation);
        for (name, e) in &rev.enums {
            let _ = writeln!(
                out,
                "    /// The members of `{name}` this revision defines (a decoder rejects any other value)."
            );
            let items: Vec<String> = e.members.iter().map(|m| format!("{name}::{}", m.name)).collect();
            let _ = writeln!(
                out,
                "    pub const {}: [{name}; {}] = [{}];\n",
                enum_members_const(name),
                items.len(),
                items.join(", ")
            );
        }
        for (name, bytes) in &raw {
            let _ = writeln!(
                out,
                "    /// Raw reply `{name}` (not MessagePack).\n    pub const {}: &[u8] = {};\n",
                name.to_ascii_uppercase(),
                byte_lit(bytes.as_bytes())
            );
        }
        let structs = revision_structs(rev);
        let msgs: Vec<Message> = structs.iter().map(|n| Message::new(rev, n)).collect::<Result<_, _>>()?;
        for msg in &msgs {
            let key = msg.key(rev)?;
            match first_seen.get(&key) {
                Some(earlier) => {
                    let _ = writeln!(
                        out,
                        "    /// Unchanged since `{earlier}`.\n    pub use super::{}::{{{}}};\n",
                        module_name(earlier),
                        msg.names()
                    );
                }
                None => {
                    msg.write(&mut out, rev, &enums)?;
                    first_seen.insert(key, rev.revision.clone());
                }
            }
        }
        let tagged: Vec<&Message> = msgs.iter().filter(|m| m.tag().is_some()).collect();
        write_control_msg(&mut out, &tagged);
        // Decode then encode, by message name, for checks that run over every revision.
        let _ = writeln!(
            out,
            "    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here)."
        );
        let _ = writeln!(out, "    pub fn round_trip(message: &str, bytes: &[u8], strictness: Strictness) -> Option<Result<Vec<u8>, DecodeError>> {{");
        let _ = writeln!(out, "        Some(match message {{");
        for s in &structs {
            let _ = writeln!(
                out,
                "            {} => {s}Ref::decode_with(bytes, strictness).map(|v| v.encode()),",
                rust_str(s)
            );
        }
        let _ = writeln!(out, "            _ => return None,\n        }})\n    }}\n");
        let _ = writeln!(
            out,
            "    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks."
        );
        let _ = writeln!(out, "    pub fn decode_and_drop(message: &str, bytes: &[u8], borrowed: bool) -> Option<Result<(), DecodeError>> {{");
        let _ = writeln!(out, "        Some(match (message, borrowed) {{");
        for s in &structs {
            let _ = writeln!(out, "            ({}, false) => {s}::decode(bytes).map(drop),", rust_str(s));
            let _ = writeln!(out, "            ({}, true) => {s}Ref::decode(bytes).map(drop),", rust_str(s));
        }
        let _ = writeln!(out, "            _ => return None,\n        }})\n    }}\n");
        let _ = writeln!(out, "    /// The field list of `message`, in declaration order.");
        let _ = writeln!(
            out,
            "    pub fn fields(message: &str) -> Option<&'static [&'static str]> {{\n        Some(match message {{"
        );
        for s in &structs {
            let _ = writeln!(out, "            {} => &{s}::FIELDS,", rust_str(s));
        }
        let _ = writeln!(out, "            _ => return None,\n        }})\n    }}\n");
        let _ = writeln!(out, "    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).");
        let _ = writeln!(out, "    pub fn required(message: &str) -> Option<u64> {{\n        Some(match message {{");
        for s in &structs {
            let _ = writeln!(out, "            {} => {s}::REQUIRED,", rust_str(s));
        }
        let _ = writeln!(out, "            _ => return None,\n        }})\n    }}\n}}\n");
        table.push((rev.revision.clone(), m, structs.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
    }
    let newest = &table.last().ok_or_else(|| GenerateError::NoRevision { family: f.clone(), released: false })?.1;
    let released = fam
        .revisions
        .iter()
        .rev()
        .find(|r| !r.releases.is_empty())
        .map(|r| module_name(&r.revision))
        .ok_or_else(|| GenerateError::NoRevision { family: f.clone(), released: true })?;
    let _ = writeln!(out, "/// The newest revision.\npub use {newest} as newest;\n");
    let mut generations: Vec<u32> = fam.revisions.iter().map(|r| r.generation).collect();
    generations.dedup();
    for g in generations {
        let last = fam.revisions.iter().rev().find(|r| r.generation == g).map(|r| module_name(&r.revision));
        if let Some(m) = last {
            let _ = writeln!(out, "/// The newest revision of generation {g}.\npub use {m} as newest_gen{g};\n");
        }
    }
    let _ = writeln!(out, "/// The newest revision with a release (what a user of released software speaks).\npub use {released} as newest_released;\n");
    let _ = writeln!(out, "/// Every revision of the {f} family, oldest first.");
    let _ = writeln!(out, "pub const REVISIONS: [GeneratedRevision; {}] = [", table.len());
    for (rev, m, structs) in &table {
        let s: Vec<String> = structs.iter().map(|s| rust_str(s)).collect();
        let _ = writeln!(out, "    GeneratedRevision {{ revision: {}, messages: &[{}], round_trip: {m}::round_trip, decode_and_drop: {m}::decode_and_drop, fields: {m}::fields, required: {m}::required }},", rust_str(rev), s.join(", "));
    }
    let _ = writeln!(out, "];");
    Ok(out)
}

/// The push family's conversions between each revision and the newest (`via_newest.rs`).
fn via_newest(fam: &Family) -> Result<String, GenerateError> {
    let enums = family_enums(fam)?;
    let mut via_out = HEADER.replace("{fam}", &fam.name);
    let _ = writeln!(via_out, "\n//! Every push revision's messages to and from the newest revision's (generated from `spec/push/`): the\n//! conversions, and per revision the codecs the sans-IO cores speak it with.\n");
    let _ = writeln!(via_out, "#![allow(clippy::all, missing_docs)]\n");
    let _ = writeln!(via_out, "use super::push::*;\nuse crate::codec::convert::ConvertError;\nuse crate::typed::blocks::{{flatten_req_blocks, group_req_blocks}};\nuse crate::typed::ViaNewest;\nuse crate::msgpack::WireInt;\n");
    let newest_rev =
        fam.revisions.last().ok_or_else(|| GenerateError::NoRevision { family: fam.name.clone(), released: false })?;
    let newest_msgs: Vec<Message> = newest_rev
        .transport
        .messages
        .iter()
        .filter(|t| t.encoding == "msgpack")
        .map(|t| Message::new(newest_rev, &t.name))
        .collect::<Result<_, _>>()?;
    let newest_of = |name: &str| newest_msgs.iter().find(|m| m.name == name);
    let mut first_seen: BTreeMap<String, String> = BTreeMap::new();
    // (message, revision, module) for every message the newest revision also has.
    let mut via = vec![];
    for rev in &fam.revisions {
        let m = module_name(&rev.revision);
        let msgs: Vec<&str> =
            rev.transport.messages.iter().filter(|t| t.encoding == "msgpack").map(|t| t.name.as_str()).collect();
        let mut via_body = String::new();
        for name in &msgs {
            let msg = Message::new(rev, name)?;
            let key = msg.key(rev)?;
            if first_seen.contains_key(&key) {
                continue;
            }
            if let Some(newest) = newest_of(name) {
                msg.write_via_newest(&mut via_body, newest, rev, &enums)?;
            }
            first_seen.insert(key, rev.revision.clone());
        }
        let with_newest: Vec<&&str> = msgs.iter().filter(|n| newest_of(n).is_some()).collect();
        if with_newest.is_empty() {
            continue;
        }
        doc(&mut via_out, "", &format!("`{}` through the newest revision's structs.", rev.revision));
        let _ = writeln!(via_out, "pub mod {m} {{\n    use super::*;\n    use super::super::push::{m}::*;\n");
        via_out.push_str(&via_body);
        for name in with_newest {
            doc(&mut via_out, "    ", &format!("`{name}` of this revision through the newest revision's struct (what the sans-IO cores hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`."));
            let _ = writeln!(
                via_out,
                "    pub const {}_VIA_NEWEST: ViaNewest<newest::{name}> = ViaNewest {{",
                upper_snake(name)
            );
            let _ = writeln!(via_out, "        revision: REVISION,");
            let _ = writeln!(via_out, "        decode: |b| {name}::decode(b).map(|m| m.to_newest()),");
            let _ = writeln!(
                via_out,
                "        encode: |n| {name}::from_newest(n).map(|m| m.encode()).map_err(|e| e.in_revision(REVISION)),"
            );
            let _ = writeln!(via_out, "    }};\n");
            via.push((name.to_string(), rev.revision.clone(), m.clone()));
        }
        let _ = writeln!(via_out, "}}\n");
    }
    for msg in &newest_msgs {
        let n = msg.name;
        let _ = writeln!(via_out, "/// `{n}` of `revision` through the newest revision's struct (`None`: no generated revision of that name has it).");
        let _ = writeln!(
            via_out,
            "pub fn {}_via_newest(revision: &str) -> Option<ViaNewest<newest::{n}>> {{",
            upper_snake(n).to_ascii_lowercase()
        );
        let _ = writeln!(via_out, "    Some(match revision {{");
        for (_, rev, m) in via.iter().filter(|(x, _, _)| x == n) {
            let _ = writeln!(via_out, "        {} => {m}::{}_VIA_NEWEST,", rust_str(rev), upper_snake(n));
        }
        let _ = writeln!(via_out, "        _ => return None,\n    }})\n}}\n");
    }
    Ok(via_out)
}

/// Every enum of the family, merged over its revisions (newest doc wins; a value keeps one name).
fn family_enums(fam: &Family) -> Result<BTreeMap<String, EnumDef>, GenerateError> {
    let mut out: BTreeMap<String, EnumDef> = BTreeMap::new();
    for rev in &fam.revisions {
        for (name, e) in &rev.enums {
            if e.kind != "IntEnum" {
                return Err(GenerateError::NotIntEnum {
                    revision: rev.revision.clone(),
                    name: name.clone(),
                    kind: e.kind.clone(),
                });
            }
            let merged = out.entry(name.clone()).or_insert_with(|| EnumDef { members: vec![], ..e.clone() });
            merged.doc = e.doc.clone();
            for m in &e.members {
                match merged.members.iter_mut().find(|x| x.value == m.value) {
                    Some(x) if x.name != m.name => {
                        return Err(GenerateError::MemberRenamed {
                            revision: rev.revision.clone(),
                            name: name.clone(),
                            value: m.value.to_string(),
                            member: m.name.clone(),
                            earlier: x.name.clone(),
                        })
                    }
                    Some(x) => *x = m.clone(),
                    None => merged.members.push(m.clone()),
                }
            }
        }
    }
    Ok(out)
}

fn write_enum(out: &mut String, name: &str, e: &EnumDef) {
    doc(out, "", &format!("{} An open newtype: named constants for every member any revision defines (the terminal flags are the spec's), and any other value representable, so a report can show what a peer sent. Each revision's members: `{}` in its module.", e.doc, enum_members_const(name)));
    let _ =
        writeln!(out, "#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\npub struct {name}(pub i64);\n");
    let _ = writeln!(out, "impl {name} {{");
    for m in &e.members {
        doc(
            out,
            "    ",
            &format!(
                "{} (since {}; {}).",
                m.doc.trim_end_matches('.'),
                m.since,
                if m.terminal == Some(true) { "terminal" } else { "not terminal" }
            ),
        );
        let _ = writeln!(out, "    pub const {}: {name} = {name}({});", m.name, m.value);
    }
    let _ = writeln!(out, "\n    /// Every member any revision defines, with its name, in value order of declaration.");
    let items: Vec<String> = e.members.iter().map(|m| format!("({name}::{}, {})", m.name, rust_str(&m.name))).collect();
    let _ = writeln!(out, "    pub const ALL: [({name}, &'static str); {}] = [{}];\n", items.len(), items.join(", "));
    let _ = writeln!(out, "    /// The member's name, if some revision defines this value.");
    let _ = writeln!(out, "    pub fn name(self) -> Option<&'static str> {{\n        Self::ALL.iter().find(|(s, _)| *s == self).map(|(_, n)| *n)\n    }}\n");
    let _ = writeln!(out, "    /// Whether some revision defines this value.");
    let _ = writeln!(out, "    pub fn is_known(self) -> bool {{\n        self.name().is_some()\n    }}\n");
    let non_terminal: Vec<String> =
        e.members.iter().filter(|m| m.terminal == Some(false)).map(|m| format!("{name}::{}", m.name)).collect();
    let _ = writeln!(
        out,
        "    /// Whether this value ends a reply stream (every value the spec does not mark non-terminal does)."
    );
    if non_terminal.is_empty() {
        let _ = writeln!(out, "    pub fn is_terminal(self) -> bool {{\n        true\n    }}");
    } else {
        let _ = writeln!(
            out,
            "    pub fn is_terminal(self) -> bool {{\n        !matches!(self, {})\n    }}",
            non_terminal.join(" | ")
        );
    }
    let _ = writeln!(out, "}}\n");
    let _ = writeln!(out, "impl fmt::Debug for {name} {{\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {{\n        match self.name() {{\n            Some(n) => f.write_str(n),\n            None => write!(f, \"{name}({{}})\", self.0),\n        }}\n    }}\n}}\n");
    let _ = writeln!(out, "impl fmt::Display for {name} {{\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {{\n        fmt::Debug::fmt(self, f)\n    }}\n}}\n");
    let _ = writeln!(
        out,
        "impl EnumMember for {name} {{\n    fn from_wire(v: i64) -> Self {{\n        {name}(v)\n    }}\n}}\n"
    );
}
