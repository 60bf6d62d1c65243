//! The spec-driven encoder: writes a value tree exactly as msgspec's `Encoder()` writes the equivalent Python
//! object, and refuses values that do not fit their spec type (so it never writes what no peer can decode).

use super::compile::{Plan, TagValue, Ty, TyId};
use super::error::EncodeError;
use std::sync::Arc;

use super::value::Value;
use crate::msgpack::{WireInt, Writer};

/// One step of the path to the value being written; rendered only for an error.
#[derive(Clone, Copy)]
enum Seg<'p> {
    Index(usize),
    Key,
    DictValue,
    Field(&'p str),
}

/// An error on its way up: the path is collected as it propagates (innermost step first), so the happy path
/// keeps no path at all.
struct Fail<'p> {
    segs: Vec<Seg<'p>>,
    msg: String,
}

type R<'p> = Result<(), Box<Fail<'p>>>;

#[cold]
fn fail<'p>(msg: String) -> Box<Fail<'p>> {
    Box::new(Fail { segs: vec![], msg })
}

/// Adds the step `seg` to an error coming up from below it.
#[inline]
fn at<'p>(seg: Seg<'p>) -> impl FnOnce(Box<Fail<'p>>) -> Box<Fail<'p>> {
    move |mut f| {
        f.segs.push(seg);
        f
    }
}

pub(crate) struct Encoder<'p> {
    pub(crate) w: Writer,
    plan: &'p Plan,
}

impl<'p> Encoder<'p> {
    /// An encoder whose output starts with room for `v` (an estimate from the tree's shape: strings and
    /// bytes by their length, an int list at 3 bytes per element without visiting it), so that writing
    /// seldom grows the buffer.
    pub(crate) fn for_value(plan: &'p Plan, v: &Value) -> Self {
        Encoder { w: Writer::with_capacity(size_hint(v, 0).min(crate::limits::MAX_FRAME_BYTES)), plan }
    }

    #[cold]
    fn render(f: Fail<'_>) -> EncodeError {
        let mut path = String::from("$");
        for seg in f.segs.iter().rev() {
            match seg {
                Seg::Index(i) => path.push_str(&format!("[{i}]")),
                Seg::Key => path.push_str("[key]"),
                Seg::DictValue => path.push_str("[...]"),
                Seg::Field(f) => {
                    path.push('.');
                    path.push_str(f);
                }
            }
        }
        EncodeError { path, msg: f.msg }
    }

    /// Writes `v` as a value of `ty`.
    pub(crate) fn value(&mut self, ty: TyId, v: &Value) -> Result<(), EncodeError> {
        self.val(ty, v).map_err(|f| Self::render(*f))
    }

    fn kind_name(v: &Value) -> &'static str {
        match v {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) | Value::IntList(_) | Value::StrList(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Enum(_) => "enum member",
            Value::Struct(_) => "struct",
        }
    }

    fn val(&mut self, ty: TyId, v: &Value) -> R<'p> {
        let plan = self.plan;
        match (&plan.types[ty as usize], v) {
            (Ty::Optional(_), Value::None) => self.w.nil(),
            (Ty::Optional(inner), v) => return self.val(*inner, v),
            (Ty::Int, Value::Int(i)) => self.w.int(*i),
            (Ty::Float, Value::Float(x)) => self.w.f64(*x),
            (Ty::Bool, Value::Bool(b)) => self.w.bool(*b),
            (Ty::Str, Value::Str(s)) => self.w.str(s),
            (Ty::Bytes, Value::Bytes(b)) => self.w.bin(b),
            (Ty::Enum(e), Value::Enum(m)) => {
                if !plan.enums[*e as usize].members.iter().any(|(_, x)| *x == m.value) {
                    return Err(fail(format!("{} is not a member of {}", m.value, plan.enums[*e as usize].name)));
                }
                self.w.sint(m.value)
            }
            (Ty::List(elem), xs @ (Value::List(_) | Value::IntList(_) | Value::StrList(_))) => self.list(*elem, xs)?,
            (Ty::VarTuple(elem), xs @ (Value::Tuple(_) | Value::List(_) | Value::IntList(_) | Value::StrList(_))) => {
                self.elements(*elem, xs)?
            }
            (Ty::Any, v) => self.any(v)?,
            (Ty::Tuple(elems), xs @ (Value::Tuple(_) | Value::List(_) | Value::IntList(_) | Value::StrList(_))) => {
                let xs = xs.items().expect("a list or tuple");
                if xs.len() != elems.len() {
                    return Err(fail(format!("expected a tuple of {} elements, found {}", elems.len(), xs.len())));
                }
                self.w.array_len(xs.len());
                for (i, (e, x)) in elems.iter().zip(xs).enumerate() {
                    self.val(*e, &x).map_err(at(Seg::Index(i)))?;
                }
            }
            (Ty::Dict(kt, vt), Value::Dict(entries)) => {
                self.w.map_len(entries.len());
                for (k, x) in entries {
                    self.val(*kt, k).map_err(at(Seg::Key))?;
                    self.val(*vt, x).map_err(at(Seg::DictValue))?;
                }
            }
            (Ty::Struct(sid), Value::Struct(sv)) => {
                let st = &plan.structs[*sid as usize];
                if !(Arc::ptr_eq(&sv.meta, &st.meta) || sv.meta.name == st.meta.name)
                    || sv.fields.len() != st.fields.len()
                {
                    return Err(fail(format!("expected a {} value, found {}", st.meta.name, sv.meta.name)));
                }
                if st.array_like {
                    self.w.array_len(st.declared);
                    if let Some((_, t)) = &st.tag {
                        self.tag(t);
                    }
                    for (f, x) in st.fields.iter().zip(&sv.fields) {
                        if f.const_value.as_ref().is_some_and(|c| c != x) {
                            return Err(fail("this field holds one constant value".into()))
                                .map_err(at(Seg::Field(&f.wire_name)));
                        }
                        self.val(f.ty, x).map_err(at(Seg::Field(&f.wire_name)))?;
                    }
                } else {
                    let header = self.w.begin_struct_map(st.declared);
                    let mut written = 0;
                    if let Some((field, t)) = &st.tag {
                        self.w.str(field);
                        self.tag(t);
                        written += 1;
                    }
                    for (f, x) in st.fields.iter().zip(&sv.fields) {
                        if st.omit_defaults && f.is_default(x) {
                            continue;
                        }
                        self.w.key(&f.key);
                        self.val(f.ty, x).map_err(at(Seg::Field(&f.wire_name)))?;
                        written += 1;
                    }
                    self.w.finish_struct_map(header, written);
                }
            }
            (_, v) => {
                let want = super::decode::Decoder::expected_name(plan, ty);
                return Err(fail(format!("expected {want}, found {}", Self::kind_name(v))));
            }
        }
        Ok(())
    }

    /// A list of `elem` in any of its forms: the packed ones are written whole when they hold the type, the
    /// general one element by element (with in-place loops for ints and strs).
    fn list(&mut self, elem: TyId, v: &Value) -> R<'p> {
        let plan = self.plan;
        match (&plan.types[elem as usize], v) {
            (Ty::Int, Value::IntList(xs)) => self.w.int_list(xs),
            (Ty::Str, Value::StrList(xs)) => xs.write(&mut self.w),
            // `list[int]` whose elements are all ints: the writer's bulk path.
            (Ty::Int, Value::List(xs)) if xs.iter().all(|x| matches!(x, Value::Int(_))) => {
                self.w.array_len(xs.len());
                let mut ints = [WireInt::ZERO; 128];
                for part in xs.chunks(ints.len()) {
                    for (slot, x) in ints.iter_mut().zip(part) {
                        *slot = x.as_int().unwrap_or_default();
                    }
                    self.w.ints(&ints[..part.len()]);
                }
            }
            // `list[str]`: strings are written in place; anything else takes the general path.
            (Ty::Str, Value::List(xs)) => {
                self.w.array_len(xs.len());
                for (i, x) in xs.iter().enumerate() {
                    match x {
                        Value::Str(s) => self.w.str(s),
                        x => self.val(elem, x).map_err(at(Seg::Index(i)))?,
                    }
                }
            }
            (_, Value::List(xs)) => {
                self.w.array_len(xs.len());
                for (i, x) in xs.iter().enumerate() {
                    self.val(elem, x).map_err(at(Seg::Index(i)))?;
                }
            }
            _ => self.elements(elem, v)?,
        }
        Ok(())
    }

    /// The elements of a list or tuple `v`, each written as a value of `elem`.
    fn elements(&mut self, elem: TyId, v: &Value) -> R<'p> {
        let xs = v.items().expect("a list or tuple");
        self.w.array_len(xs.len());
        for (i, x) in xs.enumerate() {
            self.val(elem, &x).map_err(at(Seg::Index(i)))?;
        }
        Ok(())
    }

    /// An untyped value, as msgspec writes the Python object (enum members as their value, structs refused).
    fn any(&mut self, v: &Value) -> R<'p> {
        match v {
            Value::None => self.w.nil(),
            Value::Bool(b) => self.w.bool(*b),
            Value::Int(i) => self.w.int(*i),
            Value::Float(x) => self.w.f64(*x),
            Value::Str(s) => self.w.str(s),
            Value::Bytes(b) => self.w.bin(b),
            Value::Enum(e) => self.w.sint(e.value),
            Value::IntList(xs) => self.w.int_list(xs),
            Value::StrList(xs) => xs.write(&mut self.w),
            Value::List(xs) | Value::Tuple(xs) => {
                self.w.array_len(xs.len());
                for (i, x) in xs.iter().enumerate() {
                    self.any(x).map_err(at(Seg::Index(i)))?;
                }
            }
            Value::Dict(entries) => {
                self.w.map_len(entries.len());
                for (k, x) in entries {
                    self.any(k)?;
                    self.any(x).map_err(at(Seg::DictValue))?;
                }
            }
            Value::Struct(s) => return Err(fail(format!("a {} value in an `any` field", s.name()))),
        }
        Ok(())
    }

    fn tag(&mut self, t: &TagValue) {
        match t {
            TagValue::Str(s) => self.w.str(s),
            TagValue::Int(i) => self.w.sint(*i),
        }
    }
}

/// An estimate of the encoded size of `v` (exact for most shapes; a lone int counts 9 bytes, its largest, an
/// int list 3 per element). Deep trees are cut off (their rest counted as nothing; the writer grows as
/// needed).
fn size_hint(v: &Value, depth: usize) -> usize {
    match v {
        Value::List(xs) | Value::Tuple(xs) => match xs.first() {
            // Block ids and the like: mostly 16-bit (3 bytes); a longer list grows the buffer once.
            Some(Value::Int(_)) => 5 + 3 * xs.len(),
            _ => 5 + xs.iter().map(|x| child_hint(x, depth)).sum::<usize>(),
        },
        Value::Dict(d) => 5 + d.iter().map(|(k, x)| child_hint(k, depth) + child_hint(x, depth)).sum::<usize>(),
        Value::Struct(s) => {
            // A key is at most 5 bytes of head more than its name.
            5 + s.meta.field_names.iter().map(|n| 5 + n.len()).sum::<usize>()
                + s.fields.iter().map(|x| child_hint(x, depth)).sum::<usize>()
        }
        v => child_hint(v, depth),
    }
}

/// [`size_hint`] of an element at `depth + 1`: leaves here, containers through [`size_hint`].
#[inline]
fn child_hint(v: &Value, depth: usize) -> usize {
    match v {
        Value::None | Value::Bool(_) => 1,
        Value::Int(_) | Value::Float(_) | Value::Enum(_) => 9,
        Value::Str(s) => 5 + s.len(),
        Value::Bytes(b) => 5 + b.len(),
        Value::IntList(xs) => 5 + 3 * xs.len(),
        Value::StrList(xs) => 5 + 5 * xs.len() + xs.concatenated().len(),
        _ if depth >= 8 => 0,
        v => size_hint(v, depth + 1),
    }
}
