//! ZMTP 3 wire pieces: `mooncake_wire::zmtp`, re-exported where the router, its tests and the round-trip
//! benchmark's load generator have always found them.

pub use mooncake_wire::zmtp::*;
