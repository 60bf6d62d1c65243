//! Transfer backends that really move bytes from the prefiller's registered memory into the decoder's:
//! Mooncake Transfer Engine's TCP transport ([`crate::engine`]; the decoder runs the engine's handshake
//! server on its "transfer-engine port", the `remote_port` it puts on the wire, and a data server the
//! handshake names) and, for tests, in-process (both peers in one process share a fabric).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mooncake_wire::proto::memory::{perform_write, Memory};
use mooncake_wire::proto::{Descriptor, WriteId};
use tokio::sync::mpsc;

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
    /// Makes a decoder's memory reachable under `session` (replacing whatever was registered there).
    pub fn register(&self, session: &str, mem: SharedMemory) {
        self.sessions.lock().expect("fabric").insert(session.to_string(), mem);
    }

    /// Forgets `session`: writes to it fail from now on.
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

/// A write a prefiller core asked for ([`mooncake_wire::proto::PrefillerEvent::Write`]), finished.
#[derive(Clone, Debug)]
pub struct WriteDone {
    /// The core's id of the write (for `write_complete`).
    pub id: WriteId,
    /// The engine's return code (0, or negative when it failed).
    pub ret: i64,
    /// The decoder's session (`host:port`).
    pub session: String,
    /// How many descriptors it had.
    pub descriptors: usize,
    /// How many bytes they cover.
    pub bytes: u64,
}

/// Runs a prefiller core's writes with a [`Backend`] on the tokio runtime it was made on, from the core's
/// registered memory, and reports each finished write on a channel. For tests of a peer, the next writes can
/// be made to fail without moving bytes (a failing transfer engine).
pub struct Writer {
    backend: Backend,
    memory: SharedMemory,
    done: mpsc::UnboundedSender<WriteDone>,
    rt: tokio::runtime::Handle,
    /// (writes left to fail, the return code they report).
    fail_next: (usize, i64),
}

impl Writer {
    /// A writer from `memory` through `backend`, and the channel its finished writes arrive on. Must be called
    /// within a tokio runtime (the writes run on it).
    pub fn new(backend: Backend, memory: SharedMemory) -> (Writer, mpsc::UnboundedReceiver<WriteDone>) {
        let (done, rx) = mpsc::unbounded_channel();
        (Writer { backend, memory, done, rt: tokio::runtime::Handle::current(), fail_next: (0, 0) }, rx)
    }

    /// The next `n` writes report `ret` without moving bytes.
    pub fn fail_next(&mut self, n: usize, ret: i64) {
        self.fail_next = (n, ret);
    }

    /// Starts a write of `descriptors` into `session`; its [`WriteDone`] comes on the channel.
    pub fn start(&mut self, id: WriteId, session: String, descriptors: Vec<Descriptor>) {
        let (n, bytes) = (descriptors.len(), descriptors.iter().map(|d| d.len).sum::<u64>());
        let forced = (self.fail_next.0 > 0).then(|| {
            self.fail_next.0 -= 1;
            self.fail_next.1
        });
        let (backend, memory, done) = (self.backend.clone(), self.memory.clone(), self.done.clone());
        self.rt.spawn(async move {
            let ret = match forced {
                Some(r) => r,
                None => backend.write(&memory, &session, &descriptors).await,
            };
            let _ = done.send(WriteDone { id, ret, session, descriptors: n, bytes });
        });
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
