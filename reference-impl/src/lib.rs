//! `mooncake-reference`: the reference Mooncake connector peer. The protocol lives in the sans-IO cores of
//! `mooncake_wire::proto`; this crate drives them over real ZeroMQ (a decoder's DEALERs through libzmq and
//! the `zmq` crate, a prefiller's ROUTER through its own ZMTP 3 server on one thread, [`router`]), HTTP
//! (axum) and a transfer backend that moves bytes — the I/O of `mooncake-io`, which it shares with the
//! conformance runner. The runner does not link this crate: it runs `mooncake-peer testee` as its built-in
//! testee and plays its own side of a case with the same cores and `mooncake-io`.

// The I/O modules live in `mooncake-io` (shared with the conformance runner); re-exported at their old paths.
// The layout helpers that were `config` are `mooncake_io::layout`.
pub use mooncake_io::{backend, engine, http, reactor};

pub mod decoder;
pub mod faults;
pub mod prefiller;
pub mod records;
pub mod router;
pub mod testee;
pub mod zmtp;
