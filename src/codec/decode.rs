//! The spec-driven decoder: one pass over the bytes, guided by the compiled type, with msgspec's rules for
//! what is accepted, what wins, and which error is reported first.

use std::collections::HashMap;

use super::compile::{CStruct, Plan, TagValue, Ty, TyId};
use super::error::{DecodeError, DecodeErrorKind as K};
use super::path;
use super::pykey::{Identity, PyKey};
use super::value::{StructValue, Value};
use crate::limits;
use crate::msgpack::{Kind, Obj, RawError, Reader, WireInt};

/// A path step; a field is (struct, field) in the plan.
type Seg = path::Seg<(u32, u32)>;

pub struct Decoder<'a, 'p> {
    r: Reader<'a>,
    plan: &'p Plan,
    depth: usize,
    path: Vec<Seg>,
    /// Scratch space for runs of ints, reused by every `list[int]` of the frame.
    ints: Vec<WireInt>,
}

impl<'a, 'p> Decoder<'a, 'p> {
    pub fn new(bytes: &'a [u8], plan: &'p Plan) -> Self {
        Decoder { r: Reader::new(bytes), plan, depth: 0, path: Vec::with_capacity(8), ints: Vec::new() }
    }

    /// Decodes one whole frame: exactly one value of type `ty`, nothing after it.
    pub fn frame(mut self, ty: TyId) -> Result<Value, DecodeError> {
        if self.r.remaining() > limits::MAX_FRAME_BYTES {
            return Err(DecodeError::new(K::FrameTooLarge { len: self.r.remaining() }));
        }
        let v = self.value(ty)?;
        if !self.r.is_empty() {
            return Err(DecodeError::new(K::Trailing { offset: self.r.pos() }));
        }
        Ok(v)
    }

    fn render_path(&self) -> String {
        let structs = &self.plan.structs;
        path::render(&self.path, |&(st, f)| structs[st as usize].fields[f as usize].wire_name.as_str())
    }

    #[cold]
    fn err(&self, kind: K) -> DecodeError {
        path::at(kind, self.render_path())
    }
    #[cold]
    fn key_err(&self, kind: K) -> DecodeError {
        path::in_key(kind, self.render_path())
    }
    #[cold]
    fn raw(&self, e: RawError) -> DecodeError {
        path::raw(e)
    }

    /// msgspec's name for what a type expects.
    pub fn expected_name(plan: &Plan, ty: TyId) -> String {
        match &plan.types[ty as usize] {
            Ty::Int | Ty::Enum(_) => "int".into(),
            Ty::Str => "str".into(),
            Ty::Bool => "bool".into(),
            Ty::Float => "float".into(),
            Ty::Bytes => "bytes".into(),
            Ty::List(_) | Ty::Tuple(_) | Ty::VarTuple(_) => "array".into(),
            Ty::Any => "any".into(),
            Ty::Dict(..) => "object".into(),
            Ty::Struct(s) if plan.structs[*s as usize].array_like => "array".into(),
            Ty::Struct(_) => "object".into(),
            Ty::Optional(t) => format!("{} | null", Self::expected_name(plan, *t)),
        }
    }

    #[cold]
    fn mismatch(&self, ty: TyId, got: Kind) -> DecodeError {
        self.err(K::Expected { expected: Self::expected_name(self.plan, ty), got: got.msgspec_name() })
    }

    #[inline]
    fn value(&mut self, ty: TyId) -> Result<Value, DecodeError> {
        let obj = self.r.read_obj().map_err(|e| self.raw(e))?;
        self.value_from(obj, ty, ty)
    }

    fn enter(&mut self) -> Result<(), DecodeError> {
        self.depth += 1;
        if self.depth > limits::MAX_DEPTH {
            return Err(self.raw(RawError::TooDeep));
        }
        Ok(())
    }

    /// `shown` is the type named in a mismatch error (the optional around `ty`, if any).
    fn value_from(&mut self, obj: Obj<'a>, ty: TyId, shown: TyId) -> Result<Value, DecodeError> {
        let plan = self.plan;
        Ok(match (&plan.types[ty as usize], obj) {
            (Ty::Optional(_), Obj::Nil) => Value::None,
            (Ty::Optional(inner), o) => return self.value_from(o, *inner, ty),
            (Ty::Int, Obj::Int(i)) => Value::Int(i),
            (Ty::Float, Obj::Float(x)) => Value::Float(x),
            (Ty::Float, Obj::Int(i)) => Value::Float(i.get() as f64),
            (Ty::Bool, Obj::Bool(b)) => Value::Bool(b),
            (Ty::Str, Obj::Str(b)) => Value::Str(self.utf8(b)?),
            (Ty::Bytes, Obj::Bin(b)) => Value::Bytes(b.to_vec()),
            (Ty::Enum(e), Obj::Int(i)) => match plan.enums[*e as usize].member(i) {
                Some(m) => Value::Enum(m),
                None => return Err(self.err(K::InvalidEnum(i))),
            },
            (Ty::List(elem), Obj::Array(n)) => {
                let elem = *elem;
                self.enter()?;
                let mut out = Vec::with_capacity(n.min(self.r.remaining()).min(limits::MAX_PREALLOC_ELEMENTS));
                let mut i = 0;
                while i < n {
                    // Hot loops of `list[int]` and `list[str]`: whole elements are read in place; any other
                    // element (or one of another type) takes the general path, which reports its error.
                    match plan.types[elem as usize] {
                        Ty::Int => {
                            let k = self.r.read_int_run(n - i, &mut self.ints);
                            out.extend(self.ints.drain(..).map(Value::Int));
                            i += k;
                        }
                        Ty::Str => {
                            while i < n {
                                let Some(b) = self.r.try_str() else { break };
                                out.push(Value::Str(self.utf8(b)?));
                                i += 1;
                            }
                        }
                        _ => {}
                    }
                    if i < n {
                        self.path.push(Seg::Index(i));
                        out.push(self.value(elem)?);
                        self.path.pop();
                        i += 1;
                    }
                }
                self.depth -= 1;
                Value::List(out)
            }
            (Ty::VarTuple(elem), Obj::Array(n)) => {
                let elem = *elem;
                self.enter()?;
                let mut out = Vec::with_capacity(n.min(self.r.remaining()).min(limits::MAX_PREALLOC_ELEMENTS));
                for i in 0..n {
                    self.path.push(Seg::Index(i));
                    out.push(self.value(elem)?);
                    self.path.pop();
                }
                self.depth -= 1;
                Value::Tuple(out)
            }
            (Ty::Any, o) => return self.any(o),
            (Ty::Tuple(elems), Obj::Array(n)) => {
                if n != elems.len() {
                    return Err(self.err(K::ArrayLength { expected: elems.len(), got: n }));
                }
                self.enter()?;
                let mut out = Vec::with_capacity(n);
                for (i, e) in elems.iter().enumerate() {
                    self.path.push(Seg::Index(i));
                    out.push(self.value(*e)?);
                    self.path.pop();
                }
                self.depth -= 1;
                Value::Tuple(out)
            }
            (Ty::Dict(k, v), Obj::Map(n)) => {
                let (k, v) = (*k, *v);
                self.enter()?;
                let d = self.dict(n, k, v)?;
                self.depth -= 1;
                d
            }
            (Ty::Struct(s), Obj::Map(n)) if !plan.structs[*s as usize].array_like => {
                self.enter()?;
                let v = self.struct_map(*s, n)?;
                self.depth -= 1;
                v
            }
            (Ty::Struct(s), Obj::Array(n)) if plan.structs[*s as usize].array_like => {
                self.enter()?;
                let v = self.struct_array(*s, n)?;
                self.depth -= 1;
                v
            }
            (_, o) => return Err(self.mismatch(shown, o.kind())),
        })
    }

    /// An untyped value (`any`): arrays become lists, maps dicts with whatever keys they hold. An ext value
    /// has no representation here and is refused (msgspec would give an `Ext` object).
    fn any(&mut self, obj: Obj<'a>) -> Result<Value, DecodeError> {
        Ok(match obj {
            Obj::Nil => Value::None,
            Obj::Bool(b) => Value::Bool(b),
            Obj::Int(i) => Value::Int(i),
            Obj::Float(x) => Value::Float(x),
            Obj::Str(b) => Value::Str(self.utf8(b)?),
            Obj::Bin(b) => Value::Bytes(b.to_vec()),
            Obj::Array(n) => {
                self.enter()?;
                let mut out = Vec::with_capacity(n.min(self.r.remaining()).min(limits::MAX_PREALLOC_ELEMENTS));
                for i in 0..n {
                    self.path.push(Seg::Index(i));
                    let o = self.r.read_obj().map_err(|e| self.raw(e))?;
                    out.push(self.any(o)?);
                    self.path.pop();
                }
                self.depth -= 1;
                Value::List(out)
            }
            Obj::Map(n) => {
                self.enter()?;
                let mut out: Vec<(Value, Value)> =
                    Vec::with_capacity(n.min(self.r.remaining() / 2).min(limits::MAX_PREALLOC_ELEMENTS));
                // Earlier keys by their identity under Python equality (hashed: a hostile map of many keys
                // costs linear time).
                let mut seen: HashMap<PyKey<'a>, usize> = HashMap::new();
                for _ in 0..n {
                    let ko = self.r.read_obj().map_err(|e| self.raw(e))?;
                    let id = Identity::of(&ko);
                    let k = self.any(ko)?;
                    if matches!(k, Value::List(_) | Value::Dict(_)) {
                        return Err(self.key_err(K::Expected {
                            expected: "hashable".into(),
                            got: if matches!(k, Value::List(_)) { "array" } else { "object" },
                        }));
                    }
                    self.path.push(Seg::DictValue);
                    let vo = self.r.read_obj().map_err(|e| self.raw(e))?;
                    let v = self.any(vo)?;
                    self.path.pop();
                    match id {
                        Identity::Key(pk) => match seen.get(&pk) {
                            Some(&i) => out[i].1 = v,
                            None => {
                                seen.insert(pk, out.len());
                                out.push((k, v));
                            }
                        },
                        // NaN (lists and maps were refused above; ext is refused by `any`).
                        Identity::Unique | Identity::Other => out.push((k, v)),
                    }
                }
                self.depth -= 1;
                Value::Dict(out)
            }
            Obj::Ext(..) => return Err(self.err(K::Expected { expected: "any (without ext)".into(), got: "ext" })),
        })
    }

    #[inline]
    fn utf8(&self, b: &[u8]) -> Result<String, DecodeError> {
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(DecodeError::new(K::InvalidUtf8)),
        }
    }

    fn dict(&mut self, n: usize, kty: TyId, vty: TyId) -> Result<Value, DecodeError> {
        let mut out: Vec<(Value, Value)> =
            Vec::with_capacity(n.min(self.r.remaining() / 2).min(limits::MAX_PREALLOC_ELEMENTS));
        // Every hashable key seen, with its entry's position, for "last value wins, first position stays" (a
        // Python dict). Str keys are held as their bytes in the input (no copy). Small dicts are scanned; the
        // hash index is built once a dict outgrows that.
        const SCAN: usize = 16;
        let mut keys: Vec<(PyKey<'a>, usize)> = Vec::new();
        let mut index: HashMap<PyKey<'a>, usize> = HashMap::new();
        for _ in 0..n {
            let kobj = self.r.read_obj().map_err(|e| self.raw(e))?;
            let key = match self.value_from(kobj, kty, kty) {
                Ok(k) => k,
                Err(mut e) => {
                    // Errors about the key itself are reported "at `key` in" the dict's path.
                    if !matches!(e.kind, K::Truncated | K::InvalidOpcode { .. } | K::InvalidUtf8 | K::TooDeep)
                        && e.path == self.render_path()
                    {
                        e.in_key = true;
                        // msgspec names nil `None` for dict keys (and `null` for struct keys).
                    }
                    return Err(e);
                }
            };
            self.path.push(Seg::DictValue);
            let val = self.value(vty)?;
            self.path.pop();
            match Identity::of(&kobj) {
                Identity::Key(dk) => {
                    let seen = if keys.len() < SCAN {
                        keys.iter().find(|(k, _)| *k == dk).map(|(_, i)| *i)
                    } else {
                        index.get(&dk).copied()
                    };
                    match seen {
                        Some(i) => out[i].1 = val,
                        None => {
                            if keys.len() + 1 >= SCAN {
                                if index.is_empty() {
                                    index.extend(keys.iter().cloned());
                                }
                                index.insert(dk.clone(), out.len());
                            }
                            keys.push((dk, out.len()));
                            out.push((key, val));
                        }
                    }
                }
                Identity::Unique => out.push((key, val)),
                Identity::Other => {
                    // Container keys (tuples) are compared one by one.
                    match out.iter().position(|(k, _)| *k == key) {
                        Some(i) => out[i].1 = val,
                        None => out.push((key, val)),
                    }
                }
            }
        }
        Ok(Value::Dict(out))
    }

    /// Reads a struct key: only a str opcode is accepted, and its bytes are matched without a UTF-8 check.
    fn struct_key(&mut self) -> Result<&'a [u8], DecodeError> {
        if let Some(b) = self.r.try_str() {
            return Ok(b);
        }
        let op = self.r.peek_op().map_err(|e| self.raw(e))?;
        if let Some(k) = path::struct_key_mismatch(Kind::of_opcode(op)) {
            return Err(self.key_err(k));
        }
        match self.r.read_obj().map_err(|e| self.raw(e))? {
            Obj::Str(b) => Ok(b),
            _ => unreachable!("a str opcode reads as a str"),
        }
    }

    /// Reads and checks a tag value. Like a struct key, only the opcode is classified before a mismatch is
    /// reported (nil is `null`, 0xc1 is `unknown`); a matching str or int is read whole.
    fn check_tag(&mut self, st: &CStruct, field_for_path: &str) -> Result<(), DecodeError> {
        let (_, want) = st.tag.as_ref().expect("tagged");
        let fail = |d: &Self, kind: K| {
            let mut p = d.render_path();
            if !field_for_path.is_empty() {
                p.push('.');
                p.push_str(field_for_path);
            }
            path::at(kind, p)
        };
        let op = self.r.peek_op().map_err(|e| self.raw(e))?;
        let kind = Kind::of_opcode(op);
        let want_kind = match want {
            TagValue::Str(_) => Kind::Str,
            TagValue::Int(_) => Kind::Int,
        };
        if kind != want_kind {
            let got = if kind == Kind::Nil { "null" } else { kind.msgspec_name() };
            let expected = if want_kind == Kind::Str { "str" } else { "int" };
            return Err(fail(self, K::Expected { expected: expected.into(), got }));
        }
        match (want, self.r.read_obj().map_err(|e| self.raw(e))?) {
            (TagValue::Str(w), Obj::Str(b)) => {
                let s = self.utf8(b)?;
                if &s != w {
                    return Err(fail(self, K::InvalidTag(format!("'{s}'"))));
                }
            }
            (TagValue::Int(w), Obj::Int(i)) => {
                if i.as_i64() != Some(*w) {
                    return Err(fail(self, K::InvalidTag(i.to_string())));
                }
            }
            _ => unreachable!("the opcode kind was checked"),
        }
        Ok(())
    }

    fn struct_map(&mut self, sid: u32, n: usize) -> Result<Value, DecodeError> {
        let st = &self.plan.structs[sid as usize];
        let mut slots: Vec<Option<Value>> = (0..st.fields.len()).map(|_| None).collect();
        // Peers write fields in declaration order: try the one after the last match first.
        let mut guess = 0usize;
        for _ in 0..n {
            let key = self.struct_key()?;
            let found = match st.fields.get(guess) {
                Some(f) if f.wire_name.as_bytes() == key => Some(guess),
                _ => st.field_index(key),
            };
            match found {
                Some(i) => {
                    guess = i + 1;
                    self.path.push(Seg::Field((sid, i as u32)));
                    let v = self.value(st.fields[i].ty)?;
                    self.path.pop();
                    slots[i] = Some(v);
                }
                None if st.tag.as_ref().is_some_and(|(f, _)| f.as_bytes() == key) => {
                    let tf = st.tag.as_ref().unwrap().0.clone();
                    self.check_tag(st, &tf)?;
                }
                None if st.forbid_unknown_fields => {
                    // msgspec names the key in its message, so it is decoded (and UTF-8 checked) first.
                    let name = self.utf8(key)?;
                    return Err(self.err(K::UnknownField(name)));
                }
                None => self.r.skip_value(self.depth, limits::MAX_DEPTH).map_err(|e| self.raw(e))?,
            }
        }
        self.finish_struct(sid, slots)
    }

    fn finish_struct(&self, sid: u32, slots: Vec<Option<Value>>) -> Result<Value, DecodeError> {
        let st = &self.plan.structs[sid as usize];
        let mut fields = Vec::with_capacity(slots.len());
        for (slot, f) in slots.into_iter().zip(&st.fields) {
            fields.push(match (slot, &f.default) {
                (Some(v), _) => v,
                (None, Some(d)) => d.clone(),
                (None, None) => return Err(self.err(K::MissingField(f.wire_name.clone()))),
            });
        }
        Ok(Value::Struct(StructValue { meta: st.meta.clone(), fields }))
    }

    fn struct_array(&mut self, sid: u32, n: usize) -> Result<Value, DecodeError> {
        let st = &self.plan.structs[sid as usize];
        if st.exact_len && n != st.fields.len() {
            return Err(self.err(K::ArrayLength { expected: st.fields.len(), got: n }));
        }
        if n < st.min_array_len {
            return Err(self.err(K::ArrayMinLength { min: st.min_array_len, got: n }));
        }
        let mut slots: Vec<Option<Value>> = (0..st.fields.len()).map(|_| None).collect();
        let mut pos = 0usize;
        if st.tag.is_some() {
            self.path.push(Seg::Index(0));
            let r = self.check_tag(st, "");
            self.path.pop();
            r?;
            pos = 1;
        }
        let mut i = 0usize;
        while pos < n && i < st.fields.len() {
            self.path.push(Seg::Index(pos));
            let v = self.value(st.fields[i].ty)?;
            if let Some(c) = &st.fields[i].const_value {
                if *c != v {
                    let e = self.err(K::InvalidTag(v.to_string()));
                    self.path.pop();
                    return Err(e);
                }
            }
            slots[i] = Some(v);
            self.path.pop();
            pos += 1;
            i += 1;
        }
        if pos < n {
            if st.forbid_unknown_fields {
                return Err(self.err(K::ArrayMaxLength { max: st.declared, got: n }));
            }
            while pos < n {
                self.r.skip_value(self.depth, limits::MAX_DEPTH).map_err(|e| self.raw(e))?;
                pos += 1;
            }
        }
        self.finish_struct(sid, slots)
    }
}
