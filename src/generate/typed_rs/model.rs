//! What the typed layer is, built once from one family of the spec: every revision's messages with their
//! fields' types ([`Ty`]), which revision first defines each struct (later ones re-export it), the family's
//! enums merged over its revisions, and its control tags. The writers read only this.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::emit::py_bytes;
use super::{module_name, GenerateError};
use crate::spec::{EnumDef, Family, FieldDef, Literal, Revision, StructDef, StructKind, TypeExpr};

/// The type of a value the generated code holds, resolved through the spec's aliases: the one type model of
/// the generator, the same at every position (a field, a list's element, a tuple's item, a dict's value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Ty {
    Int,
    Str,
    Bool,
    Bytes,
    /// Python's `Any`: [`crate::typed::Untyped`].
    Any,
    /// `optional[str]`.
    OptStr,
    /// `optional[list[str]]`, held as [`crate::typed::StrList`].
    OptStrList,
    /// An int enum of the family, by its spec name.
    Enum(String),
    /// `dict[str, tuple[str, list[list[int]]]]` (`grouped`) or, before 0.20.0, `dict[str, tuple[str,
    /// list[int]]]`: the push family's request blocks.
    ReqBlocks {
        grouped: bool,
    },
    /// `list[T]` or `tuple[T, ...]` (the same on the wire).
    List(Box<Ty>),
    Tuple(Vec<Ty>),
    /// A dict with `int` or `str` keys, held as its entries in wire order.
    Dict(Box<Ty>, Box<Ty>),
    /// A struct of the same revision encoded as a map; `generic` when it holds strings (so is `…Of<S>`), `eq`
    /// when it can derive `Eq` (holds no `any`).
    Struct {
        name: String,
        generic: bool,
        eq: bool,
    },
}

impl Ty {
    /// Whether a value of this type holds strings, so the struct holding it is generic over how (`…Of<S>`).
    pub(super) fn has_strings(&self) -> bool {
        match self {
            Ty::Str | Ty::OptStr | Ty::OptStrList | Ty::ReqBlocks { .. } => true,
            Ty::List(e) => e.has_strings(),
            Ty::Tuple(items) => items.iter().any(Ty::has_strings),
            Ty::Dict(k, v) => k.has_strings() || v.has_strings(),
            Ty::Struct { generic, .. } => *generic,
            Ty::Int | Ty::Bool | Ty::Bytes | Ty::Any | Ty::Enum(_) => false,
        }
    }

    /// Whether the type can derive `Eq` (it holds no `any`).
    pub(super) fn is_eq(&self) -> bool {
        match self {
            Ty::Any => false,
            Ty::List(e) => e.is_eq(),
            Ty::Tuple(items) => items.iter().all(Ty::is_eq),
            Ty::Dict(k, v) => k.is_eq() && v.is_eq(),
            Ty::Struct { eq, .. } => *eq,
            _ => true,
        }
    }

    /// The structs this type holds, by name.
    fn structs<'t>(&'t self, out: &mut Vec<&'t str>) {
        match self {
            Ty::List(e) => e.structs(out),
            Ty::Tuple(items) => items.iter().for_each(|e| e.structs(out)),
            Ty::Dict(k, v) => {
                k.structs(out);
                v.structs(out)
            }
            Ty::Struct { name, .. } => out.push(name),
            _ => {}
        }
    }
}

/// How a message is laid out on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A map of its fields in declaration order (`msgspec.Struct`, or a dataclass: never omitting defaults).
    Map,
    /// A tuple: an array of exactly its elements.
    Tuple,
}

/// One field of a message (a tuple's element).
#[derive(Clone, Debug)]
pub(super) struct Field {
    /// The wire name (the Rust field's name too).
    pub(super) name: String,
    pub(super) doc: String,
    pub(super) ty: Ty,
    /// Has no default, so must be on the wire.
    pub(super) required: bool,
    /// The spec default.
    pub(super) default: Option<Literal>,
    /// The default as the spec writes it (for docs).
    pub(super) default_display: String,
    /// What the field stands at when absent (`Revision::fallback_value`).
    pub(super) fallback: Option<Literal>,
    /// A `bytes` constant: checked and written, not stored.
    pub(super) constant: Option<Vec<u8>>,
}

/// One message struct of one revision.
#[derive(Clone, Debug)]
pub(super) struct Message {
    pub(super) name: String,
    pub(super) doc: String,
    /// Where the spec found it (for docs).
    pub(super) source: String,
    pub(super) kind: Kind,
    pub(super) omit_defaults: bool,
    pub(super) fields: Vec<Field>,
    /// What makes two revisions' structs the same Rust code: names, types, defaults, options, constants, the
    /// members of the enums they hold and the structs they hold (recursively).
    key: String,
}

impl Message {
    /// Fields held in the Rust struct (a tuple's constants are not).
    pub(super) fn stored(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(|f| f.constant.is_none())
    }

    /// Whether the struct holds strings, so is generic over how it holds them (`…Of<S>`).
    pub(super) fn generic(&self) -> bool {
        self.stored().any(|f| f.ty.has_strings())
    }

    pub(super) fn is_eq(&self) -> bool {
        self.stored().all(|f| f.ty.is_eq())
    }

    /// The tag in element 0, if this is a tuple whose first element is a bytes constant.
    pub(super) fn tag(&self) -> Option<&[u8]> {
        match self.kind {
            Kind::Tuple => self.fields.first()?.constant.as_deref(),
            Kind::Map => None,
        }
    }

    /// Bit `i` set: field `i` must be on the wire.
    pub(super) fn required_mask(&self) -> u64 {
        self.fields.iter().enumerate().filter(|(_, f)| f.required).fold(0, |m, (i, _)| m | 1 << i)
    }

    pub(super) fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// A struct of a revision's module: written there, or re-exported from the earlier revision that wrote the
/// same code.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub(super) message: Message,
    /// The revision whose module defines it, when an earlier one.
    pub(super) since: Option<String>,
}

/// One revision: its module's constants and structs.
#[derive(Clone, Debug)]
pub(super) struct RevisionModel {
    pub(super) revision: String,
    pub(super) module: String,
    pub(super) releases: Vec<String>,
    pub(super) summary: String,
    pub(super) generation: u32,
    /// Each enum of the revision with the members it defines.
    pub(super) enums: Vec<(String, Vec<String>)>,
    /// The raw (not MessagePack) reply constants: (name, bytes).
    pub(super) raw: Vec<(String, String)>,
    /// Its MessagePack messages in transport order, then the structs nested in them in spec order.
    pub(super) structs: Vec<Entry>,
    /// How many of `structs` are MessagePack messages of the transport (the first ones).
    pub(super) transported: usize,
}

impl RevisionModel {
    pub(super) fn messages(&self) -> &[Entry] {
        &self.structs[..self.transported]
    }
}

/// One family: what its generated file holds.
#[derive(Clone, Debug)]
pub(super) struct FamilyModel {
    pub(super) name: String,
    /// Every enum of the family, merged over its revisions (newest doc wins; a value keeps one name).
    pub(super) enums: BTreeMap<String, EnumDef>,
    /// Every control-tuple tag (element 0 of a tuple message, a bytes constant), by message, in the order first
    /// seen; one message keeps one tag and one tag one message.
    pub(super) tags: Vec<(String, Vec<u8>)>,
    /// Oldest first; never empty.
    pub(super) revisions: Vec<RevisionModel>,
    /// The module of the newest revision with a release.
    pub(super) released: String,
}

impl FamilyModel {
    pub(super) fn build(fam: &Family) -> Result<Self, GenerateError> {
        let enums = family_enums(fam)?;
        let mut first_seen: BTreeMap<String, String> = BTreeMap::new();
        let mut revisions = vec![];
        for rev in &fam.revisions {
            revisions.push(revision_model(rev, &mut first_seen)?);
        }
        if revisions.is_empty() {
            return Err(GenerateError::NoRevision { family: fam.name.clone(), released: false });
        }
        let released = fam
            .revisions
            .iter()
            .rev()
            .find(|r| !r.releases.is_empty())
            .map(|r| module_name(&r.revision))
            .ok_or_else(|| GenerateError::NoRevision { family: fam.name.clone(), released: true })?;
        let tags = family_tags(&revisions)?;
        Ok(FamilyModel { name: fam.name.clone(), enums, tags, revisions, released })
    }

    pub(super) fn newest(&self) -> &RevisionModel {
        self.revisions.last().expect("build refuses a family without revisions")
    }

    /// Each generation with the module of its newest revision.
    pub(super) fn newest_of_generations(&self) -> Vec<(u32, &str)> {
        let mut out: Vec<(u32, &str)> = vec![];
        for r in &self.revisions {
            match out.iter_mut().find(|(g, _)| *g == r.generation) {
                Some(last) => last.1 = &r.module,
                None => out.push((r.generation, &r.module)),
            }
        }
        out
    }
}

/// One revision's model; `first_seen` (struct key → revision) decides which structs it writes.
fn revision_model(rev: &Revision, first_seen: &mut BTreeMap<String, String>) -> Result<RevisionModel, GenerateError> {
    let (names, transported) = revision_structs(rev);
    let mut structs = vec![];
    for name in names {
        let message = Resolver::new(rev).message(name)?;
        let since = first_seen.get(&message.key).cloned();
        if since.is_none() {
            first_seen.insert(message.key.clone(), rev.revision.clone());
        }
        structs.push(Entry { message, since });
    }
    Ok(RevisionModel {
        revision: rev.revision.clone(),
        module: module_name(&rev.revision),
        releases: rev.releases.clone(),
        summary: rev.summary.clone(),
        generation: rev.generation,
        enums: (rev.enums.iter())
            .map(|(n, e)| (n.clone(), e.members.iter().map(|m| m.name.clone()).collect()))
            .collect(),
        raw: rev
            .transport
            .messages
            .iter()
            .filter(|t| t.encoding == "raw")
            .flat_map(|t| t.constants.iter().map(|c| (c.name.clone(), c.bytes.clone())))
            .collect(),
        structs,
        transported,
    })
}

/// The structs a revision's module holds: its MessagePack messages in transport order, then every other
/// struct of the revision (those nested in them) in spec order; with how many are messages.
fn revision_structs(rev: &Revision) -> (Vec<&str>, usize) {
    let mut out: Vec<&str> = vec![];
    let messages = rev.transport.messages.iter().filter(|t| t.encoding == "msgpack").map(|t| t.name.as_str());
    for name in messages {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    let transported = out.len();
    for name in rev.structs.keys() {
        if !out.contains(&name.as_str()) {
            out.push(name);
        }
    }
    (out, transported)
}

/// Reads one revision's structs and types; `stack` holds the structs being read (a struct holding itself is
/// refused), `keys` the key of every struct read.
struct Resolver<'a> {
    rev: &'a Revision,
    stack: Vec<String>,
    keys: BTreeMap<String, String>,
}

impl<'a> Resolver<'a> {
    fn new(rev: &'a Revision) -> Self {
        Resolver { rev, stack: vec![], keys: BTreeMap::new() }
    }

    fn message(&mut self, name: &str) -> Result<Message, GenerateError> {
        let rev = self.rev;
        let (name, def) = rev
            .structs
            .get_key_value(name)
            .ok_or_else(|| GenerateError::NoStruct { revision: rev.revision.clone(), name: name.to_string() })?;
        let kind = kind(rev, name, def)?;
        if def.fields.len() > 64 {
            return Err(GenerateError::TooManyFields { revision: rev.revision.clone(), name: name.clone() });
        }
        self.stack.push(name.clone());
        let fields: Result<Vec<Field>, _> = def
            .fields
            .iter()
            .map(|f| self.field(f, kind).map_err(|e| e.in_field(&rev.revision, name, &f.name)))
            .collect();
        self.stack.pop();
        let mut m = Message {
            name: name.clone(),
            doc: def.doc.clone(),
            source: def.source.clone(),
            kind,
            omit_defaults: def.kind == StructKind::MsgspecStruct && def.options.omit_defaults,
            fields: fields?,
            key: String::new(),
        };
        m.key = self.key(&m, def);
        self.keys.insert(m.name.clone(), m.key.clone());
        Ok(m)
    }

    fn field(&mut self, f: &'a FieldDef, kind: Kind) -> Result<Field, GenerateError> {
        let ty = self.ty(&f.ty)?;
        let default = f.default_literal()?;
        let constant = match (&f.const_value, kind) {
            (None, _) => None,
            (Some(c), Kind::Tuple) => match (Literal::parse(c)?, &ty) {
                (Literal::Bytes(b), Ty::Bytes) => Some(b),
                (l, _) => return Err(GenerateError::UnsupportedConstant(format!("{l:?}"))),
            },
            (Some(_), Kind::Map) => return Err(GenerateError::ConstantInMap),
        };
        if kind == Kind::Tuple && default.is_some() {
            return Err(GenerateError::TupleDefault);
        }
        Ok(Field {
            name: f.name.clone(),
            doc: f.doc.clone(),
            ty,
            required: f.required(),
            default,
            default_display: f.default_display(),
            fallback: self.rev.fallback_value(f)?,
            constant,
        })
    }

    fn resolve(&self, t: &'a TypeExpr) -> &'a TypeExpr {
        let mut t = t;
        while let TypeExpr::Named(n) = t {
            match self.rev.aliases.get(n) {
                Some(a) => t = &a.ty,
                None => break,
            }
        }
        t
    }

    /// The type of `t`.
    fn ty(&mut self, t: &'a TypeExpr) -> Result<Ty, GenerateError> {
        use TypeExpr as T;
        let unsupported = |why| GenerateError::UnsupportedType { ty: t.to_string(), why };
        Ok(match self.resolve(t) {
            T::Int => Ty::Int,
            T::Str => Ty::Str,
            T::Bool => Ty::Bool,
            T::Bytes => Ty::Bytes,
            T::Any => Ty::Any,
            T::Optional(e) => match self.ty(e)? {
                Ty::Str => Ty::OptStr,
                Ty::List(e) if *e == Ty::Str => Ty::OptStrList,
                _ => return Err(unsupported(None)),
            },
            T::List(e) | T::VarTuple(e) => Ty::List(Box::new(self.ty(e)?)),
            T::Tuple(items) => Ty::Tuple(items.iter().map(|e| self.ty(e)).collect::<Result<_, _>>()?),
            T::Dict(k, v) => self.dict(t, k, v)?,
            T::Named(n) if self.rev.enums.get(n).is_some_and(|e| e.kind == "IntEnum") => Ty::Enum(n.clone()),
            T::Named(n) if self.rev.structs.contains_key(n) => self.nested(t, n)?,
            _ => return Err(unsupported(None)),
        })
    }

    /// The type of `t`, a dict of `k` to `v`.
    fn dict(&mut self, t: &TypeExpr, k: &'a TypeExpr, v: &'a TypeExpr) -> Result<Ty, GenerateError> {
        let k = self.ty(k)?;
        if !matches!(k, Ty::Int | Ty::Str) {
            return Err(GenerateError::UnsupportedType { ty: t.to_string(), why: Some("dict keys are int or str") });
        }
        let v = self.ty(v)?;
        Ok(match (&k, &v) {
            (Ty::Str, Ty::Tuple(items)) if items.len() == 2 && items[0] == Ty::Str => match &items[1] {
                Ty::List(e) if **e == Ty::Int => Ty::ReqBlocks { grouped: false },
                Ty::List(e) if matches!(&**e, Ty::List(e2) if **e2 == Ty::Int) => Ty::ReqBlocks { grouped: true },
                _ => Ty::Dict(Box::new(k), Box::new(v)),
            },
            _ => Ty::Dict(Box::new(k), Box::new(v)),
        })
    }

    /// The type of `t`, struct `name` held by another.
    fn nested(&mut self, t: &TypeExpr, name: &str) -> Result<Ty, GenerateError> {
        if self.stack.iter().any(|s| s == name) {
            return Err(GenerateError::HoldsItself(name.to_string()));
        }
        let m = self.message(name)?;
        if m.kind == Kind::Tuple {
            let why = Some("a tuple message inside another type");
            return Err(GenerateError::UnsupportedType { ty: t.to_string(), why });
        }
        Ok(Ty::Struct { name: m.name.clone(), generic: m.generic(), eq: m.is_eq() })
    }

    fn key(&self, m: &Message, def: &StructDef) -> String {
        let mut k = format!("{}|{:?}|{:?}|", m.name, def.kind, def.options);
        let mut nested = vec![];
        for f in &m.fields {
            let _ = write!(k, "{}:{:?}:{:?}:{:?};", f.name, f.ty, f.default, f.constant);
            if let Ty::Enum(e) = &f.ty {
                let members: Vec<(i64, &str)> =
                    self.rev.enums[e].members.iter().map(|m| (m.value, m.name.as_str())).collect();
                let _ = write!(k, "{members:?};");
            }
            f.ty.structs(&mut nested);
        }
        for n in nested {
            let _ = write!(k, "<{}>", self.keys.get(n).map_or("", String::as_str));
        }
        k
    }
}

/// How the struct is laid out, or why the generator does not write it.
fn kind(rev: &Revision, name: &str, def: &StructDef) -> Result<Kind, GenerateError> {
    let o = &def.options;
    match def.kind {
        StructKind::MsgspecStruct
            if !o.array_like && o.tag.is_none() && o.rename.is_none() && !o.forbid_unknown_fields =>
        {
            Ok(Kind::Map)
        }
        StructKind::Dataclass => Ok(Kind::Map),
        StructKind::Tuple => Ok(Kind::Tuple),
        _ => Err(GenerateError::UnsupportedStruct {
            revision: rev.revision.clone(),
            name: name.to_string(),
            kind: format!("{:?}", def.kind),
            options: format!("{o:?}"),
        }),
    }
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

/// Every control-tuple tag of the family, by message, in the order first seen.
fn family_tags(revisions: &[RevisionModel]) -> Result<Vec<(String, Vec<u8>)>, GenerateError> {
    let mut out: Vec<(String, Vec<u8>)> = vec![];
    for rev in revisions {
        for msg in rev.structs.iter().map(|e| &e.message) {
            let Some(tag) = msg.tag() else { continue };
            match out.iter().find(|(m, t)| *m == msg.name || t == tag) {
                Some((m, t)) if *m != msg.name || t != tag => {
                    return Err(GenerateError::TagClash {
                        revision: rev.revision.clone(),
                        name: msg.name.clone(),
                        tag: py_bytes(tag),
                        earlier: m.clone(),
                        earlier_tag: py_bytes(t),
                    })
                }
                Some(_) => {}
                None => out.push((msg.name.clone(), tag.to_vec())),
            }
        }
    }
    Ok(out)
}
