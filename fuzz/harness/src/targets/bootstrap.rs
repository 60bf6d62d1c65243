//! The bootstrap HTTP bodies (`mooncake_wire::bootstrap`) and the registry behind `POST /register` and
//! `GET /query` (`mooncake_wire::proto::Registry`), for every revision with a bootstrap server.
//!
//! Input: byte 0 picks the revision, byte 1 the operation and its target, the rest is a JSON text.
//! * body checks (a model or a route's body type): an accepted body reads back from its own `to_builtins`
//!   JSON to the same value, and that JSON is a fixed point;
//! * request / response checks of each route: never panic; a documented response is returned only for a
//!   documented status;
//! * a registry session (the JSON is an array of requests): every reply of a spec'd route is one the spec
//!   documents (status and body), and after each successful registration `/query` lists exactly the worker
//!   that was registered, under its own ranks.

use std::sync::OnceLock;

use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::codec::Codec;
use mooncake_wire::proto::Registry;
use mooncake_wire::spec::Spec;
use serde_json::Value as J;

use crate::valeq;

/// Revisions with a bootstrap server, and the body types their routes and models name.
fn revisions() -> &'static [(String, Vec<String>)] {
    static R: OnceLock<Vec<(String, Vec<String>)>> = OnceLock::new();
    R.get_or_init(|| {
        Spec::builtin()
            .push()
            .revisions
            .iter()
            .filter_map(|r| {
                let b = r.bootstrap.as_ref()?;
                let mut types: Vec<String> = b.models.keys().cloned().collect();
                for route in &b.routes {
                    types.extend(route.request.iter().cloned());
                    types.extend(route.responses.iter().filter_map(|x| x.body.clone()));
                }
                types.dedup();
                Some((r.revision.clone(), types))
            })
            .collect()
    })
}

fn spec(revision: &str) -> BootstrapSpec {
    BootstrapSpec::new(Spec::builtin().revision(revision).expect("built-in").clone())
        .expect("has bootstrap")
        .expect("compiles")
}

/// The target body: runs the input through the code under test and checks the invariants above; panics when one
/// breaks, ignores an input it cannot use.
pub fn run(data: &[u8]) {
    let [r, op, json @ ..] = data else { return };
    let Ok(body) = serde_json::from_slice::<J>(json) else { return };
    let (revision, types) = &revisions()[*r as usize % revisions().len()];
    let mut b = spec(revision);
    let routes = b.revision().bootstrap.as_ref().expect("bootstrap").routes.clone();
    let pick = (*op >> 2) as usize;
    match op & 3 {
        0 => check_body(&mut b, &types[pick % types.len()], &body),
        1 => {
            let route = &routes[pick % routes.len()];
            let _ = b.check_request(&route.method, &route.path, Some(&body));
            let _ = b.check_request(&route.method, &route.path, None);
        }
        2 => {
            let route = &routes[pick % routes.len()];
            let statuses: Vec<u16> = route.responses.iter().map(|x| x.status).collect();
            let status =
                if pick / routes.len() % 4 == 3 { 500 } else { statuses[pick / routes.len() % statuses.len()] };
            if let Ok(doc) = b.check_response(&route.method, &route.path, status, Some(&body)) {
                assert_eq!(doc.status, status, "check_response returned another status's documentation");
            }
        }
        _ => session(revision, b, &body),
    }
}

fn check_body(b: &mut BootstrapSpec, ty: &str, body: &J) {
    let Ok(v) = b.check_body(ty, body) else { return };
    if valeq::has_nonfinite(&v) {
        return;
    }
    let j = Codec::to_json(&v);
    let back = b
        .check_body(ty, &j)
        .unwrap_or_else(|e| panic!("{ty}: the to_builtins JSON of an accepted body must be accepted: {e}\n{j}"));
    assert!(valeq::same(&back, &v), "{ty}: {body} and its to_builtins JSON {j} read differently");
    assert_eq!(Codec::to_json(&back), j, "{ty}: to_builtins JSON is not a fixed point");
}

/// A Python int from JSON (the rank fields), exactly.
fn int(v: &J) -> Option<i128> {
    v.as_i64().map(i128::from).or_else(|| v.as_u64().map(i128::from))
}

fn session(revision: &str, b: BootstrapSpec, body: &J) {
    let Some(items) = body.as_array() else { return };
    let mut checker = spec(revision);
    let mut reg = Registry::new(b);
    // The decoder core reads TP and PP ranks as unsigned; a registry holding a negative rank is vLLM's own
    // business (Python ints), so `/query` must parse for the decoder only while every rank is non-negative.
    let mut unsigned_ranks = true;
    for item in items.iter().take(64) {
        let (method, path, req) = match item {
            J::Object(_) => ("POST", "/register".to_string(), Some(item)),
            J::String(p) => ("GET", p.clone(), None),
            J::Number(_) => ("POST", "/register".to_string(), None),
            J::Bool(true) => ("POST", "/query".to_string(), None),
            _ => ("GET", "/query".to_string(), None),
        };
        let reply = reg.handle(method, &path, req);
        if checker.route(method, &path).is_some() {
            if let Err(e) = checker.check_response(method, &path, reply.status, Some(&reply.body)) {
                panic!("{revision}: the registry answered {method} {path} with a reply the spec does not document: {e}\n{} {}", reply.status, reply.body);
            }
        } else {
            assert!(
                matches!(reply.status, 404 | 405),
                "{revision}: {method} {path} is no route, yet answered {}",
                reply.status
            );
        }
        let query = reg.handle("GET", "/query", None);
        assert_eq!(query.status, 200);
        if method == "POST" && path.split('?').next() == Some("/register") && reply.status == 200 {
            let req = req.expect("registered with a body");
            let ranks: Vec<i128> =
                ["dp_rank", "tp_rank", "pp_rank"].iter().map(|k| int(&req[*k]).expect("validated int")).collect();
            unsigned_ranks &= ranks.iter().all(|r| *r >= 0);
            let ranks: Vec<String> = ranks.iter().map(i128::to_string).collect();
            let entry = &query.body[&ranks[0]];
            assert_eq!(
                entry["engine_id"], req["engine_id"],
                "{revision}: /query lost the engine of {req}: {}",
                query.body
            );
            assert_eq!(
                entry["worker_addr"][&ranks[1]][&ranks[2]], req["addr"],
                "{revision}: /query does not list {req} under its ranks: {}",
                query.body
            );
        }
        if unsigned_ranks {
            mooncake_wire::proto::decoder::parse_query(&query.body)
                .unwrap_or_else(|e| panic!("{revision}: a decoder cannot read /query: {e}\n{}", query.body));
        }
    }
}
