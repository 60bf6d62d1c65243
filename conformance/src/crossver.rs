//! Cross-version cases: a trace of revision R played against a testee that speaks another revision T.
//!
//! A case runs cross-version only when the spec says the two revisions interoperate in the directions the
//! case uses and the recorded conversation does not depend on anything T lacks; otherwise it is skipped with
//! the reason. The rules (documented in `conformance/CHECKS.md`, "Cross-version cases"):
//!
//! 1. **Spec diff** ([`mooncake_wire::diff::diff`] of the two revisions): every row whose verdict concerns a
//!    pair of peers of this deployment (e.g. `old D → new P` when the testee is a newer prefiller) must be
//!    compatible. A row that always breaks, or that needs a reviewer, makes the case ineligible. A row that
//!    breaks only when something is sent is checked against the trace by rules 2 and 3.
//! 2. **Messages**: every recorded request and reply must decode under T (msgspec's rules, through the
//!    spec-driven codec) to the same content, on the fields both revisions have. What T cannot read, or would
//!    read differently, cannot be replayed.
//! 3. **Behaviour**: a `behaviour.*` row the trace exercises (a layout-less pull, say) makes the case
//!    ineligible: the recorded conversation follows R's behaviour and a replay cannot adapt it. A behaviour
//!    key the runner has no detector for counts as exercised.
//!
//! During the case the runner stays at R (it decodes the testee's bytes as an R peer would) and starts the
//! testee at T; replies and requests are compared on the fields both revisions have, and the canonical-bytes
//! check uses T's encoding.

use std::sync::Arc;

use mooncake_wire::codec::convert::{convert, Lacking};
use mooncake_wire::codec::{Codec, Value};
use mooncake_wire::diff::{diff, Age, Area, Effect, Kind, PeerRole, Peers, Verdict};
use mooncake_wire::proto::{CarryError, WireProfile};
use mooncake_wire::spec::behaviour::{FailureReport, Group};
use mooncake_wire::spec::{Behaviour, BehaviourKey, Revision, Spec};
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse, Status};
use serde_json::Value as J;

use crate::role::Role;
use mooncake_trace::conversation::{Conversation, Exchange};

/// The start of the layout check's error (`src/plan/validate.rs`), whose region lengths follow the answering
/// prefiller's planning.
pub const REGION_MISMATCH: &str = "Mooncake KV region length mismatch";

/// The revisions a case is played at.
#[derive(Clone)]
pub struct Pairing {
    /// The trace's revision: the runner's side.
    pub runner: Arc<Revision>,
    /// What the testee is started at (= `runner` unless cross-version).
    pub testee: Arc<Revision>,
    /// The testee's wire profile (generation 2), for its canonical encoding.
    pub testee_profile: Option<WireProfile>,
}

impl Pairing {
    /// No cross-version: the runner and the testee both at `rev`.
    pub fn same(rev: &Arc<Revision>) -> Pairing {
        Pairing { runner: rev.clone(), testee: rev.clone(), testee_profile: profile(rev) }
    }
    /// Whether the testee runs another revision than the runner reads the trace with.
    pub fn is_cross(&self) -> bool {
        self.runner.revision != self.testee.revision
    }

    /// A reply as an R decoder sees it, restricted to what both revisions can say.
    pub fn project_reply(&self, r: &MooncakeXferResponse) -> MooncakeXferResponse {
        if !self.is_cross() {
            return r.clone();
        }
        self.project("MooncakeXferResponse", |p| p.response_value(r), |p, v| p.response_from_value(v))
            .unwrap_or_else(|| r.clone())
    }

    /// A request as an R prefiller sees it, restricted to what both revisions can say.
    pub fn project_request(&self, m: &MooncakeXferMetadata) -> MooncakeXferMetadata {
        if !self.is_cross() {
            return m.clone();
        }
        self.project("MooncakeXferMetadata", |p| p.metadata_value(m), |p, v| p.metadata_from_value(v))
            .unwrap_or_else(|| m.clone())
    }

    /// A message as R's value, carried through T's struct (the fields T lacks dropped, so at R's fallback
    /// values again) and read back: spec-driven, by the two revisions' field lists
    /// ([`mooncake_wire::codec::convert`]). `None` when R or T cannot say it.
    fn project<M>(
        &self,
        message: &str,
        to_value: impl FnOnce(&WireProfile) -> Result<Value, CarryError>,
        from_value: impl FnOnce(&WireProfile, &Value) -> Result<M, CarryError>,
    ) -> Option<M> {
        let rp = profile(&self.runner)?;
        let tc = Codec::builtin(&self.testee.revision)?;
        let v = to_value(&rp).ok()?;
        let in_t = convert(rp.codec(), &tc, message, &v, Lacking::Drop).ok()?;
        let back = convert(&tc, rp.codec(), message, &in_t, Lacking::MustBeDefault).ok()?;
        from_value(&rp, &back).ok()
    }

    /// The planning behaviours (group [`Group::Planning`]) on which the testee's revision differs from the
    /// trace's: its copies then take other descriptors (and, with `block_groups`, other bytes) than the recorded
    /// ones, so a cross-version prefiller case checks where the bytes land, not the recorded transfer-engine calls.
    pub fn planning_differs(&self) -> Vec<BehaviourKey> {
        if !self.is_cross() {
            return vec![];
        }
        let value = |b: &Behaviour, k: BehaviourKey| b.item(k).map(|i| i.value);
        BehaviourKey::ALL
            .iter()
            .copied()
            .filter(|k| k.group() == Group::Planning)
            .filter(|k| value(&self.runner.behaviour, *k) != value(&self.testee.behaviour, *k))
            .collect()
    }

    /// `None` when `bytes` are T's canonical encoding of the message they decode to (under T); else what a
    /// `WIRE-CANONICAL` finding says (where they part from it).
    pub fn non_canonical_for_testee(&self, message: &str, bytes: &[u8]) -> Option<String> {
        let Some(tc) = Codec::builtin(&self.testee.revision) else {
            return Some(format!("{} has no codec", self.testee.revision));
        };
        mooncake_trace::canonical::mismatch(&tc, message, bytes)
    }
}

fn profile(rev: &Arc<Revision>) -> Option<WireProfile> {
    WireProfile::new(rev.clone(), Codec::builtin(&rev.revision)?).ok()
}

fn field_names(rev: &Revision, message: &str) -> Vec<String> {
    rev.structs.get(message).map(|s| s.fields.iter().map(|f| f.name.clone()).collect()).unwrap_or_default()
}

/// Chooses the revision to start the testee at: the trace's own if the testee speaks it, else the nearest
/// revision it speaks that passes the rules above. `Err` is the skip reason.
pub fn choose(model: &Conversation, role: Role, testee_revisions: &[String]) -> Result<Pairing, Unpaired> {
    let r = &model.revision;
    if testee_revisions.contains(&r.revision) {
        return Ok(Pairing::same(r));
    }
    if r.family == "pull" {
        return Err(Unpaired::PullNotSpoken(r.revision.clone()));
    }
    let family = &Spec::builtin().push().revisions;
    let pos = |name: &str| family.iter().position(|x| x.revision == name);
    let here = pos(&r.revision).ok_or_else(|| Unpaired::NotPush(r.revision.clone()))?;
    let mut candidates: Vec<&Arc<Revision>> =
        testee_revisions.iter().filter_map(|t| pos(t).map(|i| &family[i])).collect();
    candidates.sort_by_key(|t| (pos(&t.revision).unwrap_or(0) as i64 - here as i64).unsigned_abs());
    if candidates.is_empty() {
        return Err(Unpaired::NoOther { revision: r.revision.clone(), speaks: testee_revisions.to_vec() });
    }
    let mut rejected = vec![];
    for t in candidates {
        match eligible(model, role, t) {
            Ok(()) => return Ok(Pairing { runner: r.clone(), testee: t.clone(), testee_profile: profile(t) }),
            Err(why) => rejected.push((t.revision.clone(), why)),
        }
    }
    Err(Unpaired::NoneEligible { revision: r.revision.clone(), rejected })
}

/// Why a case is skipped because no revision the testee speaks can play its trace (the case's `reason`).
#[derive(Debug, thiserror::Error)]
pub enum Unpaired {
    /// The trace's revision is not one of the push family.
    #[error("{0} is not a push revision")]
    NotPush(String),
    /// The testee does not speak the pull-family trace's revision (the pull family has no cross-version cases).
    #[error("the testee does not speak {0} (pull family: no cross-version cases)")]
    PullNotSpoken(String),
    /// The testee speaks neither the trace's revision nor another push revision.
    #[error("the testee does not speak {revision} and speaks no other push revision ({})", speaks.join(", "))]
    NoOther {
        /// The trace's revision.
        revision: String,
        /// The revisions the testee speaks.
        speaks: Vec<String>,
    },
    /// Every push revision the testee speaks is ineligible for this case.
    #[error("the testee does not speak {revision}; cross-version {}", rejections(rejected))]
    NoneEligible {
        /// The trace's revision.
        revision: String,
        /// Each revision the testee speaks, nearest first, with why it cannot play the case.
        rejected: Vec<(String, Ineligible)>,
    },
}

fn rejections(rejected: &[(String, Ineligible)]) -> String {
    rejected.iter().map(|(t, why)| format!("not as {t}: {why}")).collect::<Vec<_>>().join("; ")
}

/// Why a case cannot run cross-version with the testee at a given revision (the rules above).
#[derive(Debug, thiserror::Error)]
pub enum Ineligible {
    /// The two revisions are of different generations.
    #[error("generation {trace} and generation {testee} do not interoperate")]
    Generation {
        /// The trace's generation.
        trace: u32,
        /// The testee revision's generation.
        testee: u32,
    },
    /// A spec diff row that always breaks this deployment (rule 1).
    #[error("{change} breaks {peers}: {reason}")]
    Breaks {
        /// The diff row, as `spec diff OLD → NEW: SUBJECT (WHAT)` names it.
        change: String,
        /// The pair of peers it breaks.
        peers: Peers,
        /// Why.
        reason: String,
    },
    /// A spec diff row that needs a reviewer for this deployment (rule 1).
    #[error("{change} needs review for {peers}: {reason}")]
    Review {
        /// The diff row, as `spec diff OLD → NEW: SUBJECT (WHAT)` names it.
        change: String,
        /// The pair of peers it concerns.
        peers: Peers,
        /// Why.
        reason: String,
    },
    /// The trace exercises a behaviour that differs (rule 3).
    #[error("the trace relies on `behaviour.{key}` ({evidence}), which differs: {what}")]
    ReliesOn {
        /// The behaviour key.
        key: String,
        /// Where the trace exercises it.
        evidence: String,
        /// How it differs.
        what: String,
    },
    /// A behaviour differs that the runner has no detector for (rule 3).
    #[error("the trace may rely on `behaviour.{key}` ({what}), and the runner cannot tell")]
    MayRelyOn {
        /// The behaviour key.
        key: String,
        /// How it differs.
        what: String,
    },
    /// No built-in codec for one of the revisions (`trace`, `testee`).
    #[error("no codec for the {0} revision")]
    NoCodec(&'static str),
    /// A recorded message does not decode under the trace's own revision (rule 2).
    #[error("line {line}: the recorded {message} does not decode under {revision}: {why}")]
    Undecodable {
        /// The trace line.
        line: usize,
        /// The message type.
        message: String,
        /// The trace's revision.
        revision: String,
        /// msgspec's error text.
        why: String,
    },
    /// The testee's revision rejects a recorded message (rule 2).
    #[error("line {line}: {revision} rejects the recorded {message}: {why}")]
    Rejects {
        /// The trace line.
        line: usize,
        /// The message type.
        message: String,
        /// The testee's revision.
        revision: String,
        /// msgspec's error text.
        why: String,
    },
    /// The two revisions read a recorded message differently on their common fields (rule 2).
    #[error("line {line}: {testee} reads the recorded {message} as {as_testee}, {trace} as {as_trace}")]
    ReadsDifferently {
        /// The trace line.
        line: usize,
        /// The message type.
        message: String,
        /// The testee's revision.
        testee: String,
        /// What it reads, on the common fields.
        as_testee: Box<J>,
        /// The trace's revision.
        trace: String,
        /// What it reads, on the common fields.
        as_trace: Box<J>,
    },
}

/// Which side of the deployment each peer role of the diff is on, for a testee of `role`.
/// `true` = the testee's revision.
fn testee_side(role: Role, peer: &PeerRole) -> Option<bool> {
    match (role, peer) {
        (Role::Prefiller, PeerRole::Prefiller)
        | (Role::Decoder, PeerRole::Decoder)
        | (Role::Bootstrap, PeerRole::Server) => Some(true),
        (Role::Prefiller, PeerRole::Decoder)
        | (Role::Decoder, PeerRole::Prefiller)
        | (Role::Bootstrap, PeerRole::Client) => Some(false),
        // The runner's bootstrap server answers the testee's /register or /query.
        (Role::Prefiller | Role::Decoder, PeerRole::Server) => Some(false),
        (Role::Prefiller | Role::Decoder, PeerRole::Client) => Some(true),
        _ => None,
    }
}

/// Whether a verdict's `peers` (`old D → new P`) describes this deployment. Generic peers (`sender`) count.
fn concerns(v: &Verdict, role: Role, testee_is_new: bool) -> bool {
    v.peers.ends().into_iter().all(|end| {
        let Some(peer) = &end.role else { return true };
        match testee_side(role, peer) {
            Some(is_testee) => (end.age == Age::New) == (is_testee == testee_is_new),
            None => true,
        }
    })
}

fn eligible(model: &Conversation, role: Role, t: &Arc<Revision>) -> Result<(), Ineligible> {
    let r = &model.revision;
    if r.generation != t.generation {
        return Err(Ineligible::Generation { trace: r.generation, testee: t.generation });
    }
    let family = &Spec::builtin().push().revisions;
    let pos = |name: &str| family.iter().position(|x| x.revision == name).unwrap_or(0);
    let testee_is_new = pos(&t.revision) > pos(&r.revision);
    let (old, new) = if testee_is_new { (r, t) } else { (t, r) };
    let report = diff(old, new);
    for c in &report.changes {
        // A bootstrap case replays HTTP only: it needs the bootstrap rows (CHECKS.md).
        if role == Role::Bootstrap && c.area != Area::Bootstrap {
            continue;
        }
        let mut conditional = false;
        for (n, v) in [&c.old_reads_new, &c.new_reads_old].into_iter().enumerate() {
            if !concerns(v, role, testee_is_new) {
                continue;
            }
            // A message only the new revision has: what a new receiver does when old senders never send it is
            // the behaviour rows' (rule 3); whether the recorded messages reach the testee is rule 2's.
            if c.kind == Kind::MessageAdded && n == 1 {
                continue;
            }
            let row = format!("spec diff {} → {}: `{}` ({})", old.revision, new.revision, c.subject, c.what);
            match &v.effect {
                Effect::Breaks { .. } => {
                    return Err(Ineligible::Breaks { change: row, peers: v.peers.clone(), reason: v.reason.clone() })
                }
                Effect::Review => {
                    return Err(Ineligible::Review { change: row, peers: v.peers.clone(), reason: v.reason.clone() })
                }
                Effect::BreaksWhenSent { .. } => conditional = true,
                Effect::Compatible => {}
            }
        }
        // A bootstrap case replays HTTP only: the push behaviour and messages are not part of it.
        if role == Role::Bootstrap {
            continue;
        }
        if let Some(key) = BehaviourKey::of_subject(&c.subject) {
            match exercised(model, key, role, conditional, (&old.behaviour, &new.behaviour)) {
                Some(Some(evidence)) => {
                    return Err(Ineligible::ReliesOn { key: key.to_string(), evidence, what: c.what.clone() })
                }
                Some(None) => {}
                None => return Err(Ineligible::MayRelyOn { key: key.to_string(), what: c.what.clone() }),
            }
        }
    }
    if role == Role::Bootstrap {
        return Ok(());
    }
    messages_survive(model, t, role)
}

/// Every recorded message the testee will receive decodes under `t` to what it means under the trace's
/// revision, on common fields: the requests in a prefiller case, the replies in a decoder case. What the testee
/// sends is its own revision's and is read by the runner at the trace's (rule 1 covers that direction), so the
/// recorded messages of the other direction need not decode under `t`.
fn messages_survive(model: &Conversation, t: &Arc<Revision>, role: Role) -> Result<(), Ineligible> {
    let r = &model.revision;
    let rc = Codec::builtin(&r.revision).ok_or(Ineligible::NoCodec("trace"))?;
    let tc = Codec::builtin(&t.revision).ok_or(Ineligible::NoCodec("testee"))?;
    let check = |message: &str, bytes: &[u8], line: usize| -> Result<(), Ineligible> {
        let under_r = rc.decode(message, bytes).map_err(|e| Ineligible::Undecodable {
            line,
            message: message.to_string(),
            revision: r.revision.clone(),
            why: e.msgspec_message(),
        })?;
        let under_t = tc.decode(message, bytes).map_err(|e| Ineligible::Rejects {
            line,
            message: message.to_string(),
            revision: t.revision.clone(),
            why: e.msgspec_message(),
        })?;
        let common: Vec<String> =
            field_names(t, message).into_iter().filter(|f| field_names(r, message).contains(f)).collect();
        let pick = |v: &Value| -> J {
            let mut j = Codec::to_json(v);
            if let Some(o) = j.as_object_mut() {
                o.retain(|k, _| common.contains(k));
            }
            j
        };
        let (a, b) = (pick(&under_r), pick(&under_t));
        if a != b {
            return Err(Ineligible::ReadsDifferently {
                line,
                message: message.to_string(),
                testee: t.revision.clone(),
                as_testee: Box::new(b),
                trace: r.revision.clone(),
                as_trace: Box::new(a),
            });
        }
        Ok(())
    };
    for x in &model.exchanges {
        if role == Role::Prefiller {
            check("MooncakeXferMetadata", &x.request.bytes, x.send_line())?;
        }
        if role == Role::Decoder {
            for r in &x.replies {
                check("MooncakeXferResponse", &r.payload.bytes, r.line.unwrap_or(0))?;
            }
        }
    }
    Ok(())
}

/// Whether the recorded conversation exercises a behaviour that differs between the trace's revision and the
/// testee's: `Some(Some(evidence))` yes, `Some(None)` no, `None` when the runner has no detector for the key.
/// `conditional`: the diff says the difference breaks a mixed pair only when something happens.
fn exercised(
    model: &Conversation,
    key: BehaviourKey,
    role: Role,
    conditional: bool,
    values: (&Behaviour, &Behaviour),
) -> Option<Option<String>> {
    if let Some(evidence) = decoder_outcome_evidence(model, key, values) {
        return Some(if role == Role::Decoder { evidence } else { None });
    }
    // The layout check's error quotes region lengths, which the planning of the answering revision decides.
    if matches!(key, BehaviourKey::KvHalfSplit | BehaviourKey::RegionAlignment) {
        if let Some(e) = quoted_region_lengths(model) {
            return Some(Some(e));
        }
    }
    // How a prefiller plans its copies: the same bytes land, in other descriptors.
    if key.group() == Group::Planning && !conditional {
        return Some(None);
    }
    match wire_evidence(model, key, values) {
        Some(found) => Some(found),
        // Compatible for this deployment and without effect on anything a case compares.
        None if !conditional => Some(None),
        None => None,
    }
}

/// The pulls of the conversation that decoded, with their exchange.
fn requests(model: &Conversation) -> impl Iterator<Item = (&Exchange, &MooncakeXferMetadata)> {
    model.exchanges.iter().filter_map(|x| x.request.value().map(|m| (x, m)))
}

/// Evidence for a behaviour that decides what the decoder reports (its outcome, which decoder cases compare with
/// the recording) without changing the wire: a failure, a free-only pull, several workers settling one request,
/// several KV groups, as the key needs. `None` for an item that does not decide the decoder's outcome.
fn decoder_outcome_evidence(
    model: &Conversation,
    key: BehaviourKey,
    values: (&Behaviour, &Behaviour),
) -> Option<Option<String>> {
    let failure = || {
        model.exchanges.iter().find_map(|x| {
            let replies: Vec<MooncakeXferResponse> =
                x.replies.iter().filter_map(|r| r.payload.value().cloned()).collect();
            match replies.last() {
                None => Some(format!("line {}: a pull without a reply", x.send_line())),
                Some(r) if r.status != Status::FINISH && r.status != Status::CONTINUE => {
                    Some(format!("line {}: status {}", x.send_line(), r.status))
                }
                _ => replies
                    .iter()
                    .find(|r| r.err_reqs.as_ref().is_some_and(|e| !e.is_empty()))
                    .map(|_| format!("line {}: err_reqs", x.send_line())),
            }
        })
    };
    let free_only = || {
        requests(model)
            .find(|(_, m)| m.req_blocks.iter().any(|(_, b)| b.blocks.iter().all(|g| g.is_empty())))
            .map(|(x, _)| format!("line {}: a free-only pull", x.send_line()))
    };
    // Several prefiller workers settle one request (heterogeneous TP fan-out).
    let fan_out = || {
        model.decoders.iter().any(|d| {
            let eps: std::collections::BTreeSet<&str> =
                model.exchanges.iter().filter(|x| x.decoder == d.conn).map(|x| x.endpoint.as_str()).collect();
            eps.len() > 1
        })
    };
    let multi_group = || requests(model).any(|(_, m)| m.req_blocks.iter().any(|(_, b)| b.blocks.len() > 1));
    let reports = |b: &Behaviour| b.failure_report.as_ref().map(|i| i.value);
    let none = Some(FailureReport::None);
    use BehaviourKey as K;
    Some(match key {
        K::FreeOnlySuccess => free_only(),
        K::UnknownOkId | K::FailedRead => None, // (`failed_read`: the pull family has no cross-version cases)
        // How failures are reported differs only where one side reports nothing, or for several KV groups.
        K::FailureReport if reports(values.0) != none && reports(values.1) != none && !multi_group() => None,
        // When a failed request finishes differs only when several workers settle it.
        K::FailureFinish if !fan_out() => None,
        K::FailureReport | K::FailureFinish => failure(),
        K::ReplyRounds
        | K::EmptyIdLists
        | K::PairingCheck
        | K::HeterogeneousTp
        | K::TransferFailure
        | K::BlockCountFailure
        | K::UnknownTransfer
        | K::UndecodableRequest
        | K::ReadyWait
        | K::NeedSend
        | K::EmptyWrite
        | K::RequiredKvLayout
        | K::EqualLengthFields
        | K::MinusOneSentinels
        | K::LayoutCaching
        | K::KvLeases
        | K::ExpiredPull
        | K::RegionAlignment
        | K::KvHalfSplit
        | K::BlockGroups
        | K::DestinationStride
        | K::TpBytePlan
        | K::ReplicatedProducer
        | K::RegionCoalescing
        | K::PairedBlockOrder
        | K::DecoderAddressing
        | K::UnreportedAfterFinish
        | K::DecoderPpTargets
        | K::LeaseRenewal => return None,
    })
}

/// An ERROR whose text quotes region lengths.
fn quoted_region_lengths(model: &Conversation) -> Option<String> {
    let quoted =
        model.exchanges.iter().flat_map(|x| &x.replies).find(|r| {
            r.payload.value().and_then(|r| r.err_msg.as_deref()).is_some_and(|m| m.contains(REGION_MISMATCH))
        })?;
    Some(format!("line {}: an ERROR that quotes region lengths", quoted.line.unwrap_or(0)))
}

/// Evidence on the wire for behaviour `key`: `Some(found)` where the runner has a detector for it, `None` where
/// it has none.
fn wire_evidence(model: &Conversation, key: BehaviourKey, values: (&Behaviour, &Behaviour)) -> Option<Option<String>> {
    use BehaviourKey as K;
    Some(match key {
        K::PairingCheck | K::HeterogeneousTp | K::TpBytePlan => tp_evidence(model),
        K::ReplicatedProducer => {
            tp_differs(model).filter(|_| model.prefillers.iter().any(|p| p.tp_size >= 4)).map(|(x, _)| {
                format!("line {}: TP sizes differ with a prefiller TP size at the head count", x.send_line())
            })
        }
        K::RegionAlignment | K::NeedSend => requests(model)
            .find(|(_, m)| m.remote_pp_size.as_i64().is_some_and(|pp| pp > 1))
            .map(|(x, _)| format!("line {}: decoder PP > 1", x.send_line())),
        K::KvHalfSplit => None,
        K::DecoderPpTargets => {
            model.prefillers.iter().find(|p| p.pp_rank > 0).map(|p| format!("{} is PP rank {}", p.conn, p.pp_rank))
        }
        K::LayoutCaching => layout_caching_evidence(model),
        K::UnreportedAfterFinish => unreported_after_finish(model),
        // Lease heartbeats on the wire (0.34.0).
        K::KvLeases | K::LeaseRenewal => {
            model.heartbeats.first().map(|h| format!("line {}: a lease heartbeat", h.line.unwrap_or(0)))
        }
        K::ExpiredPull => expired_pull_evidence(model, values),
        // -1 in the group index or row offset of a region.
        K::MinusOneSentinels => requests(model)
            .find(|(_, m)| {
                m.registered_group_indices.iter().chain(&m.registered_row_offsets).any(|v| v.as_i64() == Some(-1))
            })
            .map(|(x, _)| format!("line {}: a -1 sentinel", x.send_line())),
        // No detector.
        K::ReplyRounds
        | K::EmptyIdLists
        | K::TransferFailure
        | K::BlockCountFailure
        | K::UnknownTransfer
        | K::UndecodableRequest
        | K::ReadyWait
        | K::EmptyWrite
        | K::RequiredKvLayout
        | K::EqualLengthFields
        | K::BlockGroups
        | K::DestinationStride
        | K::RegionCoalescing
        | K::PairedBlockOrder
        | K::DecoderAddressing
        | K::FailureReport
        | K::FailureFinish
        | K::FreeOnlySuccess
        | K::UnknownOkId
        | K::FailedRead => return None,
    })
}

/// A pull whose decoder's TP size is not its prefiller's.
fn tp_differs(model: &Conversation) -> Option<(&Exchange, &MooncakeXferMetadata)> {
    requests(model).find(|(x, m)| {
        let p = x.prefiller.as_ref().and_then(|c| model.prefillers.iter().find(|p| &p.conn == c));
        p.is_some_and(|p| m.remote_tp_size.as_i64() != Some(p.tp_size))
    })
}

/// TP sizes that differ: in a pull, or — a decoder that refused the pairing before sending anything — in the
/// recorded worker counts.
fn tp_evidence(model: &Conversation) -> Option<String> {
    tp_differs(model).map(|(x, _)| format!("line {}: prefiller and decoder TP sizes differ", x.send_line())).or_else(
        || {
            let decoders =
                model.trace.header.roles.values().filter(|r| **r == crate::role::Role::Decoder).count() as i64;
            model
                .prefillers
                .iter()
                .find(|p| p.tp_size != decoders)
                .map(|p| format!("{} decoder workers and prefiller TP size {}", decoders, p.tp_size))
        },
    )
}

/// A pull that leaves its layout out, relying on the prefiller's cache, or a LAYOUT_MISS.
fn layout_caching_evidence(model: &Conversation) -> Option<String> {
    requests(model)
        .find(|(_, m)| m.layout_id.as_u64() != Some(0) && m.kv_caches_base_addr.is_empty())
        .map(|(x, _)| format!("line {}: a layout-less pull", x.send_line()))
        .or_else(|| {
            model
                .exchanges
                .iter()
                .flat_map(|x| &x.replies)
                .find(|r| r.payload.value().is_some_and(|r| r.status == Status::LAYOUT_MISS))
                .map(|r| format!("line {}: LAYOUT_MISS", r.line.unwrap_or(0)))
        })
}

/// A FINISH that leaves a request of its message unreported.
fn unreported_after_finish(model: &Conversation) -> Option<String> {
    model.exchanges.iter().find_map(|x| {
        let m = x.request.value()?;
        let replies: Vec<MooncakeXferResponse> = x.replies.iter().filter_map(|r| r.payload.value().cloned()).collect();
        if replies.last()?.status != Status::FINISH {
            return None;
        }
        let reported =
            |id: &str| replies.iter().any(|r| r.ok_reqs.iter().chain(r.err_reqs.iter()).flatten().any(|x| x == id));
        m.req_blocks
            .iter()
            .find(|(id, _)| !reported(id))
            .map(|(id, _)| format!("line {}: {id} is left unreported", x.send_line()))
    })
}

/// A pull that failed because its transfer was gone: answered at once (expired), or after the abort timeout in
/// a recording whose prefiller freed a transfer (it expired before the pull came; a pull of a transfer never
/// scheduled times out the same way in every revision).
fn expired_pull_evidence(model: &Conversation, values: (&Behaviour, &Behaviour)) -> Option<String> {
    let expired: Vec<String> = [values.0, values.1]
        .iter()
        .filter_map(|b| b.expired_pull.as_ref().and_then(|i| i.value.get()).map(|x| x.message.clone()))
        .collect();
    let freed = model
        .trace
        .header
        .observed_outcome
        .get("finished_sending")
        .and_then(J::as_object)
        .is_some_and(|m| m.values().any(|v| v.as_array().is_some_and(|a| !a.is_empty())));
    model.exchanges.iter().flat_map(|x| &x.replies).find_map(|r| {
        let m = r.payload.value()?.err_msg.as_ref()?;
        let gone = expired.contains(m) || (freed && m == "Timeout waiting for P side ready.");
        gone.then(|| format!("line {}: {m:?}", r.line.unwrap_or(0)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str) -> Conversation {
        let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("traces").join(name);
        Conversation::new(mooncake_trace::trace::Trace::load(&p).unwrap()).unwrap()
    }

    #[test]
    fn a_layout_miss_does_not_decode_under_a_revision_without_it() {
        let m = model("vllm-0.33.0/h1_layout_reuse_and_miss.jsonl");
        let t = Spec::builtin().revision("vllm-0.32.0").unwrap();
        let e = messages_survive(&m, t, Role::Decoder).unwrap_err();
        assert!(matches!(&e, Ineligible::Rejects { revision, .. } if revision == "vllm-0.32.0"), "{e:?}");
        assert!(e.to_string().contains("Invalid enum value 3"), "{e}");
        // The same trace's messages all decode under their own revision.
        messages_survive(&m, &m.revision.clone(), Role::Decoder).unwrap();
        messages_survive(&m, &m.revision.clone(), Role::Prefiller).unwrap();
    }

    #[test]
    fn only_what_the_testee_receives_must_decode_under_its_revision() {
        // A 0.24.0 request lacks the kv_block_lens a 0.25.0 struct requires: a 0.25.0 prefiller cannot read it,
        // while a 0.25.0 decoder never receives it (it sends its own requests, which a 0.24.0 prefiller reads).
        let m = model("vllm-0.24.0/a_single_success.jsonl");
        let t = Spec::builtin().revision("vllm-0.25.0..0.25.1").unwrap();
        let e = messages_survive(&m, t, Role::Prefiller).unwrap_err();
        assert!(matches!(&e, Ineligible::Rejects { .. }), "{e:?}");
        assert!(e.to_string().contains("kv_block_lens"), "{e}");
        messages_survive(&m, t, Role::Decoder).unwrap();
    }

    #[test]
    fn another_generation_is_never_chosen() {
        let m = model("vllm-0.33.0/a_single_success.jsonl");
        let e = choose(&m, Role::Prefiller, &["vllm-0.13.0..0.15.1".into()]).err().unwrap();
        assert!(
            matches!(&e, Unpaired::NoneEligible { rejected, .. }
                if matches!(rejected.as_slice(), [(_, Ineligible::Generation { trace: 2, testee: 1 })])),
            "{e:?}"
        );
        assert!(e.to_string().contains("generation"), "{e}");
        // The nearest eligible revision wins.
        let p = choose(&m, Role::Prefiller, &["vllm-0.13.0..0.15.1".into(), "vllm-0.32.0".into()]).ok().unwrap();
        assert_eq!(p.testee.revision, "vllm-0.32.0");
    }

    #[test]
    fn verdicts_are_matched_to_the_deployment() {
        use PeerRole::{Client, Decoder as D, Prefiller as P, Server};
        let v =
            |age: Age, from: PeerRole, to: PeerRole| Verdict::new(Effect::Compatible, &Peers::new(age, from, to), "");
        assert_eq!(v(Age::Old, D, P).peers.to_string(), "old D → new P");
        // The testee is a newer prefiller: old D → new P and new P → old D concern it; new D → old P does not.
        assert!(concerns(&v(Age::Old, D, P), Role::Prefiller, true));
        assert!(concerns(&v(Age::New, P, D), Role::Prefiller, true));
        assert!(!concerns(&v(Age::New, D, P), Role::Prefiller, true));
        assert!(!concerns(&v(Age::Old, P, D), Role::Prefiller, true));
        // An older decoder testee, with the runner's newer bootstrap server answering its /query.
        assert!(concerns(&v(Age::New, Server, Client), Role::Decoder, false));
        assert!(!concerns(&v(Age::Old, Server, Client), Role::Decoder, false));
        let generic = |r: &str| PeerRole::Other(r.to_string());
        assert!(concerns(&v(Age::New, generic("sender"), generic("receiver")), Role::Decoder, false));
        assert!(concerns(&Verdict::new(Effect::Compatible, &Peers::Local, ""), Role::Decoder, false));
    }

    #[test]
    fn projection_keeps_only_common_fields() {
        let r = Spec::builtin().revision("vllm-0.33.0").unwrap();
        let t = Spec::builtin().revision("vllm-0.32.0").unwrap();
        let p = Pairing { runner: r.clone(), testee: t.clone(), testee_profile: profile(t) };
        let reply = MooncakeXferResponse {
            status: Status::FINISH,
            ok_reqs: Some(["a"].into()),
            err_reqs: None,
            err_msg: None,
            layout_id: 7u64.into(),
        };
        let got = p.project_reply(&reply);
        assert_eq!(got.layout_id.as_u64(), Some(0));
        assert_eq!(got.ok_reqs, reply.ok_reqs);
        assert_eq!(Pairing::same(r).project_reply(&reply).layout_id.as_u64(), Some(7));
    }
}
