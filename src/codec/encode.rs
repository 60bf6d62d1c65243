//! The spec-driven encoder: writes a value tree exactly as msgspec's `Encoder()` writes the equivalent Python
//! object, and refuses values that do not fit their spec type (so it never writes what no peer can decode).

use super::compile::{Plan, TagValue, Ty, TyId};
use super::error::EncodeError;
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

pub struct Encoder<'p> {
    pub w: Writer,
    plan: &'p Plan,
    path: Vec<Seg<'p>>,
}

impl<'p> Encoder<'p> {
    pub fn new(plan: &'p Plan) -> Self {
        Encoder { w: Writer::with_capacity(256), plan, path: vec![] }
    }

    #[cold]
    fn err(&self, msg: String) -> EncodeError {
        let mut path = String::from("$");
        for seg in &self.path {
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
        EncodeError { path, msg }
    }

    fn kind_name(v: &Value) -> &'static str {
        match v {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Enum(_) => "enum member",
            Value::Struct(_) => "struct",
        }
    }

    pub fn value(&mut self, ty: TyId, v: &Value) -> Result<(), EncodeError> {
        let plan = self.plan;
        match (&plan.types[ty as usize], v) {
            (Ty::Optional(_), Value::None) => self.w.nil(),
            (Ty::Optional(inner), v) => return self.value(*inner, v),
            (Ty::Int, Value::Int(i)) => self.w.int(*i),
            (Ty::Float, Value::Float(x)) => self.w.f64(*x),
            (Ty::Bool, Value::Bool(b)) => self.w.bool(*b),
            (Ty::Str, Value::Str(s)) => self.w.str(s),
            (Ty::Bytes, Value::Bytes(b)) => self.w.bin(b),
            (Ty::Enum(e), Value::Enum(m)) => {
                if !plan.enums[*e as usize].members.iter().any(|(_, x)| *x == m.value) {
                    return Err(self.err(format!("{} is not a member of {}", m.value, plan.enums[*e as usize].name)));
                }
                self.w.sint(m.value)
            }
            (Ty::List(elem), Value::List(xs)) => {
                // `list[int]` whose elements are all ints: the writer's bulk path.
                if matches!(plan.types[*elem as usize], Ty::Int) && xs.iter().all(|x| matches!(x, Value::Int(_))) {
                    self.w.array_len(xs.len());
                    let mut ints = [WireInt::ZERO; 128];
                    for part in xs.chunks(ints.len()) {
                        for (slot, x) in ints.iter_mut().zip(part) {
                            *slot = x.as_int().unwrap_or_default();
                        }
                        self.w.ints(&ints[..part.len()]);
                    }
                    return Ok(());
                }
                self.w.array_len(xs.len());
                for (i, x) in xs.iter().enumerate() {
                    self.path.push(Seg::Index(i));
                    self.value(*elem, x)?;
                    self.path.pop();
                }
            }
            (Ty::VarTuple(elem), Value::Tuple(xs) | Value::List(xs)) => {
                self.w.array_len(xs.len());
                for (i, x) in xs.iter().enumerate() {
                    self.path.push(Seg::Index(i));
                    self.value(*elem, x)?;
                    self.path.pop();
                }
            }
            (Ty::Any, v) => self.any(v)?,
            (Ty::Tuple(elems), Value::Tuple(xs) | Value::List(xs)) => {
                if xs.len() != elems.len() {
                    return Err(self.err(format!("expected a tuple of {} elements, found {}", elems.len(), xs.len())));
                }
                self.w.array_len(xs.len());
                for (i, (e, x)) in elems.iter().zip(xs).enumerate() {
                    self.path.push(Seg::Index(i));
                    self.value(*e, x)?;
                    self.path.pop();
                }
            }
            (Ty::Dict(kt, vt), Value::Dict(entries)) => {
                self.w.map_len(entries.len());
                for (k, x) in entries {
                    self.path.push(Seg::Key);
                    self.value(*kt, k)?;
                    self.path.pop();
                    self.path.push(Seg::DictValue);
                    self.value(*vt, x)?;
                    self.path.pop();
                }
            }
            (Ty::Struct(sid), Value::Struct(sv)) => {
                let st = &plan.structs[*sid as usize];
                if sv.meta.name != st.meta.name || sv.fields.len() != st.fields.len() {
                    return Err(self.err(format!("expected a {} value, found {}", st.meta.name, sv.meta.name)));
                }
                if st.array_like {
                    self.w.array_len(st.declared);
                    if let Some((_, t)) = &st.tag {
                        self.tag(t);
                    }
                    for (f, x) in st.fields.iter().zip(&sv.fields) {
                        self.path.push(Seg::Field(&f.wire_name));
                        if f.const_value.as_ref().is_some_and(|c| c != x) {
                            return Err(self.err("this field holds one constant value".into()));
                        }
                        self.value(f.ty, x)?;
                        self.path.pop();
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
                        if st.omit_defaults && f.default.as_ref() == Some(x) {
                            continue;
                        }
                        self.w.str(&f.wire_name);
                        self.path.push(Seg::Field(&f.wire_name));
                        self.value(f.ty, x)?;
                        self.path.pop();
                        written += 1;
                    }
                    self.w.finish_struct_map(header, written);
                }
            }
            (_, v) => {
                let want = super::decode::Decoder::expected_name(plan, ty);
                return Err(self.err(format!("expected {want}, found {}", Self::kind_name(v))));
            }
        }
        Ok(())
    }

    /// An untyped value, as msgspec writes the Python object (enum members as their value, structs refused).
    fn any(&mut self, v: &Value) -> Result<(), EncodeError> {
        match v {
            Value::None => self.w.nil(),
            Value::Bool(b) => self.w.bool(*b),
            Value::Int(i) => self.w.int(*i),
            Value::Float(x) => self.w.f64(*x),
            Value::Str(s) => self.w.str(s),
            Value::Bytes(b) => self.w.bin(b),
            Value::Enum(e) => self.w.sint(e.value),
            Value::List(xs) | Value::Tuple(xs) => {
                self.w.array_len(xs.len());
                for (i, x) in xs.iter().enumerate() {
                    self.path.push(Seg::Index(i));
                    self.any(x)?;
                    self.path.pop();
                }
            }
            Value::Dict(entries) => {
                self.w.map_len(entries.len());
                for (k, x) in entries {
                    self.any(k)?;
                    self.path.push(Seg::DictValue);
                    self.any(x)?;
                    self.path.pop();
                }
            }
            Value::Struct(s) => return Err(self.err(format!("a {} value in an `any` field", s.name()))),
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
