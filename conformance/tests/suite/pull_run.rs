//! `run` on the pull family (`conformance/traces-pull/`, vllm-ascend): every recorded case against the reference
//! peer, what is skipped and why, and a pull trace whose scenario the scenarios file does not know.
//! (Each check failing through a faulty peer: `mutation.rs`, the `vllm-ascend-…` rows.)

use std::path::PathBuf;
use std::time::Duration;

use mooncake_conformance::play::Status;
use mooncake_conformance::run::{run, RunConfig};
use mooncake_conformance::testee::TesteeSpec;

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run_pull(paths: &[PathBuf]) -> mooncake_conformance::run::RunReport {
    let mut c = RunConfig::paths(paths, TesteeSpec::Builtin).unwrap();
    c.slack = Duration::from_secs(2);
    c.jobs = 8;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(run(c)).unwrap()
}

/// Both roles of every recording of a released vllm-ascend pass against the reference peer; the synthetic
/// traces of the unreleased generation 2 are skipped, saying the peer does not speak that revision.
#[test]
fn every_recorded_pull_case_passes_against_the_reference_peer() {
    let r = run_pull(&[here().join("traces-pull")]);
    let spec = mooncake_wire::spec::Spec::builtin();
    for rev in &spec.pull().revisions {
        let of: Vec<_> = r.results.iter().filter(|c| c.revision == rev.revision).collect();
        assert!(!of.is_empty(), "no case of {}", rev.revision);
        for c in &of {
            if rev.generation == 1 {
                assert_eq!(c.status, Status::Pass, "{}: {:?} {:?}", c.id, c.findings, c.notes);
            } else {
                assert_eq!(c.status, Status::Skip, "{}", c.id);
                let reason = c.reason.as_deref().unwrap_or_default();
                assert!(reason.contains(&format!("does not speak {}", rev.revision)), "{reason}");
            }
        }
        if rev.generation == 1 {
            // Three scenarios, each a prefiller and a decoder case.
            assert_eq!(of.len(), 6, "{}", rev.revision);
        }
    }
    assert!(r.ok());
}

/// A pull recording whose scenario has no `[pull_scenario]` entry cannot be played: its cases fail with
/// `CASE-SETUP` naming the entry to add, before any testee starts.
#[test]
fn a_pull_trace_of_an_unknown_scenario_names_the_entry_to_add() {
    let src = here().join("traces-pull/vllm-ascend-0.18.0/a_meta_then_done.jsonl");
    let text = std::fs::read_to_string(src).unwrap();
    let renamed = text.replacen("\"scenario\": \"a_meta_then_done\"", "\"scenario\": \"z_renamed\"", 1);
    assert_ne!(renamed, text);
    let dir = std::env::temp_dir().join(format!("mooncake-conformance-pull-renamed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("z_renamed.jsonl");
    std::fs::write(&path, renamed).unwrap();
    let r = run_pull(&[path]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(r.results.len(), 2);
    for c in &r.results {
        assert_eq!(c.status, Status::Fail, "{}", c.id);
        let f = c.findings.iter().find(|f| f.check.as_str() == "CASE-SETUP").expect("a CASE-SETUP finding");
        assert!(f.detail.contains("[pull_scenario.z_renamed]"), "{}", f.detail);
    }
}
