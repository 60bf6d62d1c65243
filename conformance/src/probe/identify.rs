//! Which generation-2 revision a prefiller worker runs, told from its answers to harmless messages (sans-IO).
//!
//! The messages and what each revision answers are derived from `spec/`, not typed in: every field any
//! generation-2 revision's `MooncakeXferMetadata` or `MooncakeLeaseHeartbeat` declares becomes one-field
//! candidates (the field set to nil, and set to a small value of each type the field has in some revision). Each
//! candidate is read as each revision's prefiller reads a payload (`WireProfile::read_inbound`: the heartbeat
//! first where the revision has one, then the pull, decoded by the spec-driven codec, which gives msgspec's
//! error texts): a pull that does not decode is answered `ERROR` with the decoder's text (`spec/PROTOCOL.md`,
//! "Side channel": harmless to every revision), a heartbeat `FINISH` or `ERROR` by whether leases are on
//! (`spec/PROTOCOL.md#kv-leases`). A candidate that any revision would take as a pull is never sent (it would
//! create a transfer entry and wait); every candidate is a one-frame map one level deep, far from the nesting
//! that ends a 0.34.0 listener. Of the safe candidates, those that split the revisions further are kept, in
//! spec order: [`Plan::new`]. [`Plan::identify`] is then a pure function from the answers to the revisions
//! that give exactly those answers; revisions that answer every candidate alike share a [`Plan::classes`] entry
//! and are reported as one range.

use std::sync::Arc;

use serde::Serialize;

use mooncake_wire::msgpack::Writer;
use mooncake_wire::proto::{Inbound, WireProfile};
use mooncake_wire::spec::{Revision, Spec, TypeExpr};
use mooncake_wire::typed::{MooncakeXferResponse, Status};

/// The structs whose fields make the candidates: what a decoder sends a prefiller.
const INBOUND: [&str; 2] = ["MooncakeXferMetadata", "MooncakeLeaseHeartbeat"];

/// What a prefiller answered to one probe: the reply's status and text (the id lists of an `ERROR` or a
/// heartbeat's answer are empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Answer {
    /// The status value (`0` FINISH, `2` ERROR, …).
    pub status: i64,
    /// `err_msg`, if the reply had one.
    pub err_msg: Option<String>,
}

impl Answer {
    /// The answer in a reply's bytes, as the newest revision decodes it (`None`: not a reply).
    pub fn of_reply(bytes: &[u8]) -> Option<Answer> {
        let r = MooncakeXferResponse::decode(bytes).ok()?;
        Some(Answer { status: r.status.0, err_msg: r.err_msg })
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match Status(self.status).name() {
            Some(n) => f.write_str(n)?,
            None => write!(f, "status {}", self.status)?,
        }
        match &self.err_msg {
            Some(m) => write!(f, " {m:?}"),
            None => Ok(()),
        }
    }
}

/// One thing a worker can be: a generation-2 revision, and for revisions with KV leases whether they are on.
#[derive(Clone, Debug, Serialize)]
pub struct Identity {
    /// The spec revision (`vllm-0.33.0`).
    pub revision: String,
    /// `Some(on)` for revisions with KV leases (`behaviour.kv_leases`), `None` for the others.
    pub leases: Option<bool>,
    #[serde(skip)]
    profile: Arc<WireProfile>,
}

impl PartialEq for Identity {
    fn eq(&self, o: &Identity) -> bool {
        self.revision == o.revision && self.leases == o.leases
    }
}
impl Eq for Identity {}

/// One message the probe sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// The message in words (`{"kv_block_lens": nil}`).
    pub label: String,
    /// Its MessagePack bytes (one frame).
    #[serde(serialize_with = "hex_bytes")]
    pub payload: Vec<u8>,
    /// What each identity answers, in [`Plan::identities`] order.
    #[serde(skip)]
    pub expected: Vec<Answer>,
}

fn hex_bytes<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(b))
}

/// The probe messages for the generation-2 revisions of a spec, and what each revision answers to them.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Every identity, in the family's order (oldest first).
    pub identities: Vec<Identity>,
    /// The messages to send, in order.
    pub probes: Vec<Probe>,
    /// How many candidates were derived, and how many of them some revision would have taken as a pull.
    pub candidates: usize,
    /// Candidates left out because some revision would read them as a pull (never sent).
    pub unsafe_candidates: usize,
}

/// What a worker's answers say it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Identification {
    /// Every identity whose answers equal the worker's, oldest first (empty: none does).
    pub identities: Vec<Identity>,
    /// The same as revision ranges (`0.25.0–0.29.0`, `0.34.0 (leases on)`).
    pub range: String,
}

impl Plan {
    /// The plan for the built-in spec's generation-2 push revisions; `nonce` is the text every string of a
    /// probe holds (a transfer id no deployment has: a heartbeat naming it renews nothing).
    pub fn builtin(nonce: &str) -> Plan {
        Plan::new(&Spec::builtin().push().revisions, nonce)
    }

    /// The plan for the generation-2 revisions among `revisions`.
    pub fn new(revisions: &[Arc<Revision>], nonce: &str) -> Plan {
        let identities = identities(revisions);
        let candidates = candidates(revisions, nonce);
        let total = candidates.len();
        let mut unsafe_candidates = 0;
        let mut classes: Vec<Vec<usize>> = vec![(0..identities.len()).collect()];
        let mut probes = vec![];
        for (label, payload) in candidates {
            let Some(expected) = identities.iter().map(|i| predict(i, &payload)).collect::<Option<Vec<_>>>() else {
                unsafe_candidates += 1;
                continue;
            };
            let refined = refine(&classes, &expected);
            if refined.len() > classes.len() {
                classes = refined;
                probes.push(Probe { label, payload, expected });
            }
        }
        Plan { identities, probes, candidates: total, unsafe_candidates }
    }

    /// The identities that answer every probe alike, as groups (a group of one is told apart from all others).
    pub fn classes(&self) -> Vec<Vec<&Identity>> {
        let mut classes: Vec<Vec<usize>> = vec![(0..self.identities.len()).collect()];
        for p in &self.probes {
            classes = refine(&classes, &p.expected);
        }
        classes.sort();
        classes.into_iter().map(|c| c.into_iter().map(|i| &self.identities[i]).collect()).collect()
    }

    /// The identities whose answers equal `answers` (one per probe, in order; `None` where no answer came, which
    /// every identity matches: an unanswered probe narrows nothing).
    pub fn identify(&self, answers: &[Option<Answer>]) -> Identification {
        let identities: Vec<Identity> = (0..self.identities.len())
            .filter(|&i| self.probes.iter().zip(answers).all(|(p, a)| a.as_ref().is_none_or(|a| *a == p.expected[i])))
            .map(|i| self.identities[i].clone())
            .collect();
        let range = range_of(&identities);
        Identification { identities, range }
    }
}

/// Every generation-2 revision, twice where it has KV leases (on and off).
fn identities(revisions: &[Arc<Revision>]) -> Vec<Identity> {
    let mut out = vec![];
    for r in revisions.iter().filter(|r| r.generation == 2) {
        let Ok(profile) = WireProfile::builtin(&r.revision) else { continue };
        let profile = Arc::new(profile);
        let leases: &[Option<bool>] = if profile.kv_leases.is_some() { &[Some(false), Some(true)] } else { &[None] };
        for l in leases {
            out.push(Identity { revision: r.revision.clone(), leases: *l, profile: profile.clone() });
        }
    }
    out
}

/// What `who` answers to `payload` (`None`: it would read it as a pull, so it is not harmless).
fn predict(who: &Identity, payload: &[u8]) -> Option<Answer> {
    let p = &who.profile;
    let named = |name: &str| p.statuses.iter().map(|(s, _)| s.0).find(|&s| Status(s).name() == Some(name));
    match p.read_inbound(payload) {
        Inbound::Pull(Ok(_)) => None,
        Inbound::Pull(Err(e)) => Some(Answer { status: named("ERROR")?, err_msg: Some(e.msgspec_message()) }),
        Inbound::Heartbeat(_) => {
            let l = p.kv_leases.as_ref()?;
            match who.leases? {
                true => Some(Answer { status: named(&l.renewed_status)?, err_msg: None }),
                false => Some(Answer { status: named(&l.off_status)?, err_msg: Some(l.off_message.clone()) }),
            }
        }
    }
}

/// `classes` split wherever two members expect different answers.
fn refine(classes: &[Vec<usize>], expected: &[Answer]) -> Vec<Vec<usize>> {
    let mut out = vec![];
    for c in classes {
        let mut groups: Vec<Vec<usize>> = vec![];
        for &i in c {
            match groups.iter_mut().find(|g| expected[g[0]] == expected[i]) {
                Some(g) => g.push(i),
                None => groups.push(vec![i]),
            }
        }
        out.extend(groups);
    }
    out
}

/// One-field maps over every inbound field of every generation-2 revision, newest revision's fields first: the
/// field set to nil, then to a small value of each type it has in some revision. Distinct payloads only.
fn candidates(revisions: &[Arc<Revision>], nonce: &str) -> Vec<(String, Vec<u8>)> {
    let gen2: Vec<&Arc<Revision>> = revisions.iter().filter(|r| r.generation == 2).rev().collect();
    let mut out: Vec<(String, Vec<u8>)> = vec![];
    let mut push = |label: String, payload: Vec<u8>| {
        if !out.iter().any(|(_, p)| *p == payload) {
            out.push((label, payload));
        }
    };
    for r in &gen2 {
        for f in INBOUND.iter().filter_map(|s| r.structs.get(*s)).flat_map(|s| &s.fields) {
            let mut nil = Writer::new();
            nil.nil();
            push(format!("{{{:?}: nil}}", f.name), one_field(&f.name, nil));
            for r2 in &gen2 {
                let Some(ty) = INBOUND
                    .iter()
                    .filter_map(|s| r2.structs.get(*s))
                    .flat_map(|s| &s.fields)
                    .find(|g| g.name == f.name)
                    .map(|g| &g.ty)
                else {
                    continue;
                };
                let mut w = Writer::new();
                if sample(r2, ty, nonce, &mut w, 0) {
                    push(format!("{{{:?}: a value of {} ({})}}", f.name, ty, r2.revision), one_field(&f.name, w));
                }
            }
        }
    }
    out
}

fn one_field(name: &str, value: Writer) -> Vec<u8> {
    let mut w = Writer::new();
    w.map_len(1);
    w.str(name);
    w.raw(value.as_bytes());
    w.into_bytes()
}

/// A small value of `ty` (one element per container, 0, false, `nonce`); `false` where the type has none this
/// needs (a struct, bytes) or nests deeper than a probe should.
fn sample(rev: &Revision, ty: &TypeExpr, nonce: &str, w: &mut Writer, depth: usize) -> bool {
    if depth > 6 {
        return false;
    }
    let d = depth + 1;
    match ty {
        TypeExpr::Int => w.uint(0),
        TypeExpr::Str => w.str(nonce),
        TypeExpr::Bool => w.bool(false),
        TypeExpr::Float => w.f64(0.0),
        TypeExpr::Any => w.nil(),
        TypeExpr::Bytes => return false,
        TypeExpr::List(t) | TypeExpr::VarTuple(t) => {
            w.array_len(1);
            return sample(rev, t, nonce, w, d);
        }
        TypeExpr::Optional(t) => return sample(rev, t, nonce, w, d),
        TypeExpr::Dict(k, v) => {
            w.map_len(1);
            return sample(rev, k, nonce, w, d) && sample(rev, v, nonce, w, d);
        }
        TypeExpr::Tuple(ts) => {
            w.array_len(ts.len());
            return ts.iter().all(|t| sample(rev, t, nonce, w, d));
        }
        TypeExpr::Named(n) => match (rev.aliases.get(n), rev.enums.get(n)) {
            (Some(a), _) => return sample(rev, &a.ty, nonce, w, d),
            (None, Some(e)) => match e.members.first() {
                Some(m) => w.sint(m.value),
                None => return false,
            },
            (None, None) => return false,
        },
    }
    true
}

/// Identities as ranges of releases, oldest first: `0.25.0–0.29.0`, `0.34.0 (leases on)`; `none` when empty.
pub fn range_of(ids: &[Identity]) -> String {
    ranges(&ids.iter().map(|i| (i.revision.as_str(), i.leases)).collect::<Vec<_>>())
}

/// Revision names as ranges of releases (`0.16.0–0.34.0`).
pub fn range_names(revs: &[String]) -> String {
    ranges(&revs.iter().map(|r| (r.as_str(), None)).collect::<Vec<_>>())
}

fn ranges(ids: &[(&str, Option<bool>)]) -> String {
    let family = &Spec::builtin().push().revisions;
    let pos = |name: &str| family.iter().position(|r| r.revision == name);
    let mut at: Vec<usize> = ids.iter().filter_map(|(r, _)| pos(r)).collect();
    at.sort();
    at.dedup();
    let mut runs: Vec<(usize, usize)> = vec![];
    for p in at {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == p => *end = p,
            _ => runs.push((p, p)),
        }
    }
    let first = |p: usize| family[p].releases.first().cloned().unwrap_or_default();
    let last = |p: usize| family[p].releases.last().cloned().unwrap_or_default();
    let text: Vec<String> = runs
        .iter()
        .map(|&(a, b)| {
            let base = if first(a) == last(b) { first(a) } else { format!("{}–{}", first(a), last(b)) };
            let leases: Vec<bool> = ids.iter().filter(|(r, _)| pos(r) == Some(b)).filter_map(|(_, l)| *l).collect();
            match leases.as_slice() {
                [true] => format!("{base} (leases on)"),
                [false] => format!("{base} (leases off)"),
                _ => base,
            }
        })
        .collect();
    if text.is_empty() {
        "none".into()
    } else {
        text.join(", ")
    }
}

/// Writes a plan (`probe --plan`): each message with what each group of revisions answers, then the groups the
/// messages cannot split.
pub fn write_plan(w: &mut impl std::io::Write, plan: &Plan, json_out: bool) -> std::io::Result<()> {
    let groups = |p: &Probe| -> Vec<(String, String)> {
        let mut g: Vec<(Vec<Identity>, &Answer)> = vec![];
        for (i, a) in plan.identities.iter().zip(&p.expected) {
            match g.iter_mut().find(|(_, x)| *x == a) {
                Some((ids, _)) => ids.push(i.clone()),
                None => g.push((vec![i.clone()], a)),
            }
        }
        g.into_iter().map(|(ids, a)| (range_of(&ids), a.to_string())).collect()
    };
    let classes: Vec<String> =
        plan.classes().into_iter().map(|c| range_of(&c.into_iter().cloned().collect::<Vec<_>>())).collect();
    if json_out {
        let probes: Vec<serde_json::Value> = plan
            .probes
            .iter()
            .map(|p| serde_json::json!({"label": p.label, "payload": hex::encode(&p.payload), "answers": groups(p).into_iter().map(|(r, a)| serde_json::json!({"revisions": r, "answer": a})).collect::<Vec<_>>()}))
            .collect();
        let doc = serde_json::json!({"candidates": plan.candidates, "never_sent": plan.unsafe_candidates, "probes": probes, "classes": classes});
        serde_json::to_writer_pretty(&mut *w, &doc)?;
        return writeln!(w);
    }
    writeln!(
        w,
        "{} candidate messages derived from spec/; {} never sent (some revision would read them as a pull); {} kept (each splits the revisions further):",
        plan.candidates, plan.unsafe_candidates, plan.probes.len()
    )?;
    for (i, p) in plan.probes.iter().enumerate() {
        writeln!(w, "{}. {} = {}", i + 1, p.label, hex::encode(&p.payload))?;
        for (r, a) in groups(p) {
            writeln!(w, "     {r}: {a}")?;
        }
    }
    writeln!(w, "told apart: {}", classes.join(" | "))
}
