//! The spec-driven decoder: one pass over the bytes, guided by the compiled type, with msgspec's rules for
//! what is accepted, what wins, and which error is reported first.

use std::cell::Cell;
use std::collections::HashMap;

use super::compile::{CStruct, Plan, TagValue, Ty, TyId};
use super::error::{DecodeError, DecodeErrorKind as K};
use super::path;
use super::pykey::{Identity, PyKey};
use super::strlist::StrList;
use super::value::{StructValue, Value};
use crate::limits;
use crate::msgpack::{Kind, Obj, RawError, Reader, WireInt};

/// A path step; a field is (struct, field) in the plan.
type Seg = path::Seg<(u32, u32)>;

pub(crate) struct Decoder<'a, 'p> {
    r: Reader<'a>,
    plan: &'p Plan,
    depth: usize,
    path: Vec<Seg>,
}

thread_local! {
    /// The path buffer of the thread's last decoder, for the next one: a frame of a few fields would
    /// otherwise spend one of its few allocations on it.
    static PATH: Cell<Vec<Seg>> = const { Cell::new(Vec::new()) };
}

impl Drop for Decoder<'_, '_> {
    fn drop(&mut self) {
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        PATH.set(path);
    }
}

impl<'a, 'p> Decoder<'a, 'p> {
    pub(crate) fn new(bytes: &'a [u8], plan: &'p Plan) -> Self {
        Decoder { r: Reader::new(bytes), plan, depth: 0, path: PATH.take() }
    }

    /// Decodes one whole frame: exactly one value of type `ty`, nothing after it.
    pub(crate) fn frame(mut self, ty: TyId) -> Result<Value, DecodeError> {
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
    pub(crate) fn expected_name(plan: &Plan, ty: TyId) -> String {
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

    /// Decodes one value of `ty` onto the end of `out`. The usual shapes are read through the reader's fast
    /// paths and built in place (see [`push_in_place`]); anything else, and every error, takes the general
    /// path. `shown` as in `value_from`.
    fn push_value(&mut self, ty: TyId, shown: TyId, out: &mut Vec<Value>) -> Result<(), DecodeError> {
        let plan = self.plan;
        match &plan.types[ty as usize] {
            Ty::Optional(inner) => {
                if self.r.eat(&[0xc0]) {
                    push_in_place(out, || Value::None);
                    return Ok(());
                }
                return self.push_value(*inner, ty, out);
            }
            Ty::Int => {
                if let Some(i) = self.r.try_int() {
                    push_in_place(out, || Value::Int(i));
                    return Ok(());
                }
            }
            Ty::Str => {
                if let Some(b) = self.r.try_str() {
                    let s = self.utf8(b)?;
                    push_in_place(out, || Value::Str(s));
                    return Ok(());
                }
            }
            Ty::Enum(e) => {
                if let Some(i) = self.r.try_int() {
                    let m = match plan.enums[*e as usize].member(i) {
                        Some(m) => m,
                        None => return Err(self.err(K::InvalidEnum(i))),
                    };
                    push_in_place(out, || Value::Enum(m));
                    return Ok(());
                }
            }
            Ty::List(elem) => {
                if let Some(n) = self.r.try_array() {
                    self.enter()?;
                    self.push_list(n, *elem, out)?;
                    self.depth -= 1;
                    return Ok(());
                }
            }
            Ty::Struct(s) if !plan.structs[*s as usize].array_like => {
                if let Some(n) = self.r.try_map() {
                    self.enter()?;
                    let v = self.struct_map(*s, n)?;
                    out.push(v);
                    self.depth -= 1;
                    return Ok(());
                }
            }
            _ => {}
        }
        let obj = self.r.read_obj().map_err(|e| self.raw(e))?;
        let v = self.value_from(obj, ty, shown)?;
        out.push(v);
        Ok(())
    }

    /// A list of `n` elements of `elem` (the array head read) onto the end of `out`: packed for ints and strs.
    #[inline(always)]
    fn push_list(&mut self, n: usize, elem: TyId, out: &mut Vec<Value>) -> Result<(), DecodeError> {
        match self.plan.types[elem as usize] {
            Ty::Int => {
                let v = self.int_list(n, elem)?;
                push_in_place(out, || Value::IntList(v));
            }
            Ty::Str => {
                let v = self.str_list(n, elem)?;
                push_in_place(out, || Value::StrList(v));
            }
            _ => {
                let mut xs = Vec::with_capacity(self.prealloc(n));
                for i in 0..n {
                    self.path.push(Seg::Index(i));
                    self.push_value(elem, elem, &mut xs)?;
                    self.path.pop();
                }
                push_in_place(out, || Value::List(xs));
            }
        }
        Ok(())
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
                // Through a list of one (the top of a frame or a dict value: not the hot path).
                self.enter()?;
                let mut one = Vec::with_capacity(1);
                self.push_list(n, *elem, &mut one)?;
                self.depth -= 1;
                one.pop().unwrap_or(Value::None)
            }
            (Ty::VarTuple(elem), Obj::Array(n)) => {
                let elem = *elem;
                self.enter()?;
                let mut out = Vec::with_capacity(self.prealloc(n));
                for i in 0..n {
                    self.path.push(Seg::Index(i));
                    self.push_value(elem, elem, &mut out)?;
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
                    self.push_value(*e, *e, &mut out)?;
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

    /// Room to reserve for `n` elements: no more than the bytes left could hold, nor than the cap.
    #[inline]
    fn prealloc(&self, n: usize) -> usize {
        n.min(self.r.remaining()).min(limits::MAX_PREALLOC_ELEMENTS)
    }

    /// The elements of a `list[int]` of `n`: runs of whole ints are read in place; an element that is not
    /// one is read through the general path, which reports its error.
    #[inline(always)]
    fn int_list(&mut self, n: usize, elem: TyId) -> Result<Vec<WireInt>, DecodeError> {
        let mut out = Vec::with_capacity(self.prealloc(n));
        let mut i = 0;
        while i < n {
            i += self.r.read_int_run(n - i, &mut out);
            if i < n {
                self.path.push(Seg::Index(i));
                let obj = self.r.read_obj().map_err(|e| self.raw(e))?;
                let Obj::Int(x) = obj else { return Err(self.mismatch(elem, obj.kind())) };
                self.path.pop();
                out.push(x);
                i += 1;
            }
        }
        Ok(out)
    }

    /// The elements of a `list[str]` of `n`, gathered in one buffer and checked as UTF-8 once. An element
    /// that is not a str is read through the general path; its error is reported unless an earlier element
    /// was not UTF-8 (which msgspec, checking each in turn, reports first).
    #[inline(always)]
    fn str_list(&mut self, n: usize, elem: TyId) -> Result<StrList, DecodeError> {
        let mut text: Vec<u8> = Vec::new();
        let mut ends: Vec<u32> = Vec::with_capacity(self.prealloc(n));
        for i in 0..n {
            let b = match self.r.try_str() {
                Some(b) => b,
                None => {
                    self.path.push(Seg::Index(i));
                    let e = match self.r.read_obj() {
                        Ok(obj) => self.mismatch(elem, obj.kind()),
                        Err(e) => self.raw(e),
                    };
                    return Err(match StrList::from_utf8_parts(text, ends) {
                        Some(_) => e,
                        None => DecodeError::new(K::InvalidUtf8),
                    });
                }
            };
            if i == 0 {
                // Ids of one list are about the same length: room for `n` of the first, at most the input left.
                text = Vec::with_capacity(b.len().saturating_mul(n).min(self.r.remaining() + b.len()));
            }
            text.extend_from_slice(b);
            // A frame is at most `limits::MAX_FRAME_BYTES` (64 MiB), so any end fits a u32.
            ends.push(text.len() as u32);
        }
        StrList::from_utf8_parts(text, ends).ok_or_else(|| DecodeError::new(K::InvalidUtf8))
    }

    #[inline(always)]
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
        // Decoded straight into the struct's field list, in declaration order: a field the map leaves out
        // gets its default (a placeholder if it is required) once a later one arrives, so a peer's map, in
        // declaration order, costs one push per field. `seen` says which fields were decoded.
        let mut fields: Vec<Value> = Vec::with_capacity(st.fields.len());
        let mut seen = Seen::new(st.fields.len());
        for _ in 0..n {
            // Peers write fields in declaration order, with the shortest str head: try the keys of the fields
            // after the last one decoded as the encoder writes them (head and name compared at once), then
            // read the key and look it up.
            let next = fields.len();
            let i = match st.fields[next..].iter().position(|f| self.r.eat(f.key.as_bytes())) {
                Some(k) => next + k,
                None => {
                    let key = self.struct_key()?;
                    match st.field_index(key) {
                        Some(i) => i,
                        None => {
                            self.unknown_key(st, key)?;
                            continue;
                        }
                    }
                }
            };
            if i > fields.len() {
                Self::pad(st, &mut fields, i);
            }
            let ty = st.fields[i].ty;
            self.path.push(Seg::Field((sid, i as u32)));
            self.push_value(ty, ty, &mut fields)?;
            self.path.pop();
            if i + 1 < fields.len() {
                // Out of order, or a repeated key (the last one wins, as in msgspec).
                if let Some(v) = fields.pop() {
                    fields[i] = v;
                }
            }
            seen.set(i);
        }
        Self::pad(st, &mut fields, st.fields.len());
        if !seen.all() {
            self.check_required(sid, |i| seen.get(i))?;
        }
        Ok(Value::Struct(StructValue { meta: st.meta.clone(), fields }))
    }

    /// A struct key that names no field: the tag (checked), else an unknown field (refused, or its value
    /// skipped).
    fn unknown_key(&mut self, st: &CStruct, key: &[u8]) -> Result<(), DecodeError> {
        match &st.tag {
            Some((f, _)) if f.as_bytes() == key => {
                let tf = f.clone();
                self.check_tag(st, &tf)
            }
            _ if st.forbid_unknown_fields => {
                // msgspec names the key in its message, so it is decoded (and UTF-8 checked) first.
                let name = self.utf8(key)?;
                Err(self.err(K::UnknownField(name)))
            }
            _ => self.r.skip_value(self.depth, limits::MAX_DEPTH).map_err(|e| self.raw(e)),
        }
    }

    /// Appends the defaults of the fields from `fields.len()` up to `upto` (a placeholder for a required one,
    /// which [`Decoder::check_required`] reports unless it is decoded later).
    #[inline]
    fn pad(st: &CStruct, fields: &mut Vec<Value>, upto: usize) {
        for f in &st.fields[fields.len()..upto] {
            // `None` and ints (most defaults) built in place, without a call.
            match &f.default {
                None | Some(Value::None) => push_in_place(fields, || Value::None),
                Some(Value::Int(i)) => push_in_place(fields, || Value::Int(*i)),
                Some(d) => fields.push(d.clone()),
            }
        }
    }

    /// Fails on the first required field (in declaration order, as msgspec reports it) not `seen`.
    fn check_required(&self, sid: u32, seen: impl Fn(usize) -> bool) -> Result<(), DecodeError> {
        let st = &self.plan.structs[sid as usize];
        match st.fields.iter().enumerate().find(|(i, f)| f.default.is_none() && !seen(*i)) {
            Some((_, f)) => Err(self.err(K::MissingField(f.wire_name.clone()))),
            None => Ok(()),
        }
    }

    fn struct_array(&mut self, sid: u32, n: usize) -> Result<Value, DecodeError> {
        let st = &self.plan.structs[sid as usize];
        if st.exact_len && n != st.fields.len() {
            return Err(self.err(K::ArrayLength { expected: st.fields.len(), got: n }));
        }
        if n < st.min_array_len {
            return Err(self.err(K::ArrayMinLength { min: st.min_array_len, got: n }));
        }
        let mut fields = Vec::with_capacity(st.fields.len());
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
            let ty = st.fields[i].ty;
            self.push_value(ty, ty, &mut fields)?;
            if let (Some(c), Some(v)) = (&st.fields[i].const_value, fields.last()) {
                if c != v {
                    let e = self.err(K::InvalidTag(v.to_string()));
                    self.path.pop();
                    return Err(e);
                }
            }
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
        // Fields `..i` were read from the array.
        self.check_required(sid, |k| k < i)?;
        Self::pad(st, &mut fields, st.fields.len());
        Ok(Value::Struct(StructValue { meta: st.meta.clone(), fields }))
    }
}

/// Which fields of a struct were decoded: a bit per field, inline for up to 64 fields.
struct Seen {
    len: usize,
    small: u64,
    more: Vec<u64>,
}

impl Seen {
    fn new(len: usize) -> Self {
        let more = if len > 64 { vec![0; (len - 64).div_ceil(64)] } else { Vec::new() };
        Seen { len, small: 0, more }
    }
    #[inline]
    fn set(&mut self, i: usize) {
        if i < 64 {
            self.small |= 1 << i;
        } else {
            self.more[(i - 64) / 64] |= 1 << ((i - 64) % 64);
        }
    }
    fn get(&self, i: usize) -> bool {
        if i < 64 {
            self.small & 1 << i != 0
        } else {
            self.more[(i - 64) / 64] & 1 << ((i - 64) % 64) != 0
        }
    }
    /// Whether every field was decoded.
    #[inline]
    fn all(&self) -> bool {
        let want = if self.len >= 64 { u64::MAX } else { (1u64 << self.len) - 1 };
        self.small == want && (0..self.len.saturating_sub(64)).all(|i| self.get(64 + i))
    }
}

/// Appends the value `f` makes, built in the list's memory. `Vec::push` builds the value on the stack and then
/// copies it into the list: wide loads of what narrower stores just wrote, which the CPU cannot forward, and
/// that stall cost more than decoding a small value.
#[inline(always)]
fn push_in_place(out: &mut Vec<Value>, f: impl FnOnce() -> Value) {
    out.extend(std::iter::once_with(f));
}
