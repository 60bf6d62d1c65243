//! One side of `mooncake-conformance diff`: where a revision comes from.
//!
//! * `vllm-0.33.0` — a revision of the built-in spec, by any name its resolver takes (`0.27.1`, `v0.27.1`,
//!   `vllm-0.27.1`, `ascend:0.18.0`: [`mooncake_wire::spec::Spec::resolve`]);
//! * `path/to/file.toml` — the revision that file defines, resolved with the other files of its directory
//!   (and, for a base they do not hold, the built-in spec);
//! * `path/to/dir` — every spec file under it; the newest revision of its push family (or of its only family);
//! * `git:REF` — `spec/` of this repository at REF (read with `git ls-tree` and `git show`); newest revision;
//! * `DIR#REVISION`, `git:REF#REVISION` — that revision instead of the newest;
//! * vLLM source — a checkout, the connector's package folder, a `.py` file or a wheel: the revision
//!   `mooncake-conformance extract` derives from it ([`crate::extract`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use mooncake_wire::spec::{ResolveError, Revision, Spec, SpecError};

use crate::outcome::CmdError;

/// Why a spec side (`FILE`, `DIR`, `git:REF`, a revision name, each with an optional `#REVISION`) gives no
/// revision; the texts name the side, file or git command.
#[derive(Debug, thiserror::Error)]
pub enum SpecSourceError {
    /// The directory of the spec file cannot be listed.
    #[error(transparent)]
    Walk(#[from] mooncake_trace::walk::WalkError),
    /// The spec files do not load.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A name the built-in spec does not resolve.
    #[error("{0} (or give a spec file, a directory or git:REF)")]
    Builtin(ResolveError),
    /// `#REVISION` does not resolve in the spec given.
    #[error("{arg}: {source}")]
    Pick {
        /// The side as given.
        arg: String,
        /// Why it does not resolve.
        source: ResolveError,
    },
    /// `SRC#REVISION` where SRC is neither a directory nor `git:REF`.
    #[error("{arg}: `{src}` is neither a directory nor a git:REF")]
    NotASpecSource {
        /// The side as given.
        arg: String,
        /// The part before `#`.
        src: String,
    },
    /// The spec has no push family (and more than one family).
    #[error("{0}: no push family (say which revision with `#REVISION`)")]
    NoPushFamily(String),
    /// A file or directory cannot be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A spec file is not TOML.
    #[error("{}: {source}", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        source: toml::de::Error,
    },
    /// A spec file has no `revision` key (and no `#REVISION` was given).
    #[error("{}: no `revision` key", .0.display())]
    NoRevisionKey(PathBuf),
    /// Neither the file's directory alone nor with the built-in spec loads.
    #[error("{own} (and with the built-in spec: {source})")]
    WithBuiltin {
        /// Why the directory alone does not load.
        own: SpecError,
        /// Why it does not load with the built-in spec either.
        source: SpecError,
    },
    /// The revision named is not defined.
    #[error("{}: revision `{name}` not found", path.display())]
    RevisionNotFound {
        /// The file.
        path: PathBuf,
        /// The revision.
        name: String,
    },
    /// `git` could not be run.
    #[error("running git: {0}")]
    RunningGit(std::io::Error),
    /// A `git` command failed.
    #[error("git {args}: {stderr}")]
    Git {
        /// Its arguments, space-separated.
        args: String,
        /// What it printed on stderr, trimmed.
        stderr: String,
    },
    /// `git:REF` names no commit.
    #[error("git:{0}: no such commit")]
    NoSuchCommit(String),
    /// A spec file at `git:REF` is not UTF-8.
    #[error("{path}: {source}")]
    NotUtf8 {
        /// Its path in the repository.
        path: String,
        /// The decoder's complaint.
        source: std::string::FromUtf8Error,
    },
    /// `git:REF` has no spec files under `spec/`.
    #[error("git:{0}: no spec files under spec/")]
    NoSpecFiles(String),
}

/// Whether a side names vLLM source (read by `extract`) rather than a spec revision.
pub fn is_source_side(arg: &str) -> bool {
    !arg.starts_with("git:") && crate::extract::is_source(Path::new(arg))
}

/// Resolves one side to a revision (a source side extracted with the default Python); the error says what
/// kind of failure it is.
pub fn resolve(arg: &str) -> Result<Arc<Revision>, CmdError> {
    resolve_with(arg, &crate::extract::default_python())
}

/// [`resolve`], running the extraction of a source side with `python`; the error says what kind of failure
/// it is (bad input, no Python).
pub fn resolve_with(arg: &str, python: &str) -> Result<Arc<Revision>, CmdError> {
    let path = Path::new(arg);
    if is_source_side(arg) {
        return crate::extract::derive(path, python, None)
            .map(|d| d.revision)
            .map_err(|e| CmdError { kind: e.kind, message: format!("{arg}: {}", e.message) });
    }
    resolve_spec(arg).map_err(|e| CmdError::usage(e.to_string()))
}

fn resolve_spec(arg: &str) -> Result<Arc<Revision>, SpecSourceError> {
    let (src, pick) = match arg.rsplit_once('#') {
        Some((s, p)) if !p.is_empty() => (s, Some(p)),
        _ => (arg, None),
    };
    if let Some(reference) = src.strip_prefix("git:") {
        let spec = git_spec(reference)?;
        return select(&spec, pick, arg);
    }
    let path = Path::new(src);
    if path.is_dir() {
        let spec = Spec::load_dir(path)?;
        return select(&spec, pick, arg);
    }
    if path.is_file() {
        return file_revision(path, pick);
    }
    if pick.is_some() {
        return Err(SpecSourceError::NotASpecSource { arg: arg.into(), src: src.into() });
    }
    Spec::builtin().resolve(arg).map(|r| r.revision).map_err(SpecSourceError::Builtin)
}

/// The named revision, or the newest of the push family (or of the only family).
fn select(spec: &Spec, pick: Option<&str>, arg: &str) -> Result<Arc<Revision>, SpecSourceError> {
    if let Some(p) = pick {
        return spec.resolve(p).map(|r| r.revision).map_err(|source| SpecSourceError::Pick { arg: arg.into(), source });
    }
    let fam = spec.family("push").or(if spec.families.len() == 1 { spec.families.first() } else { None });
    fam.and_then(|f| f.newest()).cloned().ok_or_else(|| SpecSourceError::NoPushFamily(arg.into()))
}

/// The revision a file defines. Its directory's other spec files come along (a derived file needs its base);
/// if those do not resolve on their own, the built-in spec fills in, overridden by the directory's files.
fn file_revision(path: &Path, pick: Option<&str>) -> Result<Arc<Revision>, SpecSourceError> {
    let io = |source| SpecSourceError::Io { path: path.into(), source };
    let text = std::fs::read_to_string(path).map_err(io)?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|source| SpecSourceError::Toml { path: path.into(), source })?;
    let name = pick
        .map(str::to_string)
        .or_else(|| table.get("revision").and_then(|v| v.as_str()).map(str::to_string))
        .ok_or_else(|| SpecSourceError::NoRevisionKey(path.into()))?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let me = std::fs::canonicalize(path).map_err(io)?;
    let mut local: Vec<(String, String)> = vec![];
    for p in mooncake_trace::walk::entries(dir)? {
        if p.extension().and_then(|x| x.to_str()) == Some("toml")
            && std::fs::canonicalize(&p).ok().as_ref() != Some(&me)
        {
            if let Ok(t) = std::fs::read_to_string(&p) {
                local.push((p.display().to_string(), t));
            }
        }
    }
    local.push((path.display().to_string(), text));
    let own = Spec::from_files(local.clone());
    let spec = match own {
        Ok(s) if s.revision(&name).is_some() => s,
        first => {
            // Fill in from the built-in spec: every built-in file whose revision the local files do not define.
            let key = |t: &str| -> Option<(String, String)> {
                let tb: toml::Table = toml::from_str(t).ok()?;
                Some((tb.get("family")?.as_str()?.to_string(), tb.get("revision")?.as_str()?.to_string()))
            };
            let defined: Vec<(String, String)> = local.iter().filter_map(|(_, t)| key(t)).collect();
            let mut files: Vec<(String, String)> = Spec::builtin_files()
                .iter()
                .filter(|(_, t)| key(t).is_none_or(|k| !defined.contains(&k)))
                .map(|(p, t)| (format!("(built-in) {p}"), t.to_string()))
                .collect();
            files.extend(local);
            Spec::from_files(files).map_err(|source| match first {
                Err(own) => SpecSourceError::WithBuiltin { own, source },
                Ok(_) => SpecSourceError::Spec(source),
            })?
        }
    };
    spec.revision(&name).cloned().ok_or_else(|| SpecSourceError::RevisionNotFound { path: path.into(), name })
}

/// `git -C top args…`'s standard output; an error when git cannot run or fails.
pub(crate) fn git(top: &Path, args: &[&str]) -> Result<Vec<u8>, SpecSourceError> {
    let out = Command::new("git").arg("-C").arg(top).args(args).output().map_err(SpecSourceError::RunningGit)?;
    if !out.status.success() {
        return Err(SpecSourceError::Git {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out.stdout)
}

/// `spec/` of the repository the current directory is in, at `reference`.
fn git_spec(reference: &str) -> Result<Spec, SpecSourceError> {
    let top = git(Path::new("."), &["rev-parse", "--show-toplevel"])?;
    let top = PathBuf::from(String::from_utf8_lossy(&top).trim());
    git(&top, &["rev-parse", "--verify", "--quiet", &format!("{reference}^{{commit}}")])
        .map_err(|_| SpecSourceError::NoSuchCommit(reference.into()))?;
    let list = git(&top, &["ls-tree", "-r", "-z", "--name-only", reference, "--", "spec"])?;
    let mut files = vec![];
    for p in list.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let p = String::from_utf8_lossy(p).to_string();
        if p.ends_with(".toml") {
            let text = git(&top, &["show", &format!("{reference}:{p}")])?;
            files.push((
                format!("git:{reference}:{p}"),
                String::from_utf8(text).map_err(|source| SpecSourceError::NotUtf8 { path: p.clone(), source })?,
            ));
        }
    }
    if files.is_empty() {
        return Err(SpecSourceError::NoSpecFiles(reference.into()));
    }
    Ok(Spec::from_files(files)?)
}
