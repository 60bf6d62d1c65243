//! `mooncake-conformance`: checks implementations of the vLLM Mooncake wire against the spec, vLLM's own
//! vectors and recorded vLLM traffic.
//!
//! Exit codes: 0 = everything checked agrees; 1 = at least one disagreement; 2 = bad usage or unreadable input.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use mooncake_conformance::{hashcmd, keycmd, report, validate, vectors};

#[derive(Parser)]
#[command(name = "mooncake-conformance", version, about = "Conformance tooling for the vLLM Mooncake KV-transfer wire", long_about = LONG_ABOUT)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

const LONG_ABOUT: &str = "Conformance tooling for the vLLM Mooncake KV-transfer wire.

Exit codes: 0 = everything agrees, 1 = at least one case disagrees, 2 = bad usage or unreadable input.";

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check vector files: msgspec encodings with accept/reject verdicts (mooncake-vectors) and outputs of
    /// vLLM's functions (mooncake-golden). Directories are searched for *.jsonl recursively.
    ///
    /// For each msgspec case our decoder must give msgspec's verdict; for accepted cases the decoded value must
    /// equal `value` and our re-encoding must equal `canonical_hex` (or `hex`).
    Vectors {
        /// Vector files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// List every failing case, not just the first few per file.
        #[arg(long)]
        all: bool,
    },
    /// Validate recorded traces: every ZMQ payload decodes as the message its direction implies under the
    /// revision of the header's vllm_version and re-encodes to the recorded bytes; bootstrap HTTP bodies match
    /// the spec; protocol checks hold (see conformance/CHECKS.md).
    Validate {
        /// Trace files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Compatibility hashes: vLLM's hash_factors of a value, the wire fingerprint of a revision, and whether
    /// two revisions are wire-compatible (exit 0 compatible, 1 not).
    Hash {
        #[command(subcommand)]
        cmd: HashCmd,
    },
    /// MooncakeStoreConnector keys of a vLLM release (and vllm-ascend / LMCache keys): build one from its
    /// fields or from token ids, parse one back (exit 1 when the key does not fit or has several readings).
    Key {
        #[command(subcommand)]
        cmd: KeyCmd,
    },
}

#[derive(clap::Args)]
struct KeyTarget {
    /// A vLLM release (0.21.0 … 0.33.0): its MooncakeStoreConnector key grammar.
    #[arg(long)]
    release: Option<String>,
    /// A grammar by name (`key grammars` lists them), e.g. ascend-store-key, lmcache-key.
    #[arg(long)]
    grammar: Option<String>,
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Build a key from FIELD=VALUE pairs (vLLM: unspecified parts default as in KeyMetadata; `model=` takes
    /// the configured model and keeps its last path component), or one key per full block of --tokens.
    Build {
        #[command(flatten)]
        target: KeyTarget,
        /// FIELD=VALUE (ints in decimal; LMCache tags as a JSON array of [name, value] pairs).
        fields: Vec<String>,
        /// Comma-separated token ids: hash them with vLLM's block-hash chain and print one key per full block.
        #[arg(long, value_delimiter = ',')]
        tokens: Option<Vec<i64>>,
        #[arg(long, default_value_t = 16)]
        block_size: usize,
        /// Hash granularity when smaller than the block size (vLLM's hash_block_size).
        #[arg(long)]
        hash_block_size: Option<usize>,
        /// --prefix-caching-hash-algo: sha256 or sha256_cbor.
        #[arg(long, default_value = "sha256")]
        algo: String,
        /// PYTHONHASHSEED of the vLLM processes (unset: the release's default seed, if it has one).
        #[arg(long)]
        pythonhashseed: Option<String>,
        #[arg(long, requires = "lora_path")]
        lora_name: Option<String>,
        #[arg(long, requires = "lora_name")]
        lora_path: Option<String>,
        #[arg(long)]
        cache_salt: Option<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Parse a key into its fields. Free text (model name, cache prefix) may contain '@': give known parts as
    /// --hint FIELD=VALUE when the key has several readings.
    Parse {
        #[command(flatten)]
        target: KeyTarget,
        /// Try every grammar of a family: vllm, vllm-ascend or lmcache.
        #[arg(long)]
        family: Option<String>,
        key: String,
        #[arg(long = "hint")]
        hints: Vec<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// List the key grammars of spec/store-keys/.
    Grammars {
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

#[derive(Subcommand)]
enum HashCmd {
    /// sha256(json.dumps(value, sort_keys=True)) exactly as vLLM's hash_factors computes it. The file holds one
    /// JSON value; tuples, bytes, sets, non-finite floats, big ints and non-string keys use the tags of
    /// conformance/vectors/GOLDEN.md. Exit 1 when Python would raise (the exception is printed).
    Factors {
        /// JSON file, or `-` for stdin.
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// NIXL's compatibility hash of a vLLM release (spec/compat-hash/nixl.toml) for the config attributes in a
    /// JSON file ({model, dtype, num_kv_heads, head_size, num_hidden_layers, cache_dtype, attn_backend_name,
    /// disable_hybrid_kv_cache_manager?, transfer_mode?, speculative_config?, cross_layers_blocks?}); with
    /// --engine, the P2P connectors' hash for that transfer engine (mooncake).
    Nixl {
        #[arg(long)]
        release: String,
        file: PathBuf,
        #[arg(long)]
        engine: Option<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// The wire fingerprint (spec/README.md, "Wire fingerprint") of one revision, or of every revision.
    Wire {
        /// A revision name (vllm-0.25.0..0.29.0) or a vLLM release (0.27.1).
        #[arg(long)]
        revision: Option<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Whether two revisions (names or releases) are wire-compatible, and which structs and fields differ.
    Check {
        a: String,
        b: String,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Vectors { paths, format, all } => {
            let files = match mooncake_conformance::jsonl::expand(&paths) {
                Ok(f) => f,
                Err(e) => return report::usage_error(&e),
            };
            let reps: Vec<_> = files.iter().map(|f| vectors::check_file(f)).collect();
            let ok = reps.iter().all(|r| r.ok());
            match format {
                Format::Json => report::print_json(&report::vectors_json(&reps)),
                Format::Text => report::vectors_text(&reps, all),
            }
            ExitCode::from(if ok { 0 } else { 1 })
        }
        Cmd::Validate { paths, format } => {
            let files = match mooncake_conformance::jsonl::expand(&paths) {
                Ok(f) => f,
                Err(e) => return report::usage_error(&e),
            };
            let reps: Vec<_> = files.iter().map(|f| validate::validate_file(f)).collect();
            let ok = reps.iter().all(|r| r.ok());
            match format {
                Format::Json => report::print_json(&report::validate_json(&reps)),
                Format::Text => report::validate_text(&reps),
            }
            ExitCode::from(if ok { 0 } else { 1 })
        }
        Cmd::Key { cmd } => match cmd {
            KeyCmd::Build { target, fields, tokens, block_size, hash_block_size, algo, pythonhashseed, lora_name, lora_path, cache_salt, format } => {
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
                keycmd::build(&t, &fields, tokens, format == Format::Json)
            }
            KeyCmd::Parse { target, family, key, hints, format } => {
                let t = keycmd::Target { release: target.release, grammar: target.grammar, family };
                keycmd::parse(&t, &key, &hints, format == Format::Json)
            }
            KeyCmd::Grammars { format } => keycmd::list(format == Format::Json),
        },
        Cmd::Hash { cmd } => match cmd {
            HashCmd::Factors { file, format } => hashcmd::factors(&file, format == Format::Json),
            HashCmd::Wire { revision, format } => hashcmd::wire(revision.as_deref(), format == Format::Json),
            HashCmd::Check { a, b, format } => hashcmd::check(&a, &b, format == Format::Json),
            HashCmd::Nixl { release, file, engine, format } => hashcmd::nixl(&release, &file, engine.as_deref(), format == Format::Json),
        },
    }
}
