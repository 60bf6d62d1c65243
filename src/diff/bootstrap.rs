//! Bootstrap HTTP rules (spec `[bootstrap]`): the server itself, its JSON payload models, its routes and what
//! `POST /register` does with a slot that is already registered. The models follow the struct rules with JSON
//! semantics (every field written, unknown keys ignored — pydantic's default, missing required → 422); they
//! have no MessagePack witness. Their types are compared with msgspec's strict rules; pydantic's lax mode also
//! accepts some other forms (numeric strings for ints), so a type row there may over-report.

use super::ctx::{BothWays, Ctx, Side};
use super::model::{Area, Bytes, Change, Effect, Kind, Verdict};
use super::structs::diff_struct;
use crate::spec::behaviour::DuplicateRegistration;
use crate::spec::{Bootstrap, Revision};

fn row(
    kind: Kind,
    subject: String,
    what: String,
    peers: &BothWays,
    orn: (Effect, String),
    nro: (Effect, String),
    bytes: Bytes,
) -> Change {
    Change::new(
        Area::Bootstrap,
        kind,
        subject,
        what,
        Verdict::new(orn.0, &peers.old_reads_new, orn.1),
        Verdict::new(nro.0, &peers.new_reads_old, nro.1),
        bytes,
    )
}

fn client_server() -> BothWays {
    BothWays::of("client", "server")
}

fn server_client() -> BothWays {
    BothWays::of("server", "client")
}

/// Who writes a model: the client when it is a request body, the server when it is (part of) a response.
fn model_peers(b: &Bootstrap, model: &str) -> BothWays {
    if b.routes.iter().any(|r| r.request.as_deref() == Some(model)) {
        client_server()
    } else {
        server_client()
    }
}

pub(crate) fn diff_bootstrap(old: &Revision, new: &Revision, out: &mut Vec<Change>) {
    let (bo, bn) = match (&old.bootstrap, &new.bootstrap) {
        (None, None) => return,
        (None, Some(_)) => {
            out.push(row(
                Kind::BootstrapServer,
                "bootstrap".into(),
                "bootstrap HTTP server added".into(),
                &server_client(),
                (Effect::Compatible, "old peers do not query it".into()),
                (Effect::always(), "new peers query it; old prefillers do not serve it".into()),
                Bytes::NotApplicable("a new interface".into()),
            ));
            return;
        }
        (Some(_), None) => {
            out.push(row(
                Kind::BootstrapServer,
                "bootstrap".into(),
                "bootstrap HTTP server removed".into(),
                &server_client(),
                (Effect::always(), "old peers query it; new prefillers do not serve it".into()),
                (Effect::Compatible, "new peers do not query it".into()),
                Bytes::NotApplicable("the interface is gone".into()),
            ));
            return;
        }
        (Some(a), Some(b)) => (a, b),
    };
    if bo.kind != bn.kind {
        let b = (Effect::always(), "another kind of server".to_string());
        out.push(row(
            Kind::BootstrapServer,
            "bootstrap.kind".into(),
            format!("`{}` → `{}`", bo.kind, bn.kind),
            &client_server(),
            b.clone(),
            b,
            Bytes::NotApplicable("different servers".into()),
        ));
    }
    if bo.default_port != bn.default_port || bo.bind != bn.bind {
        let r = (Effect::Review, "only deployments that rely on the default address notice; the router passes the bootstrap address explicitly".to_string());
        out.push(row(
            Kind::BootstrapServer,
            "bootstrap.bind".into(),
            format!(
                "`{}` (default port {}) → `{}` (default port {})",
                bo.bind, bo.default_port, bn.bind, bn.default_port
            ),
            &client_server(),
            r.clone(),
            r,
            Bytes::Same,
        ));
    }
    if bo.duplicate_registration != bn.duplicate_registration {
        // `reject`: a taken slot answers 400 even for the same address; `accept-identical`: 200 for the same
        // address, 400 for another (spec README, `[bootstrap]`).
        let lenient = |d: DuplicateRegistration| d == DuplicateRegistration::AcceptIdentical;
        let verdict = |server: DuplicateRegistration, client_is_new: bool| -> (Effect, String) {
            if lenient(server) {
                (
                    Effect::Compatible,
                    "an identical re-registration now succeeds; a different address still answers 400".into(),
                )
            } else {
                (
                    Effect::when("a worker re-registers its slot with the same address"),
                    format!(
                        "the server answers 400 (`reject`) where {} server would answer 200",
                        if client_is_new { "a new" } else { "an old" }
                    ),
                )
            }
        };
        out.push(row(
            Kind::DuplicateRegistration,
            "bootstrap.duplicate_registration".into(),
            format!(
                "`POST /register` of a taken slot: `{}` → `{}`",
                bo.duplicate_registration, bn.duplicate_registration
            ),
            &client_server(),
            verdict(bo.duplicate_registration, true),
            verdict(bn.duplicate_registration, false),
            Bytes::Same,
        ));
    }
    for (name, mo) in &bo.models {
        if let Some(mn) = bn.models.get(name) {
            let cx = Ctx {
                old: Side { rev: old, name, def: mo },
                new: Side { rev: new, name, def: mn },
                peers: model_peers(bn, name),
                witnesses: false,
                area: Area::Bootstrap,
                prefix: format!("bootstrap.{name}"),
            };
            let mut rows = vec![];
            diff_struct(&cx, &mut rows);
            out.extend(rows);
        }
    }
    for ro in &bo.routes {
        let subject = format!("bootstrap.routes.{} {}", ro.method, ro.path);
        match bn.routes.iter().find(|r| r.method == ro.method && r.path == ro.path) {
            None => out.push(row(
                Kind::Route,
                subject,
                format!("`{} {}` removed", ro.method, ro.path),
                &client_server(),
                (Effect::Compatible, "new clients do not call it".into()),
                (
                    Effect::when(format!("an old client calls `{} {}`", ro.method, ro.path)),
                    "the new server answers 404".into(),
                ),
                Bytes::Same,
            )),
            Some(rn) => {
                if ro.request != rn.request {
                    let b = (Effect::always(), "the request body is another model".to_string());
                    out.push(row(
                        Kind::Route,
                        subject.clone(),
                        format!("request body {:?} → {:?}", ro.request, rn.request),
                        &client_server(),
                        b.clone(),
                        b,
                        Bytes::NotApplicable("different bodies".into()),
                    ));
                }
                let show = |r: &crate::spec::RouteResponse| {
                    format!(
                        "{} {}{}",
                        r.status,
                        r.body.as_deref().unwrap_or(""),
                        r.detail.as_ref().map(|d| format!(" `{d}`")).unwrap_or_default()
                    )
                };
                let so: Vec<String> = ro.responses.iter().map(show).collect();
                let sn: Vec<String> = rn.responses.iter().map(show).collect();
                if so != sn {
                    let gone: Vec<&String> = so.iter().filter(|x| !sn.contains(x)).collect();
                    let new: Vec<&String> = sn.iter().filter(|x| !so.contains(x)).collect();
                    let r = (Effect::Review, "clients may depend on status codes and detail texts".to_string());
                    out.push(row(
                        Kind::Route,
                        subject,
                        format!("responses: removed {gone:?}, added {new:?}"),
                        &server_client(),
                        r.clone(),
                        r,
                        Bytes::DifferWhen("the changed responses".into()),
                    ));
                }
            }
        }
    }
    for rn in bn.routes.iter().filter(|r| !bo.routes.iter().any(|o| o.method == r.method && o.path == r.path)) {
        out.push(row(
            Kind::Route,
            format!("bootstrap.routes.{} {}", rn.method, rn.path),
            format!("`{} {}` added", rn.method, rn.path),
            &client_server(),
            (
                Effect::when(format!("a new client calls `{} {}`", rn.method, rn.path)),
                "the old server answers 404".into(),
            ),
            (Effect::Compatible, "old clients do not call it".into()),
            Bytes::Same,
        ));
    }
}
