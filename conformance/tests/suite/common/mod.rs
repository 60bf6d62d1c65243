//! What the bundled traces hold, counted from the files themselves (not through the runner), so tests can
//! check the runner's case counts without repeating a number that changes whenever a recording is added.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub(crate) fn traces_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("traces")
}

/// The bundled trace sets `run` plays without paths: the push family's and the pull family's.
pub(crate) fn bundled_dirs() -> [PathBuf; 2] {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [here.join("traces"), here.join("traces-pull")]
}

/// Every `*.jsonl` under `dir`, sorted.
pub(crate) fn trace_files(dir: &Path) -> Vec<PathBuf> {
    use mooncake_trace::walk;
    walk::files(dir, walk::MAX_DEPTH, &|p| walk::has_extension(p, "jsonl")).unwrap_or_else(|e| panic!("{e}"))
}

/// Per trace: (has ZeroMQ events, has HTTP events, ZeroMQ events, HTTP events).
pub(crate) fn kinds(p: &Path) -> (bool, bool, usize, usize) {
    let text = std::fs::read_to_string(p).unwrap();
    let mut zmq = 0;
    let mut http = 0;
    for l in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        match v["kind"].as_str() {
            Some("zmq") => zmq += 1,
            Some("http") => http += 1,
            _ => {}
        }
    }
    (zmq > 0, http > 0, zmq, http)
}

/// The cases the bundled traces of `dir` make: a prefiller and a decoder case for a trace with ZeroMQ
/// traffic, a bootstrap case for one with HTTP traffic.
pub(crate) fn expected_cases(dir: &Path) -> usize {
    trace_files(dir)
        .iter()
        .map(|p| {
            let (z, h, _, _) = kinds(p);
            2 * z as usize + h as usize
        })
        .sum()
}

/// Whether `dir` (a wheel cache) holds a wheel of vLLM `release`; a missing or unreadable cache holds none.
pub(crate) fn has_wheel(dir: &Path, release: &str) -> bool {
    let prefix = format!("vllm-{release}-");
    mooncake_trace::walk::entries(dir).is_ok_and(|entries| {
        entries.iter().filter_map(|p| p.file_name()?.to_str()).any(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
    })
}
