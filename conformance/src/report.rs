//! The writers: text, JSON, JUnit and Markdown output of the reports, each written to any `impl Write` (the
//! CLI gives standard output or a report file). The last layer of the pipeline trace → conversation →
//! checks → report → writers; nothing here decides an exit code.

use std::io::{self, Write};

use serde_json::json;

use mooncake_trace::finding::TraceReport;
use mooncake_trace::finding::{CheckId, FileReport};

/// Writes a JSON document, pretty-printed, with a final newline.
pub fn write_json(w: &mut impl Write, v: &serde_json::Value) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, v)?;
    writeln!(w)
}

/// The `vectors` report as one JSON document.
pub fn vectors_json(reps: &[FileReport]) -> serde_json::Value {
    let cases: usize = reps.iter().map(|r| r.cases).sum();
    let passed: usize = reps.iter().map(|r| r.passed).sum();
    json!({
        "files": reps,
        "summary": {
            "files": reps.len(),
            "files_ok": reps.iter().filter(|r| r.ok()).count(),
            "cases": cases,
            "passed": passed,
            "failed": reps.iter().map(|r| r.failures.len()).sum::<usize>(),
            "not_checked_files": reps.iter().filter(|r| r.not_checked.is_some()).count(),
            "error_text_differs": reps.iter().map(|r| r.error_text_differs).sum::<usize>(),
            "ok": reps.iter().all(|r| r.ok()),
        }
    })
}

/// Writes the `vectors` report as text: a line per file, its notes and (the first) failing cases, a summary.
pub fn write_vectors_text(w: &mut impl Write, reps: &[FileReport], all: bool) -> io::Result<()> {
    for r in reps {
        let status = if r.ok() { "ok  " } else { "FAIL" };
        match &r.not_checked {
            Some(why) => {
                writeln!(w, "{status} {}  not checked: {why}", r.path)?;
            }
            None => {
                let extra = if r.error_text_differs > 0 {
                    format!(" ({} error texts differ from msgspec)", r.error_text_differs)
                } else {
                    String::new()
                };
                writeln!(w, "{status} {:<48} {}/{} cases{extra}  [{}]", r.subject, r.passed, r.cases, r.path)?;
            }
        }
        for n in &r.notes {
            writeln!(w, "       note: {n}")?;
        }
        let shown = if all { r.failures.len() } else { 5 };
        for f in r.failures.iter().take(shown) {
            writeln!(w, "       line {} {}: {}", f.line, f.id, f.problem)?;
        }
        if r.failures.len() > shown {
            writeln!(w, "       … {} more (use --all)", r.failures.len() - shown)?;
        }
    }
    let cases: usize = reps.iter().map(|r| r.cases).sum();
    let passed: usize = reps.iter().map(|r| r.passed).sum();
    let bad = reps.iter().filter(|r| !r.ok()).count();
    writeln!(
        w,
        "vectors: {} files, {cases} cases, {passed} agree, {} disagree, {} files not checked — {}",
        reps.len(),
        reps.iter().map(|r| r.failures.len()).sum::<usize>(),
        reps.iter().filter(|r| r.not_checked.is_some()).count(),
        if bad == 0 { "OK" } else { "FAILED" }
    )
}

/// The `validate` report as one JSON document.
pub fn validate_json(reps: &[TraceReport]) -> serde_json::Value {
    json!({
        "traces": reps,
        "summary": {
            "traces": reps.len(),
            "traces_ok": reps.iter().filter(|r| r.ok()).count(),
            "zmq_payloads": reps.iter().map(|r| r.zmq_payloads).sum::<usize>(),
            "http_events": reps.iter().map(|r| r.http_events).sum::<usize>(),
            "findings": reps.iter().map(|r| r.findings.len()).sum::<usize>(),
            "ok": reps.iter().all(|r| r.ok()),
        }
    })
}

/// Writes the `validate` report as text: a line per trace and its findings, a summary.
pub fn write_validate_text(w: &mut impl Write, reps: &[TraceReport]) -> io::Result<()> {
    for r in reps {
        let status = if r.ok() { "ok  " } else { "FAIL" };
        writeln!(
            w,
            "{status} {:<28} {:<12} {:<22} {} zmq, {} http  [{}]",
            r.scenario,
            format!("{} {}", r.project, r.vllm_version),
            r.revision.as_deref().unwrap_or("?"),
            r.zmq_payloads,
            r.http_events,
            r.path
        )?;
        if !r.unobserved.is_empty() {
            writeln!(
                w,
                "       not observed by the recording: {} (the checks that need them do not apply)",
                r.unobserved.join(", ")
            )?;
        }
        for f in &r.findings {
            let at = match (f.seq, f.line) {
                (Some(s), Some(l)) => format!("seq {s} (line {l})"),
                (None, Some(l)) => format!("line {l}"),
                _ => String::new(),
            };
            let msg = f.message.as_deref().map(|m| format!(" {m}")).unwrap_or_default();
            writeln!(w, "       [{}] {at}{msg}: {}", f.check, f.detail)?;
        }
    }
    let bad = reps.iter().filter(|r| !r.ok()).count();
    writeln!(
        w,
        "validate: {} traces, {} zmq payloads, {} http events, {} findings — {}",
        reps.len(),
        reps.iter().map(|r| r.zmq_payloads).sum::<usize>(),
        reps.iter().map(|r| r.http_events).sum::<usize>(),
        reps.iter().map(|r| r.findings.len()).sum::<usize>(),
        if bad == 0 { "OK" } else { "FAILED" }
    )
}

// ---- run reports ------------------------------------------------------------------------------------------

use crate::play::{CaseResult, Status};
use crate::run::RunReport;

/// A case's status in a text or Markdown report: its word, in capitals when it failed or broke.
fn status_word(s: &Status) -> String {
    match s {
        Status::Fail | Status::Error => s.word().to_uppercase(),
        _ => s.word().to_string(),
    }
}

/// Cases whose testee ran at another revision than the trace's.
fn cross_count(r: &RunReport) -> usize {
    r.results.iter().filter(|c| c.testee_revision.is_some()).count()
}

/// The note of a case: why it was skipped or expected to fail, or its first finding; cross-version cases
/// say so first.
fn case_note(c: &CaseResult, findings: impl FnOnce(&CaseResult) -> String) -> String {
    let mut note = c.reason.clone().unwrap_or_else(|| findings(c));
    if note.is_empty() && !c.not_applicable.is_empty() && c.status != Status::Skip {
        note = not_applicable_note(c);
    }
    match &c.testee_revision {
        Some(t) => format!("cross-version: testee at {t}{}{note}", if note.is_empty() { "" } else { "; " }),
        None => note,
    }
}

/// Cases whose setup was derived from their trace, and those of them that could not be set up.
pub fn derived_count(r: &RunReport) -> (usize, usize) {
    let d: Vec<&CaseResult> = r.results.iter().filter(|c| c.setup == Some(crate::derive::Source::Derived)).collect();
    (d.len(), d.iter().filter(|c| c.findings.iter().any(|f| f.check == CheckId::CaseSetup)).count())
}

/// `not applicable: TE-CALLS, P-FINISHED-SENDING (not observed by the recording: transfer_engine_calls, …)`.
fn not_applicable_note(c: &CaseResult) -> String {
    let checks: Vec<&str> = c.not_applicable.iter().map(|n| n.check.as_str()).collect();
    let mut missing: Vec<&str> = c.not_applicable.iter().map(|n| n.unobserved).collect();
    missing.dedup();
    format!("not applicable: {} (not observed by the recording: {})", checks.join(", "), missing.join(", "))
}

/// (trace revision, cases passed, cases) per revision, in spec order.
pub fn per_revision(r: &RunReport) -> Vec<(String, usize, usize)> {
    let order = |rev: &str| {
        mooncake_wire::spec::Spec::builtin()
            .push()
            .revisions
            .iter()
            .position(|x| x.revision == rev)
            .unwrap_or(usize::MAX)
    };
    tally(r, |c| Some((order(&c.revision), c.revision.clone())))
        .into_iter()
        .map(|((_, rev), p, n)| (rev, p, n))
        .collect()
}

/// (implementation recorded, cases passed, cases) for the cases of other implementations' recordings
/// (`mooncake-0.3.13.post1`), by name; empty when every trace is vLLM's own connector's.
pub fn per_implementation(r: &RunReport) -> Vec<(String, usize, usize)> {
    tally(r, |c| c.implementation.clone())
}

/// (key, cases passed, cases) over the cases `key` names a group for, in key order.
fn tally<K: Ord>(r: &RunReport, key: impl Fn(&crate::play::CaseResult) -> Option<K>) -> Vec<(K, usize, usize)> {
    let mut m: std::collections::BTreeMap<K, (usize, usize)> = std::collections::BTreeMap::new();
    for c in &r.results {
        if let Some(k) = key(c) {
            let e = m.entry(k).or_default();
            e.1 += 1;
            if c.status == Status::Pass {
                e.0 += 1;
            }
        }
    }
    m.into_iter().map(|(k, (p, n))| (k, p, n)).collect()
}

/// The summary line of a run.
pub fn run_summary(r: &RunReport) -> String {
    format!(
        "conformance: {} cases{} against {} — {} passed, {} failed, {} expected failures, {} skipped{}{}{}{} — {}",
        r.results.len(),
        match cross_count(r) {
            0 => String::new(),
            n => format!(" ({n} cross-version)"),
        },
        r.testee,
        r.count(Status::Pass),
        r.count(Status::Fail),
        r.count(Status::Xfail),
        r.count(Status::Skip),
        match r.count(Status::Error) {
            0 => String::new(),
            n => format!(", {n} errors (the environment failed)"),
        },
        if r.stale.is_empty() { String::new() } else { format!(", {} stale expected failures", r.stale.len()) },
        if r.not_run == 0 { String::new() } else { format!(", {} not run (--fail-fast)", r.not_run) },
        match r.not_applicable() {
            0 => String::new(),
            n => format!(", {n} checks not applicable (not observed by the recording)"),
        },
        if !r.ok() {
            "FAILED"
        } else if r.results.iter().all(|c| c.status == Status::Skip) {
            // Exit 2 unless --allow-empty (`RunReport::nothing_checked`): not an OK.
            "NOTHING CHECKED"
        } else {
            "OK"
        }
    )
}

/// Writes the `run` report as text: a line per case (findings of failed ones), then the summary.
pub fn write_run_text(w: &mut impl Write, r: &RunReport) -> io::Result<()> {
    let width = r.results.iter().map(|c| c.id.len()).max().unwrap_or(0).max(52);
    writeln!(w, "{:<6} {:<width$} {:>8}  notes", "status", "case", "ms")?;
    for c in &r.results {
        let note =
            case_note(c, |c| c.findings.first().map(|f| format!("[{}] {}", f.check, f.detail)).unwrap_or_default());
        let note: String = note.chars().take(110).collect();
        writeln!(w, "{:<6} {:<width$} {:>8}  {note}", status_word(&c.status), c.id, c.duration_ms)?;
        for n in &c.notes {
            writeln!(w, "         note: {n}")?;
        }
        if matches!(c.status, Status::Fail | Status::Error) {
            for f in &c.findings {
                let at = f.seq.map(|s| format!("seq {s}: ")).unwrap_or_default();
                writeln!(
                    w,
                    "         [{}] {at}{}{}",
                    f.check,
                    f.message.as_deref().map(|m| format!("{m}: ")).unwrap_or_default(),
                    f.detail
                )?;
            }
            if !c.testee_stderr.is_empty() {
                writeln!(w, "         testee standard error, last {} lines:", c.testee_stderr.len())?;
                for l in &c.testee_stderr {
                    writeln!(w, "           | {l}")?;
                }
            }
        }
    }
    for s in &r.stale {
        writeln!(w, "STALE  {s}")?;
    }
    if r.not_run > 0 {
        writeln!(w, "stopped after the first failure (--fail-fast): {} cases not run", r.not_run)?;
    }
    let (derived, unset) = derived_count(r);
    if derived > 0 {
        writeln!(
            w,
            "setup derived from the trace (no scenario entry): {derived} case{}{}",
            if derived == 1 { "" } else { "s" },
            if unset == 0 {
                String::new()
            } else {
                format!(", {unset} of them could not be set up (CASE-SETUP: the entry to add is printed above)")
            }
        )?;
    }
    let per = per_revision(r);
    if per.len() > 1 {
        writeln!(
            w,
            "per revision: {}",
            per.iter().map(|(rev, pass, all)| format!("{rev} {pass}/{all}")).collect::<Vec<_>>().join(", ")
        )?;
    }
    let per = per_implementation(r);
    if !per.is_empty() {
        writeln!(
            w,
            "of which recordings of other implementations: {}",
            per.iter().map(|(imp, pass, all)| format!("{imp} {pass}/{all}")).collect::<Vec<_>>().join(", ")
        )?;
    }
    writeln!(w, "{}", run_summary(r))
}

/// The `run` report as one JSON document.
pub fn run_json(r: &RunReport) -> serde_json::Value {
    json!({
        "testee": r.testee,
        "cases": r.results,
        "stale_expected_failures": r.stale,
        "summary": {
            "cases": r.results.len(),
            "passed": r.count(Status::Pass),
            "failed": r.count(Status::Fail),
            "expected_failures": r.count(Status::Xfail),
            "skipped": r.count(Status::Skip),
            "errors": r.count(Status::Error),
            "not_run": r.not_run,
            "not_applicable": r.not_applicable(),
            "cross_version": cross_count(r),
            "derived_setup": derived_count(r).0,
            "derived_setup_failed": derived_count(r).1,
            "per_revision": per_revision(r).into_iter().map(|(rev, p, n)| json!({"revision": rev, "passed": p, "cases": n})).collect::<Vec<_>>(),
            "per_implementation": per_implementation(r).into_iter().map(|(imp, p, n)| json!({"implementation": imp, "passed": p, "cases": n})).collect::<Vec<_>>(),
            "ok": r.ok(),
        }
    })
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Writes the `run` report as JUnit XML.
pub fn write_run_junit(w: &mut impl Write, r: &RunReport) -> io::Result<()> {
    w.write_all(b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")?;
    writeln!(
        w,
        "<testsuite name=\"mooncake-conformance\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        r.results.len() + r.stale.len(),
        r.count(Status::Fail) + r.stale.len(),
        r.count(Status::Error),
        r.count(Status::Skip) + r.count(Status::Xfail)
    )?;
    for c in &r.results {
        let (class, name) = c.id.rsplit_once('/').unwrap_or(("", &c.id));
        write!(
            w,
            "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">",
            xml(class),
            xml(name),
            c.duration_ms as f64 / 1000.0
        )?;
        match c.status {
            Status::Fail => {
                let detail: Vec<String> = c
                    .findings
                    .iter()
                    .map(|f| {
                        format!(
                            "[{}] {}{}",
                            f.check,
                            f.message.as_deref().map(|m| format!("{m}: ")).unwrap_or_default(),
                            f.detail
                        )
                    })
                    .collect();
                write!(
                    w,
                    "<failure message=\"{}\">{}</failure>",
                    xml(&detail.first().cloned().unwrap_or_default()),
                    xml(&detail.join("\n"))
                )?;
            }
            Status::Error => {
                let why = c.reason.clone().unwrap_or_default();
                write!(w, "<error message=\"{}\">{}</error>", xml(why.lines().next().unwrap_or("")), xml(&why))?;
            }
            Status::Skip | Status::Xfail => {
                write!(w, "<skipped message=\"{}\"/>", xml(c.reason.as_deref().unwrap_or("")))?
            }
            Status::Pass => {}
        }
        if !c.not_applicable.is_empty() && c.status != Status::Skip {
            write!(w, "<system-out>{}</system-out>", xml(&not_applicable_note(c)))?;
        }
        if !c.testee_stderr.is_empty() {
            write!(w, "<system-err>{}</system-err>", xml(&c.testee_stderr.join("\n")))?;
        }
        w.write_all(b"</testcase>\n")?;
    }
    for s in &r.stale {
        writeln!(
            w,
            "  <testcase classname=\"expected-failures\" name=\"stale\"><failure message=\"{}\"/></testcase>",
            xml(s)
        )?;
    }
    w.write_all(b"</testsuite>\n")
}

/// Writes the `run` report as Markdown (for a pull-request comment).
pub fn write_run_markdown(w: &mut impl Write, r: &RunReport) -> io::Result<()> {
    write!(w, "### mooncake-conformance: {}\n\n{}\n\n", r.testee, run_summary(r))?;
    w.write_all(b"| Case | Status | Notes |\n|---|---|---|\n")?;
    for c in &r.results {
        let note = case_note(c, |c| {
            c.findings.iter().map(|f| format!("`{}` {}", f.check, f.detail)).collect::<Vec<_>>().join("<br>")
        });
        writeln!(w, "| `{}` | {} | {} |", c.id, status_word(&c.status), note.replace('|', "\\|").replace('\n', " "))?;
    }
    for s in &r.stale {
        writeln!(w, "| stale expected failure | FAIL | {} |", s.replace('|', "\\|"))?;
    }
    Ok(())
}
