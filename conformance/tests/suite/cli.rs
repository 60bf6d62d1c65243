//! The `vectors` and `validate` commands end to end: every bundled vector file and trace passes, and
//! corrupted inputs are caught with findings that say where.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as J;

use mooncake_trace::{
    jsonl,
    trace::{Trace, TraceError},
    validate,
};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
}
fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run_json(args: &[&str]) -> (i32, serde_json::Value) {
    let out = bin().args(args).output().unwrap();
    let v =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), v)
}

#[test]
fn every_bundled_msgspec_vector_agrees() {
    let dir = here().join("vectors");
    let mut args: Vec<String> =
        vec!["vectors".into(), "--format".into(), "json".into(), dir.join("revisions.json").display().to_string()];
    for p in mooncake_trace::walk::entries(&dir).unwrap_or_else(|e| panic!("{e}")) {
        if p.is_dir() && p.file_name().unwrap().to_string_lossy().starts_with("vllm-") {
            args.push(p.display().to_string());
        }
    }
    let (code, v) = run_json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let s = &v["summary"];
    assert_eq!(code, 0, "{s}");
    assert_eq!(s["files"], 23);
    assert_eq!(s["failed"], 0);
    assert_eq!(s["error_text_differs"], 0, "every error text equals msgspec's");
    assert!(s["cases"].as_u64().unwrap() >= 8802 + 10);
}

#[test]
fn every_bundled_trace_validates() {
    let (code, v) = run_json(&["validate", "--format", "json", here().join("traces").to_str().unwrap()]);
    let s = &v["summary"];
    assert_eq!(code, 0, "{v}");
    let files = common::trace_files(&common::traces_dir());
    assert_eq!(s["traces"], files.len());
    let (zmq, http): (usize, usize) =
        files.iter().map(|p| common::kinds(p)).fold((0, 0), |(z, h), k| (z + k.2, h + k.3));
    assert_eq!(s["http_events"], http);
    // Every ZeroMQ payload is checked, except generation 1's raw replies (one per recorded reply, two events).
    let payloads = s["zmq_payloads"].as_u64().unwrap() as usize;
    assert!(payloads > 0 && payloads <= zmq, "{payloads} of {zmq}");
}

#[test]
fn a_wrong_vector_fails_the_run_and_says_which() {
    let dir = tempdir("vec");
    let src = std::fs::read_to_string(here().join("vectors/vllm-0.33.0/MooncakeXferResponse.jsonl")).unwrap();
    let mut lines: Vec<String> = src.lines().map(String::from).collect();
    // Claim msgspec rejects a valid message.
    let mut case: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    case["expect"] = "reject".into();
    case["error"] = "made up".into();
    lines[1] = case.to_string();
    std::fs::write(dir.join("bad.jsonl"), lines.join("\n")).unwrap();
    let (code, v) = run_json(&["vectors", "--format", "json", dir.join("bad.jsonl").to_str().unwrap()]);
    assert_eq!(code, 1);
    let f = &v["files"][0]["failures"][0];
    assert_eq!(f["id"], case["id"]);
    assert_eq!(f["line"], 2);
    assert!(f["problem"].as_str().unwrap().contains("we accept"), "{f}");
}

#[test]
fn the_heartbeat_vectors_route_every_case_and_a_wrong_route_is_caught() {
    let src = std::fs::read_to_string(here().join("vectors/vllm-0.34.0/MooncakeLeaseHeartbeat.jsonl")).unwrap();
    let mut lines: Vec<String> = src.lines().map(String::from).collect();
    let cases: Vec<serde_json::Value> = lines[1..].iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    // Every case says where vLLM's listener sends it, and the file holds all three outcomes, pulls among them.
    assert!(cases.iter().all(|c| c["route"].is_string()));
    for route in ["heartbeat", "pull", "listener-exits"] {
        assert!(cases.iter().any(|c| c["route"] == route), "no case routed as {route}");
    }
    let pull = cases.iter().position(|c| c["id"] == "classify-pull").expect("a pull among the heartbeat cases");
    assert_eq!((cases[pull]["expect"].as_str(), cases[pull]["route"].as_str()), (Some("accept"), Some("pull")));
    // Claim vLLM takes that pull for a heartbeat.
    let mut case = cases[pull].clone();
    case["route"] = "heartbeat".into();
    lines[pull + 1] = case.to_string();
    let dir = tempdir("route");
    std::fs::write(dir.join("bad.jsonl"), lines.join("\n")).unwrap();
    let (code, v) = run_json(&["vectors", "--format", "json", dir.join("bad.jsonl").to_str().unwrap()]);
    assert_eq!(code, 1);
    let failures = v["files"][0]["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["id"], "classify-pull");
    assert!(failures[0]["problem"].as_str().unwrap().contains("routed as pull"), "{}", failures[0]);
}

#[test]
fn golden_files_without_a_checker_are_not_passed_silently() {
    let (code, v) =
        run_json(&["vectors", "--format", "json", here().join("vectors/plan/get_tp_ratio.jsonl").to_str().unwrap()]);
    // Until a checker exists the run must not report success for it.
    if v["files"][0]["not_checked"].is_string() {
        assert_eq!(code, 1);
    } else {
        assert_eq!(code, 0, "{v}");
    }
}

#[test]
fn usage_errors_exit_2() {
    let out = bin().args(["vectors", "/no/such/path"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such file"));
    let out = bin().args(["frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "mooncake-conformance-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn load(rel: &str) -> Trace {
    Trace::load(&here().join("traces").join(rel)).unwrap()
}

fn checks(t: &Trace) -> Vec<&'static str> {
    validate::validate(t.clone()).findings.iter().map(|f| f.check.as_str()).collect()
}

#[test]
fn validation_catches_corrupted_payloads_frames_and_bodies() {
    let base = load("vllm-0.33.0/a_single_success.jsonl");
    assert!(checks(&base).is_empty());

    // A flipped byte inside the request's payload (a key's first letter): it no longer decodes to the same
    // bytes, or no longer decodes.
    let mut t = base.clone();
    let z = t.events.iter_mut().find_map(|e| match e {
        mooncake_trace::trace::Event::Zmq(z) if z.socket == "DEALER" => Some(z),
        _ => None,
    });
    let z = z.unwrap();
    z.frames[0][2] ^= 0x01;
    let c = checks(&t);
    assert!(c.contains(&"ZMQ-DECODE") || c.contains(&"ZMQ-REENCODE"), "{c:?}");

    // An extra empty delimiter frame at the ROUTER (what a REQ socket would add).
    let mut t = base.clone();
    for e in t.events.iter_mut() {
        if let mooncake_trace::trace::Event::Zmq(z) = e {
            if z.socket == "ROUTER" && z.dir == mooncake_trace::trace::ZmqDir::Recv {
                z.frames.insert(1, vec![]);
            }
        }
    }
    assert!(checks(&t).contains(&"ZMQ-FRAMES"));

    // A /register answer with a body that is not {"status": "ok"}.
    let mut t = base.clone();
    for e in t.events.iter_mut() {
        if let mooncake_trace::trace::Event::Http(h) = e {
            if h.dir == mooncake_trace::trace::HttpDir::Response && h.path == "/register" {
                h.body = Some(serde_json::json!({"status": "fine"}));
                h.body_raw = "{\"status\":\"fine\"}".into();
            }
        }
    }
    // Both the body check and the protocol check (the registry would have answered {"status": "ok"}).
    assert_eq!(checks(&t), vec!["HTTP-BODY", "REGISTER-STATUS"]);

    // A 0.32.0 trace carrying a 0.33.0 LAYOUT_MISS status: 0.32.0's enum has no 3.
    let mut t = load("vllm-0.32.0/a_single_success.jsonl");
    for e in t.events.iter_mut() {
        if let mooncake_trace::trace::Event::Zmq(z) = e {
            if z.socket == "ROUTER" && z.dir == mooncake_trace::trace::ZmqDir::Send {
                // {status: 3, err_msg: "x"}
                z.frames[1] = vec![
                    0x82, 0xa6, b's', b't', b'a', b't', b'u', b's', 0x03, 0xa7, b'e', b'r', b'r', b'_', b'm', b's',
                    b'g', 0xa1, b'x',
                ];
            }
        }
    }
    let rep = validate::validate(t.clone());
    let f = rep.findings.iter().find(|f| f.check.as_str() == "ZMQ-DECODE").unwrap();
    assert_eq!(f.detail, "Invalid enum value 3 - at `$.status`");
    assert_eq!(f.message.as_deref(), Some("MooncakeXferResponse"));
    assert!(f.seq.is_some() && f.line.is_some());

    // A vLLM version no revision covers.
    let mut t = base.clone();
    t.header.vllm_version = "0.12.0".into();
    assert_eq!(checks(&t), vec!["TRACE-REVISION"]);
}

#[test]
fn malformed_traces_name_the_line_and_field() {
    let dir = tempdir("trace");
    let src = std::fs::read_to_string(here().join("traces/vllm-0.33.0/a_single_success.jsonl")).unwrap();
    let mut lines: Vec<String> = src.lines().map(String::from).collect();
    lines[5] = lines[5].replacen("\"frames\": [\"", "\"frames\": [\"zz", 1);
    let p = dir.join("bad.jsonl");
    std::fs::write(&p, lines.join("\n")).unwrap();
    let err = Trace::load(&p).unwrap_err();
    assert!(matches!(err, TraceError::FrameHex { line: 6, index: 0, .. }), "{err}");
    let err = err.to_string();
    assert!(err.contains(":6:") && err.contains("frames[0]") && err.contains("not hex"), "{err}");
    lines[5] = "{\"seq\": 1, \"kind\": \"zmq\"}".into();
    std::fs::write(&p, lines.join("\n")).unwrap();
    let err = Trace::load(&p).unwrap_err();
    assert!(matches!(err, TraceError::Event { line: 6, kind: "zmq", .. }), "{err}");
    let err = err.to_string();
    assert!(err.contains(":6:") && err.contains("missing field"), "{err}");
    // A file that is not a well-formed trace is bad input (exit 2), as it is for `run`; the report still
    // names the line and field.
    let out = bin().args(["validate", p.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("TRACE-FORMAT"));
    let _ = jsonl::read(Path::new("/nonexistent")).unwrap_err();
}

/// A `--scenarios` file's numbers are input: out of range, they are exit 2 naming the file, key and range,
/// before a case starts (they used to panic `run` and leave its `--json` report empty).
#[test]
fn numbers_out_of_range_in_a_scenarios_file_are_bad_input() {
    let dir = tempdir("scenario-numbers");
    let cases: [(&str, &str); 7] = [
        ("[model]\ntotal_num_kv_heads = 4\nhead_size = 8\nblock_size = 16\ndtype_bytes = 2\nnum_blocks = 32\nabort_timeout_s = nan\n", "[model] abort_timeout_s = NaN"),
        ("[model]\ntotal_num_kv_heads = 4\nhead_size = 8\nblock_size = 16\ndtype_bytes = 2\nnum_blocks = 32\nabort_timeout_s = -2.0\n", "[model] abort_timeout_s = -2"),
        ("[model]\ntotal_num_kv_heads = 4\nhead_size = 8\nblock_size = 16\ndtype_bytes = 2\nnum_blocks = 32\nabort_timeout_s = 4.611686018427388e18\n", "[model] abort_timeout_s = 4611686018427388000"),
        ("[model]\ntotal_num_kv_heads = 4\nhead_size = 8\nblock_size = 16\ndtype_bytes = 2\nnum_blocks = 4611686018427387904\nabort_timeout_s = 2.0\n", "[model] num_blocks = 4611686018427387904"),
        ("[model]\ntotal_num_kv_heads = 4\nhead_size = 8\nblock_size = 16\ndtype_bytes = 2\nnum_blocks = 1000000\nnum_layers = 64\nabort_timeout_s = 2.0\n", "num_layers × num_blocks × block bytes"),
        ("[scenario.a_single_success]\npull_delay_s = inf\n", "[scenario.a_single_success] pull_delay_s = inf"),
        ("[scenario.a_single_success]\ntransfers = [{ p_req_id = \"p\", transfer_id = \"t\", blocks = [[3, 99]] }]\n", "transfers t blocks = 99"),
    ];
    for (i, (text, says)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let json = dir.join(format!("report{i}.json"));
        for role in ["decoder", "prefiller"] {
            let out = bin()
                .args(["run", "--progress", "off", "--case", "vllm-0.33.0/a_single_success", "--role", role])
                .arg("--scenarios")
                .arg(&file)
                .arg("--json")
                .arg(&json)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{text}: {err}");
            assert!(err.contains(&format!("--scenarios {}", file.display())) && err.contains(says), "{says}: {err}");
            assert!(err.contains("accepted"), "{err}");
            assert!(!json.exists(), "no report is created when the run cannot start");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A traces directory with a symbolic link back to its parent, a second link to a directory and a link to a
/// file: every command that walks it ends, reads each trace once and says what it left out (it used to walk
/// the loop until memory ran out, and count a trace once per route).
#[cfg(unix)]
#[test]
fn directory_loops_and_second_routes_are_walked_once_and_named() {
    let dir = tempdir("loops");
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::copy(here().join("traces/vllm-0.33.0/a_single_success.jsonl"), dir.join("a/a_single_success.jsonl"))
        .unwrap();
    std::os::unix::fs::symlink("..", dir.join("a/up")).unwrap();
    std::os::unix::fs::symlink("a", dir.join("b")).unwrap();
    std::os::unix::fs::symlink("a/a_single_success.jsonl", dir.join("same.jsonl")).unwrap();
    for cmd in [&["validate"][..], &["run", "--progress", "off", "--role", "bootstrap"][..]] {
        let out = bin().args(cmd).arg(&dir).output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {stdout}{stderr}");
        assert!(stdout.contains("1 traces") || stdout.contains("1 cases"), "{cmd:?}: {stdout}");
        assert_eq!(stderr.matches("not walked again").count(), 2, "{stderr}");
        assert_eq!(stderr.matches("read once").count(), 1, "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A vector file naming a revision the spec does not have is not checked as some other revision: a
/// `vllm-9.9.9` over 0.33.0's releases used to pass as 0.33.0 with exit 0.
#[test]
fn vector_files_of_revisions_the_spec_lacks_are_not_checked() {
    let dir = tempdir("vector-revision");
    let src = std::fs::read_to_string(here().join("vectors/vllm-0.33.0/MooncakeXferResponse.jsonl")).unwrap();
    for (header_from, header_to, says) in [
        (r#""revision":"vllm-0.33.0""#, r#""revision":"vllm-9.9.9""#, "9.9.9 is not among its vllm_releases"),
        (r#""vllm_releases":["0.33.0"]"#, r#""vllm_releases":["0.33.0","9.9.9"]"#, "release 9.9.9"),
    ] {
        let text = src.replacen(header_from, header_to, 1);
        let text =
            if header_from.contains("releases") { text.replacen("vllm-0.33.0", "vllm-0.33.0..9.9.9", 1) } else { text };
        let p = dir.join("v.jsonl");
        std::fs::write(&p, text).unwrap();
        let out = bin().args(["vectors", "--format", "json"]).arg(&p).output().unwrap();
        let v: J = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(1), "{v}");
        assert_eq!(v["summary"]["not_checked_files"], 1, "{v}");
        assert!(v.to_string().contains(says), "{says}: {v}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A keys golden case's counts and sizes size allocations: out of range, the case fails naming the field
/// (a huge `num_block_hashes` or TP/PP/PCP size used to abort `vectors` with a capacity overflow or a
/// multi-terabyte allocation).
#[test]
fn keys_golden_sizes_out_of_range_fail_the_case_not_the_process() {
    let dir = tempdir("golden-sizes");
    let src = std::fs::read_to_string(here().join("vectors/keys/process_tokens_0.33.0.jsonl")).unwrap();
    let mut lines: Vec<String> = src.lines().take(2).map(String::from).collect();
    lines[1] = lines[1].replacen("\"num_block_hashes\": 0", "\"num_block_hashes\": 4611686018427387904", 1);
    let p = dir.join("k.jsonl");
    std::fs::write(&p, lines.join("\n")).unwrap();
    let out = bin().args(["vectors", "--format", "json"]).arg(&p).output().unwrap();
    let v: J = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert!(v.to_string().contains("`num_block_hashes` = 4611686018427387904: accepted 0 to 65536"), "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An event time a recording cannot hold is refused where it is read (it would size a case's waits).
#[test]
fn a_trace_time_out_of_range_is_a_format_error() {
    let dir = tempdir("trace-time");
    let src =
        std::fs::read_to_string(here().join("traces/vllm-0.34.0/j1_lease_renewal_keeps_slow_pull.jsonl")).unwrap();
    let mut lines: Vec<J> = src.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let at = lines.iter().position(|l| l.get("t").is_some()).expect("a timed event");
    lines[at]["t"] = J::from(1e300);
    let p = dir.join("late.jsonl");
    std::fs::write(&p, lines.iter().map(J::to_string).collect::<Vec<_>>().join("\n")).unwrap();
    let err = Trace::load(&p).unwrap_err();
    assert!(matches!(err, TraceError::Time { .. }), "{err}");
    assert!(err.to_string().contains(&format!(":{}: t:", at + 1)), "{err}");
    let out = bin().args(["run", "--progress", "off"]).arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Re-encodes the decoder-side replies of a trace through `f` (the checks read what the decoder received).
fn mutate_replies(t: &mut Trace, f: impl Fn(usize, &mut mooncake_wire::typed::MooncakeXferResponse) -> bool) {
    let mut n = 0;
    let mut drop_idx = vec![];
    for (i, e) in t.events.iter_mut().enumerate() {
        if let mooncake_trace::trace::Event::Zmq(z) = e {
            if z.socket == "DEALER" && z.dir == mooncake_trace::trace::ZmqDir::Recv {
                let mut r = mooncake_wire::typed::MooncakeXferResponse::decode(&z.frames[0]).unwrap();
                if f(n, &mut r) {
                    z.frames[0] = r.encode();
                } else {
                    drop_idx.push(i);
                }
                n += 1;
            }
        }
    }
    for i in drop_idx.into_iter().rev() {
        t.events.remove(i);
    }
}

#[test]
fn protocol_checks_catch_each_violation() {
    use mooncake_wire::typed::Status;
    let g = load("vllm-0.33.0/g_continue_then_finish.jsonl");
    assert!(checks(&g).is_empty());
    let cases: Vec<(&str, Box<dyn Fn(usize, &mut mooncake_wire::typed::MooncakeXferResponse) -> bool>)> = vec![
        // The FINISH never comes.
        ("SEQ-TERMINAL", Box::new(|i, _| i == 0)),
        // An id the pull never named.
        (
            "REQS-SUBSET",
            Box::new(|i, r| {
                if i == 1 {
                    r.ok_reqs = Some(["d-req-9"].into());
                }
                true
            }),
        ),
        // A duplicated completion.
        (
            "REQS-ONCE",
            Box::new(|i, r| {
                if i == 1 {
                    r.ok_reqs = Some(["d-req-2", "d-req-1"].into());
                }
                true
            }),
        ),
        // Both lists name the same id.
        (
            "REQS-ONCE",
            Box::new(|i, r| {
                if i == 1 {
                    r.err_reqs = Some(["d-req-2"].into());
                    r.err_msg = Some("x".into());
                }
                true
            }),
        ),
        // An ERROR echoing the layout id and carrying ids.
        (
            "ERROR-SHAPE",
            Box::new(|i, r| {
                if i == 1 {
                    r.status = Status::ERROR;
                    r.err_msg = None;
                }
                true
            }),
        ),
        (
            "LAYOUT-ECHO",
            Box::new(|i, r| {
                if i == 0 {
                    r.layout_id = 7u64.into();
                }
                true
            }),
        ),
        // Something after the terminal reply: make the CONTINUE a FINISH.
        (
            "SEQ-TERMINAL",
            Box::new(|i, r| {
                if i == 0 {
                    r.status = Status::FINISH;
                }
                true
            }),
        ),
        // An empty list where 0.33.0 omits it.
        (
            "EMPTY-LISTS",
            Box::new(|i, r| {
                if i == 1 {
                    r.err_reqs = Some(Default::default());
                }
                true
            }),
        ),
        // LAYOUT_MISS for a pull that carried its layout.
        (
            "LAYOUT-MISS-CAUSE",
            Box::new(|i, r| {
                if i == 1 {
                    *r = mooncake_wire::typed::MooncakeXferResponse::new(Status::LAYOUT_MISS);
                    r.err_msg = Some("x".into());
                }
                true
            }),
        ),
    ];
    for (want, f) in cases {
        let mut t = g.clone();
        mutate_replies(&mut t, f);
        let c = checks(&t);
        let m = mooncake_trace::conversation::Conversation::new(t.clone()).unwrap();
        assert!(
            c.contains(&want),
            "{want}: got {c:?}; exchanges {:?}",
            m.exchanges.iter().map(|x| x.replies.len()).collect::<Vec<_>>()
        );
    }
    // h1: a layout-less pull never resent after LAYOUT_MISS.
    let mut h1 = load("vllm-0.33.0/h1_layout_reuse_and_miss.jsonl");
    assert!(checks(&h1).is_empty());
    let last_send = h1.events.iter().rposition(|e| matches!(e, mooncake_trace::trace::Event::Zmq(z) if z.socket == "DEALER" && z.dir == mooncake_trace::trace::ZmqDir::Send)).unwrap();
    h1.events.truncate(last_send);
    assert!(checks(&h1).contains(&"LAYOUT-MISS-RESEND"));
    // A /query that does not list a registered worker.
    let mut i = load("vllm-0.33.0/i_bootstrap_register_query.jsonl");
    for e in i.events.iter_mut() {
        if let mooncake_trace::trace::Event::Http(h) = e {
            if h.path == "/query" && h.dir == mooncake_trace::trace::HttpDir::Response {
                h.body = Some(serde_json::json!({}));
                h.body_raw = "{}".into();
            }
        }
    }
    assert!(checks(&i).contains(&"QUERY-REFLECTS-REGISTER"));
}
