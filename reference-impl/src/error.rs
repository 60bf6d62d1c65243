//! [`PeerError`]: why a reference peer could not start or answer.

use mooncake_io::http::HttpError;
use mooncake_io::reactor::ReactorError;

use crate::router::RouterError;

/// Why a prefiller or decoder peer could not start, or could not answer a request about its state.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The prefiller's ROUTER could not be bound or served.
    #[error(transparent)]
    Router(#[from] RouterError),
    /// The decoder's ZeroMQ reactor could not start.
    #[error(transparent)]
    Reactor(#[from] ReactorError),
    /// Registering with the bootstrap server failed (after vLLM's retries).
    #[error("bootstrap registration: {0}")]
    Bootstrap(#[from] HttpError),
    /// A lease duration the revision cannot take.
    #[error(transparent)]
    Lease(#[from] mooncake_wire::proto::LeaseError),
    /// The peer's task has stopped (it was dropped, or it panicked), so it cannot answer.
    #[error("the {0} stopped")]
    Stopped(&'static str),
    /// [`crate::decoder::DecoderPeer::wait_settled`]: the requests did not settle in time.
    #[error("requests not settled within {timeout:?}: {status}")]
    NotSettled {
        /// How long it waited.
        timeout: std::time::Duration,
        /// The decoder's status when it gave up (its `Debug` form).
        status: String,
    },
}

/// A fault name [`crate::faults::Fault::parse`] does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown fault {0:?}")]
pub struct UnknownFault(pub String);
