//! A value of one revision's message as a value of the same message in another revision, driven by the two
//! revisions' specs alone (their field lists and types): fields are matched by name; a field the source lacks
//! takes the target's fallback value (`Revision::fallback_value`: its default, else the neutral value of its
//! type); a field the target lacks must stand at the source's fallback value to be said there (or is dropped,
//! [`Lacking::Drop`]); an enum value must be a member of the target's enum; a flat list becomes one group of
//! a list of groups (none when empty) and back (more than one group cannot be said). These are the rules the
//! generated conversions (`from_newest` / `to_newest`, `src/typed/generated/via_newest.rs`) compile for the
//! built-in revisions; this is how a revision known only at run time (a spec loaded at run time) is spoken.

use super::compile::{literal_value, Plan, Ty, TyId};
use super::value::{StructValue, Value};
use super::Codec;
use crate::msgpack::WireInt;
use std::borrow::Cow;

/// What happens to a field of the source that the target's struct lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lacking {
    /// It must stand at its fallback value, else the message cannot be said in the target (`Err`).
    MustBeDefault,
    /// It is dropped whatever it holds (a projection onto what the target can say).
    Drop,
}

/// Why a value cannot be said in the target revision ([`convert`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// One of the two revisions has no such message.
    #[error("{revision} has no {message}")]
    NoMessage {
        /// The revision.
        revision: String,
        /// The message asked for.
        message: String,
    },
    /// A field the target lacks holds something other than the value it stands at when absent
    /// ([`Lacking::MustBeDefault`]).
    #[error("no field `{field}`, so {value} cannot be sent")]
    Lacking {
        /// The field.
        field: String,
        /// What it holds, rendered.
        value: String,
    },
    /// An enum value the target's enum does not define.
    #[error("no {enum_name} member {value}")]
    NotAMember {
        /// The target's enum.
        enum_name: String,
        /// The value, rendered (the generated conversions name a member of the source's enum by its name).
        value: String,
    },
    /// A list of groups with more than one group, where the target's list is flat.
    #[error("one list is carried where {0} groups are given")]
    TooManyGroups(usize),
    /// An element of a list of groups that is not a list.
    #[error("a group is not a list")]
    NotAGroup,
    /// A request of a `req_blocks` dict with more than one block group, where the target carries one block list
    /// per request (the generated conversions).
    #[error("one block list per request is carried; {request} has {groups} groups")]
    RequestGroups {
        /// The request (its key in `req_blocks`).
        request: String,
        /// The groups it has.
        groups: usize,
    },
    /// The two types have no conversion rule.
    #[error("no conversion from `{from}` to `{to}`")]
    NoRule {
        /// msgspec's name of the source type.
        from: String,
        /// msgspec's name of the target type.
        to: String,
    },
    /// A struct value whose field count is not its struct's.
    #[error("a {name} value with {fields} fields")]
    FieldCount {
        /// The struct.
        name: String,
        /// The fields the value has.
        fields: usize,
    },
    /// The spec gives no value a field stands at when absent.
    #[error("{0}")]
    NoFallback(String),
    /// The value the spec gives a field when absent is no literal, or does not fit the field's type.
    #[error(transparent)]
    BadFallback(#[from] super::CompileError),
    /// The error is about this field of the target's struct.
    #[error("{field}: {source}")]
    InField {
        /// The field.
        field: String,
        /// What is wrong with it.
        source: Box<ConvertError>,
    },
    /// The two revisions' types of a message have no field-by-field rule (a check of the types alone, before
    /// any value).
    #[error("{message} of {from} has no field-by-field counterpart in {to}")]
    NoCounterpart {
        /// The message.
        message: String,
        /// The source revision.
        from: String,
        /// The target revision.
        to: String,
    },
    /// The error is about saying the message in this revision.
    #[error("{revision}: {source}")]
    InRevision {
        /// The revision.
        revision: String,
        /// What it cannot say.
        source: Box<ConvertError>,
    },
}

impl ConvertError {
    /// The error as about saying the message in `revision` ([`ConvertError::InRevision`]).
    pub fn in_revision(self, revision: impl Into<String>) -> ConvertError {
        ConvertError::InRevision { revision: revision.into(), source: Box::new(self) }
    }

    /// The error under any [`ConvertError::InField`] and [`ConvertError::InRevision`] wrappers.
    pub fn innermost(&self) -> &ConvertError {
        match self {
            ConvertError::InField { source, .. } | ConvertError::InRevision { source, .. } => source.innermost(),
            e => e,
        }
    }
}

/// `v`, a value of `message` in `from`'s revision, as a value of `message` in `to`'s revision. `Err` says what
/// cannot be said in the target.
pub fn convert(from: &Codec, to: &Codec, message: &str, v: &Value, lacking: Lacking) -> Result<Value, ConvertError> {
    let no = |c: &Codec| ConvertError::NoMessage { revision: c.revision().revision.clone(), message: message.into() };
    let ft = from.message_type(message).ok_or_else(|| no(from))?;
    let tt = to.message_type(message).ok_or_else(|| no(to))?;
    Conv { from, to, lacking }.value(ft, tt, v)
}

/// Whether every value of `message` in `from` has a counterpart in `to` by these rules, as far as the types
/// say (an enum value outside the target's enum, or more than one group where the target's list is flat, can
/// still fail one value): `Err` names the first field whose types have no rule, or a field of one side with
/// no fallback value that the other side lacks.
pub(crate) fn check(from: &Codec, to: &Codec, message: &str) -> Result<(), ConvertError> {
    let no = |c: &Codec| ConvertError::NoMessage { revision: c.revision().revision.clone(), message: message.into() };
    let ft = from.message_type(message).ok_or_else(|| no(from))?;
    let tt = to.message_type(message).ok_or_else(|| no(to))?;
    let c = Conv { from, to, lacking: Lacking::MustBeDefault };
    if c.convertible(ft, tt, 0) {
        Ok(())
    } else {
        Err(ConvertError::NoCounterpart {
            message: message.to_string(),
            from: from.revision().revision.clone(),
            to: to.revision().revision.clone(),
        })
    }
}

/// One list as a list of groups: none for an empty list, else the list as the one group.
pub(crate) fn group_one<T: Clone>(flat: &[T]) -> Vec<Vec<T>> {
    if flat.is_empty() {
        vec![]
    } else {
        vec![flat.to_vec()]
    }
}

/// A list of groups as one list: no group is the empty list, one group is its list; more cannot be said
/// (`Err`: how many there are).
pub(crate) fn flatten_one<T: Clone>(groups: &[Vec<T>]) -> Result<Vec<T>, usize> {
    match groups {
        [] => Ok(vec![]),
        [one] => Ok(one.clone()),
        more => Err(more.len()),
    }
}

struct Conv<'c> {
    from: &'c Codec,
    to: &'c Codec,
    lacking: Lacking,
}

/// How a list of the source becomes a list of the target.
enum ListRule {
    Elementwise,
    Group,
    Flatten,
}

/// Nesting beyond which types are taken as not convertible (recursive structs).
const MAX_TYPE_DEPTH: usize = 32;

impl Conv<'_> {
    fn fp(&self) -> &Plan {
        self.from.plan()
    }
    fn tp(&self) -> &Plan {
        self.to.plan()
    }

    fn list_rule(&self, fe: TyId, te: TyId, depth: usize) -> Option<ListRule> {
        if self.convertible(fe, te, depth + 1) {
            return Some(ListRule::Elementwise);
        }
        match (&self.fp().types[fe as usize], &self.tp().types[te as usize]) {
            (_, Ty::List(te2)) if self.convertible(fe, *te2, depth + 1) => Some(ListRule::Group),
            (Ty::List(fe2), _) if self.convertible(*fe2, te, depth + 1) => Some(ListRule::Flatten),
            _ => None,
        }
    }

    fn convertible(&self, ft: TyId, tt: TyId, depth: usize) -> bool {
        if depth > MAX_TYPE_DEPTH {
            return false;
        }
        let d = depth + 1;
        match (&self.fp().types[ft as usize], &self.tp().types[tt as usize]) {
            (Ty::Int, Ty::Int)
            | (Ty::Str, Ty::Str)
            | (Ty::Bool, Ty::Bool)
            | (Ty::Float, Ty::Float)
            | (Ty::Bytes, Ty::Bytes)
            | (Ty::Any, Ty::Any)
            | (Ty::Enum(_), Ty::Enum(_)) => true,
            (Ty::Optional(a), Ty::Optional(b)) | (Ty::VarTuple(a), Ty::VarTuple(b)) => self.convertible(*a, *b, d),
            (Ty::List(a), Ty::List(b)) => self.list_rule(*a, *b, depth).is_some(),
            (Ty::Dict(ka, va), Ty::Dict(kb, vb)) => self.convertible(*ka, *kb, d) && self.convertible(*va, *vb, d),
            (Ty::Tuple(a), Ty::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| self.convertible(*x, *y, d))
            }
            (Ty::Struct(a), Ty::Struct(b)) => {
                let (fs, ts) = (&self.fp().structs[*a as usize], &self.tp().structs[*b as usize]);
                let fields_ok = ts.fields.iter().all(|tf| match fs.fields.iter().find(|f| f.name == tf.name) {
                    Some(ff) => self.convertible(ff.ty, tf.ty, d),
                    None => self.fallback(self.to, &ts.meta.name, &tf.name, tf.ty).is_ok(),
                });
                let lacking_ok = self.lacking == Lacking::Drop
                    || fs.fields.iter().all(|ff| {
                        ts.fields.iter().any(|tf| tf.name == ff.name)
                            || self.fallback(self.from, &fs.meta.name, &ff.name, ff.ty).is_ok()
                    });
                fields_ok && lacking_ok
            }
            _ => false,
        }
    }

    /// The fallback value of field `field` of struct `st` in `codec`'s revision, as a value of type `ty`.
    fn fallback(&self, codec: &Codec, st: &str, field: &str, ty: TyId) -> Result<Value, ConvertError> {
        let rev = codec.revision();
        let def = rev
            .structs
            .get(st)
            .and_then(|s| s.fields.iter().find(|f| f.name == field))
            .ok_or_else(|| ConvertError::NoFallback(format!("{}: no field {st}.{field}", rev.revision)))?;
        let lit = rev.fallback_value(def).map_err(super::CompileError::from)?.ok_or_else(|| {
            ConvertError::NoFallback(format!("{}: {st}.{field} has no value it stands at when absent", rev.revision))
        })?;
        Ok(literal_value(&lit, ty, codec.plan())?)
    }

    fn value(&self, ft: TyId, tt: TyId, v: &Value) -> Result<Value, ConvertError> {
        let (fty, tty) = (&self.fp().types[ft as usize], &self.tp().types[tt as usize]);
        Ok(match (fty, tty, v) {
            (Ty::Optional(_), Ty::Optional(_), Value::None) => Value::None,
            (Ty::Optional(a), Ty::Optional(b), v) => self.value(*a, *b, v)?,
            (Ty::Int, Ty::Int, _)
            | (Ty::Str, Ty::Str, _)
            | (Ty::Bool, Ty::Bool, _)
            | (Ty::Float, Ty::Float, _)
            | (Ty::Bytes, Ty::Bytes, _)
            | (Ty::Any, Ty::Any, _) => v.clone(),
            (Ty::Enum(_), Ty::Enum(e), Value::Enum(m)) => {
                let te = &self.tp().enums[*e as usize];
                Value::Enum(te.member(WireInt::from_i64(m.value)).ok_or_else(|| ConvertError::NotAMember {
                    enum_name: te.name.clone(),
                    value: m.value.to_string(),
                })?)
            }
            (Ty::List(a), Ty::List(b), Value::List(_) | Value::IntList(_) | Value::StrList(_)) => {
                // Any of the three list forms; the result takes the form the target's element type packs to.
                let xs: Vec<Value> = v.items().into_iter().flatten().map(Cow::into_owned).collect();
                let list = |elem: TyId, xs: Vec<Value>| Value::list_of(&self.tp().types[elem as usize], xs);
                match self.list_rule(*a, *b, 0) {
                    Some(ListRule::Elementwise) => list(*b, self.each(*a, *b, &xs)?),
                    Some(ListRule::Group) => {
                        let Ty::List(b2) = &self.tp().types[*b as usize] else { unreachable!("a group rule") };
                        let converted = self.each(*a, *b2, &xs)?;
                        Value::List(group_one(&converted).into_iter().map(|g| list(*b2, g)).collect())
                    }
                    Some(ListRule::Flatten) => {
                        let Ty::List(a2) = &self.fp().types[*a as usize] else { unreachable!("a flatten rule") };
                        let groups: Vec<Vec<Value>> = xs
                            .iter()
                            .map(|g| {
                                g.items().map(|it| it.map(Cow::into_owned).collect()).ok_or(ConvertError::NotAGroup)
                            })
                            .collect::<Result<_, _>>()?;
                        let flat = flatten_one(&groups).map_err(ConvertError::TooManyGroups)?;
                        list(*b, self.each(*a2, *b, &flat)?)
                    }
                    None => return Err(self.no_rule(ft, tt)),
                }
            }
            (Ty::VarTuple(a), Ty::VarTuple(b), Value::Tuple(xs)) => Value::Tuple(self.each(*a, *b, xs)?),
            (Ty::Tuple(a), Ty::Tuple(b), Value::Tuple(xs)) if a.len() == b.len() && xs.len() == a.len() => {
                Value::Tuple(
                    xs.iter()
                        .zip(a.iter().zip(b.iter()))
                        .map(|(x, (p, q))| self.value(*p, *q, x))
                        .collect::<Result<_, _>>()?,
                )
            }
            (Ty::Dict(ka, va), Ty::Dict(kb, vb), Value::Dict(es)) => Value::Dict(
                es.iter()
                    .map(|(k, x)| Ok((self.value(*ka, *kb, k)?, self.value(*va, *vb, x)?)))
                    .collect::<Result<_, ConvertError>>()?,
            ),
            (Ty::Struct(a), Ty::Struct(b), Value::Struct(sv)) => self.structure(*a, *b, sv)?,
            _ => return Err(self.no_rule(ft, tt)),
        })
    }

    fn each(&self, a: TyId, b: TyId, xs: &[Value]) -> Result<Vec<Value>, ConvertError> {
        xs.iter().map(|x| self.value(a, b, x)).collect()
    }

    #[cold]
    fn no_rule(&self, ft: TyId, tt: TyId) -> ConvertError {
        ConvertError::NoRule { from: self.from.expected_name(ft), to: self.to.expected_name(tt) }
    }

    fn structure(&self, a: u32, b: u32, sv: &StructValue) -> Result<Value, ConvertError> {
        let (fs, ts) = (&self.fp().structs[a as usize], &self.tp().structs[b as usize]);
        if sv.fields.len() != fs.fields.len() {
            return Err(ConvertError::FieldCount { name: fs.meta.name.clone(), fields: sv.fields.len() });
        }
        if self.lacking == Lacking::MustBeDefault {
            for (ff, x) in fs.fields.iter().zip(&sv.fields) {
                if ts.fields.iter().any(|tf| tf.name == ff.name) {
                    continue;
                }
                if self.fallback(self.from, &fs.meta.name, &ff.name, ff.ty)? != *x {
                    return Err(ConvertError::Lacking { field: ff.name.clone(), value: x.to_string() });
                }
            }
        }
        let mut fields = Vec::with_capacity(ts.fields.len());
        for tf in &ts.fields {
            let x = match fs.fields.iter().position(|ff| ff.name == tf.name) {
                Some(i) => self
                    .value(fs.fields[i].ty, tf.ty, &sv.fields[i])
                    .map_err(|e| ConvertError::InField { field: tf.name.clone(), source: Box::new(e) })?,
                None => self.fallback(self.to, &ts.meta.name, &tf.name, tf.ty)?,
            };
            fields.push(x);
        }
        Ok(Value::Struct(StructValue { meta: ts.meta.clone(), fields }))
    }
}
