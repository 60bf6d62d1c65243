//! Bootstrap HTTP: the server (axum, vLLM's routes and JSON over the sans-IO [`Registry`]) and a minimal
//! HTTP/1.1 client for `POST /register` and `GET /query` (vLLM's bootstrap server is plain HTTP).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use mooncake_wire::limits;
use mooncake_wire::proto::Registry;
use serde_json::Value as J;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Every request and answer, for the conformance runner's checks and for logs.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The HTTP method (`GET`, `POST`, ...).
    pub method: String,
    /// The request path, without the query string.
    pub path: String,
    /// The request body parsed as JSON; `None` when the body was empty or not JSON.
    pub request: Option<J>,
    /// The HTTP status of the answer.
    pub status: u16,
    /// The JSON body of the answer.
    pub response: J,
}

#[derive(Clone)]
struct AppState {
    registry: Arc<Mutex<Registry>>,
    log: Arc<Mutex<Vec<Exchange>>>,
}

async fn handle(State(st): State<AppState>, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path().to_string();
    let parsed: Result<Option<J>, String> =
        if body.is_empty() { Ok(None) } else { serde_json::from_slice(&body).map(Some).map_err(|e| e.to_string()) };
    let (status, response, request) = match parsed {
        Err(e) => (
            422,
            serde_json::json!({"detail": [{"type": "json_invalid", "loc": ["body"], "msg": format!("JSON decode error: {e}")}]}),
            None,
        ),
        Ok(b) => {
            let r = st.registry.lock().expect("registry").handle(method.as_str(), &path, b.as_ref());
            (r.status, r.body, b)
        }
    };
    tracing::debug!(%method, %path, status, "bootstrap");
    st.log.lock().expect("log").push(Exchange {
        method: method.to_string(),
        path,
        request,
        status,
        response: response.clone(),
    });
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, [("content-type", "application/json")], response.to_string()).into_response()
}

/// A running bootstrap server.
pub struct BootstrapServer {
    /// The address it listens on (the bound port when it was started on port 0).
    pub addr: SocketAddr,
    /// The registry that answers the requests; shared with the server, so it can be read or changed while it
    /// runs.
    pub registry: Arc<Mutex<Registry>>,
    /// Every exchange so far, oldest first.
    pub log: Arc<Mutex<Vec<Exchange>>>,
    task: tokio::task::JoinHandle<()>,
}

impl BootstrapServer {
    /// Binds `addr` (port 0 picks one) and serves until dropped.
    pub async fn start(addr: &str, registry: Registry) -> Result<BootstrapServer, String> {
        let listener = TcpListener::bind(addr).await.map_err(|e| format!("bind {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let st = AppState { registry: Arc::new(Mutex::new(registry)), log: Arc::default() };
        let app = Router::new()
            .fallback(handle)
            .layer(axum::extract::DefaultBodyLimit::max(limits::MAX_HTTP_BODY_BYTES))
            .with_state(st.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(BootstrapServer { addr, registry: st.registry, log: st.log, task })
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

/// A parsed `http://host:port/path`.
fn split_url(url: &str) -> Result<(String, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url}: only http:// is supported"))?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    Ok((hostport.to_string(), path.to_string()))
}

/// One HTTP/1.1 request with `Connection: close`; returns status and body. Bounded in time and size.
pub async fn request(method: &str, url: &str, body: Option<&J>, timeout: Duration) -> Result<(u16, Vec<u8>), String> {
    let payload = body.map(|b| b.to_string());
    let content_type = body.map(|_| "application/json");
    request_raw(method, url, content_type, payload.as_deref().map(str::as_bytes), timeout)
        .await
        .map(|r| (r.status, r.body))
}

/// An HTTP answer as it came: status, `Content-Type` (if any) and body bytes.
#[derive(Clone, Debug)]
pub struct RawResponse {
    /// The HTTP status code.
    pub status: u16,
    /// The `Content-Type` header's value, if it had one.
    pub content_type: Option<String>,
    /// The body, as received.
    pub body: Vec<u8>,
}

/// One HTTP/1.1 request with these exact body bytes (`None`: no body), `Connection: close`. Bounded in time and
/// size. `url` may carry a query string.
pub async fn request_raw(
    method: &str,
    url: &str,
    content_type: Option<&str>,
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<RawResponse, String> {
    let (hostport, path) = split_url(url)?;
    let io = async {
        let mut s = TcpStream::connect(&hostport).await.map_err(|e| format!("connect {hostport}: {e}"))?;
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\nAccept: */*\r\n");
        if let Some(ct) = content_type {
            req.push_str(&format!("Content-Type: {ct}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body.unwrap_or_default());
        s.write_all(&bytes).await.map_err(|e| e.to_string())?;
        let mut resp = Vec::new();
        (&mut s)
            .take(limits::MAX_HTTP_BODY_BYTES as u64 + 16 * 1024)
            .read_to_end(&mut resp)
            .await
            .map_err(|e| e.to_string())?;
        parse_response(&resp)
    };
    tokio::time::timeout(timeout, io).await.map_err(|_| format!("{method} {url}: timed out"))?
}

fn parse_response(resp: &[u8]) -> Result<RawResponse, String> {
    let end = resp.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no end of HTTP headers")?;
    let head = std::str::from_utf8(&resp[..end]).map_err(|_| "HTTP headers are not UTF-8")?;
    let status: u16 = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or("bad HTTP status line")?;
    let body = &resp[end + 4..];
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.trim().eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_string())
        })
    };
    let chunked = header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    Ok(RawResponse {
        status,
        content_type: header("content-type"),
        body: if chunked { dechunk(body)? } else { body.to_vec() },
    })
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let nl = b.windows(2).position(|w| w == b"\r\n").ok_or("bad chunk")?;
        let n = usize::from_str_radix(
            std::str::from_utf8(&b[..nl]).map_err(|_| "bad chunk size")?.split(';').next().unwrap_or("").trim(),
            16,
        )
        .map_err(|_| "bad chunk size")?;
        b = &b[nl + 2..];
        if n == 0 {
            return Ok(out);
        }
        if b.len() < n + 2 {
            return Err("truncated chunk".into());
        }
        out.extend_from_slice(&b[..n]);
        b = &b[n + 2..];
    }
}

/// `GET {bootstrap}/query` as a JSON value.
pub async fn query(bootstrap: &str, timeout: Duration) -> Result<J, String> {
    let (status, body) = request("GET", &format!("{}/query", bootstrap.trim_end_matches('/')), None, timeout).await?;
    if status != 200 {
        return Err(format!("GET /query answered {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("GET /query: {e}"))
}

/// `POST {bootstrap}/register` with vLLM 0.31.0+'s retry policy: 3 attempts on connect errors and timeouts,
/// 1 s then 2 s apart; an HTTP error status is final.
pub async fn register(bootstrap: &str, payload: &J, timeout: Duration) -> Result<(), String> {
    let url = format!("{}/register", bootstrap.trim_end_matches('/'));
    let mut delay = Duration::from_secs(1);
    for attempt in 1..=3 {
        match request("POST", &url, Some(payload), timeout).await {
            Ok((200, _)) => return Ok(()),
            Ok((s, body)) => return Err(format!("POST /register answered {s}: {}", String::from_utf8_lossy(&body))),
            Err(e) if attempt == 3 => return Err(e),
            Err(e) => {
                tracing::warn!(attempt, error = %e, "bootstrap registration failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        }
    }
    unreachable!("the loop returns")
}
