//! `mooncake-conformance run` end to end: every bundled case against the built-in reference peer and
//! against the `mooncake-peer testee` process (the runner against a peer with deliberate faults: `mutation.rs`).

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use mooncake_conformance::play::{Role, Status};
use mooncake_conformance::run::{run, RunConfig, RunReport};
use mooncake_conformance::testee::TesteeSpec;

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cfg(testee: TesteeSpec, filter: Option<&str>, roles: Vec<Role>) -> RunConfig {
    let mut c = RunConfig::paths(&[here().join("traces")], testee).unwrap();
    c.roles = roles;
    c.cases = filter.map(String::from).into_iter().collect();
    c.slack = Duration::from_secs(2);
    // Cases are mostly waiting on timeouts; sixteen at once keep the suite short (each has its own testee).
    c.jobs = 16;
    c
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn failures(r: &RunReport) -> Vec<String> {
    r.results.iter().filter(|c| c.status == Status::Fail).map(|c| format!("{}: {:?}", c.id, c.findings)).collect()
}

#[test]
fn every_bundled_case_passes_against_the_reference_peer() {
    let mut c = cfg(TesteeSpec::Builtin, None, vec![]);
    // As `run` does with the built-in peer: the bundled expected failures (each with its reason).
    c.expected =
        mooncake_conformance::expected::ExpectedFailures::load(&here().join("expected-failures.toml")).unwrap();
    let r = rt().block_on(run(c)).unwrap();
    assert_eq!(
        r.results.len(),
        common::expected_cases(&common::traces_dir()),
        "a prefiller and a decoder case per trace with ZeroMQ traffic, a bootstrap case per trace with HTTP"
    );
    // Every revision of the spec, both generations, has bundled recordings.
    let revisions: std::collections::BTreeSet<&str> = r.results.iter().map(|c| c.revision.as_str()).collect();
    for rev in &mooncake_wire::spec::Spec::builtin().push().revisions {
        assert!(revisions.contains(rev.revision.as_str()), "no bundled recording of {}", rev.revision);
    }
    // And every other implementation the spec knows: its recordings' cases name it, and the report counts them.
    let per = mooncake_conformance::report::per_implementation(&r);
    for imp in &mooncake_wire::spec::Spec::builtin().implementations {
        let tag = format!("@{}-", imp.name);
        let ids: Vec<&str> = r.results.iter().map(|c| c.id.as_str()).filter(|id| id.contains(&tag)).collect();
        assert!(!ids.is_empty(), "no bundled recording of {}", imp.name);
        let counted: usize =
            per.iter().filter(|(label, _, _)| label.starts_with(&format!("{}-", imp.name))).map(|p| p.2).sum();
        assert_eq!(counted, ids.len(), "{}: {per:?}", imp.name);
    }
    assert!(r.ok(), "{:#?}", failures(&r));
    for role in ["prefiller", "decoder", "bootstrap"] {
        let n = r.results.iter().filter(|c| c.role.as_str() == role && c.status == Status::Pass).count();
        println!("{role}: {n} cases pass");
    }
    // Every listed case failed as expected (a stale entry fails `r.ok()` above).
    let xfail = r.results.iter().filter(|c| c.status == Status::Xfail).count();
    assert_eq!(xfail, r.results.len() - r.results.iter().filter(|c| c.status == Status::Pass).count());
}

/// Cases run at once report exactly what they report one after another, in the same order.
#[test]
fn cases_run_at_once_report_as_cases_run_one_by_one() {
    let outcome = |jobs: usize| {
        let mut c = cfg(TesteeSpec::Builtin, Some("vllm-0.32.0/"), vec![]);
        c.jobs = jobs;
        let r = rt().block_on(run(c)).unwrap();
        r.results.iter().map(|c| (c.id.clone(), c.status.word().to_string(), c.findings.len())).collect::<Vec<_>>()
    };
    let serial = outcome(1);
    assert!(serial.len() >= 20, "{serial:?}");
    assert_eq!(outcome(5), serial);
    // With a fault, --fail-fast stops scheduling: the cases already running finish, the rest are not run.
    let mut c = cfg(TesteeSpec::BuiltinWithFaults(vec!["flip_byte".into()]), Some("vllm-0.32.0/"), vec![]);
    c.fail_fast = true;
    c.jobs = 3;
    let r = rt().block_on(run(c)).unwrap();
    assert!(!r.ok());
    assert!(r.results.len() < serial.len() && r.results.len() + r.not_run == serial.len(), "{}", r.results.len());
}

#[test]
fn the_peer_binary_passes_as_an_external_testee() {
    // The CLI, with the testee as a separate process speaking TESTEE.md over its stdin/stdout.
    let peer = env!("CARGO_BIN_EXE_mooncake-conformance").replace("mooncake-conformance", "mooncake-peer");
    if !std::path::Path::new(&peer).exists() {
        let st = Command::new(env!("CARGO")).args(["build", "-q", "-p", "mooncake-reference"]).status().unwrap();
        assert!(st.success());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .args(["run", "--format", "json", "--case", "vllm-0.33.0", "--testee", &format!("{peer} --log error testee")])
        .output()
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(out.status.code(), Some(0), "{}", serde_json::to_string_pretty(&v["cases"]).unwrap());
    assert_eq!(v["summary"]["passed"], 43);
}

#[test]
fn stale_expected_failures_fail_the_run() {
    let mut c = cfg(TesteeSpec::Builtin, Some("vllm-0.33.0/a_single_success"), vec![Role::Bootstrap]);
    c.expected =
        toml::from_str("[[case]]\nid = \"vllm-0.33.0/a_single_success/bootstrap\"\nreason = \"was broken\"\n").unwrap();
    let r = rt().block_on(run(c)).unwrap();
    assert_eq!(r.results[0].status, Status::Pass);
    assert_eq!(r.stale.len(), 1);
    assert!(!r.ok());
    // And a listed failure that does fail is an expected failure, not a failed run.
    let mut c = cfg(
        TesteeSpec::BuiltinWithFaults(vec!["wrong_status".into()]),
        Some("vllm-0.33.0/a_single_success"),
        vec![Role::Prefiller],
    );
    c.expected =
        toml::from_str("[[case]]\nid = \"vllm-0.33.0/a_single_success/prefiller\"\nreason = \"known\"\n").unwrap();
    let r = rt().block_on(run(c)).unwrap();
    assert_eq!(r.results[0].status, Status::Xfail, "{:?}", r.results[0]);
    assert!(r.ok());
}

/// A testee taken to speak one revision: the other revision's traces run cross-version where the spec diff
/// and the recorded conversation allow it, with the testee started at its own revision, and are skipped
/// with the reason otherwise.
#[test]
fn traces_of_another_revision_run_as_cross_version_cases() {
    // Only 0.33.0: every 0.32.0 case runs against a 0.33.0 testee (the 0.32.0 → 0.33.0 diff is compatible
    // in both directions unless LAYOUT_MISS or layout-less pulls are used, which 0.32.0 traces never do).
    let mut c = cfg(TesteeSpec::Builtin, Some("vllm-0.32.0"), vec![]);
    c.speaks = Some(vec!["vllm-0.33.0".into()]);
    let r = rt().block_on(run(c)).unwrap();
    assert_eq!(r.results.len(), 40);
    assert!(r.ok(), "{:#?}", failures(&r));
    assert!(
        r.results.iter().all(|x| x.status == Status::Pass && x.testee_revision.as_deref() == Some("vllm-0.33.0")),
        "{:#?}",
        r.results
    );

    // Only 0.32.0: the 0.33.0 trace built on layout caching cannot be replayed to a 0.32.0 peer; the others run.
    let mut c = cfg(TesteeSpec::Builtin, Some("vllm-0.33.0"), vec![]);
    c.speaks = Some(vec!["vllm-0.32.0".into()]);
    let r = rt().block_on(run(c)).unwrap();
    assert!(r.ok(), "{:#?}", failures(&r));
    let skipped: Vec<&str> = r.results.iter().filter(|x| x.status == Status::Skip).map(|x| x.id.as_str()).collect();
    assert_eq!(
        skipped,
        ["vllm-0.33.0/h1_layout_reuse_and_miss/decoder", "vllm-0.33.0/h1_layout_reuse_and_miss/prefiller"]
    );
    for x in r.results.iter().filter(|x| x.status == Status::Skip) {
        assert!(x.reason.as_deref().unwrap_or("").contains("behaviour.layout_caching"), "{x:?}");
    }
    assert_eq!(
        r.results
            .iter()
            .filter(|x| x.status == Status::Pass && x.testee_revision.as_deref() == Some("vllm-0.32.0"))
            .count(),
        41
    );
}

/// A cross-version case is a real case: a faulty testee fails it.
#[test]
fn cross_version_cases_catch_faults() {
    for (fault, role) in
        [("wrong_status", Role::Prefiller), ("extra_field", Role::Prefiller), ("wrong_id", Role::Decoder)]
    {
        let mut c =
            cfg(TesteeSpec::BuiltinWithFaults(vec![fault.into()]), Some("vllm-0.32.0/a_single_success"), vec![role]);
        c.speaks = Some(vec!["vllm-0.33.0".into()]);
        let r = rt().block_on(run(c)).unwrap();
        assert_eq!(r.results[0].testee_revision.as_deref(), Some("vllm-0.33.0"));
        assert_eq!(r.results[0].status, Status::Fail, "{fault} went unnoticed: {:?}", r.results[0]);
    }
}

/// A bundled trace with its transfer-engine calls and outcomes taken out and declared `unobserved`, as a tap
/// writes it.
fn unobserved_copy(tag: &str, declare: bool) -> PathBuf {
    let src = here().join("traces/vllm-0.33.0/a_single_success.jsonl");
    let text = std::fs::read_to_string(src).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut h: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    h["observed_outcome"] = serde_json::json!({});
    h["transfer_engine_calls"] = serde_json::json!([]);
    if declare {
        h["unobserved"] = serde_json::json!(["transfer_engine_calls", "observed_outcome"]);
    }
    lines[0] = h.to_string();
    let dir = std::env::temp_dir().join(format!("mooncake-unobserved-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("a_single_success.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

#[test]
fn checks_of_what_a_recording_did_not_observe_are_not_applicable_and_counted() {
    let p = unobserved_copy("declared", true);
    let r = rt().block_on(run(RunConfig::paths(std::slice::from_ref(&p), TesteeSpec::Builtin).unwrap())).unwrap();
    assert!(r.ok(), "{:#?}", failures(&r));
    let na = |role: &str| -> Vec<&str> {
        r.results
            .iter()
            .find(|c| c.role.as_str() == role)
            .unwrap()
            .not_applicable
            .iter()
            .map(|n| n.check.as_str())
            .collect()
    };
    assert_eq!(na("prefiller"), ["TE-CALLS", "P-FINISHED-SENDING"]);
    assert_eq!(na("decoder"), ["D-OUTCOME"]);
    assert!(na("bootstrap").is_empty());
    assert_eq!(r.not_applicable(), 3);
    let mut text = vec![];
    mooncake_conformance::report::write_run_text(&mut text, &r).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("3 checks not applicable"), "{text}");
    assert!(text.contains("not applicable: TE-CALLS, P-FINISHED-SENDING"), "{text}");
    assert_eq!(mooncake_conformance::report::run_json(&r)["summary"]["not_applicable"], 3);
    // The same empty values without the declaration are a recording that saw nothing: those checks fail.
    let q = unobserved_copy("undeclared", false);
    let r = rt().block_on(run(RunConfig::paths(std::slice::from_ref(&q), TesteeSpec::Builtin).unwrap())).unwrap();
    let checks: Vec<&str> = r.results.iter().flat_map(|c| c.findings.iter().map(|f| f.check.as_str())).collect();
    assert!(checks.contains(&"TE-CALLS") && checks.contains(&"D-OUTCOME"), "{checks:?}");
    assert_eq!(r.not_applicable(), 0);
    for f in [p, q] {
        let _ = std::fs::remove_dir_all(f.parent().unwrap());
    }
}

#[test]
fn a_testee_slow_to_start_finds_the_transfers_of_its_case_ready() {
    // A testee that takes longer to start than the scenarios' 2 s abort timeout (Mooncake's own connector imports
    // torch and vLLM first): the runner arms the scenario's transfers once every worker of the case is up, as the
    // recorder does, so neither the runner's prefillers (decoder cases) nor the testee prefillers started first
    // (two-rank prefiller cases) have expired them when the pull comes. Both generations.
    let peer = env!("CARGO_BIN_EXE_mooncake-conformance").replace("mooncake-conformance", "mooncake-peer");
    if !std::path::Path::new(&peer).exists() {
        let st = Command::new(env!("CARGO")).args(["build", "-q", "-p", "mooncake-reference"]).status().unwrap();
        assert!(st.success());
    }
    let cases = "0.13.0/a_single_success/decoder,0.13.0/d0_gen1_homogeneous_tp2/prefiller,\
                 vllm-0.33.0/a_single_success/decoder,vllm-0.33.0/d2_hetero_tp_d1_p2/prefiller";
    let testee = format!("sh -c 'sleep 2.5; exec {peer} --log error testee'");
    let out = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .args(["run", "--format", "json", "--jobs", "4", "--case", cases, "--testee", &testee])
        .output()
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(out.status.code(), Some(0), "{}", serde_json::to_string_pretty(&v["cases"]).unwrap());
    assert_eq!(v["summary"]["passed"], 4);
}
