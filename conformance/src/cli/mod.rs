//! The command line: [`Cli`] and its [`Cmd`]s, one module per subcommand, each with its arguments (a clap
//! `Args` struct) and `exec(args) -> Result<ExitCode, CliError>`; what several commands share is here
//! (argument checks, data and trace inputs, the runtime), in [`cases`] (`run` and `replay`), [`output`]
//! (standard output and error, `--format`) and [`error`] ([`error::CliError`], the exit codes).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use mooncake_conformance::bundled::Data;
use mooncake_trace::jsonl::Input;

pub(crate) mod cases;
pub(crate) mod diff;
pub(crate) mod dissector;
pub(crate) mod error;
pub(crate) mod extract;
pub(crate) mod hash;
pub(crate) mod key;
pub(crate) mod matrix;
pub(crate) mod output;
pub(crate) mod pcap;
pub(crate) mod probe;
pub(crate) mod replay;
pub(crate) mod run;
pub(crate) mod tap;
pub(crate) mod validate;
pub(crate) mod vectors;

use error::ArgError;

#[derive(Parser)]
#[command(
    name = "mooncake-conformance",
    version,
    about = "Conformance tooling for the vLLM Mooncake KV-transfer wire",
    long_about = LONG_ABOUT,
    after_help = "Exit codes: 0 agree, 1 disagreement, 2 bad usage or input, 3 environment failure.\n\nExample:\n  mooncake-conformance run",
    after_long_help = concat!("Exit codes: 0 = everything agrees; 1 = a disagreement; 2 = bad usage or input (also: nothing to check); 3 = the environment failed (nothing listening, a port in use, a testee that died). A closed output pipe ends quietly with 0.", "\n\nExample (every bundled recording against the built-in reference peer):\n  mooncake-conformance run"),
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

const LONG_ABOUT: &str = "Conformance tooling for the vLLM Mooncake KV-transfer wire: replays recorded vLLM traffic against an \
implementation, checks vector files and traces, classifies wire changes, computes vLLM's compatibility hashes and store keys.";

/// The subcommands, in the order `--help` lists them; each one's help is on its arguments' struct.
#[derive(Subcommand)]
pub(crate) enum Cmd {
    Vectors(vectors::VectorsArgs),
    Validate(validate::ValidateArgs),
    Diff(diff::DiffArgs),
    Extract(extract::ExtractArgs),
    Matrix(matrix::MatrixArgs),
    Run(run::RunArgs),
    Tap(tap::TapArgs),
    Probe(probe::ProbeArgs),
    Replay(replay::ReplayArgs),
    Hash(hash::HashArgs),
    Key(key::KeyArgs),
    Pcap(pcap::PcapArgs),
    Dissector(dissector::DissectorArgs),
}

// ---- what several commands share ---------------------------------------------------------------------------

/// A whole number above zero (block sizes).
fn positive(s: &str) -> Result<usize, ArgError> {
    match s.parse::<usize>() {
        Ok(0) => Err(ArgError::NotAtLeastOne),
        Ok(n) => Ok(n),
        Err(_) => Err(ArgError::NotWholeNumber(s.into())),
    }
}

/// Seconds given to `option`: from 0 to a week.
fn seconds(v: f64, option: &'static str) -> Result<std::time::Duration, ArgError> {
    if v.is_nan() || v > mooncake_wire::limits::MAX_TIMEOUT_SECS {
        return Err(ArgError::Seconds(option));
    }
    std::time::Duration::try_from_secs_f64(v).map_err(|_| ArgError::Seconds(option))
}

/// The runtime of the commands that do I/O.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
}

/// The traces named on the command line; zero files is an error naming the paths (unless `allow_empty`).
fn trace_inputs(paths: &[PathBuf], allow_empty: bool) -> Result<Vec<Input>, ArgError> {
    let (inputs, skipped) = Input::files_noting(paths)?;
    for s in skipped {
        eprintln!("note: {s}");
    }
    if inputs.is_empty() && !allow_empty {
        return Err(ArgError::NoTraceFiles(shown(paths)));
    }
    Ok(inputs)
}

/// Paths as the messages name them: comma-separated.
fn shown(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// `--data DIR`, checked, or the data bundled into this binary.
fn data_of(d: &Option<PathBuf>) -> Result<Data, ArgError> {
    match d {
        Some(dir) => Ok(Data::check(dir)?),
        None => Ok(Data::Embedded),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every option and argument of every subcommand has help text, and every subcommand's help states the exit
    /// codes and ends with an example.
    #[test]
    fn every_option_has_help_and_every_command_an_example() {
        fn walk(c: &clap::Command, path: &str, problems: &mut Vec<String>) {
            let here = format!("{path} {}", c.get_name());
            for a in c.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    problems.push(format!("{here}: --{id} has no help text"));
                }
            }
            if c.get_subcommands().next().is_none() || c.get_name() != "mooncake-conformance" {
                let after = c.get_after_help().map(|s| s.to_string()).unwrap_or_default();
                if !after.contains("Exit codes") {
                    problems.push(format!("{here}: its help does not state the exit codes"));
                }
                let last = after.trim_end().lines().last().unwrap_or("").trim_start();
                if !after.contains("Example") || !last.starts_with("mooncake-conformance") && !last.starts_with("echo")
                {
                    problems.push(format!("{here}: its help does not end with an example"));
                }
            }
            for s in c.get_subcommands() {
                if s.get_name() != "help" {
                    walk(s, &here, problems);
                }
            }
        }
        let mut problems = vec![];
        walk(&Cli::command(), "", &mut problems);
        assert!(problems.is_empty(), "{problems:#?}");
        Cli::command().debug_assert();
    }

    /// Block sizes and seconds are checked with the texts the integration tests expect.
    #[test]
    fn positive_numbers_and_seconds_are_checked() {
        assert_eq!(positive("16").ok(), Some(16));
        assert_eq!(positive("0").map_err(|e| e.to_string()), Err("must be at least 1".into()));
        assert_eq!(positive("x").map_err(|e| e.to_string()), Err("`x` is not a whole number".into()));
        assert!(seconds(0.0, "--slack").is_ok());
        for bad in [f64::NAN, -1.0, 1e12] {
            let e = seconds(bad, "--slack").expect_err("out of range").to_string();
            assert_eq!(e, "--slack must be a number of seconds from 0 to 604800 (a week)");
        }
    }
}
