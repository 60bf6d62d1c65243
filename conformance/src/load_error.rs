//! Why a data file (scenarios, expected failures, a `--data` directory's traces) could not be loaded.
//!
//! A leaf module: the loaders in `bundled`, `scenarios` and `expected` all return these errors, and none of
//! them needs to import another to do so.

use std::path::PathBuf;

/// Why a scenarios file's text is not one.
#[derive(Debug, thiserror::Error)]
pub enum ScenariosError {
    /// It is not TOML of the expected shape (an unknown key, a wrong type).
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// Its `format` is another one.
    #[error("format {found:?}, expected {expected:?}")]
    Format {
        /// The file's `format`.
        found: String,
        /// The one this build reads.
        expected: &'static str,
    },
    /// A number is outside the range the runner accepts (`scenarios::bounds`).
    #[error("{key} = {value}: accepted {accepted}")]
    Range {
        /// Where it is (`[model] abort_timeout_s`, `[scenario.NAME] pull_delay_s`).
        key: String,
        /// The value as the file has it.
        value: String,
        /// The accepted range.
        accepted: String,
    },
}

/// Why a data file (scenarios, expected failures, a `--data` directory's traces) could not be loaded; each
/// text names the file (`--data DIR: NAME`, `--scenarios FILE`, `(bundled) NAME` or the path).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file cannot be read.
    #[error("{name}: {source}")]
    Read {
        /// How the file is named.
        name: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A scenarios file does not parse.
    #[error("{name}: {source}")]
    Scenarios {
        /// How the file is named.
        name: String,
        /// What is wrong.
        source: ScenariosError,
    },
    /// An expected-failures file does not parse.
    #[error("{name}: {source}")]
    Expected {
        /// How the file is named.
        name: String,
        /// What is wrong.
        source: toml::de::Error,
    },
    /// A file is not bundled into the binary.
    #[error("{0} is not bundled")]
    NotBundled(String),
    /// A `--data` directory has no such trace set.
    #[error("--data {}: no {set}/ directory there", dir.display())]
    NoSet {
        /// The `--data` directory.
        dir: PathBuf,
        /// The set (`traces`, `traces-pull`).
        set: String,
    },
    /// `--data` is not a directory.
    #[error("--data {}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// The traces of a `--data` directory cannot be listed.
    #[error(transparent)]
    Traces(#[from] mooncake_trace::jsonl::JsonlError),
}
