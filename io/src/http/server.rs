//! The bootstrap server: vLLM's routes and JSON over the sans-IO [`Registry`], served by hyper within a budget
//! ([`HttpLimits`]): headers and bodies within their timeouts, request bodies up to
//! `limits::MAX_HTTP_REQUEST_BODY_BYTES`, so many connections in all and per host, one shared copy of the
//! `GET /query` answer, and a bounded log.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use mooncake_wire::limits;
use mooncake_wire::proto::Registry;
use serde_json::Value as J;
use tokio::net::TcpListener;

use super::HttpError;
use crate::admission::{Occupancy, Slot};
use crate::lock;

/// Every request and answer, for the conformance runner's checks and for logs.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The HTTP method (`GET`, `POST`, ...).
    pub method: String,
    /// The request path, without the query string.
    pub path: String,
    /// The request body parsed as JSON; `None` when the body was empty, not JSON, or over
    /// [`MAX_LOGGED_BODY_BYTES`].
    pub request: Option<J>,
    /// The HTTP status of the answer.
    pub status: u16,
    /// The JSON body of the answer; `None` when its text is over [`MAX_LOGGED_BODY_BYTES`] (a large
    /// `GET /query` answer is not copied into the log).
    pub response: Option<J>,
}

/// Longest request or answer body, as text, that the log keeps with its exchange.
pub const MAX_LOGGED_BODY_BYTES: usize = 4096;

/// The server's log of exchanges, bounded: at most [`limits::MAX_BOOTSTRAP_LOG_ENTRIES`], the oldest half dropped
/// when it is full, each body kept only up to [`MAX_LOGGED_BODY_BYTES`].
#[derive(Debug, Default)]
pub struct ExchangeLog {
    entries: Vec<Exchange>,
    dropped: usize,
}

impl ExchangeLog {
    fn push(&mut self, x: Exchange) {
        if self.entries.len() >= limits::MAX_BOOTSTRAP_LOG_ENTRIES {
            let n = self.entries.len() - limits::MAX_BOOTSTRAP_LOG_ENTRIES / 2;
            self.entries.drain(..n);
            self.dropped += n;
        }
        self.entries.push(x);
    }

    /// The exchanges kept, oldest first.
    pub fn iter(&self) -> std::slice::Iter<'_, Exchange> {
        self.entries.iter()
    }

    /// How many exchanges were dropped to keep the log within its bound.
    pub fn dropped(&self) -> usize {
        self.dropped
    }
}

/// The bootstrap server's resource budget. [`HttpLimits::default`] is the one documented in
/// `mooncake_wire::limits` and RELIABILITY.md; tests scale it down.
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// How long a connection has to send a request's headers (also how long it may idle between requests).
    pub headers: Duration,
    /// How long a request's body may take to arrive once its headers did.
    pub body: Duration,
    /// Connections open at once, in all.
    pub max_connections: usize,
    /// Connections open at once from one IP address.
    pub max_per_host: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            headers: Duration::from_secs(limits::HANDSHAKE_TIMEOUT_SECS),
            body: Duration::from_secs(limits::STALLED_MESSAGE_TIMEOUT_SECS),
            max_connections: limits::MAX_SERVER_CONNECTIONS,
            max_per_host: limits::MAX_SERVER_CONNECTIONS_PER_HOST,
        }
    }
}

#[derive(Clone)]
struct AppState {
    registry: Arc<Mutex<Registry>>,
    log: Arc<Mutex<ExchangeLog>>,
    /// The last `GET /query` answer as sent, with the registry generation it was made at: concurrent queries
    /// share one buffer instead of one copy each.
    answer: Arc<Mutex<Option<(u64, Bytes)>>>,
    budget: HttpLimits,
}

fn json_answer(status: u16, body: Bytes) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, [("content-type", "application/json")], body).into_response()
}

/// Reads a request's body within `budget` (at most `limits::MAX_HTTP_REQUEST_BODY_BYTES`, within
/// `budget.body`); the answer to send instead when it cannot (413 too large, 408 too slow).
pub async fn read_body(body: axum::body::Body, budget: &HttpLimits) -> Result<Bytes, Response> {
    match tokio::time::timeout(budget.body, axum::body::to_bytes(body, limits::MAX_HTTP_REQUEST_BODY_BYTES)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => {
            let detail =
                format!("request body not read ({e}; at most {} bytes, limits)", limits::MAX_HTTP_REQUEST_BODY_BYTES);
            Err(json_answer(413, serde_json::json!({ "detail": detail }).to_string().into()))
        }
        Err(_) => {
            let detail = format!("request body not complete within {:?} (limits)", budget.body);
            Err(json_answer(408, serde_json::json!({ "detail": detail }).to_string().into()))
        }
    }
}

/// The registry's answer to this request, as sent; a query's is shared while the registry does not change.
fn answer(st: &AppState, method: &str, path: &str, body: Option<&J>) -> (u16, Bytes) {
    let mut registry = lock(&st.registry);
    let is_query = method == "GET" && path == "/query";
    if is_query {
        if let Some((generation, bytes)) = &*lock(&st.answer) {
            if *generation == registry.generation() {
                return (200, bytes.clone());
            }
        }
    }
    let reply = registry.handle(method, path, body);
    let bytes = Bytes::from(reply.body.to_string());
    if is_query && reply.status == 200 {
        *lock(&st.answer) = Some((registry.generation(), bytes.clone()));
    }
    (reply.status, bytes)
}

async fn handle(State(st): State<AppState>, req: axum::extract::Request) -> Response {
    let (parts, body) = req.into_parts();
    let (method, path) = (parts.method, parts.uri.path().to_string());
    let body = match read_body(body, &st.budget).await {
        Ok(b) => b,
        Err(refused) => {
            tracing::warn!(%method, %path, "bootstrap: request refused");
            return refused;
        }
    };
    let (status, response, request) = match parse_json_body(&body) {
        Err(invalid) => (422, invalid, None),
        Ok(b) => {
            let (status, bytes) = answer(&st, method.as_str(), &path, b.as_ref());
            (status, bytes, b.filter(|_| body.len() <= MAX_LOGGED_BODY_BYTES))
        }
    };
    tracing::debug!(%method, %path, status, "bootstrap");
    let logged = (response.len() <= MAX_LOGGED_BODY_BYTES).then(|| serde_json::from_slice(&response).ok()).flatten();
    lock(&st.log).push(Exchange { method: method.to_string(), path, request, status, response: logged });
    json_answer(status, response)
}

/// A request body as the registry takes it: none when empty, else its JSON. A body that is not JSON gets
/// FastAPI's 422 `json_invalid` answer (vLLM's bootstrap server is FastAPI), returned as the `Err` to send.
pub fn parse_json_body(body: &[u8]) -> Result<Option<J>, Bytes> {
    if body.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(body).map(Some).map_err(|e| {
        let detail =
            serde_json::json!([{"type": "json_invalid", "loc": ["body"], "msg": format!("JSON decode error: {e}")}]);
        Bytes::from(serde_json::json!({ "detail": detail }).to_string())
    })
}

/// A running bootstrap server.
pub struct BootstrapServer {
    /// The address it listens on (the bound port when it was started on port 0).
    pub addr: SocketAddr,
    /// The registry that answers the requests; shared with the server, so it can be read or changed while it
    /// runs.
    pub registry: Arc<Mutex<Registry>>,
    /// The exchanges so far, oldest first (bounded: see [`ExchangeLog`]).
    pub log: Arc<Mutex<ExchangeLog>>,
    /// The shared query answer, for the tests that check it is shared.
    #[cfg(test)]
    answer: Arc<Mutex<Option<(u64, Bytes)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl BootstrapServer {
    /// Binds `addr` (port 0 picks one) and serves until dropped, within the default budget.
    pub async fn start(addr: &str, registry: Registry) -> Result<BootstrapServer, HttpError> {
        BootstrapServer::start_with(addr, registry, HttpLimits::default()).await
    }

    /// [`BootstrapServer::start`] with a resource budget of its own.
    pub async fn start_with(addr: &str, registry: Registry, budget: HttpLimits) -> Result<BootstrapServer, HttpError> {
        let bind = |source| HttpError::Bind { addr: addr.to_string(), source };
        let listener = TcpListener::bind(addr).await.map_err(bind)?;
        let addr = listener.local_addr().map_err(bind)?;
        let st =
            AppState { registry: Arc::new(Mutex::new(registry)), log: Arc::default(), answer: Arc::default(), budget };
        let app = Router::new().fallback(handle).with_state(st.clone());
        let task = tokio::spawn(serve(listener, app, budget));
        Ok(BootstrapServer {
            addr,
            registry: st.registry,
            log: st.log,
            #[cfg(test)]
            answer: st.answer,
            task,
        })
    }

    /// Its base URL, `http://host:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for BootstrapServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `app` on `listener` within `budget`: connections over the budget (in all, per host) are closed at
/// once, each accepted one is served on a task of its own, its request heads must arrive within
/// `budget.headers` and be at most 16 KiB (hyper closes the connection otherwise). Bodies are the handler's
/// to read with [`read_body`] (within `budget.body`, else 408). Runs until the task is aborted. The bootstrap
/// server and the conformance tap's bootstrap front both serve through it.
pub async fn serve(listener: TcpListener, app: Router, budget: HttpLimits) {
    let occupancy = Occupancy::shared();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors, say: the connection waits in the backlog until one is closed.
                tracing::warn!(error = %e, "bootstrap: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let slot = match Slot::take(&occupancy, peer.ip(), budget.max_connections, budget.max_per_host) {
            Ok(s) => s,
            Err(why) => {
                tracing::warn!(%peer, why, "bootstrap: connection refused");
                continue;
            }
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(budget.headers)
                .max_header_size(MAX_HEADER_BYTES)
                .max_buf_size(MAX_HEADER_BYTES * 4)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "bootstrap: connection closed");
            }
        });
    }
}

/// Largest request head (request line and headers) the bootstrap server reads, in bytes.
const MAX_HEADER_BYTES: usize = 16 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use mooncake_wire::bootstrap::BootstrapSpec;
    use mooncake_wire::spec::Spec;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpSocket, TcpStream};

    const WAIT: Duration = Duration::from_secs(10);

    fn registry() -> Registry {
        Registry::new(BootstrapSpec::new(Spec::builtin().revision("vllm-0.33.0").unwrap().clone()).unwrap().unwrap())
    }

    /// The budget scaled down so that a test waits a fraction of a second for each timeout.
    fn small_budget() -> HttpLimits {
        HttpLimits {
            headers: Duration::from_millis(300),
            body: Duration::from_millis(300),
            max_connections: 8,
            max_per_host: 4,
        }
    }

    async fn connect_from(source: &str, server: &BootstrapServer) -> TcpStream {
        let sock = TcpSocket::new_v4().unwrap();
        sock.bind(format!("{source}:0").parse().unwrap()).unwrap();
        sock.connect(server.addr).await.unwrap()
    }

    /// Whether the server closed the connection (end of stream or reset) within the wait, whatever it sent first.
    async fn closed(s: &mut TcpStream) -> bool {
        let mut buf = vec![0u8; 4096];
        loop {
            match tokio::time::timeout(WAIT, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    }

    /// A registration and a query by the client the decoder uses: the server serves a well-behaved client.
    async fn served(server: &BootstrapServer, tp: i64) -> bool {
        let body =
            json!({"engine_id": "e", "dp_rank": 0, "tp_rank": tp, "pp_rank": 0, "addr": format!("tcp://a:{tp}")});
        super::super::register(&server.url(), &body, WAIT).await.is_ok()
            && super::super::query(&server.url(), WAIT)
                .await
                .is_ok_and(|q| q["0"]["worker_addr"][tp.to_string()].is_object())
    }

    #[tokio::test]
    async fn trickled_headers_and_bodies_are_cut_off_and_others_served_meanwhile() {
        let server = BootstrapServer::start_with("127.0.0.1:0", registry(), small_budget()).await.unwrap();
        // Headers a byte at a time, never finished (one such client per connection used to be kept for ever).
        let mut slow_head = connect_from("127.0.0.1", &server).await;
        slow_head.write_all(b"GET /query HTTP/1.1\r\nHo").await.unwrap();
        // Headers whole, the body announced and trickled.
        let mut slow_body = connect_from("127.0.0.1", &server).await;
        let head =
            "POST /register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
        slow_body.write_all(head.as_bytes()).await.unwrap();
        let started = std::time::Instant::now();
        let trickle = async {
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let _ = slow_head.write_all(b"s").await;
                let _ = slow_body.write_all(b" ").await;
            }
        };
        let (_, ok) = tokio::join!(trickle, served(&server, 0));
        assert!(ok, "a client was not served while others trickled");
        assert!(closed(&mut slow_head).await, "trickled headers kept their connection");
        let mut answer = vec![];
        let _ = tokio::time::timeout(WAIT, slow_body.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "a trickled body got {answer:?}");
        assert!(started.elapsed() < WAIT);
        assert!(served(&server, 1).await, "not served after the slow clients");
        assert_eq!(server.registry.lock().unwrap().worker_count(), 2, "a cut-off request registered something");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_with_413_and_nothing_is_registered() {
        let server = BootstrapServer::start_with("127.0.0.1:0", registry(), small_budget()).await.unwrap();
        let big = format!("{{\"engine_id\": \"{}\"}}", "x".repeat(limits::MAX_HTTP_REQUEST_BODY_BYTES));
        let url = format!("{}/register", server.url());
        let a = super::super::request_raw("POST", &url, Some("application/json"), Some(big.as_bytes()), WAIT).await;
        assert_eq!(a.unwrap().status, 413);
        assert_eq!(server.registry.lock().unwrap().worker_count(), 0);
        assert!(served(&server, 0).await);
    }

    #[tokio::test]
    async fn connections_over_the_budget_are_refused_and_another_host_is_served() {
        let budget = HttpLimits { headers: WAIT, body: WAIT, ..small_budget() };
        let server = BootstrapServer::start_with("127.0.0.1:0", registry(), budget).await.unwrap();
        // Four idle connections from 127.0.0.1 take that host's share: the fifth is closed at once.
        let mut held = vec![];
        for _ in 0..4 {
            held.push(connect_from("127.0.0.1", &server).await);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut fifth = connect_from("127.0.0.1", &server).await;
        assert!(closed(&mut fifth).await, "a fifth connection from one host was kept");
        // Another host is served, and its request gets the answer.
        let mut other = connect_from("127.0.0.2", &server).await;
        other.write_all(b"GET /query HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut answer = vec![];
        tokio::time::timeout(WAIT, other.read_to_end(&mut answer)).await.unwrap().unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
        // In all (8): four more from other hosts fill it; a ninth from a new host is closed.
        for h in 3..7 {
            held.push(connect_from(&format!("127.0.0.{h}"), &server).await);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut ninth = connect_from("127.0.0.9", &server).await;
        assert!(closed(&mut ninth).await, "a connection over the total was kept");
        // Places are given back when connections close.
        held.clear();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(served(&server, 0).await, "not served once the connections were closed");
    }

    #[test]
    fn the_log_keeps_its_newest_entries_within_its_bound() {
        let mut log = ExchangeLog::default();
        let x = |i: usize| Exchange {
            method: "GET".into(),
            path: format!("/{i}"),
            request: None,
            status: 200,
            response: None,
        };
        for i in 0..limits::MAX_BOOTSTRAP_LOG_ENTRIES * 3 {
            log.push(x(i));
            assert!(log.iter().count() <= limits::MAX_BOOTSTRAP_LOG_ENTRIES);
        }
        let last = limits::MAX_BOOTSTRAP_LOG_ENTRIES * 3 - 1;
        assert_eq!(log.iter().last().unwrap().path, format!("/{last}"));
        assert_eq!(log.dropped() + log.iter().count(), limits::MAX_BOOTSTRAP_LOG_ENTRIES * 3);
    }

    #[tokio::test]
    async fn concurrent_queries_share_one_answer_until_the_registry_changes() {
        let server = BootstrapServer::start("127.0.0.1:0", registry()).await.unwrap();
        assert!(served(&server, 0).await);
        let first = super::super::query(&server.url(), WAIT).await.unwrap();
        let shared = server_answer(&server);
        let again = super::super::query(&server.url(), WAIT).await.unwrap();
        assert_eq!(first, again);
        assert_eq!(server_answer(&server).as_ptr(), shared.as_ptr(), "the second query serialized its own answer");
        // A new worker changes the answer at once.
        assert!(served(&server, 1).await);
        let after = super::super::query(&server.url(), WAIT).await.unwrap();
        assert_ne!(after, first);
        assert!(after["0"]["worker_addr"]["1"].is_object(), "{after}");
    }

    fn server_answer(server: &BootstrapServer) -> Bytes {
        lock(&server.answer).as_ref().map(|(_, b)| b.clone()).expect("a query answer is kept")
    }
}
