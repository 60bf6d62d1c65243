//! Metadata round trips per second through a prefiller on loopback: K concurrent decoders (1, 8, 64), each a
//! DEALER sending free-only pulls (no blocks to copy, so the prefiller answers FINISH as soon as it has
//! matched the ready transfer) and waiting for each reply. Runs the Rust reference prefiller and the Python
//! test peer's prefiller in one invocation and prints a Markdown table with the ratio.
//!
//! `cargo bench -p mooncake-reference --bench roundtrip` (needs the test venv for the Python peer:
//! `$MOONCAKE_PYTHON` or `.venv/bin/python`). Not a test: nothing here asserts a speed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mooncake_reference::testee::Testee;
use mooncake_wire::typed::{MooncakeXferMetadata, ReqBlocks};
use serde_json::{json, Value as J};

const PER_CLIENT: usize = 2000;

fn layout() -> J {
    json!({
        "kv_caches_base_addr": [0x1000_0000u64, 0x1001_0000u64], "block_lens": [2048, 2048], "kv_block_lens": [2048, 2048],
        "registered_layer_names": ["model.layers.0.self_attn", "model.layers.1.self_attn"], "registered_layer_indices": [0, 1],
        "registered_group_indices": [0, 0], "registered_shared_group_ids": [[0], [0]], "registered_row_offsets": [0, 0], "num_blocks": 32,
    })
}

fn request(i: usize) -> Vec<u8> {
    let m = MooncakeXferMetadata {
        remote_hostname: "127.0.0.1".into(),
        remote_port: 1u64.into(),
        req_blocks: vec![(format!("d-{i}"), ReqBlocks { transfer_id: format!("x-{i}"), blocks: vec![] })],
        kv_caches_base_addr: vec![0x2000_0000u64.into(), 0x2001_0000u64.into()],
        block_lens: vec![2048u64.into(); 2],
        kv_block_lens: vec![2048u64.into(); 2],
        registered_layer_names: vec!["model.layers.0.self_attn".into(), "model.layers.1.self_attn".into()],
        registered_layer_indices: vec![0u64.into(), 1u64.into()],
        registered_group_indices: vec![0u64.into(), 0u64.into()],
        registered_shared_group_ids: vec![vec![0u64.into()], vec![0u64.into()]],
        registered_row_offsets: vec![0u64.into(), 0u64.into()],
        ..Default::default()
    };
    m.encode()
}

/// K decoders, each a DEALER with one pull in flight at a time (`PER_CLIENT` in a row), driven by one
/// polling thread so that the load generator costs little CPU next to the prefiller under test; returns
/// round trips per second.
fn drive(endpoint: &str, clients: usize, offset: usize) -> f64 {
    let ctx = zmq::Context::new();
    let sockets: Vec<zmq::Socket> = (0..clients)
        .map(|_| {
            let s = ctx.socket(zmq::DEALER).unwrap();
            s.set_linger(0).unwrap();
            s.connect(endpoint).unwrap();
            s
        })
        .collect();
    let reqs: Vec<Vec<Vec<u8>>> = (0..clients).map(|c| (0..PER_CLIENT).map(|k| request(offset + c * PER_CLIENT + k)).collect()).collect();
    let mut sent = vec![0usize; clients];
    let mut done = 0usize;
    let t = Instant::now();
    for (c, s) in sockets.iter().enumerate() {
        s.send(&reqs[c][0][..], 0).unwrap();
        sent[c] = 1;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while done < clients * PER_CLIENT {
        assert!(Instant::now() < deadline, "no progress: {done} replies");
        let mut items: Vec<zmq::PollItem> = sockets.iter().map(|s| s.as_poll_item(zmq::POLLIN)).collect();
        zmq::poll(&mut items, 30_000).unwrap();
        let ready: Vec<usize> = items.iter().enumerate().filter(|(_, i)| i.is_readable()).map(|(c, _)| c).collect();
        drop(items);
        for c in ready {
            while sockets[c].recv_bytes(zmq::DONTWAIT).is_ok() {
                done += 1;
                if sent[c] < PER_CLIENT {
                    sockets[c].send(&reqs[c][sent[c]][..], 0).unwrap();
                    sent[c] += 1;
                }
            }
        }
    }
    (clients * PER_CLIENT) as f64 / t.elapsed().as_secs_f64()
}

fn total(clients: &[usize]) -> usize {
    clients.iter().sum::<usize>() * PER_CLIENT
}

fn python() -> Option<String> {
    let p = std::env::var("MOONCAKE_PYTHON").unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python").into());
    std::path::Path::new(&p).exists().then_some(p)
}

fn main() {
    let levels = [1usize, 8, 64];
    let n = total(&levels);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // Rust prefiller, in this process.
    let mut rust = Testee::default();
    let endpoint = rt.block_on(async {
        let a = rust.handle(&json!({"cmd": "start", "role": "prefiller", "revision": "vllm-0.33.0", "config": {"engine_id": "e", "model": {"total_num_kv_heads": 4}, "layout": layout()}})).await;
        for i in 0..n {
            rust.handle(&json!({"cmd": "ready", "p_req_id": format!("p-{i}"), "transfer_id": format!("x-{i}"), "blocks": [[1]]})).await;
        }
        a["endpoint"].as_str().unwrap().to_string()
    });
    let mut rust_rates = vec![];
    let mut off = 0;
    for &k in &levels {
        rust_rates.push(drive(&endpoint, k, off));
        eprintln!("rust {k}: {:.0}", rust_rates.last().unwrap());
        off += k * PER_CLIENT;
    }
    drop(rust);
    // Python prefiller, as a testee process.
    let mut py_rates = vec![None; levels.len()];
    if let Some(py) = python() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/peer/mooncake_test_peer.py");
        let mut child = Command::new(py).arg(script).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let _hello = lines.next();
        let mut cmd = |c: J| -> J {
            writeln!(stdin, "{c}").unwrap();
            stdin.flush().unwrap();
            serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
        };
        let a = cmd(json!({"cmd": "start", "role": "prefiller", "revision": "vllm-0.33.0", "config": {"engine_id": "e", "model": {"total_num_kv_heads": 4}, "layout": layout()}}));
        let ep = a["endpoint"].as_str().unwrap().to_string();
        for i in 0..n {
            cmd(json!({"cmd": "ready", "p_req_id": format!("p-{i}"), "transfer_id": format!("x-{i}"), "blocks": [[1]]}));
        }
        let mut off = 0;
        for (j, &k) in levels.iter().enumerate() {
            py_rates[j] = Some(drive(&ep, k, off));
            off += k * PER_CLIENT;
        }
        cmd(json!({"cmd": "stop"}));
        let _ = child.wait();
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("| Concurrent decoders | Rust prefiller (round trips/s) | Python test peer (round trips/s) | Ratio |");
    println!("|---|---|---|---|");
    for (j, &k) in levels.iter().enumerate() {
        let py = py_rates[j].map(|r| format!("{r:.0}")).unwrap_or_else(|| "not run (no venv)".into());
        let ratio = py_rates[j].map(|r| format!("{:.1}×", rust_rates[j] / r)).unwrap_or_default();
        println!("| {k} | {:.0} | {py} | {ratio} |", rust_rates[j]);
    }
    println!("\n{PER_CLIENT} free-only pulls per decoder, one DEALER each, 127.0.0.1; load average at the end: {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    let _ = Duration::ZERO;
}
