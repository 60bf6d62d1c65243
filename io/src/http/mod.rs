//! Bootstrap HTTP: the server (`server`: axum over hyper, vLLM's routes and JSON over the sans-IO registry, within
//! a resource budget) and a minimal HTTP/1.1 client for `POST /register` and `GET /query` (vLLM's bootstrap
//! server is plain HTTP).

mod server;

pub use server::{
    parse_json_body, read_body, serve, BootstrapServer, Exchange, ExchangeLog, HttpLimits, MAX_LOGGED_BODY_BYTES,
};

use std::time::Duration;

use mooncake_wire::limits;
use serde_json::Value as J;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why a bootstrap request or the bootstrap server failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The URL is not `http://host:port[/path]` (the bootstrap server is plain HTTP).
    #[error("{url}: only http:// is supported")]
    Scheme {
        /// The URL as given.
        url: String,
    },
    /// The server's address could not be bound.
    #[error("bind {addr}: {source}")]
    Bind {
        /// The address as given.
        addr: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The TCP connection could not be opened.
    #[error("connect {addr}: {source}")]
    Connect {
        /// `host:port` from the URL.
        addr: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Sending the request or reading the answer failed after the connection was open.
    #[error("{method} {url}: {source}")]
    Io {
        /// The request's method.
        method: String,
        /// The request's URL.
        url: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// No complete answer within the timeout.
    #[error("{method} {url}: timed out")]
    Timeout {
        /// The request's method.
        method: String,
        /// The request's URL.
        url: String,
    },
    /// The answer is not an HTTP/1.1 response this client reads (what is wrong with it, in a few words).
    #[error("{0}")]
    Malformed(&'static str),
    /// The server answered with a status other than the one the call expects.
    #[error("{request} answered {status}{}", if body.is_empty() { String::new() } else { format!(": {body}") })]
    Status {
        /// Method and path, e.g. `POST /register`.
        request: &'static str,
        /// The HTTP status.
        status: u16,
        /// The answer's body, as text (empty when the call does not show it).
        body: String,
    },
    /// The answer's body is not the JSON the call expects.
    #[error("{request}: {source}")]
    Json {
        /// Method and path, e.g. `GET /query`.
        request: &'static str,
        /// What the JSON parser said.
        source: serde_json::Error,
    },
}

impl HttpError {
    /// Whether the request may succeed when tried again: the connection failed or timed out (what vLLM's
    /// registration retries); an answer, even an error status, is final.
    pub fn is_transient(&self) -> bool {
        matches!(self, HttpError::Connect { .. } | HttpError::Io { .. } | HttpError::Timeout { .. })
    }
}

/// A parsed `http://host:port/path`.
fn split_url(url: &str) -> Result<(String, String), HttpError> {
    let rest = url.strip_prefix("http://").ok_or_else(|| HttpError::Scheme { url: url.to_string() })?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    Ok((hostport.to_string(), path.to_string()))
}

/// One HTTP/1.1 request with `Connection: close`; returns status and body. Bounded in time and size.
pub async fn request(
    method: &str,
    url: &str,
    body: Option<&J>,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), HttpError> {
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
) -> Result<RawResponse, HttpError> {
    let (hostport, path) = split_url(url)?;
    let failed = |source| HttpError::Io { method: method.to_string(), url: url.to_string(), source };
    let io = async {
        let mut s = TcpStream::connect(&hostport)
            .await
            .map_err(|source| HttpError::Connect { addr: hostport.clone(), source })?;
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
        s.write_all(&bytes).await.map_err(failed)?;
        let mut resp = Vec::new();
        (&mut s).take(limits::MAX_HTTP_BODY_BYTES as u64 + 16 * 1024).read_to_end(&mut resp).await.map_err(failed)?;
        parse_response(&resp)
    };
    tokio::time::timeout(timeout, io)
        .await
        .map_err(|_| HttpError::Timeout { method: method.to_string(), url: url.to_string() })?
}

fn parse_response(resp: &[u8]) -> Result<RawResponse, HttpError> {
    use HttpError::Malformed;
    let end = resp.windows(4).position(|w| w == b"\r\n\r\n").ok_or(Malformed("no end of HTTP headers"))?;
    let head = std::str::from_utf8(&resp[..end]).map_err(|_| Malformed("HTTP headers are not UTF-8"))?;
    let status: u16 =
        head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(Malformed("bad HTTP status line"))?;
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

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, HttpError> {
    use HttpError::Malformed;
    let mut out = Vec::new();
    loop {
        let nl = b.windows(2).position(|w| w == b"\r\n").ok_or(Malformed("bad chunk"))?;
        let n = usize::from_str_radix(
            std::str::from_utf8(&b[..nl])
                .map_err(|_| Malformed("bad chunk size"))?
                .split(';')
                .next()
                .unwrap_or("")
                .trim(),
            16,
        )
        .map_err(|_| Malformed("bad chunk size"))?;
        b = &b[nl + 2..];
        if n == 0 {
            return Ok(out);
        }
        if b.len() < n + 2 {
            return Err(Malformed("truncated chunk"));
        }
        out.extend_from_slice(&b[..n]);
        b = &b[n + 2..];
    }
}

/// `GET {bootstrap}/query` as a JSON value.
pub async fn query(bootstrap: &str, timeout: Duration) -> Result<J, HttpError> {
    let (status, body) = request("GET", &format!("{}/query", bootstrap.trim_end_matches('/')), None, timeout).await?;
    if status != 200 {
        return Err(HttpError::Status { request: "GET /query", status, body: String::new() });
    }
    serde_json::from_slice(&body).map_err(|source| HttpError::Json { request: "GET /query", source })
}

/// `POST {bootstrap}/register` with vLLM 0.31.0+'s retry policy: 3 attempts on connect errors and timeouts,
/// 1 s then 2 s apart ([`HttpError::is_transient`]); an answer, even an HTTP error status, is final.
pub async fn register(bootstrap: &str, payload: &J, timeout: Duration) -> Result<(), HttpError> {
    let url = format!("{}/register", bootstrap.trim_end_matches('/'));
    let mut delay = Duration::from_secs(1);
    for attempt in 1..=3 {
        match request("POST", &url, Some(payload), timeout).await {
            Ok((200, _)) => return Ok(()),
            Ok((status, body)) => {
                let body = String::from_utf8_lossy(&body).into_owned();
                return Err(HttpError::Status { request: "POST /register", status, body });
            }
            Err(e) if attempt == 3 || !e.is_transient() => return Err(e),
            Err(e) => {
                tracing::warn!(attempt, error = %e, "bootstrap registration failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        }
    }
    unreachable!("the loop returns")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::net::TcpListener;

    #[test]
    fn malformed_answers_and_urls_are_named() {
        assert!(matches!(parse_response(b"HTTP/1.1 200 OK\r\n"), Err(HttpError::Malformed("no end of HTTP headers"))));
        assert!(matches!(parse_response(b"HTTP/1.1 x\r\n\r\n"), Err(HttpError::Malformed("bad HTTP status line"))));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab";
        assert!(matches!(parse_response(chunked), Err(HttpError::Malformed("truncated chunk"))));
        let ok = parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n").unwrap();
        assert_eq!((ok.status, ok.body.as_slice()), (200, &b"ok"[..]));
        let e = split_url("https://127.0.0.1:1/").unwrap_err();
        assert_eq!(e.to_string(), "https://127.0.0.1:1/: only http:// is supported");
        assert!(!e.is_transient());
    }

    /// A server that answers every connection with bytes that are not HTTP.
    async fn garbage_server() -> (String, Arc<Mutex<usize>>, tokio::task::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let served = Arc::new(Mutex::new(0));
        let count = served.clone();
        let task = tokio::spawn(async move {
            while let Ok(Ok((mut s, _))) = tokio::time::timeout(Duration::from_secs(4), l.accept()).await {
                *count.lock().unwrap() += 1;
                // Read the request first (closing with unread bytes would reset the connection), then answer.
                let mut buf = vec![0u8; 4096];
                let _ = tokio::time::timeout(Duration::from_millis(500), s.read(&mut buf)).await;
                let _ = s.write_all(b"garbage").await;
                let _ = s.shutdown().await;
                let _ = tokio::time::timeout(Duration::from_millis(500), s.read_to_end(&mut buf)).await;
            }
        });
        (url, served, task)
    }

    #[tokio::test]
    async fn registration_retries_only_what_may_succeed_again() {
        // A malformed answer is an answer: final at once, no retry (vLLM retries connect errors and timeouts).
        let (url, served, server) = garbage_server().await;
        let start = std::time::Instant::now();
        let e = register(&url, &serde_json::json!({}), Duration::from_secs(2)).await.unwrap_err();
        assert!(matches!(e, HttpError::Malformed(_)), "{e:?}");
        assert!(start.elapsed() < Duration::from_millis(900), "retried: {:?}", start.elapsed());
        assert_eq!(*served.lock().unwrap(), 1, "one request, no retry");
        server.abort();
        // Nothing listening: a connect error, which registration would retry.
        let free = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        let e = query(&format!("http://{free}"), Duration::from_secs(2)).await.unwrap_err();
        assert!(matches!(e, HttpError::Connect { .. }) && e.is_transient(), "{e:?}");
    }
}
