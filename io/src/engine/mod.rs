//! Mooncake Transfer Engine's TCP transport over tokio: the wire of `mooncake_wire::te` on real sockets.
//!
//! * [`target`] — a handshake server (RPC port) and a data server that writes into registered memory,
//!   refusing any range outside it with the engine's rejection status (nothing is written);
//! * [`client`] — an initiator: handshake (descriptor cached per segment), then requests over a small pool of
//!   connections per peer.
//!
//! Interoperates with the real engine (pip `mooncake-transfer-engine-non-cuda`), both directions: see
//! `reference-impl/tests/suite/engine_interop.rs`.

pub mod client;
pub mod strict;
pub mod target;

pub use client::{EngineClient, TransferError};
pub use strict::{Issue, Step};
pub use target::{serve, serve_edited, serve_logged, AnswerEdit, EngineTarget, HandshakeError, PeerLog};

/// A peer's registered memory, shared by the connector core and the engine target that writes into it.
pub type SharedMemory = std::sync::Arc<std::sync::Mutex<mooncake_wire::proto::memory::Memory>>;

/// Bound on each handshake exchange (the engine's daemon uses a 5 s receive timeout).
pub(crate) const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Bound on one data request once its header is sent or received.
pub(crate) const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// A data connection with no request for this long is closed by the target.
pub(crate) const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The engine's timestamp format (`YYYY-mm-dd HH:MM:SS.ffffff`, UTC here).
pub(crate) fn timestamp() -> String {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:06}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}
