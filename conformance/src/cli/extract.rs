//! `extract`: a spec revision derived statically from vLLM's source; `--proof`, the proof table on the
//! cached wheels.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;

use mooncake_conformance::extractcmd::{self, Output};

use super::error::{ArgError, CliError, AGREE, DISAGREE};
use super::output::{finish, out_with, write_or_exit};

/// Derive a spec revision from vLLM's source, statically (Python's `ast` through a bundled script; nothing
/// of vLLM or torch is imported): every msgspec.Struct (fields in order, types, defaults, struct options),
/// every IntEnum on the wire, the aliases they use, the bootstrap server's routes and models, the literal
/// err_msg texts of its answers with their statuses, the kv_connector_extra_config keys and environment
/// variables it reads. Written as a derived spec file: edits on the bundled revision it is closest to;
/// behaviour, transport and docs are that revision's, and every fact that cannot be read statically is
/// reported as "not derived: …".
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = derived (with --proof: every wheel gives the bundled fingerprint, and --check matches); 1 = --proof: a wheel disagrees or --check differs, or the derived revision does not load; 2 = bad usage, or PATH is not vLLM Mooncake source; 3 = the environment failed (no Python).", "\n\nExamples:\n  mooncake-conformance extract ~/vllm --out proposed.toml\n  mooncake-conformance diff vllm-0.33.0 ~/vllm\n  mooncake-conformance extract --proof --out schema/push/extract-proof.md"))]
pub(crate) struct ExtractArgs {
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
    /// The Python that runs the bundled script (default: $MOONCAKE_PYTHON, else the python3 next to this program — the
    /// environment pip installed it into — else python3 on PATH).
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

impl From<ExtractFormat> for Output {
    fn from(f: ExtractFormat) -> Output {
        match f {
            ExtractFormat::Toml => Output::Toml,
            ExtractFormat::Json => Output::Json,
            ExtractFormat::Summary => Output::Summary,
        }
    }
}

/// `extract`: the revision derived from one source (or, with `--proof`, the proof table).
pub(crate) fn exec(args: ExtractArgs) -> Result<ExitCode, CliError> {
    let py = args.python.unwrap_or_else(mooncake_conformance::extract::default_python);
    if args.proof {
        return proof(&args.paths, args.out.as_deref(), args.check.as_deref(), &py);
    }
    if args.check.is_some() {
        return Err(ArgError::CheckWithoutProof.into());
    }
    let [path] = args.paths.as_slice() else {
        return Err(ArgError::ExtractOnePath.into());
    };
    let fmt = Output::from(args.format);
    let x = extractcmd::one(path, args.base.as_deref(), &py)?;
    if let Some(o) = &args.out {
        if let Err(e) = std::fs::write(o, &x.derived.text) {
            // The summary (or JSON) still says what was derived; the file is what failed.
            out_with(|w| extractcmd::write_extraction(w, &x, fmt, true));
            return Err(CliError::Environment(format!("{}: {e}", o.display())));
        }
    }
    write_or_exit(std::io::stderr().lock(), |w| extractcmd::write_notes(w, &x, fmt));
    out_with(|w| extractcmd::write_extraction(w, &x, fmt, args.out.is_some()));
    Ok(ExitCode::from(AGREE))
}

/// `extract --proof`: the table (to standard output, or `--out`), compared with `--check`.
fn proof(paths: &[PathBuf], out: Option<&Path>, check: Option<&Path>, python: &str) -> Result<ExitCode, CliError> {
    let p = extractcmd::proof(paths, python)?;
    let mut errors = vec![];
    let mut code = if p.disagreeing == 0 { AGREE } else { DISAGREE };
    if let Some(o) = out {
        std::fs::write(o, &p.markdown).map_err(|e| CliError::Environment(format!("{}: {e}", o.display())))?;
    }
    if let Some(c) = check {
        let current = std::fs::read_to_string(c).map_err(|e| CliError::Usage(format!("{}: {e}", c.display())))?;
        if current != p.markdown {
            let shown = c.display();
            errors.push(format!(
                "{shown} is stale: regenerate with `mooncake-conformance extract --proof --out {shown}`"
            ));
            code = DISAGREE;
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
    Ok(finish(&errors, code))
}
