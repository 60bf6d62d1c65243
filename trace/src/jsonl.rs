//! Line-oriented JSON files (vectors, golden files, traces): bounded line length, errors that name the line.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use mooncake_wire::limits::MAX_JSONL_LINE_BYTES;

/// One parsed line and its 1-based line number.
#[derive(Debug)]
pub struct Line {
    /// Its line number (1-based).
    pub no: usize,
    /// Its JSON value.
    pub value: serde_json::Value,
}

/// Why a JSON Lines file, or the list of files to read, could not be read. Each text starts with the file
/// (and line) it is about.
#[derive(Debug, thiserror::Error)]
pub enum JsonlError {
    /// A file or directory could not be opened or listed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Reading a line failed.
    #[error("{name}:{line}: {source}")]
    Read {
        /// The file's name.
        name: String,
        /// The line number (1-based).
        line: usize,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is longer than [`MAX_JSONL_LINE_BYTES`].
    #[error("{name}:{line}: line longer than {MAX_JSONL_LINE_BYTES} bytes")]
    TooLong {
        /// The file's name.
        name: String,
        /// The line number (1-based).
        line: usize,
    },
    /// A line is not UTF-8.
    #[error("{name}:{line}: not UTF-8")]
    NotUtf8 {
        /// The file's name.
        name: String,
        /// The line number (1-based).
        line: usize,
    },
    /// A line is not JSON.
    #[error("{name}:{line}: not JSON: {source}")]
    NotJson {
        /// The file's name.
        name: String,
        /// The line number (1-based).
        line: usize,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// A directory holds a file that looks like JSON but is not read (see [`expand`]).
    #[error("{}: not read — only *.jsonl files are read from a directory{}; rename it to *.jsonl, or name the file itself", path.display(), and_more(*more))]
    NotJsonl {
        /// The first such file.
        path: PathBuf,
        /// How many more there are.
        more: usize,
    },
    /// A path given does not exist.
    #[error("{}: no such file or directory", .0.display())]
    NoSuchPath(PathBuf),
}

fn and_more(more: usize) -> String {
    if more > 0 {
        format!(" (and {more} more)")
    } else {
        String::new()
    }
}

/// Reads every non-empty line of a JSON Lines file. A line that is not JSON is an error naming the line.
/// Integer literals beyond 64 bits (golden files carry a few) are read as `{"$int": "..."}`, the tag
/// `vectors/GOLDEN.md` defines, instead of silently becoming floats.
pub fn read(path: &Path) -> Result<Vec<Line>, JsonlError> {
    let f = std::fs::File::open(path).map_err(|source| JsonlError::Io { path: path.into(), source })?;
    read_from(&path.display().to_string(), BufReader::new(f))
}

/// [`read`] over any buffered reader (bytes in memory: the trace fuzz target); `name` starts each error.
pub fn read_from(name: &str, r: impl BufRead) -> Result<Vec<Line>, JsonlError> {
    let mut out = Vec::new();
    visit_lines(name, r, |no, text| {
        let wide = mooncake_wire::hash::tagged::tag_wide_integers(text);
        let value = serde_json::from_str(wide.as_deref().unwrap_or(text)).map_err(|source| JsonlError::NotJson {
            name: name.into(),
            line: no,
            source,
        })?;
        out.push(Line { no, value });
        Ok(())
    })?;
    Ok(out)
}

/// Calls `f` with each non-empty line's number and text (trimmed), one line in memory at a time, each at most
/// [`MAX_JSONL_LINE_BYTES`] and UTF-8. A reader that parses lines into types of its own (the trace reader)
/// needs no JSON value of the whole line.
pub fn visit_lines<E: From<JsonlError>>(
    name: &str,
    mut r: impl BufRead,
    mut f: impl FnMut(usize, &str) -> Result<(), E>,
) -> Result<(), E> {
    let mut buf = Vec::new();
    let mut no = 0;
    loop {
        buf.clear();
        no += 1;
        let n = (&mut r)
            .take(MAX_JSONL_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|source| JsonlError::Read { name: name.into(), line: no, source })?;
        if n == 0 {
            return Ok(());
        }
        if buf.len() > MAX_JSONL_LINE_BYTES {
            return Err(JsonlError::TooLong { name: name.into(), line: no }.into());
        }
        let text = std::str::from_utf8(&buf).map_err(|_| JsonlError::NotUtf8 { name: name.into(), line: no })?.trim();
        if !text.is_empty() {
            f(no, text)?;
        }
    }
}

/// Expands directories (recursively, sorted) to the `*.jsonl` files (and `revisions.json` tables) under them;
/// files are kept as given. A file in a directory that looks like JSON but is not read (`trace.json`,
/// `x.ndjson`, `x.jsonl.gz`) is an error that names it, not silently left out; other files (READMEs, scripts)
/// are left out. A directory reached again (a symbolic link to itself or a parent, or a second route) is not
/// walked again, and a file reached again is read once: [`expand_noting`] says which.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, JsonlError> {
    Ok(expand_noting(paths)?.files)
}

/// What [`expand_noting`] found.
#[derive(Debug, Default)]
pub struct Expanded {
    /// The files to read, each once.
    pub files: Vec<PathBuf>,
    /// What was left out and why (a directory or file reached a second time), one sentence each.
    pub skipped: Vec<String>,
}

/// [`expand`], saying what it left out.
pub fn expand_noting(paths: &[PathBuf]) -> Result<Expanded, JsonlError> {
    let mut w = Walk::default();
    for p in paths {
        if p.is_dir() {
            let mut wrong = vec![];
            w.dir(p, &mut wrong).map_err(|source| JsonlError::Io { path: p.clone(), source })?;
            if let Some(bad) = wrong.first() {
                return Err(JsonlError::NotJsonl { path: bad.clone(), more: wrong.len() - 1 });
            }
        } else if p.exists() {
            w.file(p.clone());
        } else {
            return Err(JsonlError::NoSuchPath(p.clone()));
        }
    }
    Ok(w.out)
}

/// A walk that remembers every directory and file it reached, by canonical path.
#[derive(Default)]
struct Walk {
    dirs: std::collections::HashMap<PathBuf, PathBuf>,
    files: std::collections::HashMap<PathBuf, PathBuf>,
    out: Expanded,
}

impl Walk {
    fn file(&mut self, p: PathBuf) {
        let real = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        match self.files.get(&real) {
            Some(first) => {
                self.out.skipped.push(format!("{}: the same file as {}, read once", p.display(), first.display()))
            }
            None => {
                self.files.insert(real, p.clone());
                self.out.files.push(p);
            }
        }
    }

    fn dir(&mut self, dir: &Path, wrong: &mut Vec<PathBuf>) -> std::io::Result<()> {
        let real = std::fs::canonicalize(dir)?;
        if let Some(first) = self.dirs.get(&real) {
            // A link to the directory itself or a parent (a loop), or a second route to one already walked.
            self.out.skipped.push(format!(
                "{}: the same directory as {} (a symbolic link loop or a second route), not walked again",
                dir.display(),
                first.display()
            ));
            return Ok(());
        }
        self.dirs.insert(real, dir.to_path_buf());
        for p in crate::walk::entries(dir).map_err(std::io::Error::other)? {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
            if name.starts_with('.') {
                continue;
            }
            if p.is_dir() {
                self.dir(&p, wrong)?;
            } else if p.extension().and_then(|e| e.to_str()) == Some("jsonl") || name == "revisions.json" {
                self.file(p);
            } else if name.to_ascii_lowercase().contains(".json") || name.to_ascii_lowercase().ends_with(".ndjson") {
                wrong.push(p);
            }
        }
        Ok(())
    }
}

/// A file to read: on disk, or bundled into the binary (`conformance/traces`, found without the source tree).
#[derive(Clone, Debug)]
pub enum Input {
    /// A file on disk.
    File(PathBuf),
    /// A bundled file.
    Bundled {
        /// Its path relative to `conformance/`.
        name: &'static str,
        /// Its contents.
        text: &'static str,
    },
}

impl Input {
    /// How reports name it: the path, or `(bundled) traces/…`.
    pub fn name(&self) -> String {
        match self {
            Input::File(p) => p.display().to_string(),
            Input::Bundled { name, .. } => format!("(bundled) {name}"),
        }
    }
    /// Its lines, as [`read`] reads them.
    pub fn lines(&self) -> Result<Vec<Line>, JsonlError> {
        match self {
            Input::File(p) => read(p),
            Input::Bundled { text, .. } => read_from(&self.name(), text.as_bytes()),
        }
    }
    /// [`visit_lines`] over its lines.
    pub fn visit_lines<E: From<JsonlError>>(&self, f: impl FnMut(usize, &str) -> Result<(), E>) -> Result<(), E> {
        match self {
            Input::File(p) => {
                let file = std::fs::File::open(p).map_err(|source| JsonlError::Io { path: p.clone(), source })?;
                visit_lines(&self.name(), BufReader::new(file), f)
            }
            Input::Bundled { text, .. } => visit_lines(&self.name(), text.as_bytes(), f),
        }
    }
    /// The files given (directories expanded as [`expand`] does).
    pub fn files(paths: &[PathBuf]) -> Result<Vec<Input>, JsonlError> {
        Ok(expand(paths)?.into_iter().map(Input::File).collect())
    }
    /// [`Input::files`], with what [`expand_noting`] left out.
    pub fn files_noting(paths: &[PathBuf]) -> Result<(Vec<Input>, Vec<String>), JsonlError> {
        let e = expand_noting(paths)?;
        Ok((e.files.into_iter().map(Input::File).collect(), e.skipped))
    }
}

/// JSON equality that also requires object keys in the same order (a struct's declaration order, a dict's
/// insertion order).
pub fn eq_ordered(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((ka, va), (kb, vb))| ka == kb && eq_ordered(va, vb))
        }
        (J::Array(x), J::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| eq_ordered(p, q)),
        _ => a == b,
    }
}

/// The first place two JSON values differ, as a path (`$.ok_reqs[1]`), for reports.
pub fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value as J;
    match (a, b) {
        (J::Object(x), J::Object(y)) => {
            let kx: Vec<_> = x.keys().collect();
            let ky: Vec<_> = y.keys().collect();
            if kx != ky {
                return Some(format!("{path}: keys {kx:?} vs {ky:?}"));
            }
            x.iter().find_map(|(k, v)| first_difference(v, &y[k], &format!("{path}.{k}")))
        }
        (J::Array(x), J::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]")))
        }
        _ if a == b => None,
        _ => {
            let short = |v: &J| {
                let s = v.to_string();
                if s.len() > 80 {
                    format!("{}…", &s[..s.char_indices().nth(80).map(|(i, _)| i).unwrap_or(s.len())])
                } else {
                    s
                }
            };
            Some(format!("{path}: {} vs {}", short(a), short(b)))
        }
    }
}
