//! Python's `Any` in a pull message: the values of `MooncakeAgentMetadata.kv_group2layeridx`'s spec
//! description (`dict[str, any]`, vllm-ascend 0.23.0.post1 sdist,
//! `vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py`; `spec/pull/vllm-ascend-0.23.0.post1.toml`).
//! msgspec decodes them untyped; the rules here are the spec codec's for the type `any` (`src/codec/decode.rs`):
//! arrays become lists, maps keep the last duplicate at the first position, a list or map as a key is refused
//! ("hashable"), an ext value is refused.

use std::collections::HashMap;

use crate::codec::DecodeErrorKind as K;
use crate::msgpack::{Obj, WireInt, Writer};
use crate::typed::de::{De, Seg, R};

/// An untyped MessagePack value.
#[derive(Clone, Debug, PartialEq)]
pub enum Untyped {
    Nil,
    Bool(bool),
    Int(WireInt),
    /// Written back as a float64, whatever width it arrived in (as msgspec does).
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Array(Vec<Untyped>),
    /// Entries in insertion order; keys are unique and never an array or a map.
    Map(Vec<(Untyped, Untyped)>),
}

/// The part of a key that decides equality, hashable (a float by its bits, `-0.0` as `0.0`; NaN equals
/// nothing, so it never gets here).
#[derive(PartialEq, Eq, Hash)]
enum KeyId {
    Nil,
    Bool(bool),
    Int(WireInt),
    Float(u64),
    Str(String),
    Bytes(Vec<u8>),
}

impl KeyId {
    fn of(v: &Untyped) -> Option<KeyId> {
        Some(match v {
            Untyped::Nil => KeyId::Nil,
            Untyped::Bool(b) => KeyId::Bool(*b),
            Untyped::Int(i) => KeyId::Int(*i),
            Untyped::Float(x) if x.is_nan() => return None,
            Untyped::Float(x) => KeyId::Float(if *x == 0.0 { 0 } else { x.to_bits() }),
            Untyped::Str(s) => KeyId::Str(s.clone()),
            Untyped::Bytes(b) => KeyId::Bytes(b.clone()),
            Untyped::Array(_) | Untyped::Map(_) => return None,
        })
    }
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
                let mut index: HashMap<KeyId, usize> = HashMap::new();
                for _ in 0..n {
                    let o = d.obj()?;
                    let k = Untyped::decode_from(d, o)?;
                    let id = match &k {
                        Untyped::Array(_) => return Err(d.key_err(K::Expected { expected: "hashable".into(), got: "array" })),
                        Untyped::Map(_) => return Err(d.key_err(K::Expected { expected: "hashable".into(), got: "object" })),
                        k => KeyId::of(k),
                    };
                    let v = d.with(Seg::DictValue, |d| {
                        let o = d.obj()?;
                        Untyped::decode_from(d, o)
                    })?;
                    match id {
                        Some(id) => match index.get(&id) {
                            Some(&i) => out[i].1 = v,
                            None => {
                                index.insert(id, out.len());
                                out.push((k, v));
                            }
                        },
                        None => out.push((k, v)),
                    }
                }
                d.leave();
                Untyped::Map(out)
            }
            Obj::Ext(..) => return Err(d.err(K::Expected { expected: "any (without ext)".into(), got: "ext" })),
        })
    }

    /// Encodes as msgspec encodes the decoded Python value.
    pub fn encode_into(&self, w: &mut Writer) {
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
