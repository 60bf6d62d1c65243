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
