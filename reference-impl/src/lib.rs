//! `mooncake-reference`: the reference Mooncake connector peer. The protocol lives in the sans-IO cores of
//! `mooncake_wire::proto`; this crate drives them over real ZeroMQ (libzmq via the `zmq` crate), HTTP (axum)
//! and a transfer backend that moves bytes — the I/O of `mooncake-io`, which it shares with the conformance
//! runner.

// The I/O modules live in `mooncake-io` (shared with the conformance runner); re-exported at their old paths.
pub use mooncake_io::{backend, engine, http, reactor};

pub mod config;
pub mod decoder;
pub mod faults;
pub mod prefiller;
pub mod records;
pub mod testee;
