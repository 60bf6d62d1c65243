//! Python's `Any` in a typed message (a spec type `any`, e.g. the values of vllm-ascend 0.23.0.post1's
//! `MooncakeAgentMetadata.kv_group2layeridx` spec description, `dict[str, any]`). msgspec decodes them untyped; the rules here are the spec codec's for the type `any` (`src/codec/decode.rs`):
//! arrays become lists, maps keep the last duplicate at the first position (keys equal as in Python:
//! [`crate::codec::pykey`]), a list or map as a key is refused
//! ("hashable"), an ext value is refused.

use std::collections::HashMap;

use crate::codec::pykey::{Identity, PyKey};
use crate::codec::DecodeErrorKind as K;
use crate::msgpack::{Obj, WireInt, Writer};
use crate::typed::de::{De, Seg, R};

/// An untyped MessagePack value.
#[derive(Clone, Debug, PartialEq)]
pub enum Untyped {
    /// nil.
    Nil,
    /// A bool.
    Bool(bool),
    /// An int.
    Int(WireInt),
    /// Written back as a float64, whatever width it arrived in (as msgspec does).
    Float(f64),
    /// A str.
    Str(String),
    /// bin.
    Bytes(Vec<u8>),
    /// An array.
    Array(Vec<Untyped>),
    /// Entries in insertion order; keys are unique and never an array or a map.
    Map(Vec<(Untyped, Untyped)>),
}

impl Untyped {
    /// Decodes one untyped value from its already-read object head.
    pub(crate) fn decode_from<'a>(d: &mut De<'a>, obj: Obj<'a>) -> R<Untyped> {
        Ok(match obj {
            Obj::Nil => Untyped::Nil,
            Obj::Bool(b) => Untyped::Bool(b),
            Obj::Int(i) => Untyped::Int(i),
            Obj::Float(x) => Untyped::Float(x),
            Obj::Str(b) => Untyped::Str(De::utf8_ref(b)?.to_owned()),
            Obj::Bin(b) => Untyped::Bytes(b.to_vec()),
            Obj::Array(n) => Untyped::Array(d.list(n, |d| {
                let o = d.obj()?;
                Untyped::decode_from(d, o)
            })?),
            Obj::Map(n) => {
                d.enter()?;
                let mut out: Vec<(Untyped, Untyped)> = Vec::with_capacity(d.cap(n / 2));
                let mut index: HashMap<PyKey<'a>, usize> = HashMap::new();
                for _ in 0..n {
                    let o = d.obj()?;
                    let id = Identity::of(&o);
                    let k = Untyped::decode_from(d, o)?;
                    match &k {
                        Untyped::Array(_) => {
                            return Err(d.key_err(K::Expected { expected: "hashable".into(), got: "array" }))
                        }
                        Untyped::Map(_) => {
                            return Err(d.key_err(K::Expected { expected: "hashable".into(), got: "object" }))
                        }
                        _ => {}
                    }
                    let v = d.with(Seg::DictValue, |d| {
                        let o = d.obj()?;
                        Untyped::decode_from(d, o)
                    })?;
                    match id {
                        Identity::Key(id) => match index.get(&id) {
                            Some(&i) => out[i].1 = v,
                            None => {
                                index.insert(id, out.len());
                                out.push((k, v));
                            }
                        },
                        // NaN equals nothing (arrays and maps were refused above, ext by the value decoder).
                        Identity::Unique | Identity::Other => out.push((k, v)),
                    }
                }
                d.leave();
                Untyped::Map(out)
            }
            Obj::Ext(..) => return Err(d.err(K::Expected { expected: "any (without ext)".into(), got: "ext" })),
        })
    }

    /// Encodes as msgspec encodes the decoded Python value.
    pub(crate) fn encode_into(&self, w: &mut Writer) {
        match self {
            Untyped::Nil => w.nil(),
            Untyped::Bool(b) => w.bool(*b),
            Untyped::Int(i) => w.int(*i),
            Untyped::Float(x) => w.f64(*x),
            Untyped::Str(s) => w.str(s),
            Untyped::Bytes(b) => w.bin(b),
            Untyped::Array(xs) => {
                w.array_len(xs.len());
                for x in xs {
                    x.encode_into(w);
                }
            }
            Untyped::Map(entries) => {
                w.map_len(entries.len());
                for (k, v) in entries {
                    k.encode_into(w);
                    v.encode_into(w);
                }
            }
        }
    }
}
