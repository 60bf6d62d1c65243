//! Transport rules (spec `[transport]`): socket pattern and types, frame layouts, payload encodings, reply
//! sequences and raw reply constants. A peer whose socket type or frame layout differs cannot exchange a
//! single message with the other (`spec/PROTOCOL.md#side-channel`); socket options
//! and lifetimes are local.

use super::ctx::{BothWays, Ctx, Side};
use super::model::{Added, Area, Bytes, Change, Effect, Kind, Verdict};
use super::structs::{aggregate, diff_struct, replacement_witness};
use super::types::Gen;
use crate::codec::Codec;
use crate::spec::behaviour::UndecodableRequest;
use crate::spec::{ErrorAnswer, Revision, TransportMessage};

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
        Area::Transport,
        kind,
        subject,
        what,
        Verdict::new(orn.0, &peers.old_reads_new, orn.1),
        Verdict::new(nro.0, &peers.new_reads_old, nro.1),
        bytes,
    )
}

fn both(why: &str) -> ((Effect, String), (Effect, String)) {
    ((Effect::always(), why.to_string()), (Effect::always(), why.to_string()))
}

fn frames(f: &[String]) -> String {
    format!("`[{}]`", f.join(", "))
}

pub(crate) fn diff_transport(old: &Revision, new: &Revision, codecs: Option<(&Codec, &Codec)>, out: &mut Vec<Change>) {
    let (to, tn) = (&old.transport, &new.transport);
    let any = BothWays::unnamed();
    if to.kind != tn.kind || to.pattern != tn.pattern {
        let (a, b) = both("the peers' sockets cannot talk to each other");
        out.push(row(
            Kind::TransportPattern,
            "transport".into(),
            format!("{} `{}` → {} `{}`", to.kind, to.pattern, tn.kind, tn.pattern),
            &any,
            a,
            b,
            Bytes::NotApplicable("different transports".into()),
        ));
    }
    if to.heartbeats != tn.heartbeats {
        // The text names the heartbeat message when there is one: a message only one revision sends has a row
        // of its own (its decoding, its answer, what the sender does with it), and this row defers to it.
        let carrier = |mine: &Revision, other: &Revision, text: &str| {
            mine.transport
                .messages
                .iter()
                .find(|m| names(text, &m.name) && !other.transport.messages.iter().any(|o| o.name == m.name))
                .map(|m| m.name.clone())
        };
        let r = match carrier(new, old, &tn.heartbeats).or_else(|| carrier(old, new, &to.heartbeats)) {
            Some(m) => (
                Effect::Compatible,
                format!("the heartbeat is `{m}`, which only one revision sends: its message row classifies it"),
            ),
            None => {
                (Effect::Review, "heartbeats changed; the spec does not say how a peer without them reacts".to_string())
            }
        };
        out.push(row(
            Kind::TransportPattern,
            "transport.heartbeats".into(),
            format!("`{}` → `{}`", to.heartbeats, tn.heartbeats),
            &any,
            r.clone(),
            r,
            Bytes::Same,
        ));
    }
    for (role, so) in &to.sockets {
        let subject = format!("transport.sockets.{role}");
        let Some(sn) = tn.sockets.get(role) else {
            let (a, b) = both("a socket role of the old revision is gone");
            out.push(row(
                Kind::Socket,
                subject,
                format!("`{role}` socket removed"),
                &any,
                a,
                b,
                Bytes::NotApplicable("different transports".into()),
            ));
            continue;
        };
        if so.socket_type != sn.socket_type || so.binds != sn.binds {
            let (a, b) = both("a peer's socket type or bind/connect side differs: no message gets through (ZeroMQ pairs socket types)");
            out.push(row(
                Kind::Socket,
                subject.clone(),
                format!(
                    "`{role}`: {} {} → {} {}",
                    so.socket_type,
                    if so.binds { "bind" } else { "connect" },
                    sn.socket_type,
                    if sn.binds { "bind" } else { "connect" }
                ),
                &any,
                a,
                b,
                Bytes::NotApplicable("different transports".into()),
            ));
        }
        if so.address != sn.address {
            let (a, b) = both("the peers find each other's sockets differently");
            out.push(row(
                Kind::Socket,
                subject.clone(),
                format!("`{role}` address: {} → {}", so.address, sn.address),
                &any,
                a,
                b,
                Bytes::Same,
            ));
        }
        if so.options != sn.options || so.per != sn.per {
            let changed: Vec<String> = so
                .options
                .keys()
                .chain(sn.options.keys().filter(|k| !so.options.contains_key(*k)))
                .filter(|k| so.options.get(*k) != sn.options.get(*k))
                .cloned()
                .collect();
            let mut what = vec![];
            if !changed.is_empty() {
                what.push(format!("options {} changed", changed.join(", ")));
            }
            if so.per != sn.per {
                what.push(format!("lifetime `{}` → `{}`", so.per, sn.per));
            }
            let c = (Effect::Compatible, "local socket options and lifetime: nothing on the wire".to_string());
            out.push(row(
                Kind::Socket,
                subject,
                format!("`{role}`: {}", what.join("; ")),
                &any,
                c.clone(),
                c,
                Bytes::Same,
            ));
        }
    }
    for role in tn.sockets.keys().filter(|r| !to.sockets.contains_key(*r)) {
        let (a, b) = both("a socket role the old revision does not have");
        out.push(row(
            Kind::Socket,
            format!("transport.sockets.{role}"),
            format!("`{role}` socket added"),
            &any,
            a,
            b,
            Bytes::NotApplicable("different transports".into()),
        ));
    }

    // Messages: by name, then the unmatched ones by (from, to) slot.
    let matched = |m: &TransportMessage, other: &[TransportMessage]| other.iter().any(|x| x.name == m.name);
    let mut unpaired_new: Vec<&TransportMessage> = tn.messages.iter().filter(|m| !matched(m, &to.messages)).collect();
    for mo in &to.messages {
        if let Some(mn) = tn.messages.iter().find(|m| m.name == mo.name) {
            message_pair(old, mo, new, mn, out);
            continue;
        }
        let peers = BothWays::of(&mo.from, &mo.to);
        match unpaired_new.iter().position(|m| m.from == mo.from && m.to == mo.to) {
            Some(k) => {
                let mn = unpaired_new.remove(k);
                replaced(old, mo, new, mn, &peers, out);
                message_pair(old, mo, new, mn, out);
            }
            None => out.push(row(
                Kind::MessageRemoved,
                format!("transport.messages.{}", mo.name),
                format!("`{}` ({} → {}) removed", mo.name, mo.from, mo.to),
                &peers,
                (Effect::always(), format!("old {} peers expect `{}`; new peers never send it", mo.to, mo.name)),
                (
                    Effect::when(format!("an old {} sends `{}`", mo.from, mo.name)),
                    "new peers do not know the message".into(),
                ),
                Bytes::NotApplicable("the message is gone".into()),
            )),
        }
    }
    for mn in unpaired_new {
        let peers = BothWays::of(&mn.from, &mn.to);
        let (orn, example) = added_to_old(old, new, mn, codecs);
        let mut c = row(
            Kind::MessageAdded,
            format!("transport.messages.{}", mn.name),
            format!("`{}` ({} → {}) added", mn.name, mn.from, mn.to),
            &peers,
            orn,
            (
                Effect::Review,
                format!(
                    "old {}s never send `{}`; what a new {} does without it is in the behaviour rows",
                    mn.from, mn.name, mn.to
                ),
            ),
            Bytes::NotApplicable("a new message".into()),
        );
        c.old_reads_new.example = example;
        c.adds = Some(Added::Struct(mn.name.clone()));
        out.push(c);
    }
}

/// Whether `text` names `name` as a word.
fn names(text: &str, name: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == name)
}

/// What an old receiver does with a message only the new revision sends (`mn`), and msgspec's text when the
/// old receiver's decoder was run on it.
///
/// A message on a socket pair the old revision already uses (the same sender and receiver roles) reaches the
/// old receiver's decoder for that pair — the one message the old revision sends that way. The new message is
/// encoded with the new codec and decoded as that message with the old codec:
/// * it decodes: the old receiver takes it for the old message — breaks when sent;
/// * it is rejected, the old receiver answers an undecodable request with an ERROR answer
///   (`behaviour.undecodable_request`) of the message the new sender waits for, and the new sender only logs an
///   ERROR answer (`error_answer = "logged"`): compatible, the new message simply has no effect there;
/// * otherwise (no such pair, another answer, a sender that fails on ERROR, or no codec): breaks when sent.
fn added_to_old(
    old: &Revision,
    new: &Revision,
    mn: &TransportMessage,
    codecs: Option<(&Codec, &Codec)>,
) -> ((Effect, String), Option<String>) {
    let breaks = |why: String| (Effect::when(format!("a new {} sends `{}`", mn.from, mn.name)), why);
    let mut same_pair = old.transport.messages.iter().filter(|m| m.from == mn.from && m.to == mn.to);
    let (Some(mo), None) = (same_pair.next(), same_pair.next()) else {
        return (breaks("old peers do not know the message".into()), None);
    };
    let (Some((co, cn)), "msgpack", "msgpack") = (codecs, mo.encoding.as_str(), mn.encoding.as_str()) else {
        return (
            breaks(format!("old {}s read it as `{}`, and the spec cannot run that decoder", mn.to, mo.name)),
            None,
        );
    };
    let Some(sn) = new.structs.get(&mn.name) else {
        return (breaks("old peers do not know the message".into()), None);
    };
    let value = serde_json::Value::Object(Gen::new(new).full(sn));
    let bytes = match super::witness::write(cn, &mn.name, &value) {
        Ok((b, _)) => b,
        Err(e) => return (breaks(format!("old peers do not know the message (witness: {e})")), None),
    };
    let rejected = match co.decode(&mo.name, &bytes) {
        Ok(_) => {
            return (
                breaks(format!(
                    "an old {} decodes it as `{}` (msgspec accepts the bytes) and acts on it",
                    mn.to, mo.name
                )),
                Some(format!("decoded as `{}`", mo.name)),
            )
        }
        Err(e) => e.msgspec_message(),
    };
    let answers_error = old.behaviour.undecodable_request.as_ref().map(|i| i.value)
        == Some(UndecodableRequest::ErrorReply)
        && mo.answered_by.is_some()
        && mo.answered_by == mn.answered_by;
    let answer = mn.answered_by.as_deref().unwrap_or("an answer");
    let (f, t) = (super::ctx::abbr(&mn.from), super::ctx::abbr(&mn.to));
    let r = match (answers_error, mn.error_answer) {
        (true, Some(ErrorAnswer::Logged)) => (
            Effect::Compatible,
            format!(
                "an old {t} decodes it as `{}` and fails; it answers `{answer}` ERROR with msgspec's text (behaviour.undecodable_request), which a new {f} only logs (error_answer = logged): the message has no effect there",
                mo.name
            ),
        ),
        (true, None) => breaks(format!(
            "an old {t} answers `{answer}` ERROR (its decoder for `{}` rejects it); the spec does not say that a new {f} tolerates that",
            mo.name
        )),
        (false, _) => breaks(format!(
            "an old {t} decodes it as `{}` and fails; the spec does not say it answers with the `{answer}` a new {f} waits for",
            mo.name
        )),
    };
    (r, Some(rejected))
}

/// One message slot now carries another message.
fn replaced(
    old: &Revision,
    mo: &TransportMessage,
    new: &Revision,
    mn: &TransportMessage,
    peers: &BothWays,
    out: &mut Vec<Change>,
) {
    let subject = format!("transport.messages.{} → {}", mo.name, mn.name);
    let what =
        format!("{} → {}: `{}` ({}) replaced by `{}` ({})", mo.from, mo.to, mo.name, mo.encoding, mn.name, mn.encoding);
    if mo.encoding == "msgpack" && mn.encoding == "msgpack" {
        let (Some(so), Some(sn)) = (old.structs.get(&mo.name), new.structs.get(&mn.name)) else { return };
        let (o, n) = (Side { rev: old, name: &mo.name, def: so }, Side { rev: new, name: &mn.name, def: sn });
        let cx = Ctx {
            old: o,
            new: n,
            peers: peers.clone(),
            witnesses: false,
            area: Area::Transport,
            prefix: format!("{} → {}", mo.name, mn.name),
        };
        let mut rows = vec![];
        diff_struct(&cx, &mut rows);
        let orn = aggregate(&rows, &cx.prefix, |c| &c.old_reads_new);
        let nro = aggregate(&rows, &cx.prefix, |c| &c.new_reads_old);
        out.push(
            row(
                Kind::MessageReplaced,
                subject,
                what,
                peers,
                orn,
                nro,
                Bytes::NotApplicable("different messages".into()),
            )
            .note(format!("{} field-level differences between the two structs", rows.len()))
            .witness(Some(replacement_witness(o, n))),
        );
    } else {
        let why = format!("the payload encoding changes ({} → {})", mo.encoding, mn.encoding);
        let (a, b) = both(&why);
        out.push(row(Kind::Encoding, subject, what, peers, a, b, Bytes::NotApplicable("different encodings".into())));
    }
}

/// Frame layout, encoding, reply sequence and raw constants of a message both revisions send (or of the
/// messages occupying the same slot).
fn message_pair(_old: &Revision, mo: &TransportMessage, _new: &Revision, mn: &TransportMessage, out: &mut Vec<Change>) {
    let peers = BothWays::of(&mn.from, &mn.to);
    let subject = if mo.name == mn.name {
        format!("transport.messages.{}", mn.name)
    } else {
        format!("transport.messages.{} → {}", mo.name, mn.name)
    };
    if mo.name == mn.name && mo.encoding != mn.encoding {
        let (a, b) = both("the payload encoding changes");
        out.push(row(
            Kind::Encoding,
            subject.clone(),
            format!("`{}` → `{}`", mo.encoding, mn.encoding),
            &peers,
            a,
            b,
            Bytes::NotApplicable("different encodings".into()),
        ));
    }
    if mo.frames_sent != mn.frames_sent || mo.frames_received != mn.frames_received {
        let why = format!(
            "receivers split frames by their own layout: old ones expect {}, new ones {}",
            frames(&mo.frames_received),
            frames(&mn.frames_received)
        );
        let (orn, nro) = if mo.frames_received != mn.frames_received {
            ((Effect::always(), why.clone()), (Effect::always(), why))
        } else {
            let why = format!(
                "senders write other frames: old ones {}, new ones {}",
                frames(&mo.frames_sent),
                frames(&mn.frames_sent)
            );
            ((Effect::always(), why.clone()), (Effect::always(), why))
        };
        out.push(row(
            Kind::FrameLayout,
            subject.clone(),
            format!(
                "sent {} → {}; received {} → {}",
                frames(&mo.frames_sent),
                frames(&mn.frames_sent),
                frames(&mo.frames_received),
                frames(&mn.frames_received)
            ),
            &peers,
            orn,
            nro,
            Bytes::NotApplicable("different frames".into()),
        ));
    }
    if mo.sequence != mn.sequence {
        let show = |s: &Option<String>| s.clone().unwrap_or_else(|| "—".into());
        let (a, b) = both("the receiver expects another number of replies");
        out.push(row(
            Kind::ReplySequence,
            subject.clone(),
            format!("sequence `{}` → `{}`", show(&mo.sequence), show(&mn.sequence)),
            &peers,
            a,
            b,
            Bytes::Same,
        ));
    }
    if mo.name == mn.name && mo.answered_by != mn.answered_by {
        let (a, b) = both("the request is answered by another message");
        out.push(row(
            Kind::ReplySequence,
            subject.clone(),
            format!("answered by {:?} → {:?}", mo.answered_by, mn.answered_by),
            &peers,
            a,
            b,
            Bytes::Same,
        ));
    }
    if mo.encoding == "raw" && mn.encoding == "raw" {
        for c in &mn.constants {
            match mo.constants.iter().find(|o| o.name == c.name) {
                None => out.push(row(
                    Kind::RawConstant,
                    format!("{subject}.{}", c.name),
                    format!("added `{}` = `{}`", c.name, c.bytes),
                    &peers,
                    (Effect::when(format!("`{}` is sent", c.bytes)), "old receivers do not know these bytes".into()),
                    (Effect::Compatible, "old senders never send it".into()),
                    Bytes::Same,
                )),
                Some(o) if o.bytes != c.bytes => out.push(row(
                    Kind::RawConstant,
                    format!("{subject}.{}", c.name),
                    format!("`{}`: `{}` → `{}`", c.name, o.bytes, c.bytes),
                    &peers,
                    (Effect::when(format!("`{}` is sent", c.name)), "old receivers compare other bytes".into()),
                    (Effect::when(format!("`{}` is sent", c.name)), "new receivers compare other bytes".into()),
                    Bytes::DifferWhen(format!("`{}` replies", c.name)),
                )),
                Some(_) => {}
            }
        }
        for o in mo.constants.iter().filter(|o| !mn.constants.iter().any(|c| c.name == o.name)) {
            out.push(row(
                Kind::RawConstant,
                format!("{subject}.{}", o.name),
                format!("removed `{}` = `{}`", o.name, o.bytes),
                &peers,
                (Effect::Compatible, "new senders never send it".into()),
                (
                    Effect::when(format!("an old sender sends `{}`", o.bytes)),
                    "new receivers do not know these bytes".into(),
                ),
                Bytes::Same,
            ));
        }
    }
}
