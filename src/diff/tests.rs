//! The classifier on the real history (`spec/push/`): each known break, and nothing else breaking.

use super::*;
use crate::spec::Spec;

fn pair(a: &str, b: &str) -> Report {
    let push = Spec::builtin().push();
    diff(push.revision(a).unwrap(), push.revision(b).unwrap())
}

fn row<'a>(r: &'a Report, subject: &str) -> &'a Change {
    r.changes
        .iter()
        .find(|c| c.subject == subject)
        .unwrap_or_else(|| panic!("no row {subject} in {}", render::markdown(r)))
}

#[test]
fn every_witness_agrees_with_its_verdict() {
    for r in consecutive(Spec::builtin().push()) {
        for c in &r.changes {
            assert_ne!(c.confirmed, Some(false), "{} → {}: {}\n{}", r.old, r.new, c.subject, render::markdown(&r));
        }
    }
}

/// (subject, old reads new, new reads old): `-` compatible or review, `B` breaks, `S` breaks only when sent.
type Expect = &'static [(&'static str, char, char)];

/// The breaking changes of each consecutive pair of generation 2, from each release's wheel (the `source` of
/// every item in `spec/push/`; spec/README.md, "Sources") and the spec's own `why` notes: every one must be reported, and nothing else may be reported as breaking.
const KNOWN: &[(&str, &str, Expect)] = &[
    (
        "vllm-0.16.0..0.18.1",
        "vllm-0.19.0..0.19.1",
        &[
            ("MooncakeXferMetadata.block_lens", '-', 'B'),
            // A round with a block-count failure beside written requests: two FINISH replies or one, and every
            // decoder stops at the first (the l3 recordings).
            ("behaviour.reply_rounds", 'S', 'S'),
            ("behaviour.equal_length_fields", '-', 'B'),
            ("behaviour.pairing_check", 'S', 'S'),
            ("behaviour.heterogeneous_tp", 'S', 'S'),
            ("behaviour.tp_byte_plan", 'S', 'S'),
            ("behaviour.replicated_producer", 'S', 'S'),
        ],
    ),
    (
        "vllm-0.19.0..0.19.1",
        "vllm-0.20.0..0.23.0",
        &[("MooncakeXferMetadata.req_blocks", 'B', 'B'), ("behaviour.replicated_producer", 'S', 'S')],
    ),
    ("vllm-0.20.0..0.23.0", "vllm-0.24.0", &[("behaviour.equal_length_fields", '-', 'B')]),
    (
        "vllm-0.24.0",
        "vllm-0.25.0..0.25.1",
        &[("MooncakeXferMetadata.kv_block_lens", '-', 'B'), ("behaviour.equal_length_fields", '-', 'B')],
    ),
    ("vllm-0.25.0..0.25.1", "vllm-0.26.0..0.28.0", &[("behaviour.kv_half_split", 'B', 'B')]),
    (
        "vllm-0.26.0..0.28.0",
        "vllm-0.29.0",
        &[("behaviour.required_kv_layout", 'B', 'B'), ("behaviour.kv_half_split", 'S', 'S')],
    ),
    (
        "vllm-0.29.0",
        "vllm-0.30.0",
        &[
            ("behaviour.region_alignment", 'S', 'S'),
            ("behaviour.tp_byte_plan", 'S', 'S'),
            ("behaviour.replicated_producer", 'S', 'S'),
        ],
    ),
    ("vllm-0.30.0", "vllm-0.31.0", &[("bootstrap.duplicate_registration", 'S', '-')]),
    (
        "vllm-0.31.0",
        "vllm-0.32.0",
        &[("behaviour.minus_one_sentinels", 'S', '-'), ("behaviour.region_alignment", 'S', 'S')],
    ),
    (
        "vllm-0.32.0",
        "vllm-0.33.0",
        &[("MooncakeXferResponseStatus.LAYOUT_MISS", 'S', '-'), ("behaviour.unreported_after_finish", '-', 'S')],
    ),
    // A prefiller with a lease frees a request's blocks after `kv_lease_duration` unless renewed: an old decoder
    // never renews, so its pull fails when it comes later than the lease. A new decoder's renewals are refused
    // by an old prefiller (answered ERROR, only logged), which frees the blocks after its abort timeout: a
    // decoder that relies on renewing to wait longer than that loses its pull.
    // And an old prefiller ignores a lease setting: it keeps the blocks for its abort timeout, so a new decoder's
    // late pull that a leasing prefiller would have refused succeeds there (not as with its own revision).
    ("vllm-0.33.0", "vllm-0.34.0", &[("behaviour.kv_leases", 'S', 'S'), ("behaviour.lease_renewal", 'S', '-')]),
];

fn letter(e: &Effect) -> char {
    match e {
        Effect::Breaks { .. } => 'B',
        Effect::BreaksWhenSent { .. } => 'S',
        Effect::Compatible | Effect::Review => '-',
    }
}

#[test]
fn known_breaks_and_nothing_else() {
    let push = Spec::builtin().push();
    assert_eq!(
        KNOWN.len() + 1,
        push.revisions.len() - 1,
        "every consecutive pair after the generation change is listed"
    );
    for (a, b, expect) in KNOWN {
        let r = pair(a, b);
        let got: Vec<(String, char, char)> = r
            .changes
            .iter()
            .filter(|c| c.is_breaking())
            .map(|c| (c.subject.clone(), letter(&c.old_reads_new.effect), letter(&c.new_reads_old.effect)))
            .collect();
        let want: Vec<(String, char, char)> = expect.iter().map(|(s, o, n)| (s.to_string(), *o, *n)).collect();
        assert_eq!(got, want, "{a} → {b}:\n{}", render::markdown(&r));
        assert_eq!(r.is_breaking(), !expect.is_empty());
    }
}

#[test]
fn known_breaks_quote_msgspec() {
    let r = pair("vllm-0.16.0..0.18.1", "vllm-0.19.0..0.19.1");
    let c = row(&r, "MooncakeXferMetadata.block_lens");
    assert_eq!(c.new_reads_old.example.as_deref(), Some("Object missing required field `block_lens`"));
    assert_eq!(c.new_reads_old.peers.to_string(), "old D → new P");
    assert_eq!(c.old_reads_new.effect, Effect::Compatible);

    let r = pair("vllm-0.19.0..0.19.1", "vllm-0.20.0..0.23.0");
    let c = row(&r, "MooncakeXferMetadata.req_blocks");
    assert_eq!(c.old_reads_new.example.as_deref(), Some("Expected `int`, got `array` - at `$.req_blocks[...][1][0]`"));
    assert_eq!(c.new_reads_old.example.as_deref(), Some("Expected `array`, got `int` - at `$.req_blocks[...][1][0]`"));
    for v in [&c.old_reads_new, &c.new_reads_old] {
        assert_eq!(v.effect, Effect::Breaks { except: Some("every `$.req_blocks[...][1]` is empty".into()) });
    }
    // The zero-block exception was run through both codecs and decoded faithfully.
    assert_eq!(c.confirmed, Some(true));
    assert!(c.witness.as_ref().unwrap().old_reads_new.exception.is_some());

    let r = pair("vllm-0.24.0", "vllm-0.25.0..0.25.1");
    assert_eq!(
        row(&r, "MooncakeXferMetadata.kv_block_lens").new_reads_old.example.as_deref(),
        Some("Object missing required field `kv_block_lens`")
    );

    let r = pair("vllm-0.32.0", "vllm-0.33.0");
    let c = row(&r, "MooncakeXferResponseStatus.LAYOUT_MISS");
    assert_eq!(c.old_reads_new.example.as_deref(), Some("Invalid enum value 3 - at `$.status`"));
    assert_eq!(c.old_reads_new.peers.to_string(), "new P → old D");
    assert!(c.notes.iter().any(|n| n.contains("a mixed pair never sees it")), "{:?}", c.notes);
    assert!(r.notes.iter().any(|n| n.contains("15 map entries")), "the 16-field tripwire is announced");
}

#[test]
fn generation_change_breaks_everything() {
    let r = pair("vllm-0.13.0..0.15.1", "vllm-0.16.0..0.18.1");
    let g = row(&r, "generation");
    assert!(
        matches!(g.old_reads_new.effect, Effect::Breaks { .. })
            && matches!(g.new_reads_old.effect, Effect::Breaks { .. })
    );
    for s in [
        "transport",
        "transport.sockets.decoder",
        "transport.messages.MooncakeAgentMetadata → MooncakeXferMetadata",
        "transport.messages.TransferReply → MooncakeXferResponse",
    ] {
        assert!(
            r.changes.iter().any(|c| c.subject == s
                && matches!(c.old_reads_new.effect, Effect::Breaks { .. })
                && matches!(c.new_reads_old.effect, Effect::Breaks { .. })),
            "{s}"
        );
    }
    let m = r.changes.iter().find(|c| c.kind == Kind::MessageReplaced).unwrap();
    assert_eq!(m.old_reads_new.example.as_deref(), Some("Object missing required field `request_ids`"));
    assert_eq!(m.new_reads_old.example.as_deref(), Some("Object missing required field `remote_tp_size`"));
}

#[test]
fn unchanged_messages_keep_their_bytes_except_where_said() {
    for (a, b, _) in KNOWN {
        let r = pair(a, b);
        let changed: Vec<&str> = r
            .changes
            .iter()
            .filter(|c| matches!(c.bytes, Bytes::Differ(_) | Bytes::DifferWhen(_)))
            .map(|c| c.subject.as_str())
            .collect();
        let want: &[&str] = if *a == "vllm-0.16.0..0.18.1" { &["behaviour.empty_id_lists"] } else { &[] };
        assert_eq!(changed, want, "{a} → {b}");
    }
}

#[test]
fn identical_revisions_have_no_change() {
    let push = Spec::builtin().push();
    for rev in &push.revisions {
        let r = diff(rev, rev);
        assert!(
            r.changes.is_empty(),
            "{}: {:?}",
            rev.revision,
            r.changes.iter().map(|c| &c.subject).collect::<Vec<_>>()
        );
        assert!(!r.is_breaking());
    }
}

#[test]
fn reversed_pairs_swap_the_directions() {
    // Diffing new → old must give every row's directions swapped.
    for (a, b, _) in KNOWN {
        let (fwd, back) = (pair(a, b), pair(b, a));
        for c in fwd.changes.iter().filter(|c| c.area == Area::Struct || c.area == Area::Enum) {
            let Some(d) = back.changes.iter().find(|d| d.subject == c.subject) else {
                panic!("{b} → {a}: no row {}", c.subject)
            };
            assert_eq!(letter(&c.old_reads_new.effect), letter(&d.new_reads_old.effect), "{a} ⇄ {b} {}", c.subject);
            assert_eq!(letter(&c.new_reads_old.effect), letter(&d.old_reads_new.effect), "{a} ⇄ {b} {}", c.subject);
        }
    }
}

/// Rules the real history exercises only partly (no msgspec witness: transport, bootstrap, parameters,
/// environment), on edited copies of real revisions.
#[test]
fn transport_bootstrap_and_parameter_rules() {
    use crate::spec::{KvParamKey, RawConstant, Route, TypeExpr};
    use std::sync::Arc;
    let push = Spec::builtin().push();
    let find = |r: &Report, s: &str| {
        r.changes.iter().find(|c| c.subject == s).cloned().unwrap_or_else(|| panic!("no {s}: {}", render::markdown(r)))
    };

    // Generation 1: a raw reply constant added, one changed.
    let g1 = push.revision("vllm-0.13.0..0.15.1").unwrap().clone();
    let mut g1b = (*g1).clone();
    let reply = g1b.transport.messages.iter_mut().find(|m| m.name == "TransferReply").unwrap();
    reply.constants.push(RawConstant { name: "trans_retry".into(), bytes: "trans_retry".into(), doc: String::new() });
    reply.constants[1].bytes = "trans_err".into();
    let r = diff(&g1, &Arc::new(g1b));
    let added = find(&r, "transport.messages.TransferReply.trans_retry");
    assert!(
        matches!(added.old_reads_new.effect, Effect::BreaksWhenSent { .. })
            && added.new_reads_old.effect == Effect::Compatible
    );
    let changed = find(&r, "transport.messages.TransferReply.trans_error");
    assert!(
        matches!(changed.old_reads_new.effect, Effect::BreaksWhenSent { .. })
            && matches!(changed.new_reads_old.effect, Effect::BreaksWhenSent { .. })
    );

    // Generation 2: a route added and one removed, a request model field added, a kv param retyped, an env
    // default changed, the socket options changed.
    let a = push.revision("vllm-0.33.0").unwrap().clone();
    let mut b = (*a).clone();
    let bs = b.bootstrap.as_mut().unwrap();
    bs.routes.retain(|r| r.path != "/query");
    bs.routes.push(Route {
        method: "GET".into(),
        path: "/health".into(),
        request: None,
        responses: vec![],
        since: String::new(),
        changed_in: vec![],
    });
    let mut f = bs.models["RegisterWorkerPayload"].fields[0].clone();
    f.name = "role".into();
    bs.models.get_mut("RegisterWorkerPayload").unwrap().fields.push(f);
    let kv = b.kv_transfer_params.as_mut().unwrap();
    let k: &mut KvParamKey = kv.keys.iter_mut().find(|k| k.name == "transfer_id").unwrap();
    k.ty = TypeExpr::Int;
    b.env.get_mut("VLLM_MOONCAKE_BOOTSTRAP_PORT").unwrap().default = "8999".into();
    b.transport.sockets.get_mut("decoder").unwrap().options.insert("LINGER".into(), "100".into());
    let r = diff(&a, &Arc::new(b));
    let q = find(&r, "bootstrap.routes.GET /query");
    assert_eq!(q.old_reads_new.effect, Effect::Compatible);
    assert!(
        matches!(q.new_reads_old.effect, Effect::BreaksWhenSent { .. }),
        "an old client calling a removed route gets 404"
    );
    let h = find(&r, "bootstrap.routes.GET /health");
    assert!(
        matches!(h.old_reads_new.effect, Effect::BreaksWhenSent { .. }) && h.new_reads_old.effect == Effect::Compatible
    );
    let role = find(&r, "bootstrap.RegisterWorkerPayload.role");
    assert_eq!(role.old_reads_new.effect, Effect::Compatible, "the old server ignores an unknown key");
    assert!(matches!(role.new_reads_old.effect, Effect::Breaks { .. }), "the new server requires it (422)");
    assert_eq!(role.old_reads_new.peers.to_string(), "new client → old server");
    assert_eq!(role.confirmed, None, "JSON bodies have no MessagePack witness");
    let t = find(&r, "kv_transfer_params.transfer_id");
    assert!(
        matches!(t.old_reads_new.effect, Effect::BreaksWhenSent { .. })
            && matches!(t.new_reads_old.effect, Effect::BreaksWhenSent { .. })
    );
    assert_eq!(find(&r, "env.VLLM_MOONCAKE_BOOTSTRAP_PORT").old_reads_new.effect, Effect::Review);
    assert_eq!(find(&r, "transport.sockets.decoder").worst(), &Effect::Compatible, "socket options are local");

    // The bootstrap server removed.
    let mut c = (*a).clone();
    c.bootstrap = None;
    let r = diff(&a, &Arc::new(c));
    let s = find(&r, "bootstrap");
    assert!(matches!(s.old_reads_new.effect, Effect::Breaks { .. }) && s.new_reads_old.effect == Effect::Compatible);
}

/// The 0.34.0 rows that are not breaks: each direction as the spec data gives it.
#[test]
fn lease_protocol_rows_from_spec_data() {
    let r = pair("vllm-0.33.0", "vllm-0.34.0");
    let m = row(&r, "transport.messages.MooncakeLeaseHeartbeat");
    assert_eq!(m.old_reads_new.effect, Effect::Compatible, "{}", render::markdown(&r));
    assert_eq!(m.old_reads_new.peers.to_string(), "new D → old P");
    // The old prefiller's decoder was run on a heartbeat: msgspec's own text, which it answers ERROR with.
    assert_eq!(m.old_reads_new.example.as_deref(), Some("Object missing required field `remote_hostname`"));
    assert!(m.old_reads_new.reason.contains("undecodable_request") && m.old_reads_new.reason.contains("only logs"));
    let leases = row(&r, "behaviour.kv_leases");
    assert!(
        matches!(&leases.old_reads_new.effect, Effect::BreaksWhenSent { when } if when.contains("ignores it")),
        "{:?}",
        leases.old_reads_new
    );
    assert!(leases.old_reads_new.reason.contains("abort timeout"), "{}", leases.old_reads_new.reason);
    assert!(
        matches!(&leases.new_reads_old.effect, Effect::BreaksWhenSent { when } if when.contains("kv_lease_duration")),
        "{:?}",
        leases.new_reads_old
    );
    let renewal = row(&r, "behaviour.lease_renewal");
    assert_eq!(renewal.old_reads_new.peers.to_string(), "new D → old P");
    assert!(
        matches!(&renewal.old_reads_new.effect, Effect::BreaksWhenSent { when } if when.contains("abort timeout")),
        "{:?}",
        renewal.old_reads_new
    );
    assert_eq!(renewal.new_reads_old.effect, Effect::Compatible);
    for s in ["behaviour.expired_pull", "behaviour.paired_block_order"] {
        let c = row(&r, s);
        assert_eq!(c.worst(), &Effect::Compatible, "{s}: {}", render::markdown(&r));
    }
    assert!(row(&r, "behaviour.expired_pull").old_reads_new.reason.contains("`CONTINUE`/`FINISH`"));
    // The heartbeat text names the message only 0.34.0 sends: that row decides.
    assert_eq!(row(&r, "transport.heartbeats").worst(), &Effect::Compatible);
    for s in ["replies.expired", "replies.lease_off", "extra_config.kv_lease_duration", "env.WITH_NVIDIA_PEERMEM"] {
        assert_eq!(row(&r, s).worst(), &Effect::Compatible, "{s}");
    }
    assert!(row(&r, "replies.expired").notes.iter().any(|n| n.contains("behaviour.expired_pull")));
    assert_eq!(r.counts.unspecified, 0);
    assert!(r.fails(), "kv_leases breaks when sent");
}

/// The message-added rule on edited copies: it is compatible only when every link of the chain is in the data.
#[test]
fn a_new_message_breaks_unless_the_old_receiver_rejects_it_and_the_sender_tolerates_that() {
    use std::sync::Arc;
    let push = Spec::builtin().push();
    let (a, b) = (push.revision("vllm-0.33.0").unwrap().clone(), push.revision("vllm-0.34.0").unwrap().clone());
    let effect = |old: &Arc<crate::spec::Revision>, new: &Arc<crate::spec::Revision>| {
        let r = diff(old, new);
        row(&r, "transport.messages.MooncakeLeaseHeartbeat").old_reads_new.clone()
    };
    // The sender does not say it tolerates an ERROR answer.
    let mut n = (*b).clone();
    n.transport.messages.iter_mut().find(|m| m.name == "MooncakeLeaseHeartbeat").unwrap().error_answer = None;
    let v = effect(&a, &Arc::new(n));
    assert!(matches!(v.effect, Effect::BreaksWhenSent { .. }) && v.reason.contains("tolerates"), "{v:?}");
    // The old receiver does not say it answers an undecodable request.
    let mut o = (*a).clone();
    o.behaviour.undecodable_request = None;
    let v = effect(&Arc::new(o), &b);
    assert!(matches!(v.effect, Effect::BreaksWhenSent { .. }), "{v:?}");
    // A new message the old decoder accepts (the pull's own fields) is taken for a pull.
    let mut n = (*b).clone();
    let fields = n.structs["MooncakeXferMetadata"].fields.clone();
    n.structs.get_mut("MooncakeLeaseHeartbeat").unwrap().fields = fields;
    let v = effect(&a, &Arc::new(n));
    assert!(matches!(v.effect, Effect::BreaksWhenSent { .. }) && v.reason.contains("acts on it"), "{v:?}");
}

/// What a source adds that no revision has is shown, reviewed and fails the diff; the same additions in a
/// revision of the spec are classified by the rules and do not.
#[test]
fn additions_no_revision_describes_fail_the_diff() {
    use crate::spec::{ConfigKey, EnvVar, ReplyText, StructDef, TypeExpr};
    use std::sync::Arc;
    let push = Spec::builtin().push();
    let a = push.revision("vllm-0.33.0").unwrap().clone();
    let mut b = (*a).clone();
    let mut cancel: StructDef = b.structs["MooncakeXferResponse"].clone();
    cancel.fields.truncate(1);
    b.structs.insert("MooncakeXferCancel".into(), cancel);
    b.replies.as_mut().unwrap().texts.push(ReplyText {
        name: "cancelled".into(),
        text: "Transfer cancelled after {timeout} s.".into(),
        status: vec!["ERROR".into()],
        doc: String::new(),
        since: String::new(),
        source: None,
        changed_in: vec![],
    });
    b.extra_config.insert(
        "cancel_timeout".into(),
        ConfigKey { ty: TypeExpr::Int, default: "5".into(), local: false, doc: String::new(), since: String::new() },
    );
    b.env.insert(
        "VLLM_MOONCAKE_CANCEL".into(),
        EnvVar { ty: TypeExpr::Str, default: "0".into(), local: true, doc: String::new(), since: String::new() },
    );
    let b = Arc::new(b);
    let subjects =
        ["MooncakeXferCancel", "replies.cancelled", "extra_config.cancel_timeout", "env.VLLM_MOONCAKE_CANCEL"];

    // As vLLM source would give them: nothing of the spec describes them.
    let mut r = diff(&a, &b);
    let known: Vec<&crate::spec::Revision> = push.revisions.iter().map(|r| r.as_ref()).collect();
    mark_unspecified(&mut r, &known);
    for s in subjects {
        let c = row(&r, s);
        assert!(c.unspecified.is_some(), "{s}: {}", render::markdown(&r));
        assert_eq!(c.old_reads_new.effect, Effect::Review, "{s}");
        assert_eq!(c.new_reads_old.effect, Effect::Review, "{s}");
    }
    assert_eq!(r.counts.unspecified, 4);
    assert!(r.fails() && !r.is_breaking(), "fails like a break, without being one");
    assert!(r.summary.contains("4 changes add something in no revision of the spec"), "{}", r.summary);

    // The same rows when the new revision is itself a revision of the spec (a spec file given to diff).
    let mut r = diff(&a, &b);
    let mut known = known.clone();
    known.push(&b);
    mark_unspecified(&mut r, &known);
    assert_eq!(r.counts.unspecified, 0);
    assert!(!r.fails(), "{}", render::markdown(&r));
    assert_eq!(row(&r, "MooncakeXferCancel").worst(), &Effect::Review, "no message carries it");
    assert_eq!(row(&r, "replies.cancelled").worst(), &Effect::Compatible, "free text with a known status");
    assert_eq!(row(&r, "env.VLLM_MOONCAKE_CANCEL").worst(), &Effect::Compatible, "a local variable");
    assert_eq!(row(&r, "extra_config.cancel_timeout").worst(), &Effect::Review, "tied to no behaviour item");
}

/// A behaviour item whose change no rule classifies is shown for review, never dropped.
#[test]
fn an_unclassified_behaviour_change_is_shown() {
    use std::sync::Arc;
    let push = Spec::builtin().push();
    let a = push.revision("vllm-0.33.0").unwrap().clone();
    let mut b = (*a).clone();
    b.behaviour.undecodable_request = None;
    let r = diff(&a, &Arc::new(b));
    let c = row(&r, "behaviour.undecodable_request");
    assert_eq!(c.worst(), &Effect::Review);
    assert!(c.old_reads_new.reason.contains("no rule"));
}
