//! Text and JSON output of the subcommands.

use std::process::ExitCode;

use serde_json::json;

use crate::validate::TraceReport;
use crate::vectors::FileReport;

pub fn usage_error(msg: &str) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

pub fn print_json(v: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(v).expect("JSON"));
}

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

pub fn vectors_text(reps: &[FileReport], all: bool) {
    for r in reps {
        let status = if r.ok() { "ok  " } else { "FAIL" };
        match &r.not_checked {
            Some(why) => println!("{status} {}  not checked: {why}", r.path),
            None => {
                let extra = if r.error_text_differs > 0 { format!(" ({} error texts differ from msgspec)", r.error_text_differs) } else { String::new() };
                println!("{status} {:<48} {}/{} cases{extra}  [{}]", r.subject, r.passed, r.cases, r.path);
            }
        }
        for n in &r.notes {
            println!("       note: {n}");
        }
        let shown = if all { r.failures.len() } else { 5 };
        for f in r.failures.iter().take(shown) {
            println!("       line {} {}: {}", f.line, f.id, f.problem);
        }
        if r.failures.len() > shown {
            println!("       … {} more (use --all)", r.failures.len() - shown);
        }
    }
    let cases: usize = reps.iter().map(|r| r.cases).sum();
    let passed: usize = reps.iter().map(|r| r.passed).sum();
    let bad = reps.iter().filter(|r| !r.ok()).count();
    println!(
        "vectors: {} files, {cases} cases, {passed} agree, {} disagree, {} files not checked — {}",
        reps.len(),
        reps.iter().map(|r| r.failures.len()).sum::<usize>(),
        reps.iter().filter(|r| r.not_checked.is_some()).count(),
        if bad == 0 { "OK" } else { "FAILED" }
    );
}

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

pub fn validate_text(reps: &[TraceReport]) {
    for r in reps {
        let status = if r.ok() { "ok  " } else { "FAIL" };
        println!(
            "{status} {:<28} vLLM {:<7} {:<22} {} zmq, {} http  [{}]",
            r.scenario,
            r.vllm_version,
            r.revision.as_deref().unwrap_or("?"),
            r.zmq_payloads,
            r.http_events,
            r.path
        );
        for f in &r.findings {
            let at = match (f.seq, f.line) {
                (Some(s), Some(l)) => format!("seq {s} (line {l})"),
                (None, Some(l)) => format!("line {l}"),
                _ => String::new(),
            };
            let msg = f.message.as_deref().map(|m| format!(" {m}")).unwrap_or_default();
            println!("       [{}] {at}{msg}: {}", f.check, f.detail);
        }
    }
    let bad = reps.iter().filter(|r| !r.ok()).count();
    println!(
        "validate: {} traces, {} zmq payloads, {} http events, {} findings — {}",
        reps.len(),
        reps.iter().map(|r| r.zmq_payloads).sum::<usize>(),
        reps.iter().map(|r| r.http_events).sum::<usize>(),
        reps.iter().map(|r| r.findings.len()).sum::<usize>(),
        if bad == 0 { "OK" } else { "FAILED" }
    );
}

// ---- run reports ------------------------------------------------------------------------------------------

use crate::play::{CaseResult, Status};
use crate::run::RunReport;

fn status_word(s: &Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Fail => "FAIL",
        Status::Xfail => "xfail",
        Status::Skip => "skip",
    }
}

/// Cases whose testee ran at another revision than the trace's.
fn cross_count(r: &RunReport) -> usize {
    r.results.iter().filter(|c| c.testee_revision.is_some()).count()
}

/// The note of a case: why it was skipped or expected to fail, or its first finding; cross-version cases
/// say so first.
fn case_note(c: &CaseResult, findings: impl FnOnce(&CaseResult) -> String) -> String {
    let note = c.reason.clone().unwrap_or_else(|| findings(c));
    match &c.testee_revision {
        Some(t) => format!("cross-version: testee at {t}{}{note}", if note.is_empty() { "" } else { "; " }),
        None => note,
    }
}

pub fn run_summary(r: &RunReport) -> String {
    format!(
        "conformance: {} cases{} against {} — {} passed, {} failed, {} expected failures, {} skipped{} — {}",
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
        if r.stale.is_empty() { String::new() } else { format!(", {} stale expected failures", r.stale.len()) },
        if r.ok() { "OK" } else { "FAILED" }
    )
}

pub fn run_text(r: &RunReport) {
    println!("{:<6} {:<52} {:>8}  notes", "status", "case", "ms");
    for c in &r.results {
        let note = case_note(c, |c| c.findings.first().map(|f| format!("[{}] {}", f.check, f.detail)).unwrap_or_default());
        let note: String = note.chars().take(110).collect();
        println!("{:<6} {:<52} {:>8}  {note}", status_word(&c.status), c.id, c.duration_ms);
        if c.status == Status::Fail {
            for f in &c.findings {
                let at = f.seq.map(|s| format!("seq {s}: ")).unwrap_or_default();
                println!("         [{}] {at}{}{}", f.check, f.message.as_deref().map(|m| format!("{m}: ")).unwrap_or_default(), f.detail);
            }
        }
    }
    for s in &r.stale {
        println!("STALE  {s}");
    }
    println!("{}", run_summary(r));
}

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
            "cross_version": cross_count(r),
            "ok": r.ok(),
        }
    })
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub fn run_junit(r: &RunReport) -> String {
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    o.push_str(&format!(
        "<testsuite name=\"mooncake-conformance\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n",
        r.results.len() + r.stale.len(),
        r.count(Status::Fail) + r.stale.len(),
        r.count(Status::Skip) + r.count(Status::Xfail)
    ));
    for c in &r.results {
        let (class, name) = c.id.rsplit_once('/').unwrap_or(("", &c.id));
        o.push_str(&format!("  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">", xml(class), xml(name), c.duration_ms as f64 / 1000.0));
        match c.status {
            Status::Fail => {
                let detail: Vec<String> = c.findings.iter().map(|f| format!("[{}] {}{}", f.check, f.message.as_deref().map(|m| format!("{m}: ")).unwrap_or_default(), f.detail)).collect();
                o.push_str(&format!("<failure message=\"{}\">{}</failure>", xml(&detail.first().cloned().unwrap_or_default()), xml(&detail.join("\n"))));
            }
            Status::Skip | Status::Xfail => o.push_str(&format!("<skipped message=\"{}\"/>", xml(c.reason.as_deref().unwrap_or("")))),
            Status::Pass => {}
        }
        o.push_str("</testcase>\n");
    }
    for s in &r.stale {
        o.push_str(&format!("  <testcase classname=\"expected-failures\" name=\"stale\"><failure message=\"{}\"/></testcase>\n", xml(s)));
    }
    o.push_str("</testsuite>\n");
    o
}

pub fn run_markdown(r: &RunReport) -> String {
    let mut o = format!("### mooncake-conformance: {}\n\n{}\n\n", r.testee, run_summary(r));
    o.push_str("| Case | Status | Notes |\n|---|---|---|\n");
    for c in &r.results {
        let note = case_note(c, |c| c.findings.iter().map(|f| format!("`{}` {}", f.check, f.detail)).collect::<Vec<_>>().join("<br>"));
        o.push_str(&format!("| `{}` | {} | {} |\n", c.id, status_word(&c.status), note.replace('|', "\\|").replace('\n', " ")));
    }
    for s in &r.stale {
        o.push_str(&format!("| stale expected failure | FAIL | {} |\n", s.replace('|', "\\|")));
    }
    o
}
