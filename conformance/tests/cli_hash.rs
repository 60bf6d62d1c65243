//! `mooncake-conformance hash factors|wire|check` end to end: outputs, JSON shapes and exit codes.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value as J;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
}

fn run(args: &[&str], stdin: Option<&str>) -> (i32, String) {
    let mut child = bin().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap())
}

/// Every case of the golden hash_factors file, through the CLI reading stdin.
#[test]
fn factors_reproduces_the_golden_file() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors/hash/hash_factors.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let mut n = 0;
    for line in text.lines().skip(1).step_by(7) {
        let case: J = serde_json::from_str(line).unwrap();
        let (code, out) = run(&["hash", "factors", "-", "--format", "json"], Some(&case["input"]["items"].to_string()));
        let got: J = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        match (case.get("output"), case.get("error")) {
            (Some(want), _) => {
                assert_eq!(code, 0, "{}", case["id"]);
                assert_eq!(&got, want, "{}", case["id"]);
            }
            (_, Some(err)) => {
                assert_eq!(code, 1, "{}", case["id"]);
                assert_eq!(&got["error"], err, "{}", case["id"]);
            }
            _ => unreachable!(),
        }
        n += 1;
    }
    assert!(n > 40);
    let (code, out) = run(&["hash", "factors", "-"], Some(r#"{"big": 18446744073709551616, "f": 1.0}"#));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(r#"hashed: {"big": 18446744073709551616, "f": 1.0}"#), "{out}");
    let (code, _) = run(&["hash", "factors", "/nonexistent.json"], None);
    assert_eq!(code, 2);
}

#[test]
fn wire_and_check() {
    let (code, out) = run(&["hash", "wire", "--format", "json"], None);
    assert_eq!(code, 0);
    let all: J = serde_json::from_str(&out).unwrap();
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 10);
    let (code, out) = run(&["hash", "wire", "--revision", "0.27.1", "--format", "json"], None);
    assert_eq!(code, 0);
    let one: J = serde_json::from_str(&out).unwrap();
    assert_eq!(one["revision"], "vllm-0.25.0..0.29.0");
    assert_eq!(one["fingerprint"], all[5]["fingerprint"]);
    assert_eq!(one["document"]["format"], "mooncake-wire-fingerprint/1");

    let (code, out) = run(&["hash", "check", "vllm-0.32.0", "0.33.0", "--format", "json"], None);
    assert_eq!(code, 1, "{out}");
    let v: J = serde_json::from_str(&out).unwrap();
    assert_eq!(v["compatible"], false);
    let items: Vec<&str> = v["differences"].as_array().unwrap().iter().map(|d| d["item"].as_str().unwrap()).collect();
    assert!(items.contains(&"struct MooncakeXferMetadata field layout_id"), "{items:?}");

    let (code, out) = run(&["hash", "check", "0.30.0", "0.31.0"], None);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("compatible"), "{out}");
    assert!(out.contains("bootstrap.duplicate_registration"), "{out}");
    let (code, out) = run(&["hash", "check", "0.22.0", "0.22.1"], None);
    assert_eq!(code, 0, "{out}");
    let (code, out) = run(&["hash", "check", "0.15.1", "0.16.0"], None);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("struct MooncakeAgentMetadata: only in vllm-0.13.0..0.15.1"), "{out}");
    let (code, _) = run(&["hash", "check", "0.12.0", "0.33.0"], None);
    assert_eq!(code, 2);
}
