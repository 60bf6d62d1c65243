//! `tap`: records and checks a live generation-2 deployment until --duration, SIGINT or SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use mooncake_conformance::tap::{finding_line, Say, Tap, TapConfig, TapReport};

use super::error::{CliError, AGREE, DISAGREE, ENVIRONMENT};
use super::output::{err, finish, out};
use super::{runtime, seconds};

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
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = no finding; 1 = a finding; 2 = bad usage (no --revision without --upstream, an unknown or generation-1 revision, an unwritable --out); 3 = the environment failed (--bootstrap-bind in use, an upstream that does not answer, the trace cannot be written, a socket the tap cannot open).", "\n\nExample (the bootstrap server on 8998, 10 minutes, vLLM 0.33.0):\n  mooncake-conformance tap --bootstrap-bind 127.0.0.1:8998 --revision 0.33.0 --out deployment.jsonl --duration 600"))]
pub(crate) struct TapArgs {
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
}

/// 3 when its surroundings failed, 1 on a finding, 0 otherwise.
fn tap_code(r: &TapReport) -> u8 {
    if !r.troubles.is_empty() {
        ENVIRONMENT
    } else if r.finding_count > 0 {
        DISAGREE
    } else {
        AGREE
    }
}

/// Records until --duration, SIGINT or SIGTERM; findings on standard output as they happen.
pub(crate) fn exec(args: TapArgs) -> Result<ExitCode, CliError> {
    let TapArgs { bootstrap_bind, upstream, out: path, duration, revision, scenario, zmq_host, reply_timeout } = args;
    let duration = duration.map(|d| seconds(d, "--duration")).transpose()?;
    let mut cfg = TapConfig::new(&bootstrap_bind, path);
    cfg.upstream = upstream;
    cfg.revision = revision;
    cfg.scenario = scenario;
    cfg.zmq_host = zmq_host;
    cfg.reply_timeout = reply_timeout.map(|d| seconds(d, "--reply-timeout")).transpose()?;
    let rt = runtime().map_err(|e| CliError::Environment(format!("starting the runtime: {e}")))?;
    rt.block_on(async move {
        let out_path = cfg.out.display().to_string();
        let say = Box::new(|s: Say<'_>| match s {
            Say::Finding(f) => out(&format!("{}\n", finding_line(f))),
            Say::Note(n) => err(&format!("tap: {n}\n")),
        });
        let t = Tap::start(cfg, say).await?;
        err(&format!("tap: bootstrap server at {} ({}); recording to {out_path}; Ctrl-C stops\n", t.url(), t.mode));
        wait_for_stop(duration).await;
        let rep = t.finish().await;
        out(&format!("{}\n", rep.summary()));
        Ok(finish(&rep.troubles, tap_code(&rep)))
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
