//! Pull-family traces (`conformance/traces-pull/`: the released revisions recorded from vllm-ascend's own connector
//! code by `tools/ascend`, main@3e486e317 made by `tests/pull/record_pull_traces.py` with real pyzmq and msgspec
//! from independent definitions): the committed ones validate, freshly made synthetic ones validate, the
//! recordings say what they observed, and broken ones are caught with the right check.

use std::path::{Path, PathBuf};
use std::process::Command;

use mooncake_trace::oracle::python;
use mooncake_trace::trace::Trace;
use mooncake_trace::validate::{validate, validate_file};
use serde_json::Value as J;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    mooncake_trace::jsonl::expand(&[dir.to_path_buf()]).unwrap()
}

/// The scenarios every pull revision's bundled traces hold, and what the released revisions' recordings add.
const SCENARIOS: [&str; 2] = ["a_meta_then_done", "b_two_decoders"];
const FAILED_READ: &str = "c_failed_read";

fn scenario(f: &Path) -> String {
    f.file_stem().unwrap().to_string_lossy().into_owned()
}

#[test]
fn committed_pull_traces_validate() {
    let fs = files(&crate::here().join("traces-pull"));
    let mut revisions = std::collections::BTreeMap::<String, Vec<String>>::new();
    for f in &fs {
        let r = validate_file(f);
        assert!(r.ok(), "{}: {:#?}", f.display(), r.findings);
        assert!(r.zmq_payloads >= 8, "{}", f.display());
        revisions.entry(r.revision.unwrap()).or_default().push(scenario(f));
    }
    assert_eq!(
        revisions.keys().map(String::as_str).collect::<Vec<_>>(),
        ["vllm-ascend-0.18.0", "vllm-ascend-0.23.0.post1", "vllm-ascend-main@3e486e317"]
    );
    for (rev, scenarios) in &revisions {
        for s in SCENARIOS {
            assert!(scenarios.iter().any(|x| x == s), "{rev}: no {s} trace in {scenarios:?}");
        }
    }
    assert_eq!(revisions.values().map(Vec::len).sum::<usize>(), fs.len(), "one revision per file");
}

/// The ids of the requests one side reported (`observed_outcome.<side>`: per conn, a list of ids).
fn reported(o: &J, side: &str, at: &str) -> std::collections::BTreeSet<String> {
    let per_conn = o[side].as_object().unwrap_or_else(|| panic!("{at}: no {side}"));
    per_conn.values().flat_map(|v| v.as_array().unwrap()).map(|r| r.as_str().unwrap().to_owned()).collect()
}

/// The decoders' completions (`done_recving_msg`, request id) that the trace shows sent, each answered with `ACK`.
fn completions_acked(text: &str, at: &str) -> Vec<String> {
    let evs: Vec<J> = text.lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).collect();
    let done = hex::encode("done_recving_msg");
    let sent: Vec<String> = evs
        .iter()
        .filter(|e| e["side"] == "decoder" && e["dir"] == "send" && e["decoded"][0] == done.as_str())
        .map(|e| e["decoded"][1].as_str().unwrap().to_owned())
        .collect();
    let acks = evs.iter().filter(|e| e["side"] == "decoder" && e["dir"] == "recv" && e["payload_text"] == "ACK");
    assert_eq!(acks.count(), sent.len(), "{at}: every completion answered with ACK");
    sent
}

/// The released revisions' traces are recordings of vllm-ascend's code (`tools/ascend`), each a completed scenario
/// in which every request a decoder reported received was reported freed by the prefiller. In the success scenarios
/// every engine read returned 0, every pulled block held the prefiller's bytes in every region and no block was
/// reported failed to load. In `c_failed_read` the one engine read returned the injected failure code, no bytes were
/// checked as landed, the decoder still sent its completion (and it was acknowledged), and reported the request
/// received; 0.23.0.post1 also reports its blocks as load errors, 0.18.0 (no `get_block_ids_with_load_errors` of its
/// own) reports none.
#[test]
fn released_pull_traces_are_recordings_of_vllm_ascend() {
    for rev in ["vllm-ascend-0.18.0", "vllm-ascend-0.23.0.post1"] {
        let fs = files(&crate::here().join("traces-pull").join(rev));
        let names: Vec<String> = fs.iter().map(|f| scenario(f)).collect();
        assert!(names.iter().any(|n| n == FAILED_READ), "{rev}: no {FAILED_READ} in {names:?}");
        for f in fs {
            let text = std::fs::read_to_string(&f).unwrap();
            let h: J = serde_json::from_str(text.lines().next().unwrap()).unwrap();
            let at = f.display().to_string();
            assert_eq!(h["recorded_by"], "tools/ascend (mooncake-wire)", "{at}");
            assert!(h["recorded_from"].as_str().unwrap().contains("sdist (sha256"), "{at}");
            assert!(h["error"].is_null(), "{at}: {}", h["error"]);
            let o = &h["observed_outcome"];
            let recving = reported(o, "finished_recving", &at);
            assert!(!recving.is_empty(), "{at}");
            assert_eq!(recving, reported(o, "finished_sending", &at), "{at}");
            let completed: std::collections::BTreeSet<String> = completions_acked(&text, &at).into_iter().collect();
            assert_eq!(completed, recving, "{at}: one acknowledged completion per request");
            let checks = o["kv_check"].as_object().unwrap();
            let reads = h["transfer_engine_reads"].as_array().unwrap();
            // Every recording read the decoder's load errors (`get_block_ids_with_load_errors`, where the release has it).
            let load_errors: Vec<&J> = o["load_errors"]
                .as_object()
                .unwrap_or_else(|| panic!("{at}: no observed_outcome.load_errors"))
                .values()
                .flat_map(|v| v.as_array().unwrap())
                .collect();
            if scenario(&f) == FAILED_READ {
                assert_eq!(reads.len(), 1, "{at}: one engine read: {reads:?}");
                assert!(
                    reads[0]["ret"].as_i64().unwrap() < 0 && reads[0]["injected_failure"] == true,
                    "{at}: {reads:?}"
                );
                assert!(checks.is_empty(), "{at}: nothing landed to check: {checks:?}");
                if rev == "vllm-ascend-0.23.0.post1" {
                    assert!(!load_errors.is_empty(), "{at}: the failed request's blocks reported as load errors");
                } else {
                    assert!(load_errors.is_empty(), "{at}: {load_errors:?}");
                }
                continue;
            }
            assert!(load_errors.is_empty(), "{at}: {load_errors:?}");
            assert_eq!(checks.len(), recving.len(), "{at}: one block check per request");
            for (req, c) in checks {
                assert!(c["mismatches"].as_array().unwrap().is_empty(), "{at}: {req}: {c}");
                assert!(c["blocks"].as_u64().unwrap() > 0 && c["regions"].as_u64().unwrap() > 0, "{at}: {req}");
            }
            assert_eq!(reads.len(), checks.len(), "{at}: one engine read per request");
            assert!(reads.iter().all(|r| r["ret"] == 0 && r["bytes"].as_u64().unwrap() > 0), "{at}: {reads:?}");
        }
    }
}

#[test]
fn freshly_recorded_pull_traces_validate() {
    if !crate::python_env("pull_traces::freshly_recorded_pull_traces_validate") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("mooncake-pull-traces-{}", std::process::id()));
    let st = Command::new(python().unwrap_or_else(|e| panic!("{e}")))
        .arg(root().join("tests/pull/record_pull_traces.py"))
        .arg(&dir)
        .status()
        .unwrap();
    assert!(st.success());
    let fs = files(&dir);
    let bad: Vec<_> = fs
        .iter()
        .map(|f| validate_file(f))
        .filter(|r| !r.ok())
        .map(|r| format!("{}: {:?}", r.path, r.findings))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(fs.len(), 6);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Rewrites one event line of a committed trace and returns the checks the validator reports.
fn checks_after(rel: &str, edit: impl Fn(&mut Vec<J>)) -> Vec<&'static str> {
    let text = std::fs::read_to_string(crate::here().join("traces-pull").join(rel)).unwrap();
    let mut lines: Vec<J> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    edit(&mut lines);
    let out: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let p =
        std::env::temp_dir().join(format!("mooncake-pull-mut-{}-{}.jsonl", std::process::id(), rel.replace('/', "_")));
    std::fs::write(&p, out).unwrap();
    let t = Trace::load(&p).unwrap();
    let _ = std::fs::remove_file(&p);
    let mut c: Vec<_> = validate(t).findings.iter().map(|f| f.check.as_str()).collect();
    c.dedup();
    c
}

/// Index of the event with this seq (line 0 is the header).
fn ev(lines: &mut [J], seq: u64) -> &mut J {
    lines.iter_mut().find(|l| l["seq"] == seq).unwrap()
}

#[test]
fn broken_pull_traces_are_caught() {
    // The decoder receives something that is not "ACK" for its completion.
    let c = checks_after("vllm-ascend-0.18.0/a_meta_then_done.jsonl", |l| {
        ev(l, 8)["frames"][0] = J::from(hex::encode("NAK"))
    });
    assert_eq!(c, ["ZMQ-DECODE"]);
    // A str tag instead of bin: msgspec-valid MessagePack, but no message of the decoder.
    let c = checks_after("vllm-ascend-main@3e486e317/a_meta_then_done.jsonl", |l| {
        ev(l, 1)["frames"][0] = J::from(format!("91ac{}", hex::encode("get_meta_msg")));
    });
    assert_eq!(c, ["ZMQ-DECODE", "PULL-PAIRING"], "and the metadata then answers no request");
    // A 0.18.0 metadata reply in a 0.23.0.post1 trace (fields missing).
    let v18 =
        std::fs::read_to_string(crate::here().join("traces-pull/vllm-ascend-0.18.0/a_meta_then_done.jsonl")).unwrap();
    let meta18: J = serde_json::from_str(v18.lines().nth(4).unwrap()).unwrap();
    let c = checks_after("vllm-ascend-0.23.0.post1/a_meta_then_done.jsonl", |l| {
        ev(l, 4)["frames"] = meta18["frames"].clone()
    });
    assert_eq!(c, ["ZMQ-DECODE", "PULL-PAIRING"], "and the completion is sent before the query was answered");
    // The decoder's replies swapped: the query answered by ACK, the completion by metadata.
    let c = checks_after("vllm-ascend-0.23.0.post1/a_meta_then_done.jsonl", |l| {
        let (a, b) = (ev(l, 4)["frames"].clone(), ev(l, 8)["frames"].clone());
        ev(l, 4)["frames"] = b;
        ev(l, 8)["frames"] = a;
    });
    assert_eq!(c, ["PULL-PAIRING"]);
    // The routing id dropped at the ROUTER, a DEALER instead of REQ, and a generation mismatch.
    let c = checks_after("vllm-ascend-0.18.0/a_meta_then_done.jsonl", |l| {
        ev(l, 2)["frames"].as_array_mut().unwrap().remove(0);
    });
    assert_eq!(c, ["ZMQ-FRAMES"]);
    assert_eq!(
        checks_after("vllm-ascend-0.18.0/a_meta_then_done.jsonl", |l| ev(l, 1)["socket"] = J::from("DEALER")),
        ["ZMQ-SOCKET"]
    );
    assert_eq!(
        checks_after("vllm-ascend-0.18.0/a_meta_then_done.jsonl", |l| l[0]["connector_generation"] = J::from(2)),
        ["TRACE-REVISION"]
    );
    assert_eq!(
        checks_after("vllm-ascend-0.18.0/a_meta_then_done.jsonl", |l| l[0]["vllm_version"] = J::from("0.19.0")),
        ["TRACE-REVISION"]
    );
}

/// `validate`'s text names the project a trace's version belongs to: a vllm-ascend release is not a vLLM one.
#[test]
fn validate_text_names_the_project() {
    let out = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .arg("validate")
        .arg(crate::here().join("traces-pull"))
        .arg(crate::here().join("traces/vllm-0.33.0/a_single_success.jsonl"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for want in ["vllm-ascend 0.18.0 ", "vllm-ascend 0.23.0.post1 ", "vllm-ascend main@3e486e317 ", "vLLM 0.33.0 "] {
        assert!(text.contains(want), "no `{want}` in:\n{text}");
    }
    assert!(
        !text.contains("vLLM 0.18.0") && !text.contains("vLLM 0.23.0.post1") && !text.contains("vLLM main@"),
        "{text}"
    );
    // The JSON report carries the project too.
    let r = validate_file(&crate::here().join("traces-pull/vllm-ascend-0.23.0.post1/a_meta_then_done.jsonl"));
    assert_eq!((r.project.as_str(), r.vllm_version.as_str()), ("vllm-ascend", "0.23.0.post1"));
    let spec = mooncake_wire::spec::Spec::builtin();
    let projects: Vec<&str> = spec.pull().revisions.iter().map(|r| r.project()).collect();
    assert_eq!(projects, ["vllm-ascend"; 3]);
    assert!(spec.push().revisions.iter().all(|r| r.project() == "vllm"));
}
