//! The transport's floor: a libzmq ROUTER (the `zmq` crate) that answers every message with a fixed FINISH
//! reply of the prefiller's size, as fast as a blocking receive-and-send loop can. It runs as its own process
//! (the bench binary started again with [`FLOOR_ENV`] set), pinned and measured like the prefillers, and
//! speaks just enough of the testee control protocol (`hello`, `start`, `ready`, `stop`) for the bench to
//! drive it the same way.

use std::io::{BufRead, Write};

use mooncake_wire::proto::WireProfile;
use mooncake_wire::typed::{MooncakeXferResponse, Status};
use serde_json::{json, Value as J};

/// Set (to anything) in the environment of the bench binary to make it serve the floor instead.
pub(crate) const FLOOR_ENV: &str = "MOONCAKE_BENCH_FLOOR_SERVER";

/// The reply the prefiller sends to a free-only pull of the bench (`ok_reqs` = the one request id).
pub(crate) fn finish_reply(d_req_id: &str) -> Vec<u8> {
    let mut r = MooncakeXferResponse::new(Status::FINISH);
    r.ok_reqs = Some(vec![d_req_id].into());
    WireProfile::builtin("vllm-0.33.0").expect("a built-in revision").encode_response(&r).expect("a FINISH reply")
}

fn answer(out: &mut impl Write, a: J) {
    let _ = writeln!(out, "{a}");
    let _ = out.flush();
}

/// Serves the floor until `stop` or the end of standard input.
pub(crate) fn serve() {
    let mut out = std::io::stdout().lock();
    answer(
        &mut out,
        json!({"hello": "mooncake-testee", "protocol": 1, "name": "libzmq ROUTER floor", "roles": ["prefiller"]}),
    );
    let ctx = zmq::Context::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let c: J = serde_json::from_str(&line).unwrap_or(J::Null);
        match c["cmd"].as_str() {
            Some("start") => {
                let router = ctx.socket(zmq::ROUTER).expect("a ROUTER");
                router.set_linger(0).expect("linger");
                router.bind("tcp://127.0.0.1:*").expect("bind");
                let endpoint = router.get_last_endpoint().expect("endpoint").expect("UTF-8");
                std::thread::spawn(move || echo(router));
                answer(&mut out, json!({"ok": true, "endpoint": endpoint}));
            }
            Some("stop") => {
                answer(&mut out, json!({"ok": true}));
                break;
            }
            // `ready` and anything else: nothing to do.
            _ => answer(&mut out, json!({"ok": true})),
        }
    }
}

/// Receive `[routing id, pull]`, send `[routing id, reply]`, reusing the messages.
fn echo(router: zmq::Socket) {
    let reply = finish_reply("d-100000");
    let (mut id, mut body) = (zmq::Message::new(), zmq::Message::new());
    loop {
        if router.recv(&mut id, 0).is_err() || router.recv(&mut body, 0).is_err() {
            return;
        }
        while router.get_rcvmore().unwrap_or(false) {
            if router.recv(&mut body, 0).is_err() {
                return;
            }
        }
        if router.send(&id[..], zmq::SNDMORE).is_err() || router.send(&reply[..], 0).is_err() {
            return;
        }
    }
}
