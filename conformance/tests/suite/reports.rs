//! What `run` reports (issue 29): case ids unique over every bundled trace; `run --list` saying what a run
//! would do under every filter; `WIRE-CANONICAL` saying where bytes part from msgspec's; a case whose runner
//! side deviated from the recording reported broken (`error`), not failed.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use mooncake_conformance::bundled::Data;
use mooncake_conformance::case_id::{bases, TraceKey};
use mooncake_conformance::play::{Role, Status};
use mooncake_conformance::run::{load_cases, run, RunConfig};
use mooncake_conformance::testee::TesteeSpec;
use mooncake_trace::trace::Trace;
use serde_json::Value as J;

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn cli_json(args: &[&str]) -> J {
    let o = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .args(args)
        .args(["--format", "json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("{args:?}: {e}\n{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    })
}

// ---- case ids ------------------------------------------------------------------------------------------

#[test]
fn case_ids_are_unique_over_every_bundled_trace_of_both_families() {
    // Push: the ids `run`, its reports and expected-failures files see.
    let push = Data::Embedded.traces("traces").unwrap();
    let cases = load_cases(&push, false).unwrap();
    let ids: BTreeSet<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), cases.len(), "a case id names two cases");
    // Every trace of every revision, pull included: the id prefix its cases take.
    let mut keys = vec![];
    for set in ["traces", "traces-pull"] {
        for input in Data::Embedded.traces(set).unwrap() {
            let t = Trace::load_input(&input).unwrap();
            keys.push(TraceKey::of_trace(&t).unwrap_or_else(|e| panic!("{}: {e}", input.name())));
        }
    }
    let revisions: BTreeSet<&str> = keys.iter().map(|k| k.revision.as_str()).collect();
    let spec = mooncake_wire::spec::Spec::builtin();
    for family in [spec.push(), spec.pull()] {
        for r in &family.revisions {
            assert!(revisions.contains(r.revision.as_str()), "no bundled trace of {}", r.revision);
        }
    }
    let b = bases(&keys);
    let unique: BTreeSet<&String> = b.iter().collect();
    assert_eq!(unique.len(), b.len(), "two traces make the same case ids: {b:#?}");
    // Ids are stable where nothing collides: only traces sharing a revision and a scenario carry a release.
    for (k, base) in keys.iter().zip(&b) {
        let shared = keys.iter().filter(|o| o.revision == k.revision && o.scenario == k.scenario).count() > 1;
        assert_eq!(*base != format!("{}/{}", k.revision, k.scenario), shared, "{base}");
    }
}

#[test]
fn two_traces_of_one_revision_scenario_and_release_are_refused() {
    let d = std::env::temp_dir().join(format!("mooncake-reports-dup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    for sub in ["a", "b"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
        let src = here().join("traces/vllm-0.33.0/a_single_success.jsonl");
        std::fs::copy(&src, d.join(sub).join("a_single_success.jsonl")).unwrap();
    }
    let inputs = mooncake_trace::jsonl::Input::files(std::slice::from_ref(&d)).unwrap();
    let e = load_cases(&inputs, false).err().expect("refused").to_string();
    assert!(e.contains("a/a_single_success.jsonl") && e.contains("b/a_single_success.jsonl"), "{e}");
    assert!(e.contains("vllm-0.33.0/a_single_success/"), "{e}");
}

// ---- run --list --------------------------------------------------------------------------------------------

/// `--list` under `--speaks`, `--revision`, `--case` and `--role` names the cases the run plays, each with
/// what the run then does with it: the same skips with the same reasons, the same cross-version revisions.
#[test]
fn run_list_says_what_the_run_does_under_every_filter() {
    let filters = ["--speaks", "0.33.0", "--revision", "0.19.0,0.32.0,0.33.0", "--case", "a_single_success"];
    let list = cli_json(&[&["run", "--list"][..], &filters].concat());
    let ran = cli_json(&[&["run"][..], &filters].concat());
    let (list, cases) = (list.as_array().unwrap(), ran["cases"].as_array().unwrap());
    let ids = |v: &[J]| v.iter().map(|c| c["id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(ids(list), ids(cases));
    let mut kinds = BTreeSet::new();
    for (l, c) in list.iter().zip(cases) {
        let would = l["would"].as_str().unwrap();
        kinds.insert(would);
        match would {
            "skip" => assert_eq!((&c["status"], &c["reason"]), (&J::from("skip"), &l["reason"]), "{l}"),
            "cross-version" => assert_eq!(c["testee_revision"], l["testee_revision"], "{l}"),
            _ => assert!(c["testee_revision"].is_null() && c["status"] != "skip", "{l} / {c}"),
        }
        assert!(l["revision"]
            .as_str()
            .is_some_and(|r| ["vllm-0.19.0..0.19.1", "vllm-0.32.0", "vllm-0.33.0"].contains(&r)));
    }
    assert_eq!(kinds.len(), 3, "the sample shows a native, a cross-version and a skipped case: {kinds:?}");
    // --role narrows the listing as it narrows the run, and --speaks still decides what is skipped.
    let pre = cli_json(&["run", "--list", "--speaks", "0.33.0", "--role", "prefiller"]);
    let pre = pre.as_array().unwrap();
    assert!(pre.iter().all(|c| c["role"] == "prefiller"));
    assert!(pre.iter().any(|c| c["would"] == "skip") && pre.iter().any(|c| c["would"] == "run"));
}

#[test]
fn run_list_text_counts_what_would_be_skipped() {
    let o = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .args(["run", "--list", "--speaks", "0.33.0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let skipped = text.lines().filter(|l| l.contains("  (skip: ")).count();
    let listed = text.lines().take_while(|l| !l.is_empty()).count();
    let summary = text.lines().find(|l| l.contains(" cases: ")).expect("a summary line");
    assert!(summary.starts_with(&format!("{listed} cases: {} would run", listed - skipped)), "{summary}");
    assert!(summary.contains(&format!("{skipped} would be skipped")), "{summary}");
    let per_reason: usize =
        text.lines().filter_map(|l| l.strip_prefix("  ")?.split_once(": ")?.0.parse::<usize>().ok()).sum();
    assert_eq!(per_reason, skipped);
}

// ---- WIRE-CANONICAL -------------------------------------------------------------------------------------

/// A recorded request with one int of `req_blocks` written wider than msgspec writes it: the path the codec
/// gives for the first differing byte names that int by its dict key.
#[test]
fn the_codec_names_the_value_at_a_byte_offset() {
    let codec = mooncake_wire::codec::Codec::builtin("vllm-0.33.0").unwrap();
    let trace = Trace::load(&here().join("traces/vllm-0.33.0/a_single_success.jsonl")).unwrap();
    let model = mooncake_trace::conversation::Conversation::new(trace).unwrap();
    let x = &model.exchanges[0];
    let bytes = x.request.bytes.clone();
    let req = x.request.value().unwrap();
    let (d_req, rb) = &req.req_blocks[0];
    let block = rb.blocks[0][1].as_u64().unwrap();
    assert!(block < 0x80, "a positive fixint");
    // The second block id of the first group: after `a?d-req-id`, `92`, transfer id, `91`, `9n`, first id.
    let key = [&[0xa0 | d_req.len() as u8][..], d_req.as_bytes()].concat();
    let at_key = bytes.windows(key.len()).position(|w| w == key).unwrap();
    let first = bytes[at_key + key.len()..].windows(1).position(|w| w[0] == rb.blocks[0][0].as_u64().unwrap() as u8);
    let off = at_key + key.len() + first.unwrap() + 1;
    assert_eq!(bytes[off] as u64, block);
    let mut wide = bytes[..off].to_vec();
    wide.extend([0xcc, block as u8]);
    wide.extend(&bytes[off + 1..]);
    assert_eq!(
        codec.decode("MooncakeXferMetadata", &wide).unwrap(),
        codec.decode("MooncakeXferMetadata", &bytes).unwrap()
    );
    let path = codec.path_at("MooncakeXferMetadata", &wide, off).unwrap();
    assert_eq!(path, format!("$.req_blocks[{}][1][0][1]", serde_json::to_string(d_req).unwrap()));
    assert_eq!(codec.path_at("MooncakeXferMetadata", &wide, 0).unwrap(), "$");
    assert!(codec.path_at("MooncakeXferMetadata", &wide, wide.len()).is_none());
}

/// Peers that add a field to what they send: the finding gives the offset, a short window of both encodings
/// and the path, and stays short however long the message.
#[test]
fn wire_canonical_says_where_the_bytes_part() {
    for (role, case) in
        [(Role::Decoder, "vllm-0.33.0/b_batch_success"), (Role::Prefiller, "vllm-0.33.0/b_batch_success")]
    {
        let mut c =
            RunConfig::paths(&[here().join("traces")], TesteeSpec::BuiltinWithFaults(vec!["extra_field".into()]))
                .unwrap();
        c.roles = vec![role];
        c.cases = vec![case.into()];
        c.slack = Duration::from_secs(2);
        let r = rt().block_on(run(c)).unwrap();
        let f: Vec<_> =
            r.results.iter().flat_map(|x| &x.findings).filter(|f| f.check.as_str() == "WIRE-CANONICAL").collect();
        assert!(!f.is_empty(), "{role:?}: {:#?}", r.results);
        for f in f {
            let d = &f.detail;
            println!("{role:?}: {d}");
            assert!(d.contains("first difference at byte ") && d.contains(", in `$"), "{d}");
            assert!(d.contains("sent ") && d.contains(", msgspec ") && d.contains('|'), "{d}");
            assert!(d.len() < 300, "{} characters: {d}", d.len());
        }
    }
}

// ---- RUNNER-DEVIATION ---------------------------------------------------------------------------------------

/// The bundled scenario entry `name` with `extra` lines added, as a `--scenarios` overlay.
fn scenario_with(name: &str, extra: &str) -> String {
    let text = std::fs::read_to_string(here().join("scenarios.toml")).unwrap();
    let head = format!("[scenario.{name}]\n");
    let start = text.find(&head).unwrap();
    let body = text[start..].split("\n\n").next().unwrap();
    format!("{body}\n{extra}\n")
}

fn deviated(testee: TesteeSpec, overlay: &str) -> mooncake_conformance::play::CaseResult {
    let mut c = RunConfig::paths(&[here().join("traces/vllm-0.33.0/a_single_success.jsonl")], testee).unwrap();
    c.roles = vec![Role::Decoder];
    c.scenarios = c.scenarios.clone().overlay(overlay).unwrap();
    c.slack = Duration::from_secs(2);
    let r = rt().block_on(run(c)).unwrap();
    r.results.into_iter().next().unwrap()
}

/// The runner's own prefiller made to fail its write (which vLLM's did not): the decoder under test did
/// nothing wrong, so the case is broken — `error`, with a RUNNER-DEVIATION finding — not failed.
#[test]
fn a_runner_deviation_breaks_the_case() {
    let r = deviated(TesteeSpec::Builtin, &scenario_with("a_single_success", "fail_transfers = 1"));
    println!("{}: {} — {:?}", r.id, r.status.word(), r.reason);
    assert_eq!(r.status, Status::Error, "{r:#?}");
    assert!(r.findings.iter().any(|f| f.check.as_str() == "RUNNER-DEVIATION"), "{r:#?}");
    assert!(r.reason.as_deref().unwrap_or("").contains("broken case"), "{r:#?}");
}

/// A decoder that sends the wrong request ids gets other replies than vLLM's did: the deviation follows from
/// the decoder's own fault, so the case fails on that (and notes the deviation).
#[test]
fn a_deviation_the_decoder_caused_fails_the_case() {
    let r = deviated(TesteeSpec::BuiltinWithFaults(vec!["wrong_id".into()]), &scenario_with("a_single_success", ""));
    println!("{}: {} — {:?}", r.id, r.status.word(), r.notes);
    assert_eq!(r.status, Status::Fail, "{r:#?}");
    assert!(r.findings.iter().any(|f| f.check.as_str() == "REQUEST-DIFF"), "{r:#?}");
    assert!(r.notes.iter().any(|n| n.contains("RUNNER-DEVIATION")), "{r:#?}");
}
