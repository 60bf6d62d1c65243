//! The reference peer's Transfer Engine transport against the real engine (pip
//! `mooncake-transfer-engine-non-cuda`, pinned in tests/store/requirements.txt), both directions, byte for
//! byte: single and batched writes, reads, out-of-range writes refused (nothing written), a target restarted
//! on the same ports. Only 127.0.0.1 is ever connected to (the engine itself listens on all interfaces).
//! Skipped, with a `SKIPPED:` line, only when the engine package cannot be imported.

use std::sync::{Arc, Mutex};

use crate::engine::{available, pattern, Engine};
use mooncake_reference::backend::SharedMemory;
use mooncake_reference::engine::client::Request;
use mooncake_reference::engine::{EngineClient, EngineTarget, TransferError};
use mooncake_wire::proto::memory::Memory;

const LEN: usize = 256 * 1024;
/// The Rust target's region: a virtual address, as the decoder advertises in kv_caches_base_addr.
const BASE: u64 = 0x7f00_0000_0000;

fn skip() -> bool {
    match available() {
        Ok(()) => false,
        Err(why) => {
            println!("SKIPPED: real Transfer Engine interop — {why}");
            true
        }
    }
}

/// A target on ports a dropped one held: its listeners close once its aborted tasks are dropped, which the
/// runtime does asynchronously, so binding is retried for up to 2 s (as a restarted process would find them).
async fn bind_again(rpc: u16, data: u16, mem: SharedMemory) -> EngineTarget {
    for _ in 0..100 {
        if let Ok(t) = EngineTarget::bind("127.0.0.1", rpc, data, mem.clone()).await {
            return t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("ports {rpc}/{data} still in use 2 s after the target was dropped");
}

fn zeroed() -> SharedMemory {
    let mut m = Memory::default();
    m.register(BASE, LEN, |_| 0);
    Arc::new(Mutex::new(m))
}

fn region(m: &SharedMemory) -> Vec<u8> {
    m.lock().unwrap().region(BASE).unwrap().to_vec()
}

/// Where two buffers first differ (for a readable failure).
fn same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("{what}: byte {i} is {:#04x}, expected {:#04x}", got[i], want[i]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_initiator_to_the_real_engine() {
    if skip() {
        return;
    }
    let mut e = Engine::start();
    let dst = e.alloc(LEN, None);
    let src = e.alloc(LEN, Some(5));
    let c = EngineClient::new();
    let seg = c.segment(&e.session).await.expect("handshake with the engine");
    assert!(seg.acknowledged(), "the pinned engine advertises tcp_proto_version >= 2: {seg:?}");
    assert!(seg.buffers.iter().any(|b| b.addr == dst && b.length == LEN as u64), "{seg:?}");
    let mut want = vec![0u8; LEN];

    // A single write lands exactly.
    let data = pattern(4096, 9);
    c.transfer(&e.session, vec![Request::Write { addr: dst + 100, data: data.clone() }]).await.expect("write");
    want[100..4196].copy_from_slice(&data);
    same(&e.bytes(dst, LEN), &want, "single write");

    // A batch over several connections.
    let batch: Vec<(usize, Vec<u8>)> = (0..9).map(|k| (8192 + k * 20_000, pattern(1000 + k * 997, k as u8))).collect();
    let reqs = batch.iter().map(|(o, d)| Request::Write { addr: dst + *o as u64, data: d.clone() }).collect();
    c.transfer(&e.session, reqs).await.expect("batched write");
    for (o, d) in &batch {
        want[*o..*o + d.len()].copy_from_slice(d);
    }
    same(&e.bytes(dst, LEN), &want, "batched writes");

    // Reads.
    let got = c
        .transfer(&e.session, vec![Request::Read { addr: src + 7, len: 5000 }, Request::Read { addr: src, len: 3 }])
        .await
        .expect("read");
    same(&got[0], &pattern(LEN, 5)[7..5007], "read");
    same(&got[1], &pattern(3, 5), "second read");

    // Out of range: refused with the engine's status, nothing written; the next transfer works again.
    for (addr, n) in [(dst + LEN as u64 - 4, 8usize), (0x10, 8), (dst - 1, 2)] {
        let r = c.transfer(&e.session, vec![Request::Write { addr, data: vec![0xee; n] }]).await;
        assert_eq!(r, Err(TransferError::Rejected { addr, size: n as u64 }), "write of {n} at {addr:#x}");
    }
    same(&e.bytes(dst, LEN), &want, "after refused writes");
    c.transfer(&e.session, vec![Request::Write { addr: dst, data: vec![1, 2, 3] }]).await.expect("after a refusal");
    want[..3].copy_from_slice(&[1, 2, 3]);
    same(&e.bytes(dst, LEN), &want, "after a refusal");
}

/// The conformance runner's strict client finds nothing to report in the real engine's own handshake answer
/// (what `TE-DESCRIPTOR` compares with is what a real target writes), writes inside its buffers, and refuses,
/// before sending, a write past the end of the buffer the real target advertised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_strict_client_accepts_the_real_engines_descriptor() {
    if skip() {
        return;
    }
    let mut e = Engine::start();
    let dst = e.alloc(LEN, None);
    let c = EngineClient::strict();
    c.transfer(&e.session, vec![Request::Write { addr: dst, data: pattern(LEN, 3) }]).await.expect("write");
    same(&e.bytes(dst, LEN), &pattern(LEN, 3), "strict write");
    assert_eq!(c.issues(), vec![], "the real engine's descriptor as the strict client sees it");
    let past = c.transfer(&e.session, vec![Request::Write { addr: dst + 8, data: vec![1; LEN] }]).await;
    assert!(matches!(&past, Err(TransferError::Uncovered(m)) if m.contains("does not cover")), "{past:?}");
    same(&e.bytes(dst, LEN), &pattern(LEN, 3), "after the refused write");
    assert_eq!(c.issues().len(), 1, "{:?}", c.issues());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_engine_initiator_to_the_rust_target() {
    if skip() {
        return;
    }
    let mut e = Engine::start();
    let src = e.alloc(LEN, Some(11));
    let back = e.alloc(LEN, None);
    let mem = zeroed();
    let t = EngineTarget::bind("127.0.0.1", 0, 0, mem.clone()).await.unwrap();
    let (rpc, data) = (t.rpc.port(), t.data.port());
    let session = t.session();
    let mut want = vec![0u8; LEN];
    let srcp = pattern(LEN, 11);

    // Single write.
    assert_eq!(e.transfer("write", &session, src + 3, BASE + 10, 70_000).0, 0);
    want[10..70_010].copy_from_slice(&srcp[3..70_003]);
    same(&region(&mem), &want, "engine write");

    // Batched writes.
    let reqs: Vec<(u64, u64, usize)> =
        (0..8u64).map(|k| (src + k * 1000, BASE + 100_000 + k * 15_000, 9000 + k as usize)).collect();
    assert_eq!(e.batch("batch_write", &session, &reqs), 0);
    for (l, r, n) in &reqs {
        let (l, r) = ((l - src) as usize, (r - BASE) as usize);
        want[r..r + n].copy_from_slice(&srcp[l..l + n]);
    }
    same(&region(&mem), &want, "engine batched writes");

    // Reads from the Rust target into the engine's memory.
    assert_eq!(e.transfer("read", &session, back, BASE + 100_000, 30_000).0, 0);
    same(&e.bytes(back, 30_000), &want[100_000..130_000], "engine read");

    // Out of range: the engine reports failure, nothing is written.
    for (remote, n) in [(BASE + LEN as u64 - 4, 8usize), (BASE - 8, 16), (0x1000, 8)] {
        let (rc, _) = e.transfer("write", &session, src, remote, n);
        assert!(rc < 0, "write of {n} at {remote:#x} was accepted (rc {rc})");
    }
    same(&region(&mem), &want, "after refused writes");

    // The target restarts on the same ports with fresh memory; the engine's next writes land there.
    drop(t);
    let mem2 = zeroed();
    let t2 = bind_again(rpc, data, mem2.clone()).await;
    let mut landed = false;
    for _ in 0..3 {
        // The engine may first see its pooled connection to the old process fail.
        if e.transfer("write", &t2.session(), src, BASE, 4096).0 == 0 {
            landed = true;
            break;
        }
    }
    assert!(landed, "the engine could not write to the restarted target");
    let mut want2 = vec![0u8; LEN];
    want2[..4096].copy_from_slice(&srcp[..4096]);
    same(&region(&mem2), &want2, "restarted target");
}

/// A target restarted on the same RPC port with another data port: the client notices the dead connection,
/// handshakes again and the batch lands (the real engine's RPC port cannot be chosen, so this is Rust ↔ Rust).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_target_is_handshaken_again() {
    let mem = zeroed();
    let t = EngineTarget::bind("127.0.0.1", 0, 0, mem.clone()).await.unwrap();
    let (session, rpc) = (t.session(), t.rpc.port());
    let c = EngineClient::new();
    c.transfer(&session, vec![Request::Write { addr: BASE, data: vec![7; 64] }]).await.unwrap();
    drop(t);
    let mem2 = zeroed();
    let _t2 = bind_again(rpc, 0, mem2.clone()).await;
    c.transfer(&session, vec![Request::Write { addr: BASE + 64, data: vec![8; 64] }]).await.unwrap();
    let r = region(&mem2);
    assert!(r[..64].iter().all(|&b| b == 0) && r[64..128].iter().all(|&b| b == 8));
}

/// Throughput of one warm write of 1 MiB and of 64 MiB: the real engine to the real engine, the Rust client to
/// the Rust target, and each against the other. Opt-in (`scripts/engine-bench.sh`); nothing is asserted about
/// speed, only that every write lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: scripts/engine-bench.sh"]
async fn throughput() {
    if skip() {
        return;
    }
    const MIB: usize = 1 << 20;
    let rounds = |size: usize| if size == MIB { 50 } else { 5 };
    let report = |what: &str, size: usize, secs: &mut Vec<f64>| {
        secs.sort_by(f64::total_cmp);
        let med = secs[secs.len() / 2];
        println!(
            "BENCH {what:<34} {:>3} MiB  median {:>8.2} ms  {:>7.0} MB/s  (best {:.2} ms, {} writes)",
            size / MIB,
            med * 1e3,
            size as f64 / med / 1e6,
            secs[0] * 1e3,
            secs.len()
        );
    };
    let mut a = Engine::start();
    let mut b = Engine::start();
    let big = 64 * MIB;
    let a_src = a.alloc(big, Some(1));
    let a_dst = a.alloc(big, None);
    let b_dst = b.alloc(big, None);
    let mut rmem = Memory::default();
    rmem.register(BASE, big, |_| 0);
    let rmem: SharedMemory = Arc::new(Mutex::new(rmem));
    let t = EngineTarget::bind("127.0.0.1", 0, 0, rmem.clone()).await.unwrap();
    let rust_t = t.session();
    let data = pattern(big, 1);
    for size in [MIB, big] {
        // Real engine → real engine.
        let mut s = vec![];
        a.transfer("write", &b.session, a_src, b_dst, size);
        for _ in 0..rounds(size) {
            let (rc, secs) = a.transfer("write", &b.session, a_src, b_dst, size);
            assert_eq!(rc, 0);
            s.push(secs);
        }
        report("engine -> engine", size, &mut s);
        // Real engine → Rust target.
        let mut s = vec![];
        a.transfer("write", &rust_t, a_src, BASE, size);
        for _ in 0..rounds(size) {
            let (rc, secs) = a.transfer("write", &rust_t, a_src, BASE, size);
            assert_eq!(rc, 0);
            s.push(secs);
        }
        report("engine -> Rust target", size, &mut s);
        assert!(region_prefix(&rmem, size) == data[..size], "engine -> Rust: bytes");
        // Rust client → real engine, and → Rust target.
        for (what, session, addr) in
            [("Rust client -> engine", &b.session, b_dst), ("Rust client -> Rust target", &rust_t, BASE)]
        {
            let c = EngineClient::new();
            let mut s = vec![];
            for i in 0..=rounds(size) {
                let reqs = vec![Request::Write { addr, data: data[..size].to_vec() }];
                let start = std::time::Instant::now();
                c.transfer(session, reqs).await.expect("write");
                if i > 0 {
                    s.push(start.elapsed().as_secs_f64());
                }
            }
            report(what, size, &mut s);
        }
        assert_eq!(
            b.call(serde_json::json!({"cmd": "sha256", "addr": b_dst, "len": size}))["sha256"],
            a.call(serde_json::json!({"cmd": "sha256", "addr": a_src, "len": size}))["sha256"]
        );
    }
    let _ = a_dst;
}

fn region_prefix(m: &SharedMemory, n: usize) -> Vec<u8> {
    m.lock().unwrap().region(BASE).unwrap()[..n].to_vec()
}
