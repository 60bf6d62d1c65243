//! `mooncake-conformance hash factors|wire|check`, `key build|parse|grammars` and `vectors` over the hash and
//! key golden files, end to end: outputs, JSON shapes and exit codes.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value as J;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
}

fn run(args: &[&str], stdin: Option<&str>) -> (i32, String) {
    let mut child =
        bin().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
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
    assert_eq!(all.len(), mooncake_wire::spec::Spec::builtin().push().revisions.len());
    let (code, out) = run(&["hash", "wire", "--revision", "0.27.1", "--format", "json"], None);
    assert_eq!(code, 0);
    let one: J = serde_json::from_str(&out).unwrap();
    assert_eq!(one["revision"], "vllm-0.26.0..0.28.0");
    let pos = all.iter().position(|r| r["revision"] == "vllm-0.26.0..0.28.0").unwrap();
    assert_eq!(one["fingerprint"], all[pos]["fingerprint"]);
    // The behaviour split of 0.25.0-0.29.0 keeps one wire.
    assert_eq!(all[pos - 1]["fingerprint"], all[pos]["fingerprint"]);
    assert_eq!(all[pos + 1]["fingerprint"], all[pos]["fingerprint"]);
    assert_eq!(one["document"]["format"], "mooncake-wire-fingerprint/1");

    let (code, out) = run(&["hash", "check", "vllm-0.32.0", "0.33.0", "--format", "json"], None);
    assert_eq!(code, 1, "{out}");
    let v: J = serde_json::from_str(&out).unwrap();
    assert_eq!(v["compatible"], false);
    let items: Vec<&str> = v["differences"].as_array().unwrap().iter().map(|d| d["item"].as_str().unwrap()).collect();
    assert!(items.contains(&"struct MooncakeXferMetadata field layout_id"), "{items:?}");

    // One wire, but re-registering a slot with the same address answers 400 from a 0.30.0 server: `diff` calls
    // that breaking, and so does `hash check`.
    let (code, out) = run(&["hash", "check", "0.30.0", "0.31.0"], None);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("incompatible") && out.contains("same wire fingerprint"), "{out}");
    assert!(out.contains("bootstrap.duplicate_registration"), "{out}");
    let (dcode, dout) = run(&["diff", "0.30.0", "0.31.0"], None);
    assert_eq!(dcode, 1, "{dout}");
    // Split for behaviour, one wire, and a break the diff knows: K/V halves in 0.25.x against whole blocks.
    let (code, out) = run(&["hash", "check", "0.25.1", "0.26.0"], None);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("behaviour.kv_half_split"), "{out}");
    let (code, out) = run(&["hash", "check", "0.22.0", "0.22.1"], None);
    assert_eq!(code, 0, "{out}");
    let (code, out) = run(&["hash", "check", "0.15.1", "0.16.0"], None);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("struct MooncakeAgentMetadata: only in vllm-0.13.0..0.15.1"), "{out}");
    let (code, _) = run(&["hash", "check", "0.12.0", "0.33.0"], None);
    assert_eq!(code, 2);

    // 0.34.0 adds a struct on a message of its own: the fingerprints differ, but what breaks is the lease a
    // never-renewing decoder outlives, as `diff` says — not the heartbeat an old prefiller answers ERROR to.
    let (code, out) = run(&["hash", "check", "0.33.0", "0.34.0"], None);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("struct MooncakeLeaseHeartbeat: only in vllm-0.34.0"), "{out}");
    let breaking = out.split("breaking rows of").nth(1).unwrap().split("outside the fingerprint").next().unwrap();
    assert!(breaking.contains("behaviour.kv_leases"), "{out}");
    assert!(!breaking.contains("transport.messages.MooncakeLeaseHeartbeat"), "{out}");
}

/// `hash check` gives `diff`'s verdict on every pair of consecutive revisions, and says the same rows break.
#[test]
fn check_agrees_with_diff_on_every_consecutive_pair() {
    let push = mooncake_wire::spec::Spec::builtin().push();
    for w in push.revisions.windows(2) {
        let (a, b) = (w[0].revision.as_str(), w[1].revision.as_str());
        let (hcode, hout) = run(&["hash", "check", a, b, "--format", "json"], None);
        let (dcode, dout) = run(&["diff", a, b, "--format", "json"], None);
        assert_eq!(hcode, dcode, "{a} → {b}: hash check {hcode}, diff {dcode}\n{hout}");
        let h: J = serde_json::from_str(&hout).unwrap();
        let d: J = serde_json::from_str(&dout).unwrap();
        let broken = |e: &J| e["effect"].as_str().is_some_and(|x| x.starts_with("breaks"));
        let diff_rows: Vec<&str> = d["changes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| broken(&c["old_reads_new"]) || broken(&c["new_reads_old"]))
            .map(|c| c["subject"].as_str().unwrap())
            .collect();
        let hash_rows: Vec<&str> =
            h["breaking"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().split(':').next().unwrap()).collect();
        assert_eq!(hash_rows, diff_rows, "{a} → {b}");
        assert_eq!(h["compatible"], diff_rows.is_empty(), "{a} → {b}");
    }
}

/// Every case of every hash and key golden file agrees (the per-file counts are in the report).
#[test]
fn every_hash_and_key_vector_agrees() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors");
    let (code, out) = run(
        &[
            "vectors",
            "--format",
            "json",
            &dir.join("hash").display().to_string(),
            &dir.join("keys").display().to_string(),
        ],
        None,
    );
    let v: J = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(code, 0, "{}", v["summary"]);
    assert_eq!(v["summary"]["files"], 19);
    assert_eq!(v["summary"]["not_checked_files"], 0);
    assert!(v["summary"]["cases"].as_u64().unwrap() >= 4168);
}

#[test]
fn key_build_and_parse() {
    // spec/README.md, "Store keys: a worked example": tokens 0..31, block 16, sha256, default seed.
    let tokens: Vec<String> = (0..32).map(|i| i.to_string()).collect();
    let (code, out) = run(
        &[
            "key",
            "build",
            "--release",
            "0.33.0",
            "model=Qwen/Qwen2.5-7B-Instruct",
            "--tokens",
            &tokens.join(","),
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(code, 0, "{out}");
    let v: J = serde_json::from_str(&out).unwrap();
    assert_eq!(v["keys"][1]["key"], "Qwen2.5-7B-Instruct@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@8be7aaa33831156d316f1f463ae57e643deb63f42e633e2d631df88815cc4629");
    // 0.22/0.23 key a 32-token chunk hashed every 16 tokens by the concatenation of both sub-hashes; 0.24+
    // by the last one.
    let chunk = |release: &str| {
        let (code, out) = run(
            &[
                "key",
                "build",
                "--release",
                release,
                "model_name=m",
                "--tokens",
                &tokens.join(","),
                "--block-size",
                "32",
                "--hash-block-size",
                "16",
                "--pythonhashseed",
                "0",
                "--format",
                "json",
            ],
            None,
        );
        assert_eq!(code, 0, "{out}");
        serde_json::from_str::<J>(&out).unwrap()["keys"][0]["hash"].as_str().unwrap().to_string()
    };
    let (concat, last) = (chunk("0.22.0"), chunk("0.24.0"));
    assert_eq!(concat.len(), 128);
    assert_eq!(&concat[64..], last);
    // 0.21–0.28 have no default seed: without PYTHONHASHSEED the chain cannot be reproduced (a missing option:
    // exit 2, as every usage mistake).
    let (code, out) = run(&["key", "build", "--release", "0.28.0", "model_name=m", "--tokens", "1,2"], None);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("PYTHONHASHSEED"), "{out}");

    let (code, out) = run(
        &[
            "key",
            "build",
            "--grammar",
            "lmcache-key",
            "model_name=m",
            "world_size=1",
            "worker_id=0",
            "chunk_hash=1f",
            "dtype=half",
            r#"tags=[["u","v"]]"#,
        ],
        None,
    );
    assert_eq!((code, out.trim()), (0, "m@1@0@1f@half@u%v"));
    let (code, _) = run(&["key", "build", "--grammar", "lmcache-key", "model_name=m"], None);
    assert_eq!(code, 2, "missing fields (building takes input, checks nothing: every mistake is exit 2)");
    let (code, _) = run(&["key", "build", "--release", "0.21.0", "model_name=m", "chunk_hash=ab", "group_id=1"], None);
    assert_eq!(code, 2, "0.21 keys have no group");
    let (code, _) = run(&["key", "build", "--release", "0.9.0", "model_name=m"], None);
    assert_eq!(code, 2);

    let key = "teamA@Qwen2.5-7B-Instruct@tp_rank:3@pcp0@dcp3@pp_rank:0@group:0@ab";
    let (code, out) = run(&["key", "parse", "--release", "0.33.0", key, "--format", "json"], None);
    assert_eq!(code, 1, "two readings without a hint: {out}");
    let (code, out) =
        run(&["key", "parse", "--release", "0.33.0", key, "--hint", "cache_prefix=teamA", "--format", "json"], None);
    assert_eq!(code, 0, "{out}");
    let v: J = serde_json::from_str(&out).unwrap();
    assert_eq!(v["readings"][0]["fields"]["model_name"], "Qwen2.5-7B-Instruct");
    assert_eq!(v["readings"][0]["fields"]["dcp_rank"], 3);
    let (code, out) = run(
        &[
            "key",
            "parse",
            "--family",
            "vllm-ascend",
            "llama@pcp0@dcp0@head_or_tp_rank:1@pp_rank:0@group:0@cache_role:kv@cache_family:default@ff",
        ],
        None,
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("ascend-store-key"), "{out}");
    let (code, _) = run(&["key", "parse", "--family", "lmcache", "not-a-key"], None);
    assert_eq!(code, 1);
    let (code, out) = run(&["key", "grammars"], None);
    assert_eq!(code, 0);
    assert!(out.contains("vllm-0.30") && out.contains("lmcache-layer-key"), "{out}");
}

#[test]
fn nixl_hash_of_a_release() {
    // spec/README.md, "Compatibility hashes: reference vectors": vector 3 (0.33.0) and, through the P2P
    // wrapper, vector 7's shape.
    let dir = std::env::temp_dir().join(format!("mooncake-nixl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("cfg.json");
    std::fs::write(&cfg, r#"{"model": "Qwen/Qwen3-0.6B", "dtype": "torch.bfloat16", "num_kv_heads": 8, "head_size": 128, "num_hidden_layers": 28, "cache_dtype": "auto", "attn_backend_name": "FLASH_ATTN"}"#).unwrap();
    let (code, out) =
        run(&["hash", "nixl", "--release", "0.33.0", &cfg.display().to_string(), "--format", "json"], None);
    assert_eq!(code, 0, "{out}");
    let v: J = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hash"], "cde24c489ad71bfdbccb1b829551f03719b0fe359a22fe635ec9986a6f36e549");
    assert_eq!(v["nixl_connector_version"], 15);
    let (code, out) =
        run(&["hash", "nixl", "--release", "0.33.0", &cfg.display().to_string(), "--engine", "nixl"], None);
    assert_eq!(code, 0);
    assert!(out.starts_with("cde24c489ad7"), "{out}");
    let (code, _) = run(&["hash", "nixl", "--release", "0.24.0", &cfg.display().to_string()], None);
    assert_eq!(code, 2, "0.24.0 needs cross_layers_blocks (the config file lacks an input: exit 2)");
    let (code, _) = run(&["hash", "nixl", "--release", "0.12.0", &cfg.display().to_string()], None);
    assert_eq!(code, 2, "no hash in 0.12.0");
    std::fs::remove_dir_all(&dir).unwrap();
}
