//! The bundled ground truth: traces, scenarios and expected failures, embedded at build time (`build.rs`) so
//! the binary needs no source tree; `--data DIR` reads a directory laid out like `conformance/` instead.

use std::path::{Path, PathBuf};

use crate::expected::ExpectedFailures;
use crate::jsonl::Input;
use crate::scenarios::Scenarios;

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
    pub fn traces(&self, set: &str) -> Result<Vec<Input>, String> {
        match self {
            Data::Embedded => Ok(embedded::FILES
                .iter()
                .filter(|(name, _)| name.starts_with(&format!("{set}/")) && name.ends_with(".jsonl"))
                .map(|(name, text)| Input::Bundled { name, text })
                .collect()),
            Data::Dir(d) => {
                let dir = d.join(set);
                if !dir.is_dir() {
                    return Err(format!("--data {}: no {set}/ directory there", d.display()));
                }
                Input::files(&[dir])
            }
        }
    }

    fn text(&self, name: &str) -> Result<(String, String), String> {
        match self {
            Data::Embedded => embedded::FILES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(n, t)| (format!("(bundled) {n}"), t.to_string()))
                .ok_or_else(|| format!("{name} is not bundled")),
            Data::Dir(d) => {
                let p: PathBuf = d.join(name);
                std::fs::read_to_string(&p)
                    .map(|t| (p.display().to_string(), t))
                    .map_err(|e| format!("--data {}: {name}: {e}", d.display()))
            }
        }
    }

    /// `scenarios.toml`.
    pub fn scenarios(&self) -> Result<Scenarios, String> {
        let (name, text) = self.text("scenarios.toml")?;
        Scenarios::parse(&text).map_err(|e| format!("{name}: {e}"))
    }

    /// `expected-failures.toml` (the built-in reference peer's known failures).
    pub fn expected_failures(&self) -> Result<ExpectedFailures, String> {
        let (name, text) = self.text("expected-failures.toml")?;
        ExpectedFailures::parse(&text).map_err(|e| format!("{name}: {e}"))
    }

    /// Checks a `--data` directory before anything runs.
    pub fn check(dir: &Path) -> Result<Data, String> {
        if !dir.is_dir() {
            return Err(format!("--data {}: not a directory", dir.display()));
        }
        Ok(Data::Dir(dir.to_path_buf()))
    }
}
