//! `mooncake-reference`: the reference Mooncake connector peer. The protocol lives in the sans-IO cores of
//! `mooncake_wire::proto`; this crate drives them over real ZeroMQ (a decoder's DEALERs through libzmq and
//! the `zmq` crate, a prefiller's ROUTER through its own ZMTP 3 server on one thread, [`router`]), HTTP
//! (axum) and a transfer backend that moves bytes — the I/O of `mooncake-io`, which it shares with the
//! conformance runner. The runner does not link this crate: it runs `mooncake-peer testee` as its built-in
//! testee and plays its own side of a case with the same cores and `mooncake-io`.
//!
//! The entry points: [`testee::Testee`], which answers the testee control protocol (`conformance/TESTEE.md`)
//! and is what `mooncake-peer` runs; [`prefiller::PrefillerPeer`] and [`decoder::DecoderPeer`], one running
//! role each, for tests that drive a peer directly; [`pull`], the pull family's roles (vllm-ascend's connector:
//! the decoder reads the prefiller's blocks); and [`faults::Fault`], the deliberate deviations that let the
//! runner's tests prove it catches them.
//!
//! ## Example
//!
//! A testee answers one command at a time with a JSON value, an error answer when it refuses (no socket is
//! opened here: the revision is checked before anything binds).
//!
//! ```
//! use mooncake_reference::testee::{hello, Testee};
//! use serde_json::json;
//!
//! // The first line a testee writes names the revisions it speaks.
//! assert!(hello().revisions.iter().any(|r| r == "vllm-0.33.0"));
//!
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let mut testee = Testee::default();
//! let answer = rt.block_on(testee.handle(&json!({"cmd": "start", "role": "bootstrap", "revision": "vllm-0.0.0"})));
//! assert_eq!(answer["ok"], false);
//! assert_eq!(answer["error"], "unsupported revision vllm-0.0.0");
//! assert_eq!(rt.block_on(testee.handle(&json!({"cmd": "stop"})))["ok"], true);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// The I/O modules live in `mooncake-io` (shared with the conformance runner); re-exported at their old paths.
// The layout helpers that were `config` are `mooncake_io::layout`.
pub use mooncake_io::{backend, engine, http, reactor};

pub mod decoder;
pub mod error;
pub mod faults;
pub mod prefiller;
pub mod pull;
pub mod records;
pub use mooncake_io::router;
pub mod testee;
pub mod zmtp;
