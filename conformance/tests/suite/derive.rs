//! Setups derived from the traces themselves (`conformance/src/derive`): equal to `scenarios.toml`'s for every
//! bundled trace; enough to replay every bundled trace with its scenario renamed (a scenario with no entry);
//! and, where a trace does not show something, a `CASE-SETUP` finding that prints the entry to add — which,
//! given with `--scenarios`, makes the case pass.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mooncake_conformance::derive::{derive, differences, dry_run, Source};
use mooncake_conformance::play::{Role, Status};
use mooncake_conformance::run::{run, RunConfig};
use mooncake_conformance::scenarios::Ready;
use mooncake_conformance::testee::TesteeSpec;
use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::Trace;
use serde_json::Value as J;

fn model(p: &Path) -> Conversation {
    Conversation::new(Trace::load(p).unwrap()).unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mooncake-derive-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A copy of trace `src` under `dir/<its directory>/`, with the header rewritten by `edit`.
fn copy_with(src: &Path, dir: &Path, edit: impl FnOnce(&mut J)) -> PathBuf {
    let text = std::fs::read_to_string(src).unwrap();
    let (head, rest) = text.split_once('\n').unwrap();
    let mut h: J = serde_json::from_str(head).unwrap();
    edit(&mut h);
    let sub = dir.join(src.parent().unwrap().file_name().unwrap());
    std::fs::create_dir_all(&sub).unwrap();
    let out = sub.join(src.file_name().unwrap());
    std::fs::write(&out, format!("{}\n{rest}", serde_json::to_string(&h).unwrap())).unwrap();
    out
}

fn rename(h: &mut J) {
    let s = h["scenario"].as_str().unwrap().to_string();
    h["scenario"] = J::from(format!("mine_{s}"));
}

/// The bundled expected failures (`conformance/expected-failures.toml`).
fn expected_failures() -> mooncake_conformance::expected::ExpectedFailures {
    let p = common::traces_dir().parent().unwrap().join("expected-failures.toml");
    mooncake_conformance::expected::ExpectedFailures::load(&p).unwrap()
}

#[test]
fn derived_setups_equal_scenarios_toml_for_every_bundled_trace() {
    let sc = mooncake_conformance::bundled::scenarios();
    let expected = expected_failures();
    let mut checked = 0;
    for p in common::trace_files(&common::traces_dir()) {
        let t = model(&p);
        if t.exchanges.is_empty() {
            continue; // bootstrap-only traces (i) and 0.16.0's d2, whose decoder never pulled: nothing to set up
        }
        // A trace whose cases the runner is known to judge wrongly (0.16.0's l3: the recorded exchange keeps only
        // the reply the decoder received, so the prefiller's second FINISH is extra in any dry run).
        let case = format!("{}/{}/", t.revision.revision, t.scenario());
        if expected.cases.iter().any(|e| e.id.starts_with(&case)) {
            continue;
        }
        let given = &sc.scenario[t.scenario()];
        // The file's entry reproduces the recording in a dry run (the dry run is faithful to the players)...
        let run = dry_run(&t, &sc.model, given).unwrap();
        assert!(
            run.reproduces(&t),
            "{}: scenarios.toml's entry in a dry run: {:?} {:?} vs {:?} {:?}",
            p.display(),
            run.replies,
            run.writes,
            run.recorded_writes,
            run.finished_sending_problems(&t)
        );
        // ... and the trace alone gives the same setup, which reproduces it too.
        let d = derive(&t, &sc.model);
        assert!(d.unresolved.is_empty(), "{}: {:?}", p.display(), d.unresolved);
        assert_eq!(differences(&t, &sc.model, given, &d.scenario), Vec::<String>::new(), "{}", p.display());
        assert!(dry_run(&t, &sc.model, &d.scenario).unwrap().reproduces(&t), "{}", p.display());
        checked += 1;
    }
    println!("derived setup equals scenarios.toml's for {checked} traces");
    assert!(checked >= 100, "{checked}");
}

#[test]
fn what_the_derivation_reads_from_each_kind_of_trace() {
    let sc = mooncake_conformance::bundled::scenarios();
    let at = |rel: &str| derive(&model(&common::traces_dir().join(rel)), &sc.model).scenario;
    // CONTINUE before the reply that settles xfer-2: ready after the first reply.
    let g = at("vllm-0.33.0/g_continue_then_finish.jsonl");
    assert_eq!(
        g.transfers.iter().map(|t| (t.transfer_id.as_str(), t.ready.clone())).collect::<Vec<_>>(),
        [("xfer-1", Ready::Before), ("xfer-2", Ready::AfterReply(1))]
    );
    // The timeout: never scheduled.
    assert!(at("vllm-0.33.0/f_unknown_request.jsonl").transfers.is_empty());
    assert!(at("vllm-0.13.0/f_unknown_request.jsonl").transfers.is_empty(), "generation 1: trans_done without a write");
    // A failed write; generation 1's trans_error after a recorded call.
    assert_eq!(at("vllm-0.33.0/e_transfer_engine_failure.jsonl").fail_transfers, 1);
    assert_eq!(at("vllm-0.15.1/e_transfer_engine_failure.jsonl").fail_transfers, 1);
    // LAYOUT_MISS after an acknowledged pull; non-contiguous blocks (one descriptor per block was recorded).
    let h1 = at("vllm-0.33.0/h1_layout_reuse_and_miss.jsonl");
    assert_eq!(h1.forget_layouts_after_reply, Some(2));
    assert_eq!(
        h1.transfers.iter().map(|t| t.blocks.clone()).collect::<Vec<_>>(),
        [vec![vec![10, 12]], vec![vec![14, 16]], vec![vec![18, 20]]]
    );
    // Prefiller request ids from what vLLM freed; generation 1 knows a request by the decoder's id.
    assert_eq!(
        at("vllm-0.33.0/b_batch_success.jsonl").transfers.iter().map(|t| t.p_req_id.as_str()).collect::<Vec<_>>(),
        ["p-req-1", "p-req-2", "p-req-3"]
    );
    assert_eq!(
        at("vllm-0.13.0/b_batch_success.jsonl").transfers.iter().map(|t| t.transfer_id.as_str()).collect::<Vec<_>>(),
        ["d-req-1", "d-req-2", "d-req-3"]
    );
}

#[test]
fn a_dry_run_notices_a_setup_that_does_not_reproduce_the_recording() {
    let sc = mooncake_conformance::bundled::scenarios();
    let t = model(&common::traces_dir().join("vllm-0.33.0/g_continue_then_finish.jsonl"));
    let mut s = sc.scenario["g_continue_then_finish"].clone();
    s.transfers[1].ready = Ready::Before;
    assert!(
        !dry_run(&t, &sc.model, &s).unwrap().replies.is_empty(),
        "both ready at once: one FINISH, not CONTINUE + FINISH"
    );
    let t = model(&common::traces_dir().join("vllm-0.33.0/h1_layout_reuse_and_miss.jsonl"));
    let mut s = sc.scenario["h1_layout_reuse_and_miss"].clone();
    s.transfers[0].blocks = vec![vec![1, 2]];
    assert!(!dry_run(&t, &sc.model, &s).unwrap().writes_match(), "contiguous blocks coalesce: fewer descriptors");
    s = sc.scenario["h1_layout_reuse_and_miss"].clone();
    s.forget_layouts_after_reply = None;
    assert!(!dry_run(&t, &sc.model, &s).unwrap().replies.is_empty(), "no LAYOUT_MISS without forgetting");
    let t = model(&common::traces_dir().join("vllm-0.33.0/e_transfer_engine_failure.jsonl"));
    let mut s = sc.scenario["e_transfer_engine_failure"].clone();
    s.fail_transfers = 0;
    assert!(!dry_run(&t, &sc.model, &s).unwrap().replies.is_empty());
    let t = model(&common::traces_dir().join("vllm-0.13.0/e_transfer_engine_failure.jsonl"));
    assert!(!dry_run(&t, &sc.model, &s).unwrap().replies.is_empty(), "generation 1: trans_done instead of trans_error");
}

/// Every bundled trace with its scenario renamed (no entry in scenarios.toml) replays against the reference
/// peer, its setup derived from the trace.
#[test]
fn every_bundled_trace_replays_with_its_scenario_renamed() {
    let dir = temp("renamed");
    let files = common::trace_files(&common::traces_dir());
    for p in &files {
        copy_with(p, &dir, rename);
    }
    let mut c = RunConfig::paths(std::slice::from_ref(&dir), TesteeSpec::Builtin).unwrap();
    // Bootstrap cases use no setup.
    c.roles = vec![Role::Prefiller, Role::Decoder];
    c.slack = Duration::from_secs(2);
    // Cases wait on timers: sixteen at once.
    c.jobs = 16;
    // The bundled expected failures (the runner's own limits: the setup derived from such a trace cannot
    // reproduce it either), for the renamed scenarios.
    c.expected = expected_failures();
    for e in &mut c.expected.cases {
        let mut parts: Vec<String> = e.id.split('/').map(String::from).collect();
        parts[1] = format!("mine_{}", parts[1]);
        e.id = parts.join("/");
    }
    let expected = c.expected.clone();
    let r = rt().block_on(run(c)).unwrap();
    let want: usize = files.iter().map(|p| 2 * common::kinds(p).0 as usize).sum();
    assert_eq!(r.results.len(), want);
    // Per directory: cases, passed, could not be set up.
    let mut per: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    let mut setup_failed = vec![];
    for c in &r.results {
        assert_eq!(c.setup, Some(Source::Derived), "{}", c.id);
        let d = Path::new(&c.trace).parent().and_then(|d| d.file_name()).unwrap().to_string_lossy().to_string();
        let e = per.entry(d).or_default();
        e.0 += 1;
        if c.status == Status::Pass {
            e.1 += 1;
        }
        if let Some(f) = c.findings.iter().find(|f| f.check.as_str() == "CASE-SETUP") {
            e.2 += 1;
            let scen = c.id.split('/').nth(1).unwrap();
            assert!(f.detail.contains(&format!("[scenario.{scen}]")), "{}: {}", c.id, f.detail);
            setup_failed.push(c.id.clone());
        }
    }
    for (d, (n, pass, unset)) in &per {
        println!("{d}: {n} cases with the scenario renamed, {pass} pass, {unset} could not be set up");
    }
    let bad: Vec<String> = r
        .results
        .iter()
        .filter(|c| !matches!(c.status, Status::Pass | Status::Xfail) && !setup_failed.contains(&c.id))
        .map(|c| format!("{}: {:?}", c.id, c.findings))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    // Every bundled trace's setup can be read from it, but for the cases known to fail.
    setup_failed.retain(|id| !expected.cases.iter().any(|e| &e.id == id));
    assert_eq!(setup_failed, Vec::<String>::new());
    let dirs: std::collections::BTreeSet<_> = files.iter().filter_map(|p| p.parent()).collect();
    assert_eq!(per.len(), dirs.len(), "every directory");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recording whose writes coalesce in a way neither candidate gives (the prefiller's blocks 3, 4, 9 for the
/// decoder's 3, 4, 5: two descriptors per layer): the prefiller case cannot be set up and says what to add;
/// the decoder case, which does not check descriptor counts, runs on the derived setup. Given the printed
/// entry with the blocks filled in, the prefiller case passes.
#[test]
fn what_the_trace_does_not_show_is_asked_for_by_name() {
    let dir = temp("unshown");
    let src = common::traces_dir().join("vllm-0.33.0/a_single_success.jsonl");
    let p = copy_with(&src, &dir, |h| {
        h["scenario"] = J::from("my_own_recording");
        h["transfer_engine_calls"][0]["n"] = J::from(4);
    });
    let bin = env!("CARGO_BIN_EXE_mooncake-conformance");
    let out = Command::new(bin).args(["run", "--progress", "off", "--format", "json"]).arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: J = serde_json::from_slice(&out.stdout).unwrap();
    let case = |id: &str| v["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap().clone();
    let pc = case("vllm-0.33.0/my_own_recording/prefiller");
    assert_eq!(pc["status"], "fail");
    assert_eq!(pc["setup"], "derived");
    let f = &pc["findings"].as_array().unwrap()[0];
    assert_eq!(f["check"], "CASE-SETUP", "{pc}");
    assert_eq!(pc["findings"].as_array().unwrap().len(), 1, "the testee is not blamed: {pc}");
    let detail = f["detail"].as_str().unwrap();
    assert!(
        detail.contains("[scenario.my_own_recording]")
            && detail.contains("--scenarios")
            && detail.contains("prefiller block ids"),
        "{detail}"
    );
    let dc = case("vllm-0.33.0/my_own_recording/decoder");
    assert_eq!(dc["status"], "pass", "{dc}");
    assert!(dc["notes"].to_string().contains("not checked by this case"), "{dc}");
    assert_eq!(v["summary"]["derived_setup"], 2);
    assert_eq!(v["summary"]["derived_setup_failed"], 1);

    // The printed entry is a --scenarios file as it stands (the comments say what to fill in).
    let snippet = detail.split_once("\n\n").unwrap().1;
    assert!(snippet.contains("# TO FILL IN: prefiller block ids"), "{snippet}");
    let parsed = mooncake_conformance::bundled::scenarios().overlay(snippet).unwrap();
    assert_eq!(parsed.scenario["my_own_recording"].transfers[0].blocks, vec![vec![3, 4, 5]]);
    // Filled in: the prefiller's real blocks. Now the file's entry is used and the case passes.
    let file = dir.join("mine.toml");
    std::fs::write(&file, snippet.replace("blocks = [[3, 4, 5]]", "blocks = [[3, 4, 9]]")).unwrap();
    let out = Command::new(bin)
        .args(["run", "--progress", "off", "--format", "json", "--scenarios"])
        .arg(&file)
        .arg(&p)
        .output()
        .unwrap();
    let v: J = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", serde_json::to_string_pretty(&v["cases"]).unwrap());
    assert_eq!(v["summary"]["derived_setup"], 0);
    // The file's entry differs from what the trace alone suggests: a note, not a failure.
    let pc =
        v["cases"].as_array().unwrap().iter().find(|c| c["id"] == "vllm-0.33.0/my_own_recording/prefiller").unwrap();
    assert_eq!(pc["setup"], "scenarios");
    assert!(pc["notes"].to_string().contains("differs from the setup derived from the trace"), "{pc}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a trace cannot show is named, with the case roles it would fail.
#[test]
fn unshown_parts_are_named_with_the_roles_they_affect() {
    let dir = temp("unshown-parts");
    let sc = mooncake_conformance::bundled::scenarios();
    let src = common::traces_dir().join("vllm-0.33.0/a_single_success.jsonl");
    // Bytes no [model] block length gives: the recording's model differs.
    let p = copy_with(&src, &dir, |h| h["transfer_engine_calls"][0]["bytes"] = J::from(24576));
    let d = derive(&model(&p), &sc.model);
    assert_eq!(d.unresolved.len(), 1, "{:?}", d.unresolved);
    assert!(d.unresolved[0].what.starts_with("the model:"), "{:?}", d.unresolved);
    assert_eq!(d.unresolved[0].roles, [Role::Prefiller]);
    // vLLM freed a request the trace never pulls: which transfer it was cannot be told.
    let p = copy_with(&src, &dir, |h| {
        h["observed_outcome"]["finished_sending"]["prefiller0"] = serde_json::json!(["p-req-1", "p-req-7"])
    });
    let d = derive(&model(&p), &sc.model);
    assert!(
        d.unresolved.iter().any(|u| u.what.starts_with("what the prefiller frees") && u.roles == [Role::Prefiller]),
        "{:?}",
        d.unresolved
    );
    assert_eq!(d.scenario.transfers[0].p_req_id, "p-req-1");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The text report says how a setup was derived, under the case.
#[test]
fn the_report_says_a_setup_was_derived() {
    let dir = temp("text");
    let p = copy_with(&common::traces_dir().join("vllm-0.33.0/g_continue_then_finish.jsonl"), &dir, rename);
    let out = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .args(["run", "--progress", "off", "--role", "prefiller"])
        .arg(&p)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("note: no [scenario.mine_g_continue_then_finish] entry: setup derived from the trace"),
        "{text}"
    );
    assert!(text.contains("readied xfer-2 after reply 1"), "{text}");
    assert!(text.contains("setup derived from the trace (no scenario entry): 1 case"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
