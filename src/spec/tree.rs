//! Spec files as documents: parsing, resolving a revision's `base` chain, and applying its edit list.
//!
//! A *full* revision file describes everything. A *derived* file names a `base` and lists `[[edit]]`s; the
//! resolved document is the base's resolved document with the derived file's own metadata and its edits
//! applied in order. See `spec/README.md` ("Revision files") for the edit operations.

use std::collections::{BTreeMap, HashSet};
use toml::{Table, Value};

use super::SpecError;

/// Keys each revision file states for itself; never inherited from the base.
const OWN_KEYS: &[&str] =
    &["format", "family", "revision", "base", "generation", "releases", "commit", "build_commits", "source", "summary"];
/// Arrays whose items are named tables; edits address their items by `name`.
const NAMED_ARRAYS: &[&str] = &["fields", "members", "keys", "routes", "messages", "texts"];
/// Version 2: `[behaviour]` items are typed `{ value, source, doc }` tables (version 1 had plain values).
pub(crate) const FORMAT: &str = "mooncake-wire-spec/2";

pub(crate) struct RawFile {
    pub(crate) path: String,
    pub(crate) table: Table,
}

/// A spec file, parsed once: a wire revision, or a data table of another `mooncake-*` format (compatibility-hash
/// factor sets, implementations) that its own module reads.
pub(crate) enum SpecFile {
    /// A wire-revision file, its keys checked.
    Revision(RawFile),
    /// Another `mooncake-*` format, named.
    Data { format: String, file: RawFile },
}

/// Parses a spec file and tells a wire revision from a data table of another `mooncake-*` format.
pub(crate) fn parse_file(path: &str, text: &str) -> Result<SpecFile, SpecError> {
    let table: Table = toml::from_str(text).map_err(|e| SpecError::new(path, format!("TOML: {e}")))?;
    match table.get("format").and_then(Value::as_str) {
        Some(FORMAT) => {}
        Some(other) if other.starts_with("mooncake-wire-spec") => {
            return Err(SpecError::new(
                path,
                format!("written in spec format \"{other}\"; this build reads \"{FORMAT}\" (version 1 had untyped `[behaviour]` values: read it with a build of its time)"),
            ))
        }
        Some(other) if other.starts_with("mooncake-") => {
            let format = other.to_string();
            return Ok(SpecFile::Data { format, file: RawFile { path: path.to_string(), table } });
        }
        other => return Err(SpecError::new(path, format!("`format` must be \"{FORMAT}\" (or another mooncake-* data format), found {other:?}"))),
    }
    for k in ["family", "revision", "source", "summary"] {
        if table.get(k).and_then(Value::as_str).is_none() {
            return Err(SpecError::new(path, format!("missing string key `{k}`")));
        }
    }
    Ok(SpecFile::Revision(RawFile { path: path.to_string(), table }))
}

/// Resolves every file; returns (family, revision) → resolved table, plus the edits each file applied itself.
pub(crate) fn resolve_all(files: &[RawFile]) -> Result<BTreeMap<(String, String), Resolved>, SpecError> {
    let mut by_key: BTreeMap<(String, String), &RawFile> = BTreeMap::new();
    for f in files {
        let key = (str_key(&f.table, "family"), str_key(&f.table, "revision"));
        if let Some(prev) = by_key.insert(key.clone(), f) {
            return Err(SpecError::new(&f.path, format!("revision {} is also defined in {}", key.1, prev.path)));
        }
    }
    let mut done = BTreeMap::new();
    for key in by_key.keys() {
        resolve_one(key, &by_key, &mut done, &mut HashSet::new())?;
    }
    Ok(done)
}

#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub(crate) path: String,
    pub(crate) table: Table,
    /// This file's own edits, as written (empty for a full revision).
    pub(crate) edits: Vec<Table>,
}

fn str_key(t: &Table, k: &str) -> String {
    t.get(k).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn resolve_one(
    key: &(String, String),
    files: &BTreeMap<(String, String), &RawFile>,
    done: &mut BTreeMap<(String, String), Resolved>,
    visiting: &mut HashSet<(String, String)>,
) -> Result<(), SpecError> {
    if done.contains_key(key) {
        return Ok(());
    }
    let file = files[key];
    if !visiting.insert(key.clone()) {
        return Err(SpecError::new(&file.path, "the base chain is circular"));
    }
    let own = &file.table;
    let revision = key.1.clone();
    let source = str_key(own, "source");
    let edits: Vec<Table> = match own.get("edit") {
        None => vec![],
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_table().cloned().ok_or_else(|| SpecError::new(&file.path, "each [[edit]] must be a table")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(SpecError::new(&file.path, "`edit` must be an array of tables")),
    };
    let mut table = match own.get("base") {
        None => {
            if !edits.is_empty() {
                return Err(SpecError::new(&file.path, "a full revision (no `base`) cannot have edits"));
            }
            let mut t = own.clone();
            stamp_since(&mut t, &revision);
            t
        }
        Some(Value::String(base)) => {
            let bkey = (key.0.clone(), base.clone());
            if !files.contains_key(&bkey) {
                return Err(SpecError::new(
                    &file.path,
                    format!("base revision `{base}` not found in family `{}`", key.0),
                ));
            }
            resolve_one(&bkey, files, done, visiting)?;
            let mut t = done[&bkey].table.clone();
            for k in OWN_KEYS {
                t.remove(*k);
            }
            for (k, v) in own {
                if k != "edit" {
                    if !OWN_KEYS.contains(&k.as_str()) {
                        return Err(SpecError::new(
                            &file.path,
                            format!(
                                "a derived revision may only set {OWN_KEYS:?} directly; change `{k}` with an [[edit]]"
                            ),
                        ));
                    }
                    t.insert(k.clone(), v.clone());
                }
            }
            for (i, e) in edits.iter().enumerate() {
                apply_edit(&mut t, e, &revision, &source)
                    .map_err(|m| SpecError::new(&file.path, format!("edit #{} ({}): {m}", i + 1, str_key(e, "at"))))?;
            }
            t
        }
        Some(_) => return Err(SpecError::new(&file.path, "`base` must be a string")),
    };
    table.remove("edit");
    visiting.remove(key);
    done.insert(key.clone(), Resolved { path: file.path.clone(), table, edits });
    Ok(())
}

/// Marks every item of every named array with `since = revision` unless it already says.
fn stamp_since(t: &mut Table, revision: &str) {
    for (k, v) in t.iter_mut() {
        match v {
            Value::Table(sub) => stamp_since(sub, revision),
            Value::Array(items) if NAMED_ARRAYS.contains(&k.as_str()) => {
                for it in items.iter_mut() {
                    if let Value::Table(it) = it {
                        it.entry("since").or_insert_with(|| Value::String(revision.to_string()));
                        stamp_since(it, revision);
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(Value::Table(items)) = t.get_mut("behaviour") {
        for (_, it) in items.iter_mut() {
            if let Value::Table(it) = it {
                it.entry("since").or_insert_with(|| Value::String(revision.to_string()));
            }
        }
    }
    for section in ["structs", "enums", "env", "extra_config"] {
        if let Some(Value::Table(defs)) = t.get_mut(section) {
            for (_, d) in defs.iter_mut() {
                if let Value::Table(d) = d {
                    d.entry("since").or_insert_with(|| Value::String(revision.to_string()));
                }
            }
        }
    }
}

/// A behaviour item from a `set` edit: `{ value, source, why, since }`. The source is the edit's, else the
/// revision's; a value that already is an item (a table with `value` and `source`) keeps its own keys.
fn behaviour_item(value: Value, e: &Table, revision: &str, rev_source: &str) -> Value {
    let mut item = match value {
        Value::Table(t) if t.contains_key("value") && t.contains_key("source") => t,
        v => {
            let mut t = Table::new();
            t.insert("value".into(), v);
            t
        }
    };
    let src = e.get("source").and_then(Value::as_str).unwrap_or(rev_source);
    item.entry("source").or_insert_with(|| Value::String(src.to_string()));
    if let Some(why) = e.get("why") {
        item.entry("why").or_insert_with(|| why.clone());
    }
    item.insert("since".into(), Value::String(revision.to_string()));
    Value::Table(item)
}

fn item_name(v: &Value) -> Option<&str> {
    v.as_table()?.get("name")?.as_str()
}

/// Why an `[[edit]]` of a derived revision (or lookup version) cannot be applied to its base.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EditError {
    /// A key an edit does not take.
    #[error("unknown edit key `{0}`")]
    UnknownKey(String),
    /// An item the edit needs (`op`, `at`, `item`, `value`).
    #[error("missing `{0}`")]
    Missing(&'static str),
    /// An inserted item without a `name`.
    #[error("inserted item needs a `name`")]
    UnnamedItem,
    /// An operation other than insert, set, replace and remove.
    #[error("unknown op `{0}` (insert, set, replace, remove)")]
    UnknownOp(String),
    /// An empty `at`.
    #[error("empty path")]
    EmptyPath,
    /// A path segment that is no key of its table.
    #[error("no key `{0}`")]
    NoKey(String),
    /// A path segment that names no item of its array.
    #[error("no item named `{0}`")]
    NoItemNamed(String),
    /// A path that continues below a scalar.
    #[error("`{0}` is inside a scalar")]
    InsideScalar(String),
    /// The path (or the item) leads to the wrong kind of value; the text says what it must be.
    #[error("{0}")]
    WrongShape(&'static str),
    /// An inserted item whose name the array has already.
    #[error("`{0}` already exists")]
    AlreadyExists(String),
    /// Both `after` and `before`.
    #[error("give `after` or `before`, not both")]
    AfterAndBefore,
    /// The item an insert is placed after (or before) is not there.
    #[error("no item `{name}` to insert {}", if *.after { "after" } else { "before" })]
    NoAnchor {
        /// The item named.
        name: String,
        /// `after` (else `before`).
        after: bool,
    },
    /// The item a replace or remove names is not there.
    #[error("no item `{0}`")]
    NoItem(String),
}

/// Follows a dotted path: table keys by name, named-array items by their `name`. Records on every named item
/// it passes through that `revision` changed it.
fn walk<'a>(root: &'a mut Table, segs: &[&str], mark: Option<&str>) -> Result<&'a mut Value, EditError> {
    let (first, rest) = segs.split_first().ok_or(EditError::EmptyPath)?;
    let mut cur = root.get_mut(*first).ok_or_else(|| EditError::NoKey(first.to_string()))?;
    for seg in rest {
        cur = match cur {
            Value::Table(t) => t.get_mut(*seg).ok_or_else(|| EditError::NoKey(seg.to_string()))?,
            Value::Array(items) => {
                let it = items
                    .iter_mut()
                    .find(|v| item_name(v) == Some(*seg))
                    .ok_or_else(|| EditError::NoItemNamed(seg.to_string()))?;
                if let (Some(rev), Value::Table(t)) = (mark, &mut *it) {
                    let ch = t.entry("changed_in").or_insert_with(|| Value::Array(vec![]));
                    if let Value::Array(a) = ch {
                        if !a.iter().any(|v| v.as_str() == Some(rev)) {
                            a.push(Value::String(rev.to_string()));
                        }
                    }
                }
                it
            }
            _ => return Err(EditError::InsideScalar(seg.to_string())),
        };
    }
    Ok(cur)
}

pub(crate) fn apply_edit(t: &mut Table, e: &Table, revision: &str, rev_source: &str) -> Result<(), EditError> {
    for k in e.keys() {
        if !["op", "at", "after", "before", "item", "value", "why", "source"].contains(&k.as_str()) {
            return Err(EditError::UnknownKey(k.clone()));
        }
    }
    let op = e.get("op").and_then(Value::as_str).ok_or(EditError::Missing("op"))?;
    let at = e.get("at").and_then(Value::as_str).ok_or(EditError::Missing("at"))?;
    let segs: Vec<&str> = at.split('.').collect();
    let new_item = || -> Result<Value, EditError> {
        let mut item = e.get("item").cloned().ok_or(EditError::Missing("item"))?;
        let it = item.as_table_mut().ok_or(EditError::WrongShape("`item` must be a table"))?;
        it.entry("since").or_insert_with(|| Value::String(revision.to_string()));
        let src = e.get("source").and_then(Value::as_str).unwrap_or(rev_source);
        it.entry("source").or_insert_with(|| Value::String(src.to_string()));
        Ok(item)
    };
    match op {
        "insert" => {
            let item = new_item()?;
            let name = item_name(&item).ok_or(EditError::UnnamedItem)?.to_string();
            let arr = walk(t, &segs, None)?.as_array_mut().ok_or(EditError::WrongShape("`at` must name an array"))?;
            if arr.iter().any(|v| item_name(v) == Some(&name)) {
                return Err(EditError::AlreadyExists(name));
            }
            let idx = match (e.get("after").and_then(Value::as_str), e.get("before").and_then(Value::as_str)) {
                (Some(_), Some(_)) => return Err(EditError::AfterAndBefore),
                (Some(a), None) => {
                    arr.iter()
                        .position(|v| item_name(v) == Some(a))
                        .ok_or_else(|| EditError::NoAnchor { name: a.to_string(), after: true })?
                        + 1
                }
                (None, Some(b)) => arr
                    .iter()
                    .position(|v| item_name(v) == Some(b))
                    .ok_or_else(|| EditError::NoAnchor { name: b.to_string(), after: false })?,
                (None, None) => arr.len(),
            };
            arr.insert(idx, item);
        }
        "set" => {
            let mut value = e.get("value").cloned().ok_or(EditError::Missing("value"))?;
            if segs.len() == 2 && segs[0] == "behaviour" {
                value = behaviour_item(value, e, revision, rev_source);
            }
            // A whole new struct, enum, variable or key: it, and the named items inside it, are this revision's.
            if let (2, "structs" | "enums" | "env" | "extra_config", Value::Table(v)) =
                (segs.len(), segs[0], &mut value)
            {
                v.entry("since").or_insert_with(|| Value::String(revision.to_string()));
                stamp_since(v, revision);
            }
            let (last, parent) = segs.split_last().ok_or(EditError::EmptyPath)?;
            let parent = if parent.is_empty() {
                t
            } else {
                walk(t, parent, Some(revision))?
                    .as_table_mut()
                    .ok_or(EditError::WrongShape("parent of `at` must be a table"))?
            };
            parent.insert(last.to_string(), value);
        }
        "replace" => {
            let item = new_item()?;
            let (last, parent) = segs.split_last().ok_or(EditError::EmptyPath)?;
            let arr = walk(t, parent, None)?
                .as_array_mut()
                .ok_or(EditError::WrongShape("parent of `at` must be a named array"))?;
            let slot = arr
                .iter_mut()
                .find(|v| item_name(v) == Some(*last))
                .ok_or_else(|| EditError::NoItem(last.to_string()))?;
            *slot = item;
        }
        "remove" => {
            let (last, parent) = segs.split_last().ok_or(EditError::EmptyPath)?;
            match walk(t, parent, None)? {
                Value::Array(arr) => {
                    let before = arr.len();
                    arr.retain(|v| item_name(v) != Some(*last));
                    if arr.len() == before {
                        return Err(EditError::NoItem(last.to_string()));
                    }
                }
                Value::Table(tb) => {
                    tb.remove(*last).ok_or_else(|| EditError::NoKey(last.to_string()))?;
                }
                _ => return Err(EditError::WrongShape("parent of `at` must be a table or a named array")),
            }
        }
        other => return Err(EditError::UnknownOp(other.to_string())),
    }
    Ok(())
}

/// The `format` key of a TOML data file, if it has one.
pub(crate) fn data_format(text: &str) -> Option<String> {
    let v: toml::Table = toml::from_str(text).ok()?;
    v.get("format")?.as_str().map(str::to_string)
}
