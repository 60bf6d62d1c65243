//! `mooncake-conformance vectors conformance/vectors/plan`: every case of every golden plan file (outputs of
//! vLLM 0.33.0's and 0.34.0's own planners) must agree with `mooncake_wire::plan`, a changed output or error text
//! must be caught and named, and each file is checked under the rules of the release it names.

use std::path::{Path, PathBuf};
use std::process::Command;

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(paths: &[&Path]) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .args(["vectors", "--format", "json"])
        .args(paths)
        .output()
        .unwrap();
    let v =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), v)
}

/// Cases in a golden file: its non-empty lines after the header.
fn case_count(path: &Path) -> u64 {
    std::fs::read_to_string(path).unwrap().lines().filter(|l| !l.trim().is_empty()).count() as u64 - 1
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mooncake-plan-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn every_case_of_every_plan_file_agrees_with_vllm() {
    let dir = here().join("vectors/plan");
    let (code, v) = run(&[&dir]);
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 18, "one report per plan file");
    for f in files {
        let path = PathBuf::from(f["path"].as_str().unwrap());
        assert!(f.get("not_checked").is_none(), "{}: {}", path.display(), f["not_checked"]);
        assert_eq!(f["failures"].as_array().unwrap().len(), 0, "{}: {}", path.display(), f["failures"]);
        assert_eq!(f["cases"].as_u64().unwrap(), case_count(&path), "{}", path.display());
        assert_eq!(f["passed"], f["cases"], "{}", path.display());
    }
    assert_eq!(code, 0, "{}", v["summary"]);
    assert_eq!(v["summary"]["ok"], true);
}

/// Rewrites line `no` (1-based) of a copy of `name` with `edit`, returning the copy's path.
fn altered(dir: &Path, name: &str, no: usize, edit: impl FnOnce(&mut serde_json::Value)) -> (PathBuf, String) {
    let src = std::fs::read_to_string(here().join("vectors/plan").join(name)).unwrap();
    let mut lines: Vec<String> = src.lines().map(String::from).collect();
    let mut case: serde_json::Value = serde_json::from_str(&lines[no - 1]).unwrap();
    edit(&mut case);
    lines[no - 1] = case.to_string();
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    (path, case["id"].as_str().unwrap().to_string())
}

#[test]
fn a_changed_descriptor_error_text_or_region_is_caught_and_named() {
    let dir = tempdir("mut");
    // One pointer of the descriptors of the first case with any.
    let (build, build_id) = altered(&dir, "build_transfer_params.jsonl", 2, |c| {
        let p = &mut c["output"]["src_ptrs"][0];
        *p = (p.as_u64().unwrap() + 1).into();
    });
    // An exception text vLLM raised.
    let text = std::fs::read_to_string(here().join("vectors/plan/get_tp_ratio.jsonl")).unwrap();
    let no = text.lines().position(|l| l.contains("\"error\"")).unwrap() + 1;
    let (ratio, ratio_id) = altered(&dir, "get_tp_ratio.jsonl", no, |c| {
        c["error"] = c["error"].as_str().unwrap().replace("divisible", "divisble").into();
    });
    // A region of the prepared layout in the sender pipeline.
    let (pipe, pipe_id) = altered(&dir, "sender_pipeline.jsonl", 2, |c| {
        c["output"]["prepare"]["remote_regions"][0]["row_offset"] = 12345.into();
    });
    let (code, v) = run(&[&build, &ratio, &pipe]);
    assert_ne!(code, 0);
    let files = v["files"].as_array().unwrap();
    for (f, id, what) in
        [(&files[0], build_id, "src_ptrs"), (&files[1], ratio_id, "error differs"), (&files[2], pipe_id, "row_offset")]
    {
        let failures = f["failures"].as_array().unwrap();
        assert_eq!(failures.len(), 1, "{f}");
        assert_eq!(failures[0]["id"], id.as_str());
        assert!(failures[0]["problem"].as_str().unwrap().contains(what), "{}", failures[0]["problem"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `id` → `output` (or `error`) of every case of a golden file.
fn results(path: &Path) -> std::collections::BTreeMap<String, serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let c: serde_json::Value = serde_json::from_str(l).unwrap();
            let r = c.get("output").or(c.get("error")).unwrap().clone();
            (c["id"].as_str().unwrap().to_string(), r)
        })
        .collect()
}

/// A copy of the plan file `name` whose header claims `release`, in `dir`.
fn relabelled(dir: &Path, name: &str, release: &str) -> PathBuf {
    let src = std::fs::read_to_string(here().join("vectors/plan").join(name)).unwrap();
    let mut lines: Vec<String> = src.lines().map(String::from).collect();
    let mut head: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    head["vllm_version"] = release.into();
    lines[0] = head.to_string();
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn failed_ids(report: &serde_json::Value) -> std::collections::BTreeSet<String> {
    report["failures"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_paired_block_order_cases_tell_0_33_from_0_34_and_each_file_is_checked_under_its_release() {
    let (old, new) = ("build_transfer_params_0.33.0.jsonl", "build_transfer_params_0.34.0.jsonl");
    let (r33, r34) = (results(&here().join("vectors/plan").join(old)), results(&here().join("vectors/plan").join(new)));
    // Every 0.33.0 case is in the 0.34.0 file too; the outputs differ where a run descends on both sides.
    assert!(r33.keys().all(|id| r34.contains_key(id)));
    let differ: std::collections::BTreeSet<String> =
        r33.iter().filter(|(id, out)| r34[*id] != **out).map(|(id, _)| id.clone()).collect();
    for id in ["order-descending-both", "order-kernel-x2-descending", "order-mamba-null-blocks-make-a-run"] {
        assert!(differ.contains(id), "{id} is planned alike by both releases");
    }
    for id in ["order-ascending-control", "order-descending-local-only", "order-step-minus-two", "order-len1"] {
        assert!(!differ.contains(id), "{id} is planned differently");
    }
    assert!(differ.len() >= 100, "only {} cases tell the releases apart", differ.len());
    // Under the other release's rules, exactly those cases fail, both ways round.
    let dir = tempdir("release");
    let (code, v) = run(&[&relabelled(&dir, new, "0.33.0"), &relabelled(&dir, old, "0.34.0")]);
    assert_ne!(code, 0);
    let files = v["files"].as_array().unwrap();
    assert_eq!(failed_ids(&files[0]), differ, "0.34.0's cases under 0.33.0's rules");
    assert_eq!(failed_ids(&files[1]), differ, "0.33.0's cases under 0.34.0's rules");
    // A release the spec does not know is a bad header, not a pass.
    let (code, v) = run(&[&relabelled(&dir, old, "9.9.9")]);
    assert_ne!(code, 0);
    let problem = v["files"][0]["failures"][0]["problem"].as_str().unwrap_or_default().to_string();
    assert!(problem.contains("no planning rules for vllm_version") && problem.contains("9.9.9"), "{problem}");
    let _ = std::fs::remove_dir_all(&dir);
}
