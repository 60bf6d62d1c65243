//! The proof on history (`schema/push/extract-proof.md`): `extract` on each cached vLLM wheel gives the wire
//! fingerprint (structs and enums) of the bundled revision covering its release, and the committed table is what
//! `mooncake-conformance extract --proof` prints. Runs over the wheels in the cache (`$MOONCAKE_WHEEL_CACHE`,
//! default `~/.cache/mooncake-wire/wheels`; nothing is downloaded); with none it prints `SKIPPED`.

use std::path::PathBuf;
use std::process::Command;

use mooncake_conformance::extract::{self, proof};

fn committed() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schema/push/extract-proof.md")
}

/// The table's rows, keyed by release.
fn rows(md: &str) -> Vec<(String, String)> {
    md.lines()
        .filter(|l| l.starts_with("| 0.") || l.starts_with("| 1."))
        .map(|l| (l.split('|').nth(1).unwrap().trim().to_string(), l.to_string()))
        .collect()
}

#[test]
fn cached_wheels_give_the_bundled_fingerprints_and_the_committed_rows() {
    let Some(_) = crate::in_repository(
        "schema/push/extract-proof.md",
        "extract_proof::cached_wheels_give_the_bundled_fingerprints_and_the_committed_rows",
    ) else {
        return;
    };
    let table = std::fs::read_to_string(committed()).expect("schema/push/extract-proof.md is committed");
    let want = rows(&table);
    assert!(want.len() >= 12, "the committed table has a row per revision: {}", want.len());
    let cache = proof::cache_dir();
    let wheels: Vec<PathBuf> = proof::cached_wheels(&cache)
        .into_iter()
        .filter(|w| {
            let n = w.file_name().unwrap().to_string_lossy().to_string();
            want.iter().any(|(r, _)| n.starts_with(&format!("vllm-{r}-")))
        })
        .collect();
    if wheels.is_empty() {
        println!(
            "SKIPPED: extraction proof over released wheels — none of the table's {} wheels in {} (pip download --no-deps vllm==X -d that directory)",
            want.len(),
            cache.display()
        );
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .args(["extract", "--proof", "--python", &extract::default_python()])
        .args(&wheels)
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "a wheel disagrees:\n{md}\n{}", String::from_utf8_lossy(&out.stderr));
    let got = rows(&md);
    assert_eq!(got.len(), wheels.len());
    for (release, line) in &got {
        let committed = want.iter().find(|(r, _)| r == release).map(|(_, l)| l);
        assert_eq!(committed, Some(line), "row {release} differs from schema/push/extract-proof.md (regenerate: mooncake-conformance extract --proof --out schema/push/extract-proof.md)");
    }
    if got.len() == want.len() {
        assert_eq!(md, table, "schema/push/extract-proof.md is stale");
    } else {
        println!("extraction proof: {} of the table's {} wheels cached and checked", got.len(), want.len());
    }
}
