//! Compatibility hashes: vLLM's `hash_factors` reproduced byte for byte (CPython `json.dumps` with
//! `sort_keys=True`, Python float repr, `list.sort` order), the NIXL compatibility-hash factor sets of every
//! release and the Mooncake wrapper (data in `spec/compat-hash/`), and the wire fingerprint of a spec
//! revision (defined in `spec/README.md`, "Wire fingerprint").

pub mod compat;
pub(crate) mod factors;
pub mod fingerprint;
pub(crate) mod pyfloat;
pub mod pyjson;
pub(crate) mod pyvalue;
pub mod tagged;
pub(crate) mod timsort;

pub use factors::{hash_factors, FactorsHash};
pub use pyvalue::{PyError, PyInt, PyValue};

/// Why a compatibility hash, a wire fingerprint or one of their inputs cannot be computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum HashError {
    /// Python would raise while building or serializing the value (`TypeError: unhashable type: 'list'`).
    #[error(transparent)]
    Python(#[from] PyError),
    /// The release's function takes an argument the config does not give.
    #[error("{signature}: the {argument} argument is required")]
    MissingArgument {
        /// The function's signature in that release.
        signature: String,
        /// The argument.
        argument: &'static str,
    },
    /// The spec names a factor this crate cannot compute.
    #[error("{what} `{name}` has no implementation")]
    Unimplemented {
        /// `factor` or `speculative key`.
        what: &'static str,
        /// Its name in the spec.
        name: String,
    },
    /// `spec/compat-hash/nixl.toml` has no `[wrapper]` table.
    #[error("spec/compat-hash/nixl.toml has no [wrapper]")]
    NoWrapper,
    /// A tagged-JSON value that is not what its tag says ([`tagged`]).
    #[error("{path}: {problem}")]
    Tagged {
        /// JSON path of the value (`$.model.$bytes`).
        path: String,
        /// What is wrong with it.
        problem: TaggedProblem,
    },
    /// A field's default in the spec is not a literal the fingerprint can write.
    #[error("{field}: {message}")]
    Default {
        /// `Struct.field`.
        field: String,
        /// Why.
        message: String,
    },
    /// A struct whose `rename` option is a mode msgspec does not have.
    #[error("{0}")]
    Rename(crate::codec::CompileError),
    /// An alias whose definition comes back to itself.
    #[error("alias `{0}` refers to itself")]
    SelfAlias(String),
    /// A type name the revision does not define.
    #[error("unknown type name `{0}`")]
    UnknownType(String),
}

/// What is wrong with a tagged-JSON value ([`HashError::Tagged`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaggedProblem {
    /// A JSON number that is neither a 64-bit integer nor a finite `f64`.
    #[error("number {0} is not representable")]
    NotRepresentable(String),
    /// A `$bytes` body that is not hex.
    #[error("not hex")]
    NotHex,
    /// An `$int` body that is not a decimal integer.
    #[error("{0:?} is not a decimal integer")]
    NotDecimal(String),
    /// A `$float` body other than `nan`, `inf`, `-inf`.
    #[error("{0:?} is not nan, inf or -inf")]
    NotSpecialFloat(String),
    /// A `$dict_items` element that is not a two-element array.
    #[error("expected a [key, value] pair")]
    NotPair,
    /// A tag body that should be an array.
    #[error("expected an array")]
    NotArray,
    /// A tag body that should be a string.
    #[error("expected a string")]
    NotString,
}

use sha2::{Digest, Sha256};

/// SHA-256 of `bytes`, raw.
pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// SHA-256 of `bytes` as 64 lowercase hex digits (`hashlib.sha256(b).hexdigest()`).
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha256(bytes))
}
