//! The bundled ground truth: traces, scenarios and expected failures, embedded at build time (`build.rs`) so
//! the binary needs no source tree; `--data DIR` reads a directory laid out like `conformance/` instead.

use std::path::{Path, PathBuf};

use crate::expected::ExpectedFailures;
pub use crate::load_error::LoadError;
use crate::scenarios::Scenarios;
use mooncake_trace::jsonl::Input;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
}

/// The bundled `scenarios.toml` (it parses: `scenarios.rs` tests it).
pub fn scenarios() -> Scenarios {
    Data::Embedded.scenarios().expect("the bundled scenarios parse (tested)")
}

/// Where the bundled data comes from.
#[derive(Clone, Debug, Default)]
pub enum Data {
    /// Compiled into this binary.
    #[default]
    Embedded,
    /// A directory laid out like `conformance/` (`traces/`, `traces-pull/`, `scenarios.toml`,
    /// `expected-failures.toml`): `--data DIR`.
    Dir(PathBuf),
}

impl Data {
    /// The traces of one bundled set (`traces` for the push family, `traces-pull`).
    pub fn traces(&self, set: &str) -> Result<Vec<Input>, LoadError> {
        match self {
            Data::Embedded => Ok(embedded::FILES
                .iter()
                .filter(|(name, _)| name.starts_with(&format!("{set}/")) && name.ends_with(".jsonl"))
                .map(|(name, text)| Input::Bundled { name, text })
                .collect()),
            Data::Dir(d) => {
                let dir = d.join(set);
                if !dir.is_dir() {
                    return Err(LoadError::NoSet { dir: d.clone(), set: set.into() });
                }
                Ok(Input::files(&[dir])?)
            }
        }
    }

    fn text(&self, name: &str) -> Result<(String, String), LoadError> {
        match self {
            Data::Embedded => embedded::FILES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(n, t)| (format!("(bundled) {n}"), t.to_string()))
                .ok_or_else(|| LoadError::NotBundled(name.into())),
            Data::Dir(d) => {
                let p: PathBuf = d.join(name);
                std::fs::read_to_string(&p)
                    .map(|t| (p.display().to_string(), t))
                    .map_err(|source| LoadError::Read { name: format!("--data {}: {name}", d.display()), source })
            }
        }
    }

    /// `scenarios.toml`.
    pub fn scenarios(&self) -> Result<Scenarios, LoadError> {
        let (name, text) = self.text("scenarios.toml")?;
        Scenarios::parse(&text).map_err(|source| LoadError::Scenarios { name, source })
    }

    /// `expected-failures.toml` (the built-in reference peer's known failures).
    pub fn expected_failures(&self) -> Result<ExpectedFailures, LoadError> {
        let (name, text) = self.text("expected-failures.toml")?;
        ExpectedFailures::parse(&text).map_err(|source| LoadError::Expected { name, source })
    }

    /// Checks a `--data` directory before anything runs.
    pub fn check(dir: &Path) -> Result<Data, LoadError> {
        if !dir.is_dir() {
            return Err(LoadError::NotADirectory(dir.to_path_buf()));
        }
        Ok(Data::Dir(dir.to_path_buf()))
    }
}
