//! `key`: MooncakeStoreConnector keys (and vllm-ascend / LMCache keys): built from fields or token ids, parsed
//! back, and the grammars listed.

use std::process::ExitCode;

use clap::Subcommand;

use mooncake_conformance::keycmd::{self, Built, Parsed};
use mooncake_wire::keys::grammar::Grammar;

use super::error::{verdict, CliError, AGREE};
use super::output::{report_through, Format};
use super::positive;

/// MooncakeStoreConnector keys of a vLLM release (and vllm-ascend / LMCache keys): build one from its
/// fields or from token ids, parse one back (exit 1 when the key does not fit or has several readings).
#[derive(clap::Args)]
#[command(after_help = concat!("Exit codes: 0 = done; 1 = the key does not parse (or has several readings); 2 = bad usage or input.", "\n\nExample:\n  mooncake-conformance key build --release 0.33.0 model=/models/Qwen2.5-7B chunk_hash=ab12"))]
pub(crate) struct KeyArgs {
    #[command(subcommand)]
    cmd: KeyCmd,
}

#[derive(clap::Args)]
struct KeyTarget {
    /// A vLLM release (0.21.0 … 0.33.0, in any form `hash wire` takes): its MooncakeStoreConnector key grammar.
    #[arg(long)]
    release: Option<String>,
    /// A grammar by name (`key grammars` lists them), e.g. ascend-store-key, lmcache-key.
    #[arg(long)]
    grammar: Option<String>,
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Build a key from FIELD=VALUE pairs (vLLM: unspecified parts default as in KeyMetadata; `model=` takes
    /// the configured model and keeps its last path component, `model_name=` the key's part itself), or one
    /// key per full block of --tokens.
    #[command(
        after_help = "Exit codes: 0 = built; 2 = bad usage or input (an unknown field, a value the grammar cannot hold).\n\nExample:\n  mooncake-conformance key build --release 0.33.0 model_name=Qwen --tokens 1,2,3,4 --block-size 2 --pythonhashseed 0"
    )]
    Build(BuildArgs),
    /// Parse a key into its fields. Free text (model name, cache prefix) may contain '@': give known parts as
    /// --hint FIELD=VALUE (the same names as `key build`) when the key has several readings.
    #[command(
        after_help = "Exit codes: 0 = one reading; 1 = the key does not fit (the message names the field and byte) or has several readings; 2 = bad usage.\n\nExample:\n  mooncake-conformance key parse --release 0.33.0 'teamA@Qwen@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@ab' --hint cache_prefix=teamA"
    )]
    Parse {
        #[command(flatten)]
        target: KeyTarget,
        /// Try every grammar of a family: vllm, vllm-ascend or lmcache.
        #[arg(long)]
        family: Option<String>,
        /// The key to parse.
        key: String,
        /// A known field, FIELD=VALUE (repeatable): narrows the readings of a key with free text.
        #[arg(long = "hint", value_name = "FIELD=VALUE")]
        hints: Vec<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// List the key grammars of spec/store-keys/.
    #[command(after_help = "Exit codes: 0 = listed.\n\nExample:\n  mooncake-conformance key grammars --format json")]
    Grammars {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

#[derive(clap::Args)]
struct BuildArgs {
    #[command(flatten)]
    target: KeyTarget,
    /// FIELD=VALUE (ints in decimal; LMCache tags as a JSON array of [name, value] pairs).
    #[arg(value_name = "FIELD=VALUE")]
    fields: Vec<String>,
    /// Comma-separated token ids: hash them with vLLM's block-hash chain and print one key per full block.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    tokens: Option<Vec<i64>>,
    /// Tokens per block (vLLM's --block-size) for --tokens.
    #[arg(long, default_value_t = 16, value_parser = positive)]
    block_size: usize,
    /// Hash granularity when smaller than the block size (vLLM's hash_block_size).
    #[arg(long, value_parser = positive)]
    hash_block_size: Option<usize>,
    /// vLLM's --prefix-caching-hash-algo.
    #[arg(long, default_value = "sha256", value_parser = ["sha256", "sha256_cbor"])]
    algo: String,
    /// PYTHONHASHSEED of the vLLM processes (unset: the release's default seed, if it has one).
    #[arg(long)]
    pythonhashseed: Option<String>,
    /// LoRA adapter name of the request (with --lora-path): part of the block hash.
    #[arg(long, requires = "lora_path")]
    lora_name: Option<String>,
    /// LoRA adapter path of the request (with --lora-name).
    #[arg(long, requires = "lora_name")]
    lora_path: Option<String>,
    /// The request's cache_salt: part of the first block's hash.
    #[arg(long)]
    cache_salt: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

report_through!(
    Built => keycmd::write_built,
    Parsed => keycmd::write_parsed,
    [Grammar] => keycmd::write_grammars,
);

/// `key build`: one key from its fields, or one per full block of `--tokens`.
fn build(a: BuildArgs) -> Result<ExitCode, CliError> {
    let t = keycmd::Target { release: a.target.release, grammar: a.target.grammar, family: None };
    let tokens = a.tokens.map(|tokens| keycmd::TokenOptions {
        tokens,
        block_size: a.block_size,
        hash_block_size: a.hash_block_size,
        algo: a.algo,
        pythonhashseed: a.pythonhashseed,
        lora: a.lora_name.zip(a.lora_path),
        cache_salt: a.cache_salt,
    });
    a.format.show(&keycmd::build(&t, &a.fields, tokens)?);
    Ok(ExitCode::from(AGREE))
}

/// `key build | parse | grammars`: the key(s), the reading(s) of a key, or the grammars.
pub(crate) fn exec(args: KeyArgs) -> Result<ExitCode, CliError> {
    match args.cmd {
        KeyCmd::Build(a) => build(a),
        KeyCmd::Parse { target, family, key, hints, format } => {
            let t = keycmd::Target { release: target.release, grammar: target.grammar, family };
            let p = keycmd::parse(&t, &key, &hints)?;
            format.show(&p);
            Ok(verdict(p.ok()))
        }
        KeyCmd::Grammars { format } => {
            format.show(keycmd::grammar_list());
            Ok(ExitCode::from(AGREE))
        }
    }
}
