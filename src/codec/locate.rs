//! Where a byte of an encoding lies in the value it encodes: the path of the innermost value whose encoding
//! holds it, rendered as the decoders render theirs (`path::render`). For reports that show where a peer's
//! bytes part from msgspec's encoding of the same value (the conformance runner's `WIRE-CANONICAL`).

use std::borrow::Cow;

use super::path;
use super::{Codec, Value};
use crate::msgpack::{Obj, Reader};

/// A path step; fields and dict keys by their text.
type Seg<'v> = path::Seg<Cow<'v, str>>;

impl Codec {
    /// The path of the innermost value whose encoding in `bytes` (one frame of `message`) holds byte `offset`:
    /// `$.req_blocks["r1"][1]` (a dict entry by its key, where msgspec's errors say `[...]`; a struct field by
    /// its name, known or not). `$` when the offset is in the head of the frame itself; `None` when `bytes`
    /// do not decode as `message` or `offset` is past their end.
    pub fn path_at(&self, message: &str, bytes: &[u8], offset: usize) -> Option<String> {
        let v = self.decode(message, bytes).ok()?;
        let mut segs = vec![];
        walk(&mut Reader::new(bytes), Some(&v), offset, &mut segs)?.then(|| {
            let named: Vec<path::Seg<&str>> = segs.iter().map(text).collect();
            path::render(&named, |s| s)
        })
    }
}

/// A step with its text borrowed, as [`path::render`] takes it.
fn text<'s>(seg: &'s Seg<'_>) -> path::Seg<&'s str> {
    match seg {
        path::Seg::Field(f) => path::Seg::Field(f.as_ref()),
        path::Seg::Key(k) => path::Seg::Key(k.as_ref()),
        path::Seg::Index(i) => path::Seg::Index(*i),
        path::Seg::DictValue => path::Seg::DictValue,
    }
}

/// Reads one value, descending into it until the object holding byte `at` is read: `Some(true)` with its
/// path in `segs`, `Some(false)` when the value ends before `at`, `None` on bytes that do not read.
fn walk<'v>(r: &mut Reader<'_>, v: Option<&'v Value>, at: usize, segs: &mut Vec<Seg<'v>>) -> Option<bool> {
    let obj = r.read_obj().ok()?;
    if at < r.pos() {
        return Some(true);
    }
    match obj {
        Obj::Array(n) => (0..n).try_fold(false, |found, i| {
            if found {
                return Some(true);
            }
            let (seg, child) = element(v, i);
            descend(r, seg, child, at, segs)
        }),
        Obj::Map(n) => (0..n).try_fold(false, |found, i| {
            if found {
                return Some(true);
            }
            let key = r.read_obj().ok()?;
            let (seg, child) = entry(v, i, key)?;
            if at < r.pos() {
                segs.push(seg);
                return Some(true);
            }
            descend(r, seg, child, at, segs)
        }),
        _ => Some(false),
    }
}

/// [`walk`] into a child under `seg`, which stays on the path when the child holds `at`.
fn descend<'v>(
    r: &mut Reader<'_>,
    seg: Seg<'v>,
    child: Option<&'v Value>,
    at: usize,
    segs: &mut Vec<Seg<'v>>,
) -> Option<bool> {
    segs.push(seg);
    let found = walk(r, child, at, segs)?;
    if !found {
        segs.pop();
    }
    Some(found)
}

/// Element `i` of an array: a field of an array-like struct, else an index (with the element's value when the
/// list holds values; packed lists hold scalars, which have no inside).
fn element(v: Option<&Value>, i: usize) -> (Seg<'_>, Option<&Value>) {
    match v {
        Some(Value::Struct(s)) => match s.meta.field_names.get(i) {
            Some(name) => (path::Seg::Field(Cow::Borrowed(name.as_str())), s.fields.get(i)),
            None => (path::Seg::Index(i), None),
        },
        Some(v) => (path::Seg::Index(i), v.as_seq().and_then(|s| s.get(i))),
        None => (path::Seg::Index(i), None),
    }
}

/// Entry `i` of a map whose key was read as `key`: a struct's field by name, a dict's value by its key (as
/// JSON writes it). `None` for a key that is itself an array or a map (no decoded value has one).
fn entry<'v>(v: Option<&'v Value>, i: usize, key: Obj<'_>) -> Option<(Seg<'v>, Option<&'v Value>)> {
    let text = match key {
        Obj::Str(b) => String::from_utf8_lossy(b).into_owned(),
        Obj::Array(_) | Obj::Map(_) => return None,
        other => format!("{other:?}"),
    };
    Some(match v {
        Some(Value::Struct(s)) => {
            let child = s.get(&text);
            (path::Seg::Field(Cow::Owned(text)), child)
        }
        Some(Value::Dict(d)) => match d.get(i) {
            Some((k, val)) => (path::Seg::Key(Cow::Owned(Codec::to_json(k).to_string())), Some(val)),
            None => (path::Seg::Key(Cow::Owned(format!("{text:?}"))), None),
        },
        _ => (path::Seg::Key(Cow::Owned(format!("{text:?}"))), None),
    })
}
