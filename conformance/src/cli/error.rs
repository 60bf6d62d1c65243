//! How a command of the CLI fails, and the exit code of each failure: a command's `exec` returns
//! `Result<ExitCode, CliError>`, and every argument check, loader and library command converts into a
//! [`CliError`] with `?`.

use std::path::PathBuf;
use std::process::ExitCode;

use mooncake_conformance::outcome::{CmdError, ErrorKind};

/// Everything checked agrees (or the command did what it was asked).
pub(crate) const AGREE: u8 = 0;
/// At least one disagreement: a failed case, a finding, a breaking change, incompatible revisions.
pub(crate) const DISAGREE: u8 = 1;
/// Bad usage or bad input: unknown names, unreadable or wrong-format files, nothing to check.
pub(crate) const USAGE: u8 = 2;
/// The environment failed: nothing listening, a port in use, a testee that died or never said hello.
pub(crate) const ENVIRONMENT: u8 = 3;

/// 0 when what was checked agrees, 1 when it does not.
pub(crate) fn verdict(agrees: bool) -> ExitCode {
    ExitCode::from(if agrees { AGREE } else { DISAGREE })
}

/// A command that stopped without its result; printed as `error: <message>` on standard error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Bad usage or input (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The environment failed (exit 3).
    #[error("{0}")]
    Environment(String),
    /// The command line, or a file it names, cannot be used (exit 2).
    #[error(transparent)]
    Arg(#[from] ArgError),
    /// A library command's error (the exit code of its kind).
    #[error(transparent)]
    Cmd(#[from] CmdError),
}

impl CliError {
    /// The exit code its help states.
    pub(crate) fn code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::Arg(_) => USAGE,
            CliError::Environment(_) => ENVIRONMENT,
            CliError::Cmd(e) => match e.kind {
                ErrorKind::Usage => USAGE,
                ErrorKind::Disagreement => DISAGREE,
                ErrorKind::Environment => ENVIRONMENT,
            },
        }
    }
}

/// Why the command line, or a file it names, cannot be used (exit 2); each text names the option.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArgError {
    #[error("must be at least 1")]
    NotAtLeastOne,
    #[error("`{0}` is not a whole number")]
    NotWholeNumber(String),
    #[error("{option} {given}: {revision} is of the {family} family; the runner plays push- and pull-family traces")]
    OtherFamily { option: &'static str, given: String, revision: String, family: String },
    #[error("{0} {1}")]
    Resolve(&'static str, mooncake_wire::spec::ResolveError),
    #[error("--revision {0}")]
    Revision(mooncake_wire::spec::ResolveError),
    #[error("--role {0}: prefiller, decoder or bootstrap")]
    Role(String),
    #[error("give --testee COMMAND, or --peer (with --play decoder or client), or --listen (with --play prefiller)")]
    ReplayTarget,
    #[error("{0} must be a number of seconds from 0 to 604800 (a week)")]
    Seconds(&'static str),
    #[error("{option} {}: the same file as another report", path.display())]
    SameReport { option: &'static str, path: PathBuf },
    #[error("{option} {}: a directory, not a file", path.display())]
    ReportIsDirectory { option: &'static str, path: PathBuf },
    #[error("{option} {}: {source}", path.display())]
    ReportCreate { option: &'static str, path: PathBuf, source: std::io::Error },
    #[error("--testee-log {}: not a directory", .0.display())]
    TesteeLogNotDirectory(PathBuf),
    #[error("no trace files (*.jsonl) in {0}: nothing to check (--allow-empty accepts that)")]
    NoTraceFiles(String),
    #[error("no vector files (*.jsonl, revisions.json) in {0}: nothing to check (--allow-empty accepts that)")]
    NoVectorFiles(String),
    #[error("--check goes with --proof")]
    CheckWithoutProof,
    #[error("extract takes one PATH (a checkout, the package folder, a .py file or a wheel)")]
    ExtractOnePath,
    #[error(
        "{old} is of the {old_family} family and {new} of the {new_family} family: a diff compares revisions of one \
         protocol family"
    )]
    DiffFamilies { old: String, old_family: String, new: String, new_family: String },
    #[error(transparent)]
    Load(#[from] mooncake_conformance::load_error::LoadError),
    #[error(transparent)]
    Jsonl(#[from] mooncake_trace::jsonl::JsonlError),
    #[error(transparent)]
    Testee(#[from] mooncake_conformance::testee::TesteeCommandError),
    #[error(transparent)]
    Matrix(#[from] mooncake_conformance::matrix::MatrixError),
}

/// The loaders' errors are argument errors (a file the command line names), reachable with one `?`.
macro_rules! arg_error_from {
    ($($t:ty),*) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> CliError {
                CliError::Arg(e.into())
            }
        }
    )*};
}
arg_error_from!(
    mooncake_conformance::load_error::LoadError,
    mooncake_trace::jsonl::JsonlError,
    mooncake_conformance::testee::TesteeCommandError,
    mooncake_conformance::matrix::MatrixError
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Each failure has the exit code the help states: 2 usage, 3 environment, a library error its kind's.
    #[test]
    fn every_error_has_its_exit_code() {
        assert_eq!(CliError::Usage("x".into()).code(), USAGE);
        assert_eq!(CliError::Environment("x".into()).code(), ENVIRONMENT);
        assert_eq!(CliError::from(ArgError::NotAtLeastOne).code(), USAGE);
        assert_eq!(CliError::from(CmdError::usage("x")).code(), USAGE);
        assert_eq!(CliError::from(CmdError::disagreement("x")).code(), DISAGREE);
        assert_eq!(CliError::from(CmdError::environment("x")).code(), ENVIRONMENT);
        assert_eq!(CliError::from(CmdError::environment("what")).to_string(), "what");
    }
}
