//! The lookup-channel data (`spec/store-lookup/vllm.toml`, format `mooncake-store-lookup/1`): the frames of
//! every request and reply, per run of vLLM releases. The first version is written out; each later one is its
//! `base` with `[[versions.edit]]`s applied by the wire spec's own edit engine (`spec::tree::apply_edit`), so a
//! change reads as a small diff. See `spec/README.md`, "Store lookup channel".

use std::sync::OnceLock;

use indexmap::IndexMap;
use serde::Deserialize;

use crate::spec::tree::data_format;
use crate::spec::{Spec, SpecError};

pub(crate) const FORMAT: &str = "mooncake-store-lookup/1";

/// The file as written: versions are raw tables until their edits are applied. `name`, `doc` and `source`
/// are required of the file but read by nothing.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RawFile {
    format: String,
    name: String,
    doc: String,
    source: String,
    versions: Vec<toml::Table>,
}

/// The file with every version resolved.
#[derive(Clone, Debug)]
pub(crate) struct LookupFile {
    pub(crate) versions: Vec<LookupVersion>,
}

/// Keys a version states for itself; never inherited from its base.
const OWN_KEYS: &[&str] = &["name", "base", "releases", "build_commits", "source", "edit"];

/// One run of releases with the same frames.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupVersion {
    /// The version's name, after its releases (`vllm-0.22.0..0.22.1`).
    pub name: String,
    /// The version this one edits (absent for the first).
    #[serde(default)]
    pub base: Option<String>,
    /// The vLLM releases that speak this version.
    pub releases: Vec<String>,
    /// The build commit of each release (as in its wheel's version string).
    #[serde(default)]
    pub build_commits: IndexMap<String, String>,
    /// Where the version was read (wheel and file).
    pub source: String,
    /// This version's own edits, as written (for the wire table and the diff between versions).
    #[serde(default)]
    pub edit: Vec<toml::Table>,
    /// The IPC path template of the REP socket.
    pub path: String,
    /// What the server answers to an unknown tag: `status-error`, or `n/a` (untagged versions).
    pub unknown_tag: String,
    /// Every request the scheduler can send, with its reply.
    pub requests: Vec<RequestDef>,
}

/// One request of a version: its frames, in order, and the worker's reply frames.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestDef {
    /// The request's name (`lookup`, `reset`).
    pub name: String,
    /// The frames of the multipart request, in order; a tagged version starts with a `const` tag frame.
    pub frames: Vec<FrameDef>,
    /// The reply's frames (one in every release).
    pub reply: Vec<FrameDef>,
    /// Where the request was introduced and changed.
    #[serde(flatten)]
    pub history: History,
}

/// What the edit engine records on items: the version that inserted an item (with its source) and the
/// versions whose edits touched it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct History {
    /// The version that introduced the item (absent on the first version's own items).
    #[serde(default)]
    pub since: Option<String>,
    /// Where the introducing version's behaviour was read.
    #[serde(default)]
    pub source: Option<String>,
    /// Later versions whose edits changed the item.
    #[serde(default)]
    pub changed_in: Vec<String>,
}

/// One frame of a request or reply.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameDef {
    /// The frame's name, unique within its request (`token_len`, `block_hashes`).
    pub name: String,
    /// How the frame's bytes are laid out.
    pub kind: FrameKind,
    /// `const`: the exact bytes, as ASCII text.
    #[serde(default)]
    pub bytes: Option<String>,
    /// `msgpack`: the type the frame holds.
    #[serde(default, rename = "type")]
    pub ty: Option<String>,
    /// `hashes`: the frame whose value is the length of each digest.
    #[serde(default)]
    pub item_len: Option<String>,
    /// What the frame carries, in vLLM's terms.
    #[serde(default)]
    pub doc: String,
    /// Where the frame was introduced and changed.
    #[serde(flatten)]
    pub history: History,
}

/// How a frame's bytes are laid out (the `kind` of the spec file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameKind {
    /// Exactly the bytes of [`FrameDef::bytes`]: a message tag, only as a request's first frame.
    Const,
    /// Exactly 2 bytes, a big-endian unsigned integer.
    U16,
    /// Exactly 4 bytes, a big-endian unsigned integer.
    U32,
    /// One MessagePack object of the type [`FrameDef::ty`] (`list[str]`: vLLM's encoder applied to the hex digests).
    Msgpack,
    /// Raw digests back to back, each as long as the value of the frame [`FrameDef::item_len`] names.
    Hashes,
    /// A big-endian `u32` hit count, then zero or more 8-byte (`u32` group id, `u32` boundary tokens) tail
    /// boundaries.
    Lookup,
    /// One byte: 1 for success, 0 for failure.
    Status,
}

impl LookupVersion {
    /// The request a tag frame selects (`None` for an unknown tag).
    pub(crate) fn request_by_tag(&self, tag: &[u8]) -> Option<&RequestDef> {
        self.requests.iter().find(|r| {
            r.frames
                .first()
                .is_some_and(|f| f.kind == FrameKind::Const && f.bytes.as_deref().map(str::as_bytes) == Some(tag))
        })
    }
    /// A request by name.
    pub fn request(&self, name: &str) -> Option<&RequestDef> {
        self.requests.iter().find(|r| r.name == name)
    }
    /// Whether requests start with a tag frame.
    pub fn tagged(&self) -> bool {
        self.requests.iter().all(|r| r.frames.first().is_some_and(|f| f.kind == FrameKind::Const))
    }
}

impl LookupFile {
    pub(crate) fn parse(path: &str, text: &str) -> Result<LookupFile, SpecError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| SpecError::new(path, e.to_string()))?;
        if raw.format != FORMAT {
            return Err(SpecError::new(path, format!("format must be {FORMAT}")));
        }
        let f = LookupFile { versions: resolve(&raw.versions).map_err(|e| SpecError::new(path, e.to_string()))? };
        let mut seen = std::collections::HashSet::new();
        for v in &f.versions {
            let at = |m: String| SpecError::new(path, format!("version {}: {m}", v.name));
            for r in &v.releases {
                if !seen.insert(r.clone()) {
                    return Err(at(format!("release {r} is listed twice")));
                }
            }
            if v.requests.is_empty() || (v.requests.len() > 1 && !v.tagged()) {
                return Err(at("several requests need a tag frame each".into()));
            }
            if !["status-error", "n/a"].contains(&v.unknown_tag.as_str()) || (v.unknown_tag == "n/a") == v.tagged() {
                return Err(at(format!(
                    "unknown_tag `{}`: `status-error` for tagged versions, `n/a` otherwise",
                    v.unknown_tag
                )));
            }
            for r in &v.requests {
                let mut earlier: Vec<&FrameDef> = vec![];
                for fr in &r.frames {
                    check_frame(fr, &earlier).map_err(|m| at(format!("request {} frame {}: {m}", r.name, fr.name)))?;
                    earlier.push(fr);
                }
                match r.reply.as_slice() {
                    [one] if matches!(one.kind, FrameKind::U32 | FrameKind::Lookup | FrameKind::Status) => {}
                    _ => return Err(at(format!("request {}: the reply is one u32, lookup or status frame", r.name))),
                }
            }
        }
        Ok(f)
    }
}

/// Why the versions of the lookup file cannot be resolved ([`resolve`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum VersionsError {
    /// A version table without a `name`.
    #[error("a version without a `name`")]
    Unnamed,
    /// What is wrong with a named version.
    #[error("version {version}: {problem}")]
    Version {
        /// The version's name.
        version: String,
        /// What is wrong with it.
        #[source]
        problem: VersionProblem,
    },
}

/// What is wrong with one version of the lookup file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum VersionProblem {
    /// An `edit` entry that is not a table.
    #[error("each edit must be a table")]
    EditNotTable,
    /// An `edit` key that is not an array of tables.
    #[error("`edit` must be an array of tables")]
    EditNotArray,
    /// Edits in a version without a `base`.
    #[error("edits need a `base`")]
    EditsWithoutBase,
    /// A `base` that is not a string.
    #[error("`base` must be a string")]
    BaseNotString,
    /// A `base` that names no earlier version.
    #[error("base `{0}` is not an earlier version")]
    UnknownBase(String),
    /// A derived version setting a key other than its own keys directly.
    #[error("a derived version may only set {own:?} directly; change `{key}` with an edit", own = OWN_KEYS)]
    NotOwnKey {
        /// The key set directly.
        key: String,
    },
    /// An edit that cannot be applied to the base.
    #[error("edit #{index}: {source}")]
    Edit {
        /// The edit's position in the version, from 1.
        index: usize,
        /// Why it cannot be applied.
        source: crate::spec::tree::EditError,
    },
    /// The resolved table is not a version.
    #[error("{0}")]
    Read(#[source] toml::de::Error),
}

/// Why a request frame's definition is not one the lookup codec can use ([`check_frame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FrameDefError {
    /// A const frame without `bytes`.
    #[error("a const frame needs `bytes`")]
    ConstWithoutBytes,
    /// A const (tag) frame after the first frame.
    #[error("only the first frame can be a tag")]
    TagNotFirst,
    /// A msgpack frame of a type other than `list[str]`.
    #[error("msgpack frames hold list[str]")]
    MsgpackNotStrList,
    /// A hashes frame whose `item_len` names no earlier u16 or u32 frame.
    #[error("`item_len` must name an earlier u16 or u32 frame")]
    BadItemLen,
    /// A reply frame kind in a request.
    #[error("reply kinds cannot be request frames")]
    ReplyKind,
}

/// Applies each version's edits to its base (which must come earlier in the file) and reads the result.
fn resolve(raw: &[toml::Table]) -> Result<Vec<LookupVersion>, VersionsError> {
    use toml::Value;
    let mut done: Vec<(String, toml::Table)> = Vec::new();
    let mut out = Vec::new();
    for own in raw {
        let name = own.get("name").and_then(Value::as_str).ok_or(VersionsError::Unnamed)?.to_string();
        let at = |problem: VersionProblem| VersionsError::Version { version: name.clone(), problem };
        let source = own.get("source").and_then(Value::as_str).unwrap_or_default().to_string();
        let edits: Vec<toml::Table> = match own.get("edit") {
            None => vec![],
            Some(Value::Array(a)) => a
                .iter()
                .map(|e| e.as_table().cloned().ok_or_else(|| at(VersionProblem::EditNotTable)))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(at(VersionProblem::EditNotArray)),
        };
        let mut t = match own.get("base") {
            None if !edits.is_empty() => return Err(at(VersionProblem::EditsWithoutBase)),
            None => own.clone(),
            Some(base) => {
                let base = base.as_str().ok_or_else(|| at(VersionProblem::BaseNotString))?;
                let (_, bt) = done
                    .iter()
                    .find(|(n, _)| n == base)
                    .ok_or_else(|| at(VersionProblem::UnknownBase(base.to_string())))?;
                let mut t = bt.clone();
                for k in OWN_KEYS {
                    t.remove(*k);
                }
                for (k, v) in own {
                    if !OWN_KEYS.contains(&k.as_str()) {
                        return Err(at(VersionProblem::NotOwnKey { key: k.clone() }));
                    }
                    if k != "edit" {
                        t.insert(k.clone(), v.clone());
                    }
                }
                for (i, e) in edits.iter().enumerate() {
                    crate::spec::tree::apply_edit(&mut t, e, &name, &source)
                        .map_err(|source| at(VersionProblem::Edit { index: i + 1, source }))?;
                }
                t
            }
        };
        t.remove("edit");
        done.push((name.clone(), t.clone()));
        if !edits.is_empty() {
            t.insert("edit".into(), Value::Array(edits.into_iter().map(Value::Table).collect()));
        }
        out.push(Value::Table(t).try_into::<LookupVersion>().map_err(|e| at(VersionProblem::Read(e)))?);
    }
    Ok(out)
}

fn check_frame(f: &FrameDef, earlier: &[&FrameDef]) -> Result<(), FrameDefError> {
    match f.kind {
        FrameKind::Const if f.bytes.is_none() => Err(FrameDefError::ConstWithoutBytes),
        FrameKind::Const if !earlier.is_empty() => Err(FrameDefError::TagNotFirst),
        FrameKind::Msgpack if f.ty.as_deref() != Some("list[str]") => Err(FrameDefError::MsgpackNotStrList),
        FrameKind::Hashes => match earlier.iter().find(|e| Some(e.name.as_str()) == f.item_len.as_deref()) {
            Some(e) if matches!(e.kind, FrameKind::U16 | FrameKind::U32) => Ok(()),
            _ => Err(FrameDefError::BadItemLen),
        },
        FrameKind::Lookup | FrameKind::Status => Err(FrameDefError::ReplyKind),
        _ => Ok(()),
    }
}

/// The built-in lookup data.
pub(crate) fn builtin() -> &'static LookupFile {
    static F: OnceLock<LookupFile> = OnceLock::new();
    F.get_or_init(|| {
        let (p, t) = Spec::builtin_files()
            .iter()
            .find(|(_, t)| data_format(t).as_deref() == Some(FORMAT))
            .expect("spec/store-lookup/vllm.toml is embedded");
        LookupFile::parse(p, t).unwrap_or_else(|e| panic!("embedded spec: {e}"))
    })
}

/// The frames of a vLLM release (`0.33.0`).
pub fn for_release(release: &str) -> Option<&'static LookupVersion> {
    builtin().versions.iter().find(|v| v.releases.iter().any(|r| r == release))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &LookupVersion, req: &str) -> Vec<String> {
        v.request(req).unwrap().frames.iter().map(|f| f.name.clone()).collect()
    }

    #[test]
    fn versions_resolve_from_their_edits() {
        let f = builtin();
        let order: Vec<&str> = f.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            order,
            [
                "vllm-0.21.0",
                "vllm-0.22.0..0.22.1",
                "vllm-0.23.0",
                "vllm-0.24.0..0.26.0",
                "vllm-0.27.0..0.28.0",
                "vllm-0.29.0..0.34.0"
            ]
        );
        assert_eq!(names(for_release("0.21.0").unwrap(), "lookup"), ["token_len", "block_hashes"]);
        assert!(for_release("0.21.0").unwrap().path.contains("_uid{uid}_"));
        assert!(for_release("0.22.1").unwrap().path.contains("_host_{hostname}_"));
        assert_eq!(names(for_release("0.23.0").unwrap(), "lookup"), ["tag", "token_len", "block_hashes"]);
        assert_eq!(names(for_release("0.26.0").unwrap(), "lookup"), ["tag", "token_len", "hash_len", "block_hashes"]);
        assert_eq!(names(for_release("0.27.0").unwrap(), "lookup"), ["tag", "num_tokens", "hash_len", "block_hashes"]);
        let v33 = for_release("0.33.0").unwrap();
        assert_eq!(v33.request("lookup").unwrap().reply[0].kind, FrameKind::Lookup);
        assert_eq!(v33.request("reset").unwrap().history.since.as_deref(), Some("vllm-0.23.0"));
        assert_eq!(v33.unknown_tag, "status-error");
        assert_eq!(v33.edit.len(), 1, "a version keeps only its own edits");
        assert_eq!(for_release("0.34.0").unwrap().name, v33.name, "0.34.0 speaks 0.33.0's frames");
        assert!(for_release("0.20.0").is_none() && for_release("0.35.0").is_none());
    }

    #[test]
    fn a_bad_edit_says_where() {
        let text = builtin_text().replace("before = \"token_len\"", "before = \"no_such_frame\"");
        let e = LookupFile::parse("x.toml", &text).unwrap_err();
        assert_eq!(e.path, "x.toml");
        assert!(e.msg.contains("version vllm-0.23.0: edit #1") && e.msg.contains("no_such_frame"), "{e}");
        let text = builtin_text().replace("base = \"vllm-0.23.0\"", "base = \"vllm-0.29.0..0.34.0\"");
        assert!(LookupFile::parse("x.toml", &text).unwrap_err().msg.contains("not an earlier version"));
    }

    fn builtin_text() -> String {
        Spec::builtin_files().iter().find(|(_, t)| data_format(t).as_deref() == Some(FORMAT)).unwrap().1.to_string()
    }
}
