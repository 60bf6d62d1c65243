//! Behaviour rules (spec `[behaviour]`): wire-visible behaviour the schemas do not show. Where the spec data
//! determines the cross-version effect it is derived here (which fields old senders never send, which
//! receivers know a field at all, which side is stricter); where it does not, the row is for review.

use super::model::{Area, Bytes, Change, Effect, Kind, Verdict};
use super::structs::Peers;
use crate::spec::{Revision, StructDef, TransportMessage, TypeExpr};

fn row(subject: &str, what: String, peers: &Peers, orn: (Effect, String), nro: (Effect, String), bytes: Bytes) -> Change {
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

fn show<T: std::fmt::Debug>(v: &Option<T>) -> String {
    match v {
        Some(x) => format!("{x:?}").trim_matches('"').to_string(),
        None => "unrecorded".into(),
    }
}

/// An unambiguous KV-layout name (`HND`, `LBHNC`), not a description.
fn layout_name(s: &str) -> bool {
    s.len() >= 2 && s.chars().all(|c| c.is_ascii_uppercase())
}

pub fn diff_behaviour(old: &Revision, new: &Revision, out: &mut Vec<Change>) {
    let (bo, bn) = (&old.behaviour, &new.behaviour);
    let (req_n, resp_n) = request(new).or(request(old)).map(|(a, b)| (Some(a), b)).unwrap_or((None, None));
    let req_peers = req_n.map(|m| Peers::of(&m.from, &m.to)).unwrap_or_else(|| Peers::of("decoder", "prefiller"));
    let resp_peers = resp_n.map(|m| Peers::of(&m.from, &m.to)).unwrap_or_else(|| Peers::of("prefiller", "decoder"));
    let req_old: Option<&StructDef> = request(old).and_then(|(m, _)| old.structs.get(&m.name));
    let req_new: Option<&StructDef> = request(new).and_then(|(m, _)| new.structs.get(&m.name));
    let resp_old: Option<&StructDef> = request(old).and_then(|(_, r)| r).and_then(|m| old.structs.get(&m.name));
    let resp_new: Option<&StructDef> = request(new).and_then(|(_, r)| r).and_then(|m| new.structs.get(&m.name));
    let req_name = req_n.map(|m| m.name.as_str()).unwrap_or("request");

    if bo.empty_id_lists != bn.empty_id_lists {
        let known = |v: &Option<String>| matches!(v.as_deref(), Some("empty-array" | "omitted"));
        // `[]` and an absent key both read back when the id lists are `list | None` defaulting to None.
        let nullable = |s: Option<&StructDef>| {
            s.is_some_and(|s| {
                ["ok_reqs", "err_reqs"].iter().all(|n| s.fields.iter().any(|f| &f.name == n && matches!(f.ty, TypeExpr::Optional(_)) && f.default.as_deref() == Some("None")))
            })
        };
        let (orn, nro) = if known(&bo.empty_id_lists) && known(&bn.empty_id_lists) && nullable(resp_old) && nullable(resp_new) {
            let c = (Effect::Compatible, "`ok_reqs`/`err_reqs` are `list | None`: an empty array and an absent key both decode".to_string());
            (c.clone(), c)
        } else {
            (review("the spec does not say how the decoder treats the other form"), review("the spec does not say how the decoder treats the other form"))
        };
        out.push(row(
            "empty_id_lists",
            format!("empty `ok_reqs`/`err_reqs`: `{}` → `{}`", show(&bo.empty_id_lists), show(&bn.empty_id_lists)),
            &resp_peers,
            orn,
            nro,
            Bytes::DifferWhen("a reply with an empty `ok_reqs` or `err_reqs`: written as `90` (empty array) by one revision, omitted by the other".into()),
        ));
    }
    if bo.reply_rounds != bn.reply_rounds {
        let r = review("how a decoder of one revision settles requests from the other's reply rounds is not in the spec");
        out.push(row("reply_rounds", format!("`{}` → `{}`", show(&bo.reply_rounds), show(&bn.reply_rounds)), &resp_peers, r.clone(), r, Bytes::Same));
    }
    if bo.equal_length_fields != bn.equal_length_fields {
        let added: Vec<String> = bn.equal_length_fields.iter().filter(|f| !bo.equal_length_fields.contains(f)).cloned().collect();
        let removed: Vec<String> = bo.equal_length_fields.iter().filter(|f| !bn.equal_length_fields.contains(f)).cloned().collect();
        let first = bn.equal_length_fields.first().cloned().unwrap_or_default();
        // New receivers require the added fields to match in length; what old senders send for them decides.
        let nro = if added.is_empty() {
            (Effect::Compatible, "the new prefiller checks fewer lengths".to_string())
        } else {
            let never: Vec<String> = added.iter().filter(|f| !req_old.is_some_and(|s| s.fields.iter().any(|x| &x.name == *f))).cloned().collect();
            let maybe_empty: Vec<String> = added.iter().filter(|f| req_old.is_some_and(|s| s.fields.iter().any(|x| &x.name == *f && !x.required()))).cloned().collect();
            if !never.is_empty() {
                // A field that is also newly required fails decoding first; say so rather than hide the row.
                let required_now: Vec<String> =
                    never.iter().filter(|f| req_new.is_some_and(|s| s.fields.iter().any(|x| &x.name == *f && x.required()))).cloned().collect();
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
            review(&format!("new senders may send {} with other lengths, which an old prefiller rejects", list(&removed)))
        };
        out.push(row(
            "equal_length_fields",
            format!("layout fields that must have equal lengths: {} → {}", list(&bo.equal_length_fields), list(&bn.equal_length_fields)),
            &req_peers,
            orn,
            nro,
            Bytes::Same,
        ));
    }
    if bo.minus_one_sentinels != bn.minus_one_sentinels {
        let added: Vec<String> = bn.minus_one_sentinels.iter().filter(|f| !bo.minus_one_sentinels.contains(f)).cloned().collect();
        let removed: Vec<String> = bo.minus_one_sentinels.iter().filter(|f| !bn.minus_one_sentinels.contains(f)).cloned().collect();
        let known_old: Vec<String> = added.iter().filter(|f| req_old.is_some_and(|s| s.fields.iter().any(|x| &x.name == *f))).cloned().collect();
        let unknown_old: Vec<String> = added.iter().filter(|f| !known_old.contains(f)).cloned().collect();
        let orn = if known_old.is_empty() {
            (Effect::Compatible, "old receivers do not know these fields: they ignore them".to_string())
        } else {
            (
                Effect::when(format!("{} holds -1", list(&known_old))),
                format!(
                    "old receivers know {} but not -1 as a sentinel there{}",
                    list(&known_old),
                    if unknown_old.is_empty() { String::new() } else { format!(" ({} is unknown to them and ignored)", list(&unknown_old)) }
                ),
            )
        };
        let known_new: Vec<String> = removed.iter().filter(|f| req_new.is_some_and(|s| s.fields.iter().any(|x| &x.name == *f))).cloned().collect();
        let nro = if known_new.is_empty() {
            (Effect::Compatible, "old senders never send -1 where new receivers do not expect it".to_string())
        } else {
            (Effect::when(format!("an old sender sends -1 in {}", list(&known_new))), "new receivers no longer take -1 as a sentinel there".to_string())
        };
        out.push(row(
            "minus_one_sentinels",
            format!("`-1` sentinels: {} → {}", list(&bo.minus_one_sentinels), list(&bn.minus_one_sentinels)),
            &req_peers,
            orn,
            nro,
            Bytes::Same,
        ));
    }
    if bo.pairing_check != bn.pairing_check {
        let r = review("which TP ranks a prefiller accepts from a decoder of the other revision depends on both sides' rank mapping");
        out.push(row("pairing_check", format!("`{}` → `{}`", show(&bo.pairing_check), show(&bn.pairing_check)), &req_peers, r.clone(), r, Bytes::Same));
    }
    if bo.heterogeneous_tp != bn.heterogeneous_tp {
        let what = format!("heterogeneous TP: `{}` → `{}`", show(&bo.heterogeneous_tp), show(&bn.heterogeneous_tp));
        match (bo.heterogeneous_tp, bn.heterogeneous_tp) {
            (Some(a), Some(_)) => {
                let side = if a { "new" } else { "old" };
                let e = (Effect::when("the prefiller and decoder TP sizes differ"), format!("the {side} peer does not support heterogeneous TP"));
                out.push(row("heterogeneous_tp", what, &req_peers, e.clone(), e, Bytes::Same));
            }
            _ => {
                let r = review("recorded for one revision only");
                out.push(row("heterogeneous_tp", what, &req_peers, r.clone(), r, Bytes::Same));
            }
        }
    }
    if bo.required_kv_layout != bn.required_kv_layout {
        let (a, b) = (show(&bo.required_kv_layout), show(&bn.required_kv_layout));
        let (orn, nro) = if layout_name(&a) && layout_name(&b) {
            let e = (Effect::always(), format!("the KV caches are laid out differently (`{a}` vs `{b}`): blocks land in the wrong layout, silently"));
            (e.clone(), e)
        } else {
            let r = review("the layout is described, not named: compare the layouts by hand");
            (r.clone(), r)
        };
        out.push(row("required_kv_layout", format!("`{a}` → `{b}`"), &req_peers, orn, nro, Bytes::Same));
    }
    if bo.unreported_after_finish != bn.unreported_after_finish {
        let what = format!("requests a FINISH left unreported: `{}` → `{}`", show(&bo.unreported_after_finish), show(&bn.unreported_after_finish));
        let strict = |v: &Option<String>| v.as_deref() == Some("failed");
        let lenient = |v: &Option<String>| v.as_deref() == Some("ignored");
        let finishes = |who: &str| Effect::when(format!("{who} prefiller's FINISH leaves a request of the message unreported"));
        let (orn, nro) = if lenient(&bo.unreported_after_finish) && strict(&bn.unreported_after_finish) {
            ((Effect::Compatible, "the old decoder ignores unreported requests".to_string()), (finishes("an old"), "the new decoder fails such a request".to_string()))
        } else if strict(&bo.unreported_after_finish) && lenient(&bn.unreported_after_finish) {
            ((finishes("a new"), "the old decoder fails such a request".to_string()), (Effect::Compatible, "the new decoder ignores unreported requests".to_string()))
        } else {
            (review("recorded for one revision only"), review("recorded for one revision only"))
        };
        out.push(row("unreported_after_finish", what, &resp_peers, orn, nro, Bytes::Same));
    }
    match (bo.layout_caching.get(), bn.layout_caching.get()) {
        (None, None) => {}
        (None, Some(lc)) => {
            // The id the cache is keyed by, echoed in the new answer but unknown to the old one: a decoder can
            // only learn that a prefiller caches layouts from that echo.
            let echo = lc.cache_key.iter().find(|k| resp_new.is_some_and(|s| s.fields.iter().any(|f| &f.name == *k)) && !resp_old.is_some_and(|s| s.fields.iter().any(|f| &f.name == *k)));
            let req_id_default = echo.and_then(|k| req_new.and_then(|s| s.fields.iter().find(|f| &f.name == k))).map(|f| f.default_display());
            let resp_name = resp_n.map(|m| m.name.as_str()).unwrap_or("reply");
            let orn = match echo {
                Some(k) => (
                    Effect::Compatible,
                    format!("a new decoder leaves the layout out only after a prefiller echoed `{k}`, and an old prefiller's `{resp_name}` has no `{k}`"),
                ),
                None => review("the spec shows no echo by which a decoder learns that the prefiller caches layouts"),
            };
            let nro = match (echo, req_old.is_some_and(|s| echo.is_some_and(|k| s.fields.iter().any(|f| &f.name == k)))) {
                (Some(k), false) => (
                    Effect::Compatible,
                    format!("old decoders never send `{k}` (read as its default `{}`) and always carry the layout", req_id_default.unwrap_or_default()),
                ),
                _ => review("old decoders may already send the cache key"),
            };
            out.push(
                row(
                    "layout_caching",
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
                for c in out.iter_mut().filter(|c| c.kind == Kind::EnumValueAdded && c.subject.ends_with(&format!(".{}", lc.miss_status))) {
                    c.notes.push(format!(
                        "a new prefiller sends `{}` only in answer to a layout-less pull, which a new decoder sends only to a prefiller that echoed `{k}`: a mixed pair never sees it",
                        lc.miss_status
                    ));
                }
            }
        }
        (Some(_), None) => {
            let r = review("layout caching is gone; decoders that rely on it must carry the layout again");
            out.push(row("layout_caching", "layout caching removed".into(), &req_peers, r.clone(), r, Bytes::Same));
        }
        (Some(a), Some(b)) => {
            let mut same = a.clone();
            same.max_peer_layouts = b.max_peer_layouts;
            let changed_only_size = serde_json::to_value(&same).ok() == serde_json::to_value(b).ok();
            if serde_json::to_value(a).ok() != serde_json::to_value(b).ok() {
                let e = if changed_only_size {
                    (Effect::Compatible, "the cache size is local to the prefiller; a miss is answered either way".to_string())
                } else {
                    review("the cache key, the layout fields or the miss answer changed")
                };
                out.push(row("layout_caching", format!("{} → {} peer layouts", a.max_peer_layouts, b.max_peer_layouts), &req_peers, e.clone(), e, Bytes::Same));
            }
        }
    }
}
