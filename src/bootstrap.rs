//! The bootstrap HTTP surface of a revision (`[bootstrap]` in the spec): checks request and response bodies
//! against the spec's models and routes, for trace validation, the reference server and the runner.

use std::sync::Arc;

use serde_json::Value as J;

use crate::codec::{Codec, Scope, Ty, Value};
use crate::spec::{Revision, Route, RouteResponse, SpecError};

/// Why a bootstrap request or response does not fit the revision's routes and models
/// (`spec/PROTOCOL.md`, "Bootstrap HTTP").
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BootstrapError {
    /// The type expression does not parse or names no model of the revision.
    #[error("{0}")]
    UnknownType(crate::codec::CompileError),
    /// The body does not fit the model's types; its text starts with the JSON path (`$.field`).
    #[error("{0}")]
    Body(crate::codec::FromJsonError),
    /// A field the model fixes to one value holds another.
    #[error("{path}: must be {expected:?}, found {found}")]
    Const {
        /// JSON path of the field (`$.role`).
        path: String,
        /// The value the model fixes.
        expected: String,
        /// The value found, as the codec prints it.
        found: String,
    },
    /// No route of the revision has this method and path.
    #[error(
        "{method} {path} is not a bootstrap route{}",
        revision.as_ref().map(|r| format!(" of {r}")).unwrap_or_default()
    )]
    NoRoute {
        /// The HTTP method.
        method: String,
        /// The request path (query string included, as given).
        path: String,
        /// The revision, named when a request was checked.
        revision: Option<String>,
    },
    /// A route whose request has a model was called without a body.
    #[error("{method} {path} needs a JSON {model} body")]
    MissingRequestBody {
        /// The HTTP method.
        method: String,
        /// The request path.
        path: String,
        /// The request model.
        model: String,
    },
    /// A route without a request model was called with a body.
    #[error("{method} {path} takes no body")]
    UnexpectedBody {
        /// The HTTP method.
        method: String,
        /// The request path.
        path: String,
    },
    /// A body that does not fit the model (or type) the route names for it.
    #[error("{model}: {source}")]
    InModel {
        /// The model or type expression.
        model: String,
        /// What does not fit.
        source: Box<BootstrapError>,
    },
    /// The route documents no response with this status.
    #[error("status {status} is not a documented response of {method} {path} (documented: {documented:?})")]
    UndocumentedStatus {
        /// The HTTP method.
        method: String,
        /// The request path.
        path: String,
        /// The status received.
        status: u16,
        /// The statuses the route documents.
        documented: Vec<u16>,
    },
    /// A documented response with a body came without one.
    #[error("status {status} needs a JSON {ty} body")]
    MissingResponseBody {
        /// The status.
        status: u16,
        /// The body's model or type expression.
        ty: String,
    },
    /// The response's `detail` text does not read like the documented template.
    #[error("detail {detail:?} does not read like {template:?}")]
    Detail {
        /// The `detail` received.
        detail: String,
        /// The documented template; each `{placeholder}` stands for any text.
        template: String,
    },
    /// Several documented responses have the status and none fits; why each does not, in route order.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NoResponseFits(Vec<BootstrapError>),
}

/// The bootstrap models of one revision, compiled.
pub struct BootstrapSpec {
    codec: Codec,
}

impl BootstrapSpec {
    /// `None` for revisions without a bootstrap server (generation 1).
    /// An error when the models do not compile.
    pub fn new(rev: Arc<Revision>) -> Option<Result<BootstrapSpec, SpecError>> {
        rev.bootstrap.as_ref()?;
        Some(Codec::with_scope(rev, Scope::Bootstrap).map(|codec| BootstrapSpec { codec }))
    }

    /// The revision whose models these are.
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
    pub fn check_body(&mut self, ty: &str, body: &J) -> Result<Value, BootstrapError> {
        let id = self.codec.type_of(ty).map_err(BootstrapError::UnknownType)?;
        let v = self.codec.from_json_type(id, body).map_err(BootstrapError::Body)?;
        self.check_consts(id, &v, "$")?;
        Ok(v)
    }

    fn check_consts(&self, ty: u32, v: &Value, path: &str) -> Result<(), BootstrapError> {
        let plan = self.codec.plan();
        match (&plan.types[ty as usize], v) {
            (Ty::Struct(sid), Value::Struct(sv)) => {
                let name = &plan.structs[*sid as usize].meta.name;
                let def = &self.revision().bootstrap.as_ref().expect("bootstrap").models[name];
                for ((fd, cf), fv) in def.fields.iter().zip(&plan.structs[*sid as usize].fields).zip(&sv.fields) {
                    let p = format!("{path}.{}", fd.name);
                    if let Some(c) = &fd.const_value {
                        if fv.as_str() != Some(c.as_str()) {
                            return Err(BootstrapError::Const { path: p, expected: c.clone(), found: fv.to_string() });
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
    pub fn check_request(&mut self, method: &str, path: &str, body: Option<&J>) -> Result<(), BootstrapError> {
        let (m, p) = (method.to_string(), path.to_string());
        let route = self.route(method, path).ok_or_else(|| BootstrapError::NoRoute {
            method: m.clone(),
            path: p.clone(),
            revision: Some(self.revision().revision.clone()),
        })?;
        match (route.request.clone(), body) {
            (Some(model), Some(b)) => self
                .check_body(&model, b)
                .map(|_| ())
                .map_err(|e| BootstrapError::InModel { model, source: Box::new(e) }),
            (Some(model), None) => Err(BootstrapError::MissingRequestBody { method: m, path: p, model }),
            (None, None) => Ok(()),
            (None, Some(b)) if b.is_null() => Ok(()),
            (None, Some(_)) => Err(BootstrapError::UnexpectedBody { method: m, path: p }),
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
    ) -> Result<RouteResponse, BootstrapError> {
        let (m, p) = (method.to_string(), path.to_string());
        let route = self
            .route(method, path)
            .ok_or_else(|| BootstrapError::NoRoute { method: m.clone(), path: p.clone(), revision: None })?
            .clone();
        let candidates: Vec<&RouteResponse> = route.responses.iter().filter(|r| r.status == status).collect();
        if candidates.is_empty() {
            let documented: Vec<u16> = route.responses.iter().map(|r| r.status).collect();
            return Err(BootstrapError::UndocumentedStatus { method: m, path: p, status, documented });
        }
        let mut problems = vec![];
        for c in &candidates {
            match self.check_response_body(c, body) {
                Ok(()) => return Ok((*c).clone()),
                Err(e) => problems.push(e),
            }
        }
        Err(match problems.len() {
            1 => problems.remove(0),
            _ => BootstrapError::NoResponseFits(problems),
        })
    }

    fn check_response_body(&mut self, resp: &RouteResponse, body: Option<&J>) -> Result<(), BootstrapError> {
        let Some(ty) = &resp.body else { return Ok(()) };
        let b = body.ok_or_else(|| BootstrapError::MissingResponseBody { status: resp.status, ty: ty.clone() })?;
        self.check_body(ty, b).map_err(|e| BootstrapError::InModel { model: ty.clone(), source: Box::new(e) })?;
        if let Some(tmpl) = &resp.detail {
            let d = b.get("detail").and_then(J::as_str).unwrap_or_default();
            if !template_matches(tmpl, d) {
                return Err(BootstrapError::Detail { detail: d.to_string(), template: tmpl.clone() });
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
        assert!(b.check_request("POST", "/register", Some(&bad)).unwrap_err().to_string().contains("dp_rank"));
        b.check_response("POST", "/register", 200, Some(&serde_json::json!({"status": "ok"}))).unwrap();
        assert!(b.check_response("POST", "/register", 200, Some(&serde_json::json!({"status": "fine"}))).is_err());
        assert!(b.check_response("POST", "/register", 201, None).unwrap_err().to_string().contains("not a documented"));
        let q = serde_json::json!({"0": {"engine_id": "e", "worker_addr": {"0": {"0": "tcp://x:1"}}}});
        b.check_response("GET", "/query", 200, Some(&q)).unwrap();
        let badq = serde_json::json!({"zero": {"engine_id": "e", "worker_addr": {}}});
        assert!(b.check_response("GET", "/query", 200, Some(&badq)).is_err());
    }

    #[test]
    fn error_texts() {
        let mut b = b33();
        let e = |r: Result<(), BootstrapError>| r.unwrap_err().to_string();
        assert_eq!(e(b.check_request("GET", "/nope", None)), "GET /nope is not a bootstrap route of vllm-0.33.0");
        assert_eq!(
            e(b.check_request("POST", "/register", None)),
            "POST /register needs a JSON RegisterWorkerPayload body"
        );
        assert_eq!(e(b.check_request("GET", "/query", Some(&serde_json::json!({})))), "GET /query takes no body");
        let r = |r: Result<RouteResponse, BootstrapError>| r.unwrap_err().to_string();
        assert_eq!(r(b.check_response("GET", "/nope", 200, None)), "GET /nope is not a bootstrap route");
        assert_eq!(
            r(b.check_response("POST", "/register", 201, None)),
            "status 201 is not a documented response of POST /register (documented: [200, 400, 400, 422])"
        );
        assert_eq!(
            r(b.check_response("POST", "/register", 200, Some(&serde_json::json!({"status": "fine"})))),
            "RegisterOk: $.status: must be \"ok\", found \"fine\""
        );
        assert_eq!(
            r(b.check_response("POST", "/register", 400, Some(&serde_json::json!({"detail": "no"})))),
            "detail \"no\" does not read like \"Engine ID mismatch for dp_rank={dp_rank}: expected {expected}, got \
             {got}\"; detail \"no\" does not read like \"Worker with dp_rank={dp_rank}, tp_rank={tp_rank}, \
             pp_rank={pp_rank} is already registered at {old}, but still want to register at {new}\""
        );
        assert_eq!(
            r(b.check_response("POST", "/register", 400, None)),
            "status 400 needs a JSON HTTPError body; status 400 needs a JSON HTTPError body"
        );
    }
}
