//! `replay`: recorded traffic against one implementation already running (or a testee command), one role.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use mooncake_conformance::play::{External, Role};

use super::cases::{configure, execute, ReportFiles, RunOpts};
use super::error::{ArgError, CliError};
use super::{data_of, seconds, trace_inputs};

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
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = every case passes; 1 = a case fails; 2 = bad usage or input (a wrong endpoint scheme, no trace); 3 = the environment failed (nothing listening at --peer, a port of --listen or --bootstrap-bind in use, a testee that died).", "\n\nExample:\n  mooncake-conformance replay --play decoder --peer tcp://127.0.0.1:5555 conformance/traces/vllm-0.33.0/a_single_success.jsonl"))]
pub(crate) struct ReplayArgs {
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

/// The role under test, and the implementation of it the runner talks to: `--testee`, `--peer` or
/// `--listen`, whichever goes with `--play`.
fn target(a: &ReplayArgs) -> Result<(Role, External), ArgError> {
    let role = match a.play {
        PlaySide::Decoder => Role::Prefiller,
        PlaySide::Prefiller => Role::Decoder,
        PlaySide::Client => Role::Bootstrap,
    };
    let timeout = seconds(a.timeout, "--timeout")?;
    let ready_after = a.ready_after.map(|s| seconds(s, "--ready-after")).transpose()?;
    let external = match (role, a.peer.clone(), a.listen.clone(), &a.testee) {
        (_, None, None, Some(_)) => External::None,
        (Role::Prefiller, Some(p), None, None) => {
            External::Prefillers(p.split(',').map(|s| s.trim().to_string()).collect())
        }
        (Role::Decoder, None, Some(l), None) => {
            External::Listen { endpoint: l, bootstrap: a.bootstrap_bind.clone(), timeout, ready_after }
        }
        (Role::Bootstrap, Some(p), None, None) => External::Bootstrap(p),
        _ => return Err(ArgError::ReplayTarget),
    };
    Ok((role, external))
}

/// `replay`: the cases of one role against the implementation `--peer`, `--listen` or `--testee` names.
pub(crate) fn exec(args: ReplayArgs) -> Result<ExitCode, CliError> {
    let (role, external) = target(&args)?;
    let data = data_of(&args.opts.data)?;
    let inputs = trace_inputs(&args.paths, args.opts.allow_empty)?;
    let mut cfg = configure(inputs, args.testee.as_deref(), &args.opts, &data)?;
    cfg.roles = vec![role];
    cfg.external = external;
    // Endpoint syntax is a usage error before anything else (the run checks reachability, exit 3).
    mooncake_conformance::run::preflight_syntax(&cfg.external)?;
    let files = ReportFiles::open(&args.opts)?;
    execute(cfg, args.opts.format, files)
}
