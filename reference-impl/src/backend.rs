//! Transfer backends that really move bytes from the prefiller's registered memory into the decoder's:
//! in-process (both peers in one process share a fabric) and over TCP on 127.0.0.1 (the decoder runs a small
//! write server on its "transfer-engine port", which is what it puts on the wire as `remote_port`).
//!
//! TCP write protocol (ours; Mooncake's TransferEngine is not reimplemented): request = `b"MCWR"`, u32 count,
//! then per descriptor u64 dst, u32 len, len bytes; reply = i64 return code (0 = written, -1 = a
//! destination outside the registered memory, in which case nothing is written). All big-endian.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_wire::limits;
use mooncake_wire::proto::memory::{perform_write, Memory};
use mooncake_wire::proto::Descriptor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub type SharedMemory = Arc<Mutex<Memory>>;

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

#[derive(Clone)]
pub enum Backend {
    InProcess(Fabric),
    Tcp,
}

impl Backend {
    /// Copies `descriptors` from `src` into the decoder `session`; returns the engine's return code.
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
            Backend::Tcp => tcp_write(src, session, descriptors).await.unwrap_or(-1),
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

async fn tcp_write(src: &SharedMemory, session: &str, ds: &[Descriptor]) -> Result<i64, String> {
    let mut buf = Vec::with_capacity(8 + ds.iter().map(|d| 12 + d.len as usize).sum::<usize>());
    buf.extend_from_slice(b"MCWR");
    buf.extend_from_slice(&(ds.len() as u32).to_be_bytes());
    {
        let m = src.lock().expect("memory");
        for d in ds {
            let bytes = m.read(d.src, d.len).ok_or("source range is not registered")?;
            buf.extend_from_slice(&d.dst.to_be_bytes());
            buf.extend_from_slice(&(d.len as u32).to_be_bytes());
            buf.extend_from_slice(bytes);
        }
    }
    let io = async {
        let mut s = TcpStream::connect(session).await.map_err(|e| e.to_string())?;
        s.write_all(&buf).await.map_err(|e| e.to_string())?;
        let mut rc = [0u8; 8];
        s.read_exact(&mut rc).await.map_err(|e| e.to_string())?;
        Ok::<i64, String>(i64::from_be_bytes(rc))
    };
    tokio::time::timeout(Duration::from_secs(30), io).await.map_err(|_| "transfer timed out".to_string())?
}

/// Serves writes into `mem` on `listener` until the task is dropped. Malformed or out-of-range requests are
/// answered -1 and change nothing.
pub async fn serve_tcp(listener: TcpListener, mem: SharedMemory) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else { continue };
        let mem = mem.clone();
        tokio::spawn(async move {
            let rc = match tokio::time::timeout(Duration::from_secs(30), read_request(&mut s, &mem)).await {
                Ok(Ok(chunks)) => {
                    let mut m = mem.lock().expect("memory");
                    for (dst, bytes) in &chunks {
                        m.write(*dst, bytes);
                    }
                    0i64
                }
                _ => -1,
            };
            let _ = s.write_all(&rc.to_be_bytes()).await;
        });
    }
}

async fn read_request(s: &mut TcpStream, mem: &SharedMemory) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let mut head = [0u8; 8];
    s.read_exact(&mut head).await.map_err(|e| e.to_string())?;
    if &head[..4] != b"MCWR" {
        return Err("bad magic".into());
    }
    let n = u32::from_be_bytes(head[4..].try_into().expect("4 bytes")) as usize;
    let mut chunks = Vec::new();
    let mut total = 0usize;
    for _ in 0..n {
        let mut d = [0u8; 12];
        s.read_exact(&mut d).await.map_err(|e| e.to_string())?;
        let dst = u64::from_be_bytes(d[..8].try_into().expect("8 bytes"));
        let len = u32::from_be_bytes(d[8..].try_into().expect("4 bytes")) as usize;
        total += len;
        // Checked before reading the bytes: the range must be registered, so a declared length cannot make
        // us allocate more than the registered memory.
        if total > limits::MAX_TRANSFER_BYTES || mem.lock().expect("memory").locate(dst, len as u64).is_none() {
            return Err(format!("write of {len} bytes at {dst:#x} is outside the registered memory"));
        }
        let mut bytes = vec![0u8; len];
        s.read_exact(&mut bytes).await.map_err(|e| e.to_string())?;
        chunks.push((dst, bytes));
    }
    Ok(chunks)
}
