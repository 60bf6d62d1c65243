//! Type rules: which values written as one spec type a msgspec decoder of another type rejects or misreads,
//! and the typical values the witnesses are built from.
//!
//! The rules are msgspec 0.23.0's (`spec/MSGSPEC.md` §1, §5): ints read as
//! floats but not the reverse; an IntEnum travels as its int; list and tuple are both arrays, a tuple checks
//! its arity; `nil` only reads as `T | None`; str, bytes and bool never read as one another or as ints.

use serde_json::{json, Map, Value as J};

use crate::spec::{FieldDef, Literal, Revision, StructDef, StructKind, TypeExpr};

/// Aliases inlined, recursively; enum and struct names stay.
pub(crate) fn resolve(rev: &Revision, t: &TypeExpr) -> TypeExpr {
    resolve_depth(rev, t, 0)
}

fn resolve_depth(rev: &Revision, t: &TypeExpr, depth: usize) -> TypeExpr {
    if depth > 32 {
        return t.clone();
    }
    let r = |x: &TypeExpr| Box::new(resolve_depth(rev, x, depth + 1));
    match t {
        TypeExpr::Named(n) => match rev.aliases.get(n) {
            Some(a) => resolve_depth(rev, &a.ty, depth + 1),
            None => t.clone(),
        },
        TypeExpr::List(x) => TypeExpr::List(r(x)),
        TypeExpr::Optional(x) => match resolve_depth(rev, x, depth + 1) {
            o @ TypeExpr::Optional(_) => o,
            x => TypeExpr::Optional(Box::new(x)),
        },
        TypeExpr::Dict(k, v) => TypeExpr::Dict(r(k), r(v)),
        TypeExpr::Tuple(ts) => TypeExpr::Tuple(ts.iter().map(|x| resolve_depth(rev, x, depth + 1)).collect()),
        // `tuple[T, ...]` is an array of T on the wire, exactly like `list[T]`.
        TypeExpr::VarTuple(x) => TypeExpr::List(r(x)),
        other => other.clone(),
    }
}

/// Whether msgspec omits this struct's defaulted fields when they hold their default (`omit_defaults`;
/// never for `array_like` structs, dataclasses or JSON bodies).
pub(crate) fn omits(s: &StructDef) -> bool {
    s.kind == StructKind::MsgspecStruct && s.options.omit_defaults && !s.options.array_like
}

/// Whether every message carries the field (required, or nothing is omitted).
pub(crate) fn always_written(s: &StructDef, f: &FieldDef) -> bool {
    f.required() || !omits(s)
}

/// A default as JSON (`msgspec.to_builtins` form).
pub(crate) fn default_json(f: &FieldDef) -> Option<J> {
    let l = f.default_literal().ok()??;
    Some(match l {
        Literal::None => J::Null,
        Literal::Bool(b) => J::Bool(b),
        Literal::Int(i) => i64::try_from(i).map(J::from).unwrap_or_else(|_| J::from(i as u64)),
        Literal::Float(x) => json!(x),
        Literal::Str(s) => J::String(s),
        Literal::Bytes(b) => J::String(b64(&b)),
        Literal::EmptyList | Literal::EmptyTuple => json!([]),
        Literal::EmptyDict => json!({}),
    })
}

fn b64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            s.push(if i <= c.len() { T[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
        }
    }
    s
}

/// Builds typical (non-empty, non-default) values of a revision's types.
pub(crate) struct Gen<'a> {
    pub(crate) rev: &'a Revision,
    /// Use this member value for this enum instead of its first member.
    pub(crate) pick: Option<(&'a str, i64)>,
}

impl<'a> Gen<'a> {
    pub(crate) fn new(rev: &'a Revision) -> Gen<'a> {
        Gen { rev, pick: None }
    }

    /// A typical value: containers hold one element, optionals hold a value, enums their first member.
    pub(crate) fn typical(&self, t: &TypeExpr) -> J {
        self.typical_depth(t, 0)
    }

    fn typical_depth(&self, t: &TypeExpr, depth: usize) -> J {
        match t {
            TypeExpr::Int => json!(5),
            TypeExpr::Float => json!(2.5),
            TypeExpr::Str => json!("x"),
            TypeExpr::Bytes => json!(b64(b"x")),
            TypeExpr::Bool => json!(true),
            TypeExpr::List(x) if depth < 8 => json!([self.typical_depth(x, depth + 1)]),
            TypeExpr::List(_) => json!([]),
            TypeExpr::Dict(k, v) if depth < 8 => {
                let mut m = Map::new();
                m.insert(key_string(&self.typical_depth(k, depth + 1)), self.typical_depth(v, depth + 1));
                J::Object(m)
            }
            TypeExpr::Dict(..) => json!({}),
            TypeExpr::Tuple(ts) => J::Array(ts.iter().map(|x| self.typical_depth(x, depth + 1)).collect()),
            TypeExpr::VarTuple(x) if depth < 8 => json!([self.typical_depth(x, depth + 1)]),
            TypeExpr::VarTuple(_) => json!([]),
            TypeExpr::Any => json!(5),
            TypeExpr::Optional(_) if depth >= 8 => J::Null,
            TypeExpr::Optional(x) => self.typical_depth(x, depth),
            TypeExpr::Named(n) => {
                if let Some(a) = self.rev.aliases.get(n) {
                    return self.typical_depth(&a.ty, depth + 1);
                }
                if let Some(e) = self.rev.enums.get(n) {
                    if let Some((_, v)) = self.pick.filter(|(p, _)| p == n) {
                        return json!(v);
                    }
                    return e.members.first().map(|m| json!(m.value)).unwrap_or(J::Null);
                }
                match self.rev.structs.get(n) {
                    Some(s) if depth < 8 => J::Object(self.baseline_depth(s, depth + 1)),
                    _ => J::Null,
                }
            }
        }
    }

    /// A typical value that differs from every value in `avoid`.
    pub(crate) fn typical_not(&self, t: &TypeExpr, avoid: &[&J]) -> J {
        let first = self.typical(t);
        if !avoid.contains(&&first) {
            return first;
        }
        let rt = resolve(self.rev, t);
        let inner = match &rt {
            TypeExpr::Optional(x) => (**x).clone(),
            x => x.clone(),
        };
        let candidates: Vec<J> = match &inner {
            TypeExpr::Int => (6..40).map(|i| json!(i)).collect(),
            TypeExpr::Float => vec![json!(3.5), json!(4.5), json!(-1.5)],
            TypeExpr::Str => ["y", "z", "w"].iter().map(|s| json!(s)).collect(),
            TypeExpr::Bool => vec![json!(false), json!(true)],
            TypeExpr::Named(n) => {
                self.rev.enums.get(n).map(|e| e.members.iter().map(|m| json!(m.value)).collect()).unwrap_or_default()
            }
            _ => vec![],
        };
        candidates.into_iter().find(|c| !avoid.contains(&c)).unwrap_or(first)
    }

    /// A struct value with every required field typical and every defaulted field left out (its default).
    pub(crate) fn baseline(&self, s: &StructDef) -> Map<String, J> {
        self.baseline_depth(s, 0)
    }

    fn baseline_depth(&self, s: &StructDef, depth: usize) -> Map<String, J> {
        let mut m = Map::new();
        for f in &s.fields {
            if f.required() {
                m.insert(f.name.clone(), self.typical_depth(&f.ty, depth));
            }
        }
        m
    }

    /// A struct value with every field holding a typical non-default value.
    pub(crate) fn full(&self, s: &StructDef) -> Map<String, J> {
        let mut m = Map::new();
        for f in &s.fields {
            let d = default_json(f);
            let avoid: Vec<&J> = d.iter().collect();
            m.insert(f.name.clone(), self.typical_not(&f.ty, &avoid));
        }
        m
    }
}

/// The text of a JSON dict key (`from_json` reads non-str keys back with a JSON parser).
pub(crate) fn key_string(k: &J) -> String {
    match k {
        J::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Writer values a reader of another type rejects or misreads.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Incompat {
    /// A writer value that breaks.
    pub(crate) value: J,
    /// msgspec path of the break, relative to the field (`[...][1][0]`).
    pub(crate) at: String,
    /// `true`: every value of this shape breaks (unless a container on the way is empty). `false`: only
    /// values described by `when`; `safe` is a writer value that reads fine.
    pub(crate) shape: bool,
    pub(crate) when: String,
    pub(crate) safe: Option<J>,
    /// The innermost container on the way (relative path) whose emptiness avoids a shape break, and the
    /// writer value with it empty.
    pub(crate) container: Option<String>,
    pub(crate) exception: Option<J>,
    /// Tuple arity (writer, reader) when that is the break.
    pub(crate) arity: Option<(usize, usize)>,
}

impl Incompat {
    fn shape(value: J, at: &str) -> Incompat {
        Incompat {
            value,
            at: at.into(),
            shape: true,
            when: String::new(),
            safe: None,
            container: None,
            exception: None,
            arity: None,
        }
    }
    fn only(value: J, safe: J, at: &str, when: String) -> Incompat {
        Incompat {
            value,
            at: at.into(),
            shape: false,
            when,
            safe: Some(safe),
            container: None,
            exception: None,
            arity: None,
        }
    }
    /// Wraps the inner break into a container value built by `make`; `empty` is that container empty.
    fn wrap(mut self, at: &str, make: impl Fn(J) -> J, empty: Option<J>) -> Incompat {
        self.value = make(self.value);
        self.safe = self.safe.map(&make);
        if self.shape {
            match self.exception.take() {
                Some(e) => self.exception = Some(make(e)),
                None => {
                    if let Some(e) = empty {
                        self.exception = Some(e);
                        self.container = Some(at.to_string());
                    }
                }
            }
        }
        self
    }
}

/// One side of a type comparison: the revision whose names the type uses.
#[derive(Clone, Copy)]
pub(crate) struct Typed<'a> {
    pub(crate) rev: &'a Revision,
    pub(crate) ty: &'a TypeExpr,
}

/// The values of the writer's type that the reader's type does not read back faithfully, or `None` when every
/// value does. Types are compared with aliases inlined; an enum or struct of the same name is the same type
/// here (its own changes are diffed separately).
pub(crate) fn incompat(w: Typed, r: Typed) -> Option<Incompat> {
    let wt = resolve(w.rev, w.ty);
    let rt = resolve(r.rev, r.ty);
    walk(w.rev, &wt, r.rev, &rt, "")
}

fn is_enum(rev: &Revision, t: &TypeExpr) -> Option<String> {
    match t {
        TypeExpr::Named(n) if rev.enums.contains_key(n) => Some(n.clone()),
        _ => None,
    }
}

fn walk(wr: &Revision, w: &TypeExpr, rr: &Revision, r: &TypeExpr, at: &str) -> Option<Incompat> {
    let gw = Gen::new(wr);
    match (w, r) {
        (TypeExpr::Named(a), TypeExpr::Named(b)) if a == b => None,
        (a, b) if a == b && !matches!(a, TypeExpr::Named(_)) => None,
        (TypeExpr::Optional(a), TypeExpr::Optional(b)) => walk(wr, a, rr, b, at),
        // A reader typed `any` accepts every value.
        (_, TypeExpr::Any) => None,
        (TypeExpr::Optional(a), b) => match walk(wr, a, rr, b, at) {
            Some(i) if i.shape => Some(i),
            _ => Some(Incompat::only(J::Null, gw.typical(a), at, "is None".into())),
        },
        (a, TypeExpr::Optional(b)) => walk(wr, a, rr, b, at),
        (TypeExpr::Int, TypeExpr::Float) => None,
        (TypeExpr::Named(_), TypeExpr::Int | TypeExpr::Float) if is_enum(wr, w).is_some() => None,
        (TypeExpr::Int, TypeExpr::Named(e)) if rr.enums.contains_key(e) => {
            let members: Vec<i64> = rr.enums[e].members.iter().map(|m| m.value).collect();
            let outside = (0..).find(|v| !members.contains(v)).unwrap_or(0);
            let safe = members.first().copied().unwrap_or(0);
            Some(Incompat::only(json!(outside), json!(safe), at, format!("holds an int that is not a `{e}` value")))
        }
        (TypeExpr::Named(a), TypeExpr::Named(b)) if wr.enums.contains_key(a) && rr.enums.contains_key(b) => {
            let rv: Vec<i64> = rr.enums[b].members.iter().map(|m| m.value).collect();
            let wm = &wr.enums[a].members;
            let bad = wm.iter().find(|m| !rv.contains(&m.value))?;
            let safe = wm.iter().find(|m| rv.contains(&m.value)).map(|m| json!(m.value)).unwrap_or(J::Null);
            Some(Incompat::only(
                json!(bad.value),
                safe,
                at,
                format!("holds `{a}.{}` ({}), not a `{b}` value", bad.name, bad.value),
            ))
        }
        (TypeExpr::List(a), TypeExpr::List(b)) => {
            let sub = format!("{at}[0]");
            walk(wr, a, rr, b, &sub).map(|i| i.wrap(at, |v| json!([v]), Some(json!([]))))
        }
        (TypeExpr::Dict(ka, va), TypeExpr::Dict(kb, vb)) => {
            if let Some(i) = walk(wr, ka, rr, kb, &format!("{at}[key]")) {
                let v = gw.typical(va);
                return Some(i.wrap(at, |k| J::Object(Map::from_iter([(key_string(&k), v.clone())])), Some(json!({}))));
            }
            let k = key_string(&gw.typical(ka));
            walk(wr, va, rr, vb, &format!("{at}[...]"))
                .map(|i| i.wrap(at, |v| J::Object(Map::from_iter([(k.clone(), v)])), Some(json!({}))))
        }
        (TypeExpr::Tuple(a), TypeExpr::Tuple(b)) if a.len() != b.len() => {
            let mut i = Incompat::shape(gw.typical(w), at);
            i.arity = Some((a.len(), b.len()));
            Some(i)
        }
        (TypeExpr::Tuple(a), TypeExpr::Tuple(b)) => tuple_elements(wr, a, rr, b.iter().collect(), at),
        (TypeExpr::Tuple(a), TypeExpr::List(b)) => tuple_elements(wr, a, rr, vec![&**b; a.len()], at),
        (TypeExpr::List(a), TypeExpr::Tuple(b)) => {
            for (k, e) in b.iter().enumerate() {
                if let Some(i) = walk(wr, a, rr, e, &format!("{at}[{k}]")) {
                    let n = b.len();
                    let t = gw.typical(a);
                    return Some(i.wrap(
                        at,
                        |v| J::Array((0..n).map(|j| if j == k { v.clone() } else { t.clone() }).collect()),
                        None,
                    ));
                }
            }
            let t = gw.typical(a);
            Some(Incompat::only(
                J::Array(vec![t.clone(); b.len() + 1]),
                J::Array(vec![t; b.len()]),
                at,
                format!("does not hold exactly {} elements", b.len()),
            ))
        }
        _ => Some(Incompat::shape(gw.typical(w), at)),
    }
}

fn tuple_elements(wr: &Revision, a: &[TypeExpr], rr: &Revision, b: Vec<&TypeExpr>, at: &str) -> Option<Incompat> {
    let gw = Gen::new(wr);
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        if let Some(i) = walk(wr, x, rr, y, &format!("{at}[{k}]")) {
            let typ: Vec<J> = a.iter().map(|t| gw.typical(t)).collect();
            return Some(i.wrap(
                at,
                |v| J::Array(typ.iter().enumerate().map(|(j, t)| if j == k { v.clone() } else { t.clone() }).collect()),
                None,
            ));
        }
    }
    None
}

/// Whether every value valid under both types encodes to the same bytes under each (an int written as a
/// float does not: msgspec writes floats as float64).
pub(crate) fn same_encoding(wr: &Revision, w: &TypeExpr, rr: &Revision, r: &TypeExpr) -> bool {
    let (w, r) = (resolve(wr, w), resolve(rr, r));
    fn go(wr: &Revision, w: &TypeExpr, rr: &Revision, r: &TypeExpr) -> bool {
        match (w, r) {
            (TypeExpr::Optional(a), b) | (b, TypeExpr::Optional(a)) if !matches!(b, TypeExpr::Optional(_)) => {
                go(wr, a, rr, b)
            }
            (TypeExpr::Optional(a), TypeExpr::Optional(b)) => go(wr, a, rr, b),
            (TypeExpr::Int, TypeExpr::Float) | (TypeExpr::Float, TypeExpr::Int) => false,
            (TypeExpr::List(a) | TypeExpr::Optional(a), TypeExpr::List(b)) => go(wr, a, rr, b),
            (TypeExpr::Dict(ka, va), TypeExpr::Dict(kb, vb)) => go(wr, ka, rr, kb) && go(wr, va, rr, vb),
            (TypeExpr::Tuple(a), TypeExpr::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| go(wr, x, rr, y))
            }
            (TypeExpr::Tuple(a), TypeExpr::List(b)) | (TypeExpr::List(b), TypeExpr::Tuple(a)) => {
                a.iter().all(|x| go(wr, x, rr, b))
            }
            (TypeExpr::Named(a), TypeExpr::Int) | (TypeExpr::Int, TypeExpr::Named(a)) => {
                wr.enums.contains_key(a) || rr.enums.contains_key(a)
            }
            _ => true,
        }
    }
    go(wr, &w, rr, &r)
}

/// Whether `root` (a struct of `rev`) is or contains a value of `target` (a struct or enum name).
pub(crate) fn mentions(rev: &Revision, root: &str, target: &str) -> bool {
    fn go(rev: &Revision, t: &TypeExpr, target: &str, seen: &mut Vec<String>) -> bool {
        let mut names = vec![];
        t.names(&mut names);
        names.into_iter().any(|n| {
            if n == target {
                return true;
            }
            if seen.contains(&n) {
                return false;
            }
            seen.push(n.clone());
            if let Some(a) = rev.aliases.get(&n) {
                return go(rev, &a.ty, target, seen);
            }
            rev.structs.get(&n).is_some_and(|s| s.fields.iter().any(|f| go(rev, &f.ty, target, seen)))
        })
    }
    root == target || go(rev, &TypeExpr::Named(root.to_string()), target, &mut vec![])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    fn t(s: &str) -> TypeExpr {
        TypeExpr::parse(s).unwrap()
    }

    #[test]
    fn req_blocks_flat_to_grouped_breaks_except_empty_block_lists() {
        let push = Spec::builtin().push();
        let (a, b) = (push.revision("vllm-0.19.0..0.19.1").unwrap(), push.revision("vllm-0.20.0..0.23.0").unwrap());
        let (ta, tb) =
            (&a.structs["MooncakeXferMetadata"].fields[4].ty, &b.structs["MooncakeXferMetadata"].fields[4].ty);
        let i = incompat(Typed { rev: b, ty: tb }, Typed { rev: a, ty: ta }).unwrap();
        assert!(i.shape);
        assert_eq!(i.at, "[...][1][0]");
        assert_eq!(i.container.as_deref(), Some("[...][1]"));
        assert_eq!(i.value, json!({"x": ["x", [[5]]]}));
        assert_eq!(i.exception, Some(json!({"x": ["x", []]})));
        let back = incompat(Typed { rev: a, ty: ta }, Typed { rev: b, ty: tb }).unwrap();
        assert_eq!(back.value, json!({"x": ["x", [5]]}));
    }

    #[test]
    fn widening_and_narrowing() {
        let r = Spec::builtin().push().newest().unwrap();
        let c = |w: &str, rd: &str| incompat(Typed { rev: r, ty: &t(w) }, Typed { rev: r, ty: &t(rd) });
        assert_eq!(c("int", "float"), None);
        assert!(c("float", "int").unwrap().shape);
        assert_eq!(c("int", "optional[int]"), None);
        let n = c("optional[int]", "int").unwrap();
        assert!(!n.shape && n.value == J::Null && n.when == "is None");
        assert_eq!(c("ReqId", "str"), None);
        assert_eq!(c("MooncakeXferResponseStatus", "int"), None);
        let e = c("int", "MooncakeXferResponseStatus").unwrap();
        assert_eq!(e.value, json!(4));
        assert_eq!(c("tuple[int, str]", "tuple[int, str, int]").unwrap().arity, Some((2, 3)));
        assert_eq!(c("list[int]", "tuple[int, int]").unwrap().value, json!([5, 5, 5]));
        assert!(same_encoding(r, &t("optional[int]"), r, &t("int")));
        assert!(!same_encoding(r, &t("int"), r, &t("float")));
    }
}
