//! Every fuzz target's body, as the normal test suite runs it (stable Rust, no cargo-fuzz): over the committed
//! seeds (`fuzz/seeds/<target>`), over every seed the generator builds from the vectors and traces, and over
//! a few thousand inputs derived from them — byte-level and MessagePack-aware mutations for the format
//! targets, random operation streams for the structured ones. Any broken invariant panics the test.
//! Every crash the fuzzers found is replayed first (`fuzz/regressions/<target>/`), then every input of the
//! committed minimised corpus (`fuzz/corpus-min/<target>.tar.gz`, unpacked with `tar`), so a change that
//! breaks an invariant on something a long fuzzing run reached fails here.
//! `MOONCAKE_FUZZ_SMOKE_INPUTS` overrides the number of derived inputs per target.

use mooncake_fuzz_harness::targets::{self, Target};
use mooncake_fuzz_harness::{mutate, seeds};
use mooncake_wire::codec::testgen::Rng;

fn derived_inputs() -> usize {
    std::env::var("MOONCAKE_FUZZ_SMOKE_INPUTS").ok().and_then(|v| v.parse().ok()).unwrap_or(3000)
}

fn committed(target: &str) -> Vec<Vec<u8>> {
    let dir = seeds::repo_root().join("fuzz/seeds").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|f| f.path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// The inputs of crashes the fuzzers found (`fuzz/regressions/<target>/`, one file per crash, named after it;
/// FUZZING.md says what each was and how it was fixed). Kept apart from the seeds, which are regenerated.
fn regressions(target: &str) -> Vec<Vec<u8>> {
    let dir = seeds::repo_root().join("fuzz/regressions").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir).into_iter().flatten().flatten().map(|f| f.path()).collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// The inputs of the committed minimised corpus of `target` (none when it has no archive).
fn corpus_min(target: &str) -> Vec<Vec<u8>> {
    let archive = seeds::repo_root().join("fuzz/corpus-min").join(format!("{target}.tar.gz"));
    if !archive.exists() {
        return vec![];
    }
    let dir = std::env::temp_dir().join(format!("mooncake-corpus-min-{target}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let st = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&dir)
        .status()
        .unwrap_or_else(|e| panic!("tar (to unpack {}): {e}", archive.display()));
    assert!(st.success(), "tar could not unpack {}", archive.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|f| f.path()).collect();
    files.sort();
    let inputs: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!inputs.is_empty(), "{} holds no inputs", archive.display());
    inputs
}

fn smoke(t: &Target, seed: u64) {
    for input in regressions(t.name) {
        (t.run)(&input);
    }
    let corpus = corpus_min(t.name);
    for input in &corpus {
        (t.run)(input);
    }
    if !corpus.is_empty() {
        println!("{}: {} inputs of fuzz/corpus-min, every invariant held", t.name, corpus.len());
    }
    let mut all = committed(t.name);
    assert!(!all.is_empty(), "{}: no committed seeds (run scripts/fuzz-seeds.sh --update)", t.name);
    all.extend(seeds::seeds(t.name));
    for s in &all {
        (t.run)(s);
    }
    let dict = seeds::dicts().into_iter().find(|(f, _, _)| *f == t.dict).map(|(_, d, _)| d).unwrap_or_default();
    let mut rng = Rng::new(seed);
    let n = derived_inputs();
    for _ in 0..n {
        let input = if t.structured {
            let most = if rng.chance(20) { 4096 } else { 512 };
            let len = 16 + rng.below(most);
            (0..len).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>()
        } else {
            let parent = rng.pick(&all).clone();
            mutate::mutate(&mut rng, &parent, &all, &dict, 1 << 16)
        };
        (t.run)(&input);
    }
    println!("{}: {} seeds and {n} derived inputs, every invariant held", t.name, all.len());
}

#[test]
fn decode_spec() {
    smoke(targets::by_name("decode_spec").unwrap(), 1);
}
#[test]
fn decode_typed() {
    smoke(targets::by_name("decode_typed").unwrap(), 2);
}
#[test]
fn transfer_engine() {
    smoke(targets::by_name("transfer_engine").unwrap(), 8);
}
#[test]
fn tap_relay() {
    smoke(targets::by_name("tap_relay").unwrap(), 10);
}
#[test]
fn zmtp_server() {
    smoke(targets::by_name("zmtp_server").unwrap(), 9);
}
#[test]
fn trace() {
    smoke(targets::by_name("trace").unwrap(), 3);
}
#[test]
fn bootstrap() {
    smoke(targets::by_name("bootstrap").unwrap(), 4);
}
#[test]
fn store_keys() {
    smoke(targets::by_name("store_keys").unwrap(), 5);
}
#[test]
fn prefiller() {
    smoke(targets::by_name("prefiller").unwrap(), 6);
}
#[test]
fn decoder() {
    smoke(targets::by_name("decoder").unwrap(), 7);
}
#[test]
fn cross() {
    smoke(targets::by_name("cross").unwrap(), 8);
    let c = targets::cross::counts();
    println!(
        "cross: {} inputs, {} at pairs diff finds compatible; {} clean pulls checked to work at once ({} requests)",
        c.inputs, c.works_pairs, c.clean_pulls_checked, c.requests_finished
    );
    // Random streams seldom make a clean pull (libFuzzer's coverage finds them); the strong check itself is
    // proven by `targets::cross::tests::a_ready_transfer_pulled_works_at_every_compatible_pair`.
}

/// Every target of `fuzz/Cargo.toml` has a body here and committed seeds, and the committed dictionary is
/// what the generator writes from the current spec.
#[test]
fn cargo_fuzz_targets_match_the_bodies() {
    let root = seeds::repo_root();
    let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).unwrap();
    let bins: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "mooncake-wire-fuzz")
        .collect();
    let bodies: Vec<&str> = targets::ALL.iter().map(|t| t.name).collect();
    assert_eq!(bins, bodies, "fuzz/Cargo.toml [[bin]] names vs targets::ALL");
    for t in targets::ALL {
        let wrapper = std::fs::read_to_string(root.join(format!("fuzz/fuzz_targets/{}.rs", t.name))).unwrap();
        assert!(wrapper.contains("fuzz_target!"), "{}", t.name);
    }
    for (file, tokens, title) in seeds::dicts() {
        let committed = std::fs::read_to_string(root.join("fuzz/dict").join(file)).unwrap_or_default();
        assert!(
            committed == seeds::dict_file(&tokens, title),
            "fuzz/dict/{file} is stale: run scripts/fuzz-seeds.sh --update"
        );
    }
    for t in targets::ALL {
        assert!(seeds::dicts().iter().any(|(f, _, _)| *f == t.dict), "{}: no dictionary {}", t.name, t.dict);
    }
}
