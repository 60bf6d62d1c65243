//! Compiles a revision's type expressions into a flat arena the decoder and encoder walk without looking
//! names up: aliases are inlined, enums and structs become indices.

// The plan's types are public with the `testing` feature only (`codec` re-exports them then); without it their
// `pub` reaches no further than the crate.
#![cfg_attr(not(feature = "testing"), allow(unreachable_pub))]

use std::collections::HashMap;
use std::sync::Arc;

use super::error::CompileError;
use super::value::{EnumValue, StructMeta, Value};
use crate::msgpack::{Key, WireInt};
use crate::spec::{Literal, Revision, StructDef, StructKind, Tag, TypeExpr};

/// A compiled type: an index into the types of a codec's compiled plan.
pub type TyId = u32;

#[derive(Clone, Debug)]
/// A compiled type, its names resolved (aliases inlined, enums and structs by index).
pub enum Ty {
    /// `int`.
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
    List(TyId),
    /// `dict[K, V]`.
    Dict(TyId, TyId),
    /// `tuple[A, B, …]`: exactly these elements.
    Tuple(Box<[TyId]>),
    /// `T | None`.
    Optional(TyId),
    /// `tuple[T, ...]`: an array of any length, decoded as a tuple.
    VarTuple(TyId),
    /// Python's `Any`: whatever MessagePack holds, decoded untyped.
    Any,
    /// An int enum: an index into the plan's enums.
    Enum(u32),
    /// A struct: an index into [`Plan::structs`].
    Struct(u32),
}

#[derive(Debug)]
pub(crate) struct CEnum {
    pub(crate) name: String,
    pub(crate) members: Vec<(Arc<str>, i64)>,
}

impl CEnum {
    pub(crate) fn member(&self, v: WireInt) -> Option<EnumValue> {
        let v = v.as_i64()?;
        self.members.iter().find(|(_, x)| *x == v).map(|(n, x)| EnumValue { name: n.clone(), value: *x })
    }
}

#[derive(Debug)]
/// A field of a compiled struct.
pub struct CField {
    /// The Python attribute name.
    pub name: String,
    /// The name on the wire (after `rename`).
    pub wire_name: String,
    /// Its type.
    pub ty: TyId,
    /// `None` = required.
    pub default: Option<Value>,
    /// The one value the field may hold (tuple messages' tags).
    pub const_value: Option<Value>,
    /// The wire name as the encoder writes it (a MessagePack str, head included).
    pub(crate) key: Key,
}

impl CField {
    /// Whether `v` equals the field's default (`omit_defaults` leaves it out): the common defaults are
    /// compared without the general equality.
    #[inline]
    pub(crate) fn is_default(&self, v: &Value) -> bool {
        match (&self.default, v) {
            (None, _) => false,
            (Some(Value::None), v) => v.is_none(),
            (Some(Value::Int(d)), Value::Int(i)) => d == i,
            (Some(Value::IntList(d)), Value::IntList(x)) => d == x,
            (Some(Value::StrList(d)), Value::StrList(x)) => d == x,
            (Some(d), v) => d == v,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
/// A tagged union's tag value (`tag = "..."` or an int).
pub enum TagValue {
    /// A string tag.
    Str(String),
    /// An int tag.
    Int(i64),
}

#[derive(Debug)]
/// A compiled struct: its fields and msgspec's struct options.
pub struct CStruct {
    /// Name and field names, shared with the values it decodes to.
    pub meta: Arc<StructMeta>,
    /// Fields in declaration order.
    pub fields: Vec<CField>,
    /// Omit fields equal to their default (msgspec `omit_defaults`; never for dataclasses).
    pub omit_defaults: bool,
    /// Encoded as an array instead of a map (msgspec `array_like`).
    pub array_like: bool,
    /// An unknown map key is an error (msgspec `forbid_unknown_fields`).
    pub forbid_unknown_fields: bool,
    /// The tag field name and value, for tagged unions.
    pub tag: Option<(String, TagValue)>,
    /// Entries the encoder declares: fields plus the tag. Picks the map header width.
    pub declared: usize,
    /// Fields that must be present in an array_like encoding (leading required ones).
    pub min_array_len: usize,
    /// A tuple message: exactly `fields.len()` elements (msgspec's `tuple[A, B]` rule and error).
    pub exact_len: bool,
}

impl CStruct {
    /// Index of the field whose wire name is `key`, compared as raw bytes (msgspec does not check UTF-8 here).
    #[inline]
    pub(crate) fn field_index(&self, key: &[u8]) -> Option<usize> {
        self.fields.iter().position(|f| f.wire_name.as_bytes() == key)
    }
}

#[derive(Debug, Default)]
/// A revision's compiled types: the arena the decoder and encoder walk.
pub struct Plan {
    /// Every type, by [`TyId`].
    pub types: Vec<Ty>,
    pub(crate) enums: Vec<CEnum>,
    /// Every struct, by the index [`Ty::Struct`] holds.
    pub structs: Vec<CStruct>,
    /// Named types (messages, aliases, structs) by name.
    pub by_name: HashMap<String, TyId>,
}

/// Where a name points during compilation.
pub(crate) enum NameDef<'a> {
    Alias(&'a TypeExpr),
    Enum(&'a str, Vec<(String, i64)>),
    Struct(&'a str, &'a StructDef),
}

/// Which names a codec covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `structs` and `enums` of the revision (MessagePack on the side channel).
    Wire,
    /// `bootstrap.models` (JSON bodies of the bootstrap HTTP server).
    Bootstrap,
}

fn lookup<'a>(rev: &'a Revision, scope: Scope, n: &str) -> Option<NameDef<'a>> {
    if let Some(a) = rev.aliases.get(n) {
        return Some(NameDef::Alias(&a.ty));
    }
    match scope {
        Scope::Wire => {
            if let Some((name, e)) = rev.enums.get_key_value(n) {
                return Some(NameDef::Enum(name, e.members.iter().map(|m| (m.name.clone(), m.value)).collect()));
            }
            rev.structs.get_key_value(n).map(|(name, s)| NameDef::Struct(name, s))
        }
        Scope::Bootstrap => rev.bootstrap.as_ref()?.models.get_key_value(n).map(|(name, s)| NameDef::Struct(name, s)),
    }
}

pub(crate) struct Compiler<'a> {
    pub(crate) plan: Plan,
    rev: &'a Revision,
    scope: Scope,
    cache: HashMap<TypeExpr, TyId>,
    struct_ids: HashMap<String, u32>,
    alias_stack: Vec<String>,
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(rev: &'a Revision, scope: Scope, plan: Plan) -> Self {
        Compiler { plan, rev, scope, cache: HashMap::new(), struct_ids: HashMap::new(), alias_stack: vec![] }
    }

    fn push(&mut self, t: Ty) -> TyId {
        self.plan.types.push(t);
        (self.plan.types.len() - 1) as TyId
    }

    pub(crate) fn compile(&mut self, t: &TypeExpr) -> Result<TyId, CompileError> {
        if let Some(id) = self.cache.get(t) {
            return Ok(*id);
        }
        let ty = match t {
            TypeExpr::Int => Ty::Int,
            TypeExpr::Str => Ty::Str,
            TypeExpr::Bool => Ty::Bool,
            TypeExpr::Float => Ty::Float,
            TypeExpr::Bytes => Ty::Bytes,
            TypeExpr::List(e) => Ty::List(self.compile(e)?),
            TypeExpr::Optional(e) => {
                let inner = self.compile(e)?;
                if matches!(self.plan.types[inner as usize], Ty::Optional(_)) {
                    return Ok(inner);
                }
                Ty::Optional(inner)
            }
            TypeExpr::Dict(k, v) => Ty::Dict(self.compile(k)?, self.compile(v)?),
            TypeExpr::Tuple(ts) => Ty::Tuple(ts.iter().map(|e| self.compile(e)).collect::<Result<Vec<_>, _>>()?.into()),
            TypeExpr::VarTuple(e) => Ty::VarTuple(self.compile(e)?),
            TypeExpr::Any => Ty::Any,
            TypeExpr::Named(n) => return self.named(n),
        };
        let id = self.push(ty);
        self.cache.insert(t.clone(), id);
        Ok(id)
    }

    fn named(&mut self, n: &str) -> Result<TyId, CompileError> {
        if let Some(id) = self.plan.by_name.get(n) {
            return Ok(*id);
        }
        match lookup(self.rev, self.scope, n).ok_or_else(|| CompileError::UnknownType(n.to_string()))? {
            NameDef::Alias(t) => {
                if self.alias_stack.iter().any(|a| a == n) {
                    return Err(CompileError::SelfAlias(n.to_string()));
                }
                self.alias_stack.push(n.to_string());
                let id = self.compile(t);
                self.alias_stack.pop();
                let id = id?;
                self.plan.by_name.insert(n.to_string(), id);
                Ok(id)
            }
            NameDef::Enum(name, members) => {
                self.plan.enums.push(CEnum {
                    name: name.to_string(),
                    members: members.into_iter().map(|(m, v)| (Arc::from(m.as_str()), v)).collect(),
                });
                let id = self.push(Ty::Enum((self.plan.enums.len() - 1) as u32));
                self.plan.by_name.insert(n.to_string(), id);
                Ok(id)
            }
            NameDef::Struct(name, def) => {
                // Reserve the ids first so recursive structs resolve to themselves.
                let sid = self.plan.structs.len() as u32;
                self.struct_ids.insert(name.to_string(), sid);
                self.plan.structs.push(CStruct {
                    meta: Arc::new(StructMeta { name: name.to_string(), field_names: vec![] }),
                    fields: vec![],
                    omit_defaults: false,
                    array_like: false,
                    forbid_unknown_fields: false,
                    tag: None,
                    declared: 0,
                    min_array_len: 0,
                    exact_len: false,
                });
                let id = self.push(Ty::Struct(sid));
                self.plan.by_name.insert(n.to_string(), id);
                let s = self.compile_struct(name, def)?;
                self.plan.structs[sid as usize] = s;
                Ok(id)
            }
        }
    }

    fn compile_struct(&mut self, name: &str, def: &StructDef) -> Result<CStruct, CompileError> {
        let o = &def.options;
        let msgspec = def.kind == StructKind::MsgspecStruct;
        let mut fields = Vec::new();
        for f in &def.fields {
            let ty = self.compile(&f.ty)?;
            let default = match f.default_literal()? {
                None => None,
                Some(l) => Some(literal_value(&l, ty, &self.plan).map_err(|e| CompileError::Default {
                    owner: name.to_string(),
                    field: f.name.clone(),
                    source: Box::new(e),
                })?),
            };
            let wire_name = match (msgspec, o.rename.as_deref()) {
                (true, Some(mode)) => rename(&f.name, mode)?,
                _ => f.name.clone(),
            };
            // JSON models' constants are checked by the bootstrap layer; tuple messages' tags here.
            let const_value = match &f.const_value {
                Some(c) if def.kind == StructKind::Tuple => {
                    let in_const = |e: CompileError| CompileError::Const {
                        owner: name.to_string(),
                        field: f.name.clone(),
                        source: Box::new(e),
                    };
                    let l = Literal::parse(c).map_err(|e| in_const(e.into()))?;
                    Some(literal_value(&l, ty, &self.plan).map_err(in_const)?)
                }
                _ => None,
            };
            if def.kind == StructKind::Tuple && default.is_some() {
                return Err(CompileError::TupleDefault { owner: name.to_string(), field: f.name.clone() });
            }
            let key = Key::str(&wire_name);
            fields.push(CField { name: f.name.clone(), wire_name, ty, default, const_value, key });
        }
        let tag = match (&o.tag, msgspec) {
            (None, _) | (Some(Tag::Bool(false)), _) => None,
            (Some(_), false) => return Err(CompileError::TagNotMsgspec(name.to_string())),
            (Some(t), true) => {
                let field = o.tag_field.clone().unwrap_or_else(|| "type".into());
                let v = match t {
                    Tag::Bool(_) => TagValue::Str(name.to_string()),
                    Tag::Str(s) => TagValue::Str(s.clone()),
                    Tag::Int(i) => TagValue::Int(*i),
                };
                Some((field, v))
            }
        };
        let min_array_len = fields.iter().take_while(|f| f.default.is_none()).count() + tag.is_some() as usize;
        let tuple = def.kind == StructKind::Tuple;
        Ok(CStruct {
            meta: Arc::new(StructMeta {
                name: name.to_string(),
                field_names: fields.iter().map(|f| f.name.clone()).collect(),
            }),
            declared: fields.len() + tag.is_some() as usize,
            omit_defaults: msgspec && o.omit_defaults && !o.array_like,
            array_like: (msgspec && o.array_like) || tuple,
            forbid_unknown_fields: (msgspec && o.forbid_unknown_fields) || tuple,
            tag,
            min_array_len,
            exact_len: tuple,
            fields,
        })
    }
}

/// msgspec's `rename` modes.
pub(crate) fn rename(name: &str, mode: &str) -> Result<String, CompileError> {
    let lead = name.len() - name.trim_start_matches('_').len();
    let (prefix, rest) = name.split_at(lead);
    let parts: Vec<&str> = rest.split('_').filter(|p| !p.is_empty()).collect();
    let cap = |p: &str| {
        let mut c = p.chars();
        c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
    };
    Ok(match mode {
        "lower" => name.to_lowercase(),
        "upper" => name.to_uppercase(),
        "kebab" => format!("{prefix}{}", rest.trim_end_matches('_').replace('_', "-")),
        "camel" => {
            let mut s = prefix.to_string();
            for (i, p) in parts.iter().enumerate() {
                s.push_str(&if i == 0 { p.to_string() } else { cap(p) });
            }
            s
        }
        "pascal" => format!("{prefix}{}", parts.iter().map(|p| cap(p)).collect::<String>()),
        other => return Err(CompileError::RenameMode(other.to_string())),
    })
}

/// Turns a default literal into the value of the field's type.
pub(crate) fn literal_value(l: &Literal, ty: TyId, plan: &Plan) -> Result<Value, CompileError> {
    let t = &plan.types[ty as usize];
    Ok(match (l, t) {
        (Literal::None, Ty::Optional(_)) => Value::None,
        (_, Ty::Optional(inner)) => literal_value(l, *inner, plan)?,
        (Literal::Bool(b), Ty::Bool) => Value::Bool(*b),
        (Literal::Int(i), Ty::Int) => Value::Int(WireInt::new(*i)?),
        (Literal::Int(i), Ty::Float) => Value::Float(*i as f64),
        (Literal::Float(x), Ty::Float) => Value::Float(*x),
        (Literal::Int(i), Ty::Enum(e)) => {
            let w = WireInt::new(*i)?;
            Value::Enum(plan.enums[*e as usize].member(w).ok_or(CompileError::NotAMember(*i))?)
        }
        (Literal::Str(s), Ty::Str) => Value::Str(s.clone()),
        (Literal::Bytes(b), Ty::Bytes) => Value::Bytes(b.clone()),
        (Literal::EmptyList, Ty::List(e)) => Value::list_of(&plan.types[*e as usize], vec![]),
        (Literal::EmptyTuple | Literal::EmptyList, Ty::Tuple(ts)) if ts.is_empty() => Value::Tuple(vec![]),
        (Literal::EmptyDict, Ty::Dict(..)) => Value::Dict(vec![]),
        _ => return Err(CompileError::DoesNotFit(l.to_string())),
    })
}

/// Lists built outside the decoder, in the decoder's form (here beside [`Ty`], which picks the form).
impl Value {
    /// The list of `xs` in the form the decoder gives a list of `elem` ([`Value::IntList`] for `int`,
    /// [`Value::StrList`] for `str`, when every element is one), so that values built elsewhere (from JSON,
    /// by the test generators) look like decoded ones.
    pub(crate) fn list_of(elem: &Ty, xs: Vec<Value>) -> Value {
        match elem {
            Ty::Int if xs.iter().all(|x| matches!(x, Value::Int(_))) => {
                Value::IntList(xs.iter().filter_map(Value::as_int).collect())
            }
            Ty::Str if xs.iter().all(|x| matches!(x, Value::Str(_))) => {
                Value::StrList(xs.iter().filter_map(Value::as_str).collect())
            }
            _ => Value::List(xs),
        }
    }
}
