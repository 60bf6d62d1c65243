//! The command line at its edges (issue 14): one test per defect a new user hit — the command, its exit code
//! and its message. Exit codes everywhere: 0 agree, 1 disagreement, 2 bad usage or input, 3 environment.

use crate::common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"));
    c.current_dir(std::env::temp_dir());
    c
}

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    #[allow(dead_code)]
    fn first_line(&self) -> &str {
        self.stdout.lines().next().or_else(|| self.stderr.lines().next()).unwrap_or("")
    }
}

fn run(args: &[&str]) -> Out {
    let o = bin().args(args).stdin(Stdio::null()).output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

/// Asserts the exit code and that stdout or stderr contains `text`.
#[track_caller]
fn expect(args: &[&str], code: i32, text: &str) -> Out {
    let o = run(args);
    assert_eq!(o.code, code, "{args:?}\nstdout: {}\nstderr: {}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains(text) || o.stderr.contains(text),
        "{args:?}: no {text:?} in\nstdout: {}\nstderr: {}",
        o.stdout,
        o.stderr
    );
    o
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mooncake-cli-edges-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

// ---- one resolver for revision names --------------------------------------------------------------------

#[test]
fn hash_wire_of_a_bare_release_is_vllms_not_vllm_ascends() {
    let o = expect(&["hash", "wire", "--revision", "0.18.0"], 0, "vllm-0.16.0..0.18.1");
    assert!(!o.stdout.contains("ascend"), "{}", o.stdout);
    expect(&["hash", "wire", "--revision", "ascend:0.18.0"], 0, "vllm-ascend-0.18.0");
    expect(&["hash", "wire", "--revision", "vllm-ascend-0.18.0"], 0, "vllm-ascend-0.18.0");
    expect(&["hash", "wire", "--revision", "v0.18.0"], 0, "vllm-0.16.0..0.18.1");
}

#[test]
fn hash_check_of_two_releases_of_one_revision_is_compatible() {
    expect(&["hash", "check", "0.18.0", "0.18.1"], 0, "are the same revision");
}

#[test]
fn diff_of_two_vllm_releases_stays_in_the_push_family() {
    let o =
        expect(&["diff", "0.18.0", "0.19.0", "--format", "summary"], 1, "vllm-0.16.0..0.18.1 → vllm-0.19.0..0.19.1");
    assert!(!o.stdout.contains("ascend"));
    expect(&["diff", "0.33.0", "ascend:0.18.0"], 2, "a diff compares revisions of one protocol family");
}

#[test]
fn diff_and_hash_check_take_the_same_names() {
    expect(
        &["diff", "vllm-0.19.1", "vllm-0.20.0", "--format", "summary"],
        1,
        "vllm-0.19.0..0.19.1 → vllm-0.20.0..0.23.0",
    );
    expect(&["hash", "check", "vllm-0.19.1", "vllm-0.20.0"], 1, "incompatible");
    expect(&["diff", "vllm:0.32.0", "v0.33.0", "--format", "summary"], 1, "vllm-0.32.0 → vllm-0.33.0");
}

#[test]
fn near_misses_get_did_you_mean() {
    for cmd in [
        &["hash", "check", "vllm-0.33", "0.33.0"][..],
        &["hash", "wire", "--revision", "0.33"],
        &["diff", "0.32.0", "0.33"],
        &["run", "--speaks", "0.33"],
    ] {
        expect(cmd, 2, "did you mean `0.33.0`?");
    }
    expect(&["key", "build", "--release", "0.33", "model_name=m"], 2, "did you mean `0.33.0`?");
    expect(&["hash", "wire", "--revision", "0.99.0"], 2, "vLLM 0.99.0 is in no revision of the spec");
}

// ---- a closed pipe ends quietly with status 0 -----------------------------------------------------------

/// Runs the command with its standard output closed before it writes (as `… | head -1` does once it has its
/// line): exit 0, nothing on standard error (no panic, no backtrace).
#[track_caller]
fn closed_pipe(args: &[&str]) {
    let mut child =
        bin().args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0), "{args:?}: {err}");
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
}

#[test]
fn key_grammars_into_a_closed_pipe() {
    closed_pipe(&["key", "grammars", "--format", "json"]);
}

#[test]
fn validate_vectors_hash_and_run_into_a_closed_pipe() {
    closed_pipe(&["validate", p(&here().join("traces"))]);
    closed_pipe(&["vectors", p(&here().join("vectors/vllm-0.33.0"))]);
    closed_pipe(&["hash", "wire"]);
    closed_pipe(&["run", "--case", "vllm-0.33.0/a_single_success/bootstrap"]);
}

// ---- exit codes: 0 / 1 / 2 as the README says ----------------------------------------------------------

#[test]
fn key_build_usage_mistakes_exit_2() {
    expect(&["key", "build", "--release", "0.33.0"], 2, "nothing to build: give FIELD=VALUE pairs");
    expect(&["key", "build", "--release", "0.33.0", "bogus=1"], 2, "`bogus` is not a field of vllm-0.30 keys");
    expect(
        &["key", "build", "--release", "0.33.0", "--algo", "md5", "--tokens", "1,2"],
        2,
        "invalid value 'md5' for '--algo",
    );
    expect(&["key", "build", "--release", "0.33.0", "--block-size", "0", "--tokens", "1,2"], 2, "must be at least 1");
    expect(&["key", "build", "--release", "0.33.0", "model_name=m"], 2, "no chunk_hash");
    expect(
        &["key", "build", "--release", "0.33.0", "model_name=m", "chunk_hash=abcd"],
        0,
        "m@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@abcd",
    );
}

#[test]
fn key_parse_names_the_field_and_byte_that_do_not_fit() {
    let o = expect(
        &["key", "parse", "--release", "0.33.0", "Qwen@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@zzzz"],
        1,
        "at byte 43 expected `chunk_hash`",
    );
    assert!(o.stdout.contains("found `zzzz`"), "{}", o.stdout);
    assert!(!o.stdout.contains("store_namespace"), "{}", o.stdout);
    expect(
        &["key", "parse", "--release", "0.33.0", "Qwen@tp_rank:x@pcp0@dcp0@pp_rank:0@group:0@ab"],
        1,
        "at byte 13 expected `tp_rank`",
    );
}

#[test]
fn key_build_and_key_parse_take_the_same_field_names() {
    // `model=` (the configured model; its last path component) and `model_name=` work in both.
    let key = expect(&["key", "build", "--release", "0.33.0", "model=/models/Qwen", "chunk_hash=ab"], 0, "Qwen@")
        .stdout
        .trim()
        .to_string();
    expect(&["key", "build", "--release", "0.33.0", "model_name=Qwen", "chunk_hash=ab"], 0, &key);
    expect(&["key", "parse", "--release", "0.33.0", &key, "--hint", "model=/models/Qwen"], 0, "model_name = \"Qwen\"");
    expect(&["key", "parse", "--release", "0.33.0", &key, "--hint", "model_name=Qwen"], 0, "model_name = \"Qwen\"");
    expect(
        &["key", "parse", "--release", "0.33.0", &key, "--hint", "bogus=1"],
        2,
        "--hint `bogus` is not a field of vllm-0.30 keys",
    );
}

// ---- nothing to do is an error ------------------------------------------------------------------------

#[test]
fn an_empty_directory_is_nothing_to_check() {
    let d = tempdir("empty");
    expect(&["run", p(&d)], 2, "no trace files (*.jsonl) in");
    expect(&["validate", p(&d)], 2, "no trace files (*.jsonl) in");
    expect(&["vectors", p(&d)], 2, "no vector files");
    expect(&["validate", p(&d), "--allow-empty"], 0, "validate: 0 traces");
}

#[test]
fn a_case_filter_that_matches_nothing_says_what_was_looked_for() {
    let dirs = common::bundled_dirs();
    let cases: usize = dirs.iter().map(|d| common::expected_cases(d)).sum();
    let traces: usize = dirs.iter().map(|d| common::trace_files(d).len()).sum();
    expect(&["run", "--case", "typo"], 2, &format!("no case matches --case typo (of {cases} cases in {traces} traces"));
    expect(&["run", "--case", "typo", "--list"], 2, "no case matches --case typo");
}

#[test]
fn a_trace_saved_as_json_is_named_not_ignored() {
    let d = tempdir("json");
    std::fs::copy(here().join("traces/vllm-0.33.0/a_single_success.jsonl"), d.join("a_single_success.json")).unwrap();
    expect(&["validate", p(&d)], 2, "a_single_success.json: not read — only *.jsonl files are read");
    expect(&["run", p(&d)], 2, "a_single_success.json: not read");
    // Named directly, it is read whatever its name.
    expect(&["validate", p(&d.join("a_single_success.json"))], 0, "validate: 1 traces");
}

#[test]
fn a_trace_with_only_its_header_is_nothing_to_check() {
    let d = tempdir("header");
    let src = std::fs::read_to_string(here().join("traces/vllm-0.33.0/a_single_success.jsonl")).unwrap();
    let f = d.join("header_only.jsonl");
    std::fs::write(&f, format!("{}\n", src.lines().next().unwrap())).unwrap();
    expect(&["validate", p(&f)], 2, "no events after the header line");
    expect(&["run", p(&f)], 2, "no events after the header line");
    expect(&["validate", p(&f), "--allow-empty"], 0, "validate: 1 traces");
}

#[test]
fn the_same_empty_file_is_exit_2_for_validate_and_run() {
    let d = tempdir("emptyfile");
    let f = d.join("empty.jsonl");
    std::fs::write(&f, "").unwrap();
    expect(&["validate", p(&f)], 2, "an empty file, not a trace");
    expect(&["run", p(&f)], 2, "an empty file, not a trace");
    expect(&["vectors", p(&f)], 2, "an empty file, not a vector file");
}

#[test]
fn files_of_the_wrong_format_are_named() {
    let vec_file = here().join("vectors/vllm-0.33.0/MooncakeXferResponse.jsonl");
    expect(&["validate", p(&vec_file)], 2, "not a trace: the header's format is `mooncake-vectors`");
    let trace = here().join("traces/vllm-0.33.0/a_single_success.jsonl");
    expect(&["vectors", p(&trace)], 2, "not a vector file: the header's format is `mooncake-trace`, expected mooncake-vectors or mooncake-golden (a trace");
}

// ---- testees: shell quoting, standard error, death --------------------------------------------------

/// A testee script in a directory whose name has a space; it says hello as `name` with the given revisions,
/// and `on_start` is what it does when told to start a role.
fn script_testee(tag: &str, revisions: &str, on_start: &str) -> PathBuf {
    let d = tempdir(tag).join("with space");
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("peer.sh");
    let body = format!(
        "#!/bin/sh\necho \"testee starting as $1\" >&2\necho '{{\"hello\": \"mooncake-testee\", \"protocol\": 1, \"name\": \"'\"$1\"'\", \"revisions\": {revisions}, \"roles\": [\"prefiller\", \"decoder\", \"bootstrap\"]}}'\nwhile read -r line; do\n  case \"$line\" in\n    *'\"start\"'*) {on_start} ;;\n    *) echo '{{\"ok\": true}}' ;;\n  esac\ndone\n"
    );
    std::fs::write(&f, body).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::PermissionsExt::set_mode(&mut std::fs::metadata(&f).unwrap().permissions(), 0o755);
    Command::new("chmod").arg("755").arg(&f).status().unwrap();
    f
}

#[test]
fn a_testee_command_line_is_split_as_a_shell_would() {
    let f = script_testee(
        "quote",
        "[\"vllm-0.33.0\"]",
        "echo 'cannot start: out of memory' >&2; echo '{\"ok\": false, \"error\": \"no\"}'",
    );
    let testee = format!("'{}' 'a b'", f.display());
    // The hello's name is the script's first argument: one argument with a space in it.
    let o =
        expect(&["run", "--testee", &testee, "--case", "vllm-0.33.0/a_single_success/bootstrap"], 1, "against a b —");
    // A failed case shows the last lines of the testee's standard error.
    assert!(
        o.stdout.contains("testee standard error") && o.stdout.contains("| cannot start: out of memory"),
        "{}",
        o.stdout
    );
    expect(&["run", "--testee", "'unclosed", "--list"], 2, "--testee `'unclosed`");
}

#[test]
fn a_testee_that_dies_is_an_environment_failure_with_its_stderr() {
    let f = script_testee("dies", "[\"vllm-0.33.0\"]", "echo 'thread main panicked: boom' >&2; exit 7");
    let logs = tempdir("logs");
    let o = expect(
        &[
            "run",
            "--testee",
            &format!("'{}' x", f.display()),
            "--case",
            "vllm-0.33.0/a_single_success/bootstrap",
            "--testee-log",
            p(&logs),
        ],
        3,
        "the testee died during `start` (exit status 7)",
    );
    assert!(o.stdout.contains("ERROR") && o.stdout.contains("thread main panicked: boom"), "{}", o.stdout);
    let log = std::fs::read_to_string(logs.join("vllm-0.33.0__a_single_success__bootstrap.log")).unwrap();
    assert!(log.contains("thread main panicked: boom") && log.contains("testee starting as x"), "{log}");
}

#[test]
fn a_testee_that_exits_before_its_hello_shows_why() {
    let d = tempdir("nohello");
    let f = d.join("peer.sh");
    std::fs::write(&f, "#!/bin/sh\necho 'error while loading shared libraries: libzmq.so.5' >&2\nexit 127\n").unwrap();
    Command::new("chmod").arg("755").arg(&f).status().unwrap();
    expect(&["run", "--testee", p(&f), "--case", "a_single_success"], 3, "libzmq.so.5");
    expect(
        &["run", "--testee", "/no/such/peer", "--case", "a_single_success"],
        2,
        "cannot start testee `/no/such/peer`",
    );
}

#[test]
fn a_testee_that_speaks_none_of_the_revisions_is_not_a_pass() {
    // Generation 1 only: no recorded (generation 2) case can run, so every case is skipped.
    let f = script_testee("norev", "[\"vllm-0.13.0..0.15.1\"]", "echo '{\"ok\": true}'");
    let testee = format!("'{}'", f.display());
    let o = expect(
        &["run", "--testee", &testee, "--case", "vllm-0.33.0/a_single_success/prefiller"],
        2,
        "every case was skipped, nothing was checked",
    );
    assert!(o.stdout.contains("1 skipped"), "{}", o.stdout);
    assert!(
        o.stdout.contains("NOTHING CHECKED") && !o.stdout.contains("— OK"),
        "the summary line must not say OK: {}",
        o.stdout
    );
    expect(
        &["run", "--testee", &testee, "--case", "vllm-0.33.0/a_single_success/prefiller", "--allow-empty"],
        0,
        "1 skipped",
    );
}

// ---- replay: endpoints, nothing listening, ports in use ------------------------------------------------

#[test]
fn replay_endpoints_are_checked_before_anything_runs() {
    let trace = here().join("traces/vllm-0.33.0/i_bootstrap_register_query.jsonl");
    let t0 = std::time::Instant::now();
    expect(
        &["replay", "--play", "client", "--peer", "tcp://127.0.0.1:8998", p(&trace)],
        2,
        "a bootstrap server URL http://HOST:PORT",
    );
    expect(
        &["replay", "--play", "decoder", "--peer", "http://127.0.0.1:5555", p(&trace)],
        2,
        "a ZeroMQ endpoint tcp://HOST:PORT",
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(3), "no waiting on a wrong scheme");
}

#[test]
fn nothing_listening_at_peer_is_an_environment_failure() {
    // A port that was free a moment ago.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let a = here().join("traces/vllm-0.33.0/a_single_success.jsonl");
    let i = here().join("traces/vllm-0.33.0/i_bootstrap_register_query.jsonl");
    expect(
        &["replay", "--play", "decoder", "--peer", &format!("tcp://127.0.0.1:{port}"), p(&a)],
        3,
        &format!("nothing is listening at tcp://127.0.0.1:{port}"),
    );
    expect(
        &["replay", "--play", "client", "--peer", &format!("http://127.0.0.1:{port}"), p(&i)],
        3,
        &format!("nothing is listening at http://127.0.0.1:{port}"),
    );
}

#[test]
fn a_port_in_use_is_an_environment_failure() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let a = here().join("traces/vllm-0.33.0/a_single_success.jsonl");
    expect(
        &["replay", "--play", "prefiller", "--listen", &format!("tcp://127.0.0.1:{port}"), p(&a)],
        3,
        "the port is in use",
    );
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    expect(
        &[
            "replay",
            "--play",
            "prefiller",
            "--listen",
            &format!("tcp://127.0.0.1:{free}"),
            "--bootstrap-bind",
            &format!("127.0.0.1:{port}"),
            p(&a),
        ],
        3,
        "the port is in use",
    );
}

// ---- reports, progress, selection --------------------------------------------------------------------

#[test]
fn report_paths_are_checked_before_the_run() {
    let t0 = std::time::Instant::now();
    let o = expect(&["run", "--junit", "/nonexistent/dir/r.xml"], 2, "--junit /nonexistent/dir/r.xml");
    assert!(o.stdout.is_empty(), "nothing ran: {}", o.stdout);
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    expect(&["run", "--markdown", "/nonexistent/dir/r.md"], 2, "--markdown /nonexistent/dir/r.md");
    expect(&["run", "--json", "/nonexistent/dir/r.json"], 2, "--json /nonexistent/dir/r.json");
    let d = tempdir("reports");
    let j = d.join("r.json");
    expect(
        &["run", "--case", "vllm-0.33.0/a_single_success/bootstrap", "--json", p(&j), "--junit", p(&d.join("r.xml"))],
        0,
        "1 passed",
    );
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    assert_eq!(v["summary"]["passed"], 1);
}

#[test]
fn piped_output_shows_one_line_per_finished_case() {
    // Standard error is a pipe here: no bar, one line per case as it finishes.
    let o = expect(&["run", "--case", "vllm-0.33.0/a_single_success"], 0, "3 passed");
    for (i, role) in ["bootstrap", "decoder", "prefiller"].iter().enumerate() {
        assert!(o.stderr.contains(&format!("[{}/3] pass  vllm-0.33.0/a_single_success/{role}", i + 1)), "{}", o.stderr);
    }
    assert!(!o.stderr.contains('\r'), "no bar in a pipe");
}

#[test]
fn run_list_and_repeatable_comma_separated_filters() {
    let o = expect(
        &[
            "run",
            "--list",
            "--case",
            "vllm-0.33.0/a_single_success,vllm-0.32.0/b_batch",
            "--role",
            "bootstrap",
            "--role",
            "decoder",
        ],
        0,
        "vllm-0.33.0/a_single_success/bootstrap",
    );
    assert_eq!(
        o.stdout.lines().collect::<Vec<_>>(),
        [
            "vllm-0.32.0/b_batch_success/bootstrap",
            "vllm-0.32.0/b_batch_success/decoder",
            "vllm-0.33.0/a_single_success/bootstrap",
            "vllm-0.33.0/a_single_success/decoder",
            "",
            "4 cases: 4 would run"
        ]
    );
    let all = run(&["run", "--list"]).stdout;
    let cases: usize = common::bundled_dirs().iter().map(|d| common::expected_cases(d)).sum();
    assert_eq!(all.lines().take_while(|l| !l.is_empty()).count(), cases, "both families' bundled traces");
    expect(&["run", "--list", "--role", "prefiler"], 2, "--role prefiler: prefiller, decoder or bootstrap");
}

#[test]
fn fail_fast_stops_after_the_first_failure() {
    let f = script_testee("failfast", "[\"vllm-0.33.0\"]", "echo '{\"ok\": false, \"error\": \"not today\"}'");
    let o = expect(
        &[
            "run",
            "--testee",
            &format!("'{}'", f.display()),
            "--case",
            "vllm-0.33.0/a_single_success",
            "--fail-fast",
            "--jobs",
            "1",
        ],
        1,
        "2 cases not run",
    );
    assert!(o.stdout.contains("1 failed") && o.stdout.contains("2 not run (--fail-fast)"), "{}", o.stdout);
}

// ---- messages -------------------------------------------------------------------------------------------

#[test]
fn messages_carry_no_rust_debug_formatting() {
    let hello_bad = {
        let d = tempdir("badhello");
        let f = d.join("peer.sh");
        std::fs::write(&f, "#!/bin/sh\necho '{\"hello\": \"mooncake-testee\", \"protocol\": 2}'\n").unwrap();
        Command::new("chmod").arg("755").arg(&f).status().unwrap();
        f
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let a = here().join("traces/vllm-0.33.0/a_single_success.jsonl");
    let outs = [
        // --list asks the testee for its hello, as a run does.
        expect(&["run", "--testee", p(&hello_bad), "--list"], 2, "the testee speaks protocol 2, the runner speaks 1"),
        expect(
            &["run", "--testee", p(&hello_bad), "--case", "a_single"],
            2,
            "the testee speaks protocol 2, the runner speaks 1",
        ),
        expect(
            &["replay", "--play", "decoder", "--peer", &format!("tcp://127.0.0.1:{port}"), p(&a)],
            3,
            "nothing is listening",
        ),
        expect(&["vectors", p(&a)], 2, "not a vector file"),
        expect(&["hash", "check", "0.33", "0.32"], 2, "did you mean"),
    ];
    for o in outs {
        for bad in ["Some(", "None", "Number(", "String(", " { endpoint", "Listen {"] {
            assert!(!o.stdout.contains(bad) && !o.stderr.contains(bad), "{bad} in\n{}\n{}", o.stdout, o.stderr);
        }
    }
}

#[test]
fn every_subcommand_help_states_exit_codes_and_ends_with_an_example() {
    for cmd in [
        &["run"][..],
        &["replay"],
        &["validate"],
        &["vectors"],
        &["diff"],
        &["extract"],
        &["hash", "wire"],
        &["hash", "check"],
        &["key", "build"],
        &["key", "parse"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let o = expect(&args, 0, "Exit codes:");
        let last = o.stdout.trim_end().lines().last().unwrap().trim();
        assert!(last.starts_with("mooncake-conformance "), "{cmd:?}: last line {last}");
        assert!(o.stdout.contains("3 = the environment failed") || !matches!(cmd[0], "run" | "replay"), "{cmd:?}");
    }
}

/// Issue 34: `run` trusted a trace's header, so a 0.33.0 recording relabelled 0.26.0 passed (as a 0.26.0 case)
/// while `validate` found problems in it. `run`, `replay --list` and `matrix` now refuse it with exit 2 and
/// point at `validate`; the message does not repeat megabytes of payload.
#[test]
fn a_trace_relabelled_to_another_release_is_refused_before_anything_runs() {
    let d = tempdir("relabelled");
    let src = std::fs::read_to_string(here().join("traces/vllm-0.33.0/h1_layout_reuse_and_miss.jsonl")).unwrap();
    let (header, rest) = src.split_once('\n').unwrap();
    let mut h: serde_json::Value = serde_json::from_str(header).unwrap();
    h["vllm_version"] = "0.26.0".into();
    let f = d.join("relabelled.jsonl");
    std::fs::write(&f, format!("{h}\n{rest}")).unwrap();
    let v = run(&["validate", p(&f)]);
    assert_eq!(v.code, 1, "validate finds it\n{}{}", v.stdout, v.stderr);
    for args in [vec!["run", p(&f)], vec!["run", "--list", p(&f)], vec!["matrix", p(&f)]] {
        let o = expect(&args, 2, "does not validate");
        assert!(o.stderr.contains("mooncake-conformance validate"), "{args:?}: {}", o.stderr);
        assert!(o.stderr.len() < 2000, "{args:?}: {} bytes of message", o.stderr.len());
    }
    // The original passes the same gate (`--list` loads every case).
    let orig = d.join("original.jsonl");
    std::fs::write(&orig, &src).unwrap();
    expect(&["run", "--list", p(&orig)], 0, "h1_layout_reuse_and_miss");
}

/// Runs the CLI with its address space limited to `kib` (`ulimit -v`): a reader whose memory grows with many
/// times its input cannot finish under it.
fn run_within(kib: u64, args: &[&str]) -> Out {
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

/// Issue 34: the trace reader built a JSON value of every line and kept all of them, about 37 times the input
/// (a 40 MB array in an ignored header field cost 1.5 GB). It now parses each line straight into the header or
/// an event, skipping what the format does not read and keeping a payload's `decoded` as text: a 30 MB
/// trace reads within 256 MiB of address space. An HTTP body larger than any bootstrap body is refused by name.
#[test]
fn the_trace_reader_costs_about_its_input_not_many_times_it() {
    let d = tempdir("reader-memory");
    let src = std::fs::read_to_string(here().join("traces/vllm-0.33.0/a_single_success.jsonl")).unwrap();
    let (header, rest) = src.split_once('\n').unwrap();
    let mut h: serde_json::Value = serde_json::from_str(header).unwrap();
    h["ignored_by_the_reader"] = (0..2_000_000u64).collect::<Vec<_>>().into();
    let mut lines = vec![h.to_string()];
    let mut bloated = false;
    for l in rest.lines() {
        let mut e: serde_json::Value = serde_json::from_str(l).unwrap();
        if !bloated && e["kind"] == "zmq" {
            // A recorded `decoded` of 2 million numbers: kept as its text, not as a value.
            e["decoded"] = (0..2_000_000u64).map(|n| n * 7).collect::<Vec<_>>().into();
            bloated = true;
        }
        lines.push(e.to_string());
    }
    let f = d.join("bloated.jsonl");
    std::fs::write(&f, lines.join("\n") + "\n").unwrap();
    assert!(std::fs::metadata(&f).unwrap().len() > 20_000_000);
    for args in [vec!["validate", p(&f)], vec!["run", "--list", p(&f)]] {
        let o = run_within(256 * 1024, &args);
        assert_eq!(o.code, 0, "{args:?} within 256 MiB\nstdout: {}\nstderr: {}", o.stdout, o.stderr);
    }
    // A body over the bootstrap's limit is refused with the line and the limit.
    let http = rest.lines().position(|l| l.contains("\"kind\": \"http\"")).expect("an http event");
    let mut big: Vec<String> = src.lines().map(String::from).collect();
    let mut e: serde_json::Value = serde_json::from_str(&big[http + 1]).unwrap();
    e["body"] = serde_json::json!({"engine_id": "x".repeat(2 << 20)});
    big[http + 1] = e.to_string();
    let f = d.join("big-body.jsonl");
    std::fs::write(&f, big.join("\n") + "\n").unwrap();
    let o = expect(&["validate", p(&f)], 2, "larger than 1048576");
    assert!(o.stdout.contains(&format!(":{}:", http + 2)), "names the line: {}", o.stdout);
}
