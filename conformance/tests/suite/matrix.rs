//! The compatibility matrix on a few revisions (the whole matrix runs in `scripts/test.sh` with `--check`):
//! observation and `diff` agree, and the cells read what the spec says about those pairs.

use std::sync::Arc;
use std::time::Duration;

use mooncake_conformance::matrix::{build, load_traces, MatrixConfig};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn observed_cells_agree_with_diff() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("traces");
    let inputs = mooncake_trace::jsonl::Input::files(&[dir]).unwrap();
    let traces = load_traces(&inputs).unwrap();
    let only: Vec<String> =
        ["vllm-0.24.0", "vllm-0.25.0..0.25.1", "vllm-0.32.0", "vllm-0.33.0"].iter().map(|s| s.to_string()).collect();
    let cfg = MatrixConfig {
        scenarios: Arc::new(mooncake_conformance::bundled::scenarios()),
        abort: Duration::from_millis(400),
        jobs: 8,
        only,
        progress: None,
    };
    let m = rt().block_on(build(&traces, &cfg));
    assert_eq!(m.disagreements().len(), 0, "{}", mooncake_conformance::matrix::render::markdown(&m));
    // 0.32.0 and 0.33.0 interoperate both ways (layout caching only starts after an echo of layout_id).
    assert!(m.cell("vllm-0.32.0", "vllm-0.33.0").unwrap().works());
    assert!(m.cell("vllm-0.33.0", "vllm-0.32.0").unwrap().works());
    // A 0.24.0 decoder does not send the kv_block_lens a 0.25.0 prefiller requires: every pull fails...
    let c = m.cell("vllm-0.24.0", "vllm-0.25.0..0.25.1").unwrap();
    assert!(c.broken().contains(&"a_single_success"), "{c:?}");
    assert!(c
        .scenarios
        .iter()
        .find(|s| s.scenario == "a_single_success")
        .unwrap()
        .predicted
        .breaks
        .iter()
        .any(|b| b.contains("kv_block_lens")));
    // ...while a 0.25.0 decoder's extra fields are ignored by a 0.24.0 prefiller.
    assert!(m.cell("vllm-0.25.0..0.25.1", "vllm-0.24.0").unwrap().works());
    // Every pair ran every scenario both revisions recorded, except the bootstrap-only one.
    let c = m.cell("vllm-0.32.0", "vllm-0.33.0").unwrap();
    assert_eq!(c.scenarios.len(), 12, "{:?}", c.scenarios.iter().map(|s| &s.scenario).collect::<Vec<_>>());
    assert!(m.left_out.iter().any(|l| l.starts_with("i_bootstrap_register_query")));
}
