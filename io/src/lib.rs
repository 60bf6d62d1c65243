//! `mooncake-io`: the I/O both sides of a conformance case need, and no connector logic: the Mooncake
//! Transfer Engine's TCP transport ([`engine`]: initiator and target), the transfer backends over it
//! ([`backend`]), the bootstrap HTTP server and client ([`http`]), the ZeroMQ reactor ([`reactor`]: DEALERs,
//! REQs and a libzmq ROUTER), and what a worker builds from the layout of its role configuration
//! ([`layout`]: registered memory, a decoder's layout, a prefiller's planner). The reference peer
//! (`mooncake-reference`) drives the sans-IO cores of `mooncake_wire::proto` with them; the conformance runner
//! builds its side of a case from the same cores and these pieces, without linking the peer it judges.
//!
//! The entry points: [`backend::Backend`] (and [`backend::Writer`], which runs a prefiller core's writes with
//! one), [`engine::EngineClient`] and [`engine::serve`] for the transfer engine's two ends,
//! [`http::BootstrapServer`] and [`http::request`], [`reactor::Reactor`], and [`layout::producer`].
//!
//! ## Example
//!
//! A prefiller's write through the in-process backend: the decoder's registered memory is reachable on a
//! [`backend::Fabric`] under its session name, and one descriptor copies 4 bytes into it.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//!
//! use mooncake_io::backend::{Backend, Fabric};
//! use mooncake_wire::proto::memory::Memory;
//! use mooncake_wire::proto::Descriptor;
//!
//! let mut src = Memory::default();
//! src.register(0x1000, 16, |i| i as u8);
//! let mut dst = Memory::default();
//! dst.register(0x8000, 16, |_| 0);
//! let (src, dst) = (Arc::new(Mutex::new(src)), Arc::new(Mutex::new(dst)));
//!
//! let fabric = Fabric::default();
//! fabric.register("127.0.0.1:17000", dst.clone());
//! let backend = Backend::InProcess(fabric);
//!
//! let copy = [Descriptor { src: 0x1004, dst: 0x8008, len: 4 }];
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! assert_eq!(rt.block_on(backend.write(&src, "127.0.0.1:17000", &copy)), 0);
//! assert_eq!(dst.lock().unwrap().read(0x8008, 4), Some(&[4u8, 5, 6, 7][..]));
//!
//! // A session nobody registered: the engine's failure code, nothing moves.
//! assert_eq!(rt.block_on(backend.write(&src, "127.0.0.1:17001", &copy)), -1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod admission;
pub mod backend;
pub mod engine;
pub mod http;
pub mod interrupted;
pub mod layout;
pub mod reactor;
pub mod router;

/// Locks `m`, taking the value over from a thread that panicked while holding it: every value kept under a
/// lock here is whole between statements, so a panic elsewhere does not make it wrong.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sleeps until a sans-IO core's next deadline (its `poll_timeout`), or forever when it has none: the timer
/// branch of the loop that drives a core.
pub async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
        None => std::future::pending().await,
    }
}
