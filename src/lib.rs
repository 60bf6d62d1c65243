//! # mooncake-wire
//!
//! The executable specification of the wire protocol spoken by vLLM's Mooncake KV-transfer connectors: a
//! prefiller and a decoder exchange MessagePack messages over ZeroMQ, find each other through a bootstrap HTTP
//! server, and move KV blocks with Mooncake's transfer engine (the prose: `spec/PROTOCOL.md#roles`).
//!
//! * [`spec`] — the machine-readable spec of every wire revision vLLM shipped (`spec/` in the repository);
//! * [`codec`] — a MessagePack codec driven by that spec, byte-identical to Python msgspec, for any revision
//!   (also one loaded at run time);
//! * [`typed`] — Rust structs for every message of every revision of both families, generated from `spec/` by
//!   `generate` (the generator, behind the feature of that name; its output is committed and checked for
//!   staleness by `tests/generated.rs`), decoding and encoding the same bytes as the spec-driven codec, faster;
//! * [`msgpack`] — the byte-level reader and writer underneath;
//! * [`limits`] — every resource limit of the decoder;
//! * [`proto`] — the sans-IO prefiller, decoder and bootstrap registry;
//! * [`bootstrap`] — checks bootstrap HTTP requests and responses against a revision;
//! * [`plan`] — the 0.33.0 prefiller's transfer planner (regions, TP byte plan, descriptors);
//! * [`hash`] — vLLM's `hash_factors`, the NIXL compatibility hash and the wire fingerprint;
//! * [`keys`] — MooncakeStoreConnector keys, vLLM's block-hash chain, vllm-ascend and LMCache key formats;
//! * [`diff`] — the wire-aware diff of two revisions (what breaks, in which direction);
//! * [`schema`] — the JSON Schema of every message;
//! * [`lookup`] — MooncakeStoreConnector's scheduler ⇄ worker lookup frames of every release;
//! * [`te`] — Mooncake Transfer Engine's P2P handshake and TCP transport framing (sans-IO).
//!
//! ## Example
//!
//! A prefiller's `FINISH` reply for one request, as vLLM 0.33.0 sends it (msgspec writes the struct as a map
//! and omits fields at their defaults), read with the spec-driven codec and with the generated struct:
//!
//! ```
//! use mooncake_wire::codec::Codec;
//! use mooncake_wire::typed::{MooncakeXferResponse, Status};
//!
//! // {"status": 0, "ok_reqs": ["req-0"]}
//! let bytes = b"\x82\xa6status\x00\xa7ok_reqs\x91\xa5req-0";
//!
//! // The spec-driven codec: any revision, by name; values come back as a generic tree.
//! let codec = Codec::builtin("vllm-0.33.0").expect("a built-in revision");
//! let value = codec.decode("MooncakeXferResponse", bytes)?;
//! assert_eq!(
//!     Codec::to_json(&value),
//!     serde_json::json!({"status": 0, "ok_reqs": ["req-0"], "err_reqs": null, "err_msg": null, "layout_id": 0})
//! );
//!
//! // The generated struct of the newest revision: the same message, typed.
//! let reply = MooncakeXferResponse::decode(bytes)?;
//! assert_eq!(reply.status, Status::FINISH);
//! assert_eq!(reply.ok_reqs.as_ref().map(|ids| ids.to_vec()), Some(vec!["req-0".to_string()]));
//! assert_eq!(reply.layout_id, mooncake_wire::msgpack::WireInt::ZERO);
//!
//! // Both encode it back to the same bytes.
//! assert_eq!(codec.encode("MooncakeXferResponse", &value)?, bytes);
//! assert_eq!(reply.encode(), bytes);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// Declares an item `pub` with the `testing` feature and `pub(crate)` without: internals that only tests and the
/// fuzz harness look at (the compiled plan of a codec, for instance).
macro_rules! testing_pub {
    ($(#[$attr:meta])* $kind:ident $($item:tt)*) => {
        #[cfg(feature = "testing")]
        $(#[$attr])* pub $kind $($item)*
        #[cfg(not(feature = "testing"))]
        $(#[$attr])* pub(crate) $kind $($item)*
    };
}

pub mod bootstrap;
pub mod codec;
pub mod diff;
#[cfg(feature = "generate")]
pub mod generate;
pub mod hash;
pub mod keys;
pub mod limits;
pub mod lookup;
pub mod msgpack;
pub mod plan;
pub mod proto;
#[cfg(feature = "generate")]
pub(crate) mod render;
pub mod schema;
pub mod spec;
pub mod te;
pub mod typed;
pub mod zmtp;
