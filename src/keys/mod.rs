//! MooncakeStoreConnector keys: vLLM's prefix-cache block-hash chain reproduced byte for byte (pickle
//! protocol 5 and canonical CBOR serializers), the store key of every vLLM release 0.21.0 → 0.33.0, and
//! vllm-ascend's and LMCache's key formats — built and parsed through grammars that are data in
//! `spec/store-keys/` (format `mooncake-store-keys/1`, documented in `spec/README.md`, "Store keys").

pub mod block_hash;
pub(crate) mod cbor;
pub mod grammar;
pub mod pickle;
pub mod spec;
pub mod store_layout;
pub mod typed;
pub mod vllm_key;

use crate::hash::PyError;

/// Why a block hash, a store key or a worker's key layout cannot be computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum KeysError {
    /// Python would raise in the reproduced code (`ValueError: ...`, `AssertionError: `, `KeyError: 3`).
    #[error(transparent)]
    Python(#[from] PyError),
    /// A hash algorithm vLLM offers that this crate does not implement.
    #[error("hash algorithm {0} (xxh3-128) is not implemented")]
    UnimplementedHash(String),
    /// A value pickle or CBOR cannot serialize (the serializer's text).
    #[error("{0}")]
    Serialize(String),
    /// The release seeds `NONE_HASH` with random bytes when `PYTHONHASHSEED` is unset.
    #[error(
        "vLLM {releases} uses os.urandom(32) as NONE_HASH when PYTHONHASHSEED is unset; set it to reproduce the chain"
    )]
    RandomSeed {
        /// The releases of the rule, `/`-joined.
        releases: String,
    },
    /// The store-key data has no grammar for the release.
    #[error(transparent)]
    NoGrammar(#[from] spec::NoGrammar),
    /// `spec/store-keys/vllm.toml` `[api]` does not list the helper.
    #[error("spec/store-keys/vllm.toml [api] does not list {0}")]
    UnknownApi(String),
    /// The store-key data has no chunk-hash rule for the release.
    #[error("no chunk-hash rule for vLLM {0}")]
    NoChunkHashRule(String),
    /// The store-key data has no block-hash rules for the release.
    #[error("no block-hash rules for vLLM {0}")]
    NoBlockHashRules(String),
    /// A size that must be positive is not.
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    /// A KV-cache group kind other than `attn`, `mla`, `mamba`.
    #[error("unknown group kind {0:?} (attn, mla, mamba)")]
    UnknownGroupKind(String),
    /// A KV-cache spec class vLLM 0.34.0 does not define.
    #[error("unknown KV-cache spec class {0:?}")]
    UnknownSpecClass(String),
    /// A torch dtype whose element size is not known here.
    #[error("unknown dtype {0:?}")]
    UnknownDtype(String),
    /// A KV-cache group without a spec (or a uniform group whose specs do not match its layers).
    #[error("a KV-cache group needs one spec, or one per layer when uniform")]
    EmptyGroup,
    /// A count too large to enumerate (ranks, shards, chunks; `store_layout::v034::MAX_RANKS`).
    #[error("{what}: {n} is more than this crate enumerates")]
    TooMany {
        /// What was counted.
        what: &'static str,
        /// How many.
        n: i64,
    },
    /// Something vLLM computes that this crate does not reproduce.
    #[error("not reproduced: {0}")]
    Unsupported(&'static str),
    /// A store key that cannot be built or parsed.
    #[error("key: {0}")]
    Key(#[from] vllm_key::KeyError),
}
