//! The tap's bootstrap server: what prefillers register with and decoders query. It answers with the
//! revision's registry (as vLLM's bootstrap server), or forwards every request to the real server
//! (`--upstream`) and returns its answer as it came. Either way, each worker that registers successfully (or
//! that a `/query` answer lists) gets a ROUTER of the tap's own, and `/query` answers hand decoders the tap's
//! endpoints instead of the workers' — the only change the tap makes. The trace records what the real server
//! was asked and answered.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use mooncake_wire::limits;
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
}

/// How long the tap waits for the upstream server.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) struct Front {
    pub(crate) addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Front {
    /// Binds `bind` (a port in use is an environment failure) and serves until dropped.
    pub(crate) async fn start(
        bind: &str,
        answer: Answerer,
        workers: Arc<Workers>,
        relay: Arc<Relay>,
        seen: UnboundedSender<Seen>,
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
        let st = St { answer: Arc::new(answer), workers, relay, seen };
        let app = Router::new()
            .fallback(handle)
            .layer(axum::extract::DefaultBodyLimit::max(limits::MAX_HTTP_BODY_BYTES))
            .with_state(st);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
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
    let parsed: Result<Option<J>, serde_json::Error> =
        if body.is_empty() { Ok(None) } else { serde_json::from_slice(body).map(Some) };
    let (status, answer) = match parsed {
        Err(e) => (
            422,
            json!({"detail": [{"type": "json_invalid", "loc": ["body"], "msg": format!("JSON decode error: {e}")}]}),
        ),
        Ok(b) => {
            let r = reg.lock().unwrap_or_else(|p| p.into_inner()).handle(method, path, b.as_ref());
            (r.status, r.body)
        }
    };
    (status, answer.to_string().into_bytes())
}

async fn handle(State(st): State<St>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| uri.path().to_string());
    let (status, content_type, answer) = match &*st.answer {
        Answerer::Registry(reg) => {
            let (s, b) = registry_answer(reg, method.as_str(), uri.path(), &body);
            (s, "application/json".to_string(), b)
        }
        Answerer::Upstream(base) => {
            let url = format!("{}{path}", base.trim_end_matches('/'));
            let ct = headers.get("content-type").and_then(|v| v.to_str().ok());
            let sent = if body.is_empty() { None } else { Some(&body[..]) };
            match mooncake_io::http::request_raw(method.as_str(), &url, ct, sent, UPSTREAM_TIMEOUT).await {
                Ok(r) => (r.status, r.content_type.unwrap_or_else(|| "application/json".into()), r.body),
                Err(e) => {
                    let _ = st.seen.send(Seen::Trouble {
                        environment: true,
                        text: format!("the upstream bootstrap server did not answer {method} {path}: {e}"),
                    });
                    return (
                        StatusCode::BAD_GATEWAY,
                        [("content-type", "application/json")],
                        json!({"detail": format!("mooncake tap: upstream {url}: {e}")}).to_string(),
                    )
                        .into_response();
                }
            }
        }
    };
    // Workers to stand in front of: a successful registration, and anything a /query answer lists (a worker
    // that registered before the tap started).
    let route = (method.as_str(), uri.path());
    let mut reals: Vec<String> = vec![];
    if status == 200 {
        match route {
            ("POST", "/register") => {
                if let Some(a) = serde_json::from_slice::<J>(&body)
                    .ok()
                    .and_then(|b| b.get("addr").and_then(J::as_str).map(String::from))
                {
                    reals.push(a);
                }
            }
            ("GET", "/query") => {
                reals.extend(serde_json::from_slice::<J>(&answer).map(|v| endpoints_in(&v)).unwrap_or_default())
            }
            _ => {}
        }
    }
    for real in reals {
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
