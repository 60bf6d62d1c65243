//! A thread that owns libzmq sockets (the `zmq` crate is blocking) and bridges them to tokio: commands come
//! in on a channel plus an inproc wake-up socket, received frames go out on a tokio channel. One reactor
//! serves a decoder's many short-lived DEALERs (or generation 1's REQs), and at most one libzmq ROUTER: the
//! conformance runner's own prefiller binds one (the reference peer's prefiller serves its ROUTER with a ZMTP
//! server of its own, [`crate::router`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::thread::JoinHandle;

use mooncake_wire::limits;
use tokio::sync::{mpsc as tmpsc, oneshot};

use crate::interrupted::{recv_frames, retry, send_frames};

/// What the reactor received.
#[derive(Debug)]
pub enum Incoming {
    /// A message on the ROUTER: `[routing_id, frames...]`.
    Router(Vec<Vec<u8>>),
    /// A message on an exchange's DEALER (normally one frame).
    Dealer {
        /// The id the DEALER was opened with ([`Reactor::open_dealer`]).
        id: u64,
        /// The message's frames.
        frames: Vec<Vec<u8>>,
    },
    /// A DEALER could not be opened or used.
    DealerError {
        /// The id the DEALER was opened with.
        id: u64,
        /// Why, as libzmq (or the address check) put it.
        error: String,
    },
}

/// Why the reactor could not start, bind or open a socket.
#[derive(Debug, thiserror::Error)]
pub enum ReactorError {
    /// libzmq refused a socket call (`what`: which one).
    #[error("{what}: {source}")]
    Zmq {
        /// The call, e.g. `socket`, `set_linger`.
        what: &'static str,
        /// What libzmq said.
        source: zmq::Error,
    },
    /// The ROUTER could not bind its endpoint.
    #[error("bind {endpoint}: {source}")]
    Bind {
        /// The endpoint as given.
        endpoint: String,
        /// What libzmq said.
        source: zmq::Error,
    },
    /// A DEALER or REQ could not connect to its address.
    #[error("connect {addr}: {source}")]
    Connect {
        /// The address as given.
        addr: String,
        /// What libzmq said.
        source: zmq::Error,
    },
    /// libzmq reported a bound endpoint that is not UTF-8.
    #[error("endpoint is not UTF-8")]
    EndpointNotUtf8,
    /// The reactor thread could not be spawned.
    #[error("spawn the ZeroMQ thread: {0}")]
    Spawn(std::io::Error),
    /// The reactor thread stopped before it answered.
    #[error("the ZeroMQ thread stopped")]
    Stopped,
}

/// The [`ReactorError::Zmq`] of a libzmq call.
fn zmq_call(what: &'static str) -> impl FnOnce(zmq::Error) -> ReactorError {
    move |source| ReactorError::Zmq { what, source }
}

enum Cmd {
    BindRouter { endpoint: String, reply: oneshot::Sender<Result<String, ReactorError>> },
    RouterSend(Vec<Vec<Vec<u8>>>),
    OpenDealer { id: u64, addr: String, messages: Vec<Vec<Vec<u8>>>, req: bool },
    CloseDealer(u64),
    Shutdown,
}

/// The handle of a reactor thread: sends it commands; dropping it stops the thread and closes its sockets.
pub struct Reactor {
    cmds: mpsc::Sender<Cmd>,
    wake: Mutex<zmq::Socket>,
    thread: Option<JoinHandle<()>>,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

fn is_v6_literal(addr: &str) -> bool {
    addr.strip_prefix("tcp://").is_some_and(|r| r.starts_with('['))
}

impl Reactor {
    /// Starts the thread; `incoming` receives everything the sockets receive.
    pub fn start(ctx: &zmq::Context, incoming: tmpsc::UnboundedSender<Incoming>) -> Result<Reactor, ReactorError> {
        let wake_addr = format!("inproc://mooncake-reactor-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let pull = retry(|| ctx.socket(zmq::PULL)).map_err(zmq_call("socket"))?;
        retry(|| pull.bind(&wake_addr)).map_err(|source| ReactorError::Bind { endpoint: wake_addr.clone(), source })?;
        let push = retry(|| ctx.socket(zmq::PUSH)).map_err(zmq_call("socket"))?;
        retry(|| push.connect(&wake_addr))
            .map_err(|source| ReactorError::Connect { addr: wake_addr.clone(), source })?;
        let (tx, rx) = mpsc::channel();
        let ctx = ctx.clone();
        let thread = std::thread::Builder::new()
            .name("mooncake-zmq".into())
            .spawn(move || run(ctx, pull, rx, incoming))
            .map_err(ReactorError::Spawn)?;
        Ok(Reactor { cmds: tx, wake: Mutex::new(push), thread: Some(thread) })
    }

    fn send(&self, c: Cmd) {
        if self.cmds.send(c).is_ok() {
            if let Ok(w) = self.wake.lock() {
                let _ = retry(|| w.send(&[0u8][..], zmq::DONTWAIT));
            }
        }
    }

    /// Binds the ROUTER (`tcp://ip:*` picks a free port, as vLLM's `bind_to_random_port`); returns the bound
    /// endpoint. Its messages arrive as [`Incoming::Router`].
    pub async fn bind_router(&self, endpoint: &str) -> Result<String, ReactorError> {
        let (tx, rx) = oneshot::channel();
        self.send(Cmd::BindRouter { endpoint: endpoint.to_string(), reply: tx });
        rx.await.map_err(|_| ReactorError::Stopped)?
    }

    /// Sends these messages (each `[routing_id, frames...]`) on the ROUTER with one wake-up of the thread; a
    /// routing id that is not connected is dropped, as libzmq does for vLLM's prefiller.
    pub fn router_send_batch(&self, messages: Vec<Vec<Vec<u8>>>) {
        if !messages.is_empty() {
            self.send(Cmd::RouterSend(messages));
        }
    }

    /// Opens a new DEALER to `addr` and sends `payload` as one frame.
    pub fn open_dealer(&self, id: u64, addr: &str, payload: Vec<u8>) {
        self.open_dealer_frames(id, addr, vec![payload]);
    }

    /// Opens a new DEALER and sends a message of these frames (one frame is what vLLM sends).
    pub fn open_dealer_frames(&self, id: u64, addr: &str, frames: Vec<Vec<u8>>) {
        self.open_dealer_messages(id, addr, vec![frames]);
    }

    /// Opens a new DEALER and sends these messages on it, in order (none, one or more: the reference peer's
    /// deliberate faults; vLLM sends one).
    pub fn open_dealer_messages(&self, id: u64, addr: &str, messages: Vec<Vec<Vec<u8>>>) {
        self.send(Cmd::OpenDealer { id, addr: addr.to_string(), messages, req: false });
    }

    /// Opens a new REQ socket (generation 1: linger 0, no other option) and sends `payload`; libzmq adds the
    /// empty delimiter, and the reply arrives as [`Incoming::Dealer`] without it.
    pub fn open_req(&self, id: u64, addr: &str, payload: Vec<u8>) {
        self.send(Cmd::OpenDealer { id, addr: addr.to_string(), messages: vec![vec![payload]], req: true });
    }

    /// Closes the DEALER (or REQ) opened with `id`; anything it receives afterwards is lost. An unknown `id` is
    /// ignored.
    pub fn close_dealer(&self, id: u64) {
        self.send(Cmd::CloseDealer(id));
    }
}

impl Drop for Reactor {
    fn drop(&mut self) {
        self.send(Cmd::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn recv_all(s: &zmq::Socket) -> Option<Vec<Vec<u8>>> {
    recv_frames(s, zmq::DONTWAIT).ok()
}

fn run(ctx: zmq::Context, wake: zmq::Socket, cmds: mpsc::Receiver<Cmd>, out: tmpsc::UnboundedSender<Incoming>) {
    let mut router: Option<zmq::Socket> = None;
    let mut dealers: HashMap<u64, zmq::Socket> = HashMap::new();
    loop {
        let ids: Vec<u64> = dealers.keys().copied().collect();
        let (wake_ready, router_ready, dealer_ready) = {
            let mut items = vec![wake.as_poll_item(zmq::POLLIN)];
            if let Some(r) = &router {
                items.push(r.as_poll_item(zmq::POLLIN));
            }
            for id in &ids {
                items.push(dealers[id].as_poll_item(zmq::POLLIN));
            }
            if retry(|| zmq::poll(&mut items, -1)).is_err() {
                return;
            }
            let off = 1 + router.is_some() as usize;
            (
                items[0].is_readable(),
                router.is_some() && items[1].is_readable(),
                ids.iter()
                    .enumerate()
                    .filter(|(i, _)| items[off + i].is_readable())
                    .map(|(_, id)| *id)
                    .collect::<Vec<_>>(),
            )
        };
        if wake_ready {
            while retry(|| wake.recv_bytes(zmq::DONTWAIT)).is_ok() {}
            while let Ok(c) = cmds.try_recv() {
                match c {
                    Cmd::Shutdown => return,
                    Cmd::BindRouter { endpoint, reply } => {
                        let bound = bind_router(&ctx, &endpoint);
                        let r = bound.map(|(s, ep)| {
                            router = Some(s);
                            ep
                        });
                        let _ = reply.send(r);
                    }
                    Cmd::RouterSend(messages) => {
                        if let Some(r) = &router {
                            for frames in messages {
                                let _ = send_frames(r, &frames, zmq::DONTWAIT);
                            }
                        }
                    }
                    Cmd::OpenDealer { id, addr, messages, req } => {
                        let r = (|| -> Result<zmq::Socket, ReactorError> {
                            let kind = if req { zmq::REQ } else { zmq::DEALER };
                            let s = retry(|| ctx.socket(kind)).map_err(zmq_call("socket"))?;
                            // vLLM's make_zmq_socket options for the decoder's DEALER (a REQ gets linger 0 only).
                            s.set_linger(0).map_err(zmq_call("set_linger"))?;
                            if !req {
                                s.set_rcvhwm(0).map_err(zmq_call("set_rcvhwm"))?;
                                s.set_sndhwm(0).map_err(zmq_call("set_sndhwm"))?;
                            }
                            s.set_maxmsgsize(limits::MAX_FRAME_BYTES as i64).map_err(zmq_call("set_maxmsgsize"))?;
                            if is_v6_literal(&addr) {
                                s.set_ipv6(true).map_err(zmq_call("set_ipv6"))?;
                            }
                            retry(|| s.connect(&addr))
                                .map_err(|source| ReactorError::Connect { addr: addr.clone(), source })?;
                            for frames in &messages {
                                send_frames(&s, frames, 0).map_err(zmq_call("send"))?;
                            }
                            Ok(s)
                        })();
                        match r {
                            Ok(s) => {
                                dealers.insert(id, s);
                            }
                            Err(error) => {
                                let _ = out.send(Incoming::DealerError { id, error: error.to_string() });
                            }
                        }
                    }
                    Cmd::CloseDealer(id) => {
                        dealers.remove(&id);
                    }
                }
            }
        }
        if let Some(r) = router.as_ref().filter(|_| router_ready) {
            while let Some(frames) = recv_all(r) {
                if out.send(Incoming::Router(frames)).is_err() {
                    return;
                }
            }
        }
        for id in dealer_ready {
            if let Some(s) = dealers.get(&id) {
                while let Some(frames) = recv_all(s) {
                    if out.send(Incoming::Dealer { id, frames }).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// A ROUTER as vLLM's prefiller creates it (no options), plus a frame-size cap and no linger; returns the
/// socket and its bound endpoint.
fn bind_router(ctx: &zmq::Context, endpoint: &str) -> Result<(zmq::Socket, String), ReactorError> {
    let s = retry(|| ctx.socket(zmq::ROUTER)).map_err(zmq_call("socket"))?;
    s.set_maxmsgsize(limits::MAX_FRAME_BYTES as i64).map_err(zmq_call("set_maxmsgsize"))?;
    s.set_linger(0).map_err(zmq_call("set_linger"))?;
    if is_v6_literal(endpoint) {
        s.set_ipv6(true).map_err(zmq_call("set_ipv6"))?;
    }
    retry(|| s.bind(endpoint)).map_err(|source| ReactorError::Bind { endpoint: endpoint.to_string(), source })?;
    let ep =
        s.get_last_endpoint().map_err(zmq_call("get_last_endpoint"))?.map_err(|_| ReactorError::EndpointNotUtf8)?;
    Ok((s, ep))
}
