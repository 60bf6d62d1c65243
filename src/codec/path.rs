//! The path and error stack of every decoder in the crate — the spec-driven one (`decode.rs`) and the
//! generated typed ones (`crate::typed`'s `de.rs`): one rendering of msgspec's paths
//! (`` $.req_blocks[...][1] ``), one mapping of the byte reader's errors to msgspec's, one classification of
//! a struct key that is not a str. The texts are msgspec's own, which the vector tests hold byte for byte.

use super::error::{DecodeError, DecodeErrorKind as K};
use crate::msgpack::{Kind, RawError};

/// One step of the path to the value being decoded; `F` names a struct field (an index into a compiled plan,
/// or the wire name itself).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Seg<F> {
    /// `.name`.
    Field(F),
    /// `[i]`: an element of an array.
    Index(usize),
    /// `[...]`: the value of a dict entry.
    DictValue,
    /// `[key]`: the value of a dict entry named by its key, as `name` renders it (`"r1"`, `3`). msgspec's errors
    /// say `[...]`; [`super::Codec::path_at`], which tells where two encodings of a value part, names the entry.
    Key(F),
}

/// msgspec's rendering of a path: `$`, then `.field`, `[i]` or `[...]` per step (or `[key]`); `name` gives a
/// field's wire name (and a key's text).
#[cold]
pub(crate) fn render<'n, F>(segs: &[Seg<F>], name: impl Fn(&F) -> &'n str) -> String {
    let mut s = String::from("$");
    for seg in segs {
        match seg {
            Seg::Field(f) => {
                s.push('.');
                s.push_str(name(f));
            }
            Seg::Index(i) => {
                s.push('[');
                s.push_str(&i.to_string());
                s.push(']');
            }
            Seg::DictValue => s.push_str("[...]"),
            Seg::Key(k) => {
                s.push('[');
                s.push_str(name(k));
                s.push(']');
            }
        }
    }
    s
}

/// An error about the value at `path` (rendered).
#[cold]
pub(crate) fn at(kind: K, path: String) -> DecodeError {
    let mut e = DecodeError::new(kind);
    e.path = path;
    e
}

/// An error about a map key at `path` (msgspec: `` - at `key` in `$...` ``).
#[cold]
pub(crate) fn in_key(kind: K, path: String) -> DecodeError {
    let mut e = at(kind, path);
    e.in_key = true;
    e
}

/// A byte-level reader error as msgspec reports it (no path).
#[cold]
pub(crate) fn raw(e: RawError) -> DecodeError {
    DecodeError::new(match e {
        RawError::Truncated => K::Truncated,
        RawError::InvalidOpcode { op, offset } => K::InvalidOpcode { op, offset },
        RawError::TooDeep => K::TooDeep,
    })
}

/// A struct key whose opcode is of `kind`, not a str: what msgspec says (it names nil `null` here, where a
/// dict key's nil is `None`). `None` for a str opcode, whose bytes are then read.
#[cold]
pub(crate) fn struct_key_mismatch(kind: Kind) -> Option<K> {
    if kind == Kind::Str {
        return None;
    }
    let got = if kind == Kind::Nil { "null" } else { kind.msgspec_name() };
    Some(K::Expected { expected: "str".into(), got })
}
