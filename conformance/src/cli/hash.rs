//! `hash`: vLLM's hash_factors, NIXL's compatibility hash, the wire fingerprint, and whether two revisions
//! interoperate.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use mooncake_conformance::hashcmd::{self, Compatibility, Factors, NixlHash, WireEntry};

use super::error::{verdict, CliError};
use super::output::{report_through, Format};

/// Compatibility hashes: vLLM's hash_factors of a value, the wire fingerprint of a revision, and whether
/// two revisions are wire-compatible (exit 0 compatible, 1 not).
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = done, or compatible; 1 = incompatible, or Python would raise for the value; 2 = bad usage or input.", "\n\nExample:\n  mooncake-conformance hash check 0.32.0 0.33.0"))]
pub(crate) struct HashArgs {
    #[command(subcommand)]
    cmd: HashCmd,
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

report_through!(
    Factors => hashcmd::write_factors,
    [WireEntry] => hashcmd::write_wire,
    Compatibility => hashcmd::write_check,
    NixlHash => hashcmd::write_nixl,
);

/// `hash factors | nixl | wire | check`: the hash, or the verdict of `check`.
pub(crate) fn exec(args: HashArgs) -> Result<ExitCode, CliError> {
    let agrees = match args.cmd {
        HashCmd::Factors { file, format } => {
            let f = hashcmd::factors(&file)?;
            format.show(&f);
            !matches!(f, Factors::Raises(_))
        }
        HashCmd::Wire { revision, format } => {
            format.show(hashcmd::wire(revision.as_deref())?.as_slice());
            true
        }
        HashCmd::Check { a, b, format } => {
            let c = hashcmd::check(&a, &b)?;
            format.show(&c);
            c.compatible
        }
        HashCmd::Nixl { release, file, engine, format } => {
            format.show(&hashcmd::nixl(&release, &file, engine.as_deref())?);
            true
        }
    };
    Ok(verdict(agrees))
}
