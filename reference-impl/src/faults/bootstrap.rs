//! Faults in a bootstrap server's answers: the peer's own server, unchanged, behind a front on the address the
//! testee reports, which forwards each request as it came and changes the answer as the faults say.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use mooncake_io::http::{read_body, request_raw, serve, HttpError, HttpLimits};
use serde_json::Value as J;
use tokio::net::TcpListener;

use super::Fault;

/// The front; it stops when this is dropped (the server behind it is its owner's).
pub struct FaultyBootstrap {
    /// `http://host:port` of the front.
    pub url: String,
    front: tokio::task::JoinHandle<()>,
}

impl Drop for FaultyBootstrap {
    fn drop(&mut self) {
        self.front.abort();
    }
}

#[derive(Clone)]
struct Front {
    inner: String,
    faults: Vec<Fault>,
}

/// Binds the front at `bind` before the server at `inner` (`http://host:port`, already serving) and serves until
/// dropped.
pub async fn start(bind: &str, inner: String, faults: Vec<Fault>) -> Result<FaultyBootstrap, HttpError> {
    let failed = |source| HttpError::Bind { addr: bind.to_string(), source };
    let listener = TcpListener::bind(bind).await.map_err(failed)?;
    let url = format!("http://{}", listener.local_addr().map_err(failed)?);
    let app = Router::new().fallback(forward).with_state(Front { inner, faults });
    let front = tokio::spawn(serve(listener, app, HttpLimits::default()));
    Ok(FaultyBootstrap { url, front })
}

async fn forward(State(front): State<Front>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    if front.faults.contains(&Fault::CrashOnQuery) && parts.method == "GET" && parts.uri.path() == "/query" {
        std::process::exit(3);
    }
    let body = match read_body(body, &HttpLimits::default()).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let url = format!("{}{path}", front.inner);
    let bytes = (!body.is_empty()).then_some(&body[..]);
    let answer = match request_raw(parts.method.as_str(), &url, content_type, bytes, Duration::from_secs(30)).await {
        Ok(a) => a,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let (status, body) = change(&front.faults, parts.method.as_str(), parts.uri.path(), answer.status, answer.body);
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Some(ct) = answer.content_type.and_then(|c| c.parse().ok()) {
        r.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    r
}

/// An answer (status, body) after the faults.
fn change(faults: &[Fault], method: &str, path: &str, mut status: u16, body: Vec<u8>) -> (u16, Vec<u8>) {
    let register = method == "POST" && path == "/register";
    let query = method == "GET" && path == "/query" && status == 200;
    let Ok(original) = serde_json::from_slice::<J>(&body) else { return (status, body) };
    let mut json = original.clone();
    for f in faults {
        match f {
            Fault::RegisterWrongStatus if register && status == 200 => status = 201,
            Fault::RegisterAcceptsAll if register && (400..422).contains(&status) => status = 200,
            Fault::QueryDropsEngine if query => {
                if let Some(last) = json.as_object().and_then(|o| o.keys().next_back().cloned()) {
                    json.as_object_mut().map(|o| o.remove(&last));
                }
            }
            Fault::QueryExtraKey if query => {
                json.as_object_mut().map(|o| o.insert("zz_extra".into(), J::from(1)));
            }
            _ => {}
        }
    }
    // The body as it came unless a fault changed it (no re-serialisation of an answer left alone).
    let body = if json == original { body } else { serde_json::to_vec(&json).unwrap_or(body) };
    (status, body)
}
