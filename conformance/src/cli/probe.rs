//! `probe`: asks a running generation-2 deployment what it is, without disturbing it.

use std::process::ExitCode;
use std::sync::Arc;

use mooncake_conformance::probe::{self, live, Plan};
use mooncake_wire::spec::{Revision, Spec};

use super::error::{verdict, CliError};
use super::output::out_with;
use super::seconds;

/// Ask a running generation-2 deployment (vLLM 0.16.0 or newer) what it is: the bootstrap server's table of
/// engines and workers (GET /query), whether each worker's ZeroMQ ROUTER is reachable, and which revisions
/// each prefiller worker can run, told from its answers to messages every revision answers with one reply and
/// no state — one-field maps that no revision decodes as a pull (answered ERROR with msgspec's text naming the
/// field it stops at) and a lease heartbeat naming a transfer id no deployment has (a 0.34.0 prefiller answers
/// it by whether leases are on; older ones with ERROR). The messages are derived from spec/, not typed in;
/// revisions whose answers are all the same are reported as one range (`--plan` lists the messages and the
/// ranges). Nothing is sent that starts a transfer or registers anything. Generation 1 (0.13.0 – 0.15.1) has
/// no bootstrap server: the probe never reaches its listeners, which die on a malformed frame.
///
/// With --decoder-revision, each worker gets `diff`'s verdict for a decoder of that revision pulling from it
/// (the verdicts the committed compatibility matrix observes). With --engine, a transfer engine's segment
/// descriptor is fetched by the P2P handshake (ours offers no buffer) and checked: protocol, buffers, the data
/// port reachable, and every field a real engine target writes (the runner's TE-DESCRIPTOR audit).
///
/// Bounds: every request (the query, each TCP connect, each reply awaited, the handshake) waits at most
/// --timeout; workers are probed 16 at a time, so one worker costs at most (messages + 1) × --timeout.
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = healthy; 1 = a finding (an unreachable or silent worker, answers that fit no revision, a duplicate or missing registration, an incompatible or unsure pair, an engine problem); 2 = bad usage; 3 = a bootstrap server cannot be reached (or gives no answer within --timeout), or `--decoder-revision local` finds no vLLM.", "\n\nExamples:\n  mooncake-conformance probe --plan\n  mooncake-conformance probe --bootstrap http://10.0.0.1:8998 --decoder-revision 0.33.0 --engine 10.0.0.2:17000"))]
pub(crate) struct ProbeArgs {
    /// A bootstrap server (http://HOST:PORT); may be repeated, one per prefill instance (each vLLM prefill
    /// instance runs its own).
    #[arg(long, value_name = "URL", required_unless_present = "plan")]
    bootstrap: Vec<String>,
    /// A transfer engine's RPC (handshake) address to check; may be repeated.
    #[arg(long, value_name = "HOST:PORT")]
    engine: Vec<String>,
    /// The decoders' revision or release (0.33.0, vllm-0.26.0..0.28.0), or `local`: the vLLM installed for
    /// --python.
    #[arg(long, value_name = "REVISION")]
    decoder_revision: Option<String>,
    /// The Python whose installed vLLM `--decoder-revision local` names (default: as `extract` finds one).
    #[arg(long, value_name = "PYTHON")]
    python: Option<String>,
    /// Seconds each request may take.
    #[arg(long, default_value_t = 3.0, value_name = "SECONDS")]
    timeout: f64,
    /// One JSON document instead of the table.
    #[arg(long)]
    json: bool,
    /// Print the probe messages, what each revision answers and which revisions cannot be told apart; no
    /// network.
    #[arg(long, conflicts_with_all = ["bootstrap", "engine", "decoder_revision"])]
    plan: bool,
}

/// `probe`: 0 healthy, 1 a problem, 3 no bootstrap table.
pub(crate) fn exec(args: ProbeArgs) -> Result<ExitCode, CliError> {
    let timeout = seconds(args.timeout, "--timeout")?;
    if timeout.is_zero() {
        return Err(CliError::Usage("--timeout must be above 0".into()));
    }
    let plan = Plan::builtin(&nonce());
    if args.plan {
        out_with(|w| probe::identify::write_plan(w, &plan, args.json));
        return Ok(verdict(true));
    }
    if let Some(url) = args.bootstrap.iter().find(|u| !u.starts_with("http://")) {
        return Err(CliError::Usage(format!("--bootstrap {url}: give http://HOST:PORT")));
    }
    let decoder = match &args.decoder_revision {
        Some(r) => Some(decoder_revision(r, args.python.as_deref())?),
        None => None,
    };
    let report = live::run(&args.bootstrap, &args.engine, &plan, decoder.as_ref(), timeout)
        .map_err(|e| CliError::Environment(e.to_string()))?;
    out_with(|w| probe::write_report(w, &report, args.json));
    Ok(verdict(report.problems.is_empty()))
}

/// A generation-2 push revision by any name `hash wire` takes, or `local`: the installed vLLM's.
fn decoder_revision(given: &str, python: Option<&str>) -> Result<Arc<Revision>, CliError> {
    let name = match given {
        "local" => local_vllm(python)?,
        other => other.to_string(),
    };
    let r = Spec::builtin().resolve(&name).map_err(|e| CliError::Usage(format!("--decoder-revision {e}")))?;
    if r.revision.family != "push" || r.revision.generation != 2 {
        return Err(CliError::Usage(format!(
            "--decoder-revision {given}: {} is not a generation-2 push revision (only those have a bootstrap server)",
            r.revision.revision
        )));
    }
    Ok(r.revision)
}

/// The version of the vLLM installed for `python` (its package metadata; vLLM is not imported).
fn local_vllm(python: Option<&str>) -> Result<String, CliError> {
    let py = python.map(str::to_string).unwrap_or_else(mooncake_conformance::extract::default_python);
    let out = std::process::Command::new(&py)
        .args(["-c", "import importlib.metadata as m; print(m.version('vllm'))"])
        .output()
        .map_err(|e| CliError::Environment(format!("--decoder-revision local: cannot run {py}: {e}")))?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || v.is_empty() {
        return Err(CliError::Environment(format!("--decoder-revision local: {py} has no vllm package installed")));
    }
    // A local build's version (0.33.1.dev3+g…) names its release.
    Ok(v.split(['+', '.'])
        .take(3)
        .collect::<Vec<_>>()
        .join(".")
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .to_string())
}

/// A transfer id no deployment has (heartbeats name it): the time and the process id.
fn nonce() -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("mooncake-wire-probe-{:x}-{:x}", t, std::process::id())
}
