//! `mooncake-conformance`: checks implementations of the vLLM Mooncake wire against the spec, vLLM's own
//! vectors and recorded vLLM traffic.
//!
//! Exit codes: 0 = everything checked agrees; 1 = at least one disagreement; 2 = bad usage or input (also:
//! nothing to check); 3 = the environment failed (nothing listening, a port in use, a testee that died). A
//! closed output pipe ends the program quietly with 0.
//!
//! The library modules print nothing and decide no exit code: each command returns a typed result or a
//! typed error ([`CmdError`](mooncake_conformance::outcome::CmdError)), reports and progress events. Each
//! subcommand is a module of [`cli`] whose `exec` writes them (through the library's writers) and returns its
//! exit code, or a [`cli::error::CliError`]; this file parses the command line, dispatches, and prints the error.

use std::process::ExitCode;

use clap::Parser;

mod cli;

use cli::{Cli, Cmd};

fn main() -> ExitCode {
    let result = match Cli::parse().cmd {
        Cmd::Vectors(args) => cli::vectors::exec(args),
        Cmd::Validate(args) => cli::validate::exec(args),
        Cmd::Diff(args) => cli::diff::exec(args),
        Cmd::Extract(args) => cli::extract::exec(args),
        Cmd::Matrix(args) => cli::matrix::exec(args),
        Cmd::Run(args) => cli::run::exec(args),
        Cmd::Tap(args) => cli::tap::exec(args),
        Cmd::Probe(args) => cli::probe::exec(args),
        Cmd::Replay(args) => cli::replay::exec(args),
        Cmd::Hash(args) => cli::hash::exec(args),
        Cmd::Key(args) => cli::key::exec(args),
        Cmd::Pcap(args) => cli::pcap::exec(args),
        Cmd::Dissector(args) => cli::dissector::exec(args),
    };
    // A command that stopped without its result: `error: …` on standard error, the exit code of its kind.
    result.unwrap_or_else(|e| cli::output::finish(&[e.to_string()], e.code()))
}
