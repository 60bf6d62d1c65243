//! `pcap`: a trace as a packet capture (pcapng) that Wireshark and tshark open, the ZeroMQ messages on TCP
//! connections speaking ZMTP 3.1 and the bootstrap exchanges as HTTP (`mooncake_conformance::capture`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use mooncake_conformance::bundled::Data;
use mooncake_conformance::capture::{capture, Summary, BOOTSTRAP_PORT};
use mooncake_conformance::jsonl::Input;
use mooncake_conformance::report::write_json;
use mooncake_conformance::trace::Trace;

use super::error::{CliError, AGREE};
use super::output::{Format, Report};

/// Write a trace as a packet capture (pcapng): every message the trace records as sent, on TCP connections
/// over 127.0.0.1 — ZeroMQ as ZMTP 3.1 (greeting, NULL handshake, READY, frames as libzmq writes them), the
/// bootstrap exchanges as HTTP on port 8998. Open it in Wireshark with the dissector of `mooncake-conformance
/// dissector` to read the messages by field, revision and status.
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = the capture was written; 1 = never; 2 = bad usage, or a file that is not a trace; 3 = the capture cannot be written.", "\n\nExample:\n  mooncake-conformance pcap vllm-0.33.0/a_single_success --out a.pcapng"))]
pub(crate) struct PcapArgs {
    /// A trace file, or a bundled trace by name (`vllm-0.33.0/a_single_success`, `traces-pull/vllm-ascend-0.18.0/a_meta_then_done`).
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// Where to write the capture.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Output format of the summary.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// What was written where.
struct Written {
    trace: String,
    out: PathBuf,
    summary: Summary,
}

impl Report for Written {
    fn write_text(&self, w: &mut impl Write) -> std::io::Result<()> {
        let s = &self.summary;
        writeln!(
            w,
            "{}: {} ZeroMQ messages ({} MessagePack) on {} connections, {} HTTP requests and {} responses \
             (port {BOOTSTRAP_PORT}), {} packets -> {}",
            self.trace,
            s.zmq_messages,
            s.zmq_decoded,
            s.zmq_connections,
            s.http_requests,
            s.http_responses,
            s.packets,
            self.out.display()
        )
    }
    fn write_json(&self, w: &mut impl Write) -> std::io::Result<()> {
        let v = serde_json::json!({"trace": self.trace, "out": self.out, "summary": self.summary});
        write_json(w, &v)
    }
}

/// The trace named: a file, else a bundled trace of that name.
fn input(path: &PathBuf) -> Result<Input, CliError> {
    if path.exists() {
        return Ok(Input::File(path.clone()));
    }
    let name = path.to_string_lossy().trim_end_matches(".jsonl").to_string();
    for set in ["traces", "traces-pull"] {
        for i in Data::Embedded.traces(set)? {
            if let Input::Bundled { name: n, .. } = &i {
                let n = n.trim_end_matches(".jsonl");
                if n == name || n.strip_prefix(&format!("{set}/")) == Some(name.as_str()) {
                    return Ok(i);
                }
            }
        }
    }
    Err(CliError::Usage(format!("{}: no such file, and no bundled trace of that name", path.display())))
}

/// `pcap`: reads the trace, writes the capture, shows what it holds.
pub(crate) fn exec(args: PcapArgs) -> Result<ExitCode, CliError> {
    let PcapArgs { trace, out, format } = args;
    let input = input(&trace)?;
    let t = Trace::load_input(&input).map_err(|e| CliError::Usage(e.to_string()))?;
    let (bytes, summary) = capture(&t).map_err(|e| CliError::Usage(e.to_string()))?;
    std::fs::write(&out, bytes).map_err(|e| CliError::Environment(format!("--out {}: {e}", out.display())))?;
    format.show(&Written { trace: input.name(), out, summary });
    Ok(ExitCode::from(AGREE))
}
