//! The prefiller workers the tap stands in front of: each one's real endpoint (what it registered), the
//! tap's own endpoint decoders are handed instead, and its name in the trace.

use std::sync::Mutex;

use serde_json::Value as J;

use super::relay::{Relay, RelayError};

/// Why a worker could not be tapped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TapWorkerError {
    /// What the worker registered is not a ZeroMQ TCP endpoint.
    #[error("{0:?} is not a tcp://host:port endpoint")]
    NotAnEndpoint(String),
    /// The relay could not stand in front of it.
    #[error(transparent)]
    Relay(#[from] RelayError),
}

#[derive(Clone, Debug)]
pub(crate) struct Worker {
    /// Conn id in the trace (`prefiller0`, `prefiller1`, … in the order the tap first saw them).
    pub(crate) conn: String,
    /// The endpoint the worker registered (its ROUTER).
    pub(crate) real: String,
    /// The tap's ROUTER in front of it.
    pub(crate) tap: String,
}

#[derive(Default)]
pub(crate) struct Workers {
    list: Mutex<Vec<Worker>>,
    /// Serialises taps, so that one endpoint gets one ROUTER however many requests name it at once.
    adding: tokio::sync::Mutex<()>,
}

/// Whether `s` is a ZeroMQ TCP endpoint a worker could have registered (`tcp://host:port`).
pub(crate) fn is_endpoint(s: &str) -> bool {
    s.strip_prefix("tcp://")
        .and_then(|r| r.rsplit_once(':'))
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
}

impl Workers {
    /// The tap's endpoint for the worker at `real`, binding a ROUTER for it the first time.
    pub(crate) async fn tap(&self, real: &str, relay: &Relay) -> Result<String, TapWorkerError> {
        let _one = self.adding.lock().await;
        if let Some(w) = self.by_real(real) {
            return Ok(w.tap);
        }
        if !is_endpoint(real) {
            return Err(TapWorkerError::NotAnEndpoint(real.to_string()));
        }
        let index = self.list.lock().expect("workers").len();
        let tap = relay.add(index, real).await?;
        self.list.lock().expect("workers").push(Worker {
            conn: format!("prefiller{index}"),
            real: real.to_string(),
            tap: tap.clone(),
        });
        Ok(tap)
    }

    pub(crate) fn get(&self, index: usize) -> Option<Worker> {
        self.list.lock().expect("workers").get(index).cloned()
    }

    pub(crate) fn by_real(&self, real: &str) -> Option<Worker> {
        self.list.lock().expect("workers").iter().find(|w| w.real == real).cloned()
    }

    pub(crate) fn all(&self) -> Vec<Worker> {
        self.list.lock().expect("workers").clone()
    }

    /// A bootstrap answer's text with every tapped worker's endpoint replaced by the tap's (byte for byte
    /// otherwise: key order, spacing and everything else stay as the server wrote them).
    pub(crate) fn rewrite(&self, text: &str) -> String {
        let mut out = text.to_string();
        for w in self.all() {
            out = out.replace(&format!("\"{}\"", w.real), &format!("\"{}\"", w.tap));
            // A JSON writer may escape the slashes.
            let esc = |s: &str| s.replace('/', "\\/");
            out = out.replace(&format!("\"{}\"", esc(&w.real)), &format!("\"{}\"", esc(&w.tap)));
        }
        out
    }
}

/// Every string in a JSON value that is a ZeroMQ TCP endpoint (the worker addresses of a `/query` answer).
pub(crate) fn endpoints_in(v: &J) -> Vec<String> {
    let mut out = vec![];
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            J::String(s) if is_endpoint(s) && !out.contains(s) => out.push(s.clone()),
            J::Array(a) => stack.extend(a.iter().rev()),
            J::Object(m) => stack.extend(m.values().rev()),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_found_in_order_and_rewritten_in_place() {
        let v: J = serde_json::from_str(r#"{"e":{"engine_id":"e","worker_addr":{"0":{"0":"tcp://127.0.0.1:5000"},"1":{"0":"tcp://127.0.0.1:5001"}}}}"#).unwrap();
        assert_eq!(endpoints_in(&v), ["tcp://127.0.0.1:5000", "tcp://127.0.0.1:5001"]);
        assert!(!is_endpoint("tcp://127.0.0.1"));
        assert!(!is_endpoint("engine-prefill-0"));
        let w = Workers::default();
        w.list.lock().unwrap().push(Worker {
            conn: "prefiller0".into(),
            real: "tcp://127.0.0.1:5000".into(),
            tap: "tcp://127.0.0.1:6000".into(),
        });
        assert_eq!(
            w.rewrite(r#"{"a":"tcp://127.0.0.1:5000","b":"tcp://127.0.0.1:50001"}"#),
            r#"{"a":"tcp://127.0.0.1:6000","b":"tcp://127.0.0.1:50001"}"#
        );
        assert_eq!(w.rewrite(r#"{"a":"tcp:\/\/127.0.0.1:5000"}"#), r#"{"a":"tcp:\/\/127.0.0.1:6000"}"#);
    }
}
