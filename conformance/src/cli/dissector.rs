//! `dissector`: writes the Wireshark plugin generated from the spec (`mooncake_conformance::dissector`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use mooncake_conformance::dissector;
use mooncake_conformance::report::write_json;
use mooncake_wire::spec::Spec;

use super::error::{CliError, AGREE, DISAGREE};
use super::output::{Format, Report};

/// Write the Wireshark dissector generated from the spec: a Lua plugin that reads the side channel's ZeroMQ
/// messages of every revision (field names, the revisions a message fits, status names, reply texts,
/// request/reply pairing), the transfer engine's P2P handshake and TCP data header, and the bootstrap
/// server's JSON. Load it with `tshark -X lua_script:mooncake.lua` or copy it into Wireshark's plugin folder.
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = written (with --check: the file is the generated plugin); 1 = with --check: the file differs; 2 = bad usage; 3 = the file cannot be written or read.", "\n\nExample:\n  mooncake-conformance dissector --out mooncake.lua"))]
pub(crate) struct DissectorArgs {
    /// Where to write the plugin (the repository's copy: tools/wireshark/mooncake.lua).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Compare FILE with the plugin instead of writing it.
    #[arg(long)]
    check: bool,
    /// Output format of the summary.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

struct Done {
    out: PathBuf,
    bytes: usize,
    check: Option<bool>,
}

impl Report for Done {
    fn write_text(&self, w: &mut impl Write) -> std::io::Result<()> {
        match self.check {
            None => writeln!(w, "wrote {} ({} bytes)", self.out.display(), self.bytes),
            Some(true) => writeln!(w, "{} is the plugin generated from the spec", self.out.display()),
            Some(false) => writeln!(
                w,
                "{} is stale: regenerate it with `mooncake-conformance dissector --out {}`",
                self.out.display(),
                self.out.display()
            ),
        }
    }
    fn write_json(&self, w: &mut impl Write) -> std::io::Result<()> {
        write_json(w, &serde_json::json!({"out": self.out, "bytes": self.bytes, "fresh": self.check}))
    }
}

/// `dissector`: generates the plugin, writes or compares it.
pub(crate) fn exec(args: DissectorArgs) -> Result<ExitCode, CliError> {
    let DissectorArgs { out, check, format } = args;
    let text = dissector::lua(Spec::builtin());
    let io = |e: std::io::Error| CliError::Environment(format!("--out {}: {e}", out.display()));
    if check {
        let have = std::fs::read_to_string(&out).map_err(io)?;
        let fresh = have == text;
        format.show(&Done { out, bytes: text.len(), check: Some(fresh) });
        return Ok(ExitCode::from(if fresh { AGREE } else { DISAGREE }));
    }
    std::fs::write(&out, &text).map_err(io)?;
    format.show(&Done { out, bytes: text.len(), check: None });
    Ok(ExitCode::from(AGREE))
}
