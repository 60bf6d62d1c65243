//! The one directory walker of the conformance crates (this one and `mooncake-conformance`): entries sorted by path, every I/O error typed with the path it
//! happened on (never an `unwrap`), and a bounded depth, so a deep tree or a link loop ends the walk with an
//! error instead of a stack overflow. A leaf module: it uses nothing else of the crate.

use std::path::{Path, PathBuf};

/// How deep [`files`] goes below the directory it is given before it refuses: far more than any tree of
/// traces, wheels or spec files has, far less than a link loop reaches.
pub const MAX_DEPTH: usize = 16;

/// Why a directory could not be walked.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    /// Listing or reading an entry of a directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The directory (or entry) it failed on.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The tree is deeper than the walk's bound.
    #[error("{}: more than {max} directories deep (a symbolic link loop?)", path.display())]
    TooDeep {
        /// The directory past the bound.
        path: PathBuf,
        /// The bound.
        max: usize,
    },
}

/// The entries of `dir` (files and directories, one level), sorted by path.
pub fn entries(dir: &Path) -> Result<Vec<PathBuf>, WalkError> {
    let io = |source| WalkError::Io { path: dir.to_path_buf(), source };
    let mut out =
        std::fs::read_dir(dir).map_err(io)?.map(|e| e.map(|e| e.path())).collect::<Result<Vec<_>, _>>().map_err(io)?;
    out.sort();
    Ok(out)
}

/// Every file under `dir` (at most `max_depth` directories down) that `keep` accepts, sorted by path.
pub fn files(dir: &Path, max_depth: usize, keep: &dyn Fn(&Path) -> bool) -> Result<Vec<PathBuf>, WalkError> {
    let mut out = vec![];
    walk(dir, 0, max_depth, keep, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(
    dir: &Path,
    depth: usize,
    max: usize,
    keep: &dyn Fn(&Path) -> bool,
    out: &mut Vec<PathBuf>,
) -> Result<(), WalkError> {
    if depth > max {
        return Err(WalkError::TooDeep { path: dir.to_path_buf(), max });
    }
    for p in entries(dir)? {
        if p.is_dir() {
            walk(&p, depth + 1, max, keep, out)?;
        } else if keep(&p) {
            out.push(p);
        }
    }
    Ok(())
}

/// Whether `p`'s extension is `ext`.
pub fn has_extension(p: &Path, ext: &str) -> bool {
    p.extension().is_some_and(|e| e == ext)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_sorted_bounded_and_errors_name_the_path() {
        let root = std::env::temp_dir().join(format!("walk-{}", std::process::id()));
        let deep = root.join("b").join("c");
        std::fs::create_dir_all(&deep).unwrap();
        for f in [root.join("z.jsonl"), root.join("a.jsonl"), root.join("a.txt"), deep.join("d.jsonl")] {
            std::fs::write(f, "").unwrap();
        }
        let got = files(&root, MAX_DEPTH, &|p| has_extension(p, "jsonl")).unwrap();
        assert_eq!(got, [root.join("a.jsonl"), deep.join("d.jsonl"), root.join("z.jsonl")]);
        let e = files(&root, 1, &|_| true).unwrap_err();
        assert!(matches!(&e, WalkError::TooDeep { path, max: 1 } if *path == deep), "{e}");
        let missing = root.join("missing");
        let e = entries(&missing).unwrap_err();
        assert!(e.to_string().starts_with(&missing.display().to_string()), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
