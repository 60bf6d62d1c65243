//! The tap's ZeroMQ relay: a thread that owns, for every tapped prefiller worker, a ROUTER of the tap's own
//! (the endpoint decoders are handed), and for every decoder connection on it a DEALER to the real prefiller.
//! It forwards every message both ways unchanged — frame boundaries, frame bytes and order — and reports each
//! one after forwarding it.
//!
//! The tap's ROUTERs are `mooncake_io::router::Router`s, the reference prefiller's own ZMTP server, so the tap
//! facing decoders has the same resource budget (RELIABILITY.md): a libzmq ROUTER holds a multipart message's
//! frames until its last one with no bound on their total. Each ROUTER's thread hands whole messages to the
//! relay thread over an inproc socket; replies go back through [`Router::send_batch`].
//!
//! The DEALER of a decoder connection takes that connection's routing id (`ZMQ_ROUTING_ID`) as its own, so
//! the prefiller's ROUTER sees one peer per decoder connection, under the id the tap's ROUTER saw: each
//! decoder keeps its own routing identity on the prefiller side, and a recorded `frames[0]` is what the
//! prefiller really saw.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mooncake_io::interrupted::{recv_frames, retry, send_frames};
use mooncake_io::router::{Router, RouterError};
use mooncake_wire::limits;
use mooncake_wire::zmtp::relay::{LegKey, Legs};
use tokio::sync::oneshot;

/// A DEALER that carried nothing either way for this long is closed (the decoder opened a new connection per
/// exchange, as vLLM does, or went away).
pub(crate) const LEG_IDLE: Duration = Duration::from_secs(120);

/// At most this many decoder connections are relayed at once; past that the least recently used is closed.
pub(crate) const MAX_LEGS: usize = 4096;

/// What the relay forwarded, or could not.
#[derive(Debug)]
pub(crate) enum Obs {
    /// A decoder's message on the tap's ROUTER of `worker`, forwarded to the real prefiller: the routing id
    /// the ROUTER gave the decoder's connection, and the frames after it.
    Request { worker: usize, rid: Vec<u8>, frames: Vec<Vec<u8>> },
    /// The prefiller's message on the DEALER of that connection, forwarded to the decoder; `delivered` is false
    /// when the decoder's connection was gone (libzmq would have dropped the reply too).
    Reply { worker: usize, rid: Vec<u8>, frames: Vec<Vec<u8>>, delivered: bool },
    /// The relay closed the DEALER of a decoder connection (idle for [`LEG_IDLE`], or the oldest of too many).
    Closed { worker: usize, rid: Vec<u8> },
    /// Something the relay could not do (connect, send); the message it concerns was not forwarded.
    Trouble(String),
}

/// Why the relay could not tap a worker (or start).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RelayError {
    /// A ZeroMQ call failed (a socket, an option).
    #[error(transparent)]
    Zmq(#[from] zmq::Error),
    /// The relay thread could not be started.
    #[error(transparent)]
    Spawn(std::io::Error),
    /// The tap's ROUTER could not bind.
    #[error("bind {endpoint}: {source}")]
    Bind {
        /// The endpoint it was to bind.
        endpoint: String,
        /// The cause.
        source: RouterError,
    },
    /// A DEALER could not take a decoder connection's routing id.
    #[error("routing id {}: {source}", hex::encode(rid))]
    RoutingId {
        /// The routing id.
        rid: Vec<u8>,
        /// The cause.
        source: zmq::Error,
    },
    /// A DEALER could not connect to the real prefiller.
    #[error("connect {endpoint}: {source}")]
    Connect {
        /// The prefiller's endpoint.
        endpoint: String,
        /// The cause.
        source: zmq::Error,
    },
    /// The relay thread is gone.
    #[error("the tap's ZeroMQ thread stopped")]
    Stopped,
}

enum Cmd {
    Add { worker: usize, real: String, reply: oneshot::Sender<Result<String, RelayError>> },
    Shutdown,
}

/// The relay thread. Dropping it stops the thread and closes every socket.
pub(crate) struct Relay {
    cmds: mpsc::Sender<Cmd>,
    wake: Mutex<zmq::Socket>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

impl Relay {
    /// Starts the thread. Its ROUTERs bind `tcp://<host>:*`; `emit` hears of every message forwarded.
    pub(crate) fn start(host: &str, emit: Box<dyn FnMut(Obs) + Send>) -> Result<Relay, RelayError> {
        let ctx = zmq::Context::new();
        let wake_addr = format!("inproc://mooncake-tap-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let pull = retry(|| ctx.socket(zmq::PULL))?;
        retry(|| pull.bind(&wake_addr))?;
        let push = retry(|| ctx.socket(zmq::PUSH))?;
        retry(|| push.connect(&wake_addr))?;
        // Whole messages from the ROUTERs' threads: [front index (8 bytes, little-endian), routing id, frames...].
        let inbox_addr = format!("inproc://mooncake-tap-inbox-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let inbox = retry(|| ctx.socket(zmq::PULL))?;
        retry(|| inbox.bind(&inbox_addr))?;
        let (tx, rx) = mpsc::channel();
        let host = host.to_string();
        let thread = std::thread::Builder::new()
            .name("mooncake-tap".into())
            .spawn(move || {
                Thread { ctx, host, inbox_addr, fronts: vec![], legs: Legs::new(MAX_LEGS, LEG_IDLE), emit }
                    .run(pull, inbox, rx)
            })
            .map_err(RelayError::Spawn)?;
        Ok(Relay { cmds: tx, wake: Mutex::new(push), thread: Mutex::new(Some(thread)) })
    }

    fn send(&self, c: Cmd) {
        if self.cmds.send(c).is_ok() {
            if let Ok(w) = self.wake.lock() {
                let _ = retry(|| w.send(&[0u8][..], zmq::DONTWAIT));
            }
        }
    }

    /// Taps the prefiller worker at `real`: binds a ROUTER of the tap's own and returns its endpoint.
    pub(crate) async fn add(&self, worker: usize, real: &str) -> Result<String, RelayError> {
        let (tx, rx) = oneshot::channel();
        self.send(Cmd::Add { worker, real: real.to_string(), reply: tx });
        rx.await.map_err(|_| RelayError::Stopped)?
    }
}

impl Relay {
    /// Stops the thread and closes every socket; once this returns, everything forwarded has been reported.
    pub(crate) fn stop(&self) {
        let t = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = t {
            self.send(Cmd::Shutdown);
            let _ = t.join();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A tapped worker: the tap's ROUTER and the real endpoint behind it.
struct Front {
    worker: usize,
    router: Router,
    real: String,
}

struct Thread {
    ctx: zmq::Context,
    host: String,
    /// Where the ROUTERs' handlers push the messages they receive.
    inbox_addr: String,
    fronts: Vec<Front>,
    /// (front index, routing id) → the DEALER to the real prefiller (`mooncake_wire::zmtp::relay`: at most
    /// [`MAX_LEGS`], idle ones closed after [`LEG_IDLE`]).
    legs: Legs<zmq::Socket>,
    emit: Box<dyn FnMut(Obs) + Send>,
}

fn v6(addr: &str) -> bool {
    addr.strip_prefix("tcp://").is_some_and(|r| r.starts_with('['))
}

impl Thread {
    fn run(mut self, wake: zmq::Socket, inbox: zmq::Socket, cmds: mpsc::Receiver<Cmd>) {
        let mut last_sweep = Instant::now();
        loop {
            let (wake_ready, inbox_ready, legs_ready) = {
                let (keys, dealers): (Vec<&LegKey>, Vec<&zmq::Socket>) = self.legs.iter().unzip();
                let mut items = vec![wake.as_poll_item(zmq::POLLIN), inbox.as_poll_item(zmq::POLLIN)];
                items.extend(dealers.iter().map(|d| d.as_poll_item(zmq::POLLIN)));
                if retry(|| zmq::poll(&mut items, 1000)).is_err() {
                    return;
                }
                (
                    items[0].is_readable(),
                    items[1].is_readable(),
                    keys.iter()
                        .enumerate()
                        .filter(|(i, _)| items[2 + i].is_readable())
                        .map(|(_, k)| (*k).clone())
                        .collect::<Vec<_>>(),
                )
            };
            if wake_ready {
                while retry(|| wake.recv_bytes(zmq::DONTWAIT)).is_ok() {}
                while let Ok(c) = cmds.try_recv() {
                    match c {
                        Cmd::Shutdown => return,
                        Cmd::Add { worker, real, reply } => {
                            let _ = reply.send(self.bind_front(worker, real));
                        }
                    }
                }
            }
            if inbox_ready {
                while let Ok(mut msg) = recv_frames(&inbox, zmq::DONTWAIT) {
                    let f = msg.first().and_then(|b| <[u8; 8]>::try_from(&b[..]).ok()).map(u64::from_le_bytes);
                    let Some(f) = f.map(|f| f as usize).filter(|f| *f < self.fronts.len()) else { continue };
                    msg.remove(0);
                    self.on_decoder_frames(f, msg);
                }
            }
            for k in legs_ready {
                while let Some(dealer) = self.legs.touch(Instant::now(), &k) {
                    let Ok(frames) = recv_frames(dealer, zmq::DONTWAIT) else { break };
                    self.on_prefiller_frames(&k, frames);
                }
            }
            if last_sweep.elapsed() >= Duration::from_secs(1) {
                last_sweep = Instant::now();
                for (k, _dealer) in self.legs.expire(last_sweep) {
                    self.closed(&k);
                }
            }
        }
    }

    fn bind_front(&mut self, worker: usize, real: String) -> Result<String, RelayError> {
        let index = self.fronts.len();
        // The ROUTER's thread pushes each whole message, tagged with this front, to the relay thread; a full
        // inbox makes it wait (the decoders' messages are not dropped).
        let push = retry(|| self.ctx.socket(zmq::PUSH))?;
        push.set_linger(0)?;
        retry(|| push.connect(&self.inbox_addr))?;
        let handler: mooncake_io::router::RouterHandler = Box::new(move |msg: Vec<Vec<u8>>| {
            let mut tagged = Vec::with_capacity(msg.len() + 1);
            tagged.push((index as u64).to_le_bytes().to_vec());
            tagged.extend(msg);
            let _ = send_frames(&push, &tagged, 0);
            vec![]
        });
        let ep =
            if self.host.contains(':') { format!("tcp://[{}]:*", self.host) } else { format!("tcp://{}:*", self.host) };
        let router = Router::bind(&ep, handler).map_err(|source| RelayError::Bind { endpoint: ep.clone(), source })?;
        let bound = router.endpoint().to_string();
        self.fronts.push(Front { worker, router, real });
        Ok(bound)
    }

    /// Reports a leg the table closed (its DEALER is dropped by the caller).
    fn closed(&mut self, k: &LegKey) {
        (self.emit)(Obs::Closed { worker: self.fronts[k.0].worker, rid: k.1.clone() });
    }

    fn on_decoder_frames(&mut self, f: usize, mut msg: Vec<Vec<u8>>) {
        if msg.is_empty() {
            return;
        }
        let rid = msg.remove(0);
        let key = (f, rid);
        let (fronts, ctx) = (&self.fronts, &self.ctx);
        let routed = match self.legs.route(Instant::now(), &key, || open_leg(ctx, &fronts[f].real, &key.1)) {
            Ok(r) => r,
            Err(e) => {
                let real = &self.fronts[f].real;
                (self.emit)(Obs::Trouble(format!("cannot relay a decoder connection to {real}: {e}")));
                return;
            }
        };
        let sent = send_frames(routed.leg, &msg, zmq::DONTWAIT);
        if let Some((evicted, _dealer)) = routed.evicted {
            self.closed(&evicted);
        }
        if let Err(e) = sent {
            (self.emit)(Obs::Trouble(format!("cannot forward a decoder's message to {}: {e}", self.fronts[f].real)));
            return;
        }
        (self.emit)(Obs::Request { worker: self.fronts[f].worker, rid: key.1, frames: msg });
    }

    fn on_prefiller_frames(&mut self, key: &LegKey, frames: Vec<Vec<u8>>) {
        let front = &self.fronts[key.0];
        let mut out = Vec::with_capacity(frames.len() + 1);
        out.push(key.1.clone());
        out.extend(frames.iter().cloned());
        let delivered = front.router.is_connected(&key.1);
        front.router.send_batch(vec![out]);
        (self.emit)(Obs::Reply { worker: front.worker, rid: key.1.clone(), frames, delivered });
    }
}

/// A DEALER to the real prefiller at `real`, under the decoder connection's routing id `rid`.
fn open_leg(ctx: &zmq::Context, real: &str, rid: &[u8]) -> Result<zmq::Socket, RelayError> {
    let s = retry(|| ctx.socket(zmq::DEALER))?;
    if !rid.is_empty() && rid.len() <= 255 {
        s.set_identity(rid).map_err(|source| RelayError::RoutingId { rid: rid.to_vec(), source })?;
    }
    // vLLM's decoder DEALER options (make_zmq_socket): no high-water marks, no linger.
    s.set_linger(0)?;
    s.set_sndhwm(0)?;
    s.set_rcvhwm(0)?;
    s.set_maxmsgsize(limits::MAX_FRAME_BYTES as i64)?;
    if v6(real) {
        s.set_ipv6(true)?;
    }
    retry(|| s.connect(real)).map_err(|source| RelayError::Connect { endpoint: real.to_string(), source })?;
    Ok(s)
}
