//! Reports of a [`Report`]: a Markdown table ready for a pull-request comment, the one-line summary, and JSON
//! (the model's serde form).

use std::fmt::Write;

use super::model::{Bytes, Effect, Report, Verdict};

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A code span that may itself contain backticks (msgspec error texts do).
fn code(s: &str) -> String {
    if s.contains('`') {
        format!("`` {s} ``")
    } else {
        format!("`{s}`")
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `vllm-0.32.0 → vllm-0.33.0: 7 changes — 0 break always, 1 breaks only when sent, 0 to review, 6 compatible;
/// unchanged messages keep their bytes.`
pub(crate) fn summary(r: &Report) -> String {
    let c = &r.counts;
    if c.changes == 0 {
        return format!("{} → {}: no wire change.", r.old, r.new);
    }
    let bytes = if r.old_generation != r.new_generation {
        "the two generations share no message".to_string()
    } else if c.bytes_change == 0 {
        "unchanged messages keep their bytes".to_string()
    } else {
        format!("{} the bytes of some unchanged messages", plural(c.bytes_change, "change alters", "changes alter"))
    };
    let unspecified = if c.unspecified == 0 {
        String::new()
    } else {
        format!(
            "; {} in no revision of the spec",
            plural(c.unspecified, "change adds something", "changes add something")
        )
    };
    format!(
        "{} → {}: {} — {} always, {} only when sent, {} to review, {} compatible; {bytes}{unspecified}.",
        r.old,
        r.new,
        plural(c.changes, "change", "changes"),
        plural(c.breaks, "breaks", "break"),
        plural(c.breaks_when_sent, "breaks", "break"),
        c.review,
        c.compatible
    )
}

fn verdict(v: &Verdict) -> String {
    let head = match &v.effect {
        Effect::Compatible => "compatible".to_string(),
        Effect::BreaksWhenSent { when } => format!("**breaks when** {when}"),
        Effect::Breaks { except: None } => "**breaks**".to_string(),
        Effect::Breaks { except: Some(e) } => format!("**breaks** (except when {e})"),
        Effect::Review => "review".to_string(),
    };
    let mut s = match v.peers {
        crate::diff::Peers::Local => format!("{head}: {}", v.reason),
        _ => format!("{head} — {}: {}", v.peers, v.reason),
    };
    if let Some(e) = &v.example {
        let _ = write!(s, "; msgspec: {}", code(e));
    }
    esc(&s)
}

fn bytes(b: &Bytes) -> String {
    esc(&match b {
        Bytes::Same => "same".to_string(),
        Bytes::DifferWhen(w) => format!("differ for {w}"),
        Bytes::Differ(w) => format!("**differ**: {w}"),
        Bytes::NotApplicable(w) => format!("n/a: {w}"),
    })
}

/// The Markdown report.
pub fn markdown(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## Wire diff: `{}` → `{}`\n", r.old, r.new);
    let _ = writeln!(o, "**{}**\n", esc(&r.summary));
    if !r.changes.is_empty() {
        o.push_str("| # | Where | Change | Old decoder reads new bytes | New decoder reads old bytes | Bytes of unchanged messages |\n");
        o.push_str("|---|---|---|---|---|---|\n");
        for (i, c) in r.changes.iter().enumerate() {
            let _ = writeln!(
                o,
                "| {} | {}{} | {}: {} | {} | {} | {} |",
                i + 1,
                code(&c.subject),
                if c.unspecified.is_some() { " **(in no spec revision)**" } else { "" },
                c.kind.label(),
                esc(&c.what),
                verdict(&c.old_reads_new),
                verdict(&c.new_reads_old),
                bytes(&c.bytes)
            );
        }
        o.push('\n');
    }
    let row_notes: Vec<(usize, &String)> = r
        .changes
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.unspecified.iter().chain(c.notes.iter()).map(move |n| (i + 1, n)))
        .collect();
    if !row_notes.is_empty() || !r.notes.is_empty() {
        o.push_str("Notes:\n\n");
        for (i, n) in row_notes {
            let _ = writeln!(o, "- {i}: {}", n.replace('\n', " "));
        }
        for n in &r.notes {
            let _ = writeln!(o, "- {n}");
        }
        o.push('\n');
    }
    let unconfirmed: Vec<String> = r
        .changes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.confirmed == Some(false))
        .map(|(i, _)| (i + 1).to_string())
        .collect();
    if !unconfirmed.is_empty() {
        let _ = writeln!(
            o,
            "**Warning: the witness messages of rows {} do not behave as their verdicts say.**\n",
            unconfirmed.join(", ")
        );
    }
    let confirmed = r.changes.iter().filter(|c| c.confirmed == Some(true)).count();
    let _ = writeln!(
        o,
        "<sub>D = decoder (decode instance), P = prefiller. *Old decoder reads new bytes*: an old peer receives what a new peer sends. \
         Verdicts follow msgspec 0.23.0's decoding rules; {} confirmed by encoding a witness message with one revision and decoding it with the other \
         (msgspec texts quoted from that run). Generated by `mooncake-conformance diff`.</sub>",
        plural(confirmed, "row is", "rows are")
    );
    o
}

/// The JSON report.
pub fn json(r: &Report) -> serde_json::Value {
    serde_json::to_value(r).expect("a report serializes")
}
