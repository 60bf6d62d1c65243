//! The prefiller's ROUTER (`mooncake_reference::router`) against libzmq peers (the `zmq` crate, as vLLM's
//! decoder) and against raw TCP peers that break the protocol. Everything binds 127.0.0.1, every wait is
//! bounded, and every router is dropped (its thread joined) at the end of its test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::Duration;

use mooncake_reference::router::{Router, RouterError, RouterHandler, RouterLimits};
use mooncake_reference::zmtp::{self, FLAG_COMMAND, FLAG_LONG, FLAG_MORE, GREETING_LEN};
use mooncake_wire::limits;

use crate::common;
use crate::common::WAIT;

/// A router whose handler reports every message on a channel and answers `[id, frames reversed...]`.
fn echo_router() -> (Router, mpsc::Receiver<Vec<Vec<u8>>>) {
    echo_router_with(RouterLimits::default())
}

fn echo_router_with(budget: RouterLimits) -> (Router, mpsc::Receiver<Vec<Vec<u8>>>) {
    let (tx, rx) = mpsc::channel();
    let handler: RouterHandler = Box::new(move |frames: Vec<Vec<u8>>| {
        let _ = tx.send(frames.clone());
        let mut reply = vec![frames[0].clone()];
        reply.extend(frames[1..].iter().map(|f| f.iter().rev().copied().collect::<Vec<u8>>()));
        vec![reply]
    });
    (Router::bind_with("tcp://127.0.0.1:*", handler, budget).expect("bind"), rx)
}

fn dealer(ctx: &zmq::Context, endpoint: &str, identity: Option<&[u8]>) -> zmq::Socket {
    let s = ctx.socket(zmq::DEALER).unwrap();
    s.set_linger(0).unwrap();
    s.set_rcvtimeo(WAIT.as_millis() as i32).unwrap();
    if let Some(id) = identity {
        s.set_identity(id).unwrap();
    }
    s.connect(endpoint).unwrap();
    s
}

/// A raw TCP peer that has sent `greeting` and read the router's.
fn raw(endpoint: &str, greeting: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(endpoint.strip_prefix("tcp://").unwrap()).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(greeting).unwrap();
    s
}

/// Reads one frame: (flags, body).
fn read_frame(s: &mut TcpStream) -> (u8, Vec<u8>) {
    common::read_frame(s).expect("a frame")
}

/// True when the router closed the connection (end of stream or reset) within the wait.
fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// A raw DEALER through the handshake: greeting and READY both ways.
fn raw_dealer(endpoint: &str) -> TcpStream {
    let mut s = raw(endpoint, &zmtp::greeting());
    let mut g = [0u8; GREETING_LEN];
    s.read_exact(&mut g).unwrap();
    assert_eq!((g[0], g[9] & 1, g[10]), (0xFF, 1, 3), "a ZMTP 3 greeting");
    assert_eq!(&g[12..16], b"NULL");
    s.write_all(&zmtp::ready("DEALER", &[])).unwrap();
    let (flags, body) = read_frame(&mut s);
    assert_eq!(flags, FLAG_COMMAND);
    let (name, data) = zmtp::split_command(&body).unwrap();
    assert_eq!(name, b"READY");
    assert!(zmtp::properties(data).unwrap().contains(&(&b"Socket-Type"[..], &b"ROUTER"[..])));
    s
}

#[test]
fn a_libzmq_dealer_gets_its_reply_under_a_generated_routing_id() {
    let (router, seen) = echo_router();
    let ctx = zmq::Context::new();
    let d = dealer(&ctx, router.endpoint(), None);
    for i in 0..3u8 {
        d.send(&[1, 2, 3, i][..], 0).unwrap();
        assert_eq!(d.recv_bytes(0).unwrap(), vec![i, 3, 2, 1]);
    }
    let frames = seen.recv_timeout(WAIT).unwrap();
    assert_eq!(frames.len(), 2);
    assert_eq!((frames[0].len(), frames[0][0]), (5, 0), "libzmq's form: a zero, then four bytes");
    // A long frame (eight-byte size) both ways, and a multipart message.
    let big: Vec<u8> = (0..70_000u32).map(|i| i as u8).collect();
    d.send_multipart([&b"a"[..], &big[..]], 0).unwrap();
    let back = d.recv_multipart(0).unwrap();
    assert_eq!(back[0], b"a");
    assert_eq!(back[1], big.iter().rev().copied().collect::<Vec<u8>>());
    drop(router);
}

#[test]
fn an_identity_becomes_the_routing_id_and_a_duplicate_is_refused() {
    let (router, seen) = echo_router();
    let ctx = zmq::Context::new();
    let a = dealer(&ctx, router.endpoint(), Some(b"decoder-a"));
    a.send(&b"x"[..], 0).unwrap();
    assert_eq!(a.recv_bytes(0).unwrap(), b"x");
    assert_eq!(seen.recv_timeout(WAIT).unwrap()[0], b"decoder-a");
    let dup = dealer(&ctx, router.endpoint(), Some(b"decoder-a"));
    dup.set_rcvtimeo(300).unwrap();
    dup.send(&b"y"[..], 0).unwrap();
    assert!(dup.recv_bytes(0).is_err(), "the second decoder-a got an answer");
    assert!(seen.try_recv().is_err(), "the handler saw the duplicate's message");
    // The first one is still served.
    a.send(&b"z"[..], 0).unwrap();
    assert_eq!(a.recv_bytes(0).unwrap(), b"z");
    drop(router);
}

#[test]
fn a_req_socket_sends_its_delimiter_and_gets_the_reply_without_it() {
    let (router, seen) = echo_router();
    let ctx = zmq::Context::new();
    let req = ctx.socket(zmq::REQ).unwrap();
    req.set_linger(0).unwrap();
    req.set_rcvtimeo(WAIT.as_millis() as i32).unwrap();
    req.connect(router.endpoint()).unwrap();
    req.send(&b"pull"[..], 0).unwrap();
    assert_eq!(req.recv_bytes(0).unwrap(), b"llup");
    let frames = seen.recv_timeout(WAIT).unwrap();
    assert_eq!(frames[1..], [b"".to_vec(), b"pull".to_vec()]);
    drop(router);
}

#[test]
fn messages_sent_from_another_thread_reach_their_peer_and_unknown_ids_are_dropped() {
    let (tx, rx) = mpsc::channel();
    let handler: RouterHandler = Box::new(move |frames: Vec<Vec<u8>>| {
        let _ = tx.send(frames[0].clone());
        vec![]
    });
    let router = Router::bind("tcp://127.0.0.1:*", handler).unwrap();
    let ctx = zmq::Context::new();
    let d = dealer(&ctx, router.endpoint(), None);
    d.send(&b"hello"[..], 0).unwrap();
    let id = rx.recv_timeout(WAIT).unwrap();
    router.send_batch(vec![vec![b"nobody".to_vec(), b"lost".to_vec()], vec![id.clone(), b"later".to_vec()]]);
    assert_eq!(d.recv_bytes(0).unwrap(), b"later");
    drop(router);
}

#[test]
fn peers_that_break_the_protocol_are_disconnected_and_the_router_keeps_serving() {
    let (router, seen) = echo_router();
    let ep = router.endpoint().to_string();
    // Not ZMTP at all.
    let mut http = raw(&ep, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(closed(&mut http), "an HTTP client stayed connected");
    // ZMTP 2 (version byte 1).
    let mut old = zmtp::greeting();
    old[10] = 1;
    assert!(closed(&mut raw(&ep, &old)), "a ZMTP 2 peer stayed connected");
    // Another mechanism.
    let mut plain = zmtp::greeting();
    plain[12..17].copy_from_slice(b"PLAIN");
    assert!(closed(&mut raw(&ep, &plain)), "a PLAIN peer stayed connected");
    // A socket type a ROUTER does not talk to.
    let mut s = raw(&ep, &zmtp::greeting());
    s.write_all(&zmtp::ready("PUB", &[])).unwrap();
    assert!(closed(&mut s), "a PUB peer stayed connected");
    // A message before READY.
    let mut s = raw(&ep, &zmtp::greeting());
    s.write_all(&zmtp::frame(b"early")).unwrap();
    assert!(closed(&mut s), "a message before READY was accepted");
    // A frame over the limit, announced and never sent.
    let mut s = raw_dealer(&ep);
    let mut head = vec![FLAG_LONG];
    head.extend((limits::MAX_FRAME_BYTES as u64 + 1).to_be_bytes());
    s.write_all(&head).unwrap();
    assert!(closed(&mut s), "an oversized frame was accepted");
    // Reserved flag bits.
    let mut s = raw_dealer(&ep);
    s.write_all(&[0x80, 1, 0]).unwrap();
    assert!(closed(&mut s), "reserved flags were accepted");
    // A truncated READY.
    let mut s = raw(&ep, &zmtp::greeting());
    let mut r = zmtp::ready("DEALER", &[]);
    r[1] -= 3;
    r.truncate(r.len() - 3);
    s.write_all(&r).unwrap();
    assert!(closed(&mut s), "a truncated READY was accepted");
    // Frames each under the frame limit, with MORE set and never a last one: the held message's total is
    // bounded (one such client used to take the prefiller to gigabytes).
    let mut s = raw_dealer(&ep);
    let chunk = vec![7u8; limits::MAX_MESSAGE_BYTES / 4];
    let mut frame = vec![];
    zmtp::put_frame(&mut frame, FLAG_MORE, &chunk);
    let mut refused = false;
    for _ in 0..5 {
        if s.write_all(&frame).is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused || closed(&mut s), "a message over MAX_MESSAGE_BYTES was held");
    assert!(seen.try_recv().is_err(), "the handler saw a message from a broken peer");
    // Still serving.
    let ctx = zmq::Context::new();
    let d = dealer(&ctx, &ep, None);
    d.send(&b"ok"[..], 0).unwrap();
    assert_eq!(d.recv_bytes(0).unwrap(), b"ko");
    drop(router);
}

#[test]
fn a_ping_is_answered_with_a_pong_carrying_its_context() {
    let (router, _seen) = echo_router();
    let mut s = raw_dealer(router.endpoint());
    let mut ping = vec![0, 10];
    ping.extend(b"ctx-123");
    s.write_all(&zmtp::command(b"PING", &ping)).unwrap();
    let (flags, body) = read_frame(&mut s);
    assert_eq!(flags, FLAG_COMMAND);
    assert_eq!(zmtp::split_command(&body).unwrap(), (&b"PONG"[..], &b"ctx-123"[..]));
    // Then messages still flow.
    s.write_all(&zmtp::frame(b"abc")).unwrap();
    assert_eq!(read_frame(&mut s), (0, b"cba".to_vec()));
    drop(router);
}

#[test]
fn dropping_the_router_closes_its_connections() {
    let (router, _seen) = echo_router();
    let mut s = raw_dealer(router.endpoint());
    drop(router);
    assert!(closed(&mut s), "the connection outlived the router");
}

#[test]
fn endpoints_that_are_not_tcp_are_refused_with_a_typed_error() {
    for bad in ["ipc:///tmp/x", "tcp://127.0.0.1", "tcp://127.0.0.1:port", "127.0.0.1:5"] {
        let r = Router::bind(bad, Box::new(|_| vec![]));
        assert!(matches!(r, Err(RouterError::Endpoint(_))), "{bad}");
    }
    let taken = Router::bind("tcp://127.0.0.1:*", Box::new(|_| vec![])).unwrap();
    let again = Router::bind(taken.endpoint(), Box::new(|_| vec![]));
    assert!(matches!(again, Err(RouterError::Io { .. })), "binding a port in use");
}

/// A burst larger than the router's read buffer (64 KiB) and its per-wake-up read budget (1 MiB), written at
/// once by one peer and then nothing more: with edge-triggered readiness no later arrival raises a new event,
/// so every byte already in the socket must be read, and every reply written (most of them after a write that
/// would block), without another wake-up. A byte left in the socket would be served by nothing: the reads
/// below would time out.
#[test]
fn a_burst_larger_than_the_read_buffer_is_served_in_full_with_no_later_traffic() {
    let (router, _rx) = echo_router();
    let mut s = raw_dealer(router.endpoint());
    const MESSAGES: usize = 3 * 1024;
    let body = |i: usize| -> Vec<u8> { (0..1024).map(|j| (i * 7 + j) as u8).collect() };
    let mut burst = Vec::with_capacity(MESSAGES * (9 + 1024));
    for i in 0..MESSAGES {
        zmtp::put_frame(&mut burst, 0, &body(i));
    }
    assert!(burst.len() > 3 * (1 << 20), "the burst is larger than three read budgets");
    let mut writer = s.try_clone().unwrap();
    let sent = std::thread::spawn(move || writer.write_all(&burst));
    let started = std::time::Instant::now();
    for i in 0..MESSAGES {
        let (flags, reply) = read_frame(&mut s);
        assert_eq!(flags, FLAG_LONG, "reply {i}: one frame of over 255 bytes, the last");
        assert!(reply.iter().eq(body(i).iter().rev()), "reply {i} answers message {i}");
    }
    sent.join().unwrap().unwrap();
    assert!(started.elapsed() < WAIT, "served in {:?}", started.elapsed());
    drop(router);
}

/// The budget scaled down so that a test waits a fraction of a second for each timeout.
fn small_budget() -> RouterLimits {
    RouterLimits {
        handshake: Duration::from_millis(300),
        stall: Duration::from_millis(300),
        max_connections: 8,
        max_per_host: 4,
        max_buffered: 1 << 20,
    }
}

/// A DEALER-like raw peer connecting from `source` (another loopback address stands for another host).
fn raw_from(source: &str, endpoint: &str) -> TcpStream {
    common::connect_from(source, endpoint.strip_prefix("tcp://").unwrap().parse().unwrap()).unwrap()
}

/// A full exchange through a raw DEALER: a one-frame message and its echoed reply.
fn served(s: &mut TcpStream) -> bool {
    s.write_all(&zmtp::frame(b"ping")).is_ok() && {
        let (flags, body) = read_frame(s);
        flags == 0 && body == b"gnip"
    }
}

#[test]
fn a_peer_that_never_finishes_its_handshake_is_closed_after_the_handshake_timeout() {
    let (router, seen) = echo_router_with(small_budget());
    let ep = router.endpoint().to_string();
    // Half a greeting, then nothing (one such client could hold a connection for ever).
    let started = std::time::Instant::now();
    let mut half = raw(&ep, &zmtp::greeting()[..20]);
    // The whole greeting but no READY.
    let mut no_ready = raw(&ep, &zmtp::greeting());
    assert!(closed(&mut half), "half a greeting kept its connection");
    assert!(closed(&mut no_ready), "a greeting without READY kept its connection");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300) && waited < WAIT, "closed after {waited:?}");
    // A peer that completes its handshake is served, and stays connected while idle.
    let mut good = raw_dealer(&ep);
    std::thread::sleep(Duration::from_millis(700));
    assert!(served(&mut good), "an idle peer past the handshake timeout was not served");
    assert_eq!(seen.try_iter().count(), 1);
    drop(router);
}

#[test]
fn a_message_begun_and_not_finished_is_closed_after_the_stall_timeout() {
    let (router, seen) = echo_router_with(small_budget());
    let ep = router.endpoint().to_string();
    // A frame announcing 100 bytes, 10 of them sent.
    let mut part_frame = raw_dealer(&ep);
    part_frame.write_all(&[0, 100]).unwrap();
    part_frame.write_all(&[1; 10]).unwrap();
    // A first frame with MORE and never the last one, trickled a byte at a time would not help either.
    let mut part_message = raw_dealer(&ep);
    let mut f = vec![];
    zmtp::put_frame(&mut f, FLAG_MORE, b"first");
    part_message.write_all(&f).unwrap();
    let started = std::time::Instant::now();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(150));
        let _ = part_message.write_all(&[FLAG_MORE]);
        let _ = part_message.write_all(&[1]);
        let _ = part_message.write_all(&[9]);
    }
    assert!(closed(&mut part_frame), "a frame never finished kept its connection");
    assert!(closed(&mut part_message), "a message never finished kept its connection");
    assert!(started.elapsed() < WAIT);
    assert!(seen.try_recv().is_err(), "the handler saw an unfinished message");
    // Whole messages, however far apart, are served.
    let mut good = raw_dealer(&ep);
    assert!(served(&mut good));
    std::thread::sleep(Duration::from_millis(700));
    assert!(served(&mut good));
    drop(router);
}

#[test]
fn connections_over_the_budget_are_closed_at_once_and_the_others_served() {
    let (router, _seen) = echo_router_with(RouterLimits { handshake: WAIT, ..small_budget() });
    let ep = router.endpoint().to_string();
    // One host takes its share (4): the fifth connection from it is closed at once...
    let mut mine: Vec<TcpStream> = (0..4).map(|_| raw_dealer(&ep)).collect();
    let mut fifth = raw_from("127.0.0.1", &ep);
    assert!(closed(&mut fifth), "a fifth connection from one host was kept");
    // ...while another host is served, and so are the first four.
    let mut other = raw_from("127.0.0.2", &ep);
    other.write_all(&zmtp::greeting()).unwrap();
    let mut g = [0u8; GREETING_LEN];
    other.read_exact(&mut g).unwrap();
    other.write_all(&zmtp::ready("DEALER", &[])).unwrap();
    let _ready = read_frame(&mut other);
    assert!(served(&mut other), "another host was not served");
    for s in &mut mine {
        assert!(served(s), "a connection within the budget was not served");
    }
    // In all (8): three more hosts fill it; the next connection, from a host with none open, is closed.
    let _more: Vec<TcpStream> = (3..6).map(|h| raw_from(&format!("127.0.0.{h}"), &ep)).collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut ninth = raw_from("127.0.0.9", &ep);
    assert!(closed(&mut ninth), "a connection over the total was kept");
    // A closed connection frees its place.
    drop(mine.pop());
    std::thread::sleep(Duration::from_millis(200));
    let mut again = raw_from("127.0.0.1", &ep);
    again.write_all(&zmtp::greeting()).unwrap();
    let mut g = [0u8; GREETING_LEN];
    again.read_exact(&mut g).unwrap();
    assert_eq!(g[0], 0xFF, "a place freed by a closed connection was not given again");
    drop(router);
}

#[test]
fn bytes_held_for_all_connections_together_are_bounded() {
    let (router, seen) = echo_router_with(RouterLimits { stall: WAIT, ..small_budget() });
    let ep = router.endpoint().to_string();
    // Each connection's message is under the per-message limit; together they would be over the 1 MiB held in
    // all: the connection that takes the sum over it is closed, the first one keeps its place.
    let body = vec![5u8; 900 * 1024];
    let mut head = vec![];
    zmtp::put_frame(&mut head, 0, &body);
    let (first_part, rest) = head.split_at(600 * 1024);
    let mut first = raw_dealer(&ep);
    first.write_all(first_part).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut second = raw_dealer(&ep);
    let _ = second.write_all(&head[..600 * 1024]);
    assert!(closed(&mut second), "a connection over the bytes held in all was kept");
    // The first finishes its message and gets its answer.
    first.write_all(rest).unwrap();
    let (flags, reply) = read_frame(&mut first);
    assert_eq!((flags & FLAG_MORE, reply.len()), (0, body.len()));
    assert_eq!(seen.recv_timeout(WAIT).unwrap()[1].len(), body.len());
    drop(router);
}
