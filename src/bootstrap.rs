//! The bootstrap HTTP surface of a revision (`[bootstrap]` in the spec): checks request and response bodies
//! against the spec's models and routes, for trace validation, the reference server and the runner.

use std::sync::Arc;

use serde_json::Value as J;

use crate::codec::{Codec, Scope, Ty, Value};
use crate::spec::{Revision, Route, RouteResponse};

/// The bootstrap models of one revision, compiled.
pub struct BootstrapSpec {
    codec: Codec,
}

impl BootstrapSpec {
    /// `None` for revisions without a bootstrap server (generation 1).
    pub fn new(rev: Arc<Revision>) -> Option<Result<BootstrapSpec, String>> {
        rev.bootstrap.as_ref()?;
        Some(Codec::with_scope(rev, Scope::Bootstrap).map(|codec| BootstrapSpec { codec }).map_err(|e| e.to_string()))
    }

    pub fn revision(&self) -> &Revision {
        self.codec.revision()
    }

    /// The route for a method and a path (a query string is ignored).
    pub fn route(&self, method: &str, path: &str) -> Option<&Route> {
        let path = path.split('?').next().unwrap_or(path);
        self.revision()
            .bootstrap
            .as_ref()?
            .routes
            .iter()
            .find(|r| r.method.eq_ignore_ascii_case(method) && r.path == path)
    }

    /// Checks a JSON body against a model name or a type expression over models (`dict[int, EngineEntry]`).
    pub fn check_body(&mut self, ty: &str, body: &J) -> Result<Value, String> {
        let id = self.codec.type_of(ty)?;
        let v = self.codec.from_json_type(id, body)?;
        self.check_consts(id, &v, "$")?;
        Ok(v)
    }

    fn check_consts(&self, ty: u32, v: &Value, path: &str) -> Result<(), String> {
        let plan = self.codec.plan();
        match (&plan.types[ty as usize], v) {
            (Ty::Struct(sid), Value::Struct(sv)) => {
                let name = &plan.structs[*sid as usize].meta.name;
                let def = &self.revision().bootstrap.as_ref().expect("bootstrap").models[name];
                for ((fd, cf), fv) in def.fields.iter().zip(&plan.structs[*sid as usize].fields).zip(&sv.fields) {
                    let p = format!("{path}.{}", fd.name);
                    if let Some(c) = &fd.const_value {
                        if fv.as_str() != Some(c.as_str()) {
                            return Err(format!("{p}: must be {c:?}, found {fv}"));
                        }
                    }
                    self.check_consts(cf.ty, fv, &p)?;
                }
            }
            (Ty::Dict(_, vt), Value::Dict(d)) => {
                for (_, x) in d {
                    self.check_consts(*vt, x, &format!("{path}[...]"))?;
                }
            }
            (Ty::List(t), Value::List(xs)) => {
                for (i, x) in xs.iter().enumerate() {
                    self.check_consts(*t, x, &format!("{path}[{i}]"))?;
                }
            }
            (Ty::Optional(t), x) if !x.is_none() => self.check_consts(*t, x, path)?,
            _ => {}
        }
        Ok(())
    }

    /// Checks a request body for a route.
    pub fn check_request(&mut self, method: &str, path: &str, body: Option<&J>) -> Result<(), String> {
        let route = self
            .route(method, path)
            .ok_or_else(|| format!("{method} {path} is not a bootstrap route of {}", self.revision().revision))?;
        match (route.request.clone(), body) {
            (Some(model), Some(b)) => self.check_body(&model, b).map(|_| ()).map_err(|e| format!("{model}: {e}")),
            (Some(model), None) => Err(format!("{method} {path} needs a JSON {model} body")),
            (None, None) => Ok(()),
            (None, Some(b)) if b.is_null() => Ok(()),
            (None, Some(_)) => Err(format!("{method} {path} takes no body")),
        }
    }

    /// Checks a response: the status must be one the route documents, the body must fit that response.
    /// Returns the documented response that matched.
    pub fn check_response(
        &mut self,
        method: &str,
        path: &str,
        status: u16,
        body: Option<&J>,
    ) -> Result<RouteResponse, String> {
        let route =
            self.route(method, path).ok_or_else(|| format!("{method} {path} is not a bootstrap route"))?.clone();
        let candidates: Vec<&RouteResponse> = route.responses.iter().filter(|r| r.status == status).collect();
        if candidates.is_empty() {
            let known: Vec<u16> = route.responses.iter().map(|r| r.status).collect();
            return Err(format!(
                "status {status} is not a documented response of {method} {path} (documented: {known:?})"
            ));
        }
        let mut problems = vec![];
        for c in &candidates {
            match self.check_response_body(c, body) {
                Ok(()) => return Ok((*c).clone()),
                Err(e) => problems.push(e),
            }
        }
        Err(problems.join("; "))
    }

    fn check_response_body(&mut self, resp: &RouteResponse, body: Option<&J>) -> Result<(), String> {
        let Some(ty) = &resp.body else { return Ok(()) };
        let b = body.ok_or_else(|| format!("status {} needs a JSON {ty} body", resp.status))?;
        self.check_body(ty, b).map_err(|e| format!("{ty}: {e}"))?;
        if let Some(tmpl) = &resp.detail {
            let d = b.get("detail").and_then(J::as_str).unwrap_or_default();
            if !template_matches(tmpl, d) {
                return Err(format!("detail {d:?} does not read like {tmpl:?}"));
            }
        }
        Ok(())
    }
}

/// Whether `text` reads like `template`, where each `{placeholder}` stands for any text.
pub(crate) fn template_matches(template: &str, text: &str) -> bool {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        pieces.push(&rest[..open]);
        match rest[open..].find('}') {
            Some(close) => rest = &rest[open + close + 1..],
            None => return template == text,
        }
    }
    pieces.push(rest);
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if pieces.len() == 1 {
        return text == first;
    }
    if !text.starts_with(first) || !text.ends_with(last) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut hay = &text[first.len()..text.len() - last.len()];
    for p in &pieces[1..pieces.len() - 1] {
        match hay.find(p) {
            Some(i) => hay = &hay[i + p.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    fn b33() -> BootstrapSpec {
        BootstrapSpec::new(Spec::builtin().revision("vllm-0.33.0").unwrap().clone()).unwrap().unwrap()
    }

    #[test]
    fn templates() {
        let t = "Worker with dp_rank={dp}, tp_rank={tp}, pp_rank={pp} is already registered at {old}, but still want to register at {new}";
        assert!(template_matches(t, "Worker with dp_rank=0, tp_rank=0, pp_rank=0 is already registered at tcp://a:1, but still want to register at tcp://b:2"));
        assert!(!template_matches(t, "Worker with dp_rank=0 is gone"));
        assert!(template_matches("ok", "ok"));
    }

    #[test]
    fn register_and_query_bodies() {
        let mut b = b33();
        let body: J = serde_json::json!({"engine_id": "e", "dp_rank": 0, "tp_rank": 0, "pp_rank": 0, "addr": "tcp://127.0.0.1:5"});
        b.check_request("POST", "/register", Some(&body)).unwrap();
        let bad: J = serde_json::json!({"engine_id": "e", "dp_rank": "0", "tp_rank": 0, "pp_rank": 0, "addr": "x"});
        assert!(b.check_request("POST", "/register", Some(&bad)).unwrap_err().contains("dp_rank"));
        b.check_response("POST", "/register", 200, Some(&serde_json::json!({"status": "ok"}))).unwrap();
        assert!(b.check_response("POST", "/register", 200, Some(&serde_json::json!({"status": "fine"}))).is_err());
        assert!(b.check_response("POST", "/register", 201, None).unwrap_err().contains("not a documented"));
        let q = serde_json::json!({"0": {"engine_id": "e", "worker_addr": {"0": {"0": "tcp://x:1"}}}});
        b.check_response("GET", "/query", 200, Some(&q)).unwrap();
        let badq = serde_json::json!({"zero": {"engine_id": "e", "worker_addr": {}}});
        assert!(b.check_response("GET", "/query", 200, Some(&badq)).is_err());
    }
}
