//! `probe`: the plan derived from spec/ tells generation-2 revisions apart exactly as far as what their
//! prefillers decode differs, never sends a message any revision reads as a pull, and against reference
//! prefillers of every generation-2 revision (processes, over real HTTP, ZeroMQ and TCP) reports a range that
//! holds each one's revision and no revision whose wire differs; duplicate registrations, unreachable workers
//! and engines, and a missing bootstrap server give the exit codes the help states.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;

use serde_json::Value as J;

use mooncake_conformance::probe::identify::{Answer, Plan};
use mooncake_conformance::testee::builtin_peer;
use mooncake_wire::codec::Codec;
use mooncake_wire::spec::{Revision, Spec};

fn gen2() -> Vec<Arc<Revision>> {
    Spec::builtin().push().revisions.iter().filter(|r| r.generation == 2).cloned().collect()
}

/// What a revision's prefiller decodes: its pull's and heartbeat's fields (name and type), as the spec states.
fn inbound(r: &Revision) -> Vec<(String, String)> {
    ["MooncakeXferMetadata", "MooncakeLeaseHeartbeat"]
        .iter()
        .filter_map(|s| r.structs.get(*s).map(|d| (s, d)))
        .flat_map(|(s, d)| d.fields.iter().map(move |f| (format!("{s}.{}", f.name), f.ty.to_string())))
        .collect()
}

#[test]
fn the_plan_tells_revisions_apart_exactly_where_what_their_prefillers_decode_differs() {
    let plan = Plan::builtin("probe-test-nonce");
    assert!(!plan.probes.is_empty());
    let classes = plan.classes();
    let class_of = |rev: &str, leases: Option<bool>| {
        classes.iter().position(|c| c.iter().any(|i| i.revision == rev && i.leases == leases)).unwrap()
    };
    let ids: Vec<(Arc<Revision>, Option<bool>)> = gen2()
        .into_iter()
        .flat_map(|r| {
            let leases = if r.structs.contains_key("MooncakeLeaseHeartbeat") {
                vec![Some(false), Some(true)]
            } else {
                vec![None]
            };
            leases.into_iter().map(move |l| (r.clone(), l))
        })
        .collect();
    assert_eq!(ids.len(), plan.identities.len(), "every generation-2 revision, 0.34.0 with leases on and off");
    for (a, la) in &ids {
        for (b, lb) in &ids {
            let same_wire = inbound(a) == inbound(b) && la == lb;
            let same_class = class_of(&a.revision, *la) == class_of(&b.revision, *lb);
            assert_eq!(same_wire, same_class, "{} ({la:?}) and {} ({lb:?})", a.revision, b.revision);
        }
    }
    // The ranges the probe cannot split are exactly those: at least one, and every one of identical wires.
    assert!(classes.iter().any(|c| c.len() > 1), "revisions with the same inbound wire share a class");
}

#[test]
fn no_probe_message_decodes_as_a_pull_in_any_revision() {
    let plan = Plan::builtin("probe-test-nonce");
    assert!(plan.candidates > plan.probes.len());
    for p in &plan.probes {
        assert!(p.payload.len() < 256 && p.payload[0] == 0x81, "one small one-field map: {}", p.label);
        for r in gen2() {
            let c = Codec::builtin(&r.revision).unwrap();
            assert!(
                c.decode("MooncakeXferMetadata", &p.payload).is_err(),
                "{} decodes as a pull of {}",
                p.label,
                r.revision
            );
        }
    }
}

#[test]
fn identify_is_a_pure_function_of_the_answers() {
    let plan = Plan::builtin("n");
    for (i, who) in plan.identities.iter().enumerate() {
        let answers: Vec<Option<Answer>> = plan.probes.iter().map(|p| Some(p.expected[i].clone())).collect();
        let id = plan.identify(&answers);
        assert!(id.identities.contains(who), "{} not in its own answers' range {}", who.revision, id.range);
        for other in &id.identities {
            let j = plan.identities.iter().position(|x| x == other).unwrap();
            assert!(
                plan.probes.iter().all(|p| p.expected[j] == p.expected[i]),
                "{} matched {}",
                other.revision,
                who.revision
            );
        }
        // An unanswered probe narrows nothing; an answer no revision gives matches none.
        let mut partial = answers.clone();
        partial[0] = None;
        assert!(plan.identify(&partial).identities.len() >= id.identities.len());
        let mut wrong = answers;
        wrong[0] = Some(Answer { status: 2, err_msg: Some("something else".into()) });
        assert!(plan.identify(&wrong).identities.is_empty());
        assert_eq!(plan.identify(&wrong).range, "none");
    }
}

/// A `mooncake-peer` process, its standard input held open (it stops when that closes), killed on drop.
struct Peer {
    child: Child,
    _stdin: ChildStdin,
}

impl Peer {
    /// Starts `mooncake-peer --log error ARGS` and returns it with its first answer after the hello.
    fn start(args: &[&str]) -> (Peer, J) {
        let mut child = Command::new(builtin_peer().unwrap())
            .args(["--log", "error"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let answer = loop {
            let line = lines.next().expect("the peer answers").unwrap();
            let v: J = serde_json::from_str(&line).unwrap();
            if v.get("ok").is_some() {
                break v;
            }
        };
        assert_eq!(answer["ok"], true, "{args:?}: {answer}");
        (Peer { child, _stdin: stdin }, answer)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn layout_file(dir: &std::path::Path) -> String {
    let p = dir.join("layout.json");
    let layout = serde_json::json!({
        "kv_caches_base_addr": [0x1000_0000u64], "block_lens": [4096], "kv_block_lens": [4096],
        "registered_layer_names": ["model.layers.0.self_attn"], "registered_layer_indices": [0],
        "registered_group_indices": [0], "registered_shared_group_ids": [[0]], "registered_row_offsets": [0],
        "num_blocks": 16,
    });
    std::fs::write(&p, layout.to_string()).unwrap();
    p.to_string_lossy().into_owned()
}

/// `mooncake-conformance probe ARGS --json`: exit code and report.
fn probe(args: &[&str]) -> (i32, J) {
    let out = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .arg("probe")
        .args(args)
        .args(["--json", "--timeout", "2"])
        .output()
        .unwrap();
    let code = out.status.code().unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(J::Null);
    (code, report)
}

fn post(url: &str, body: J) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (status, _) = rt
        .block_on(mooncake_io::http::request(
            "POST",
            &format!("{url}/register"),
            Some(&body),
            std::time::Duration::from_secs(5),
        ))
        .unwrap();
    assert_eq!(status, 200, "{body}");
}

fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn kinds(report: &J) -> Vec<String> {
    report["problems"].as_array().unwrap().iter().map(|p| p["kind"].as_str().unwrap().to_string()).collect()
}

/// The reference prefiller of every generation-2 revision (0.34.0 with and without leases), one DP rank each
/// under one bootstrap server, and a decoder's transfer engine.
#[test]
fn probe_reports_each_reference_prefillers_revision_range_and_the_findings_with_their_exit_codes() {
    let dir = std::env::temp_dir().join(format!("mooncake-probe-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let layout = layout_file(&dir);
    let (_boot, a) = Peer::start(&["bootstrap", "--bind", "127.0.0.1:0"]);
    let url = a["url"].as_str().unwrap().to_string();
    let mut running: Vec<(String, Option<bool>)> = vec![];
    let mut peers = vec![];
    for r in gen2() {
        let leases: &[bool] = if r.structs.contains_key("MooncakeLeaseHeartbeat") { &[false, true] } else { &[false] };
        for &on in leases {
            let dp = running.len().to_string();
            let mut args = vec![
                "prefiller",
                "--revision",
                &r.revision,
                "--engine-id",
                "e",
                "--dp-rank",
                &dp,
                "--layout",
                &layout,
                "--bootstrap",
                &url,
            ];
            if on {
                args.extend(["--kv-lease-duration", "30"]);
            }
            let (p, _) = Peer::start(&args);
            peers.push(p);
            let leases_known = r.structs.contains_key("MooncakeLeaseHeartbeat").then_some(on);
            running.push((r.revision.clone(), leases_known));
        }
    }
    let (_dec, d) = Peer::start(&["decoder", "--layout", &layout]);
    let session = d["session"].as_str().unwrap().to_string();

    let t = std::time::Instant::now();
    let (code, report) = probe(&["--bootstrap", &url, "--engine", &session]);
    assert_eq!(code, 0, "a healthy deployment: {report:#}");
    check_ranges(&report, &running);
    assert_eq!(report["engines"][0]["protocol"], "tcp");
    assert_eq!(report["engines"][0]["data_unreachable"], J::Null);
    eprintln!("probe of {} workers: {:?}", running.len(), t.elapsed());

    // A decoder revision: 0.33.0's pairs with 0.16.0 - 0.18.1 break always (flat block lists).
    let (code, report) = probe(&["--bootstrap", &url, "--decoder-revision", "0.33.0"]);
    assert_eq!(code, 1);
    assert!(kinds(&report).contains(&"incompatible-pair".to_string()), "{:?}", kinds(&report));
    assert_eq!(report["workers"][0]["pairing"]["verdict"], "incompatible");
    let own = running.iter().position(|(r, _)| r == "vllm-0.33.0").unwrap();
    assert_eq!(report["workers"][own]["pairing"]["verdict"], "compatible");

    // The same as a table: a header and one line per worker, each with its range.
    let out = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .args(["probe", "--bootstrap", &url, "--decoder-revision", "0.33.0", "--timeout", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let host = format!("  {}  ", url.trim_start_matches("http://"));
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with(&host)).collect();
    assert_eq!(rows.len(), running.len(), "{text}");
    assert!(rows.iter().any(|l| l.contains("0.34.0 (leases on)") && l.contains("conditional")), "{text}");
    assert!(text.contains("cannot be told apart on the wire"), "{text}");

    // An engine nobody serves is a finding.
    let gone = format!("127.0.0.1:{}", closed_port());
    let (code, report) = probe(&["--bootstrap", &url, "--engine", &gone]);
    assert_eq!((code, kinds(&report)), (1, vec!["engine".to_string()]));

    // A second slot registered with the first worker's address: a duplicate registration.
    let first = report["workers"][0]["worker"]["addr"].as_str().unwrap().to_string();
    post(&url, serde_json::json!({"engine_id": "e", "dp_rank": 0, "tp_rank": 1, "pp_rank": 0, "addr": first}));
    let (code, report) = probe(&["--bootstrap", &url]);
    assert_eq!((code, kinds(&report)), (1, vec!["duplicate-registration".to_string()]), "{report:#}");

    // A worker registered at an address where nothing listens.
    let addr = format!("tcp://127.0.0.1:{}", closed_port());
    post(&url, serde_json::json!({"engine_id": "gone", "dp_rank": 99, "tp_rank": 0, "pp_rank": 0, "addr": addr}));
    let (code, report) = probe(&["--bootstrap", &url]);
    assert_eq!(code, 1);
    assert!(kinds(&report).contains(&"unreachable-worker".to_string()), "{:?}", kinds(&report));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each worker's range holds its own revision and no revision whose inbound wire differs from it.
fn check_ranges(report: &J, running: &[(String, Option<bool>)]) {
    let workers = report["workers"].as_array().unwrap();
    assert_eq!(workers.len(), running.len());
    let spec = Spec::builtin();
    for (w, (rev, leases)) in workers.iter().zip(running) {
        let got: Vec<(String, Option<bool>)> = w["identification"]["identities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i["revision"].as_str().unwrap().to_string(), i["leases"].as_bool()))
            .collect();
        assert!(got.contains(&(rev.clone(), *leases)), "{rev} {leases:?} not in {got:?}");
        let mine = inbound(spec.revision(rev).unwrap());
        for (g, l) in &got {
            assert_eq!(inbound(spec.revision(g).unwrap()), mine, "{rev} reported as possibly {g}");
            assert_eq!(l, leases, "{rev}: leases");
        }
    }
}

#[test]
fn no_bootstrap_server_is_exit_3_and_bad_usage_exit_2() {
    let url = format!("http://127.0.0.1:{}", closed_port());
    let (code, _) = probe(&["--bootstrap", &url]);
    assert_eq!(code, 3);
    assert_eq!(probe(&["--bootstrap", "ftp://127.0.0.1:1"]).0, 2);
    assert_eq!(probe(&[]).0, 2);
    assert_eq!(
        probe(&["--bootstrap", &url, "--decoder-revision", "0.13.0"]).0,
        2,
        "generation 1 has no bootstrap server"
    );
    assert_eq!(probe(&["--bootstrap", &url, "--timeout", "0"]).0, 2);
}

#[test]
fn a_table_with_a_hole_or_a_shared_address_is_a_problem() {
    use mooncake_conformance::probe::{duplicates, gaps, workers};
    let t = serde_json::json!({
        "0": {"engine_id": "e", "worker_addr": {"0": {"0": "tcp://10.0.0.1:5000"}, "2": {"0": "tcp://10.0.0.1:5002"}}},
        "1": {"engine_id": "e", "worker_addr": {"0": {"0": "tcp://10.0.0.1:5000"}}},
    });
    let ws = workers("http://b:8998", &t).unwrap();
    assert_eq!(ws.len(), 3);
    let g = gaps(&ws);
    assert_eq!(g.len(), 1, "{g:?}");
    assert!(g[0].detail.contains("dp 0: tp 1 pp 0 is not registered"), "{}", g[0].detail);
    let d = duplicates(&ws);
    assert_eq!(d.len(), 1);
    assert!(d[0].detail.starts_with("tcp://10.0.0.1:5000 is registered by"), "{}", d[0].detail);
    assert!(workers("http://b:8998", &serde_json::json!({"0": {"engine_id": 3}})).is_err());
    assert!(workers("http://b:8998", &serde_json::json!([])).is_err());
}

/// The pair verdicts agree with the committed compatibility matrix, which observes each ordered pair of the
/// reference peers over real sockets: a cell where every scenario works has no row that always breaks (but the
/// KV-layout difference no peer can observe, marked ⚠), a cell where some scenario breaks has a breaking row.
#[test]
fn pair_verdicts_agree_with_the_observed_compatibility_matrix() {
    let Some(_) = crate::in_repository(
        "schema/push/compat-matrix.md",
        "probe::pair_verdicts_agree_with_the_observed_compatibility_matrix",
    ) else {
        return;
    };
    use mooncake_conformance::probe::pairing;
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../schema/push/compat-matrix.md"),
    )
    .unwrap();
    let mut lines = text.lines().skip_while(|l| !l.starts_with("| decoder ↓ / prefiller →"));
    let head: Vec<String> =
        lines.next().unwrap().split('|').skip(2).map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
    let spec = Spec::builtin();
    let mut cells = 0;
    for row in lines.skip(1).take_while(|l| l.starts_with("| **")) {
        let c: Vec<&str> = row.split('|').skip(1).map(str::trim).collect();
        let d = spec.revision(&format!("vllm-{}", c[0].trim_matches('*'))).unwrap();
        for (p, cell) in head.iter().zip(&c[1..]) {
            let p = spec.revision(&format!("vllm-{p}")).unwrap();
            if d.generation != 2 || p.generation != 2 || *cell == "=" || cell.is_empty() {
                continue;
            }
            let (always, when) = pairing(d, p);
            let layout = always.iter().any(|r| r.starts_with("behaviour.required_kv_layout"));
            let why =
                format!("decoder {} prefiller {}: {cell}: always {always:?}, when {when:?}", d.revision, p.revision);
            assert_eq!(cell.contains('⚠'), layout, "{why}");
            if cell.starts_with('✓') {
                assert!(always.iter().all(|r| r.starts_with("behaviour.required_kv_layout")), "{why}");
            } else {
                assert!(cell.starts_with('✗'), "{why}");
                assert!(!always.is_empty() || !when.is_empty(), "{why}");
            }
            cells += 1;
        }
    }
    assert_eq!(cells, 12 * 11, "every ordered pair of the 12 generation-2 revisions");
}

/// A 0.34.0 prefiller seen with leases off pairs with a 0.33.0 decoder; with leases on only under the lease
/// condition (`diff`'s `behaviour.kv_leases` row).
#[test]
fn the_lease_state_the_probe_sees_decides_the_lease_row() {
    use mooncake_conformance::probe::pair_verdict;
    let plan = Plan::builtin("n");
    let d = Spec::builtin().revision("vllm-0.33.0").unwrap();
    for (leases, verdict) in [(false, "compatible"), (true, "conditional")] {
        let i = plan.identities.iter().position(|x| x.revision == "vllm-0.34.0" && x.leases == Some(leases)).unwrap();
        let answers: Vec<Option<Answer>> = plan.probes.iter().map(|p| Some(p.expected[i].clone())).collect();
        let v = pair_verdict(d, &plan.identify(&answers)).unwrap();
        assert_eq!(v.verdict, verdict, "leases {leases}: {v:?}");
    }
}
