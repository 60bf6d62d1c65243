//! Behaviour rules (spec `[behaviour]`): wire-visible behaviour the schemas do not show. Where the spec data
//! determines the cross-version effect it is derived here (which fields old senders never send, which
//! receivers know a field at all, which side is stricter); where it does not, the row is for review.
//! Prose for each item: `spec/PROTOCOL.md`, "Behaviour items"; compatibility: `spec/PROTOCOL.md`, "Compatibility".

use super::ctx::BothWays;
use super::model::{Area, Bytes, Change, Effect, Kind, Verdict};
use crate::spec::behaviour::{
    EmptyIdLists, HeterogeneousTp, Item, KvHalfSplit, KvLayout, RegionAlignment, ReplicatedProducer, TpBytePlan,
    UnreportedAfterFinish,
};
use crate::spec::{Behaviour, BehaviourKey, Revision, StructDef, TransportMessage, TypeExpr};

fn row(
    subject: BehaviourKey,
    what: String,
    peers: &BothWays,
    orn: (Effect, String),
    nro: (Effect, String),
    bytes: Bytes,
) -> Change {
    Change::new(
        Area::Behaviour,
        Kind::Behaviour,
        format!("behaviour.{subject}"),
        what,
        Verdict::new(orn.0, &peers.old_reads_new, orn.1),
        Verdict::new(nro.0, &peers.new_reads_old, nro.1),
        bytes,
    )
}

fn review(why: &str) -> (Effect, String) {
    (Effect::Review, why.to_string())
}

/// The request message (the one answered by another) and its answer.
fn request(rev: &Revision) -> Option<(&TransportMessage, Option<&TransportMessage>)> {
    let m = rev.transport.messages.iter().find(|m| m.answered_by.is_some() && m.encoding == "msgpack")?;
    Some((m, m.answered_by.as_deref().and_then(|a| rev.message(a))))
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
}

/// An item's value as the spec spells it, or `unrecorded`.
fn show<T: serde::Serialize>(v: &Option<Item<T>>) -> String {
    match v {
        Some(i) => match serde_json::to_value(&i.value) {
            Ok(serde_json::Value::String(s)) => s,
            Ok(other) => other.to_string(),
            Err(_) => "?".into(),
        },
        None => "unrecorded".into(),
    }
}

fn value<T: Copy>(v: &Option<Item<T>>) -> Option<T> {
    v.as_ref().map(|i| i.value)
}

/// Why a change of `key` changes only what one side does locally (what it frees, reports or how many
/// descriptors it issues for the same bytes), so that a mixed pair behaves as the two sides' own revisions say, on
/// the same wire; `None` for an item a rule of its own classifies (or, without one, `unclassified` shows for
/// review).
fn local(key: BehaviourKey) -> Option<&'static str> {
    use BehaviourKey::*;
    Some(match key {
        TransferFailure => "when the prefiller frees a request whose write failed is its own bookkeeping",
        BlockCountFailure => "what the prefiller frees after a block-count failure is its own bookkeeping",
        NeedSend => "the delivery count is the prefiller's; an older decoder never sends a PP size above 1",
        EmptyWrite => "whether the prefiller calls its own transfer engine for an empty round",
        RegionCoalescing => "merged regions move the same bytes in fewer descriptors",
        DestinationStride => "placing blocks by each side's block length needs `block_lens`, whose own row covers the wire",
        FailureReport => "what the decoder reports to its own scheduler",
        FailureFinish => "when the decoder reports a failed request finished, to its own scheduler",
        FreeOnlySuccess => "what the decoder reports to its own scheduler for a free-only pull",
        FailedRead => "what the decoder reports to its own scheduler after a failed read; it sends the same completion either way",
        UnknownOkId => "a prefiller only lists ids of the pull",
        DecoderPpTargets => "only a prefiller with PP > 1 has PP ranks other than 0",
        DecoderAddressing => "how the decoder finds prefiller workers (a generation change has its own row)",
        UnknownTransfer => "what the prefiller does with a transfer it does not hold",
        ReadyWait => "how long the prefiller waits for its own requests",
        PairedBlockOrder => "the same bytes land in the same places; only how many descriptors the prefiller's own engine issues differs",
        ReplyRounds | EmptyIdLists | PairingCheck | HeterogeneousTp | UndecodableRequest | RequiredKvLayout | EqualLengthFields | MinusOneSentinels | LayoutCaching | KvLeases | ExpiredPull | RegionAlignment | KvHalfSplit | BlockGroups | TpBytePlan | ReplicatedProducer | UnreportedAfterFinish | LeaseRenewal => return None,
    })
}

pub(crate) fn diff_behaviour(old: &Revision, new: &Revision, out: &mut Vec<Change>) {
    let (bo, bn) = (&old.behaviour, &new.behaviour);
    let (req_n, resp_n) = request(new).or(request(old)).map(|(a, b)| (Some(a), b)).unwrap_or((None, None));
    let req_peers = req_n.map(|m| BothWays::of(&m.from, &m.to)).unwrap_or_else(|| BothWays::of("decoder", "prefiller"));
    let resp_peers =
        resp_n.map(|m| BothWays::of(&m.from, &m.to)).unwrap_or_else(|| BothWays::of("prefiller", "decoder"));
    let req_old: Option<&StructDef> = request(old).and_then(|(m, _)| old.structs.get(&m.name));
    let req_new: Option<&StructDef> = request(new).and_then(|(m, _)| new.structs.get(&m.name));
    let resp_old: Option<&StructDef> = request(old).and_then(|(_, r)| r).and_then(|m| old.structs.get(&m.name));
    let resp_new: Option<&StructDef> = request(new).and_then(|(_, r)| r).and_then(|m| new.structs.get(&m.name));
    let req_name = req_n.map(|m| m.name.as_str()).unwrap_or("request");

    if value(&bo.empty_id_lists) != value(&bn.empty_id_lists) {
        let known = |v: &Option<Item<EmptyIdLists>>| v.is_some();
        // `[]` and an absent key both read back when the id lists are `list | None` defaulting to None.
        let nullable = |s: Option<&StructDef>| {
            s.is_some_and(|s| {
                ["ok_reqs", "err_reqs"].iter().all(|n| {
                    s.fields.iter().any(|f| {
                        &f.name == n && matches!(f.ty, TypeExpr::Optional(_)) && f.default.as_deref() == Some("None")
                    })
                })
            })
        };
        let (orn, nro) =
            if known(&bo.empty_id_lists) && known(&bn.empty_id_lists) && nullable(resp_old) && nullable(resp_new) {
                let c = (
                    Effect::Compatible,
                    "`ok_reqs`/`err_reqs` are `list | None`: an empty array and an absent key both decode".to_string(),
                );
                (c.clone(), c)
            } else {
                (
                    review("the spec does not say how the decoder treats the other form"),
                    review("the spec does not say how the decoder treats the other form"),
                )
            };
        out.push(row(
            BehaviourKey::EmptyIdLists,
            format!("empty `ok_reqs`/`err_reqs`: `{}` → `{}`", show(&bo.empty_id_lists), show(&bn.empty_id_lists)),
            &resp_peers,
            orn,
            nro,
            Bytes::DifferWhen("a reply with an empty `ok_reqs` or `err_reqs`: written as `90` (empty array) by one revision, omitted by the other".into()),
        ));
    }
    if value(&bo.reply_rounds) != value(&bn.reply_rounds) {
        // Every decoder stops at the first FINISH. An err-then-ok prefiller answers a round with a block-count
        // failure with two (the error, then every ready id as ok), so its decoder reports none of the round's
        // requests; a one-per-round prefiller answers it with one, and its decoder reports the others delivered.
        // A mixed pair sees what two peers of the prefiller's revision see: the decoder ends otherwise than with
        // a prefiller of its own revision.
        let c = (
            Effect::BreaksWhenSent { when: "a round with a block-count failure also writes other requests".into() },
            "a decoder stops at the first FINISH: behind an err-then-ok prefiller it reports none of the round's requests (the error comes first), behind a one-per-round prefiller the others delivered".to_string(),
        );
        out.push(
            row(BehaviourKey::ReplyRounds, format!("`{}` → `{}`", show(&bo.reply_rounds), show(&bn.reply_rounds)), &resp_peers, c.clone(), c, Bytes::Same)
                .note("an err-then-ok prefiller's last round with a block-count failure sends two FINISH replies; every decoder stops at the first"),
        );
    }
    let elf = |b: &Behaviour| b.equal_length_fields.as_ref().map(|i| i.value.fields.clone()).unwrap_or_default();
    let (elf_o, elf_n) = (elf(bo), elf(bn));
    if elf_o != elf_n {
        let added: Vec<String> = elf_n.iter().filter(|f| !elf_o.contains(f)).cloned().collect();
        let removed: Vec<String> = elf_o.iter().filter(|f| !elf_n.contains(f)).cloned().collect();
        let first = elf_n.first().cloned().unwrap_or_default();
        // New receivers require the added fields to match in length; what old senders send for them decides.
        let nro = if added.is_empty() {
            (Effect::Compatible, "the new prefiller checks fewer lengths".to_string())
        } else {
            let never: Vec<String> = added
                .iter()
                .filter(|f| !req_old.is_some_and(|s| s.fields.iter().any(|x| &x.name == *f)))
                .cloned()
                .collect();
            let maybe_empty: Vec<String> = added
                .iter()
                .filter(|f| req_old.is_some_and(|s| s.fields.iter().any(|x| &x.name == *f && !x.required())))
                .cloned()
                .collect();
            if !never.is_empty() {
                // A field that is also newly required fails decoding first; say so rather than hide the row.
                let required_now: Vec<String> = never
                    .iter()
                    .filter(|f| req_new.is_some_and(|s| s.fields.iter().any(|x| &x.name == *f && x.required())))
                    .cloned()
                    .collect();
                (
                    Effect::always(),
                    format!(
                        "old senders never send {} (not in `{}` of {}): whenever a layout is carried, the lengths differ from `{first}` and the new prefiller answers ERROR{}",
                        list(&never),
                        req_name,
                        old.revision,
                        if required_now.is_empty() { String::new() } else { format!(" ({} is also newly required: decoding fails first)", list(&required_now)) }
                    ),
                )
            } else if !maybe_empty.is_empty() {
                review(&format!("old senders may leave {} empty (defaulted there)", list(&maybe_empty)))
            } else {
                (Effect::Compatible, "old senders always send these fields".to_string())
            }
        };
        let orn = if removed.is_empty() {
            (Effect::Compatible, "an old prefiller does not check the added fields' lengths".to_string())
        } else {
            review(&format!(
                "new senders may send {} with other lengths, which an old prefiller rejects",
                list(&removed)
            ))
        };
        out.push(row(
            BehaviourKey::EqualLengthFields,
            format!("layout fields that must have equal lengths: {} → {}", list(&elf_o), list(&elf_n)),
            &req_peers,
            orn,
            nro,
            Bytes::Same,
        ));
    }
    let mos = |b: &Behaviour| b.minus_one_sentinels.as_ref().map(|i| i.value.clone()).unwrap_or_default();
    let (mos_o, mos_n) = (mos(bo), mos(bn));
    if mos_o != mos_n {
        let added: Vec<String> = mos_n.iter().filter(|f| !mos_o.contains(f)).cloned().collect();
        let removed: Vec<String> = mos_o.iter().filter(|f| !mos_n.contains(f)).cloned().collect();
        let known_old: Vec<String> =
            added.iter().filter(|f| req_old.is_some_and(|s| s.fields.iter().any(|x| &x.name == *f))).cloned().collect();
        let unknown_old: Vec<String> = added.iter().filter(|f| !known_old.contains(f)).cloned().collect();
        let orn = if known_old.is_empty() {
            (Effect::Compatible, "old receivers do not know these fields: they ignore them".to_string())
        } else {
            (
                Effect::when(format!("{} holds -1", list(&known_old))),
                format!(
                    "old receivers know {} but not -1 as a sentinel there{}",
                    list(&known_old),
                    if unknown_old.is_empty() {
                        String::new()
                    } else {
                        format!(" ({} is unknown to them and ignored)", list(&unknown_old))
                    }
                ),
            )
        };
        let known_new: Vec<String> = removed
            .iter()
            .filter(|f| req_new.is_some_and(|s| s.fields.iter().any(|x| &x.name == *f)))
            .cloned()
            .collect();
        let nro = if known_new.is_empty() {
            (Effect::Compatible, "old senders never send -1 where new receivers do not expect it".to_string())
        } else {
            (
                Effect::when(format!("an old sender sends -1 in {}", list(&known_new))),
                "new receivers no longer take -1 as a sentinel there".to_string(),
            )
        };
        out.push(row(
            BehaviourKey::MinusOneSentinels,
            format!("`-1` sentinels: {} → {}", list(&mos_o), list(&mos_n)),
            &req_peers,
            orn,
            nro,
            Bytes::Same,
        ));
    }
    if value(&bo.pairing_check) != value(&bn.pairing_check) {
        // With equal TP sizes every rank pairs with its own; the rules differ only across TP sizes, where the
        // heterogeneous-TP row decides.
        let e = (
            Effect::when("the prefiller and decoder TP sizes differ"),
            "the ranks a prefiller accepts differ between the two rules only when TP sizes differ".to_string(),
        );
        out.push(row(
            BehaviourKey::PairingCheck,
            format!("`{}` → `{}`", show(&bo.pairing_check), show(&bn.pairing_check)),
            &req_peers,
            e.clone(),
            e,
            Bytes::Same,
        ));
    }
    if value(&bo.heterogeneous_tp) != value(&bn.heterogeneous_tp) {
        let what = format!("heterogeneous TP: `{}` → `{}`", show(&bo.heterogeneous_tp), show(&bn.heterogeneous_tp));
        match (value(&bo.heterogeneous_tp), value(&bn.heterogeneous_tp)) {
            (Some(a), Some(_)) => {
                let side = if a == HeterogeneousTp::Supported { "new" } else { "old" };
                let e = (
                    Effect::when("the prefiller and decoder TP sizes differ"),
                    format!("the {side} peer does not support heterogeneous TP"),
                );
                out.push(row(BehaviourKey::HeterogeneousTp, what, &req_peers, e.clone(), e, Bytes::Same));
            }
            _ => {
                let r = review("recorded for one revision only");
                out.push(row(BehaviourKey::HeterogeneousTp, what, &req_peers, r.clone(), r, Bytes::Same));
            }
        }
    }
    if value(&bo.required_kv_layout) != value(&bn.required_kv_layout) {
        let (a, b) = (show(&bo.required_kv_layout), show(&bn.required_kv_layout));
        let named = |v: Option<KvLayout>| matches!(v, Some(KvLayout::Hnd | KvLayout::Lbhnc));
        let (orn, nro) = if named(value(&bo.required_kv_layout)) && named(value(&bn.required_kv_layout)) {
            let e = (Effect::always(), format!("the KV caches are laid out differently (`{a}` vs `{b}`): blocks land in the wrong layout, silently"));
            (e.clone(), e)
        } else {
            let c = (Effect::Compatible, format!("`{a}` → `{b}`: only one of the two revisions requires a layout"));
            (c.clone(), c)
        };
        out.push(row(BehaviourKey::RequiredKvLayout, format!("`{a}` → `{b}`"), &req_peers, orn, nro, Bytes::Same));
    }
    if value(&bo.unreported_after_finish) != value(&bn.unreported_after_finish) {
        let what = format!(
            "requests a FINISH left unreported: `{}` → `{}`",
            show(&bo.unreported_after_finish),
            show(&bn.unreported_after_finish)
        );
        let strict = |v: &Option<Item<UnreportedAfterFinish>>| value(v) == Some(UnreportedAfterFinish::Failed);
        let lenient = |v: &Option<Item<UnreportedAfterFinish>>| value(v) == Some(UnreportedAfterFinish::Ignored);
        let finishes =
            |who: &str| Effect::when(format!("{who} prefiller's FINISH leaves a request of the message unreported"));
        let (orn, nro) = if lenient(&bo.unreported_after_finish) && strict(&bn.unreported_after_finish) {
            (
                (Effect::Compatible, "the old decoder ignores unreported requests".to_string()),
                (finishes("an old"), "the new decoder fails such a request".to_string()),
            )
        } else if strict(&bo.unreported_after_finish) && lenient(&bn.unreported_after_finish) {
            (
                (finishes("a new"), "the old decoder fails such a request".to_string()),
                (Effect::Compatible, "the new decoder ignores unreported requests".to_string()),
            )
        } else {
            (review("recorded for one revision only"), review("recorded for one revision only"))
        };
        out.push(row(BehaviourKey::UnreportedAfterFinish, what, &resp_peers, orn, nro, Bytes::Same));
    }
    match (bo.layout_caching(), bn.layout_caching()) {
        (None, None) => {}
        (None, Some(lc)) => {
            // The id the cache is keyed by, echoed in the new answer but unknown to the old one: a decoder can
            // only learn that a prefiller caches layouts from that echo.
            let echo = lc.cache_key.iter().find(|k| {
                resp_new.is_some_and(|s| s.fields.iter().any(|f| &f.name == *k))
                    && !resp_old.is_some_and(|s| s.fields.iter().any(|f| &f.name == *k))
            });
            let req_id_default = echo
                .and_then(|k| req_new.and_then(|s| s.fields.iter().find(|f| &f.name == k)))
                .map(|f| f.default_display());
            let resp_name = resp_n.map(|m| m.name.as_str()).unwrap_or("reply");
            let orn = match echo {
                Some(k) => (
                    Effect::Compatible,
                    format!("a new decoder leaves the layout out only after a prefiller echoed `{k}`, and an old prefiller's `{resp_name}` has no `{k}`"),
                ),
                None => review("the spec shows no echo by which a decoder learns that the prefiller caches layouts"),
            };
            let nro = match (echo, req_old.is_some_and(|s| echo.is_some_and(|k| s.fields.iter().any(|f| &f.name == k))))
            {
                (Some(k), false) => (
                    Effect::Compatible,
                    format!(
                        "old decoders never send `{k}` (read as its default `{}`) and always carry the layout",
                        req_id_default.unwrap_or_default()
                    ),
                ),
                _ => review("old decoders may already send the cache key"),
            };
            out.push(
                row(
                    BehaviourKey::LayoutCaching,
                    format!("layout caching by {} (at most {} peer layouts; miss ⇒ `{}`)", list(&lc.cache_key), lc.max_peer_layouts, lc.miss_status),
                    &req_peers,
                    orn,
                    nro,
                    Bytes::Same,
                )
                .note(format!(
                    "a layout-less pull carries empty {}: a receiver that requires them non-empty, or ignores the cache key, mishandles it",
                    list(&lc.layout_fields)
                )),
            );
            if let Some(k) = echo {
                for c in out
                    .iter_mut()
                    .filter(|c| c.kind == Kind::EnumValueAdded && c.subject.ends_with(&format!(".{}", lc.miss_status)))
                {
                    c.notes.push(format!(
                        "a new prefiller sends `{}` only in answer to a layout-less pull, which a new decoder sends only to a prefiller that echoed `{k}`: a mixed pair never sees it",
                        lc.miss_status
                    ));
                }
            }
        }
        (Some(_), None) => {
            let r = review("layout caching is gone; decoders that rely on it must carry the layout again");
            out.push(row(
                BehaviourKey::LayoutCaching,
                "layout caching removed".into(),
                &req_peers,
                r.clone(),
                r,
                Bytes::Same,
            ));
        }
        (Some(a), Some(b)) => {
            let mut same = a.clone();
            same.max_peer_layouts = b.max_peer_layouts;
            let changed_only_size = serde_json::to_value(&same).ok() == serde_json::to_value(b).ok();
            if serde_json::to_value(a).ok() != serde_json::to_value(b).ok() {
                let e = if changed_only_size {
                    (
                        Effect::Compatible,
                        "the cache size is local to the prefiller; a miss is answered either way".to_string(),
                    )
                } else {
                    review("the cache key, the layout fields or the miss answer changed")
                };
                out.push(row(
                    BehaviourKey::LayoutCaching,
                    format!("{} → {} peer layouts", a.max_peer_layouts, b.max_peer_layouts),
                    &req_peers,
                    e.clone(),
                    e,
                    Bytes::Same,
                ));
            }
        }
    }
    // Planning rules: what the prefiller copies for a pull.
    if value(&bo.region_alignment) != value(&bn.region_alignment) {
        let partial = |v: Option<RegionAlignment>| {
            matches!(
                v,
                Some(RegionAlignment::ByLayerNamePartialAcrossDecoderPp | RegionAlignment::ByLayerNamePartialAcrossPp)
            )
        };
        let (o, n) = (value(&bo.region_alignment), value(&bn.region_alignment));
        let e = if partial(o) != partial(n) || (partial(o) && partial(n)) {
            (
                Effect::when("the prefiller and decoder PP sizes differ"),
                "layers one PP stage lacks are skipped by one rule and refused by the other".to_string(),
            )
        } else {
            (
                Effect::Compatible,
                "the layout columns each rule needs are checked by the field and equal-length rows".to_string(),
            )
        };
        out.push(row(
            BehaviourKey::RegionAlignment,
            format!("`{}` → `{}`", show(&bo.region_alignment), show(&bn.region_alignment)),
            &req_peers,
            e.clone(),
            e,
            Bytes::Same,
        ));
    }
    if value(&bo.kv_half_split) != value(&bn.kv_half_split) {
        // Where `kv_block_lens` travels, each side states its own (half or whole) block length and the prefiller
        // compares them; before that the prefiller halves both sides by its own rule, moving the same bytes.
        let blocks_first = |v: Option<KvHalfSplit>| v == Some(KvHalfSplit::WhenBlocksFirst);
        let states_lengths =
            |s: Option<&StructDef>| s.is_some_and(|s| s.fields.iter().any(|f| f.name == "kv_block_lens"));
        let e = if blocks_first(value(&bo.kv_half_split)) == blocks_first(value(&bn.kv_half_split)) {
            (
                Effect::when("the model is Mamba-hybrid"),
                "the two rules split differently only for Mamba-hybrid models".to_string(),
            )
        } else if states_lengths(req_old) && states_lengths(req_new) {
            (
                Effect::always(),
                "one side registers each attention block as K and V halves (`kv_block_lens` half the stride) and the other as a whole: the prefiller answers ERROR \"Mooncake KV region length mismatch ...\"".to_string(),
            )
        } else {
            (
                Effect::Compatible,
                "the prefiller splits both sides by its own rule: the same bytes move, in halves or whole blocks"
                    .to_string(),
            )
        };
        out.push(row(
            BehaviourKey::KvHalfSplit,
            format!("K/V halves: `{}` → `{}`", show(&bo.kv_half_split), show(&bn.kv_half_split)),
            &req_peers,
            e.clone(),
            e,
            Bytes::Same,
        ));
    }
    if value(&bo.block_groups) != value(&bn.block_groups) {
        let c = (
            Effect::Compatible,
            "a flattening prefiller also copies the request's other groups' blocks into each region; they belong to the same request and are unused by that region's layers".to_string(),
        );
        out.push(row(
            BehaviourKey::BlockGroups,
            format!("blocks per region: `{}` → `{}`", show(&bo.block_groups), show(&bn.block_groups)),
            &req_peers,
            c.clone(),
            c,
            Bytes::Same,
        ));
    }
    if value(&bo.tp_byte_plan) != value(&bn.tp_byte_plan) {
        let head = |v: Option<TpBytePlan>| v == Some(TpBytePlan::SenderPlanHeadResharding);
        let e = if head(value(&bo.tp_byte_plan)) != head(value(&bn.tp_byte_plan))
            && value(&bo.tp_byte_plan) != Some(TpBytePlan::WholeBlock)
        {
            (
                Effect::when("one side's TP size exceeds the number of KV heads and the other's does not"),
                "only one rule re-shards KV heads".to_string(),
            )
        } else {
            (
                Effect::when("the prefiller and decoder TP sizes differ"),
                "the rules slice blocks differently across TP sizes".to_string(),
            )
        };
        out.push(row(
            BehaviourKey::TpBytePlan,
            format!("`{}` → `{}`", show(&bo.tp_byte_plan), show(&bn.tp_byte_plan)),
            &req_peers,
            e.clone(),
            e,
            Bytes::Same,
        ));
    }
    if value(&bo.replicated_producer) != value(&bn.replicated_producer) {
        let e = if value(&bo.replicated_producer) == Some(ReplicatedProducer::NotConsidered) {
            (
                Effect::when("the prefiller and decoder TP sizes differ"),
                "one rule has no notion of a replicated cache".to_string(),
            )
        } else {
            (
                Effect::when("the prefiller's TP size reaches the number of KV heads"),
                "the rules disagree on whether the prefiller's cache is replicated".to_string(),
            )
        };
        out.push(row(
            BehaviourKey::ReplicatedProducer,
            format!("`{}` → `{}`", show(&bo.replicated_producer), show(&bn.replicated_producer)),
            &req_peers,
            e.clone(),
            e,
            Bytes::Same,
        ));
    }
    leases(old, new, &req_peers, &resp_peers, resp_old, out);
    for (name, why) in BehaviourKey::ALL.iter().filter_map(|k| Some((*k, local(*k)?))) {
        let (o, n) = (item_value(bo, name), item_value(bn, name));
        if o != n {
            let c = (Effect::Compatible, why.to_string());
            // A decoder's item is about the replies it reads, a prefiller's about the requests it answers.
            let peers = if name.group().is_decoder() { &resp_peers } else { &req_peers };
            out.push(row(name, format!("`{}` → `{}`", plain(&o), plain(&n)), peers, c.clone(), c, Bytes::Same));
        }
    }
}

/// Rows no rule above wrote: an item whose value changed but that no rule classifies is shown for review, never
/// dropped (a diff that skips what it cannot judge gives a false all-clear).
pub(crate) fn unclassified(old: &Revision, new: &Revision, out: &mut Vec<Change>) {
    let peers = BothWays::unnamed();
    for &name in BehaviourKey::ALL {
        let (o, n) = (item_value(&old.behaviour, name), item_value(&new.behaviour, name));
        if o != n && !out.iter().any(|c| c.subject == format!("behaviour.{name}")) {
            let r = review("no rule of the diff classifies this item's change");
            out.push(row(name, format!("`{}` → `{}`", plain(&o), plain(&n)), &peers, r.clone(), r, Bytes::Same));
        }
    }
}

/// KV leases (prefiller), their renewal (decoder) and the answer to a pull of an expired transfer.
fn leases(
    old: &Revision,
    new: &Revision,
    req_peers: &BothWays,
    resp_peers: &BothWays,
    resp_old: Option<&StructDef>,
    out: &mut Vec<Change>,
) {
    let (bo, bn) = (&old.behaviour, &new.behaviour);
    // A prefiller with leases frees a finished request's blocks `key` seconds after it finished unless the
    // decoder renews them; a decoder that does not renew with the same key pulls in time only by luck.
    let renews = |b: &Behaviour, key: &str| b.lease_renewal().is_some_and(|r| r.config_key == key);
    let holds = |leases: Option<&crate::spec::KvLeases>,
                 other: Option<&crate::spec::KvLeases>,
                 renewing: bool,
                 who: &str| {
        match (leases, other) {
            // The deployment's lease setting means nothing to this prefiller: it holds the blocks for its abort
            // timeout, longer or shorter than the lease its peers of the other revision keep.
            (None, Some(o)) => (
                Effect::when(format!(
                    "the prefillers are given `{}` (this one ignores it) and a pull comes later than the lease",
                    o.config_key
                )),
                format!("{who} prefiller holds a finished request's blocks for its abort timeout whatever the lease, and renewals do not extend it there"),
            ),
            (None, None) => (Effect::Compatible, "neither prefiller leases".to_string()),
            (Some(_), _) if renewing => {
                (Effect::Compatible, "the decoder renews with the key the prefiller leases by".to_string())
            }
            (Some(l), _) => (
                Effect::when(format!(
                    "the prefiller sets `{}` and the decoder pulls more than that many seconds after the prefill finished",
                    l.config_key
                )),
                format!("{who} prefiller frees the blocks when the lease runs out, and this decoder never renews it"),
            ),
        }
    };
    if serde_json::to_value(bo.kv_leases()).ok() != serde_json::to_value(bn.kv_leases()).ok() {
        let what = match (bo.kv_leases(), bn.kv_leases()) {
            (None, Some(l)) => format!(
                "KV leases by `{}` (renewed to {}/{} of it; heartbeat answered `{}`, `{}` when unset)",
                l.config_key, l.renew_to[0], l.renew_to[1], l.renewed_status, l.off_status
            ),
            (Some(l), None) => format!("KV leases by `{}` removed", l.config_key),
            _ => "KV leases changed".to_string(),
        };
        let (orn, nro) = match (bo.kv_leases(), bn.kv_leases()) {
            (Some(a), Some(b)) if a.config_key == b.config_key => {
                (review("the lease's renewal or answers changed"), review("the lease's renewal or answers changed"))
            }
            _ => (
                holds(
                    bo.kv_leases(),
                    bn.kv_leases(),
                    bo.kv_leases().is_some_and(|l| renews(bn, &l.config_key)),
                    "an old",
                ),
                holds(
                    bn.kv_leases(),
                    bo.kv_leases(),
                    bn.kv_leases().is_some_and(|l| renews(bo, &l.config_key)),
                    "a new",
                ),
            ),
        };
        let mut c = row(BehaviourKey::KvLeases, what, req_peers, orn, nro, Bytes::Same);
        if let Some(l) = bn.kv_leases().filter(|_| bo.kv_leases().is_none()) {
            c = c.note(format!(
                "an old decoder has no `{}`: set it on a new prefiller only once every decoder renews",
                l.config_key
            ));
        }
        out.push(c);
    }
    if serde_json::to_value(bo.lease_renewal()).ok() != serde_json::to_value(bn.lease_renewal()).ok() {
        // A decoder that renews holds a request's KV at a leasing prefiller as long as it waits; at a prefiller
        // that does not lease by the same key its renewals are refused, and that prefiller frees the blocks
        // after its own timeout: the decoder is then on time only if it pulls before that.
        let relies = |d: &Behaviour, p: &Behaviour, who: &str| {
            match d.lease_renewal() {
            Some(r) if p.kv_leases().is_none_or(|l| l.config_key != r.config_key) => (
                Effect::when(format!(
                    "the decoder sets `{}` and pulls later than the prefiller's abort timeout after the prefill finished",
                    r.config_key
                )),
                format!("{who} prefiller does not lease by `{}`: the renewals are refused, and it frees the blocks after its abort timeout however long the decoder renews", r.config_key),
            ),
            _ => (
                Effect::Compatible,
                "what a decoder that does not renew meets is behaviour.kv_leases'".to_string(),
            ),
        }
        };
        let what = match bn.lease_renewal() {
            Some(r) => format!(
                "the decoder renews the leases of requests it has not pulled, every {}/{} of `{}`",
                r.interval[0], r.interval[1], r.config_key
            ),
            None => "lease renewal removed".into(),
        };
        let (orn, nro) = (relies(bn, bo, "an old"), relies(bo, bn, "a new"));
        out.push(row(BehaviourKey::LeaseRenewal, what, req_peers, orn, nro, Bytes::Same));
    }
    if serde_json::to_value(bo.expired_pull()).ok() != serde_json::to_value(bn.expired_pull()).ok() {
        // A pull of a transfer the prefiller no longer holds fails either way: at once with these, or after the
        // ready-wait timeout (FINISH, every pending id in `err_reqs`). Both reach the decoder as `err_reqs`.
        let answer = |rev: &Revision, msg: &str| -> Option<Vec<String>> {
            rev.replies
                .as_ref()?
                .texts
                .iter()
                .find(|t| t.shape() == crate::spec::text_shape(msg))
                .map(|t| t.status.clone())
        };
        let reads = |reader: &Revision, reader_resp: Option<&StructDef>, statuses: &[String]| {
            reader_resp.is_some_and(|s| s.fields.iter().any(|f| f.name == "err_reqs"))
                && statuses.iter().all(|st| reader.enums.values().any(|e| e.members.iter().any(|m| &m.name == st)))
        };
        let dir = |sender: Option<&crate::spec::ExpiredPull>,
                   sender_rev: &Revision,
                   reader: &Revision,
                   reader_resp: Option<&StructDef>,
                   who: &str| {
            match sender {
            None => (
                Effect::Compatible,
                format!("{who} prefiller answers such a pull after the ready-wait timeout, FINISH with `err_reqs`, as before"),
            ),
            Some(e) => match answer(sender_rev, &e.message) {
                Some(st) if reads(reader, reader_resp, &st) => (
                    Effect::Compatible,
                    format!(
                        "the late pull fails either way; {who} prefiller says so at once, in `err_reqs` with {} (statuses the decoder knows), instead of after the ready-wait timeout",
                        st.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join("/")
                    ),
                ),
                Some(_) => (
                    Effect::when("a decoder pulls a transfer the prefiller already expired"),
                    "the answer's statuses or `err_reqs` are not the decoder's".to_string(),
                ),
                None => review("the spec lists no reply text for the expired-pull answer"),
            },
        }
        };
        let resp_new: Option<&StructDef> = request(new).and_then(|(_, r)| r).and_then(|m| new.structs.get(&m.name));
        let orn = dir(bn.expired_pull(), new, old, resp_old, "a new");
        let nro = dir(bo.expired_pull(), old, new, resp_new, "an old");
        let what = match bn.expired_pull() {
            Some(e) => format!(
                "a pull of an expired transfer answered at once: {:?} (expired ids remembered for `{}`)",
                e.message, e.remembered_for
            ),
            None => "a pull of an expired transfer waits like one of an unknown transfer".into(),
        };
        out.push(row(BehaviourKey::ExpiredPull, what, resp_peers, orn, nro, Bytes::Same));
    }
}

/// An item's value as JSON (`null` when absent).
fn item_value(b: &Behaviour, key: BehaviourKey) -> serde_json::Value {
    b.item(key).map(|i| i.value).unwrap_or(serde_json::Value::Null)
}

fn plain(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "unrecorded".into(),
        other => other.to_string(),
    }
}
