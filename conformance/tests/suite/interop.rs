//! Two independent implementations against each other over 127.0.0.1: the Rust reference peer and the Python
//! test peer (`tests/peer/`, pyzmq + msgspec from the pinned venv), every recorded scenario, both directions;
//! and every conformance case against the Python peer as the testee.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use mooncake_conformance::play::{as_prefiller, cases_of, PlayOptions, Role, Status};
use mooncake_conformance::run::{run, RunConfig};
use mooncake_conformance::testee::TesteeSpec;
use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::Trace;

/// The Python test peer (`tests/peer/`), `None` (a counted skip) from the packaged crate.
fn python_peer() -> Option<TesteeSpec> {
    let peer = crate::in_repository("tests/peer/mooncake_test_peer.py", "the Python test peer's cases")?;
    let py = mooncake_trace::oracle::python().unwrap_or_else(|e| panic!("{e}"));
    Some(TesteeSpec::Command(format!("{} {}", py.display(), peer.display())))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn every_case_passes_against_the_python_peer() {
    // The revisions the Python peer declares (its hello): vllm-0.32.0 and vllm-0.33.0.
    let dirs = [crate::here().join("traces/vllm-0.32.0"), crate::here().join("traces/vllm-0.33.0")];
    let Some(peer) = python_peer() else { return };
    let cfg = RunConfig::paths(&dirs, peer).unwrap();
    let r = rt().block_on(run(cfg)).unwrap();
    let failed: Vec<String> =
        r.results.iter().filter(|c| c.status == Status::Fail).map(|c| format!("{}: {:?}", c.id, c.findings)).collect();
    assert_eq!(r.results.len(), dirs.iter().map(|d| common::expected_cases(d)).sum::<usize>());
    assert!(r.results.iter().all(|c| c.status == Status::Pass), "{failed:#?}");
    assert!(r.ok(), "{failed:#?}");
}

#[test]
fn rust_and_python_interoperate_in_both_directions() {
    let opts = |testee: TesteeSpec| {
        PlayOptions::new(testee, mooncake_conformance::bundled::scenarios(), Duration::from_secs(3))
    };
    let Some(peer) = python_peer() else { return };
    let mut ran = 0;
    let rt = rt();
    for f in mooncake_trace::jsonl::expand(&[crate::here().join("traces/vllm-0.33.0")]).unwrap() {
        let model = Arc::new(Conversation::new(Trace::load(&f).unwrap()).unwrap());
        for case in cases_of(model).into_iter().filter(|c| c.role == Role::Decoder) {
            // Python prefiller serving the Rust decoder, and the Rust prefiller serving the Python decoder.
            for (p, d, label) in [
                (peer.clone(), TesteeSpec::Builtin, "python P ↔ rust D"),
                (TesteeSpec::Builtin, peer.clone(), "rust P ↔ python D"),
            ] {
                let findings = rt
                    .block_on(as_prefiller::play_pair(&case, &opts(d), &p))
                    .unwrap_or_else(|e| panic!("{} ({label}): {e}", case.id));
                assert!(findings.is_empty(), "{} ({label}): {findings:#?}", case.id);
                ran += 1;
            }
        }
    }
    assert_eq!(
        ran,
        2 * 14,
        "fourteen 0.33.0 scenarios with a decoder (k_late_pull_after_expiry and l1-l3 too), two directions"
    );
}
