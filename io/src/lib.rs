//! `mooncake-io`: the I/O both sides of a conformance case need, and no connector logic: the Mooncake
//! Transfer Engine's TCP transport ([`engine`]: initiator and target), the transfer backends over it
//! ([`backend`]), the bootstrap HTTP server and client ([`http`]), the ZeroMQ reactor ([`reactor`]: DEALERs,
//! REQs and a libzmq ROUTER), and what a worker builds from the layout of its role configuration
//! ([`layout`]: registered memory, a decoder's layout, a prefiller's planner). The reference peer
//! (`mooncake-reference`) drives the sans-IO cores of `mooncake_wire::proto` with them; the conformance runner
//! builds its side of a case from the same cores and these pieces, without linking the peer it judges.

pub mod backend;
pub mod engine;
pub mod http;
pub mod layout;
pub mod reactor;

/// Sleeps until a sans-IO core's next deadline (its `poll_timeout`), or forever when it has none: the timer
/// branch of the loop that drives a core.
pub async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
        None => std::future::pending().await,
    }
}
