//! What `diff` predicts for one cell and scenario: the rows of `mooncake-conformance diff` that concern a
//! decoder at one revision and a prefiller at another, and — for a row that breaks only when something is
//! sent or happens — whether the scenario sends it (judged on each side's own recording of the scenario).

use mooncake_wire::codec::Codec;
use mooncake_wire::diff::{diff, Age, Change, Effect, Verdict};
use mooncake_wire::spec::behaviour::TpBytePlan;
use mooncake_wire::spec::{BehaviourKey, Revision, Spec};
use serde::Serialize;

use crate::scenarios::{Model, Scenario};
use mooncake_trace::conversation::Conversation;

/// The prediction for one scenario of one cell.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Prediction {
    /// Rows that break this scenario (subject: why).
    pub breaks: Vec<String>,
    /// Rows that break only what the peers cannot observe on the wire (the KV layout in memory).
    pub silent: Vec<String>,
    /// Rows whose effect the spec leaves to a reviewer.
    pub review: Vec<String>,
}

impl Prediction {
    /// Whether no row breaks.
    pub fn works(&self) -> bool {
        self.breaks.is_empty()
    }
}

/// Rows whose break changes only the meaning of bytes in KV memory, which no peer reads.
const SILENT: &[&str] = &["behaviour.required_kv_layout"];

/// Whether a verdict's peers (`new D → old P`, `old server → new client`) describe a decoder whose revision is
/// `d_new` (newer than the prefiller's) and a prefiller that is the other one. The bootstrap server is the
/// prefiller side; the client a decoder queries with.
fn concerns(v: &Verdict, d_new: bool) -> bool {
    v.peers.fit_decoder_at(if d_new { Age::New } else { Age::Old })
}

/// The message of a wire row, and whether the prefiller sends it (else the decoder).
fn message_of(c: &Change) -> (&'static str, bool) {
    if c.subject.starts_with("MooncakeXferResponse") {
        ("MooncakeXferResponse", true)
    } else {
        ("MooncakeXferMetadata", false)
    }
}

/// Why a message of one revision's recording does not survive being read at another.
#[derive(Debug, thiserror::Error)]
enum SurviveError {
    /// A side's revision has no built-in codec.
    #[error("no codec")]
    NoCodec,
    /// The reader's revision does not decode it.
    #[error("{}", .0.msgspec_message())]
    Decode(#[source] mooncake_wire::codec::DecodeError),
    /// It decodes to something else than the sender meant.
    #[error("the {message} reads as {reads} there")]
    Differs {
        /// The message's struct name.
        message: String,
        /// What the reader reads, on the fields both revisions have.
        reads: serde_json::Value,
    },
}

/// Every message of `message` the sender's recording holds decodes under the reader's revision to what the
/// sender meant, on the fields both have. `Err` names the first that does not.
fn survive(sender: &Conversation, reader: &Revision, message: &str, replies: bool) -> Result<(), SurviveError> {
    let (Some(sc), Some(rc)) = (Codec::builtin(&sender.revision.revision), Codec::builtin(&reader.revision)) else {
        return Err(SurviveError::NoCodec);
    };
    let fields = |r: &Revision| -> Vec<String> {
        r.structs.get(message).map(|s| s.fields.iter().map(|f| f.name.clone()).collect()).unwrap_or_default()
    };
    let common: Vec<String> = fields(reader).into_iter().filter(|f| fields(&sender.revision).contains(f)).collect();
    for x in &sender.exchanges {
        let bytes: Vec<&Vec<u8>> =
            if replies { x.replies.iter().map(|r| &r.payload.bytes).collect() } else { vec![&x.request.bytes] };
        for b in bytes {
            let Ok(mine) = sc.decode(message, b) else { continue };
            let theirs = rc.decode(message, b).map_err(SurviveError::Decode)?;
            let pick = |v: &mooncake_wire::codec::Value| {
                let mut j = Codec::to_json(v);
                if let Some(o) = j.as_object_mut() {
                    o.retain(|k, _| common.contains(k));
                }
                j
            };
            if pick(&mine) != pick(&theirs) {
                return Err(SurviveError::Differs { message: message.to_string(), reads: pick(&theirs) });
            }
        }
    }
    Ok(())
}

/// Whether the scenario exercises a behaviour row that breaks only when something happens.
fn behaviour_exercised(
    key: BehaviourKey,
    d: &Conversation,
    p: &Conversation,
    scenario: &Scenario,
    model: &Model,
) -> bool {
    let tp_differs = scenario.decoder_tp != scenario.prefiller_tp;
    use BehaviourKey as K;
    match key {
        K::PairingCheck | K::HeterogeneousTp => tp_differs,
        // Between two sender plans only head re-sharding differs, which needs a TP size above the head count.
        K::TpBytePlan => {
            let whole =
                |r: &Revision| r.behaviour.tp_byte_plan.as_ref().is_some_and(|i| i.value == TpBytePlan::WholeBlock);
            if whole(&d.revision) || whole(&p.revision) {
                tp_differs
            } else {
                tp_differs && scenario.prefiller_tp.max(scenario.decoder_tp) > model.total_num_kv_heads
            }
        }
        K::ReplicatedProducer => {
            tp_differs && scenario.prefiller_tp.max(scenario.decoder_tp) >= model.total_num_kv_heads
        }
        // No scenario runs PP > 1 or a Mamba-hybrid model, nor a read (the matrix is the push family's).
        K::RegionAlignment | K::NeedSend | K::KvHalfSplit | K::DecoderPpTargets | K::FailedRead => false,
        K::MinusOneSentinels => d.exchanges.iter().filter_map(|x| x.request.value()).any(|m| {
            m.registered_group_indices.iter().chain(&m.registered_row_offsets).any(|v| v.as_i64() == Some(-1))
        }),
        K::LayoutCaching => d
            .exchanges
            .iter()
            .filter_map(|x| x.request.value())
            .any(|m| m.layout_id.as_u64() != Some(0) && m.kv_caches_base_addr.is_empty()),
        K::UnreportedAfterFinish => p.exchanges.iter().any(|x| {
            let Some(m) = x.request.value() else { return false };
            let replies: Vec<_> = x.replies.iter().filter_map(|r| r.payload.value()).collect();
            let reported =
                |id: &str| replies.iter().any(|r| r.ok_reqs.iter().chain(r.err_reqs.iter()).flatten().any(|x| x == id));
            replies.last().is_some_and(|r| r.status == mooncake_wire::typed::Status::FINISH)
                && m.req_blocks.iter().any(|(id, _)| !reported(id))
        }),
        // A prefiller with a lease frees what nobody renews: a decoder that never renews loses a pull that
        // comes later than the lease.
        K::KvLeases => scenario.prefiller_kv_lease_s.is_some_and(|l| scenario.pull_delay_s > l),
        // A decoder that renews, against a prefiller that refuses renewals: a pull later than that prefiller
        // holds the KV (its abort timeout) finds it gone.
        K::LeaseRenewal => {
            scenario.decoder_kv_lease_s.is_some() && scenario.announce && scenario.pull_delay_s > model.abort_timeout_s
        }
        // A round with a block-count failure that also writes other requests: an err-then-ok prefiller
        // answers it with two FINISH replies (the error, then every ready id as ok), a one-per-round
        // prefiller with one; a decoder stops at the first FINISH.
        K::ReplyRounds => [d, p].iter().any(|t| t.exchanges.iter().any(block_count_round_writes_others)),
        // A conditional row without a rule here is taken as exercised, so the matrix shows the gap.
        K::EmptyIdLists
        | K::TransferFailure
        | K::BlockCountFailure
        | K::UnknownTransfer
        | K::UndecodableRequest
        | K::ReadyWait
        | K::EmptyWrite
        | K::RequiredKvLayout
        | K::EqualLengthFields
        | K::ExpiredPull
        | K::BlockGroups
        | K::DestinationStride
        | K::RegionCoalescing
        | K::PairedBlockOrder
        | K::DecoderAddressing
        | K::FailureReport
        | K::FailureFinish
        | K::FreeOnlySuccess
        | K::UnknownOkId => true,
    }
}

/// Whether the scenario exercises a row that breaks only when something happens.
fn exercised(c: &Change, d: &Conversation, p: &Conversation, scenario: &Scenario, model: &Model) -> bool {
    if let Some(key) = BehaviourKey::of_subject(&c.subject) {
        return behaviour_exercised(key, d, p, scenario, model);
    }
    if c.subject.starts_with("bootstrap.") || c.subject.starts_with("kv_transfer_params") {
        // Scenarios never re-register a slot with the same address, call another route, or set router keys
        // the other revision reads differently.
        return false;
    }
    let (message, from_prefiller) = message_of(c);
    let (sender, reader) = if from_prefiller { (p, &d.revision) } else { (d, &p.revision) };
    survive(sender, reader, message, from_prefiller).is_err()
}

/// Whether an exchange's replies name a request failed for its block count (`P num blocks less than D`) and,
/// besides it, a request delivered.
fn block_count_round_writes_others(x: &mooncake_trace::conversation::Exchange) -> bool {
    let replies: Vec<_> = x.replies.iter().filter_map(|r| r.payload.value()).collect();
    let short: Vec<&str> = replies
        .iter()
        .filter(|r| r.err_msg.as_deref() == Some(crate::derive::BLOCK_COUNT_MSG))
        .flat_map(|r| r.err_reqs.iter().flatten())
        .collect();
    !short.is_empty() && replies.iter().flat_map(|r| r.ok_reqs.iter().flatten()).any(|id| !short.contains(&id))
}

/// The prediction for a decoder at `d`'s revision and a prefiller at `p`'s, in `scenario`.
pub fn predict(d: &Conversation, p: &Conversation, scenario: &Scenario, model: &Model) -> Prediction {
    let (dr, pr) = (&d.revision, &p.revision);
    let mut out = Prediction::default();
    if dr.revision == pr.revision {
        return out;
    }
    if dr.generation != pr.generation {
        out.breaks.push(format!(
            "generation: {} is generation {}, {} generation {}: the decoder cannot reach the prefiller",
            dr.revision, dr.generation, pr.revision, pr.generation
        ));
        return out;
    }
    let push = &Spec::builtin().push().revisions;
    let pos = |r: &Revision| push.iter().position(|x| x.revision == r.revision).unwrap_or(0);
    let d_new = pos(dr) > pos(pr);
    let (old, new) = if d_new { (pr.clone(), dr.clone()) } else { (dr.clone(), pr.clone()) };
    for c in &diff(&old, &new).changes {
        for v in [&c.old_reads_new, &c.new_reads_old] {
            if !concerns(v, d_new) {
                continue;
            }
            let row = format!("`{}` ({}): {}", c.subject, v.peers, v.reason);
            match &v.effect {
                Effect::Breaks { .. } if SILENT.contains(&c.subject.as_str()) => out.silent.push(row),
                // A type change that degenerate messages survive (`req_blocks` whose block lists are all empty: a
                // free-only pull): judged, like a wire row that breaks when sent, on the scenario's own messages.
                Effect::Breaks { except: Some(_) }
                    if c.subject.starts_with("Mooncake") && !exercised(c, d, p, scenario, model) => {}
                Effect::Breaks { .. } => out.breaks.push(row),
                Effect::BreaksWhenSent { when } if exercised(c, d, p, scenario, model) => {
                    out.breaks.push(format!("{row} (when {when})"))
                }
                Effect::BreaksWhenSent { .. } | Effect::Compatible => {}
                Effect::Review => out.review.push(row),
            }
        }
    }
    out.breaks.dedup();
    out
}
