//! # mooncake-wire
//!
//! The executable specification of the wire protocol spoken by vLLM's Mooncake KV-transfer connectors.
//!
//! * [`spec`] — the machine-readable spec of every wire revision vLLM shipped (`spec/` in the repository);
//! * [`codec`] — a MessagePack codec driven by that spec, byte-identical to Python msgspec;
//! * [`typed`] — structs for every revision of both families, generated from the spec ([`generate`]) and proven
//!   equal to the spec-driven codec by a test;
//! * [`msgpack`] — the byte-level reader and writer underneath;
//! * [`limits`] — every resource limit of the decoder;
//! * [`plan`] — the 0.33.0 prefiller's transfer planner (regions, TP byte plan, descriptors);
//! * [`hash`] — vLLM's `hash_factors`, the NIXL compatibility hash and the wire fingerprint;
//! * [`keys`] — MooncakeStoreConnector keys, vLLM's block-hash chain, vllm-ascend and LMCache key formats;
//! * [`diff`] — the wire-aware diff of two revisions (what breaks, in which direction);
//! * [`lookup`] — MooncakeStoreConnector's scheduler ⇄ worker lookup frames of every release.
//! * [`te`] — Mooncake Transfer Engine's P2P handshake and TCP transport framing (sans-IO).

pub mod bootstrap;
pub mod codec;
pub mod diff;
pub mod generate;
pub mod hash;
pub mod keys;
pub mod limits;
pub mod lookup;
pub mod msgpack;
pub mod plan;
pub mod proto;
pub mod render;
pub mod schema;
pub mod spec;
pub mod te;
pub mod typed;
