//! The cross-revision target's strong check runs only at pairs its prediction (from `diff`) finds compatible;
//! this holds that prediction to the observed compatibility matrix (`schema/push/compat-matrix.md`, which
//! `./scripts/test.sh` checks against the reference peers): every pair predicted to work is a cell that works
//! (`✓`) or the same revision (`=`).

use mooncake_fuzz_harness::seeds;
use mooncake_fuzz_harness::targets::cross::{prediction, revisions, Prediction};

#[test]
fn pairs_predicted_to_work_are_cells_that_work() {
    let text = std::fs::read_to_string(seeds::repo_root().join("schema/push/compat-matrix.md")).unwrap();
    let header = text.lines().find(|l| l.starts_with("| decoder ↓ / prefiller →")).expect("the matrix table");
    let cols: Vec<String> = header.split('|').skip(2).map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
    let mut cells = std::collections::HashMap::new();
    for line in text.lines().filter(|l| l.starts_with("| **")) {
        let parts: Vec<&str> = line.split('|').map(str::trim).collect();
        let row = parts[1].trim_matches('*').to_string();
        for (c, cell) in cols.iter().zip(&parts[2..]) {
            cells.insert((row.clone(), c.clone()), cell.to_string());
        }
    }
    let revs = revisions();
    let short = |i: usize| revs[i].revision.trim_start_matches("vllm-").to_string();
    let (mut works, mut cross) = (0, 0);
    for d in 0..revs.len() {
        for p in 0..revs.len() {
            let cell = cells
                .get(&(short(d), short(p)))
                .unwrap_or_else(|| panic!("no matrix cell for decoder {} × prefiller {}", short(d), short(p)));
            if *prediction(d, p) == Prediction::Works {
                works += 1;
                if d != p {
                    cross += 1;
                }
                assert!(
                    cell.starts_with('✓') || cell == "=",
                    "decoder {} × prefiller {}: diff finds no breaking row, the matrix shows {cell}",
                    short(d),
                    short(p)
                );
            }
        }
    }
    println!(
        "cross prediction: {works} of {} pairs predicted to work ({cross} of them cross-revision)",
        revs.len() * revs.len()
    );
    assert!(works >= revs.len(), "the same-revision pairs must be predicted to work");
}
