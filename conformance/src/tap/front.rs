//! The tap's bootstrap server: what prefillers register with and decoders query. It answers with the
//! revision's registry (as vLLM's bootstrap server), or forwards every request to the real server
//! (`--upstream`) and returns its answer as it came. Either way, each worker that registers successfully (or
//! that a `/query` answer lists) gets a ROUTER of the tap's own, and `/query` answers hand decoders the tap's
//! endpoints instead of the workers' — the only change the tap makes. The trace records what the real server
//! was asked and answered.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use mooncake_io::http::HttpLimits;
use mooncake_wire::proto::Registry;
use serde_json::{json, Value as J};
use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedSender;

use super::relay::Relay;
use super::workers::{endpoints_in, Workers};
use super::{HttpSeen, Seen};
use crate::run::RunError;

/// Who answers bootstrap requests.
pub(crate) enum Answerer {
    /// The tap itself, with the revision's registry semantics.
    Registry(Mutex<Registry>),
    /// The real bootstrap server at this base URL (`http://host:port`).
    Upstream(String),
}

#[derive(Clone)]
struct St {
    answer: Arc<Answerer>,
    workers: Arc<Workers>,
    relay: Arc<Relay>,
    seen: UnboundedSender<Seen>,
    budget: HttpLimits,
}

/// How long the tap waits for the upstream server.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) struct Front {
    pub(crate) addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Front {
    /// Binds `bind` (a port in use is an environment failure) and serves until dropped, within the bootstrap
    /// server's budget (`HttpLimits::default()`: the same timeouts, connection and body limits).
    pub(crate) async fn start(
        bind: &str,
        answer: Answerer,
        workers: Arc<Workers>,
        relay: Arc<Relay>,
        seen: UnboundedSender<Seen>,
    ) -> Result<Front, RunError> {
        Front::start_within(bind, answer, workers, relay, seen, HttpLimits::default()).await
    }

    /// [`Front::start`] within a budget of its own (tests scale it down).
    pub(crate) async fn start_within(
        bind: &str,
        answer: Answerer,
        workers: Arc<Workers>,
        relay: Arc<Relay>,
        seen: UnboundedSender<Seen>,
        budget: HttpLimits,
    ) -> Result<Front, RunError> {
        let listener = TcpListener::bind(bind).await.map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                RunError::environment(format!("--bootstrap-bind {bind}: the port is in use"))
            }
            std::io::ErrorKind::AddrNotAvailable | std::io::ErrorKind::InvalidInput => {
                RunError::usage(format!("--bootstrap-bind {bind}: {e}"))
            }
            _ => RunError::environment(format!("--bootstrap-bind {bind}: {e}")),
        })?;
        let addr = listener.local_addr().map_err(|e| RunError::environment(e.to_string()))?;
        let st = St { answer: Arc::new(answer), workers, relay, seen, budget };
        let app = Router::new().fallback(handle).with_state(st);
        let task = tokio::spawn(mooncake_io::http::serve(listener, app, budget));
        Ok(Front { addr, task })
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The registry's answer, as the reference bootstrap server gives it (a body that is not JSON: 422).
fn registry_answer(reg: &Mutex<Registry>, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    match mooncake_io::http::parse_json_body(body) {
        Err(invalid) => (422, invalid.to_vec()),
        Ok(b) => {
            let r = reg.lock().unwrap_or_else(|p| p.into_inner()).handle(method, path, b.as_ref());
            (r.status, r.body.to_string().into_bytes())
        }
    }
}

/// One bootstrap request: answered (by the registry or upstream), with the workers it names tapped, its
/// `/query` answer handing out the tap's endpoints, and recorded.
async fn handle(State(st): State<St>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let (method, uri, headers) = (parts.method, parts.uri, parts.headers);
    let body = match mooncake_io::http::read_body(body, &st.budget).await {
        Ok(b) => b,
        Err(refused) => {
            let _ = st.seen.send(Seen::Trouble {
                environment: false,
                text: format!("the tap's bootstrap server refused {method} {}: body too large or too slow", uri.path()),
            });
            return refused;
        }
    };
    let path = uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| uri.path().to_string());
    let (status, content_type, answer) = match &*st.answer {
        Answerer::Registry(reg) => {
            let (s, b) = registry_answer(reg, method.as_str(), uri.path(), &body);
            (s, "application/json".to_string(), b)
        }
        Answerer::Upstream(base) => {
            let ct = headers.get("content-type").and_then(|v| v.to_str().ok());
            match upstream_answer(&st, base, method.as_str(), &path, ct, &body).await {
                Ok(a) => a,
                Err(gateway) => return gateway,
            }
        }
    };
    let route = (method.as_str(), uri.path());
    for real in workers_named(route, status, &body, &answer) {
        if let Err(e) = st.workers.tap(&real, &st.relay).await {
            let _ = st.seen.send(Seen::Trouble {
                environment: false,
                text: format!("cannot tap the worker at {real}: {e} (decoders are handed its own address)"),
            });
        }
    }
    let handed = if route == ("GET", "/query") {
        match std::str::from_utf8(&answer) {
            Ok(t) => st.workers.rewrite(t).into_bytes(),
            Err(_) => answer.clone(),
        }
    } else {
        answer.clone()
    };
    // Recorded before the answer leaves, so the trace has it before anything the answer leads to.
    let _ = st.seen.send(Seen::Http(HttpSeen {
        method: method.to_string(),
        path,
        request: body.to_vec(),
        status,
        response: answer,
    }));
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, [("content-type", content_type)], handed).into_response()
}

/// The real server's answer (status, content type, body) to the request forwarded as it came; `Err`: the
/// tap's own 502 when the server does not answer, which is trouble of the surroundings.
async fn upstream_answer(
    st: &St,
    base: &str,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<(u16, String, Vec<u8>), Response> {
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let sent = if body.is_empty() { None } else { Some(body) };
    match mooncake_io::http::request_raw(method, &url, content_type, sent, UPSTREAM_TIMEOUT).await {
        Ok(r) => Ok((r.status, r.content_type.unwrap_or_else(|| "application/json".into()), r.body)),
        Err(e) => {
            let _ = st.seen.send(Seen::Trouble {
                environment: true,
                text: format!("the upstream bootstrap server did not answer {method} {path}: {e}"),
            });
            Err((
                StatusCode::BAD_GATEWAY,
                [("content-type", "application/json")],
                json!({"detail": format!("mooncake tap: upstream {url}: {e}")}).to_string(),
            )
                .into_response())
        }
    }
}

/// Workers to stand in front of: a successful registration's, and any a successful `/query` answer lists (a
/// worker that registered before the tap started).
fn workers_named(route: (&str, &str), status: u16, request: &[u8], answer: &[u8]) -> Vec<String> {
    if status != 200 {
        return vec![];
    }
    match route {
        ("POST", "/register") => serde_json::from_slice::<J>(request)
            .ok()
            .and_then(|b| b.get("addr").and_then(J::as_str).map(String::from))
            .into_iter()
            .collect(),
        ("GET", "/query") => serde_json::from_slice::<J>(answer).map(|v| endpoints_in(&v)).unwrap_or_default(),
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mooncake_wire::bootstrap::BootstrapSpec;
    use mooncake_wire::spec::Spec;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    const WAIT: Duration = Duration::from_secs(10);

    /// The bootstrap budget scaled down so that each timeout costs the test a fraction of a second.
    fn small_budget() -> HttpLimits {
        HttpLimits {
            headers: Duration::from_millis(300),
            body: Duration::from_millis(300),
            max_connections: 8,
            max_per_host: 4,
        }
    }

    async fn front() -> (Front, tokio::sync::mpsc::UnboundedReceiver<Seen>) {
        let spec = BootstrapSpec::new(Spec::builtin().revision("vllm-0.33.0").unwrap().clone()).unwrap().unwrap();
        let relay = Arc::new(Relay::start("127.0.0.1", Box::new(|_| {})).unwrap());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let answer = Answerer::Registry(Mutex::new(Registry::new(spec)));
        let front = Front::start_within("127.0.0.1:0", answer, Arc::default(), relay, tx, small_budget()).await;
        (front.unwrap(), rx)
    }

    /// The status line of the answer to `request`, sent whole on a connection of its own.
    async fn status_of(front: &Front, request: &[u8]) -> String {
        let mut s = TcpStream::connect(front.addr).await.unwrap();
        s.write_all(request).await.unwrap();
        let mut got = vec![];
        let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut got)).await;
        String::from_utf8_lossy(&got).lines().next().unwrap_or("").to_string()
    }

    const QUERY: &[u8] = b"GET /query HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n";

    /// Whether the front closed the connection within the wait (it was open for ever before issue 34).
    async fn closed(s: &mut TcpStream) -> bool {
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(WAIT, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    }

    /// Issue 34: the tap's bootstrap front served with `axum::serve`, which has no header timeout and no
    /// connection limit: a client trickling its headers was kept for as long as it liked, as many as it opened.
    /// It now serves within the bootstrap server's budget, and a well-behaved client is served meanwhile.
    #[tokio::test]
    async fn trickled_headers_are_cut_off_and_queries_are_served_meanwhile() {
        let (front, _seen) = front().await;
        let mut slow = TcpStream::connect(front.addr).await.unwrap();
        slow.write_all(b"GET /query HTTP/1.1\r\nhost: t\r\n").await.unwrap();
        assert!(status_of(&front, QUERY).await.starts_with("HTTP/1.1 200"), "a query was not served meanwhile");
        assert!(closed(&mut slow).await, "a connection trickling its headers was kept");
        assert!(status_of(&front, QUERY).await.starts_with("HTTP/1.1 200"), "a query was not served after");
    }

    #[tokio::test]
    async fn bodies_too_large_or_too_slow_are_refused_and_reported() {
        let (front, mut seen) = front().await;
        let big = vec![b'x'; mooncake_wire::limits::MAX_HTTP_REQUEST_BODY_BYTES + 1];
        let mut request =
            format!("POST /register HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n", big.len()).into_bytes();
        request.extend_from_slice(&big);
        assert!(status_of(&front, &request).await.starts_with("HTTP/1.1 413"));
        let slow = b"POST /register HTTP/1.1\r\nhost: t\r\ncontent-length: 100\r\nconnection: close\r\n\r\n{";
        assert!(status_of(&front, slow).await.starts_with("HTTP/1.1 408"));
        let mut troubles = 0;
        while let Ok(s) = seen.try_recv() {
            troubles += matches!(s, Seen::Trouble { .. }) as usize;
        }
        assert_eq!(troubles, 2, "each refusal is reported to the recorder");
    }

    #[tokio::test]
    async fn connections_over_the_per_host_budget_are_closed_at_once() {
        let (front, _seen) = front().await;
        let mut held = vec![];
        for _ in 0..small_budget().max_per_host {
            held.push(TcpStream::connect(front.addr).await.unwrap());
        }
        // Accepted in order: give the front a moment to take the held ones' slots.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut over = TcpStream::connect(front.addr).await.unwrap();
        let mut buf = [0u8; 16];
        let r = tokio::time::timeout(Duration::from_millis(200), over.read(&mut buf)).await;
        assert!(matches!(r, Ok(Ok(0)) | Ok(Err(_))), "a connection over the per-host budget was kept: {r:?}");
        drop(held);
    }
}
