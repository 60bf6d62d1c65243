//! `mooncake-conformance`: checks implementations of the vLLM Mooncake wire against the spec, vLLM's own
//! vectors and recorded vLLM traffic.
//!
//! Exit codes: 0 = everything checked agrees; 1 = at least one disagreement; 2 = bad usage or unreadable input.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use mooncake_conformance::play::{External, Role};
use mooncake_conformance::run::{ExpectedFailures, RunConfig};
use mooncake_conformance::scenarios::Scenarios;
use mooncake_conformance::testee::TesteeSpec;
use mooncake_conformance::{hashcmd, keycmd, report, spec_source, validate, vectors};

#[derive(Parser)]
#[command(name = "mooncake-conformance", version, about = "Conformance tooling for the vLLM Mooncake KV-transfer wire", long_about = LONG_ABOUT)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

const LONG_ABOUT: &str = "Conformance tooling for the vLLM Mooncake KV-transfer wire.

Exit codes: 0 = everything agrees, 1 = at least one case disagrees (diff: a breaking change), 2 = bad usage or unreadable input.";

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check vector files: msgspec encodings with accept/reject verdicts (mooncake-vectors) and outputs of
    /// vLLM's functions (mooncake-golden). Directories are searched for *.jsonl recursively.
    ///
    /// For each msgspec case our decoder must give msgspec's verdict; for accepted cases the decoded value must
    /// equal `value` and our re-encoding must equal `canonical_hex` (or `hex`).
    Vectors {
        /// Vector files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// List every failing case, not just the first few per file.
        #[arg(long)]
        all: bool,
    },
    /// Validate recorded traces: every ZMQ payload decodes as the message its direction implies under the
    /// revision of the header's vllm_version and re-encodes to the recorded bytes; bootstrap HTTP bodies match
    /// the spec; protocol checks hold (see conformance/CHECKS.md).
    Validate {
        /// Trace files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Classify every wire change between two revisions under msgspec's decoding rules: for each, whether an
    /// old decoder reads new bytes and a new decoder reads old bytes (compatible / breaks only when sent /
    /// breaks), and whether unchanged messages keep their bytes. Exits 1 on a breaking change unless
    /// --allow-breaking.
    ///
    /// OLD and NEW: a revision or release (`vllm-0.32.0`, `0.27.1`), a spec file, a spec directory (its newest
    /// revision), or `git:REF` (spec/ of this repository at REF); `DIR#REV` and `git:REF#REV` pick a revision.
    Diff {
        old: String,
        new: String,
        #[arg(long, value_enum, default_value_t = DiffFormat::Markdown)]
        format: DiffFormat,
        /// Exit 0 even when a change breaks a direction.
        #[arg(long)]
        allow_breaking: bool,
    },
    /// Run the conformance cases: each bundled (or given) trace, each role it exercises, played against a
    /// testee. With no arguments: every bundled trace against the built-in reference peer.
    ///
    /// A case `<revision>/<scenario>/prefiller` tests a prefiller: the runner plays the recorded decoder(s).
    /// `…/decoder` tests a decoder: the runner plays the recorded prefiller(s). `…/bootstrap` tests a bootstrap
    /// server. A testee speaks conformance/TESTEE.md on its standard input and output.
    Run {
        /// Trace files or directories (default: the bundled conformance/traces).
        paths: Vec<PathBuf>,
        /// Command of the implementation to test (default: the built-in reference peer, in-process).
        #[arg(long)]
        testee: Option<String>,
        /// Only cases of these roles (prefiller, decoder, bootstrap).
        #[arg(long)]
        role: Vec<String>,
        /// Only cases whose id contains this text.
        #[arg(long)]
        case: Option<String>,
        /// Scenario setup file (default: the bundled conformance/scenarios.toml).
        #[arg(long)]
        scenarios: Option<PathBuf>,
        /// Expected failures (default: conformance/expected-failures.toml with the built-in peer, none otherwise).
        #[arg(long)]
        expected_failures: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also write a JUnit XML report.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Also write a Markdown report (for a PR comment).
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Seconds to wait for a reply or an outcome beyond the scenario's own timeouts.
        #[arg(long, default_value_t = 3.0)]
        slack: f64,
        /// Take the testee to speak only these revisions (names like vllm-0.33.0 or releases like 0.33.0,
        /// comma-separated) of those it declares. Traces of other revisions then run as cross-version cases
        /// where the spec says the revisions interoperate, and are skipped with the reason otherwise.
        #[arg(long, value_delimiter = ',')]
        speaks: Vec<String>,
    },
    /// Replay recorded traffic against one implementation already running (or a testee command).
    ///
    /// --play decoder --peer tcp://HOST:PORT: the runner plays the recorded decoder against the prefiller at
    /// that endpoint (several prefillers: a comma-separated list in registration order). The prefiller must be
    /// prepared as conformance/scenarios.toml says (its transfers ready); its tables cannot be checked.
    ///
    /// --play prefiller --listen tcp://HOST:PORT: the runner answers as the recorded prefiller on that
    /// endpoint, registered with its own bootstrap server (--bootstrap-bind), and checks the requests of the
    /// decoder under test, which must be configured as recorded and told to pull (the runner prints what).
    ///
    /// --play client --peer http://HOST:PORT: replays the recorded HTTP requests against a bootstrap server.
    ///
    /// With --testee CMD instead of --peer/--listen, the runner starts and drives the implementation as `run`
    /// does, restricted to that role.
    Replay {
        /// Trace files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The side of the recording the runner plays: decoder, prefiller or client.
        #[arg(long)]
        play: String,
        /// The implementation under test: prefiller endpoint(s) (tcp://HOST:PORT,...) or bootstrap URL.
        #[arg(long)]
        peer: Option<String>,
        /// Where the runner's prefiller listens for the decoder under test (tcp://HOST:PORT).
        #[arg(long)]
        listen: Option<String>,
        /// Where the runner's bootstrap server listens with --listen.
        #[arg(long, default_value = "127.0.0.1:8998")]
        bootstrap_bind: String,
        /// Seconds to wait for an external decoder's pulls with --listen.
        #[arg(long, default_value_t = 60.0)]
        timeout: f64,
        /// Start and control the implementation through conformance/TESTEE.md instead.
        #[arg(long)]
        testee: Option<String>,
        #[arg(long)]
        scenarios: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[arg(long)]
        junit: Option<PathBuf>,
        #[arg(long)]
        markdown: Option<PathBuf>,
        #[arg(long, default_value_t = 3.0)]
        slack: f64,
        /// Take the testee to speak only these revisions (names like vllm-0.33.0 or releases like 0.33.0,
        /// comma-separated) of those it declares. Traces of other revisions then run as cross-version cases
        /// where the spec says the revisions interoperate, and are skipped with the reason otherwise.
        #[arg(long, value_delimiter = ',')]
        speaks: Vec<String>,
    },
    /// Compatibility hashes: vLLM's hash_factors of a value, the wire fingerprint of a revision, and whether
    /// two revisions are wire-compatible (exit 0 compatible, 1 not).
    Hash {
        #[command(subcommand)]
        cmd: HashCmd,
    },
    /// MooncakeStoreConnector keys of a vLLM release (and vllm-ascend / LMCache keys): build one from its
    /// fields or from token ids, parse one back (exit 1 when the key does not fit or has several readings).
    Key {
        #[command(subcommand)]
        cmd: KeyCmd,
    },
}

#[derive(clap::Args)]
struct KeyTarget {
    /// A vLLM release (0.21.0 … 0.33.0): its MooncakeStoreConnector key grammar.
    #[arg(long)]
    release: Option<String>,
    /// A grammar by name (`key grammars` lists them), e.g. ascend-store-key, lmcache-key.
    #[arg(long)]
    grammar: Option<String>,
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Build a key from FIELD=VALUE pairs (vLLM: unspecified parts default as in KeyMetadata; `model=` takes
    /// the configured model and keeps its last path component), or one key per full block of --tokens.
    Build {
        #[command(flatten)]
        target: KeyTarget,
        /// FIELD=VALUE (ints in decimal; LMCache tags as a JSON array of [name, value] pairs).
        fields: Vec<String>,
        /// Comma-separated token ids: hash them with vLLM's block-hash chain and print one key per full block.
        #[arg(long, value_delimiter = ',')]
        tokens: Option<Vec<i64>>,
        #[arg(long, default_value_t = 16)]
        block_size: usize,
        /// Hash granularity when smaller than the block size (vLLM's hash_block_size).
        #[arg(long)]
        hash_block_size: Option<usize>,
        /// --prefix-caching-hash-algo: sha256 or sha256_cbor.
        #[arg(long, default_value = "sha256")]
        algo: String,
        /// PYTHONHASHSEED of the vLLM processes (unset: the release's default seed, if it has one).
        #[arg(long)]
        pythonhashseed: Option<String>,
        #[arg(long, requires = "lora_path")]
        lora_name: Option<String>,
        #[arg(long, requires = "lora_name")]
        lora_path: Option<String>,
        #[arg(long)]
        cache_salt: Option<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Parse a key into its fields. Free text (model name, cache prefix) may contain '@': give known parts as
    /// --hint FIELD=VALUE when the key has several readings.
    Parse {
        #[command(flatten)]
        target: KeyTarget,
        /// Try every grammar of a family: vllm, vllm-ascend or lmcache.
        #[arg(long)]
        family: Option<String>,
        key: String,
        #[arg(long = "hint")]
        hints: Vec<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// List the key grammars of spec/store-keys/.
    Grammars {
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

#[derive(Subcommand)]
enum HashCmd {
    /// sha256(json.dumps(value, sort_keys=True)) exactly as vLLM's hash_factors computes it. The file holds one
    /// JSON value; tuples, bytes, sets, non-finite floats, big ints and non-string keys use the tags of
    /// conformance/vectors/GOLDEN.md. Exit 1 when Python would raise (the exception is printed).
    Factors {
        /// JSON file, or `-` for stdin.
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// NIXL's compatibility hash of a vLLM release (spec/compat-hash/nixl.toml) for the config attributes in a
    /// JSON file ({model, dtype, num_kv_heads, head_size, num_hidden_layers, cache_dtype, attn_backend_name,
    /// disable_hybrid_kv_cache_manager?, transfer_mode?, speculative_config?, cross_layers_blocks?}); with
    /// --engine, the P2P connectors' hash for that transfer engine (mooncake).
    Nixl {
        #[arg(long)]
        release: String,
        file: PathBuf,
        #[arg(long)]
        engine: Option<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// The wire fingerprint (spec/README.md, "Wire fingerprint") of one revision, or of every revision.
    Wire {
        /// A revision name (vllm-0.25.0..0.29.0) or a vLLM release (0.27.1).
        #[arg(long)]
        revision: Option<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Whether two revisions (names or releases) are wire-compatible, and which structs and fields differ.
    Check {
        a: String,
        b: String,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

/// Runs the cases and writes the reports; exit 0 only if every non-expected case passed.
fn execute(cfg: RunConfig, format: Format, junit: Option<PathBuf>, markdown: Option<PathBuf>) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return report::usage_error(&e.to_string()),
    };
    let rep = match rt.block_on(mooncake_conformance::run::run(cfg)) {
        Ok(r) => r,
        Err(e) => return report::usage_error(&e),
    };
    if let Some(p) = junit {
        if let Err(e) = std::fs::write(&p, report::run_junit(&rep)) {
            return report::usage_error(&format!("{}: {e}", p.display()));
        }
    }
    if let Some(p) = markdown {
        if let Err(e) = std::fs::write(&p, report::run_markdown(&rep)) {
            return report::usage_error(&format!("{}: {e}", p.display()));
        }
    }
    match format {
        Format::Json => report::print_json(&report::run_json(&rep)),
        Format::Text => report::run_text(&rep),
    }
    ExitCode::from(if rep.ok() { 0 } else { 1 })
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum DiffFormat {
    /// A table ready for a pull-request comment.
    Markdown,
    Json,
    /// One line.
    Summary,
}

/// `--speaks` names or releases → push revision names (`None` when not given).
fn resolve_revisions(given: &[String]) -> Result<Option<Vec<String>>, String> {
    if given.is_empty() {
        return Ok(None);
    }
    let push = mooncake_wire::spec::Spec::builtin().push();
    given
        .iter()
        .map(|g| {
            push.revision(g)
                .or_else(|| push.for_release(g.trim_start_matches("vllm-")))
                .map(|r| r.revision.clone())
                .ok_or_else(|| format!("--speaks {g}: no such revision or release (see spec/push/)"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn bundled(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run { paths, testee, role, case, scenarios, expected_failures, format, junit, markdown, slack, speaks } => {
            let speaks = match resolve_revisions(&speaks) {
                Ok(s) => s,
                Err(e) => return report::usage_error(&e),
            };
            let roles = match role.iter().map(|r| Role::parse(r).ok_or(r.clone())).collect::<Result<Vec<_>, _>>() {
                Ok(r) => r,
                Err(r) => return report::usage_error(&format!("unknown role {r:?} (prefiller, decoder, bootstrap)")),
            };
            let scenarios = match scenarios {
                Some(p) => match Scenarios::load(&p) {
                    Ok(s) => s,
                    Err(e) => return report::usage_error(&e),
                },
                None => Scenarios::bundled(),
            };
            let expected = match (&expected_failures, &testee) {
                (Some(p), _) => ExpectedFailures::load(p),
                (None, None) => ExpectedFailures::load(&bundled("expected-failures.toml")),
                (None, Some(_)) => Ok(ExpectedFailures::default()),
            };
            let expected = match expected {
                Ok(e) => e,
                Err(e) => return report::usage_error(&e),
            };
            let slack = match std::time::Duration::try_from_secs_f64(slack) {
                Ok(d) => d,
                Err(_) => return report::usage_error("--slack must be a non-negative number of seconds"),
            };
            let cfg = RunConfig {
                paths: if paths.is_empty() { vec![bundled("traces")] } else { paths },
                testee: testee.map(TesteeSpec::Command).unwrap_or(TesteeSpec::Builtin),
                roles,
                filter: case,
                scenarios,
                expected,
                slack,
                progress: format == Format::Text && std::io::IsTerminal::is_terminal(&std::io::stderr()),
                external: External::None,
                speaks,
            };
            execute(cfg, format, junit, markdown)
        }
        Cmd::Replay { paths, play, peer, listen, bootstrap_bind, timeout, testee, scenarios, format, junit, markdown, slack, speaks } => {
            let speaks = match resolve_revisions(&speaks) {
                Ok(s) => s,
                Err(e) => return report::usage_error(&e),
            };
            let role = match play.as_str() {
                "decoder" => Role::Prefiller,
                "prefiller" => Role::Decoder,
                "client" | "bootstrap-client" => Role::Bootstrap,
                other => return report::usage_error(&format!("--play {other:?}: decoder, prefiller or client")),
            };
            let timeout = match std::time::Duration::try_from_secs_f64(timeout) {
                Ok(d) => d,
                Err(_) => return report::usage_error("--timeout must be a non-negative number of seconds"),
            };
            let external = match (role, peer, listen, &testee) {
                (_, None, None, Some(_)) => External::None,
                (Role::Prefiller, Some(p), None, None) => External::Prefillers(p.split(',').map(|s| s.trim().to_string()).collect()),
                (Role::Decoder, None, Some(l), None) => External::Listen { endpoint: l, bootstrap: bootstrap_bind, timeout },
                (Role::Bootstrap, Some(p), None, None) => External::Bootstrap(p),
                _ => return report::usage_error("give --testee CMD, or --peer (with --play decoder or client), or --listen (with --play prefiller)"),
            };
            let scenarios = match scenarios {
                Some(p) => match Scenarios::load(&p) {
                    Ok(s) => s,
                    Err(e) => return report::usage_error(&e),
                },
                None => Scenarios::bundled(),
            };
            let slack = match std::time::Duration::try_from_secs_f64(slack) {
                Ok(d) => d,
                Err(_) => return report::usage_error("--slack must be a non-negative number of seconds"),
            };
            let cfg = RunConfig {
                paths,
                testee: testee.map(TesteeSpec::Command).unwrap_or(TesteeSpec::Builtin),
                roles: vec![role],
                filter: None,
                scenarios,
                expected: ExpectedFailures::default(),
                slack,
                progress: format == Format::Text && std::io::IsTerminal::is_terminal(&std::io::stderr()),
                external,
                speaks,
            };
            execute(cfg, format, junit, markdown)
        }
        Cmd::Vectors { paths, format, all } => {
            let files = match mooncake_conformance::jsonl::expand(&paths) {
                Ok(f) => f,
                Err(e) => return report::usage_error(&e),
            };
            let reps: Vec<_> = files.iter().map(|f| vectors::check_file(f)).collect();
            let ok = reps.iter().all(|r| r.ok());
            match format {
                Format::Json => report::print_json(&report::vectors_json(&reps)),
                Format::Text => report::vectors_text(&reps, all),
            }
            ExitCode::from(if ok { 0 } else { 1 })
        }
        Cmd::Validate { paths, format } => {
            let files = match mooncake_conformance::jsonl::expand(&paths) {
                Ok(f) => f,
                Err(e) => return report::usage_error(&e),
            };
            let reps: Vec<_> = files.iter().map(|f| validate::validate_file(f)).collect();
            let ok = reps.iter().all(|r| r.ok());
            match format {
                Format::Json => report::print_json(&report::validate_json(&reps)),
                Format::Text => report::validate_text(&reps),
            }
            ExitCode::from(if ok { 0 } else { 1 })
        }
        Cmd::Diff { old, new, format, allow_breaking } => {
            let (old, new) = match (spec_source::resolve(&old), spec_source::resolve(&new)) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => return report::usage_error(&e),
            };
            let r = mooncake_wire::diff::diff(&old, &new);
            match format {
                DiffFormat::Markdown => print!("{}", mooncake_wire::diff::render::markdown(&r)),
                DiffFormat::Json => report::print_json(&mooncake_wire::diff::render::json(&r)),
                DiffFormat::Summary => println!("{}", r.summary),
            }
            ExitCode::from(if r.is_breaking() && !allow_breaking { 1 } else { 0 })
        }
        Cmd::Key { cmd } => match cmd {
            KeyCmd::Build { target, fields, tokens, block_size, hash_block_size, algo, pythonhashseed, lora_name, lora_path, cache_salt, format } => {
                let t = keycmd::Target { release: target.release, grammar: target.grammar, family: None };
                let tokens = tokens.map(|tokens| keycmd::TokenOptions {
                    tokens,
                    block_size,
                    hash_block_size,
                    algo,
                    pythonhashseed,
                    lora: lora_name.zip(lora_path),
                    cache_salt,
                });
                keycmd::build(&t, &fields, tokens, format == Format::Json)
            }
            KeyCmd::Parse { target, family, key, hints, format } => {
                let t = keycmd::Target { release: target.release, grammar: target.grammar, family };
                keycmd::parse(&t, &key, &hints, format == Format::Json)
            }
            KeyCmd::Grammars { format } => keycmd::list(format == Format::Json),
        },
        Cmd::Hash { cmd } => match cmd {
            HashCmd::Factors { file, format } => hashcmd::factors(&file, format == Format::Json),
            HashCmd::Wire { revision, format } => hashcmd::wire(revision.as_deref(), format == Format::Json),
            HashCmd::Check { a, b, format } => hashcmd::check(&a, &b, format == Format::Json),
            HashCmd::Nixl { release, file, engine, format } => hashcmd::nixl(&release, &file, engine.as_deref(), format == Format::Json),
        },
    }
}
