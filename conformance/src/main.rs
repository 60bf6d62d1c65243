//! `mooncake-conformance`: checks implementations of the vLLM Mooncake wire against the spec, vLLM's own
//! vectors and recorded vLLM traffic.
//!
//! Exit codes: 0 = everything checked agrees; 1 = at least one disagreement; 2 = bad usage or input (also:
//! nothing to check); 3 = the environment failed (nothing listening, a port in use, a testee that died). A
//! closed output pipe ends the program quietly with 0.
//!
//! The library modules print nothing and decide no exit code: each command returns a typed result or a
//! typed error ([`CmdError`]), reports and progress events; this file writes them (through the library's
//! writers) and maps each to its exit code.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use mooncake_conformance::bundled::Data;
use mooncake_conformance::expected::ExpectedFailures;
use mooncake_conformance::finding::{CheckId, FileReport, TraceReport, INPUT_CHECKS};
use mooncake_conformance::jsonl::Input;
use mooncake_conformance::outcome::{CmdError, ErrorKind};
use mooncake_conformance::play::{External, Role, Status};
use mooncake_conformance::report::write_json;
use mooncake_conformance::run::{Progress, RunConfig, RunReport};
use mooncake_conformance::testee::{split_command, TesteeSpec};
use mooncake_conformance::{extractcmd, hashcmd, keycmd, report, spec_source, validate, vectors};

/// Everything checked agrees (or the command did what it was asked).
const AGREE: u8 = 0;
/// At least one disagreement: a failed case, a finding, a breaking change, incompatible revisions.
const DISAGREE: u8 = 1;
/// Bad usage or bad input: unknown names, unreadable or wrong-format files, nothing to check.
const USAGE: u8 = 2;
/// The environment failed: nothing listening, a port in use, a testee that died or never said hello.
const ENVIRONMENT: u8 = 3;

#[derive(Parser)]
#[command(
    name = "mooncake-conformance",
    version,
    about = "Conformance tooling for the vLLM Mooncake KV-transfer wire",
    long_about = LONG_ABOUT,
    after_help = "Exit codes: 0 agree, 1 disagreement, 2 bad usage or input, 3 environment failure.\n\nExample:\n  mooncake-conformance run",
    after_long_help = concat!("Exit codes: 0 = everything agrees; 1 = a disagreement; 2 = bad usage or input (also: nothing to check); 3 = the environment failed (nothing listening, a port in use, a testee that died). A closed output pipe ends quietly with 0.", "\n\nExample (every bundled recording against the built-in reference peer):\n  mooncake-conformance run"),
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

const LONG_ABOUT: &str = "Conformance tooling for the vLLM Mooncake KV-transfer wire: replays recorded vLLM traffic against an \
implementation, checks vector files and traces, classifies wire changes, computes vLLM's compatibility hashes and store keys.";

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    /// Lines for people.
    Text,
    /// One JSON document.
    Json,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum ProgressMode {
    /// A bar when standard error is a terminal, one line per finished case otherwise.
    Auto,
    /// A bar on standard error.
    Bar,
    /// One line per finished case on standard error (CI logs).
    Lines,
    /// Nothing until the report.
    Off,
}

/// Options shared by `run` and `replay`.
#[derive(clap::Args)]
struct RunOpts {
    /// Output format of the report on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also write a JUnit XML report to this file (checked before anything runs).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Also write a Markdown report (for a PR comment) to this file (checked before anything runs).
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Also write the JSON report to this file (checked before anything runs).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Seconds to wait for a reply or an outcome beyond the scenario's own timeouts.
    #[arg(long, default_value_t = 3.0, value_name = "SECONDS")]
    slack: f64,
    /// Take the testee to speak only these revisions of those it declares (any name `hash wire` takes:
    /// vllm-0.33.0, 0.33.0, v0.32.0; comma-separated or repeated). Traces of other revisions then run as
    /// cross-version cases where the spec says the revisions interoperate, and are skipped with the reason
    /// otherwise.
    #[arg(long, value_delimiter = ',', value_name = "REVISION")]
    speaks: Vec<String>,
    /// Scenario setups to add to the bundled scenarios.toml (or --data's): its [scenario.NAME] entries are
    /// added, replacing bundled ones of the same name, and its [model], if any, replaces the model. A trace whose
    /// scenario has no entry has its setup derived from the trace; where the trace does not show something, its
    /// case fails with a CASE-SETUP finding that prints the entry to put here.
    #[arg(long, value_name = "FILE")]
    scenarios: Option<PathBuf>,
    /// A directory laid out like conformance/ (traces/, scenarios.toml, expected-failures.toml) instead of the
    /// data bundled into this binary.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Write each case's testee standard error to DIR/<case id with / as __>.log (the last lines of a failed
    /// case are shown in the report either way).
    #[arg(long, value_name = "DIR")]
    testee_log: Option<PathBuf>,
    /// Progress on standard error while cases run.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    progress: ProgressMode,
    /// Stop after the first case that fails (the report says how many were not run).
    #[arg(long)]
    fail_fast: bool,
    /// Cases run at once, each against a testee of its own; a new one starts as soon as any ends (default:
    /// 16 per CPU, at most 64, against the built-in peer — cases wait on timers, not the CPU; one per CPU
    /// against a --testee command; 1 runs them one after another; an already-running peer of `replay` always
    /// serves one case at a time). Reports list the cases in the same order whatever the number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Zero cases, or every case skipped, is not an error (exit 0 instead of 2).
    #[arg(long)]
    allow_empty: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check vector files: msgspec encodings with accept/reject verdicts (mooncake-vectors) and outputs of
    /// vLLM's functions (mooncake-golden). Directories are searched for *.jsonl recursively.
    ///
    /// For each msgspec case our decoder must give msgspec's verdict; for accepted cases the decoded value must
    /// equal `value` and our re-encoding must equal `canonical_hex` (or `hex`).
    #[command(after_help = concat!("Exit codes: 0 = every case agrees; 1 = a case disagrees or a file could not be checked; 2 = bad usage, a file that is not a vector file, or no case at all; 3 = the environment failed.", "\n\nExample:\n  mooncake-conformance vectors conformance/vectors"))]
    Vectors {
        /// Vector files or directories (the vector files are not bundled: name them).
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// List every failing case, not just the first few per file.
        #[arg(long)]
        all: bool,
        /// Zero files or a file without cases is not an error.
        #[arg(long)]
        allow_empty: bool,
    },
    /// Validate recorded traces: every ZMQ payload decodes as the message its direction implies under the
    /// revision of the header's vllm_version and re-encodes to the recorded bytes; bootstrap HTTP bodies match
    /// the spec; protocol checks hold (see conformance/CHECKS.md). With no path: the bundled traces.
    #[command(after_help = concat!("Exit codes: 0 = every trace holds; 1 = a finding; 2 = bad usage, a file that is not a trace (or has no events), or no trace at all; 3 = the environment failed.", "\n\nExample:\n  mooncake-conformance validate conformance/traces/vllm-0.33.0/a_single_success.jsonl"))]
    Validate {
        /// Trace files or directories (default: the bundled push and pull traces).
        #[arg(value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// With no path: read the bundled traces from DIR/traces and DIR/traces-pull instead.
        #[arg(long, value_name = "DIR")]
        data: Option<PathBuf>,
        /// Zero traces, or a trace with no events, is not an error.
        #[arg(long)]
        allow_empty: bool,
    },
    /// Classify every wire change between two revisions under msgspec's decoding rules: for each, whether an
    /// old decoder reads new bytes and a new decoder reads old bytes (compatible / breaks only when sent /
    /// breaks / review), and whether unchanged messages keep their bytes. A struct, enum, reply text,
    /// kv_connector_extra_config key or environment variable of vLLM source that no spec revision describes is
    /// shown as such and fails the diff like a break. Exits 1 on either unless --allow-breaking.
    #[command(after_help = concat!("Exit codes: 0 = no change breaks a direction, and a source side adds nothing the spec lacks (or --allow-breaking); 1 = a breaking change, or something in no spec revision; 2 = bad usage or an unknown revision; 3 = the environment failed (git, or no Python to read a source side).", "\n\nExample:\n  mooncake-conformance diff 0.32.0 0.33.0 --format summary"))]
    Diff {
        /// The old side: a revision or release (vllm-0.32.0, 0.27.1, v0.27.1, vllm-0.27.1, ascend:0.18.0), a
        /// spec file, a spec directory (its newest revision), or git:REF (spec/ of this repository at REF);
        /// DIR#REV and git:REF#REV pick a revision. vLLM source — a checkout, the connector's package folder,
        /// a .py file or a wheel — is read as `extract` reads it.
        old: String,
        /// The new side, in the same forms as OLD (same protocol family).
        new: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = DiffFormat::Markdown)]
        format: DiffFormat,
        /// Exit 0 even when a change breaks a direction or adds something no spec revision describes (the
        /// change is announced).
        #[arg(long)]
        allow_breaking: bool,
        /// The Python that runs the extraction of a source side (default: $MOONCAKE_PYTHON, else python3).
        #[arg(long, value_name = "PY")]
        python: Option<String>,
    },
    /// Derive a spec revision from vLLM's source, statically (Python's `ast` through a bundled script; nothing
    /// of vLLM or torch is imported): every msgspec.Struct (fields in order, types, defaults, struct options),
    /// every IntEnum on the wire, the aliases they use, the bootstrap server's routes and models, the literal
    /// err_msg texts of its answers with their statuses, the kv_connector_extra_config keys and environment
    /// variables it reads. Written as a derived spec file: edits on the bundled revision it is closest to;
    /// behaviour, transport and docs are that revision's, and every fact that cannot be read statically is
    /// reported as "not derived: …".
    #[command(after_help = concat!("Exit codes: 0 = derived (with --proof: every wheel gives the bundled fingerprint, and --check matches); 1 = --proof: a wheel disagrees or --check differs, or the derived revision does not load; 2 = bad usage, or PATH is not vLLM Mooncake source; 3 = the environment failed (no Python).", "\n\nExamples:\n  mooncake-conformance extract ~/vllm --out proposed.toml\n  mooncake-conformance diff vllm-0.33.0 ~/vllm\n  mooncake-conformance extract --proof --out schema/push/extract-proof.md"))]
    Extract {
        /// A vLLM source checkout (the directory holding vllm/), the connector's package folder
        /// (…/kv_connector/v1/mooncake/), one .py file, or a wheel. With --proof: wheels (none: every cached
        /// wheel, $MOONCAKE_WHEEL_CACHE or ~/.cache/mooncake-wire/wheels).
        paths: Vec<PathBuf>,
        /// Write the spec file (with --proof: the Markdown table) here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Derive from this bundled revision instead of the closest one.
        #[arg(long, value_name = "REVISION")]
        base: Option<String>,
        /// The Python that runs the bundled script (default: $MOONCAKE_PYTHON, else python3).
        #[arg(long, value_name = "PY")]
        python: Option<String>,
        /// Output: the spec file, a JSON document, or one summary line.
        #[arg(long, value_enum, default_value_t = ExtractFormat::Toml)]
        format: ExtractFormat,
        /// The proof on history: each wheel against the bundled revision of its release (wire fingerprint over
        /// structs and enums), as a Markdown table.
        #[arg(long)]
        proof: bool,
        /// With --proof: compare the table with this committed file (stale: exit 1).
        #[arg(long)]
        check: Option<PathBuf>,
    },
    /// The compatibility matrix, observed: the reference decoder at each revision against the reference
    /// prefiller at each other revision, over real ZeroMQ, HTTP and TCP on 127.0.0.1, for every recorded
    /// scenario both have; each cell compared with what `diff` predicts for that direction. Writes the Markdown
    /// table (`--out`), or checks a committed one (`--check`).
    #[command(after_help = concat!("Exit codes: 0 = every cell agrees with `diff` (and --check matches); 1 = a cell disagrees, or --check differs; 2 = bad usage or input; 3 = the environment failed.", "\n\nExample:\n  mooncake-conformance matrix --out schema/push/compat-matrix.md"))]
    Matrix {
        /// Trace files or directories (default: the bundled recordings); the newest release of each revision is used.
        paths: Vec<PathBuf>,
        /// Write the Markdown table to this file.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Compare the Markdown table with this file instead (stale: exit 1).
        #[arg(long)]
        check: Option<PathBuf>,
        /// Only these revisions (names or releases; repeatable, comma-separated).
        #[arg(long, value_delimiter = ',')]
        revision: Vec<String>,
        /// Abort timeout every peer runs with, in milliseconds (it only sets the pace of timeouts).
        #[arg(long, default_value_t = 400)]
        abort_ms: u64,
        /// Runs at once (default: 16 per CPU, at most 64: each plays a scenario between two built-in peers and
        /// waits on its timers; 32 finish the 156 pairs in about 70 s on 2 cores, 3 took 330 s).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        jobs: Option<u16>,
        /// Output format on standard output.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// A directory laid out like conformance/ instead of the bundled data.
        #[arg(long)]
        data: Option<PathBuf>,
    },
    /// Run the conformance cases: each bundled (or given) trace, each role it exercises, played against a
    /// testee. With no arguments: every bundled trace against the built-in reference peer.
    ///
    /// A case `<revision>/<scenario>/prefiller` tests a prefiller: the runner plays the recorded decoder(s).
    /// `…/decoder` tests a decoder: the runner plays the recorded prefiller(s). `…/bootstrap` tests a bootstrap
    /// server. A testee speaks conformance/TESTEE.md on its standard input and output.
    #[command(after_help = concat!("Exit codes: 0 = every case passes (or fails as expected); 1 = a case fails, or an expected failure is stale; 2 = bad usage or input, no case to run, or every case skipped; 3 = the environment failed (the testee died or never said hello).", "\n\nExample:\n  mooncake-conformance run --testee \"./my-peer --testee\" --junit report.xml --testee-log logs/"))]
    Run {
        /// Trace files or directories (default: the bundled traces).
        #[arg(value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Command line of the implementation to test, split as a shell would ("./peer --name 'a b'");
        /// default: the built-in reference peer, `mooncake-peer --log error testee` (the mooncake-peer next to
        /// this program, else on PATH).
        #[arg(long, value_name = "COMMAND")]
        testee: Option<String>,
        /// Only cases of these roles: prefiller, decoder, bootstrap (comma-separated or repeated).
        #[arg(long, value_delimiter = ',', value_name = "ROLE")]
        role: Vec<String>,
        /// Only cases whose id contains one of these texts (comma-separated or repeated).
        #[arg(long, value_delimiter = ',', value_name = "TEXT")]
        case: Vec<String>,
        /// Print the ids of the cases that would run, and run nothing.
        #[arg(long)]
        list: bool,
        /// Expected failures (default: the bundled expected-failures.toml with the built-in peer, none otherwise).
        #[arg(long, value_name = "FILE")]
        expected_failures: Option<PathBuf>,
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Record a live generation-2 deployment without changing it: the tap is the bootstrap server its
    /// prefillers register with and its decoders query, stands in front of every prefiller worker with a
    /// ROUTER of its own, forwards every ZeroMQ message both ways unchanged, writes the traffic as a trace
    /// (real endpoints, as if no tap was there) and checks it against the spec as it flows.
    ///
    /// Point the prefillers' and decoders' bootstrap address (VLLM_MOONCAKE_BOOTSTRAP_PORT / the
    /// `bootstrap_addr` decoders are given) at --bootstrap-bind. Without --upstream the tap answers with the
    /// registry of --revision; with --upstream every request goes to the real server and its answer comes back
    /// unchanged — except that `/query` answers name the tap's endpoints instead of the workers'. Findings are
    /// printed as they happen (standard output), notes on standard error. Ctrl-C (SIGINT), SIGTERM or
    /// --duration ends it and completes the trace.
    ///
    /// The tap's bootstrap server and ROUTERs are the reference peer's, within its resource budget (header,
    /// body and handshake timeouts, body and message sizes, connections in all and per host: `mooncake-peer
    /// --help`, RELIABILITY.md); a client over it is cut off and reported, everyone else is still relayed.
    ///
    /// A tap cannot see transfer-engine calls or what the connectors report to their schedulers: the trace
    /// says so (`unobserved`), and `run` reports TE-CALLS, P-FINISHED-SENDING and D-OUTCOME as not applicable.
    /// `run` needs the prefiller side a trace cannot show: name a scenarios.toml entry with --scenario (or pass
    /// `run --scenarios FILE`).
    #[command(after_help = concat!("Exit codes: 0 = no finding; 1 = a finding; 2 = bad usage (no --revision without --upstream, an unknown or generation-1 revision, an unwritable --out); 3 = the environment failed (--bootstrap-bind in use, an upstream that does not answer, the trace cannot be written, a socket the tap cannot open).", "\n\nExample (the bootstrap server on 8998, 10 minutes, vLLM 0.33.0):\n  mooncake-conformance tap --bootstrap-bind 127.0.0.1:8998 --revision 0.33.0 --out deployment.jsonl --duration 600"))]
    Tap {
        /// Address the tap's bootstrap server listens on (HOST:PORT).
        #[arg(long, value_name = "HOST:PORT")]
        bootstrap_bind: String,
        /// The real bootstrap server to forward every request to (http://HOST:PORT).
        #[arg(long, value_name = "URL")]
        upstream: Option<String>,
        /// The trace file to write (events are appended as they happen).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Stop after this many seconds (default: at Ctrl-C or SIGTERM).
        #[arg(long, value_name = "SECONDS")]
        duration: Option<f64>,
        /// The deployment's vLLM revision or release (0.33.0, vllm-0.26.0..0.28.0); default: read off the first
        /// pull request (required without --upstream).
        #[arg(long, value_name = "REVISION")]
        revision: Option<String>,
        /// The trace's scenario name; a conformance/scenarios.toml entry (its prefiller transfers) lets `run`
        /// replay the trace.
        #[arg(long, default_value = "tap", value_name = "NAME")]
        scenario: String,
        /// IP the tap's own ROUTERs bind, one per prefiller worker (decoders must reach it).
        #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
        zmq_host: String,
        /// Seconds a pull may wait for its terminal reply before it is checked as it is (default: the
        /// revision's abort timeout + 60, as vLLM's decoder waits).
        #[arg(long, value_name = "SECONDS")]
        reply_timeout: Option<f64>,
    },
    /// Replay recorded traffic against one implementation already running (or a testee command).
    ///
    /// --play decoder --peer tcp://HOST:PORT: the runner plays the recorded decoder against the prefiller at
    /// that endpoint (several prefillers: a comma-separated list in registration order). The prefiller must be
    /// prepared as the scenario's setup says (conformance/scenarios.toml, --scenarios, or derived from the trace
    /// when there is no entry: the report notes it); its tables cannot be checked.
    ///
    /// --play prefiller --listen tcp://HOST:PORT: the runner answers as the recorded prefiller on that
    /// endpoint, registered with its own bootstrap server (--bootstrap-bind), and checks the requests of the
    /// decoder under test, which must be configured as recorded and told to pull (the runner prints what).
    ///
    /// --play client --peer http://HOST:PORT: replays the recorded HTTP requests against a bootstrap server.
    ///
    /// With --testee CMD instead of --peer/--listen, the runner starts and drives the implementation as `run`
    /// does, restricted to that role.
    #[command(after_help = concat!("Exit codes: 0 = every case passes; 1 = a case fails; 2 = bad usage or input (a wrong endpoint scheme, no trace); 3 = the environment failed (nothing listening at --peer, a port of --listen or --bootstrap-bind in use, a testee that died).", "\n\nExample:\n  mooncake-conformance replay --play decoder --peer tcp://127.0.0.1:5555 conformance/traces/vllm-0.33.0/a_single_success.jsonl"))]
    Replay {
        /// Trace files or directories.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// The side of the recording the runner plays.
        #[arg(long, value_enum)]
        play: PlaySide,
        /// The implementation under test: prefiller endpoint(s) tcp://HOST:PORT,... (with --play decoder) or a
        /// bootstrap server URL http://HOST:PORT (with --play client).
        #[arg(long, value_name = "ENDPOINT")]
        peer: Option<String>,
        /// Where the runner's prefiller listens for the decoder under test, tcp://HOST:PORT (with --play
        /// prefiller).
        #[arg(long, value_name = "ENDPOINT")]
        listen: Option<String>,
        /// Where the runner's bootstrap server listens with --listen (HOST:PORT).
        #[arg(long, default_value = "127.0.0.1:8998", value_name = "HOST:PORT")]
        bootstrap_bind: String,
        /// Seconds to wait for an external decoder's pulls with --listen.
        #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
        timeout: f64,
        /// With --listen: make the scenario's transfers ready this many seconds after the start instead of when
        /// the decoder's first request arrives.
        #[arg(long, value_name = "SECONDS")]
        ready_after: Option<f64>,
        /// Start and control the implementation through conformance/TESTEE.md instead (a command line, split
        /// as a shell would).
        #[arg(long, value_name = "COMMAND")]
        testee: Option<String>,
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Compatibility hashes: vLLM's hash_factors of a value, the wire fingerprint of a revision, and whether
    /// two revisions are wire-compatible (exit 0 compatible, 1 not).
    #[command(after_help = concat!("Exit codes: 0 = done, or compatible; 1 = incompatible, or Python would raise for the value; 2 = bad usage or input.", "\n\nExample:\n  mooncake-conformance hash check 0.32.0 0.33.0"))]
    Hash {
        #[command(subcommand)]
        cmd: HashCmd,
    },
    /// MooncakeStoreConnector keys of a vLLM release (and vllm-ascend / LMCache keys): build one from its
    /// fields or from token ids, parse one back (exit 1 when the key does not fit or has several readings).
    #[command(after_help = concat!("Exit codes: 0 = done; 1 = the key does not parse (or has several readings); 2 = bad usage or input.", "\n\nExample:\n  mooncake-conformance key build --release 0.33.0 model=/models/Qwen2.5-7B chunk_hash=ab12"))]
    Key {
        #[command(subcommand)]
        cmd: KeyCmd,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum PlaySide {
    /// Play the recorded decoder against a prefiller under test.
    Decoder,
    /// Play the recorded prefiller for a decoder under test.
    Prefiller,
    /// Replay the recorded HTTP requests against a bootstrap server under test.
    #[value(alias = "bootstrap-client")]
    Client,
}

#[derive(clap::Args)]
struct KeyTarget {
    /// A vLLM release (0.21.0 … 0.33.0, in any form `hash wire` takes): its MooncakeStoreConnector key grammar.
    #[arg(long)]
    release: Option<String>,
    /// A grammar by name (`key grammars` lists them), e.g. ascend-store-key, lmcache-key.
    #[arg(long)]
    grammar: Option<String>,
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Build a key from FIELD=VALUE pairs (vLLM: unspecified parts default as in KeyMetadata; `model=` takes
    /// the configured model and keeps its last path component, `model_name=` the key's part itself), or one
    /// key per full block of --tokens.
    #[command(
        after_help = "Exit codes: 0 = built; 2 = bad usage or input (an unknown field, a value the grammar cannot hold).\n\nExample:\n  mooncake-conformance key build --release 0.33.0 model_name=Qwen --tokens 1,2,3,4 --block-size 2 --pythonhashseed 0"
    )]
    Build {
        #[command(flatten)]
        target: KeyTarget,
        /// FIELD=VALUE (ints in decimal; LMCache tags as a JSON array of [name, value] pairs).
        #[arg(value_name = "FIELD=VALUE")]
        fields: Vec<String>,
        /// Comma-separated token ids: hash them with vLLM's block-hash chain and print one key per full block.
        #[arg(long, value_delimiter = ',', value_name = "IDS")]
        tokens: Option<Vec<i64>>,
        /// Tokens per block (vLLM's --block-size) for --tokens.
        #[arg(long, default_value_t = 16, value_parser = positive)]
        block_size: usize,
        /// Hash granularity when smaller than the block size (vLLM's hash_block_size).
        #[arg(long, value_parser = positive)]
        hash_block_size: Option<usize>,
        /// vLLM's --prefix-caching-hash-algo.
        #[arg(long, default_value = "sha256", value_parser = ["sha256", "sha256_cbor"])]
        algo: String,
        /// PYTHONHASHSEED of the vLLM processes (unset: the release's default seed, if it has one).
        #[arg(long)]
        pythonhashseed: Option<String>,
        /// LoRA adapter name of the request (with --lora-path): part of the block hash.
        #[arg(long, requires = "lora_path")]
        lora_name: Option<String>,
        /// LoRA adapter path of the request (with --lora-name).
        #[arg(long, requires = "lora_name")]
        lora_path: Option<String>,
        /// The request's cache_salt: part of the first block's hash.
        #[arg(long)]
        cache_salt: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Parse a key into its fields. Free text (model name, cache prefix) may contain '@': give known parts as
    /// --hint FIELD=VALUE (the same names as `key build`) when the key has several readings.
    #[command(
        after_help = "Exit codes: 0 = one reading; 1 = the key does not fit (the message names the field and byte) or has several readings; 2 = bad usage.\n\nExample:\n  mooncake-conformance key parse --release 0.33.0 'teamA@Qwen@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@ab' --hint cache_prefix=teamA"
    )]
    Parse {
        #[command(flatten)]
        target: KeyTarget,
        /// Try every grammar of a family: vllm, vllm-ascend or lmcache.
        #[arg(long)]
        family: Option<String>,
        /// The key to parse.
        key: String,
        /// A known field, FIELD=VALUE (repeatable): narrows the readings of a key with free text.
        #[arg(long = "hint", value_name = "FIELD=VALUE")]
        hints: Vec<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// List the key grammars of spec/store-keys/.
    #[command(after_help = "Exit codes: 0 = listed.\n\nExample:\n  mooncake-conformance key grammars --format json")]
    Grammars {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

#[derive(Subcommand)]
enum HashCmd {
    /// sha256(json.dumps(value, sort_keys=True)) exactly as vLLM's hash_factors computes it. The file holds one
    /// JSON value; tuples, bytes, sets, non-finite floats, big ints and non-string keys use the tags of
    /// conformance/vectors/GOLDEN.md. Exit 1 when Python would raise (the exception is printed).
    #[command(
        after_help = "Exit codes: 0 = hashed; 1 = Python would raise for this value; 2 = bad usage or input.\n\nExample:\n  echo '{\"a\": [1, 2]}' | mooncake-conformance hash factors -"
    )]
    Factors {
        /// JSON file, or `-` for standard input.
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// NIXL's compatibility hash of a vLLM release (spec/compat-hash/nixl.toml) for the config attributes in a
    /// JSON file ({model, dtype, num_kv_heads, head_size, num_hidden_layers, cache_dtype, attn_backend_name,
    /// disable_hybrid_kv_cache_manager?, transfer_mode?, speculative_config?, cross_layers_blocks?}); with
    /// --engine, the P2P connectors' hash for that transfer engine (mooncake).
    #[command(
        after_help = "Exit codes: 0 = hashed; 2 = bad usage or input (a release without the hash, a config lacking an attribute).\n\nExample:\n  mooncake-conformance hash nixl --release 0.33.0 config.json --engine mooncake"
    )]
    Nixl {
        /// The vLLM release (any form `hash wire` takes: 0.33.0, v0.33.0, vllm-0.33.0).
        #[arg(long)]
        release: String,
        /// JSON file of the config attributes.
        file: PathBuf,
        /// A P2P connector's transfer engine (mooncake): its wrapper hash around NIXL's.
        #[arg(long)]
        engine: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// The wire fingerprint (spec/README.md, "Wire fingerprint") of one revision, or of every revision.
    #[command(
        after_help = "Exit codes: 0 = done; 2 = an unknown revision.\n\nExample:\n  mooncake-conformance hash wire --revision 0.33.0"
    )]
    Wire {
        /// A revision name (vllm-0.25.0..0.29.0), a vLLM release (0.27.1, v0.27.1, vllm-0.27.1) or a
        /// project-qualified one (ascend:0.18.0, vllm-ascend-0.18.0).
        #[arg(long)]
        revision: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Whether two revisions (names or releases) interoperate — the verdict of `diff`: no change breaks a
    /// direction — and which structs and fields of their msgspec wires differ.
    #[command(
        after_help = "Exit codes: 0 = compatible; 1 = incompatible; 2 = an unknown revision.\n\nExample:\n  mooncake-conformance hash check 0.18.0 0.18.1"
    )]
    Check {
        /// The first revision or release (any form `hash wire` takes).
        a: String,
        /// The second revision or release.
        b: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum ExtractFormat {
    /// The derived spec file.
    Toml,
    /// One JSON document.
    Json,
    /// One line.
    Summary,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DiffFormat {
    /// A table ready for a pull-request comment.
    Markdown,
    /// One JSON document.
    Json,
    /// One line.
    Summary,
}

// ---- output ----------------------------------------------------------------------------------------------

/// Writes to standard output or error. A closed pipe (`… | head -1`) ends the program quietly with status 0,
/// as `cat` and `rg` do; any other write error is an environment failure.
fn write_or_exit<W: Write>(mut w: W, write: impl FnOnce(&mut W) -> std::io::Result<()>) {
    if let Err(e) = write(&mut w).and_then(|_| w.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = writeln!(std::io::stderr(), "error: writing output: {e}");
        std::process::exit(ENVIRONMENT as i32);
    }
}

/// Standard output, written by a writer.
fn out_with(write: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<()>) {
    write_or_exit(std::io::stdout().lock(), write);
}

/// Standard output text, as given.
fn out(text: &str) {
    out_with(|w| w.write_all(text.as_bytes()));
}

/// Text on standard error, as given.
fn err(text: &str) {
    write_or_exit(std::io::stderr().lock(), |w| w.write_all(text.as_bytes()));
}

/// Standard error's `error: …` lines, then the exit code.
fn finish(errors: &[String], code: u8) -> ExitCode {
    for e in errors {
        err(&format!("error: {e}\n"));
    }
    ExitCode::from(code)
}

/// The exit code of a kind of failure.
fn code_of(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Usage => USAGE,
        ErrorKind::Disagreement => DISAGREE,
        ErrorKind::Environment => ENVIRONMENT,
    }
}

/// A command that failed: its error on standard error, the exit code of its kind.
fn fail(e: CmdError) -> ExitCode {
    finish(&[e.message], code_of(e.kind))
}

/// A usage or input error (exit 2).
fn usage(msg: impl std::fmt::Display) -> ExitCode {
    finish(&[msg.to_string()], USAGE)
}

/// A command's result written to standard output by `write` (text or JSON), with `code`; its error, failed.
fn show<T>(
    result: Result<T, CmdError>,
    write: impl FnOnce(&mut std::io::StdoutLock<'static>, &T) -> std::io::Result<()>,
    code: impl FnOnce(&T) -> u8,
) -> ExitCode {
    match result {
        Ok(r) => {
            out_with(|w| write(w, &r));
            ExitCode::from(code(&r))
        }
        Err(e) => fail(e),
    }
}

// ---- exit codes of the reports -----------------------------------------------------------------------------

/// `validate`: 2 when some file is not a checkable trace (an empty trace only without `allow_empty`), 1 when
/// some trace has findings, 0 otherwise.
fn validate_code(reps: &[TraceReport], allow_empty: bool) -> u8 {
    let input = |f: &mooncake_conformance::finding::Finding| {
        INPUT_CHECKS.contains(&f.check) && (f.check != CheckId::TraceEmpty || !allow_empty)
    };
    if reps.iter().any(|r| r.findings.iter().any(input)) {
        USAGE
    } else if reps.iter().any(|r| r.findings.iter().any(|f| f.check != CheckId::TraceEmpty)) {
        DISAGREE
    } else {
        AGREE
    }
}

/// `vectors`: 2 when a file is not a vector file, or holds no case (unless `allow_empty`); 1 when a case
/// disagrees or a file could not be checked; 0 otherwise.
fn vectors_code(reps: &[FileReport], allow_empty: bool) -> u8 {
    if reps.iter().any(|r| r.bad_input || (r.cases == 0 && r.not_checked.is_none() && !allow_empty)) {
        USAGE
    } else if reps.iter().all(|r| r.ok()) {
        AGREE
    } else {
        DISAGREE
    }
}

/// `run` and `replay`: 3 when the environment failed (a testee died), 1 on a failure or a stale expected
/// failure, 2 when every case was skipped (unless `allow_empty`), 0 otherwise.
fn run_code(r: &RunReport, allow_empty: bool) -> u8 {
    if r.count(Status::Error) > 0 {
        ENVIRONMENT
    } else if !r.ok() {
        DISAGREE
    } else if !allow_empty && r.nothing_checked() {
        USAGE
    } else {
        AGREE
    }
}

/// `tap`: 3 when its surroundings failed, 1 on a finding, 0 otherwise.
fn tap_code(r: &mooncake_conformance::tap::TapReport) -> u8 {
    if !r.troubles.is_empty() {
        ENVIRONMENT
    } else if r.finding_count > 0 {
        DISAGREE
    } else {
        AGREE
    }
}

// ---- argument checks -------------------------------------------------------------------------------------

/// Why the command line, or a file it names, cannot be used (exit 2); each text names the option.
#[derive(Debug, thiserror::Error)]
enum ArgError {
    #[error("must be at least 1")]
    NotAtLeastOne,
    #[error("`{0}` is not a whole number")]
    NotWholeNumber(String),
    #[error("--speaks {given}: {revision} is of the {family} family; the runner plays push-family traces")]
    SpeaksOtherFamily { given: String, revision: String, family: String },
    #[error("--speaks {0}")]
    Speaks(mooncake_wire::spec::ResolveError),
    #[error("{0} must be a number of seconds from 0 to 604800 (a week)")]
    Seconds(&'static str),
    #[error("{option} {}: the same file as another report", path.display())]
    SameReport { option: &'static str, path: PathBuf },
    #[error("{option} {}: a directory, not a file", path.display())]
    ReportIsDirectory { option: &'static str, path: PathBuf },
    #[error("{option} {}: {source}", path.display())]
    ReportCreate { option: &'static str, path: PathBuf, source: std::io::Error },
    #[error("--testee-log {}: not a directory", .0.display())]
    TesteeLogNotDirectory(PathBuf),
    #[error("no trace files (*.jsonl) in {0}: nothing to check (--allow-empty accepts that)")]
    NoTraceFiles(String),
    #[error(transparent)]
    Load(#[from] mooncake_conformance::load_error::LoadError),
    #[error(transparent)]
    Jsonl(#[from] mooncake_conformance::jsonl::JsonlError),
    #[error(transparent)]
    Testee(#[from] mooncake_conformance::testee::TesteeCommandError),
}

/// A whole number above zero (block sizes).
fn positive(s: &str) -> Result<usize, ArgError> {
    match s.parse::<usize>() {
        Ok(0) => Err(ArgError::NotAtLeastOne),
        Ok(n) => Ok(n),
        Err(_) => Err(ArgError::NotWholeNumber(s.into())),
    }
}

/// `--speaks` names or releases → push revision names (`None` when not given), through the spec's resolver.
fn resolve_revisions(given: &[String]) -> Result<Option<Vec<String>>, ArgError> {
    if given.is_empty() {
        return Ok(None);
    }
    let spec = mooncake_wire::spec::Spec::builtin();
    given
        .iter()
        .map(|g| match spec.resolve(g) {
            Ok(r) if r.revision.family == "push" => Ok(r.revision.revision.clone()),
            Ok(r) => Err(ArgError::SpeaksOtherFamily {
                given: g.clone(),
                revision: r.revision.revision.clone(),
                family: r.revision.family.clone(),
            }),
            Err(e) => Err(ArgError::Speaks(e)),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn seconds(v: f64, option: &'static str) -> Result<std::time::Duration, ArgError> {
    if v.is_nan() || v > mooncake_wire::limits::MAX_TIMEOUT_SECS {
        return Err(ArgError::Seconds(option));
    }
    std::time::Duration::try_from_secs_f64(v).map_err(|_| ArgError::Seconds(option))
}

/// The report files, opened (created) before anything runs so that a bad path costs nothing.
struct ReportFiles {
    junit: Option<(PathBuf, File)>,
    markdown: Option<(PathBuf, File)>,
    json: Option<(PathBuf, File)>,
}

impl ReportFiles {
    fn open(o: &RunOpts) -> Result<ReportFiles, ArgError> {
        let mut seen: Vec<PathBuf> = vec![];
        let mut open = |p: &Option<PathBuf>, option: &'static str| -> Result<Option<(PathBuf, File)>, ArgError> {
            let Some(p) = p else { return Ok(None) };
            if seen.contains(p) {
                return Err(ArgError::SameReport { option, path: p.clone() });
            }
            seen.push(p.clone());
            if p.is_dir() {
                return Err(ArgError::ReportIsDirectory { option, path: p.clone() });
            }
            let f = File::create(p).map_err(|source| ArgError::ReportCreate { option, path: p.clone(), source })?;
            Ok(Some((p.clone(), f)))
        };
        Ok(ReportFiles {
            junit: open(&o.junit, "--junit")?,
            markdown: open(&o.markdown, "--markdown")?,
            json: open(&o.json, "--json")?,
        })
    }
}

/// Progress on standard error: a bar on a terminal, one line per finished case otherwise.
fn progress_printer(mode: ProgressMode) -> Option<Box<dyn FnMut(Progress<'_>) + Send>> {
    let bar = match mode {
        ProgressMode::Off => return None,
        ProgressMode::Bar => true,
        ProgressMode::Lines => false,
        ProgressMode::Auto => std::io::stderr().is_terminal(),
    };
    let mut failed_so_far = 0;
    Some(Box::new(move |p: Progress<'_>| match (bar, p) {
        (true, Progress::Started { index, total, id }) => {
            let done = index * 24 / total.max(1);
            err(&format!(
                "\r[{}{}] {:>3}/{total} {failed_so_far} failed  {:<56}",
                "#".repeat(done),
                "-".repeat(24 - done),
                index + 1,
                id
            ));
        }
        (true, Progress::Finished { index, total, failed, .. }) => {
            failed_so_far = failed;
            if index + 1 == total {
                err(&format!("\r{:<120}\r", ""));
            }
        }
        (false, Progress::Finished { index, total, result, failed }) => {
            let w = total.to_string().len();
            err(&format!(
                "[{:>w$}/{total}] {:<5} {} ({} ms){}\n",
                index + 1,
                result.status.word(),
                result.id,
                result.duration_ms,
                if failed > 0 { format!(" — {failed} failed so far") } else { String::new() }
            ));
        }
        _ => {}
    }))
}

/// Runs the cases and writes the reports.
fn execute(cfg: RunConfig, opts: &RunOpts, files: ReportFiles) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return finish(&[format!("starting the runtime: {e}")], ENVIRONMENT),
    };
    let allow_empty = cfg.allow_empty;
    let rep = match rt.block_on(mooncake_conformance::run::run(cfg)) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let mut errors = vec![];
    let mut write_file =
        |f: Option<(PathBuf, File)>, write: &dyn Fn(&mut std::io::BufWriter<File>) -> std::io::Result<()>| {
            if let Some((p, f)) = f {
                let mut w = std::io::BufWriter::new(f);
                if let Err(e) = write(&mut w).and_then(|_| w.flush()) {
                    errors.push(format!("{}: {e}", p.display()));
                }
            }
        };
    write_file(files.junit, &|w| report::write_run_junit(w, &rep));
    write_file(files.markdown, &|w| report::write_run_markdown(w, &rep));
    write_file(files.json, &|w| write_json(w, &report::run_json(&rep)));
    // A report file that could not be written after the run (a full disk): the environment failed.
    let code = if errors.is_empty() { run_code(&rep, allow_empty) } else { ENVIRONMENT };
    errors.extend(rep.problems(allow_empty));
    out_with(|w| match opts.format {
        Format::Json => write_json(w, &report::run_json(&rep)),
        Format::Text => report::write_run_text(w, &rep),
    });
    finish(&errors, code)
}

/// The runtime of the commands that do I/O.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
}

/// `tap`: records until --duration, SIGINT or SIGTERM; findings on standard output as they happen.
fn tap(cfg: mooncake_conformance::tap::TapConfig, duration: Option<std::time::Duration>) -> ExitCode {
    use mooncake_conformance::tap::{finding_line, Say, Tap};
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return finish(&[format!("starting the runtime: {e}")], ENVIRONMENT),
    };
    rt.block_on(async move {
        let out_path = cfg.out.display().to_string();
        let say = Box::new(|s: Say<'_>| match s {
            Say::Finding(f) => out(&format!("{}\n", finding_line(f))),
            Say::Note(n) => err(&format!("tap: {n}\n")),
        });
        let t = match Tap::start(cfg, say).await {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
        err(&format!("tap: bootstrap server at {} ({}); recording to {out_path}; Ctrl-C stops\n", t.url(), t.mode));
        wait_for_stop(duration).await;
        let rep = t.finish().await;
        out(&format!("{}\n", rep.summary()));
        finish(&rep.troubles, tap_code(&rep))
    })
}

/// Until `duration` has passed, or SIGINT or SIGTERM arrives.
async fn wait_for_stop(duration: Option<std::time::Duration>) {
    let timer = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (mut int, mut term) = match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
            (Ok(i), Ok(t)) => (i, t),
            _ => {
                tokio::select! { _ = timer => {}, _ = tokio::signal::ctrl_c() => {} }
                return;
            }
        };
        tokio::select! { _ = timer => {}, _ = int.recv() => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    tokio::select! { _ = timer => {}, _ = tokio::signal::ctrl_c() => {} }
}

/// What `run` and `replay` share: data, scenarios, testee, options → a run configuration.
fn configure(inputs: Vec<Input>, testee: Option<&str>, o: &RunOpts, data: &Data) -> Result<RunConfig, ArgError> {
    let speaks = resolve_revisions(&o.speaks)?;
    let scenarios = match &o.scenarios {
        Some(p) => data.scenarios()?.overlay_file(p)?,
        None => data.scenarios()?,
    };
    let testee = match testee {
        Some(t) => {
            split_command(t)?;
            TesteeSpec::Command(t.to_string())
        }
        None => TesteeSpec::Builtin,
    };
    let mut cfg = RunConfig::new(inputs, testee);
    cfg.scenarios = scenarios;
    cfg.slack = seconds(o.slack, "--slack")?;
    cfg.speaks = speaks;
    cfg.fail_fast = o.fail_fast;
    cfg.jobs = o.jobs.map(usize::from).unwrap_or_else(|| mooncake_conformance::run::default_jobs(&cfg.testee));
    cfg.allow_empty = o.allow_empty;
    cfg.testee_log = o.testee_log.clone();
    if let Some(d) = &o.testee_log {
        if d.exists() && !d.is_dir() {
            return Err(ArgError::TesteeLogNotDirectory(d.clone()));
        }
    }
    cfg.progress = progress_printer(o.progress);
    Ok(cfg)
}

/// The traces named on the command line; zero files is an error naming the paths (unless `allow_empty`).
fn trace_inputs(paths: &[PathBuf], allow_empty: bool) -> Result<Vec<Input>, ArgError> {
    let (inputs, skipped) = Input::files_noting(paths)?;
    for s in skipped {
        eprintln!("note: {s}");
    }
    if inputs.is_empty() && !allow_empty {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(ArgError::NoTraceFiles(shown.join(", ")));
    }
    Ok(inputs)
}

fn data_of(d: &Option<PathBuf>) -> Result<Data, ArgError> {
    match d {
        Some(dir) => Ok(Data::check(dir)?),
        None => Ok(Data::Embedded),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run { paths, testee, role, case, list, expected_failures, opts } => {
            let data = match data_of(&opts.data) {
                Ok(d) => d,
                Err(e) => return usage(&e),
            };
            let inputs = if paths.is_empty() {
                data.traces("traces").map_err(ArgError::from)
            } else {
                trace_inputs(&paths, opts.allow_empty)
            };
            let inputs = match inputs {
                Ok(i) => i,
                Err(e) => return usage(&e),
            };
            let mut cfg = match configure(inputs, testee.as_deref(), &opts, &data) {
                Ok(c) => c,
                Err(e) => return usage(&e),
            };
            cfg.roles = match role.iter().map(|r| Role::parse(r.trim()).ok_or(r.clone())).collect::<Result<Vec<_>, _>>()
            {
                Ok(r) => r,
                Err(r) => return usage(format!("--role {r}: prefiller, decoder or bootstrap")),
            };
            cfg.cases = case.into_iter().map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
            if list {
                return match mooncake_conformance::run::select_cases(&cfg) {
                    Ok(cases) => {
                        out_with(|w| match opts.format {
                            Format::Json => write_json(w, &report::list_json(&cases)),
                            Format::Text => report::write_list_text(w, &cases),
                        });
                        ExitCode::from(AGREE)
                    }
                    Err(e) => fail(e),
                };
            }
            let expected = match (&expected_failures, &testee) {
                (Some(p), _) => ExpectedFailures::load(p),
                (None, None) => data.expected_failures(),
                (None, Some(_)) => Ok(ExpectedFailures::default()),
            };
            cfg.expected = match expected {
                Ok(e) => e,
                Err(e) => return usage(e),
            };
            let files = match ReportFiles::open(&opts) {
                Ok(f) => f,
                Err(e) => return usage(&e),
            };
            execute(cfg, &opts, files)
        }
        Cmd::Replay { paths, play, peer, listen, bootstrap_bind, timeout, ready_after, testee, opts } => {
            let role = match play {
                PlaySide::Decoder => Role::Prefiller,
                PlaySide::Prefiller => Role::Decoder,
                PlaySide::Client => Role::Bootstrap,
            };
            let timeout = match seconds(timeout, "--timeout") {
                Ok(d) => d,
                Err(e) => return usage(&e),
            };
            let ready_after = match ready_after.map(|s| seconds(s, "--ready-after")).transpose() {
                Ok(d) => d,
                Err(e) => return usage(&e),
            };
            let external = match (role, peer, listen, &testee) {
                (_, None, None, Some(_)) => External::None,
                (Role::Prefiller, Some(p), None, None) => External::Prefillers(p.split(',').map(|s| s.trim().to_string()).collect()),
                (Role::Decoder, None, Some(l), None) => External::Listen { endpoint: l, bootstrap: bootstrap_bind, timeout, ready_after },
                (Role::Bootstrap, Some(p), None, None) => External::Bootstrap(p),
                _ => return usage("give --testee COMMAND, or --peer (with --play decoder or client), or --listen (with --play prefiller)"),
            };
            let data = match data_of(&opts.data) {
                Ok(d) => d,
                Err(e) => return usage(&e),
            };
            let inputs = match trace_inputs(&paths, opts.allow_empty) {
                Ok(i) => i,
                Err(e) => return usage(&e),
            };
            let mut cfg = match configure(inputs, testee.as_deref(), &opts, &data) {
                Ok(c) => c,
                Err(e) => return usage(&e),
            };
            cfg.roles = vec![role];
            cfg.external = external;
            // Endpoint syntax is a usage error before anything else (the run checks reachability, exit 3).
            if let Err(e) = mooncake_conformance::run::preflight_syntax(&cfg.external) {
                return fail(e);
            }
            let files = match ReportFiles::open(&opts) {
                Ok(f) => f,
                Err(e) => return usage(&e),
            };
            execute(cfg, &opts, files)
        }
        Cmd::Tap { bootstrap_bind, upstream, out, duration, revision, scenario, zmq_host, reply_timeout } => {
            let duration = match duration.map(|d| seconds(d, "--duration")).transpose() {
                Ok(d) => d,
                Err(e) => return usage(&e),
            };
            let mut cfg = mooncake_conformance::tap::TapConfig::new(&bootstrap_bind, out);
            cfg.upstream = upstream;
            cfg.revision = revision;
            cfg.scenario = scenario;
            cfg.zmq_host = zmq_host;
            cfg.reply_timeout = match reply_timeout.map(|d| seconds(d, "--reply-timeout")).transpose() {
                Ok(d) => d,
                Err(e) => return usage(&e),
            };
            tap(cfg, duration)
        }
        Cmd::Vectors { paths, format, all, allow_empty } => {
            let files = match mooncake_conformance::jsonl::expand_noting(&paths) {
                Ok(f) => {
                    f.skipped.iter().for_each(|s| eprintln!("note: {s}"));
                    f.files
                }
                Err(e) => return usage(e),
            };
            if files.is_empty() && !allow_empty {
                let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                return usage(format!(
                    "no vector files (*.jsonl, revisions.json) in {}: nothing to check (--allow-empty accepts that)",
                    shown.join(", ")
                ));
            }
            let reps: Vec<_> = files.iter().map(|f| vectors::check_file(f)).collect();
            out_with(|w| match format {
                Format::Json => write_json(w, &report::vectors_json(&reps)),
                Format::Text => report::write_vectors_text(w, &reps, all),
            });
            finish(&vectors::input_problems(&reps, allow_empty), vectors_code(&reps, allow_empty))
        }
        Cmd::Validate { paths, format, data, allow_empty } => {
            let inputs = if paths.is_empty() {
                data_of(&data).and_then(|d| Ok([d.traces("traces")?, d.traces("traces-pull")?].concat()))
            } else {
                trace_inputs(&paths, allow_empty)
            };
            let inputs = match inputs {
                Ok(i) => i,
                Err(e) => return usage(&e),
            };
            let reps: Vec<_> = inputs.iter().map(validate::validate_input).collect();
            out_with(|w| match format {
                Format::Json => write_json(w, &report::validate_json(&reps)),
                Format::Text => report::write_validate_text(w, &reps),
            });
            let problems: Vec<String> = reps
                .iter()
                .flat_map(|r| {
                    r.findings
                        .iter()
                        .filter(|f| INPUT_CHECKS.contains(&f.check) && (f.check != CheckId::TraceEmpty || !allow_empty))
                        .map(move |f| (r, f))
                })
                .map(
                    |(r, f)| {
                        if f.detail.starts_with(&r.path) {
                            f.detail.clone()
                        } else {
                            format!("{}: {}", r.path, f.detail)
                        }
                    },
                )
                .collect();
            finish(&problems, validate_code(&reps, allow_empty))
        }
        Cmd::Matrix { paths, out, check, revision, abort_ms, jobs, format, data } => {
            let data = match data_of(&data) {
                Ok(d) => d,
                Err(e) => return usage(&e),
            };
            let inputs = if paths.is_empty() {
                data.traces("traces").map_err(ArgError::from)
            } else {
                trace_inputs(&paths, false)
            };
            let (inputs, scenarios) = match (inputs, data.scenarios().map_err(ArgError::from)) {
                (Ok(i), Ok(s)) => (i, s),
                (Err(e), _) | (_, Err(e)) => return usage(&e),
            };
            let traces = match mooncake_conformance::matrix::load_traces(&inputs) {
                Ok(t) => t,
                Err(e) => return usage(e),
            };
            let mut only = vec![];
            for r in &revision {
                match mooncake_wire::spec::Spec::builtin().resolve(r) {
                    Ok(x) => only.push(x.revision.revision.clone()),
                    Err(e) => return usage(format!("--revision {e}")),
                }
            }
            let cfg = mooncake_conformance::matrix::MatrixConfig {
                scenarios: std::sync::Arc::new(scenarios),
                abort: std::time::Duration::from_millis(abort_ms.max(50)),
                jobs: jobs.map(usize::from).unwrap_or_else(|| {
                    mooncake_conformance::run::default_jobs(&mooncake_conformance::testee::TesteeSpec::Builtin)
                }),
                only,
                progress: Some(std::sync::Arc::new(|l: &str| eprintln!("{l}"))),
            };
            let rt = match runtime() {
                Ok(r) => r,
                Err(e) => return finish(&[e.to_string()], ENVIRONMENT),
            };
            // The workers are `mooncake-peer testee` processes: a missing program is said once, up front.
            if let Err(e) = rt.block_on(mooncake_conformance::matrix::preflight()) {
                return if e.environment { finish(&[e.message], ENVIRONMENT) } else { usage(&e.message) };
            }
            let m = rt.block_on(mooncake_conformance::matrix::build(&traces, &cfg));
            let md = mooncake_conformance::matrix::render::markdown(&m);
            let mut code = if m.disagreements().is_empty() { AGREE } else { DISAGREE };
            let mut errors = vec![];
            if let Some(f) = &out {
                if let Err(e) = std::fs::write(f, &md) {
                    return usage(format!("--out {}: {e}", f.display()));
                }
            }
            if let Some(f) = &check {
                match std::fs::read_to_string(f) {
                    Ok(t) if t == md => {}
                    Ok(_) => {
                        errors.push(format!(
                            "{} is stale: regenerate it with `mooncake-conformance matrix --out {}`",
                            f.display(),
                            f.display()
                        ));
                        code = DISAGREE;
                    }
                    Err(e) => return usage(format!("--check {}: {e}", f.display())),
                }
            }
            let summary = format!(
                "matrix: {} revisions, {} ordered pairs, {} work, {} break in some scenario, {} disagreements with diff — {}",
                m.revisions.len(),
                m.cells.iter().filter(|c| c.decoder != c.prefiller).count(),
                m.cells.iter().filter(|c| c.decoder != c.prefiller && !c.scenarios.is_empty() && c.works()).count(),
                m.cells.iter().filter(|c| c.decoder != c.prefiller && !c.works()).count(),
                m.disagreements().len(),
                if code == AGREE { "OK" } else { "FAILED" }
            );
            out_with(|w| match format {
                Format::Json => write_json(w, &mooncake_conformance::matrix::render::json(&m)),
                _ => write!(w, "{md}\n{summary}\n"),
            });
            finish(&errors, code)
        }
        Cmd::Diff { old, new, format, allow_breaking, python } => {
            let (old_arg, new_arg) = (old.clone(), new.clone());
            let py = python.unwrap_or_else(mooncake_conformance::extract::default_python);
            let (old, new) = match (spec_source::resolve_with(&old, &py), spec_source::resolve_with(&new, &py)) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => return fail(e),
            };
            if old.family != new.family {
                return usage(format!(
                    "{} is of the {} family and {} of the {} family: a diff compares revisions of one protocol family",
                    old.revision, old.family, new.revision, new.family
                ));
            }
            let mut r = mooncake_wire::diff::diff(&old, &new);
            // What the spec describes: every bundled revision of the family, and a side given as a spec (its
            // file or directory is a revision too). A source side's own additions are what it adds beyond them.
            let family = mooncake_wire::spec::Spec::builtin().family(&new.family);
            let mut known: Vec<&mooncake_wire::spec::Revision> =
                family.map(|f| f.revisions.iter().map(|r| r.as_ref()).collect()).unwrap_or_default();
            for (arg, rev) in [(&old_arg, &old), (&new_arg, &new)] {
                if !spec_source::is_source_side(arg) {
                    known.push(rev);
                }
            }
            mooncake_wire::diff::mark_unspecified(&mut r, &known);
            out_with(|w| match format {
                DiffFormat::Markdown => w.write_all(mooncake_wire::diff::render::markdown(&r).as_bytes()),
                DiffFormat::Json => write_json(w, &mooncake_wire::diff::render::json(&r)),
                DiffFormat::Summary => writeln!(w, "{}", r.summary),
            });
            ExitCode::from(if r.fails() && !allow_breaking { DISAGREE } else { AGREE })
        }
        Cmd::Key { cmd } => match cmd {
            KeyCmd::Build {
                target,
                fields,
                tokens,
                block_size,
                hash_block_size,
                algo,
                pythonhashseed,
                lora_name,
                lora_path,
                cache_salt,
                format,
            } => {
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
                show(
                    keycmd::build(&t, &fields, tokens),
                    |w, b| keycmd::write_built(w, b, format == Format::Json),
                    |_| AGREE,
                )
            }
            KeyCmd::Parse { target, family, key, hints, format } => {
                let t = keycmd::Target { release: target.release, grammar: target.grammar, family };
                show(
                    keycmd::parse(&t, &key, &hints),
                    |w, p| keycmd::write_parsed(w, p, format == Format::Json),
                    |p| if p.ok() { AGREE } else { DISAGREE },
                )
            }
            KeyCmd::Grammars { format } => {
                out_with(|w| keycmd::write_grammars(w, keycmd::grammar_list(), format == Format::Json));
                ExitCode::from(AGREE)
            }
        },
        Cmd::Extract { paths, out, base, python, format, proof, check } => {
            let py = python.unwrap_or_else(mooncake_conformance::extract::default_python);
            if proof {
                return extract_proof(&paths, out.as_ref(), check.as_ref(), &py);
            }
            if check.is_some() {
                return usage("--check goes with --proof");
            }
            let [path] = paths.as_slice() else {
                return usage("extract takes one PATH (a checkout, the package folder, a .py file or a wheel)");
            };
            let fmt = match format {
                ExtractFormat::Toml => extractcmd::Output::Toml,
                ExtractFormat::Json => extractcmd::Output::Json,
                ExtractFormat::Summary => extractcmd::Output::Summary,
            };
            let x = match extractcmd::one(path, base.as_deref(), &py) {
                Ok(x) => x,
                Err(e) => return fail(e),
            };
            let written =
                out.as_ref().map(|o| std::fs::write(o, &x.derived.text).map_err(|e| format!("{}: {e}", o.display())));
            if let Some(Err(e)) = written {
                out_with(|w| extractcmd::write_extraction(w, &x, fmt, true));
                return finish(&[e], ENVIRONMENT);
            }
            write_or_exit(std::io::stderr().lock(), |w| extractcmd::write_notes(w, &x, fmt));
            out_with(|w| extractcmd::write_extraction(w, &x, fmt, out.is_some()));
            ExitCode::from(AGREE)
        }
        Cmd::Hash { cmd } => match cmd {
            HashCmd::Factors { file, format } => show(
                hashcmd::factors(&file),
                |w, f| hashcmd::write_factors(w, f, format == Format::Json),
                |f| if matches!(f, hashcmd::Factors::Raises(_)) { DISAGREE } else { AGREE },
            ),
            HashCmd::Wire { revision, format } => show(
                hashcmd::wire(revision.as_deref()),
                |w, e| hashcmd::write_wire(w, e, format == Format::Json),
                |_| AGREE,
            ),
            HashCmd::Check { a, b, format } => show(
                hashcmd::check(&a, &b),
                |w, c| hashcmd::write_check(w, c, format == Format::Json),
                |c| if c.compatible { AGREE } else { DISAGREE },
            ),
            HashCmd::Nixl { release, file, engine, format } => show(
                hashcmd::nixl(&release, &file, engine.as_deref()),
                |w, n| hashcmd::write_nixl(w, n, format == Format::Json),
                |_| AGREE,
            ),
        },
    }
}

/// `extract --proof`: the table (to standard output, or `--out`), compared with `--check`.
fn extract_proof(paths: &[PathBuf], out: Option<&PathBuf>, check: Option<&PathBuf>, python: &str) -> ExitCode {
    let p = match extractcmd::proof(paths, python) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let mut errors = vec![];
    let mut code = if p.disagreeing == 0 { AGREE } else { DISAGREE };
    if let Some(o) = out {
        if let Err(e) = std::fs::write(o, &p.markdown) {
            return finish(&[format!("{}: {e}", o.display())], ENVIRONMENT);
        }
    }
    if let Some(c) = check {
        match std::fs::read_to_string(c) {
            Ok(t) if t == p.markdown => {}
            Ok(_) => {
                errors.push(format!(
                    "{} is stale: regenerate with `mooncake-conformance extract --proof --out {}`",
                    c.display(),
                    c.display()
                ));
                code = DISAGREE;
            }
            Err(e) => return finish(&[format!("{}: {e}", c.display())], USAGE),
        }
    }
    if p.disagreeing > 0 {
        errors.push(format!("{} wheel(s) do not give the bundled fingerprint", p.disagreeing));
    }
    out_with(|w| {
        if out.is_none() {
            w.write_all(p.markdown.as_bytes())?;
        }
        w.write_all(p.skipped.as_bytes())
    });
    finish(&errors, code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every option and argument of every subcommand has help text, and every subcommand's help states the exit
    /// codes and ends with an example.
    #[test]
    fn every_option_has_help_and_every_command_an_example() {
        fn walk(c: &clap::Command, path: &str, problems: &mut Vec<String>) {
            let here = format!("{path} {}", c.get_name());
            for a in c.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    problems.push(format!("{here}: --{id} has no help text"));
                }
            }
            if c.get_subcommands().next().is_none() || c.get_name() != "mooncake-conformance" {
                let after = c.get_after_help().map(|s| s.to_string()).unwrap_or_default();
                if !after.contains("Exit codes") {
                    problems.push(format!("{here}: its help does not state the exit codes"));
                }
                let last = after.trim_end().lines().last().unwrap_or("").trim_start();
                if !after.contains("Example") || !last.starts_with("mooncake-conformance") && !last.starts_with("echo")
                {
                    problems.push(format!("{here}: its help does not end with an example"));
                }
            }
            for s in c.get_subcommands() {
                if s.get_name() != "help" {
                    walk(s, &here, problems);
                }
            }
        }
        let mut problems = vec![];
        walk(&Cli::command(), "", &mut problems);
        assert!(problems.is_empty(), "{problems:#?}");
        Cli::command().debug_assert();
    }
}
