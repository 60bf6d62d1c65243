//! Differential fuzzing against msgspec (the pinned version in the test venv), the short run of the test
//! suite: about 40,000 mutated inputs over every revision and message, all of which must get msgspec's
//! verdict, value, re-encoding and error text. The long run is the same test with more cases
//! (`FUZZING.md`): `MOONCAKE_FUZZ_DIFF_CASES=1000000 MOONCAKE_FUZZ_CORPUS=fuzz/corpus cargo test --workspace
//! --test suite differential:: -- --nocapture` (`--workspace` reuses the test suite's build).

use mooncake_fuzz_harness::diff;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn mutated_inputs_agree_with_msgspec() {
    let cases = env_num("MOONCAKE_FUZZ_DIFF_CASES", 40_000) as usize;
    let seed = env_num("MOONCAKE_FUZZ_DIFF_SEED", 20261201);
    let dirs = diff::corpus_dirs_from_env();
    let start = std::time::Instant::now();
    let report = diff::run(cases, seed, &dirs).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.msgspec_version, "0.23.0", "the oracle must run the pinned msgspec");
    for l in &report.lanes {
        println!(
            "{} {}: {} cases ({} accepted, {} rejected), corpus {} -> {}, {} features, {} disagreements",
            l.revision,
            l.message,
            l.cases,
            l.accepted,
            l.rejected,
            l.corpus_start,
            l.corpus_end,
            l.features,
            l.disagreements.len()
        );
    }
    let total = report.cases();
    let accepted: usize = report.lanes.iter().map(|l| l.accepted).sum();
    let grown = report.lanes.iter().filter(|l| l.corpus_end > l.corpus_start).count();
    println!(
        "differential fuzzing: {total} cases against msgspec {} in {:.1}s ({accepted} accepted), seed {seed}, corpus grew in {grown} of {} lanes",
        report.msgspec_version,
        start.elapsed().as_secs_f64(),
        report.lanes.len()
    );
    let d = report.disagreements();
    assert!(d.is_empty(), "{} disagreements with msgspec, first:\n{}", d.len(), d[..d.len().min(10)].join("\n"));
    assert!(total >= cases * 9 / 10, "{total} cases run of {cases}");
    assert!(
        accepted > total / 10 && accepted < total * 9 / 10,
        "the mutants must exercise both verdicts: {accepted} of {total} accepted"
    );
    assert!(grown * 2 >= report.lanes.len(), "the feedback must grow the corpus in most lanes");
}
