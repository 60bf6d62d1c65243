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

use sha2::{Digest, Sha256};

/// SHA-256 of `bytes`, raw.
pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// SHA-256 of `bytes` as 64 lowercase hex digits (`hashlib.sha256(b).hexdigest()`).
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha256(bytes))
}
