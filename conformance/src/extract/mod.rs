//! `mooncake-conformance extract PATH`: a spec revision derived from vLLM's source.
//!
//! The bundled script (`conformance/extract/extract.py`, embedded in the binary and run as `python3 - PATH`, so an
//! installed tool needs no source tree) reads the source statically with Python's `ast` — nothing of vLLM or
//! torch is imported — and prints its facts ([`facts::Facts`]): declarations (structs, enums, aliases, the
//! bootstrap server) and what the code sends and reads (literal reply texts with their statuses,
//! `kv_connector_extra_config` keys, environment variables, the structs its msgpack decoders are built for). Here they become a spec revision file: edits
//! ([`edits`]) on the bundled push revision they are closest to (fewest edits; ties go to the revision that
//! covers the source's own release, else to the newest). Everything the source does not state (behaviour,
//! transport, docs) is the base's, and said so under "not derived".

pub mod edits;
pub mod facts;
mod file;
pub mod proof;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use mooncake_wire::spec::{Revision, Spec};

pub use facts::Facts;

/// The extraction script, as bundled.
pub const SCRIPT: &str = include_str!("../../extract/extract.py");

/// A failed extraction: bad input ([`ErrorKind::Usage`](crate::outcome::ErrorKind): not a vLLM source), the
/// environment (no Python), or a derived revision that does not load.
pub type ExtractError = crate::outcome::CmdError;

/// A derived revision: the file's text, the revision it resolves to, its base and what was not derived.
#[derive(Clone, Debug)]
pub struct Derived {
    /// What the script read.
    pub facts: Facts,
    /// The bundled revision the file edits.
    pub base: String,
    /// How many edits it makes on the base.
    pub edits: usize,
    /// The spec file (TOML).
    pub text: String,
    /// The revision the file defines, loaded.
    pub revision: Arc<Revision>,
    /// What could not be derived: the script's list, and what was kept from the base.
    pub not_derived: Vec<String>,
    /// Every candidate base with its edit count, fewest first (the chosen base among the fewest).
    pub ranking: Vec<(String, usize)>,
}

/// The interpreter that runs the script: `MOONCAKE_PYTHON`; else the Python of the environment this program was
/// installed into (a `python3` next to it: `pip install mooncake-wire` puts both in the environment's `bin`); else
/// `python3` on `PATH`.
pub fn default_python() -> String {
    if let Some(p) = std::env::var("MOONCAKE_PYTHON").ok().filter(|p| !p.is_empty()) {
        return p;
    }
    let beside = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join("python3")));
    match beside.filter(|p| p.is_file()) {
        Some(p) => p.to_string_lossy().into_owned(),
        None => "python3".into(),
    }
}

/// Runs the bundled script on `path`.
pub fn read_facts(path: &Path, python: &str) -> Result<Facts, ExtractError> {
    let mut child = Command::new(python)
        .arg("-")
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ExtractError::environment(format!("running {python}: {e} (set --python or MOONCAKE_PYTHON)")))?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        stdin.write_all(SCRIPT.as_bytes()).map_err(|e| ExtractError::environment(format!("{python}: {e}")))?;
    }
    let out = child.wait_with_output().map_err(|e| ExtractError::environment(format!("{python}: {e}")))?;
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match out.status.code() {
        Some(0) => {}
        Some(2) => return Err(ExtractError::usage(err)),
        c => {
            return Err(ExtractError::environment(format!(
                "the extraction script failed ({python}, exit {c:?}): {err}"
            )))
        }
    }
    let facts: Facts = serde_json::from_slice(&out.stdout)
        .map_err(|e| ExtractError::environment(format!("the extraction script's output: {e}")))?;
    if facts.format != "mooncake-extract/1" {
        return Err(ExtractError::environment(format!("the script printed format {:?}", facts.format)));
    }
    Ok(facts)
}

/// Whether a `diff` side names vLLM source rather than a spec: a wheel, a `.py` file, or a directory holding
/// `vllm/distributed` or Python files and no spec files.
pub fn is_source(path: &Path) -> bool {
    if path.is_file() {
        return path.extension().is_some_and(|e| e == "whl" || e == "py" || e == "zip");
    }
    if !path.is_dir() {
        return false;
    }
    if path.join("vllm").join("distributed").is_dir() {
        return true;
    }
    let Ok(entries) = mooncake_trace::walk::entries(path) else { return false };
    let exts: Vec<String> =
        entries.iter().filter_map(|p| p.extension().map(|x| x.to_string_lossy().into_owned())).collect();
    exts.iter().any(|e| e == "py") && !exts.iter().any(|e| e == "toml")
}

/// Derives the revision of a source: reads it, picks the closest bundled base and writes the edits.
pub fn derive(path: &Path, python: &str, base: Option<&str>) -> Result<Derived, ExtractError> {
    let facts = read_facts(path, python)?;
    derive_from(facts, base)
}

/// [`derive()`] from facts already read.
pub fn derive_from(facts: Facts, base: Option<&str>) -> Result<Derived, ExtractError> {
    let spec = Spec::builtin();
    let source = file::source_line(&facts);
    let covering = facts.release.as_deref().and_then(|r| spec.resolve(r).ok()).map(|r| r.revision.revision.clone());
    let candidates: Vec<Arc<Revision>> = match base {
        Some(b) => {
            vec![spec.resolve(b).map_err(|e| ExtractError::usage(format!("--base: {e}")))?.revision]
        }
        None => spec
            .push()
            .revisions
            .iter()
            .filter(|r| facts.generation.is_none_or(|g| g == r.generation))
            .cloned()
            .collect(),
    };
    // Every candidate with its edits, newest first; the closest is the one with the fewest edits (ties: the
    // revision covering the source's release, else the newest).
    let mut lists: Vec<(Arc<Revision>, edits::EditList)> =
        candidates.iter().rev().map(|c| (c.clone(), edits::edits(&facts, c, &source))).collect();
    let mut ranking: Vec<(String, usize)> = lists.iter().map(|(c, e)| (c.revision.clone(), e.edits.len())).collect();
    lists.sort_by_key(|(c, e)| (e.edits.len(), covering.as_deref() != Some(c.revision.as_str())));
    if lists.is_empty() {
        return Err(ExtractError::usage("no bundled revision of that generation"));
    }
    // A base the edits cannot be applied to (a partial input's edits on the other generation's shape) gives
    // way to the next closest; the first error is reported when none loads.
    let name = file::revision_name(&facts);
    let mut first_error = None;
    let mut chosen = None;
    for (base_rev, list) in lists {
        let text = file::render(&facts, &base_rev, &list, &source);
        let mut files: Vec<(String, String)> =
            Spec::builtin_files().iter().map(|(p, t)| (format!("(built-in) {p}"), t.to_string())).collect();
        files.push(("(extracted)".into(), text.clone()));
        match Spec::from_files(files) {
            Ok(loaded) => {
                let revision = loaded.revision(&name).cloned().expect("the derived file defines its revision");
                chosen = Some((base_rev, list, text, revision));
                break;
            }
            Err(e) => {
                first_error.get_or_insert_with(|| {
                    ExtractError::disagreement(format!(
                        "the derived revision does not load ({e}); the file was:\n{text}"
                    ))
                });
            }
        }
    }
    let Some((base_rev, list, text, revision)) = chosen else {
        return Err(first_error.expect("a candidate was tried"));
    };
    let mut not_derived: Vec<String> = facts
        .not_derived
        .iter()
        .map(|n| {
            if n.starts_with("behaviour") || n.starts_with("transport") {
                format!("{n}: kept as {} has it", base_rev.revision)
            } else {
                n.clone()
            }
        })
        .collect();
    not_derived.extend(list.notes.iter().cloned());
    ranking.sort_by_key(|(n, e)| (*e, n != &base_rev.revision));
    Ok(Derived {
        base: base_rev.revision.clone(),
        edits: list.edits.len(),
        text,
        revision,
        not_derived,
        facts,
        ranking,
    })
}
