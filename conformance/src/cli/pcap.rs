//! `pcap`: a trace as a packet capture (pcapng) that Wireshark and tshark open, the ZeroMQ messages on TCP
//! connections speaking ZMTP 3.1 and the bootstrap exchanges as HTTP (`mooncake_conformance::capture`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use mooncake_conformance::bundled::Data;
use mooncake_conformance::capture::{capture_all, Summary, BOOTSTRAP_PORT};
use mooncake_conformance::report::write_json;
use mooncake_trace::jsonl::Input;
use mooncake_trace::trace::Trace;

use super::error::{CliError, AGREE};
use super::output::{Format, Report};

/// Write traces as a packet capture (pcapng): every message a trace records as sent, on TCP connections
/// over 127.0.0.1 — ZeroMQ as ZMTP 3.1 (greeting, NULL handshake, READY, frames as libzmq writes them), the
/// bootstrap exchanges as HTTP on port 8998. Several traces go into one file one after the other (`--format
/// json` gives each one's first frame number). Open it in Wireshark with the dissector of `mooncake-conformance
/// dissector` to read the messages by field, revision and status.
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = the capture was written; 1 = never; 2 = bad usage, or a file that is not a trace; 3 = the capture cannot be written.", "\n\nExample:\n  mooncake-conformance pcap vllm-0.33.0/a_single_success --out a.pcapng"))]
pub(crate) struct PcapArgs {
    /// Trace files or directories, or bundled traces by name (`vllm-0.33.0/a_single_success`,
    /// `traces-pull/vllm-ascend-0.18.0/a_meta_then_done`).
    #[arg(value_name = "TRACE", required = true)]
    traces: Vec<PathBuf>,
    /// Where to write the capture.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Output format of the summary.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// What was written where.
struct Written {
    traces: Vec<(String, Summary)>,
    out: PathBuf,
}

impl Report for Written {
    fn write_text(&self, w: &mut impl Write) -> std::io::Result<()> {
        for (trace, s) in &self.traces {
            writeln!(
                w,
                "{trace}: {} ZeroMQ messages ({} MessagePack) on {} connections, {} HTTP requests and {} \
                 responses (port {BOOTSTRAP_PORT}), {} packets from frame {}",
                s.zmq_messages,
                s.zmq_decoded,
                s.zmq_connections,
                s.http_requests,
                s.http_responses,
                s.packets,
                s.first_packet
            )?;
        }
        let packets: usize = self.traces.iter().map(|(_, s)| s.packets).sum();
        writeln!(w, "wrote {} ({} traces, {packets} packets)", self.out.display(), self.traces.len())
    }
    fn write_json(&self, w: &mut impl Write) -> std::io::Result<()> {
        let traces: Vec<_> = self.traces.iter().map(|(t, s)| serde_json::json!({"trace": t, "summary": s})).collect();
        write_json(w, &serde_json::json!({"out": self.out, "traces": traces}))
    }
}

/// The traces named: files (directories expanded), else a bundled trace of that name.
fn inputs(path: &PathBuf) -> Result<Vec<Input>, CliError> {
    if path.exists() {
        return Ok(Input::files(std::slice::from_ref(path))?);
    }
    let name = path.to_string_lossy().trim_end_matches(".jsonl").to_string();
    for set in ["traces", "traces-pull"] {
        for i in Data::Embedded.traces(set)? {
            if let Input::Bundled { name: n, .. } = &i {
                let n = n.trim_end_matches(".jsonl");
                if n == name || n.strip_prefix(&format!("{set}/")) == Some(name.as_str()) {
                    return Ok(vec![i]);
                }
            }
        }
    }
    Err(CliError::Usage(format!("{}: no such file, and no bundled trace of that name", path.display())))
}

/// `pcap`: reads the trace, writes the capture, shows what it holds.
pub(crate) fn exec(args: PcapArgs) -> Result<ExitCode, CliError> {
    let PcapArgs { traces, out, format } = args;
    let mut loaded = vec![];
    for p in &traces {
        for input in inputs(p)? {
            loaded.push(Trace::load_input(&input).map_err(|e| CliError::Usage(e.to_string()))?);
        }
    }
    if loaded.is_empty() {
        return Err(CliError::Usage(format!("no trace files (*.jsonl) in {}", super::shown(&traces))));
    }
    let (bytes, sums) = capture_all(&loaded).map_err(|e| CliError::Usage(e.to_string()))?;
    std::fs::write(&out, bytes).map_err(|e| CliError::Environment(format!("--out {}: {e}", out.display())))?;
    let traces = loaded.into_iter().map(|t| t.path).zip(sums).collect();
    format.show(&Written { traces, out });
    Ok(ExitCode::from(AGREE))
}
