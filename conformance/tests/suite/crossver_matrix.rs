//! Cross-version cases of `run` against the observed compatibility matrix (`schema/push/compat-matrix.md`, kept
//! fresh by `matrix --check` in `scripts/test.sh`). For every ordered pair of revisions the matrix says works:
//! where the spec calls the pair a silent break (`⚠`, KV layouts that differ) no cross-version case is offered;
//! elsewhere the single-transfer case is offered in both roles (a testee prefiller at the column's revision on
//! the row's trace, a testee decoder at the row's revision on the column's trace) and passes against the
//! reference peer. For every pair that breaks, the scenarios the matrix saw break are never offered in either
//! role: a replay would show the testee a conversation the real pair never has.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use mooncake_conformance::crossver::choose;
use mooncake_conformance::play::{Role, Status};
use mooncake_conformance::run::{run, RunConfig};
use mooncake_conformance::testee::TesteeSpec;
use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::Trace;

struct Cell {
    decoder: String,
    prefiller: String,
    works: bool,
    silent: bool,
    /// The first letters of the scenarios that break (`✗ a b …`).
    broken: Vec<String>,
}

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The committed matrix's cells, off the diagonal.
fn cells() -> Vec<Cell> {
    let text = std::fs::read_to_string(here().join("../schema/push/compat-matrix.md")).unwrap();
    let split =
        |l: &str| -> Vec<String> { l.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect() };
    let header = text.lines().find(|l| l.starts_with("| decoder")).expect("the matrix table");
    let cols: Vec<String> = split(header)[1..].iter().map(|c| format!("vllm-{c}")).collect();
    let mut out = vec![];
    for l in text.lines().filter(|l| l.starts_with("| **")) {
        let cs = split(l);
        let decoder = format!("vllm-{}", cs[0].trim_matches('*'));
        for (prefiller, c) in cols.iter().zip(&cs[1..]) {
            if c == "=" {
                continue;
            }
            let broken = c
                .strip_prefix('✗')
                .map(|r| r.split_whitespace().filter(|w| *w != "⚠").map(String::from).collect())
                .unwrap_or_default();
            out.push(Cell {
                decoder: decoder.clone(),
                prefiller: prefiller.clone(),
                works: c.starts_with('✓'),
                silent: c.contains('⚠'),
                broken,
            });
        }
    }
    assert_eq!(out.len(), 156, "13 revisions, every ordered pair");
    out
}

/// Every bundled push trace, by revision.
fn traces() -> BTreeMap<String, Vec<Conversation>> {
    let mut out: BTreeMap<String, Vec<Conversation>> = BTreeMap::new();
    let jsonl = |p: &std::path::Path| mooncake_trace::walk::has_extension(p, "jsonl");
    for f in mooncake_trace::walk::files(&here().join("traces"), 1, &jsonl).unwrap_or_else(|e| panic!("{e}")) {
        let m = Conversation::new(Trace::load(&f).unwrap()).unwrap();
        out.entry(m.revision.revision.clone()).or_default().push(m);
    }
    out
}

/// The scenario's letter as the matrix writes it (`d1_hetero…` → `d1`).
fn letter(scenario: &str) -> &str {
    scenario.split('_').next().unwrap_or(scenario)
}

#[test]
fn cross_version_cases_follow_the_observed_matrix() {
    let Some(_) = crate::in_repository(
        "schema/push/compat-matrix.md",
        "crossver_matrix::cross_version_cases_follow_the_observed_matrix",
    ) else {
        return;
    };
    let traces = traces();
    let mut to_run: Vec<(String, String, Role)> = vec![];
    let (mut offered, mut refused) = (0, 0);
    let cells = cells();
    for c in &cells {
        // (trace revision, testee revision, testee role) of the pair's two kinds of case.
        for (trace_rev, testee_rev, role) in
            [(&c.decoder, &c.prefiller, Role::Prefiller), (&c.prefiller, &c.decoder, Role::Decoder)]
        {
            for m in &traces[trace_rev] {
                let scenario = m.trace.header.scenario.clone();
                if scenario.starts_with('i') {
                    continue; // bootstrap-only: not a matrix scenario
                }
                let eligible = choose(m, role, std::slice::from_ref(testee_rev));
                let at = format!("{scenario} of {trace_rev} with a {} testee at {testee_rev}", role.as_str());
                if c.works && c.silent {
                    assert!(eligible.is_err(), "{at}: offered across a silent layout break");
                } else if c.works && scenario == "a_single_success" {
                    assert!(eligible.is_ok(), "{at}: the matrix says the pair works, but: {}", eligible.err().unwrap());
                    to_run.push((trace_rev.clone(), testee_rev.clone(), role));
                } else if c.broken.iter().any(|b| b == letter(&scenario)) {
                    assert!(eligible.is_err(), "{at}: offered although the matrix saw it break");
                }
                match eligible {
                    Ok(_) => offered += 1,
                    Err(_) => refused += 1,
                }
            }
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for (trace_rev, testee_rev, role) in &to_run {
        let mut cfg = RunConfig::paths(&[here().join("traces")], TesteeSpec::Builtin).unwrap();
        cfg.cases = vec![format!("{trace_rev}/a_single_success")];
        cfg.roles = vec![*role];
        cfg.speaks = Some(vec![testee_rev.clone()]);
        cfg.slack = Duration::from_secs(2);
        let r = rt.block_on(run(cfg)).unwrap();
        assert!(!r.results.is_empty());
        for x in &r.results {
            assert_eq!(x.status, Status::Pass, "{} with a testee at {testee_rev}: {:?}", x.id, x.findings);
            assert_eq!(x.testee_revision.as_deref(), Some(testee_rev.as_str()));
        }
    }
    println!("cross-version: {offered} cases offered, {refused} refused over the matrix's {} pairs; {} single-transfer cases run and passed", cells.len(), to_run.len());
}

/// 0.34.0 added a message, not a field: every 0.33.0 recording runs against a 0.34.0 testee and every 0.34.0
/// one against a 0.33.0 testee, except the scenarios built on leases or the expired-pull reply, which name the
/// behaviour they rely on. (The added message's row once refused them all, bootstrap cases included.)
#[test]
fn recordings_of_0_33_and_0_34_cross_except_what_leases_change() {
    let traces = traces();
    for (trace_rev, testee_rev) in [("vllm-0.33.0", "vllm-0.34.0"), ("vllm-0.34.0", "vllm-0.33.0")] {
        for m in &traces[trace_rev] {
            let scenario = m.trace.header.scenario.as_str();
            let timed = scenario.starts_with('j') || scenario.starts_with('k');
            for role in [Role::Prefiller, Role::Decoder, Role::Bootstrap] {
                let r = choose(m, role, &[testee_rev.to_string()]);
                let at = format!("{scenario} of {trace_rev} as a {} at {testee_rev}", role.as_str());
                match (timed && role != Role::Bootstrap, r) {
                    (false, Ok(p)) => assert_eq!(p.testee.revision, testee_rev, "{at}"),
                    (false, Err(e)) => panic!("{at}: refused: {e}"),
                    (true, Ok(_)) => panic!("{at}: offered, but it relies on a lease or the expired-pull reply"),
                    (true, Err(e)) => {
                        let why = e.to_string();
                        assert!(
                            ["kv_leases", "expired_pull", "lease_renewal"].iter().any(|k| why.contains(k)),
                            "{at}: {why}"
                        );
                    }
                }
            }
        }
    }
}
