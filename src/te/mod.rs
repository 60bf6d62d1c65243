//! Mooncake Transfer Engine's wire as a peer observes it in P2P-handshake mode over TCP (sans-IO).
//!
//! Two connections per peer pair, both opened by the initiator:
//! * [`handshake`] — one framed JSON segment descriptor each way on the target's RPC port;
//! * [`data`] — the TCP transport's per-request header, payload and (version 2) status acknowledgement on the
//!   target's data port, which the descriptor names.
//!
//! The facts, with their sources (Mooncake release and file), are in `spec/transfer-engine/mooncake.toml`,
//! loaded by a test-only module; tests check that the constants here are the spec's. Nothing here touches a socket: the
//! reference peer (`mooncake-reference`, module `engine`) drives these types over tokio.

pub mod audit;
pub mod data;
pub mod handshake;
pub(crate) mod segment;
#[cfg(test)]
mod spec;

pub use segment::{BufferDesc, SegmentDesc, SegmentError};
