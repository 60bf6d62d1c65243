//! A process that catches signals (the runner catches `SIGCHLD`, the peer `SIGINT`) must not lose a bind, a
//! message or the reactor's thread to one: libzmq's calls fail with `EINTR` when a signal lands while they wait.
//! Here every thread of the process is interrupted every few microseconds while reactors start, bind a ROUTER and
//! exchange messages with a DEALER.

// Installing a signal handler and sending signals to threads are libc calls: test code only (`unsafe_code` is
// denied for every crate; `tests/hardening.rs`' counting allocator is the other exception).
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mooncake_io::reactor::{Incoming, Reactor};
use tokio::sync::mpsc;

extern "C" fn ignore(_: libc::c_int) {}

/// Catches `SIGUSR1` without `SA_RESTART` (a `poll` is interrupted either way).
fn catch_sigusr1() {
    // SAFETY: a handler that does nothing, installed once, before the threads that receive it exist.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()), 0);
    }
}

/// Sends `SIGUSR1` to every other thread of the process until `stop`; returns how many it sent.
fn interrupt_all(stop: Arc<AtomicBool>, sent: Arc<AtomicUsize>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // SAFETY: plain system calls on this process's own ids.
        let (pid, me) = unsafe { (libc::getpid(), libc::syscall(libc::SYS_gettid) as libc::pid_t) };
        while !stop.load(Ordering::Relaxed) {
            let tids = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
            for tid in tids.flatten().filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok()) {
                // SAFETY: as above; a thread that has just exited makes the call fail harmlessly.
                if tid != me && unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR1) } == 0 {
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    })
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Incoming>) -> Incoming {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("the reactor answered within 10 s")
        .expect("the reactor is running")
}

/// One reactor's life: bind, a request from a DEALER, the reply back, shut down.
async fn one_round(ctx: &zmq::Context, round: usize) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let reactor = Reactor::start(ctx, tx).unwrap_or_else(|e| panic!("round {round}: start: {e}"));
    let ep = reactor.bind_router("tcp://127.0.0.1:*").await.unwrap_or_else(|e| panic!("round {round}: {e}"));
    let ping = format!("ping {round}").into_bytes();
    reactor.open_dealer_frames(7, &ep, vec![b"head".to_vec(), ping.clone()]);
    let Incoming::Router(mut frames) = next(&mut rx).await else { panic!("round {round}: not the ROUTER's") };
    let rid = frames.remove(0);
    assert_eq!(frames, vec![b"head".to_vec(), ping], "round {round}: the request whole and once");
    reactor.router_send_batch(vec![vec![rid, b"pong".to_vec(), b"tail".to_vec()]]);
    match next(&mut rx).await {
        Incoming::Dealer { id: 7, frames } => {
            assert_eq!(frames, vec![b"pong".to_vec(), b"tail".to_vec()], "round {round}: the reply whole and once")
        }
        other => panic!("round {round}: {other:?}"),
    }
}

#[test]
fn the_reactor_survives_signals_on_every_thread() {
    catch_sigusr1();
    let (stop, sent) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let interrupter = interrupt_all(stop.clone(), sent.clone());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let ctx = zmq::Context::new();
    rt.block_on(async {
        for round in 0..200 {
            one_round(&ctx, round).await;
        }
    });
    stop.store(true, Ordering::Relaxed);
    interrupter.join().unwrap();
    let sent = sent.load(Ordering::Relaxed);
    assert!(sent >= 1000, "only {sent} signals were sent: the test did not interrupt anything");
}
