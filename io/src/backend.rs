//! Transfer backends that really move bytes from the prefiller's registered memory into the decoder's:
//! Mooncake Transfer Engine's TCP transport ([`crate::engine`]; the decoder runs the engine's handshake
//! server on its "transfer-engine port", the `remote_port` it puts on the wire, and a data server the
//! handshake names) and, for tests, in-process (both peers in one process share a fabric).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mooncake_wire::proto::memory::{perform_write, Memory};
use mooncake_wire::proto::Descriptor;

use crate::engine::client::Request;
use crate::engine::EngineClient;

pub use crate::engine::serve as serve_engine;

pub use crate::engine::SharedMemory;

/// Decoders' memories by session name (`host:port`), for peers in one process.
#[derive(Clone, Default)]
pub struct Fabric {
    sessions: Arc<Mutex<HashMap<String, SharedMemory>>>,
}

impl Fabric {
    pub fn register(&self, session: &str, mem: SharedMemory) {
        self.sessions.lock().expect("fabric").insert(session.to_string(), mem);
    }
    pub fn unregister(&self, session: &str) {
        self.sessions.lock().expect("fabric").remove(session);
    }
    fn get(&self, session: &str) -> Option<SharedMemory> {
        self.sessions.lock().expect("fabric").get(session).cloned()
    }
}

/// How a prefiller's writes reach a decoder.
#[derive(Clone)]
pub enum Backend {
    /// In-process fabric (tests).
    InProcess(Fabric),
    /// Mooncake Transfer Engine's TCP transport (`--transfer tcp-engine`, the default).
    TcpEngine(EngineClient),
}

impl Backend {
    /// The transfer engine's TCP transport with a connection pool of its own.
    pub fn tcp_engine() -> Backend {
        Backend::TcpEngine(EngineClient::new())
    }

    /// Copies `descriptors` from `src` into the decoder `session`; returns the engine's return code (0, or -1
    /// when anything failed — with the engine, a refused range writes nothing of that request).
    pub async fn write(&self, src: &SharedMemory, session: &str, descriptors: &[Descriptor]) -> i64 {
        match self {
            Backend::InProcess(f) => match f.get(session) {
                Some(dst) => {
                    let src = src.lock().expect("memory").clone_view(descriptors);
                    let mut dst = dst.lock().expect("memory");
                    perform_write(&src, &mut dst, descriptors)
                }
                None => -1,
            },
            Backend::TcpEngine(c) => {
                let reqs: Option<Vec<Request>> = {
                    let m = src.lock().expect("memory");
                    descriptors
                        .iter()
                        .map(|d| m.read(d.src, d.len).map(|b| Request::Write { addr: d.dst, data: b.to_vec() }))
                        .collect()
                };
                match reqs {
                    Some(reqs) => match c.transfer(session, reqs).await {
                        Ok(_) => 0,
                        Err(e) => {
                            tracing::warn!("transfer to {session}: {e}");
                            -1
                        }
                    },
                    None => -1,
                }
            }
        }
    }
}

trait CloneView {
    fn clone_view(&self, ds: &[Descriptor]) -> Memory;
}
impl CloneView for Memory {
    /// The source ranges of `ds` only (so the source lock is not held while writing).
    fn clone_view(&self, ds: &[Descriptor]) -> Memory {
        let mut m = Memory::default();
        for d in ds {
            if let Some(b) = self.read(d.src, d.len) {
                let b = b.to_vec();
                m.register(d.src, b.len(), |i| b[i]);
            }
        }
        m
    }
}
