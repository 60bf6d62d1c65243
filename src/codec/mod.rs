//! The spec-driven codec: for any revision and message in the spec, MessagePack bytes ⇄ [`Value`] trees,
//! byte-identical to msgspec, with no per-revision Rust code.
//!
//! ```
//! use mooncake_wire::codec::Codec;
//! let codec = Codec::builtin("vllm-0.33.0").unwrap();
//! let bytes = hex_literal("81a673746174757301");
//! let v = codec.decode("MooncakeXferResponse", &bytes).unwrap();
//! assert_eq!(v.field("status").unwrap().to_string(), "CONTINUE");
//! assert_eq!(codec.encode("MooncakeXferResponse", &v).unwrap(), bytes);
//! # fn hex_literal(s: &str) -> Vec<u8> { (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i+2], 16).unwrap()).collect() }
//! ```

mod compile;
pub mod convert;
mod decode;
mod encode;
mod error;
mod json;
mod locate;
pub(crate) mod path;
pub(crate) mod pykey;
mod strlist;
#[cfg(feature = "testing")]
pub mod testgen;
mod value;

pub(crate) use compile::rename as rename_field;
pub use compile::TyId;
testing_pub!(
    use compile::{CStruct, Plan, TagValue, Ty};
);
#[cfg(feature = "testing")]
pub use compile::CField;
pub use error::{CompileError, DecodeError, DecodeErrorKind, EncodeError, FromJsonError};
pub use strlist::{Iter as StrListIter, StrList};
pub use value::{py_bytes_repr, EnumValue, Items, StructMeta, StructValue, Value};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::spec::{Revision, Spec, SpecError, TypeExpr};
pub(crate) use compile::rename;
use compile::Compiler;
pub(crate) use compile::Scope;

/// A revision's messages, compiled for decoding and encoding.
#[derive(Debug)]
pub struct Codec {
    revision: Arc<Revision>,
    plan: Plan,
    /// Message (struct) name → its type, in spec order.
    messages: Vec<(String, TyId)>,
    /// Which names this codec covers: the side-channel structs, or the bootstrap JSON models.
    scope: Scope,
}

impl Codec {
    /// Compiles the side-channel messages of a revision.
    pub fn new(rev: Arc<Revision>) -> Result<Codec, SpecError> {
        Self::with_scope(rev, Scope::Wire)
    }

    pub(crate) fn with_scope(rev: Arc<Revision>, scope: Scope) -> Result<Codec, SpecError> {
        let names: Vec<String> = match scope {
            Scope::Wire => rev.structs.keys().cloned().collect(),
            Scope::Bootstrap => rev.bootstrap.as_ref().map(|b| b.models.keys().cloned().collect()).unwrap_or_default(),
        };
        let mut c = Compiler::new(&rev, scope, Plan::default());
        let mut messages = Vec::new();
        for n in names {
            let id = c.compile(&TypeExpr::Named(n.clone())).map_err(|e| SpecError::new(&rev.path, e.to_string()))?;
            messages.push((n, id));
        }
        let plan = c.plan;
        Ok(Codec { revision: rev, plan, messages, scope })
    }

    /// The codec of a built-in revision, compiled once per process.
    pub fn builtin(revision: &str) -> Option<Arc<Codec>> {
        static CACHE: OnceLock<Mutex<HashMap<String, Arc<Codec>>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = map.get(revision) {
            return Some(c.clone());
        }
        let rev = Spec::builtin().revision(revision)?.clone();
        let c = Arc::new(Codec::new(rev).expect("built-in revisions compile (tested)"));
        map.insert(revision.to_string(), c.clone());
        Some(c)
    }

    /// The revision this codec was compiled from.
    pub fn revision(&self) -> &Arc<Revision> {
        &self.revision
    }
    testing_pub!(
        /// The compiled types of the revision (what `codec::testgen` draws values from).
        fn plan(&self) -> &Plan {
            &self.plan
        }
    );
    /// The names of the messages (structs) it covers, in spec order.
    pub fn messages(&self) -> impl Iterator<Item = &str> {
        self.messages.iter().map(|(n, _)| n.as_str())
    }
    /// The compiled type of a message, by name.
    pub fn message_type(&self, message: &str) -> Option<TyId> {
        self.messages.iter().find(|(n, _)| n == message).map(|(_, t)| *t)
    }
    /// The type of a name or type expression over this codec's names (`dict[int, EngineEntry]`).
    pub fn type_of(&mut self, expr: &str) -> Result<TyId, CompileError> {
        if let Some(t) = self.message_type(expr) {
            return Ok(t);
        }
        let t = TypeExpr::parse(expr)?;
        let rev = self.revision.clone();
        let mut c = Compiler::new(&rev, self.scope, std::mem::take(&mut self.plan));
        let r = c.compile(&t);
        self.plan = c.plan;
        r
    }

    fn unknown(&self, message: &str) -> DecodeError {
        let mut e = DecodeError::new(DecodeErrorKind::Expected {
            expected: format!("a message of {}", self.revision.revision),
            got: "unknown message",
        });
        e.message = Some(message.to_string());
        e
    }

    /// Decodes one whole frame as `message`. Errors carry the revision and message name.
    pub fn decode(&self, message: &str, bytes: &[u8]) -> Result<Value, DecodeError> {
        let ty = self.message_type(message).ok_or_else(|| self.unknown(message))?;
        self.decode_type(ty, bytes).map_err(|mut e| {
            e.revision = Some(self.revision.revision.clone());
            e.message = Some(message.to_string());
            e
        })
    }

    /// Decodes one whole frame as the compiled type `ty` (see [`Codec::type_of`]).
    pub fn decode_type(&self, ty: TyId, bytes: &[u8]) -> Result<Value, DecodeError> {
        decode::Decoder::new(bytes, &self.plan).frame(ty)
    }

    /// Encodes a value of `message` as msgspec would.
    pub fn encode(&self, message: &str, v: &Value) -> Result<Vec<u8>, EncodeError> {
        let ty = self.message_type(message).ok_or_else(|| EncodeError {
            path: "$".into(),
            msg: format!("{} has no message {message}", self.revision.revision),
        })?;
        self.encode_type(ty, v)
    }

    /// Encodes a value as the compiled type `ty`, as msgspec would.
    pub fn encode_type(&self, ty: TyId, v: &Value) -> Result<Vec<u8>, EncodeError> {
        let mut e = encode::Encoder::for_value(&self.plan, v);
        e.value(ty, v)?;
        let mut out = e.w.into_bytes();
        // The size estimate can be well above the encoding (ints written short): give back what is far more.
        if out.capacity() > 2 * out.len() + 4096 {
            out.shrink_to_fit();
        }
        Ok(out)
    }

    /// `msgspec.to_builtins` of a value.
    pub fn to_json(v: &Value) -> serde_json::Value {
        json::to_json(v)
    }

    /// A value of `message` from its `to_builtins` JSON.
    pub fn from_json(&self, message: &str, j: &serde_json::Value) -> Result<Value, FromJsonError> {
        let ty = self.message_type(message).ok_or_else(|| FromJsonError::NoMessage(message.to_string()))?;
        json::from_json(&self.plan, ty, j, "$")
    }

    /// A value of the compiled type `ty` from its `to_builtins` JSON.
    pub fn from_json_type(&self, ty: TyId, j: &serde_json::Value) -> Result<Value, FromJsonError> {
        json::from_json(&self.plan, ty, j, "$")
    }

    testing_pub!(
        /// The compiled struct behind a message (its fields, defaults and wire options).
        fn message_struct(&self, message: &str) -> Option<&CStruct> {
            match self.plan.types[self.message_type(message)? as usize] {
                Ty::Struct(s) => Some(&self.plan.structs[s as usize]),
                _ => None,
            }
        }
    );

    /// msgspec's name for what a type expects (`array | null`).
    pub(crate) fn expected_name(&self, ty: TyId) -> String {
        decode::Decoder::expected_name(&self.plan, ty)
    }
}

#[cfg(test)]
mod tests;
