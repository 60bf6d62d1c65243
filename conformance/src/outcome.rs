//! How the library's commands fail: a typed error with its [`ErrorKind`]. The library prints nothing and
//! decides no exit code: each command returns a typed result (or a [`CmdError`]), the writers write results
//! to any `impl std::io::Write`, and the binary's `cli/` (one file per command; `cli/error.rs` holds the exit
//! codes) prints them and maps every result and every error kind to the exit code its help states.

/// What kind of failure a [`CmdError`] is (the CLI maps each to an exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad usage or bad input: unknown names, unreadable or wrong-format files, nothing to check.
    Usage,
    /// What was checked does not hold, so there is no result to show (a derived revision that does not load).
    Disagreement,
    /// The environment failed: nothing listening, a port in use, a testee that died, no Python, a full disk.
    Environment,
}

/// A command that could not produce its result: what kind of failure, and what to tell the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError {
    /// What kind of failure (the CLI maps it to an exit code).
    pub kind: ErrorKind,
    /// What to tell the user.
    pub message: String,
}

impl CmdError {
    /// Bad usage or input.
    pub fn usage(message: impl Into<String>) -> CmdError {
        CmdError { kind: ErrorKind::Usage, message: message.into() }
    }
    /// What was checked does not hold.
    pub fn disagreement(message: impl Into<String>) -> CmdError {
        CmdError { kind: ErrorKind::Disagreement, message: message.into() }
    }
    /// The environment failed.
    pub fn environment(message: impl Into<String>) -> CmdError {
        CmdError { kind: ErrorKind::Environment, message: message.into() }
    }
}

/// A bare message is bad usage or input (what most checks of arguments and files give).
impl From<String> for CmdError {
    fn from(message: String) -> CmdError {
        CmdError::usage(message)
    }
}

impl std::fmt::Display for CmdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CmdError {}

/// Typed errors from what a user gave are bad usage or input, with their text: the wire library's (a factor
/// file, a release, a key's inputs) and this crate's loaders' (an unreadable input file, a file that is not a
/// valid trace, a data file that cannot be loaded).
macro_rules! usage_from {
    ($($t:ty),*) => {$(
        impl From<$t> for CmdError {
            fn from(e: $t) -> CmdError {
                CmdError::usage(e.to_string())
            }
        }
    )*};
}
usage_from!(
    mooncake_wire::hash::HashError,
    mooncake_wire::keys::KeysError,
    mooncake_wire::keys::spec::NoGrammar,
    mooncake_trace::jsonl::JsonlError,
    mooncake_trace::trace::TraceError,
    crate::load_error::LoadError
);
