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
