//! Both transfer backends move exactly the described bytes into the decoder's registered memory and nothing
//! else; a write that falls outside it, or to an unknown session, fails with -1. The in-process fabric then
//! changes nothing; the transfer engine (like Mooncake's) treats each descriptor as a request of its own: the
//! refused one writes nothing, the others land.

use std::sync::{Arc, Mutex};

use mooncake_reference::backend::{serve_engine, Backend, Fabric, SharedMemory};
use mooncake_wire::proto::memory::Memory;
use mooncake_wire::proto::Descriptor;

const SRC: u64 = 0x7000_0000;
const DST: u64 = 0x9000_0000;
const LEN: usize = 4096;

fn memories() -> (SharedMemory, SharedMemory) {
    let mut src = Memory::default();
    src.register(SRC, LEN, |i| (i % 251) as u8 + 1);
    let mut dst = Memory::default();
    dst.register(DST, LEN, |_| 0);
    (Arc::new(Mutex::new(src)), Arc::new(Mutex::new(dst)))
}

/// The decoder's region equals `want`; on a difference, says where.
fn same(dst: &SharedMemory, want: &[u8], what: &str) {
    let m = dst.lock().unwrap();
    let got = m.region(DST).unwrap();
    if let Some(i) = (0..LEN).find(|&i| got[i] != want[i]) {
        panic!("{what}: byte {i} is {}, expected {}", got[i], want[i]);
    }
}

/// Runs the same writes through `backend` into `dst` (reachable as `session`).
async fn exercise(backend: Backend, session: &str, src: &SharedMemory, dst: &SharedMemory, per_request: bool) {
    let ds =
        [Descriptor { src: SRC + 10, dst: DST + 1000, len: 300 }, Descriptor { src: SRC + 2000, dst: DST, len: 17 }];
    assert_eq!(backend.write(src, session, &ds).await, 0);
    let mut want = vec![0u8; LEN];
    for d in &ds {
        for k in 0..d.len as usize {
            want[(d.dst - DST) as usize + k] = (((d.src - SRC) as usize + k) % 251) as u8 + 1;
        }
    }
    same(dst, &want, "exactly the described bytes, nothing else");

    // One descriptor past the end of the registered region: the whole write fails and nothing changes.
    let bad =
        [Descriptor { src: SRC, dst: DST + 3000, len: 8 }, Descriptor { src: SRC, dst: DST + LEN as u64 - 4, len: 8 }];
    assert_eq!(backend.write(src, session, &bad).await, -1);
    if per_request {
        want[3000..3008].copy_from_slice(&(0..8).map(|k| (k % 251) as u8 + 1).collect::<Vec<_>>());
    }
    same(dst, &want, "nothing of the refused descriptor written");
    // A source range the prefiller did not register.
    assert_eq!(backend.write(src, session, &[Descriptor { src: SRC - 8, dst: DST, len: 8 }]).await, -1);
    same(dst, &want, "unchanged after a failed write");
}

#[tokio::test]
async fn the_in_process_fabric_moves_exactly_the_described_bytes() {
    let (src, dst) = memories();
    let fabric = Fabric::default();
    fabric.register("127.0.0.1:17001", dst.clone());
    exercise(Backend::InProcess(fabric.clone()), "127.0.0.1:17001", &src, &dst, false).await;
    // An unknown session (a decoder that went away) is an error, not a panic.
    fabric.unregister("127.0.0.1:17001");
    let before = dst.lock().unwrap().region(DST).unwrap().to_vec();
    assert_eq!(
        Backend::InProcess(fabric).write(&src, "127.0.0.1:17001", &[Descriptor { src: SRC, dst: DST, len: 8 }]).await,
        -1
    );
    assert_eq!(dst.lock().unwrap().region(DST).unwrap(), &before[..]);
}

#[tokio::test]
async fn the_tcp_engine_backend_moves_exactly_the_described_bytes() {
    let (src, dst) = memories();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let session = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(serve_engine(listener, dst.clone()));
    exercise(Backend::tcp_engine(), &session, &src, &dst, true).await;
    server.abort();
    // Nobody listening any more: -1 within the backend's timeout.
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(40),
        Backend::tcp_engine().write(&src, &session, &[Descriptor { src: SRC, dst: DST, len: 8 }]),
    )
    .await
    .unwrap();
    assert_eq!(r, -1);
}
