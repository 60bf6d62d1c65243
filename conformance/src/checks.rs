//! Protocol checks with stable ids (documented in `conformance/CHECKS.md`). They run on recorded traces
//! (`validate`) and on live transcripts (`replay`, `run`): a transcript is a list of exchanges (request and
//! replies, as the decoder saw them) plus the bootstrap HTTP log.

use std::collections::{BTreeMap, HashSet};

use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::{Registry, WireProfile};
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse, Status};
use serde_json::Value as J;

use crate::validate::Finding;

/// One exchange of a transcript.
#[derive(Clone, Debug)]
pub struct Xchg {
    pub index: usize,
    pub decoder: String,
    pub endpoint: String,
    pub request: Vec<u8>,
    pub replies: Vec<Vec<u8>>,
    /// Where to point a finding (trace seq and line of the request), when known.
    pub seq: Option<u64>,
    pub line: Option<usize>,
}

/// One bootstrap HTTP exchange.
#[derive(Clone, Debug)]
pub struct HttpX {
    pub method: String,
    pub path: String,
    pub request: Option<J>,
    pub status: u16,
    pub response: Option<J>,
    pub seq: Option<u64>,
    pub line: Option<usize>,
}

fn finding(check: &'static str, x: &Xchg, message: &str, detail: String) -> Finding {
    Finding { check, seq: x.seq, line: x.line, message: Some(format!("exchange {} ({} → {}) {message}", x.index + 1, x.decoder, x.endpoint)), detail }
}

fn ids(l: &Option<Vec<String>>) -> Vec<String> {
    l.clone().unwrap_or_default()
}

/// Checks every exchange of a transcript against the protocol rules of `profile`'s revision.
pub fn check_exchanges(profile: &WireProfile, xs: &[Xchg]) -> Vec<Finding> {
    let mut out = vec![];
    // Endpoints that echoed each decoder's layout id, in transcript order.
    let mut acked: HashSet<(String, String, WireInt)> = HashSet::new();
    let omit_empty = profile.revision.behaviour.empty_id_lists.as_deref() == Some("omitted");
    for (k, x) in xs.iter().enumerate() {
        let Ok(req) = profile.decode_metadata(&x.request) else { continue };
        let keys: HashSet<&str> = req.req_blocks.iter().map(|(k, _)| k.as_str()).collect();
        let layout_less = req.layout_id != WireInt::ZERO && req.kv_caches_base_addr.is_empty();
        if layout_less && profile.layout_caching.is_some() && !acked.contains(&(x.decoder.clone(), x.endpoint.clone(), req.layout_id)) {
            out.push(finding("LAYOUT-LESS-AFTER-ACK", x, "request", format!("a layout-less pull (layout_id {:#x}) to an endpoint that never echoed that id", req.layout_id)));
        }
        let mut settled: BTreeMap<String, usize> = BTreeMap::new();
        let mut terminal_at: Option<usize> = None;
        for (i, raw) in x.replies.iter().enumerate() {
            let Ok(r) = profile.decode_response(raw) else { continue };
            let what = format!("reply {}", i + 1);
            if let Some(t) = terminal_at {
                out.push(finding("SEQ-TERMINAL", x, &what, format!("{} after the terminal reply {}", r.status, t + 1)));
            }
            if profile.is_terminal(r.status) && terminal_at.is_none() {
                terminal_at = Some(i);
            }
            for l in [&r.ok_reqs, &r.err_reqs] {
                if omit_empty && l.as_ref().is_some_and(|v| v.is_empty()) {
                    out.push(finding("EMPTY-LISTS", x, &what, format!("{} writes an empty id list; vLLM {} omits it", r.status, profile.name())));
                }
            }
            let (ok, err) = (ids(&r.ok_reqs), ids(&r.err_reqs));
            for d in ok.iter().chain(&err) {
                if !keys.contains(d.as_str()) {
                    out.push(finding("REQS-SUBSET", x, &what, format!("{d:?} is not a request of this pull (req_blocks keys {:?})", req.req_blocks.iter().map(|(k, _)| k).collect::<Vec<_>>())));
                }
                if let Some(prev) = settled.insert(d.clone(), i) {
                    out.push(finding("REQS-ONCE", x, &what, format!("{d:?} is reported again (already in reply {})", prev + 1)));
                }
            }
            match r.status {
                s if s == Status::ERROR || (s == Status::LAYOUT_MISS && profile.knows_status(s)) => {
                    if r.err_msg.is_none() || r.ok_reqs.is_some() || r.err_reqs.is_some() {
                        out.push(finding("ERROR-SHAPE", x, &what, format!("{s} must carry err_msg and no id lists")));
                    }
                    if r.layout_id != WireInt::ZERO {
                        out.push(finding("LAYOUT-ECHO", x, &what, format!("{s} echoes layout_id {:#x}; vLLM never does", r.layout_id)));
                    }
                    if s == Status::LAYOUT_MISS {
                        if !layout_less {
                            out.push(finding("LAYOUT-MISS-CAUSE", x, &what, "LAYOUT_MISS answers a pull that carried its layout (or had layout_id 0)".into()));
                        } else {
                            check_resend(&mut out, profile, x, &req, &xs[k + 1..]);
                        }
                        acked.remove(&(x.decoder.clone(), x.endpoint.clone(), req.layout_id));
                    }
                }
                _ => {
                    if r.layout_id != WireInt::ZERO && r.layout_id != req.layout_id {
                        out.push(finding("LAYOUT-ECHO", x, &what, format!("layout_id {:#x} is not the pull's {:#x}", r.layout_id, req.layout_id)));
                    }
                    if req.layout_id != WireInt::ZERO && r.layout_id == req.layout_id {
                        acked.insert((x.decoder.clone(), x.endpoint.clone(), req.layout_id));
                    }
                }
            }
        }
        if terminal_at.is_none() {
            out.push(finding("SEQ-TERMINAL", x, "replies", format!("{} replies and no terminal status (FINISH, ERROR{})", x.replies.len(), if profile.layout_caching.is_some() { " or LAYOUT_MISS" } else { "" })));
        }
    }
    // A pull sent to several prefillers (one scheduler step) carries the same bytes to each.
    for w in xs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if a.decoder == b.decoder && a.endpoint != b.endpoint {
            if let (Ok(ra), Ok(rb)) = (profile.decode_metadata(&a.request), profile.decode_metadata(&b.request)) {
                if ra.req_blocks == rb.req_blocks && a.request != b.request && ra.layout_id == WireInt::ZERO {
                    out.push(finding("FAN-OUT-SAME-BYTES", b, "request", "the same pull to another prefiller differs in bytes".into()));
                }
            }
        }
    }
    out
}

/// After a LAYOUT_MISS for a layout-less pull, the decoder's next request to that endpoint resends the same
/// requests with the layout.
fn check_resend(out: &mut Vec<Finding>, profile: &WireProfile, x: &Xchg, req: &MooncakeXferMetadata, later: &[Xchg]) {
    match later.iter().find(|y| y.decoder == x.decoder && y.endpoint == x.endpoint) {
        None => out.push(finding("LAYOUT-MISS-RESEND", x, "after LAYOUT_MISS", "the decoder never resent the pull with its layout".into())),
        Some(y) => match profile.decode_metadata(&y.request) {
            Ok(m) if !m.kv_caches_base_addr.is_empty() && m.req_blocks == req.req_blocks => {}
            Ok(_) => out.push(finding("LAYOUT-MISS-RESEND", y, "request", "the request after LAYOUT_MISS is not the same pull with the layout".into())),
            Err(_) => {}
        },
    }
}

/// Checks the bootstrap HTTP log: each `/register` answer is what the revision's registry answers, and each
/// `/query` lists exactly the workers registered before it.
pub fn check_http(spec: BootstrapSpec, log: &[HttpX]) -> Vec<Finding> {
    let mut out = vec![];
    let mut reg = Registry::new(spec);
    for h in log {
        let f = |check: &'static str, detail: String| Finding { check, seq: h.seq, line: h.line, message: Some(format!("{} {}", h.method, h.path)), detail };
        let want = reg.handle(&h.method, &h.path, h.request.as_ref());
        match (h.method.as_str(), h.path.split('?').next().unwrap_or("")) {
            ("POST", "/register") => {
                if h.status != want.status {
                    out.push(f("REGISTER-STATUS", format!("answered {}, the revision's registry answers {} ({})", h.status, want.status, want.body)));
                } else if want.status != 422 && h.response.as_ref() != Some(&want.body) {
                    out.push(f("REGISTER-STATUS", format!("body {} differs from {}", h.response.as_ref().map(J::to_string).unwrap_or_default(), want.body)));
                }
            }
            ("GET", "/query") => {
                if h.status != 200 || h.response.as_ref() != Some(&want.body) {
                    out.push(f(
                        "QUERY-REFLECTS-REGISTER",
                        format!("answered {} {}, the registered workers are {}", h.status, h.response.as_ref().map(J::to_string).unwrap_or_default(), want.body),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// Reply lists compared as sets: vLLM orders ids by readiness, which varies between runs.
pub fn same_reply(a: &MooncakeXferResponse, b: &MooncakeXferResponse) -> bool {
    let set = |l: &Option<Vec<String>>| l.as_ref().map(|v| v.iter().cloned().collect::<std::collections::BTreeSet<_>>());
    a.status == b.status && set(&a.ok_reqs) == set(&b.ok_reqs) && set(&a.err_reqs) == set(&b.err_reqs) && a.err_msg == b.err_msg && a.layout_id == b.layout_id
}
