//! The hostile-client suite (issue 34): each attack that once grew, hung or starved a server of the reference
//! peer, run against the `mooncake-peer` process itself on 127.0.0.1 — its prefiller's ROUTER, its bootstrap
//! server, its decoder's transfer-engine target. While the attack runs and after it, a well-behaved client
//! (from 127.0.0.2, another host as far as the server's per-host budget goes) must be served, and the process's
//! peak resident memory (`VmHWM` in `/proc/PID/status`) must stay under the budget RELIABILITY.md documents.
//!
//! Every attack is bounded in bytes, connections and time; every process is killed at the end of its test.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mooncake_reference::zmtp::{self, FLAG_MORE};
use serde_json::{json, Value as J};

use crate::common::{connect_from, dealer_from, read_frame, WAIT};
const MIB: u64 = 1024 * 1024;

/// Peak resident memory each role's process may reach under these attacks (RELIABILITY.md, "Resource budget").
const PREFILLER_BUDGET: u64 = 512 * MIB;
const BOOTSTRAP_BUDGET: u64 = 192 * MIB;
const DECODER_BUDGET: u64 = 256 * MIB;

/// A `mooncake-peer testee` process in one role.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    /// Starts the process and gives it its role; returns the peer and its answer to `start`.
    fn start(role: &str, revision: &str, config: J) -> (Peer, J) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mooncake-peer"))
            .args(["--log", "error", "testee"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mooncake-peer");
        let (stdin, stdout) = (child.stdin.take().unwrap(), BufReader::new(child.stdout.take().unwrap()));
        let mut p = Peer { child, stdin, stdout };
        let mut hello = String::new();
        p.stdout.read_line(&mut hello).unwrap();
        assert!(hello.contains("mooncake-testee"), "{hello}");
        let a = p.cmd(json!({"cmd": "start", "role": role, "revision": revision, "config": config}));
        assert_eq!(a["ok"], true, "{a}");
        (p, a)
    }

    fn cmd(&mut self, c: J) -> J {
        writeln!(self.stdin, "{c}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{c} -> {line:?}: {e}"))
    }

    /// A `VmHWM`/`VmRSS`-style field of the process's status, in bytes.
    fn memory(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field}"));
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
    }

    /// Peak resident memory so far, with the budget it is judged against, as a message.
    fn assert_peak_within(&self, budget: u64, what: &str) {
        let peak = self.memory("VmHWM:");
        eprintln!("{what}: peak RSS {:.1} MiB (budget {} MiB)", peak as f64 / MIB as f64, budget / MIB);
        assert!(peak < budget, "{what}: peak RSS {peak} bytes over its budget of {budget}");
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bootstrap(revision: &str) -> (Peer, String) {
    let (p, a) = Peer::start("bootstrap", revision, json!({"bind": "127.0.0.1:0"}));
    let url = a["url"].as_str().unwrap().to_string();
    (p, url)
}

fn layout(base: u64) -> J {
    json!({
        "kv_caches_base_addr": [base], "block_lens": [4096], "kv_block_lens": [4096],
        "registered_layer_names": ["model.layers.0.self_attn"], "registered_layer_indices": [0],
        "registered_group_indices": [0], "registered_shared_group_ids": [[0]], "registered_row_offsets": [0],
        "num_blocks": 16,
    })
}

fn addr_of(endpoint: &str) -> SocketAddr {
    endpoint.trim_start_matches("tcp://").trim_start_matches("http://").parse().unwrap()
}

/// A decoder's lease heartbeat (vLLM 0.34.0's `MooncakeLeaseHeartbeat`, MessagePack as msgspec writes it):
/// a 0.34.0 prefiller answers it at once, so it shows whether a client is served.
fn heartbeat() -> Vec<u8> {
    let mut m = vec![0x81, 0xa0 | 18];
    m.extend(b"lease_transfer_ids");
    m.extend([0x91, 0xa1, b'x']);
    m
}

/// Whether a well-behaved decoder from `source` gets an answer to a heartbeat within the wait.
fn served_by_prefiller(source: &str, to: SocketAddr) -> bool {
    let Ok(mut s) = dealer_from(source, to) else { return false };
    if s.write_all(&zmtp::frame(&heartbeat())).is_err() {
        return false;
    }
    matches!(read_frame(&mut s), Ok((0, body)) if !body.is_empty())
}

/// Runs `attack` on `n` threads until each ends (every attack is bounded by itself).
fn on_threads(n: usize, attack: impl Fn(usize) + Send + Sync + 'static) -> Vec<std::thread::JoinHandle<()>> {
    let attack = Arc::new(attack);
    (0..n)
        .map(|i| {
            let a = attack.clone();
            std::thread::spawn(move || a(i))
        })
        .collect()
}

#[test]
fn a_prefiller_under_attack_stays_within_its_budget_and_serves_a_well_behaved_decoder() {
    let (_boot, url) = bootstrap("vllm-0.34.0");
    let (pre, a) = Peer::start(
        "prefiller",
        "vllm-0.34.0",
        json!({"engine_id": "p", "bootstrap": url, "model": {"total_num_kv_heads": 1}, "layout": layout(0x1000_0000)}),
    );
    let to = addr_of(a["endpoint"].as_str().unwrap());
    assert!(served_by_prefiller("127.0.0.2", to), "not served before the attack");
    let started = Instant::now();
    // (1) Frames of 16 MiB with MORE and never a last one, from 4 connections (one took it to 3.1 GiB).
    let mut attacks = on_threads(4, move |_| {
        let Ok(mut s) = dealer_from("127.0.0.1", to) else { return };
        let chunk = vec![0x42u8; 16 * MIB as usize];
        let mut frame = vec![];
        zmtp::put_frame(&mut frame, FLAG_MORE, &chunk);
        for _ in 0..16 {
            if s.write_all(&frame).is_err() {
                return;
            }
        }
    });
    // (2) 1,100 connections that send half a greeting and stay (they held 1,900 connections before).
    let half_open: Arc<std::sync::Mutex<Vec<TcpStream>>> = Arc::default();
    let held = half_open.clone();
    attacks.extend(on_threads(1, move |_| {
        for _ in 0..1100 {
            if let Ok(mut s) = connect_from("127.0.0.1", to) {
                let _ = s.write_all(&zmtp::greeting()[..20]);
                held.lock().unwrap().push(s);
            }
        }
    }));
    // (3) Garbage, lying lengths and 200,000 empty frames.
    attacks.extend(on_threads(2, move |i| {
        let Ok(mut s) = dealer_from("127.0.0.1", to) else { return };
        if i == 0 {
            let _ = s.write_all(&[0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        } else {
            let empties: Vec<u8> = [FLAG_MORE, 0].repeat(200_000);
            let _ = s.write_all(&empties);
        }
    }));
    let during = served_by_prefiller("127.0.0.2", to);
    for t in attacks {
        t.join().unwrap();
    }
    let after = served_by_prefiller("127.0.0.2", to);
    pre.assert_peak_within(PREFILLER_BUDGET, "prefiller");
    assert!(during, "not served during the attack");
    assert!(after, "not served after the attack");
    assert!(started.elapsed() < Duration::from_secs(120));
    drop(half_open);
}

/// One HTTP/1.1 request from `source`: the answer's status and JSON body, or `None` when there was none.
fn http_from(source: &str, to: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Option<(u16, J)> {
    let mut s = connect_from(source, to).ok()?;
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(format!("{head}{body}").as_bytes()).ok()?;
    let mut answer = vec![];
    s.read_to_end(&mut answer).ok()?;
    let text = String::from_utf8(answer).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let (_, json) = text.split_once("\r\n\r\n")?;
    Some((status, serde_json::from_str(json).ok()?))
}

#[test]
fn a_bootstrap_server_under_attack_stays_within_its_budget_and_serves_registrations() {
    let (boot, url) = bootstrap("vllm-0.34.0");
    let to = addr_of(&url);
    let stop = Arc::new(AtomicBool::new(false));
    // (1) Registrations of about 1 MB each (900 of them took it to gigabytes): refused by size.
    let mut attacks = on_threads(2, move |i| {
        let body = format!(
            r#"{{"engine_id": "{}", "dp_rank": {i}, "tp_rank": 0, "pp_rank": 0, "addr": "tcp://a:1"}}"#,
            "e".repeat(1_000_000)
        );
        for _ in 0..50 {
            let Ok(mut s) = connect_from("127.0.0.1", to) else { continue };
            let head = format!("POST /register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(body.as_bytes());
            let mut answer = vec![];
            let _ = s.read_to_end(&mut answer);
        }
    });
    // (2) Many small registrations with fields as long as allowed, until the registry refuses more.
    attacks.extend(on_threads(2, move |i| {
        let long = "y".repeat(1000);
        for n in 0..400 {
            let body = json!({"engine_id": format!("{i}-{n}-{long}"), "dp_rank": 100 + i * 1000 + n, "tp_rank": 0, "pp_rank": 0, "addr": long});
            let Ok(mut s) = connect_from("127.0.0.1", to) else { continue };
            let body = body.to_string();
            let head = format!("POST /register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = s.write_all(format!("{head}{body}").as_bytes());
            let mut answer = vec![];
            let _ = s.read_to_end(&mut answer);
        }
    }));
    // (3) A /query flood whose answers are never read, and (4) 1,100 connections trickling headers.
    let held: Arc<std::sync::Mutex<Vec<TcpStream>>> = Arc::default();
    let h = held.clone();
    attacks.extend(on_threads(1, move |_| {
        for _ in 0..300 {
            if let Ok(mut s) = connect_from("127.0.0.1", to) {
                let _ = s.write_all(b"GET /query HTTP/1.1\r\nHost: x\r\n\r\n".repeat(20).as_slice());
                h.lock().unwrap().push(s);
            }
        }
    }));
    let h = held.clone();
    let st = stop.clone();
    attacks.extend(on_threads(1, move |_| {
        let mut mine = vec![];
        for _ in 0..1100 {
            if let Ok(mut s) = connect_from("127.0.0.1", to) {
                let _ = s.write_all(b"GET /query HTTP/1.1\r\nX-Slow: ");
                mine.push(s);
            }
        }
        for _ in 0..20 {
            if st.load(Ordering::SeqCst) {
                break;
            }
            for s in &mut mine {
                let _ = s.write_all(b"a");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        h.lock().unwrap().extend(mine);
    }));
    let served = |tp: i64| {
        let body =
            json!({"engine_id": "good", "dp_rank": 0, "tp_rank": tp, "pp_rank": 0, "addr": format!("tcp://g:{tp}")});
        let registered = http_from("127.0.0.2", to, "POST", "/register", Some(&body.to_string()));
        let query = http_from("127.0.0.2", to, "GET", "/query", None);
        registered.is_some_and(|(status, _)| status == 200)
            && query.is_some_and(|(status, q)| status == 200 && q["0"]["worker_addr"][tp.to_string()].is_object())
    };
    std::thread::sleep(Duration::from_millis(300));
    let during = served(0);
    stop.store(true, Ordering::SeqCst);
    for t in attacks {
        t.join().unwrap();
    }
    let after = served(1);
    boot.assert_peak_within(BOOTSTRAP_BUDGET, "bootstrap server");
    assert!(during, "not served during the attack");
    assert!(after, "not served after the attack");
    drop(held);
}

#[test]
fn a_decoders_transfer_engine_target_under_attack_serves_a_handshake() {
    let (dec, a) = Peer::start("decoder", "vllm-0.34.0", json!({"layout": layout(0x2000_0000)}));
    let to: SocketAddr = a["session"].as_str().unwrap().parse().unwrap();
    // (1) 1,100 connections that start a handshake frame and never finish it (the engine's daemon, and this
    // target before, answered one handshake at a time: one such initiator held up every other).
    let held: Arc<std::sync::Mutex<Vec<TcpStream>>> = Arc::default();
    let h = held.clone();
    let attacks = on_threads(1, move |_| {
        for _ in 0..1100 {
            if let Ok(mut s) = connect_from("127.0.0.1", to) {
                // A frame announcing 1 MiB (the cap): its length, its type byte and a few bytes of it.
                let _ = s.write_all(&(1u64 << 20).to_le_bytes());
                let _ = s.write_all(b"\x01{\"name\":");
                h.lock().unwrap().push(s);
            }
        }
    });
    for t in attacks {
        t.join().unwrap();
    }
    // A real initiator's handshake from another host is answered at once.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let started = Instant::now();
    let got = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let mut s = tokio::time::timeout(WAIT, sock.connect(to)).await.unwrap().unwrap();
        let desc = br#"{"name": "127.0.0.2:1", "protocol": "tcp", "buffers": []}"#;
        let frame = mooncake_wire::te::handshake::encode(mooncake_wire::te::handshake::MsgType::Metadata, desc);
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(&frame).await.unwrap();
        let mut answer = vec![];
        tokio::time::timeout(WAIT, s.read_to_end(&mut answer)).await.map(|_| answer)
    });
    dec.assert_peak_within(DECODER_BUDGET, "decoder");
    let answer = got.expect("no handshake answer within the wait");
    assert!(answer.len() > 9 && answer[9..].starts_with(b"{"), "{:?}", String::from_utf8_lossy(&answer));
    assert!(started.elapsed() < WAIT);
    drop(held);
}
