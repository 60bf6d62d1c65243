//! The bootstrap server's registry as a pure state machine: `POST /register` and `GET /query` semantics of a
//! revision (`[bootstrap]` in the spec: vLLM `mooncake_utils.py`). The HTTP layer lives in `reference-impl/`.

use serde_json::{json, Map, Value as J};

use crate::bootstrap::BootstrapSpec;
use crate::limits;

/// One HTTP answer: status and JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The HTTP status code.
    pub status: u16,
    /// The JSON body.
    pub body: J,
}

#[derive(Clone, Debug, Default)]
struct Engine {
    engine_id: String,
    /// tp_rank → pp_rank → addr, in registration order (a Python dict).
    workers: Vec<(i64, Vec<(i64, String)>)>,
}

/// The registry of one bootstrap server.
pub struct Registry {
    spec: BootstrapSpec,
    accept_identical: bool,
    /// dp_rank → engine, in registration order.
    engines: Vec<(i64, Engine)>,
    /// Bytes of `engine_id`s and addresses stored (the budget [`limits::MAX_REGISTRY_BYTES`]).
    stored_bytes: usize,
    /// Changes with every change of what `GET /query` answers.
    generation: u64,
}

impl Registry {
    /// `None` for a revision without a bootstrap server.
    pub fn new(spec: BootstrapSpec) -> Registry {
        let accept_identical = spec.revision().bootstrap.as_ref().is_some_and(|b| {
            b.duplicate_registration == crate::spec::behaviour::DuplicateRegistration::AcceptIdentical
        });
        Registry { spec, accept_identical, engines: vec![], stored_bytes: 0, generation: 0 }
    }

    /// Handles one request; unknown routes answer 404 and wrong methods 405, as FastAPI does.
    pub fn handle(&mut self, method: &str, path: &str, body: Option<&J>) -> Reply {
        let path = path.split('?').next().unwrap_or(path);
        match (method, path) {
            ("POST", "/register") => self.register(body),
            ("GET", "/query") => Reply { status: 200, body: self.query() },
            (_, "/register" | "/query") => Reply { status: 405, body: json!({"detail": "Method Not Allowed"}) },
            _ => Reply { status: 404, body: json!({"detail": "Not Found"}) },
        }
    }

    fn register(&mut self, body: Option<&J>) -> Reply {
        let Some(body) = body else {
            return invalid("body", "Field required");
        };
        if let Err(e) = self.spec.check_request("POST", "/register", Some(body)) {
            return invalid("body", &e.to_string());
        }
        let engine_id = body["engine_id"].as_str().unwrap_or_default().to_string();
        let (dp, tp, pp) = (
            body["dp_rank"].as_i64().unwrap_or(0),
            body["tp_rank"].as_i64().unwrap_or(0),
            body["pp_rank"].as_i64().unwrap_or(0),
        );
        let addr = body["addr"].as_str().unwrap_or_default().to_string();
        for (field, v) in [("engine_id", &engine_id), ("addr", &addr)] {
            if v.len() > limits::MAX_REGISTRY_FIELD_BYTES {
                let msg = format!("{} bytes, longer than {} (limits)", v.len(), limits::MAX_REGISTRY_FIELD_BYTES);
                return invalid(field, &msg);
            }
        }
        let known = self
            .engines
            .iter()
            .any(|(d, e)| *d == dp && e.workers.iter().any(|(t, pps)| *t == tp && pps.iter().any(|(p, _)| *p == pp)));
        if !known {
            if let Some(detail) = self.over_budget(dp, &engine_id, &addr) {
                return Reply { status: 503, body: json!({ "detail": detail }) };
            }
        }
        if !self.engines.iter().any(|(d, _)| *d == dp) {
            self.engines.push((dp, Engine { engine_id: engine_id.clone(), workers: vec![] }));
            self.stored_bytes += engine_id.len();
            self.generation += 1;
        }
        let e = &mut self.engines.iter_mut().find(|(d, _)| *d == dp).expect("just ensured").1;
        if e.engine_id != engine_id {
            return Reply {
                status: 400,
                body: json!({"detail": format!("Engine ID mismatch for dp_rank={dp}: expected {}, got {engine_id}", e.engine_id)}),
            };
        }
        if !e.workers.iter().any(|(t, _)| *t == tp) {
            e.workers.push((tp, vec![]));
        }
        let t = &mut e.workers.iter_mut().find(|(t, _)| *t == tp).expect("just ensured").1;
        if let Some((_, existing)) = t.iter().find(|(p, _)| *p == pp) {
            if self.accept_identical && *existing == addr {
                return Reply { status: 200, body: json!({"status": "ok"}) };
            }
            return Reply {
                status: 400,
                body: json!({"detail": format!("Worker with dp_rank={dp}, tp_rank={tp}, pp_rank={pp} is already registered at {existing}, but still want to register at {addr}")}),
            };
        }
        self.stored_bytes += addr.len();
        self.generation += 1;
        t.push((pp, addr));
        Reply { status: 200, body: json!({"status": "ok"}) }
    }

    /// Why registering a new worker would go over the registry's budget, if it would.
    fn over_budget(&self, dp: i64, engine_id: &str, addr: &str) -> Option<String> {
        let engine = self.engines.iter().find(|(d, _)| *d == dp).map(|(_, e)| e);
        let in_engine = engine.map_or(0, |e| e.workers.iter().map(|(_, p)| p.len()).sum::<usize>());
        if in_engine >= limits::MAX_WORKERS_PER_ENGINE {
            return Some(format!("dp_rank={dp} has {in_engine} workers, the most one engine registers (limits)"));
        }
        if self.worker_count() >= limits::MAX_REGISTERED_WORKERS {
            return Some(format!("the registry is full ({} workers, limits)", limits::MAX_REGISTERED_WORKERS));
        }
        let adding = addr.len() + if engine.is_none() { engine_id.len() } else { 0 };
        if self.stored_bytes + adding > limits::MAX_REGISTRY_BYTES {
            return Some(format!(
                "the registry holds {} bytes of engine ids and addresses, the most it stores (limits)",
                self.stored_bytes
            ));
        }
        None
    }

    /// A number that changes whenever what `GET /query` answers changes, so a server may keep the answer it
    /// serialized until then.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// `GET /query`: dp_rank → `{engine_id, worker_addr: {tp: {pp: addr}}}`, integer keys as strings.
    pub fn query(&self) -> J {
        let mut out = Map::new();
        for (dp, e) in &self.engines {
            let mut w = Map::new();
            for (tp, pps) in &e.workers {
                let mut p = Map::new();
                for (pp, a) in pps {
                    p.insert(pp.to_string(), json!(a));
                }
                w.insert(tp.to_string(), J::Object(p));
            }
            out.insert(dp.to_string(), json!({"engine_id": e.engine_id, "worker_addr": J::Object(w)}));
        }
        J::Object(out)
    }

    /// Registered workers (for tests and logs).
    pub fn worker_count(&self) -> usize {
        self.engines.iter().map(|(_, e)| e.workers.iter().map(|(_, p)| p.len()).sum::<usize>()).sum()
    }
}

/// FastAPI's 422 shape: `{"detail": [{"type", "loc", "msg"}]}` (the message text is ours, not pydantic's).
fn invalid(loc: &str, msg: &str) -> Reply {
    Reply { status: 422, body: json!({"detail": [{"type": "value_error", "loc": [loc], "msg": msg}]}) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    fn reg(rev: &str) -> Registry {
        Registry::new(BootstrapSpec::new(Spec::builtin().revision(rev).unwrap().clone()).unwrap().unwrap())
    }
    fn body(engine: &str, dp: i64, tp: i64, addr: &str) -> J {
        json!({"engine_id": engine, "dp_rank": dp, "tp_rank": tp, "pp_rank": 0, "addr": addr})
    }

    #[test]
    fn register_and_query() {
        let mut r = reg("vllm-0.33.0");
        assert_eq!(r.handle("POST", "/register", Some(&body("e", 0, 1, "tcp://a:1"))).status, 200);
        assert_eq!(r.handle("POST", "/register", Some(&body("e", 0, 0, "tcp://a:2"))).status, 200);
        let q = r.handle("GET", "/query", None).body;
        assert_eq!(
            q.to_string(),
            r#"{"0":{"engine_id":"e","worker_addr":{"1":{"0":"tcp://a:1"},"0":{"0":"tcp://a:2"}}}}"#
        );
        let mismatch = r.handle("POST", "/register", Some(&body("other", 0, 0, "tcp://a:2")));
        assert_eq!(mismatch.status, 400);
        assert_eq!(mismatch.body["detail"], "Engine ID mismatch for dp_rank=0: expected e, got other");
        assert_eq!(r.handle("POST", "/register", Some(&json!({"engine_id": 5}))).status, 422);
        assert_eq!(r.handle("GET", "/nope", None).status, 404);
        assert_eq!(r.worker_count(), 2);
    }

    /// The registry is bounded: long fields are refused, a full registry refuses new workers (503) and keeps
    /// serving its own and identical retries, and the query answer stays bounded (900 registrations of 1 MB
    /// each used to take the server to gigabytes).
    #[test]
    fn the_registry_has_a_budget() {
        let mut r = reg("vllm-0.33.0");
        let long = "x".repeat(limits::MAX_REGISTRY_FIELD_BYTES + 1);
        for b in [body(&long, 0, 0, "tcp://a:1"), body("e", 0, 0, &long)] {
            let a = r.handle("POST", "/register", Some(&b));
            assert_eq!(a.status, 422, "{}", a.body);
        }
        assert_eq!(r.worker_count(), 0);
        // Engines of at most MAX_WORKERS_PER_ENGINE workers each, up to MAX_REGISTERED_WORKERS in all.
        let per = limits::MAX_WORKERS_PER_ENGINE as i64;
        let engines = limits::MAX_REGISTERED_WORKERS as i64 / per;
        for dp in 0..engines {
            for tp in 0..per {
                let a = r.handle("POST", "/register", Some(&body(&format!("e{dp}"), dp, tp, &format!("tcp://a:{tp}"))));
                assert_eq!(a.status, 200, "{}", a.body);
            }
        }
        let over_engine = r.handle("POST", "/register", Some(&body("e0", 0, -1, "tcp://b:1")));
        assert_eq!(over_engine.status, 503, "{}", over_engine.body);
        assert!(over_engine.body["detail"].as_str().unwrap().contains("one engine"), "{}", over_engine.body);
        let full = r.handle("POST", "/register", Some(&body("new", engines, 0, "tcp://b:1")));
        assert_eq!(full.status, 503, "{}", full.body);
        assert!(full.body["detail"].as_str().unwrap().contains("full"));
        // An identical retry of a registered worker is still answered as the revision answers it.
        let before = r.generation();
        assert_eq!(r.handle("POST", "/register", Some(&body("e0", 0, 7, "tcp://a:7"))).status, 200);
        assert_eq!(r.generation(), before, "an identical retry changed nothing");
        assert_eq!(r.worker_count(), limits::MAX_REGISTERED_WORKERS);
        let answer = r.handle("GET", "/query", None).body.to_string();
        assert!(answer.len() < limits::MAX_HTTP_BODY_BYTES, "{} bytes", answer.len());
    }

    /// The bytes stored are bounded too, so the answer to `GET /query` stays under what a client here reads
    /// even when every worker's fields are as long as allowed.
    #[test]
    fn long_fields_fill_the_byte_budget_and_the_answer_stays_readable() {
        let mut r = reg("vllm-0.33.0");
        let long = "y".repeat(limits::MAX_REGISTRY_FIELD_BYTES);
        let mut taken = 0;
        for dp in 0..limits::MAX_REGISTERED_WORKERS as i64 {
            let g = r.generation();
            let a = r.handle("POST", "/register", Some(&body(&format!("{dp}{long}")[..long.len()], dp, 0, &long)));
            if a.status == 503 {
                assert!(a.body["detail"].as_str().unwrap().contains("bytes"), "{}", a.body);
                assert_eq!(r.generation(), g, "a refused registration changed the registry");
                break;
            }
            assert_eq!(a.status, 200, "{}", a.body);
            assert_ne!(r.generation(), g, "a new worker did not change the generation");
            taken += 1;
        }
        assert_eq!(taken, limits::MAX_REGISTRY_BYTES / (2 * limits::MAX_REGISTRY_FIELD_BYTES));
        let answer = r.handle("GET", "/query", None).body.to_string();
        assert!(answer.len() < limits::MAX_HTTP_BODY_BYTES, "{} bytes", answer.len());
    }

    #[test]
    fn duplicate_registration_follows_the_revision() {
        // 0.31.0 and later accept an identical retry; 0.30.0 and earlier refuse it.
        for (rev, identical) in
            [("vllm-0.33.0", 200), ("vllm-0.31.0", 200), ("vllm-0.30.0", 400), ("vllm-0.16.0..0.18.1", 400)]
        {
            let mut r = reg(rev);
            assert_eq!(r.handle("POST", "/register", Some(&body("e", 0, 0, "tcp://a:1"))).status, 200);
            assert_eq!(r.handle("POST", "/register", Some(&body("e", 0, 0, "tcp://a:1"))).status, identical, "{rev}");
            let conflict = r.handle("POST", "/register", Some(&body("e", 0, 0, "tcp://b:2")));
            assert_eq!(conflict.status, 400);
            assert_eq!(
                conflict.body["detail"],
                "Worker with dp_rank=0, tp_rank=0, pp_rank=0 is already registered at tcp://a:1, but still want to register at tcp://b:2"
            );
        }
    }
}
