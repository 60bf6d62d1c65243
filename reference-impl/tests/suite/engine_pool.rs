//! The initiator's connection pool keeps no connection to a target that went away: a prefiller that wrote to
//! many decoders over a long run, some of which exited, holds sockets only to the live ones (the soak's fd
//! check found the pool growing by one dead socket per lane and vanished decoder).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mooncake_reference::backend::SharedMemory;
use mooncake_reference::engine::client::Request;
use mooncake_reference::engine::{EngineClient, EngineTarget};
use mooncake_wire::proto::memory::Memory;

const BASE: u64 = 0x7f00_0000_0000;
const LEN: usize = 64 * 1024;

fn memory() -> SharedMemory {
    let mut m = Memory::default();
    m.register(BASE, LEN, |_| 0);
    Arc::new(Mutex::new(m))
}

/// Four writes at once: the client spreads them over four connections, which it then keeps idle.
fn four_writes() -> Vec<Request> {
    (0..4).map(|i| Request::Write { addr: BASE + i * 1024, data: vec![i as u8 + 1; 512] }).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_to_a_target_that_exited_leave_the_pool() {
    let gone = EngineTarget::bind("127.0.0.1", 0, 0, memory()).await.expect("bind");
    let live = EngineTarget::bind("127.0.0.1", 0, 0, memory()).await.expect("bind");
    let c = EngineClient::new();
    c.transfer(&gone.session(), four_writes()).await.expect("writes to the first target");
    // Four lanes, each with a connection of its own, kept idle for the next transfers.
    let to_gone = c.idle_connections();
    assert_eq!(to_gone, 4, "four writes take four connections, whatever the timing of the lanes");
    c.transfer(&live.session(), four_writes()).await.expect("writes to the second target");
    let to_live = c.idle_connections() - to_gone;
    assert_eq!(to_live, 4);

    drop(gone);
    // The exit reaches the client as an end of stream on each idle socket; the pool is pruned every second,
    // with no transfer needed (a prefiller whose decoder vanished may make none for a long time): bounded wait.
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.idle_connections() != to_live {
        assert!(
            Instant::now() < deadline,
            "5 s after the first target exited the pool still holds {} connections ({to_live} to the live one)",
            c.idle_connections()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // And before a connection is taken: a target closed just now is not handed out.
    let third = EngineTarget::bind("127.0.0.1", 0, 0, memory()).await.expect("bind");
    c.transfer(&third.session(), four_writes()).await.expect("writes to the third target");
    let to_third = c.idle_connections() - to_live;
    drop(third);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        c.transfer(&live.session(), vec![Request::Write { addr: BASE, data: vec![9; 16] }]).await.expect("write");
        if c.idle_connections() == to_live {
            break;
        }
        assert!(Instant::now() < deadline, "{} idle, {to_third} of them to a dropped target", c.idle_connections());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The live target's connections were not thrown away with the dead ones: they are still used.
    c.transfer(&live.session(), four_writes()).await.expect("writes after the pruning");
    assert_eq!(c.idle_connections(), 4, "the pool holds at most four connections per target");
}

/// A burst of transfers to one segment a client has not met yet (a prefiller that just got hundreds of pulls
/// for a new decoder): one handshake, and no more data connections open at once than the client's budget. Before,
/// every transfer handshook on its own and opened its own lanes; under load the target refused handshakes beyond
/// its per-host limit and the writes failed ("Mooncake transfer engine returned -1" in a test of 10,000 pulls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_transfers_handshakes_once_and_keeps_to_the_connection_budget() {
    use mooncake_reference::engine::PeerLog;
    use mooncake_wire::limits::MAX_TE_CONNECTIONS_PER_PEER;
    let peers = PeerLog::default();
    let rpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let data = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let target = EngineTarget::start_logged(rpc, data, memory(), peers.clone()).expect("target");
    let c = EngineClient::new();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..400 {
        let (c, session) = (c.clone(), target.session());
        set.spawn(async move { c.transfer(&session, four_writes()).await });
    }
    let mut failed = vec![];
    while let Some(r) = set.join_next().await {
        if let Err(e) = r.expect("transfer task") {
            failed.push(e.to_string());
        }
    }
    assert!(failed.is_empty(), "{} of 400 transfers failed, the first: {}", failed.len(), failed[0]);
    assert_eq!(peers.lock().expect("peer log").len(), 1, "one handshake for the whole burst");
    // The client holds at most the budget in use and LANES_PER_PEER idle; the target counts a connection until
    // it has seen it closed, so a few the client just closed may still count: twice the budget is the bound
    // (without the budget the burst opened hundreds).
    let peak = target.peak_data_connections();
    assert!(peak <= 2 * MAX_TE_CONNECTIONS_PER_PEER, "{peak} data connections open at once");
}
