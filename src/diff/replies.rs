//! Reply-text rules (spec `[replies]`): the literal texts a prefiller writes into its answer's error field, each
//! with the statuses it is sent with. A text travels in a `str` field both revisions' answer declares, so a
//! decoder of either revision reads any text; what a text means to the other side is its status's (the enum and
//! behaviour rows), and a behaviour item that names a text says when it is sent. Texts are matched by shape
//! (placeholders as `{}`), so a renamed placeholder is no change.

use super::ctx::BothWays;
use super::model::{Added, Area, Bytes, Change, Effect, Kind, Verdict};
use crate::spec::{text_shape, Behaviour, ReplyText, Revision, TypeExpr};

/// The behaviour items whose value names this text (`layout_caching.miss_message`, `kv_leases.off_message`, …).
fn items_naming(b: &Behaviour, text: &str) -> Vec<&'static str> {
    let want = text_shape(text);
    let mut out = vec![];
    for (name, value, _) in b.rows() {
        let mut found = false;
        walk(&value, &mut |s| found |= text_shape(s) == want);
        if found {
            out.push(name.name());
        }
    }
    out
}

fn walk(v: &serde_json::Value, f: &mut dyn FnMut(&str)) {
    match v {
        serde_json::Value::String(s) => f(s),
        serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
        serde_json::Value::Object(m) => m.values().for_each(|x| walk(x, f)),
        _ => {}
    }
}

/// Whether the answer's text field reads any text (`str`, or `str | None`).
fn reads_text(rev: &Revision, message: &str, field: &str) -> bool {
    let Some(f) = rev.structs.get(message).and_then(|s| s.fields.iter().find(|f| f.name == field)) else {
        return false;
    };
    match super::types::resolve(rev, &f.ty) {
        TypeExpr::Str => true,
        TypeExpr::Optional(x) => *x == TypeExpr::Str,
        _ => false,
    }
}

fn is_member(rev: &Revision, status: &str) -> bool {
    rev.enums.values().any(|e| e.members.iter().any(|m| m.name == status))
}

fn statuses(t: &ReplyText) -> String {
    t.status.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join("/")
}

/// `{new P → old D verdict}` for a text a `writer` revision sends to a `reader` revision's decoder.
fn read_by(reader: &Revision, message: &str, field: &str, t: &ReplyText, reader_side: &str) -> (Effect, String) {
    if !reads_text(reader, message, field) {
        return (
            Effect::Review,
            format!("the {reader_side} decoder's `{message}.{field}` is not a text field: the field rows decide"),
        );
    }
    let unknown: Vec<&String> = t.status.iter().filter(|s| !is_member(reader, s)).collect();
    if !unknown.is_empty() {
        // The text itself is free text; an answer with a status the decoder's enum lacks fails on the status,
        // which the enum's own row classifies.
        return (
            Effect::Compatible,
            format!(
                "free text in `{message}.{field}`; it is sent with {}, which the {reader_side} decoder's enum lacks: that enum row classifies the answer",
                unknown.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
            ),
        );
    }
    (
        Effect::Compatible,
        format!(
            "free text in `{message}.{field}`, sent with {} (statuses the {reader_side} decoder knows); no decoder compares the text",
            statuses(t)
        ),
    )
}

pub(crate) fn diff_replies(old: &Revision, new: &Revision, out: &mut Vec<Change>) {
    let (Some(ro), Some(rn)) = (&old.replies, &new.replies) else {
        // Generation 1 has no error field; a generation change has its own row.
        return;
    };
    let peers = new
        .transport
        .messages
        .iter()
        .find(|m| m.name == rn.message)
        .map(|m| BothWays::of(&m.from, &m.to))
        .unwrap_or_else(|| BothWays::of("prefiller", "decoder"));
    let row = |subject: String, what: String, orn: (Effect, String), nro: (Effect, String)| {
        Change::new(
            Area::Replies,
            Kind::ReplyText,
            subject,
            what,
            Verdict::new(orn.0, &peers.old_reads_new, orn.1),
            Verdict::new(nro.0, &peers.new_reads_old, nro.1),
            Bytes::Same,
        )
    };
    let when = |b: &Behaviour, t: &str| -> Option<String> {
        let items = items_naming(b, t);
        (!items.is_empty()).then(|| {
            format!(
                "when it is sent: {}",
                items.iter().map(|i| format!("behaviour.{i}")).collect::<Vec<_>>().join(", ")
            )
        })
    };
    for t in &rn.texts {
        let subject = format!("replies.{}", t.name);
        // The same name with other words (and the old words gone): one text changed.
        let changed = ro
            .texts
            .iter()
            .find(|o| o.name == t.name && o.shape() != t.shape() && !rn.texts.iter().any(|x| x.shape() == o.shape()));
        if let Some(o) = changed {
            let mut c = row(
                subject,
                format!("{:?} → {:?}", o.text, t.text),
                read_by(old, &ro.message, &ro.field, t, "old"),
                read_by(new, &rn.message, &rn.field, o, "new"),
            )
            .adds(Added::Reply(t.shape()));
            if let Some(w) = when(&new.behaviour, &t.text) {
                c = c.note(w);
            }
            out.push(c);
            continue;
        }
        match ro.texts.iter().find(|o| o.shape() == t.shape()) {
            None => {
                let mut c = row(
                    subject,
                    format!("added {:?} ({})", t.text, statuses(t)),
                    read_by(old, &ro.message, &ro.field, t, "old"),
                    (Effect::Compatible, "old prefillers never send it".into()),
                )
                .adds(Added::Reply(t.shape()));
                if let Some(w) = when(&new.behaviour, &t.text) {
                    c = c.note(w);
                }
                out.push(c);
            }
            Some(o) if o.status != t.status => {
                let r = (
                    Effect::Review,
                    "the same text with other statuses: what the decoder does is the status's, and the spec does not say which the situation needs".to_string(),
                );
                out.push(row(
                    subject,
                    format!("{:?}: sent with {} → {}", t.text, statuses(o), statuses(t)),
                    r.clone(),
                    r,
                ));
            }
            Some(_) => {}
        }
    }
    for o in ro.texts.iter().filter(|o| !rn.texts.iter().any(|t| t.shape() == o.shape() || t.name == o.name)) {
        let mut c = row(
            format!("replies.{}", o.name),
            format!("removed {:?} ({})", o.text, statuses(o)),
            (Effect::Compatible, "new prefillers never send it".into()),
            read_by(new, &rn.message, &rn.field, o, "new"),
        );
        if let Some(w) = when(&old.behaviour, &o.text) {
            c = c.note(format!("old revision, {w}"));
        }
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    #[test]
    fn texts_named_by_behaviour_items_are_found() {
        let r = Spec::builtin().push().revision("vllm-0.34.0").unwrap();
        assert_eq!(items_naming(&r.behaviour, "KV expired on P side before the pull."), ["expired_pull"]);
        assert_eq!(
            items_naming(&r.behaviour, "Mooncake KV layout {x} from {h}:{p} is not cached."),
            ["layout_caching"]
        );
        assert!(items_naming(&r.behaviour, "Timeout waiting for P side ready.").is_empty());
    }
}
