//! `mooncake-conformance vectors`: checks vector files against the codec.
//!
//! Two formats (see `vectors/README.md` and `vectors/GOLDEN.md` in the repository):
//! * `mooncake-vectors` — msgspec encodings of one revision's message with accept/reject verdicts;
//! * `mooncake-golden` — outputs of vLLM's planning, hashing and key functions, checked by the crate's `golden` module.

use std::path::Path;

use mooncake_wire::codec::Codec;
use serde_json::Value as J;

use crate::finding::{Failure, FileReport};
use crate::{golden, jsonl};

/// The files that are bad input (not a vector file; no case, unless `allow_empty`), for standard error.
pub fn input_problems(reps: &[FileReport], allow_empty: bool) -> Vec<String> {
    reps.iter()
        .filter_map(|r| match (&r.not_checked, r.bad_input) {
            (Some(why), true) => Some(format!("{}: {why}", r.path)),
            (None, _) if r.cases == 0 && !allow_empty => Some(format!(
                "{}: no cases after the header line (nothing checked; --allow-empty accepts that)",
                r.path
            )),
            _ => None,
        })
        .collect()
}

fn s<'a>(v: &'a J, k: &str) -> Option<&'a str> {
    v.get(k).and_then(J::as_str)
}

/// Checks the vector file at `path` (either format, or a `.json` revision table); a file that cannot be read or is
/// no vector file is reported as bad input, not an error.
pub fn check_file(path: &Path) -> FileReport {
    let mut rep = FileReport {
        path: path.display().to_string(),
        subject: String::new(),
        cases: 0,
        passed: 0,
        failures: vec![],
        error_text_differs: 0,
        notes: vec![],
        not_checked: None,
        bad_input: false,
    };
    if path.extension().and_then(|e| e.to_str()) == Some("json") {
        check_revision_table(path, &mut rep);
        return rep;
    }
    let lines = match jsonl::read(path) {
        Ok(l) => l,
        Err(e) => {
            rep.not_checked = Some(e.to_string());
            rep.bad_input = true;
            return rep;
        }
    };
    let Some((header, cases)) = lines.split_first() else {
        rep.not_checked = Some("an empty file, not a vector file".into());
        rep.bad_input = true;
        return rep;
    };
    rep.cases = cases.len();
    match s(&header.value, "format") {
        Some("mooncake-vectors") => check_codec_vectors(&header.value, cases, &mut rep),
        Some("mooncake-golden") => golden::check_file(&header.value, cases, &mut rep),
        Some(other) => {
            let hint = if other == crate::trace::FORMAT { " (a trace: check it with `validate`)" } else { "" };
            rep.not_checked = Some(format!("not a vector file: the header's format is `{other}`, expected mooncake-vectors or mooncake-golden{hint}"));
            rep.bad_input = true;
        }
        None => {
            rep.not_checked = Some(
                "not a vector file: its first line has no `format` (expected mooncake-vectors or mooncake-golden)"
                    .into(),
            );
            rep.bad_input = true;
        }
    }
    rep
}

/// The codec of a vector file's revision, and the message its cases are of; `None`, with `rep.not_checked` saying
/// why, when the header does not name a revision and message of the spec.
fn codec_of<'h>(header: &'h J, rep: &mut FileReport) -> Option<(std::sync::Arc<Codec>, &'h str)> {
    let (Some(revision), Some(message)) = (s(header, "revision"), s(header, "message")) else {
        rep.not_checked = Some("header lacks `revision` or `message`".into());
        return None;
    };
    rep.subject = format!("{revision} {message}");
    let releases: Vec<String> = header
        .get("vllm_releases")
        .and_then(J::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        .unwrap_or_default();
    let codec = match wire_unit("push", revision, &releases) {
        Ok((rev, note)) => {
            if let Some(n) = note {
                rep.notes.push(n);
            }
            Codec::builtin(&rev.revision)
        }
        Err(e) => {
            rep.not_checked = Some(format!("revision {revision}: {e}"));
            return None;
        }
    };
    let Some(codec) = codec else {
        rep.not_checked = Some(format!("revision {revision} is not in the spec"));
        return None;
    };
    if codec.message_type(message).is_none() {
        rep.not_checked = Some(format!("{revision} has no message {message} in the spec"));
        return None;
    }
    Some((codec, message))
}

fn check_codec_vectors(header: &J, cases: &[jsonl::Line], rep: &mut FileReport) {
    let Some((codec, message)) = codec_of(header, rep) else { return };
    for line in cases {
        let c = &line.value;
        let id = s(c, "id").unwrap_or("?").to_string();
        let fail = |rep: &mut FileReport, problem: String| {
            rep.failures.push(Failure { id: id.clone(), line: line.no, problem })
        };
        let Some(bytes) = s(c, "hex").and_then(|h| hex::decode(h).ok()) else {
            fail(rep, "missing or malformed `hex`".into());
            continue;
        };
        let got = codec.decode(message, &bytes);
        if let Some(want) = s(c, "route") {
            let ours = prefiller_route(&got);
            if ours != want {
                fail(rep, format!("routed as {ours} by the decode result, vLLM's listener routes it as {want}"));
                continue;
            }
        }
        match (s(c, "expect"), got) {
            (Some("accept"), Ok(v)) => {
                let json = Codec::to_json(&v);
                if let Some(want) = c.get("value") {
                    if !jsonl::eq_ordered(&json, want) {
                        let d = jsonl::first_difference(&json, want, "$").unwrap_or_default();
                        fail(rep, format!("decoded value differs (ours vs msgspec): {d}"));
                        continue;
                    }
                }
                let want_hex = s(c, "canonical_hex").or(s(c, "hex")).unwrap_or_default();
                match codec.encode(message, &v) {
                    Ok(b) if hex::encode(&b) == want_hex => rep.passed += 1,
                    Ok(b) => fail(rep, format!("re-encoding differs: ours {} vs msgspec {want_hex}", hex::encode(b))),
                    Err(e) => fail(rep, format!("re-encoding failed: {e}")),
                }
            }
            (Some("accept"), Err(e)) => fail(rep, format!("msgspec accepts, we reject: {}", e.msgspec_message())),
            (Some("reject"), Ok(v)) => {
                fail(rep, format!("msgspec rejects ({}), we accept: {v}", s(c, "error").unwrap_or("?")))
            }
            (Some("reject"), Err(e)) => {
                rep.passed += 1;
                if s(c, "error").is_some_and(|want| want != e.msgspec_message()) {
                    rep.error_text_differs += 1;
                }
            }
            (other, _) => fail(rep, format!("bad `expect` {other:?}")),
        }
    }
}

/// Where vLLM 0.34.0's prefiller ROUTER sends an inbound payload, by the result of decoding it as
/// `MooncakeLeaseHeartbeat` (`MooncakeConnectorWorker._decode_heartbeat` and `_mooncake_sender_listener`): a
/// heartbeat when it decodes with a non-empty `lease_transfer_ids`; the pull path when it does not decode or names
/// no transfer; and msgspec's `RecursionError` (nesting past the recursion limit), which `_decode_heartbeat` does
/// not catch, ends the listener (`listener-exits`). The vector files record it as `route`.
fn prefiller_route(decoded: &Result<mooncake_wire::codec::Value, mooncake_wire::codec::DecodeError>) -> &'static str {
    match decoded {
        Ok(v) => {
            let ids = Codec::to_json(v);
            if ids.get("lease_transfer_ids").and_then(J::as_array).is_some_and(|a| !a.is_empty()) {
                "heartbeat"
            } else {
                "pull"
            }
        }
        Err(e) if matches!(e.kind, mooncake_wire::codec::DecodeErrorKind::TooDeep) => "listener-exits",
        Err(_) => "pull",
    }
}

/// `revisions.json`: the revision table the vectors were generated from must be the spec's: same revision
/// names, generations, releases, build commits, connector file and messages, and no spec revision missing.
/// Each listed revision counts as one case. The declared per-message case counts are compared with the
/// vector files next to the table for information only (the bundled files may hold a subset).
fn check_revision_table(path: &Path, rep: &mut FileReport) {
    rep.subject = "revision table".into();
    let table: J = match std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(t) => t,
        Err(e) => {
            rep.not_checked = Some(format!("{}: {e}", path.display()));
            return;
        }
    };
    if s(&table, "format") != Some("mooncake-vectors") {
        rep.not_checked = Some("not a mooncake-vectors revision table".into());
        return;
    }
    // The table names its family (`pull`); tables without one are the push family's.
    let family_name = s(&table, "family").unwrap_or("push");
    let Some(family) = mooncake_wire::spec::Spec::builtin().family(family_name) else {
        rep.not_checked = Some(format!("the spec has no family `{family_name}`"));
        return;
    };
    let listed = table.get("revisions").and_then(J::as_array).cloned().unwrap_or_default();
    let mut notes = vec![];
    for (i, r) in listed.iter().enumerate() {
        rep.cases += 1;
        let name = s(r, "revision").unwrap_or("?").to_string();
        let problems = table_row_problems(path, family_name, family, r, &name, &mut notes);
        if problems.is_empty() {
            rep.passed += 1;
        } else {
            rep.failures.push(Failure { id: name, line: i + 1, problem: problems.join("; ") });
        }
    }
    for rev in &family.revisions {
        let listed_by_release = listed.iter().any(|r| {
            r.get("releases")
                .and_then(J::as_array)
                .is_some_and(|a| a.iter().any(|x| x.as_str().is_some_and(|x| rev.covers_release(x))))
        });
        if !listed.iter().any(|r| s(r, "revision") == Some(rev.revision.as_str())) && !listed_by_release {
            rep.cases += 1;
            let problem = "spec revision missing from the table".into();
            rep.failures.push(Failure { id: rev.revision.clone(), line: 0, problem });
        }
    }
    rep.notes = notes;
}

/// What differs between row `r` (revision `name`) of a revision table and the spec; notes for information.
fn table_row_problems(
    path: &Path,
    family_name: &str,
    family: &mooncake_wire::spec::Family,
    r: &J,
    name: &str,
    notes: &mut Vec<String>,
) -> Vec<String> {
    let releases: Vec<String> = r
        .get("releases")
        .and_then(J::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        .unwrap_or_default();
    let unit = wire_unit(family_name, name, &releases);
    if let Ok((_, Some(n))) = &unit {
        notes.push(n.clone());
    }
    match unit.map(|(rev, _)| rev) {
        Err(e) => vec![e.to_string()],
        Ok(rev) if rev.revision != name => {
            // Split in the spec for behaviour: the wire unit's facts are those of the revisions covering it.
            let covering: Vec<_> =
                family.revisions.iter().filter(|x| x.releases.iter().any(|rl| releases.contains(rl))).collect();
            let spec_releases: Vec<String> = covering.iter().flat_map(|x| x.releases.clone()).collect();
            if releases != spec_releases {
                return vec![format!("releases {releases:?} vs spec {spec_releases:?}")];
            }
            vec![]
        }
        Ok(rev) => {
            let problems = row_facts_problems(r, &rev, &releases);
            notes.extend(declared_counts(path, r, name));
            problems
        }
    }
}

/// A row's facts against revision `rev`'s: generation, releases, commits, connector file, messages.
fn row_facts_problems(r: &J, rev: &mooncake_wire::spec::Revision, releases: &[String]) -> Vec<String> {
    let mut problems = vec![];
    if r.get("generation").and_then(J::as_u64) != Some(rev.generation as u64) {
        problems.push(format!("generation {:?} vs spec {}", r.get("generation"), rev.generation));
    }
    if releases != rev.releases {
        problems.push(format!("releases {releases:?} vs spec {:?}", rev.releases));
    }
    if s(r, "commit") != rev.commit.as_deref() {
        problems.push(format!("commit {:?} vs spec {:?}", s(r, "commit"), rev.commit));
    }
    for (rel, c) in r.get("build_commits").and_then(J::as_object).into_iter().flatten() {
        if rev.build_commits.get(rel).map(String::as_str) != c.as_str() {
            problems.push(format!("build commit of {rel}: {c} vs spec {:?}", rev.build_commits.get(rel)));
        }
    }
    if let Some(conn) = s(r, "connector") {
        if !rev.source.ends_with(conn) && !rev.structs.values().any(|st| st.source.ends_with(conn)) {
            problems.push(format!("connector {conn} is not the spec's source file"));
        }
    }
    let msgs: Vec<&String> = r.get("messages").and_then(J::as_object).map(|m| m.keys().collect()).unwrap_or_default();
    let spec_msgs: Vec<&String> = rev.structs.keys().collect();
    if msgs != spec_msgs {
        problems.push(format!("messages {msgs:?} vs spec {spec_msgs:?}"));
    }
    problems
}

/// Informational: each message's declared case count against the bundled vector file beside the table.
fn declared_counts(path: &Path, r: &J, name: &str) -> Vec<String> {
    let mut notes = vec![];
    let (Some(dir), Some(m)) = (path.parent(), r.get("messages").and_then(J::as_object)) else { return notes };
    for (msg, counts) in m {
        let f = dir.join(name).join(format!("{msg}.jsonl"));
        if let (Ok(text), Some(total)) = (std::fs::read_to_string(&f), counts.get("total").and_then(J::as_u64)) {
            let held = text.lines().filter(|l| !l.trim().is_empty()).count().saturating_sub(1) as u64;
            if held != total {
                notes.push(format!("{name} {msg}: table declares {total} cases, the bundled file holds {held}"));
            }
        }
    }
    notes
}

/// Why a vector unit has no spec revision to be checked against ([`wire_unit`]).
#[derive(Debug, thiserror::Error)]
pub enum WireUnitError {
    /// No revision of that name, and no split to follow.
    #[error("not in the spec")]
    NotInSpec,
    /// The name's release is not among the releases the file lists.
    #[error("not in the spec, and its name's release {0} is not among its vllm_releases")]
    NameNotInReleases(String),
    /// It lists a release no spec revision has.
    #[error("not in the spec, and it lists release {0}, which no spec revision has")]
    UnknownRelease(String),
    /// Its releases are covered by revisions whose wires differ.
    #[error("not in the spec, and its releases span revisions of different wires ({first} and {other})")]
    Split {
        /// The first covering revision.
        first: String,
        /// One whose wire differs from it.
        other: String,
    },
}

/// The spec revision a vector unit (a revision name as the vectors were generated, with its releases) is
/// checked against: the revision of that name, or — when the spec has since split that range for behaviour —
/// the first of the revisions covering its releases, provided they all have one wire (fingerprint). The second
/// value says when a split was followed.
pub fn wire_unit(
    family: &str,
    name: &str,
    releases: &[String],
) -> Result<(std::sync::Arc<mooncake_wire::spec::Revision>, Option<String>), WireUnitError> {
    let spec = mooncake_wire::spec::Spec::builtin();
    if let Some(r) = spec.revision(name) {
        return Ok((r.clone(), None));
    }
    // Only the push family's names are release ranges (`vllm-0.25.0..0.29.0`) that the spec may have split.
    let push_name = name.strip_prefix("vllm-").is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()));
    if family != "push" || !push_name {
        return Err(WireUnitError::NotInSpec);
    }
    let fam = spec.push();
    // The name's own releases (`vllm-A..B`: A and B) must be among the unit's, and every release of the unit
    // must be one the spec knows: a file claiming `vllm-9.9.9` over 0.33.0's releases is not a split of anything.
    let bounds: Vec<&str> = name.trim_start_matches("vllm-").split("..").collect();
    let known = |x: &String| fam.revisions.iter().any(|r| r.releases.contains(x));
    if let Some(b) = bounds.iter().find(|b| !releases.iter().any(|x| x == *b)) {
        return Err(WireUnitError::NameNotInReleases(b.to_string()));
    }
    if let Some(x) = releases.iter().find(|x| !known(x)) {
        return Err(WireUnitError::UnknownRelease(x.clone()));
    }
    let covering: Vec<_> =
        fam.revisions.iter().filter(|r| r.releases.iter().any(|x| releases.contains(x))).cloned().collect();
    let Some(first) = covering.first() else {
        return Err(WireUnitError::NotInSpec);
    };
    let fp =
        |r: &mooncake_wire::spec::Revision| mooncake_wire::hash::fingerprint::wire_fingerprint(r).unwrap_or_default();
    let want = fp(first);
    if let Some(other) = covering.iter().find(|r| fp(r) != want) {
        return Err(WireUnitError::Split { first: first.revision.clone(), other: other.revision.clone() });
    }
    let names: Vec<&str> = covering.iter().map(|r| r.revision.as_str()).collect();
    Ok((
        first.clone(),
        Some(format!(
            "{name} is split in the spec into {} (one wire; checked as {})",
            names.join(", "),
            first.revision
        )),
    ))
}
