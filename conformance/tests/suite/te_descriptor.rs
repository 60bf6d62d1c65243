//! `TE-HANDSHAKE` and `TE-DESCRIPTOR`: the runner's transfer engine (it plays the prefiller of a decoder case)
//! against a reference peer whose transfer-engine target answers the handshake with one deliberate variation
//! (`te_*` faults, `reference-impl/src/faults_te.rs`), each measured against the real engine.

use std::time::Duration;

use mooncake_conformance::play::Role;
use mooncake_conformance::run::{run, RunConfig};
use mooncake_conformance::testee::TesteeSpec;

/// Each variation of the decoder's transfer-engine handshake answer measured against the real engine
/// (`conformance/TESTEE.md`, "The transfer-engine segment descriptor") fails the case with a finding that names
/// the field or step, not only the outcome it causes.
#[test]
fn the_runner_catches_each_fault_of_a_decoders_transfer_engine() {
    let case = "vllm-0.33.0/a_single_success";
    let mut misses = vec![];
    for (fault, want, names) in [
        ("te_buffer_short", "TE-DESCRIPTOR", "does not cover the write"),
        ("te_buffer_missing", "TE-DESCRIPTOR", "(1 advertised)"),
        ("te_buffer_corrupt", "TE-DESCRIPTOR", "empty name, address 0 or length 0"),
        ("te_name_missing", "TE-DESCRIPTOR", "`name` is missing"),
        ("te_name_wrong", "TE-DESCRIPTOR", "`name` is \"127.0.0.1:1\""),
        ("te_rdma_server_name_missing", "TE-DESCRIPTOR", "`rdma_server_name` is missing"),
        ("te_tcp_proto_version_missing", "TE-DESCRIPTOR", "`tcp_proto_version` is missing"),
        ("te_tcp_proto_version_3", "TE-DESCRIPTOR", "`tcp_proto_version` is 3"),
        ("te_answer_type", "TE-HANDSHAKE", "Connection frame"),
        ("te_answer_not_json", "TE-HANDSHAKE", "not JSON"),
    ] {
        if let Some(miss) = missed(fault, case, want, names) {
            misses.push(miss);
        }
    }
    // Generation 1 plays its own prefiller through the same engine.
    misses.extend(missed("te_buffer_short", "vllm-0.13.0..0.15.1/a_single_success", "TE-DESCRIPTOR", "does not cover"));
    assert!(misses.is_empty(), "variations the runner did not report as measured:\n{}", misses.join("\n"));
}

/// Why the decoder case `case` against a peer with `fault` does not fail with a `want` finding that says
/// `names` and what the real engine does; `None` when it does.
fn missed(fault: &str, case: &str, want: &str, names: &str) -> Option<String> {
    let (statuses, details) = te_findings(fault, case, want);
    let failed = !statuses.is_empty() && statuses.iter().all(|(_, s)| *s == "fail");
    let named = details.iter().any(|d| d.contains(names)) && details.iter().all(|d| d.contains("real engine"));
    println!("{case} with {fault}: {statuses:?}, {want}: {details:?}");
    (!failed || !named).then(|| format!("{fault} in {case}: cases {statuses:?}; {want} findings {details:?}"))
}

/// The statuses of the decoder cases `case` against a peer with `fault`, and the details of their `want`
/// findings.
fn te_findings(fault: &str, case: &str, want: &str) -> (Vec<(String, &'static str)>, Vec<String>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces");
    let mut c = RunConfig::paths(&[dir], TesteeSpec::BuiltinWithFaults(vec![fault.into()])).unwrap();
    (c.roles, c.cases, c.slack) = (vec![Role::Decoder], vec![case.to_string()], Duration::from_secs(2));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let r = rt.block_on(run(c)).unwrap();
    let statuses = r.results.iter().map(|c| (c.id.clone(), c.status.word())).collect();
    let details =
        r.results.iter().flat_map(|x| &x.findings).filter(|f| f.check.as_str() == want).map(|f| f.detail.clone());
    (statuses, details.collect())
}
