//! `mooncake-peer`: the reference Mooncake connector peer — a bootstrap server, a prefiller or a decoder
//! speaking a vLLM revision over real ZeroMQ and HTTP on this machine.
//!
//! Every role also reads control commands (`conformance/TESTEE.md`) as JSON lines on standard input and
//! answers on standard output: `{"cmd": "ready", "p_req_id": "p-1", "transfer_id": "xfer-1", "blocks": [[1, 2]]}`
//! makes a transfer pullable, `{"cmd": "pull", ...}` pulls, `{"cmd": "status"}` shows the tables. Logs go to
//! standard error.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use mooncake_reference::testee::{hello, Testee};
use serde_json::{json, Value as J};

#[derive(Parser)]
#[command(
    name = "mooncake-peer",
    version,
    about = "Reference Mooncake connector peer (vLLM push protocol)",
    long_about = None,
    after_help = after_help()
)]
struct Cli {
    /// Log level on standard error: error, warn, info, debug, trace.
    #[arg(long, global = true, default_value = "info")]
    log: String,
    #[command(subcommand)]
    role: PeerCommand,
}

/// The top-level help's epilogue: exit codes, the servers' resource budget (from `mooncake_wire::limits`, so it
/// cannot drift from what the servers do) and an example.
fn after_help() -> String {
    use mooncake_wire::limits as l;
    format!(
        "Exit codes: 0 = stopped on end of input or `stop`; 2 = bad usage or input (an unknown revision, an unreadable layout, a start the peer refuses).\n\n\
         Resource budget (RELIABILITY.md): every server closes a connection that has not finished its handshake or \
         request headers within {hs} s, or a begun message or body within {st} s; keeps at most {all} connections, \
         {host} from one IP address; a ZeroMQ message is at most {msg} MiB and a ROUTER holds at most {buf} MiB for \
         all its connections; the bootstrap server reads bodies up to {body} KiB and registers at most {workers} \
         workers ({engine} per engine, {reg} KiB of ids and addresses). Over a limit: the connection is closed or \
         the request refused, logged at warn, and everyone else is served.\n\n\
         Example (a testee for mooncake-conformance):\n  mooncake-conformance run --testee \"mooncake-peer --log error testee\"",
        hs = l::HANDSHAKE_TIMEOUT_SECS,
        st = l::STALLED_MESSAGE_TIMEOUT_SECS,
        all = l::MAX_SERVER_CONNECTIONS,
        host = l::MAX_SERVER_CONNECTIONS_PER_HOST,
        msg = l::MAX_MESSAGE_BYTES >> 20,
        buf = l::MAX_SERVER_BUFFERED_BYTES >> 20,
        body = l::MAX_HTTP_REQUEST_BODY_BYTES >> 10,
        workers = l::MAX_REGISTERED_WORKERS,
        engine = l::MAX_WORKERS_PER_ENGINE,
        reg = l::MAX_REGISTRY_BYTES >> 10,
    )
}

#[derive(Args, Clone)]
struct Common {
    /// Spec revision to speak, any name `mooncake-conformance hash wire` takes (vllm-0.34.0, 0.33.0, v0.32.0).
    #[arg(long, default_value = "vllm-0.34.0")]
    revision: String,
    /// VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT in seconds (default: the revision's, 480).
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    abort_timeout: Option<f64>,
    /// kv_lease_duration in seconds (kv_connector_extra_config; revisions with KV leases, vLLM 0.34.0 on). A
    /// prefiller holds a ready transfer that long and heartbeats extend it; a decoder renews the requests it is
    /// told about (`{"cmd": "announce", ...}`) every duration / 6 s until their pulls settle. Default: off.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    kv_lease_duration: Option<f64>,
    /// How KV bytes move: `tcp-engine`, Mooncake Transfer Engine's TCP transport (P2P handshake on the
    /// decoder's transfer-engine port, data on a port the handshake names), which vLLM's connector speaks with
    /// `kv_connector_extra_config: {"mooncake_protocol": "tcp"}`. (The in-process fabric is for tests only.)
    #[arg(long, default_value = "tcp-engine", value_parser = ["tcp-engine"])]
    transfer: String,
}

#[derive(Args, Clone)]
struct Parallel {
    /// This worker's tensor-parallel rank.
    #[arg(long, default_value_t = 0)]
    tp_rank: i64,
    /// Tensor-parallel size of this engine.
    #[arg(long, default_value_t = 1)]
    tp_size: i64,
    /// Pipeline-parallel rank.
    #[arg(long, default_value_t = 0)]
    pp_rank: i64,
    /// Pipeline-parallel size.
    #[arg(long, default_value_t = 1)]
    pp_size: i64,
    /// The KV regions this worker registers, as JSON: the layout columns of MooncakeXferMetadata
    /// (kv_caches_base_addr, block_lens, kv_block_lens, registered_layer_names, registered_layer_indices, and
    /// optionally registered_group_indices, registered_shared_group_ids, registered_row_offsets) plus
    /// num_blocks. Memory is allocated for every region.
    #[arg(long)]
    layout: PathBuf,
}

/// The command line's subcommand: a role to serve with its flags (`bootstrap`, `prefiller`, `decoder`), the
/// testee loop, or the fault list. Not a role as the testee protocol and traces mean it
/// (`mooncake_testee_protocol::Role`, which names a peer): this one carries each command's configuration.
#[derive(Subcommand, Clone)]
enum PeerCommand {
    /// Run a bootstrap server (`POST /register`, `GET /query`) with the revision's semantics.
    #[command(
        after_help = "Exit codes: 0 = stopped; 2 = bad usage or input.\n\nExample:\n  mooncake-peer bootstrap --revision 0.33.0 --bind 127.0.0.1:8998"
    )]
    Bootstrap {
        #[command(flatten)]
        common: Common,
        /// Address to listen on (vLLM: 0.0.0.0:VLLM_MOONCAKE_BOOTSTRAP_PORT, default port 8998).
        #[arg(long, default_value = "127.0.0.1:8998")]
        bind: String,
    },
    /// Run a prefiller worker: bind a ROUTER, register with the bootstrap server, serve pulls.
    #[command(
        after_help = "Exit codes: 0 = stopped; 2 = bad usage or input.\n\nExamples:\n  mooncake-peer prefiller --engine-id p0 --layout layout.json --bootstrap http://127.0.0.1:8998\n  mooncake-peer prefiller --revision 0.34.0 --kv-lease-duration 30 --engine-id p0 --layout layout.json --bootstrap http://127.0.0.1:8998"
    )]
    Prefiller {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        parallel: Parallel,
        /// ROUTER address; a `*` port picks a free one (vLLM binds a random port).
        #[arg(long, default_value = "tcp://127.0.0.1:*")]
        bind: String,
        /// kv_transfer_config.engine_id of this engine.
        #[arg(long)]
        engine_id: String,
        /// Data-parallel rank sent in /register.
        #[arg(long, default_value_t = 0)]
        dp_rank: i64,
        /// Bootstrap server to register with, http://host:port.
        #[arg(long)]
        bootstrap: Option<String>,
        /// Total KV heads of the model (for heterogeneous-TP planning).
        #[arg(long, default_value_t = 8)]
        kv_heads: i64,
        /// The model uses MLA (its KV cache is replicated across TP ranks).
        #[arg(long)]
        mla: bool,
    },
    /// Run a decoder worker: serve transfer-engine writes into its memory; pull when told on standard input.
    #[command(
        after_help = "Exit codes: 0 = stopped; 2 = bad usage or input.\n\nExample:\n  mooncake-peer decoder --layout layout.json --revision 0.33.0"
    )]
    Decoder {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        parallel: Parallel,
        /// IP sent as remote_hostname (and where the transfer-engine port listens).
        #[arg(long, default_value = "127.0.0.1")]
        hostname: String,
        /// layout_id of this registration (odd; 0 turns layout caching off). Default: random.
        #[arg(long)]
        layout_id: Option<u64>,
        /// The transfer engine's RPC (handshake) port, sent as remote_port (default: any free port).
        #[arg(long, default_value_t = 0)]
        te_port: u16,
    },
    /// Speak the testee control protocol only: the role comes with the first `start` command.
    #[command(
        after_help = "Exit codes: 0 = stopped on end of input or `stop`.\n\nExample:\n  mooncake-conformance run --testee \"mooncake-peer --log error testee\""
    )]
    Testee,
    /// List the deliberate faults a role's start config can ask for (`"faults": [names]`): the conformance
    /// runner's mutation suite starts the peer with each and expects a case to catch it.
    #[command(after_help = "Exit codes: 0 = listed.\n\nExample:\n  mooncake-peer faults --json")]
    Faults {
        /// One JSON object per line, `{"name", "roles", "what"}`, instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// `mooncake-peer faults`: every fault, its roles and what it does.
fn list_faults(as_json: bool) -> std::io::Result<()> {
    use mooncake_reference::faults::Fault;
    let mut out = std::io::stdout().lock();
    for f in Fault::ALL {
        let roles: Vec<&str> = f.roles().iter().map(|r| r.as_str()).collect();
        if as_json {
            writeln!(out, "{}", json!({"name": f.name(), "roles": roles, "what": f.what()}))?;
        } else {
            writeln!(out, "{:<24} {:<28} {}", f.name(), roles.join(","), f.what())?;
        }
    }
    out.flush()
}

/// Why the command line cannot be turned into a `start` command (exit code 2).
#[derive(Debug, thiserror::Error)]
enum CliError {
    /// The `--layout` file cannot be read.
    #[error("{}: {source}", path.display())]
    ReadLayout {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The `--layout` file is not JSON.
    #[error("{}: {source}", path.display())]
    LayoutJson {
        /// The file.
        path: PathBuf,
        /// What the JSON parser said.
        source: serde_json::Error,
    },
    /// `--revision` names no revision of the spec.
    #[error("--revision {0}")]
    Revision(#[source] mooncake_wire::spec::ResolveError),
    /// `--revision` names a revision the reference peer does not speak.
    #[error("--revision {given}: the reference peer does not speak {name} (it speaks {})", spoken.join(", "))]
    NotSpoken {
        /// The revision as given.
        given: String,
        /// The revision it resolves to.
        name: String,
        /// The revisions the peer speaks.
        spoken: Vec<String>,
    },
}

/// A `--…` number of seconds: finite, above zero, at most `limits::MAX_TIMEOUT_SECS`.
fn seconds(s: &str) -> Result<f64, String> {
    let max = mooncake_wire::limits::MAX_TIMEOUT_SECS;
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= max => Ok(v),
        Ok(_) | Err(_) => Err(format!("`{s}` is not a number of seconds above 0 and at most {max} (a week)")),
    }
}

fn read_layout(p: &PathBuf) -> Result<J, CliError> {
    let text = std::fs::read_to_string(p).map_err(|source| CliError::ReadLayout { path: p.clone(), source })?;
    serde_json::from_str(&text).map_err(|source| CliError::LayoutJson { path: p.clone(), source })
}

/// An odd 63-bit id, as vLLM draws `secrets.randbits(63) | 1`.
fn random_layout_id() -> u64 {
    let mut seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    seed ^= (std::process::id() as u64) << 32;
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) >> 1) | 1
}

/// `--revision` in any form the spec's resolver takes (`vllm-0.33.0`, `0.33.0`, `v0.32.0`) → the revision name.
fn revision_name(given: &str) -> Result<String, CliError> {
    let r = mooncake_wire::spec::Spec::builtin().resolve(given).map_err(CliError::Revision)?;
    let name = r.revision.revision.clone();
    let spoken = mooncake_reference::testee::revisions();
    if !spoken.contains(&name) {
        return Err(CliError::NotSpoken { given: given.to_string(), name, spoken });
    }
    Ok(name)
}

fn start_command(role: &PeerCommand) -> Result<Option<J>, CliError> {
    let mut role = role.clone();
    match &mut role {
        PeerCommand::Testee | PeerCommand::Faults { .. } => {}
        PeerCommand::Bootstrap { common, .. }
        | PeerCommand::Prefiller { common, .. }
        | PeerCommand::Decoder { common, .. } => common.revision = revision_name(&common.revision)?,
    }
    let role = &role;
    Ok(Some(match role {
        PeerCommand::Testee | PeerCommand::Faults { .. } => return Ok(None),
        PeerCommand::Bootstrap { common, bind } => {
            json!({"cmd": "start", "role": "bootstrap", "revision": common.revision, "config": {"bind": bind}})
        }
        PeerCommand::Prefiller { common, parallel, bind, engine_id, dp_rank, bootstrap, kv_heads, mla } => json!({
            "cmd": "start", "role": "prefiller", "revision": common.revision,
            "config": {
                "engine_id": engine_id, "dp_rank": dp_rank, "tp_rank": parallel.tp_rank, "tp_size": parallel.tp_size,
                "pp_rank": parallel.pp_rank, "pp_size": parallel.pp_size, "bootstrap": bootstrap, "bind": bind,
                "abort_timeout_s": common.abort_timeout, "model": {"total_num_kv_heads": kv_heads, "use_mla": mla},
                "transfer": common.transfer, "kv_lease_duration_s": common.kv_lease_duration,
                "layout": read_layout(&parallel.layout)?,
            }
        }),
        PeerCommand::Decoder { common, parallel, hostname, layout_id, te_port } => json!({
            "cmd": "start", "role": "decoder", "revision": common.revision,
            "config": {
                "hostname": hostname, "tp_rank": parallel.tp_rank, "tp_size": parallel.tp_size, "pp_rank": parallel.pp_rank,
                "pp_size": parallel.pp_size, "layout_id": layout_id.unwrap_or_else(random_layout_id),
                "abort_timeout_s": common.abort_timeout, "layout": read_layout(&parallel.layout)?,
                "transfer": common.transfer, "te_port": te_port, "kv_lease_duration_s": common.kv_lease_duration,
            }
        }),
    }))
}

/// One answer line on standard output. Written in place: tokio's stdout (like its stdin) hands every write
/// to the blocking pool, which made each control command cost two thread hand-offs.
fn answer(v: J) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{v}")?;
    out.flush()
}

/// Standard input line by line, read on a thread of its own.
fn stdin_lines() -> tokio::sync::mpsc::Receiver<std::io::Result<String>> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let reader = move || {
        for line in std::io::stdin().lock().lines() {
            let end = line.is_err();
            if tx.blocking_send(line).is_err() || end {
                break;
            }
        }
    };
    // Without the thread nothing would ever be read: the receiver then reports end of input.
    let _ = std::thread::Builder::new().name("testee-stdin".into()).spawn(reader);
    rx
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let PeerCommand::Faults { json } = cli.role {
        return match list_faults(json) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::ExitCode::from(2)
            }
        };
    }
    let level: tracing::Level = cli.log.parse().unwrap_or(tracing::Level::INFO);
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_max_level(level).init();
    let mut testee = Testee::default();
    if let Err(e) = answer(serde_json::to_value(hello()).expect("a hello serialises")) {
        eprintln!("error: {e}");
        return std::process::ExitCode::from(2);
    }
    match start_command(&cli.role) {
        Ok(Some(cmd)) => {
            let r = testee.handle(&cmd).await;
            let ok = r["ok"] == J::Bool(true);
            let _ = answer(r.clone());
            if !ok {
                eprintln!("error: {}", r["error"].as_str().unwrap_or("start failed"));
                return std::process::ExitCode::from(2);
            }
            tracing::info!(answer = %r, "started");
        }
        Ok(None) => {}
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    }
    let mut lines = stdin_lines();
    loop {
        let line = tokio::select! {
            l = lines.recv() => l,
            _ = tokio::signal::ctrl_c() => break,
        };
        let Some(Ok(line)) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let (a, stop) = match serde_json::from_str::<J>(&line) {
            Ok(cmd) => {
                let stop = cmd.get("cmd").and_then(J::as_str) == Some("stop");
                (testee.handle(&cmd).await, stop)
            }
            Err(e) => (json!({"ok": false, "error": format!("not JSON: {e}")}), false),
        };
        if answer(a).is_err() || stop {
            break;
        }
    }
    drop(testee);
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Timeouts and leases are finite, above zero and at most a week, on the command line: NaN, infinite or
    /// huge ones used to reach the cores (an `Instant + Duration` overflow, or a wait for ever).
    #[test]
    fn durations_out_of_range_are_usage_errors() {
        let parse = |flag: &str, v: &str| {
            let v = format!("{flag}={v}");
            Cli::try_parse_from(["mooncake-peer", "prefiller", "--layout", "l.json", "--engine-id", "e", v.as_str()])
        };
        for bad in ["nan", "inf", "0", "-1", "1e300", "604801"] {
            for flag in ["--abort-timeout", "--kv-lease-duration"] {
                let e = parse(flag, bad).err().unwrap_or_else(|| panic!("{flag} {bad} accepted"));
                assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{flag} {bad}: {e}");
            }
        }
        assert!(parse("--abort-timeout", "2.5").is_ok());
        assert!(parse("--kv-lease-duration", "604800").is_ok());
    }

    /// Every option has help text; every subcommand's help states the exit codes and ends with an example.
    #[test]
    fn every_option_has_help_and_every_command_an_example() {
        let cli = Cli::command();
        let mut problems = vec![];
        for c in std::iter::once(&cli).chain(cli.get_subcommands()) {
            for a in c.get_arguments().filter(|a| !matches!(a.get_id().as_str(), "help" | "version")) {
                if a.get_help().is_none() {
                    problems.push(format!("{}: --{} has no help text", c.get_name(), a.get_id()));
                }
            }
            let after = c.get_after_help().map(|s| s.to_string()).unwrap_or_default();
            let last = after.trim_end().lines().last().unwrap_or("").trim_start().to_string();
            if !after.contains("Exit codes") || !last.starts_with("mooncake-") {
                problems.push(format!("{}: no exit codes or no example at the end of its help", c.get_name()));
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn revision_names_resolve_as_everywhere_else() {
        assert_eq!(revision_name("0.33.0").unwrap(), "vllm-0.33.0");
        assert_eq!(revision_name("v0.32.0").unwrap(), "vllm-0.32.0");
        assert!(revision_name("0.33").unwrap_err().to_string().contains("did you mean `0.33.0`?"));
        // Every revision of both generations is spoken.
        assert_eq!(revision_name("0.14.0").unwrap(), "vllm-0.13.0..0.15.1");
        assert_eq!(revision_name("0.27.1").unwrap(), "vllm-0.26.0..0.28.0");
        assert!(revision_name("ascend:0.18.0").unwrap_err().to_string().contains("does not speak vllm-ascend-0.18.0"));
    }
}
