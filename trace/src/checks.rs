//! Protocol checks with stable ids (documented in `conformance/CHECKS.md`). They run on recorded traces
//! (`validate`), on live transcripts (`replay`, `run`) and on tapped traffic (`tap`): a transcript is a list
//! of exchanges (request and replies, as the decoder saw them, each decoded once by
//! [`crate::conversation`]) plus the bootstrap HTTP log. The checks read those decoded messages; they hold
//! a revision's rules, not its codec.

use std::collections::{BTreeMap, HashSet};

use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::{Registry, WireProfile};
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse, Status, StrList};
use serde_json::Value as J;

use crate::conversation::{Exchange, Heartbeat};
use crate::finding::{CheckId, Finding};

/// One bootstrap HTTP exchange: a request to the bootstrap server and its answer.
#[derive(Clone, Debug)]
pub struct HttpX {
    /// The request's method (`GET`, `POST`).
    pub method: String,
    /// The request's path, query included.
    pub path: String,
    /// The request's JSON body, if it had one.
    pub request: Option<J>,
    /// The answer's HTTP status.
    pub status: u16,
    /// The answer's JSON body, if it had one.
    pub response: Option<J>,
    /// The request's seq in the trace (`None` for live traffic no trace event names).
    pub seq: Option<u64>,
    /// The request's line in the trace.
    pub line: Option<usize>,
}

/// What [`ExchangeChecker::push`] carries from one reply of an exchange to the next.
struct ReplyWalk {
    /// Each request id reported so far, with the reply that reported it.
    settled: BTreeMap<String, usize>,
    /// The first terminal reply.
    terminal_at: Option<usize>,
    /// Whether the pull was layout-less (a layout id, no layout).
    layout_less: bool,
}

fn finding(check: CheckId, x: &Exchange, message: &str, detail: String) -> Finding {
    Finding::new(check, detail).at(x.seq, x.line).about(format!(
        "exchange {} ({} → {}) {message}",
        x.index + 1,
        x.decoder,
        x.endpoint
    ))
}

fn ids(l: &Option<StrList>) -> Vec<String> {
    l.iter().flatten().map(String::from).collect()
}

/// Checks every exchange of a transcript against the protocol rules of `profile`'s revision.
pub fn check_exchanges(profile: &WireProfile, xs: &[Exchange]) -> Vec<Finding> {
    let mut c = ExchangeChecker::new(profile);
    let mut out: Vec<Finding> = xs.iter().flat_map(|x| c.push(x)).collect();
    out.extend(c.finish());
    out
}

/// The protocol rules over a transcript one exchange at a time, in the order the decoders sent them: what
/// `check_exchanges` does for a whole transcript, and what the tap does while traffic flows. A rule that
/// needs a later exchange (the resend after LAYOUT_MISS) is decided when that exchange is pushed, or by
/// [`ExchangeChecker::finish`] when none came.
pub struct ExchangeChecker {
    rules: Rules,
    /// Endpoints that echoed each decoder's layout id, in transcript order.
    acked: HashSet<(String, String, WireInt)>,
    /// Layout-less pulls answered with LAYOUT_MISS whose resend is still to come.
    awaiting_resend: Vec<Exchange>,
    previous: Option<Exchange>,
}

/// What the checks need of a revision: its rules, not its codec. The checks read the messages the
/// conversation decoded ([`Exchange`]); they have nothing to decode with.
struct Rules {
    name: String,
    /// Status → terminal, for the statuses the revision knows.
    statuses: Vec<(Status, bool)>,
    layout_caching: bool,
    omit_empty: bool,
}

impl Rules {
    fn is_terminal(&self, s: Status) -> bool {
        self.statuses.iter().any(|(x, t)| *x == s && *t)
    }
    fn knows_status(&self, s: Status) -> bool {
        self.statuses.iter().any(|(x, _)| *x == s)
    }
}

impl ExchangeChecker {
    /// A checker of `profile`'s revision's rules, with no exchange seen yet.
    pub fn new(profile: &WireProfile) -> Self {
        let omit_empty = profile.revision.behaviour.empty_id_lists.as_ref().map(|i| i.value)
            == Some(mooncake_wire::spec::behaviour::EmptyIdLists::Omitted);
        let rules = Rules {
            name: profile.name().to_string(),
            statuses: profile.statuses.clone(),
            layout_caching: profile.layout_caching.is_some(),
            omit_empty,
        };
        ExchangeChecker { rules, acked: HashSet::new(), awaiting_resend: vec![], previous: None }
    }

    /// Checks the next exchange (its request and every reply it got); returns the findings it settles.
    pub fn push(&mut self, x: &Exchange) -> Vec<Finding> {
        let mut out = self.fan_out(x);
        out.extend(self.resend(x));
        let Some(req) = x.request.value() else { return out };
        let layout_less = req.layout_id != WireInt::ZERO && req.kv_caches_base_addr.is_empty();
        if layout_less
            && self.rules.layout_caching
            && !self.acked.contains(&(x.decoder.clone(), x.endpoint.clone(), req.layout_id))
        {
            let detail =
                format!("a layout-less pull (layout_id {:#x}) to an endpoint that never echoed that id", req.layout_id);
            out.push(finding(CheckId::LayoutLessAfterAck, x, "request", detail));
        }
        let mut walk = ReplyWalk { settled: BTreeMap::new(), terminal_at: None, layout_less };
        for (i, reply) in x.replies.iter().enumerate() {
            if let Some(r) = reply.payload.value() {
                out.extend(self.reply(x, req, i, r, &mut walk));
            }
        }
        if walk.terminal_at.is_none() {
            let detail = format!(
                "{} replies and no terminal status (FINISH, ERROR{})",
                x.replies.len(),
                if self.rules.layout_caching { " or LAYOUT_MISS" } else { "" }
            );
            out.push(finding(CheckId::SeqTerminal, x, "replies", detail));
        }
        out
    }

    /// `FAN-OUT-SAME-BYTES`: a pull sent to several prefillers (one scheduler step) carries the same bytes to
    /// each.
    fn fan_out(&mut self, x: &Exchange) -> Vec<Finding> {
        let Some(a) = self.previous.replace(x.clone()) else { return vec![] };
        if a.decoder != x.decoder || a.endpoint == x.endpoint {
            return vec![];
        }
        let (Some(ra), Some(rb)) = (a.request.value(), x.request.value()) else { return vec![] };
        if ra.req_blocks == rb.req_blocks && a.request.bytes != x.request.bytes && ra.layout_id == WireInt::ZERO {
            let detail = "the same pull to another prefiller differs in bytes".to_string();
            return vec![finding(CheckId::FanOutSameBytes, x, "request", detail)];
        }
        vec![]
    }

    /// `LAYOUT-MISS-RESEND`: the resend a LAYOUT_MISS before asked for is this decoder's next request to that
    /// endpoint, the same pull with the layout.
    fn resend(&mut self, x: &Exchange) -> Vec<Finding> {
        let mut out = vec![];
        let mut still = vec![];
        for miss in std::mem::take(&mut self.awaiting_resend) {
            if miss.decoder != x.decoder || miss.endpoint != x.endpoint {
                still.push(miss);
                continue;
            }
            let req = miss.request.value().expect("only a decoded pull awaits its resend");
            match x.request.value() {
                Some(m) if !m.kv_caches_base_addr.is_empty() && m.req_blocks == req.req_blocks => {}
                Some(_) => {
                    let detail = "the request after LAYOUT_MISS is not the same pull with the layout".to_string();
                    out.push(finding(CheckId::LayoutMissResend, x, "request", detail));
                }
                None => {}
            }
        }
        self.awaiting_resend = still;
        out
    }

    /// Reply `i` (`r`) of exchange `x`, which pulled `req`: order (`SEQ-TERMINAL`), id lists (`EMPTY-LISTS`,
    /// `REQS-SUBSET`, `REQS-ONCE`) and what its status requires.
    fn reply(
        &mut self,
        x: &Exchange,
        req: &MooncakeXferMetadata,
        i: usize,
        r: &MooncakeXferResponse,
        walk: &mut ReplyWalk,
    ) -> Vec<Finding> {
        let rules = &self.rules;
        let what = format!("reply {}", i + 1);
        let mut out = vec![];
        if let Some(t) = walk.terminal_at {
            out.push(finding(
                CheckId::SeqTerminal,
                x,
                &what,
                format!("{} after the terminal reply {}", r.status, t + 1),
            ));
        }
        if rules.is_terminal(r.status) && walk.terminal_at.is_none() {
            walk.terminal_at = Some(i);
        }
        for l in [&r.ok_reqs, &r.err_reqs] {
            if rules.omit_empty && l.as_ref().is_some_and(|v| v.is_empty()) {
                let detail = format!("{} writes an empty id list; vLLM {} omits it", r.status, rules.name);
                out.push(finding(CheckId::EmptyLists, x, &what, detail));
            }
        }
        let (ok, err) = (ids(&r.ok_reqs), ids(&r.err_reqs));
        for d in ok.iter().chain(&err) {
            if !req.req_blocks.iter().any(|(k, _)| k == d) {
                let keys: Vec<&String> = req.req_blocks.iter().map(|(k, _)| k).collect();
                let detail = format!("{d:?} is not a request of this pull (req_blocks keys {keys:?})");
                out.push(finding(CheckId::ReqsSubset, x, &what, detail));
            }
            if let Some(prev) = walk.settled.insert(d.clone(), i) {
                let detail = format!("{d:?} is reported again (already in reply {})", prev + 1);
                out.push(finding(CheckId::ReqsOnce, x, &what, detail));
            }
        }
        out.extend(self.reply_status(x, req, r, walk.layout_less, &what));
        out
    }

    /// What a reply's status requires: an ERROR or LAYOUT_MISS carries `err_msg` and no id lists and echoes no
    /// layout id, and a LAYOUT_MISS answers a layout-less pull (its resend is awaited); any other echoes the
    /// pull's layout id or none (an echo acknowledges the layout).
    fn reply_status(
        &mut self,
        x: &Exchange,
        req: &MooncakeXferMetadata,
        r: &MooncakeXferResponse,
        layout_less: bool,
        what: &str,
    ) -> Vec<Finding> {
        let mut out = vec![];
        let key = (x.decoder.clone(), x.endpoint.clone(), req.layout_id);
        let s = r.status;
        if s == Status::ERROR || (s == Status::LAYOUT_MISS && self.rules.knows_status(s)) {
            if r.err_msg.is_none() || r.ok_reqs.is_some() || r.err_reqs.is_some() {
                out.push(finding(CheckId::ErrorShape, x, what, format!("{s} must carry err_msg and no id lists")));
            }
            if r.layout_id != WireInt::ZERO {
                let detail = format!("{s} echoes layout_id {:#x}; vLLM never does", r.layout_id);
                out.push(finding(CheckId::LayoutEcho, x, what, detail));
            }
            if s == Status::LAYOUT_MISS {
                if !layout_less {
                    let detail = "LAYOUT_MISS answers a pull that carried its layout (or had layout_id 0)".to_string();
                    out.push(finding(CheckId::LayoutMissCause, x, what, detail));
                } else {
                    self.awaiting_resend.push(x.clone());
                }
                self.acked.remove(&key);
            }
            return out;
        }
        if r.layout_id != WireInt::ZERO && r.layout_id != req.layout_id {
            let detail = format!("layout_id {:#x} is not the pull's {:#x}", r.layout_id, req.layout_id);
            out.push(finding(CheckId::LayoutEcho, x, what, detail));
        }
        if req.layout_id != WireInt::ZERO && r.layout_id == req.layout_id {
            self.acked.insert(key);
        }
        out
    }

    /// The end of the transcript: a LAYOUT_MISS whose resend never came.
    pub fn finish(self) -> Vec<Finding> {
        self.awaiting_resend
            .iter()
            .map(|x| {
                finding(
                    CheckId::LayoutMissResend,
                    x,
                    "after LAYOUT_MISS",
                    "the decoder never resent the pull with its layout".into(),
                )
            })
            .collect()
    }
}

/// Checks every lease heartbeat of a transcript (0.34.0, `spec/PROTOCOL.md#kv-leases`): exactly one reply,
/// and it is one of the two a prefiller of `profile`'s revision gives — renewed (the status and nothing else)
/// or refused (the status and text of a prefiller without a lease duration).
pub fn check_heartbeats(profile: &WireProfile, hbs: &[Heartbeat]) -> Vec<Finding> {
    let mut out = vec![];
    for h in hbs {
        let f = |detail: String| {
            Finding::new(CheckId::LeaseReply, detail).at(h.seq, h.line).about(format!(
                "heartbeat {} ({} → {})",
                h.index + 1,
                h.decoder,
                h.endpoint
            ))
        };
        match h.replies.as_slice() {
            [] => out.push(f("no reply: a prefiller answers every heartbeat at once".into())),
            [r] => {
                if let Some(d) = heartbeat_reply_problem(profile, r.payload.value()) {
                    out.push(f(d));
                }
            }
            more => out.push(f(format!("{} replies; a heartbeat gets exactly one", more.len()))),
        }
    }
    out
}

/// What is wrong with a heartbeat's reply in `profile`'s revision, if anything (`None` when it is one of the
/// revision's two replies). An undecodable reply is its decode's finding, not this one's.
pub fn heartbeat_reply_problem(profile: &WireProfile, r: Option<&MooncakeXferResponse>) -> Option<String> {
    let r = r?;
    let Some(l) = &profile.kv_leases else {
        return Some(format!("{} has no lease heartbeats", profile.name()));
    };
    let named = |s: Status| s.name().unwrap_or("?").to_string();
    let bare = r.ok_reqs.is_none() && r.err_reqs.is_none() && r.layout_id == WireInt::ZERO;
    let renewed = named(r.status) == l.renewed_status && bare && r.err_msg.is_none();
    let refused = named(r.status) == l.off_status && bare && r.err_msg.as_deref() == Some(l.off_message.as_str());
    if renewed || refused {
        return None;
    }
    Some(format!(
        "{}: neither `{}` alone (renewed) nor `{}` with err_msg {:?} (no lease duration)",
        crate::reply::show_reply(r),
        l.renewed_status,
        l.off_status,
        l.off_message
    ))
}

/// Checks the bootstrap HTTP log: each `/register` answer is what the revision's registry answers, and each
/// `/query` lists exactly the workers registered before it.
pub fn check_http(spec: BootstrapSpec, log: &[HttpX]) -> Vec<Finding> {
    let mut c = HttpChecker::new(spec);
    log.iter().flat_map(|h| c.push(h)).collect()
}

/// [`check_http`] one exchange at a time: the revision's registry, fed what the server was asked.
pub struct HttpChecker {
    reg: Registry,
}

impl HttpChecker {
    /// A checker with `spec`'s registry, empty.
    pub fn new(spec: BootstrapSpec) -> Self {
        HttpChecker { reg: Registry::new(spec) }
    }

    /// Checks the next exchange against the registry (which it then updates); returns its findings.
    pub fn push(&mut self, h: &HttpX) -> Vec<Finding> {
        let mut out = vec![];
        let f = |check: CheckId, detail: String| {
            Finding::new(check, detail).at(h.seq, h.line).about(format!("{} {}", h.method, h.path))
        };
        let want = self.reg.handle(&h.method, &h.path, h.request.as_ref());
        match (h.method.as_str(), h.path.split('?').next().unwrap_or("")) {
            ("POST", "/register") => {
                if h.status != want.status {
                    out.push(f(
                        CheckId::RegisterStatus,
                        format!(
                            "answered {}, the revision's registry answers {} ({})",
                            h.status, want.status, want.body
                        ),
                    ));
                } else if want.status != 422 && h.response.as_ref() != Some(&want.body) {
                    out.push(f(
                        CheckId::RegisterStatus,
                        format!(
                            "body {} differs from {}",
                            h.response.as_ref().map(J::to_string).unwrap_or_default(),
                            want.body
                        ),
                    ));
                }
            }
            ("GET", "/query") if (h.status != 200 || h.response.as_ref() != Some(&want.body)) => {
                out.push(f(
                    CheckId::QueryReflectsRegister,
                    format!(
                        "answered {} {}, the registered workers are {}",
                        h.status,
                        h.response.as_ref().map(J::to_string).unwrap_or_default(),
                        want.body
                    ),
                ));
            }
            _ => {}
        }
        out
    }
}

/// Reply lists compared as sets: vLLM orders ids by readiness, which varies between runs.
pub fn same_reply(a: &MooncakeXferResponse, b: &MooncakeXferResponse) -> bool {
    let set =
        |l: &Option<StrList>| l.as_ref().map(|v| v.iter().map(String::from).collect::<std::collections::BTreeSet<_>>());
    a.status == b.status
        && set(&a.ok_reqs) == set(&b.ok_reqs)
        && set(&a.err_reqs) == set(&b.err_reqs)
        && a.err_msg == b.err_msg
        && a.layout_id == b.layout_id
}
