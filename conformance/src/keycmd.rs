//! `mooncake-conformance key build|parse|grammars`: store keys of a vLLM release (or of another family's
//! grammar), from fields or from token ids through vLLM's block-hash chain, and keys read back into fields.
//! Each command returns its typed result (or a [`CmdError`]: bad usage or input); the writers write a result
//! as text or JSON to any `impl Write`.

use std::io::{self, Write};

use serde_json::{json, Value as J};

use hex::encode as hex;
use mooncake_wire::hash::PyInt;
use mooncake_wire::keys::block_hash::{self, HashAlgo, TextRequest};
use mooncake_wire::keys::grammar::{FieldType, FieldValue, Fields, Grammar, KeyParseError, Part};
use mooncake_wire::keys::spec::StoreKeySpec;
use mooncake_wire::keys::vllm_key::{model_name_of, VllmStoreKey};

use crate::outcome::CmdError;
use crate::report::write_json;

/// Which grammar: a vLLM release's, a named one, or (parse only) any of a family's.
pub struct Target {
    /// A vLLM release: its MooncakeStoreConnector key grammar.
    pub release: Option<String>,
    /// A grammar by name (`ascend-store-key`, `lmcache-key`, ...).
    pub grammar: Option<String>,
    /// Every grammar of a family (`vllm`, `vllm-ascend`, `lmcache`); parsing only.
    pub family: Option<String>,
}

fn grammars(t: &Target) -> Result<Vec<&'static Grammar>, CmdError> {
    let spec = StoreKeySpec::builtin();
    match (&t.release, &t.grammar, &t.family) {
        (Some(r), None, None) => Ok(vec![spec.vllm_grammar(&release_of(r)?)?]),
        (None, Some(g), None) => Ok(vec![spec
            .grammar(g)
            .ok_or_else(|| CmdError::usage(format!("no grammar {g:?}; `key grammars` lists them")))?]),
        (None, None, Some(f)) => {
            let v: Vec<_> = spec.grammars.iter().filter(|g| &g.family == f).collect();
            if v.is_empty() {
                Err(CmdError::usage(format!("no key family {f:?} (vllm, vllm-ascend, lmcache)")))
            } else {
                Ok(v)
            }
        }
        _ => Err(CmdError::usage("give exactly one of --release, --grammar, --family")),
    }
}

/// `--release` in any form the spec's resolver takes, as the release the key tables list.
fn release_of(name: &str) -> Result<String, CmdError> {
    let spec = StoreKeySpec::builtin();
    crate::hashcmd::vllm_release(name, |r| spec.vllm_releases().contains(&r))
        .map_err(|e| CmdError::usage(format!("--release {e}")))
}

/// `FIELD=VALUE` typed by the grammar (ints as decimal, tags as a JSON array of `[name, value]` pairs). The same
/// names for `key build` and `key parse --hint`: the grammar's fields, for vLLM keys also the KeyMetadata
/// fields the release's key leaves out, and `model=` for the configured model (its last path component is
/// the key's `model_name`). `what` names the option in errors (`--hint`, or nothing for build's arguments).
fn parse_assignments(g: &Grammar, items: &[String], vllm: bool, what: &str) -> Result<Fields, AssignmentError> {
    let defaults = if vllm { VllmStoreKey::default().to_fields() } else { Fields::new() };
    let mut names: Vec<String> = g
        .parts
        .iter()
        .filter_map(|p| if let Part::Field { name, .. } = p { Some(name.clone()) } else { None })
        .collect();
    for k in defaults.keys() {
        if !names.contains(k) {
            names.push(k.clone());
        }
    }
    let mut out = Fields::new();
    for item in items {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| AssignmentError::NotAssignment { what: what.into(), item: item.clone() })?;
        let (k, v) = if k == "model" && !names.iter().any(|n| n == "model") && names.iter().any(|n| n == "model_name") {
            ("model_name", model_name_of(v))
        } else {
            (k, v.to_string())
        };
        if !names.iter().any(|n| n == k) {
            let alias = if names.iter().any(|n| n == "model_name") { ", model (the configured model)" } else { "" };
            return Err(AssignmentError::UnknownField {
                what: what.into(),
                field: k.into(),
                grammar: g.name.clone(),
                fields: format!("{}{alias}", names.join(", ")),
            });
        }
        let ty = g.parts.iter().find_map(|p| match p {
            Part::Field { name, ty, .. } if name == k => Some(ty),
            _ => None,
        });
        let int = |v: &str| {
            v.parse().map_err(|_| AssignmentError::NotInteger { what: what.into(), field: k.into(), value: v.into() })
        };
        let value = match (ty, defaults.get(k)) {
            (Some(FieldType::Int), _) | (None, Some(FieldValue::Int(_))) => FieldValue::Int(int(&v)?),
            (Some(FieldType::Tags), _) => {
                FieldValue::Tags(serde_json::from_str(&v).map_err(|source| AssignmentError::NotTags {
                    what: what.into(),
                    field: k.into(),
                    source,
                })?)
            }
            _ => FieldValue::Text(v),
        };
        out.insert(k.to_string(), value);
    }
    Ok(out)
}

/// Why a `FIELD=VALUE` argument (of `key build`, or `key parse --hint`) is refused; `what` names the option
/// (`--hint `, or nothing for build's arguments).
#[derive(Debug, thiserror::Error)]
pub enum AssignmentError {
    /// No `=` in it.
    #[error("{what}`{item}` is not FIELD=VALUE")]
    NotAssignment {
        /// The option, as a prefix of the text.
        what: String,
        /// The argument.
        item: String,
    },
    /// The grammar has no such field.
    #[error("{what}`{field}` is not a field of {grammar} keys (fields: {fields})")]
    UnknownField {
        /// The option, as a prefix of the text.
        what: String,
        /// The field named.
        field: String,
        /// The grammar's name.
        grammar: String,
        /// The fields it has, listed.
        fields: String,
    },
    /// An integer field's value is not one.
    #[error("{what}{field} must be an integer, got `{value}`")]
    NotInteger {
        /// The option, as a prefix of the text.
        what: String,
        /// The field.
        field: String,
        /// The value given.
        value: String,
    },
    /// A tags field's value is not a JSON array of pairs.
    #[error("{what}{field}: a JSON array of [name, value] pairs: {source}")]
    NotTags {
        /// The option, as a prefix of the text.
        what: String,
        /// The field.
        field: String,
        /// The JSON parser's complaint.
        source: serde_json::Error,
    },
}

/// A refused `FIELD=VALUE` is bad usage.
impl From<AssignmentError> for CmdError {
    fn from(e: AssignmentError) -> CmdError {
        CmdError::usage(e.to_string())
    }
}

/// Options of `key build --tokens`.
pub struct TokenOptions {
    /// The request's token ids; one key per full block of them.
    pub tokens: Vec<i64>,
    /// Tokens per block (vLLM's `--block-size`).
    pub block_size: usize,
    /// The hash granularity when smaller than the block (vLLM's `hash_block_size`).
    pub hash_block_size: Option<usize>,
    /// vLLM's `--prefix-caching-hash-algo`: `sha256` or `sha256_cbor`.
    pub algo: String,
    /// `PYTHONHASHSEED` of the vLLM processes; `None`: the release's default seed, if it has one.
    pub pythonhashseed: Option<String>,
    /// The request's LoRA adapter (name, path): part of the block hash.
    pub lora: Option<(String, String)>,
    /// The request's `cache_salt`: part of the first block's hash.
    pub cache_salt: Option<String>,
}

fn fields_json(f: &Fields) -> J {
    J::Object(f.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or(J::Null))).collect())
}

/// What `key build` built: one key from fields, or one key per full block of token ids.
#[derive(Debug, Clone)]
pub enum Built {
    /// One key from its fields.
    Key {
        /// The grammar's name.
        grammar: String,
        /// The key.
        key: String,
        /// The fields it was built from, as the grammar reads them.
        fields: Fields,
    },
    /// Per block: `{start, end, hash, key}`.
    Keys {
        /// The vLLM release whose hashing was used.
        release: String,
        /// The grammar's name.
        grammar: String,
        /// One object per full block.
        keys: Vec<J>,
    },
}

/// `key build`.
pub fn build(target: &Target, assignments: &[String], tokens: Option<TokenOptions>) -> Result<Built, CmdError> {
    let g = match grammars(target)?.as_slice() {
        [g] => *g,
        _ => return Err(CmdError::usage("key build needs --release or --grammar, not --family")),
    };
    if assignments.is_empty() && tokens.is_none() {
        return Err(CmdError::usage(format!(
            "nothing to build: give FIELD=VALUE pairs (the fields of {}: `key grammars` shows them) or --tokens",
            g.name
        )));
    }
    let mut fields = parse_assignments(g, assignments, target.release.is_some(), "")?;
    // vLLM keys: unspecified parts take KeyMetadata's defaults.
    if let Some(release) = &target.release {
        if tokens.is_none()
            && !fields.contains_key("chunk_hash")
            && g.parts.iter().any(|p| matches!(p, Part::Field { name, .. } if name == "chunk_hash"))
        {
            return Err(CmdError::usage(
                "no chunk_hash: give chunk_hash=HEX, or --tokens to hash token ids into one key per block",
            ));
        }
        let mut base = VllmStoreKey::default().to_fields();
        for (k, v) in fields {
            base.insert(k, v);
        }
        fields = base;
        if let Some(t) = tokens {
            let release = release_of(release)?;
            let keys = build_from_tokens(&release, g, fields, t)?;
            return Ok(Built::Keys { release, grammar: g.name.clone(), keys });
        }
    } else if tokens.is_some() {
        return Err(CmdError::usage("--tokens needs --release (the block-hash chain is vLLM's)"));
    }
    let key = g.render(&fields).map_err(|e| CmdError::usage(e.to_string()))?;
    Ok(Built::Key { grammar: g.name.clone(), key, fields })
}

/// Writes what `key build` built: the key(s) one a line, or JSON.
pub fn write_built(w: &mut impl Write, b: &Built, json_out: bool) -> io::Result<()> {
    match (b, json_out) {
        (Built::Key { grammar, key, fields }, true) => {
            write_json(w, &json!({ "grammar": grammar, "key": key, "fields": fields_json(fields) }))
        }
        (Built::Key { key, .. }, false) => writeln!(w, "{key}"),
        (Built::Keys { release, grammar, keys }, true) => {
            write_json(w, &json!({ "release": release, "grammar": grammar, "keys": keys }))
        }
        (Built::Keys { keys, .. }, false) => {
            for k in keys {
                writeln!(w, "{}", k["key"].as_str().unwrap_or(""))?;
            }
            Ok(())
        }
    }
}

fn build_from_tokens(release: &str, g: &Grammar, fields: Fields, t: TokenOptions) -> Result<Vec<J>, CmdError> {
    let spec = StoreKeySpec::builtin();
    let rules = spec.block_hash_rules(release)?;
    let algo = HashAlgo::parse(&t.algo)?;
    let seed = rules.seed(t.pythonhashseed.as_deref())?;
    let none_hash = block_hash::none_hash(algo, seed)?;
    let hbs = t.hash_block_size.unwrap_or(t.block_size);
    if hbs == 0 || t.block_size == 0 || !t.block_size.is_multiple_of(hbs) {
        return Err(
            format!("block size {} must be a positive multiple of the hash block size {hbs}", t.block_size).into()
        );
    }
    let rule = &spec.chunk_hash_rule(release)?.rule;
    let hash_size = if rule == "block" { t.block_size } else { hbs };
    let req = TextRequest {
        token_ids: t.tokens.iter().map(|x| PyInt::from(*x)).collect(),
        lora: t.lora.clone(),
        cache_salt: t.cache_salt.clone(),
    };
    let blocks = block_hash::request_block_hashes(rules, algo, &none_hash, hash_size, &req)?;
    let per_chunk = t.block_size / hash_size;
    let mut out = vec![];
    for (i, chunk) in blocks.chunks(per_chunk).enumerate() {
        if chunk.len() < per_chunk {
            break;
        }
        let hash: Vec<u8> = match rule.as_str() {
            "concat" => chunk.iter().flat_map(|b| b.hashed.hash).collect(),
            _ => chunk.last().expect("non-empty").hashed.hash.to_vec(),
        };
        let mut f = fields.clone();
        f.insert("chunk_hash".into(), FieldValue::Text(hex(&hash)));
        let key = g.render(&f).map_err(|e| e.to_string())?;
        out.push(json!({ "start": i * t.block_size, "end": (i + 1) * t.block_size, "hash": hex(&hash), "key": key }));
    }
    Ok(out)
}

/// What `key parse` read: the readings under each grammar tried, and the grammars the key does not fit.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The key as given.
    pub key: String,
    /// Each grammar the key fits, with the fields it reads.
    pub readings: Vec<(&'static Grammar, Fields)>,
    /// Per grammar the key does not fit: the error, and whether it is that the key has several readings.
    pub errors: Vec<(&'static Grammar, KeyParseError, bool)>,
}

impl Parsed {
    /// One reading, and no grammar with several.
    pub fn ok(&self) -> bool {
        self.readings.len() == 1 && !self.errors.iter().any(|(_, _, ambiguous)| *ambiguous)
    }
}

/// `key parse`: the key's fields under the grammar(s); with a family, every grammar of it is tried.
pub fn parse(target: &Target, key: &str, hints: &[String]) -> Result<Parsed, CmdError> {
    let mut p = Parsed { key: key.to_string(), readings: vec![], errors: vec![] };
    for g in grammars(target)? {
        let h = parse_assignments(g, hints, g.family == "vllm", "--hint ")?;
        match g.parse(key, &h) {
            Ok(f) => p.readings.push((g, f)),
            Err(e @ KeyParseError::Ambiguous { .. }) => p.errors.push((g, e, true)),
            Err(e) => p.errors.push((g, e, false)),
        }
    }
    Ok(p)
}

/// Writes what `key parse` read, as text or JSON.
pub fn write_parsed(w: &mut impl Write, p: &Parsed, json_out: bool) -> io::Result<()> {
    let ok = p.ok();
    if json_out {
        return write_json(
            w,
            &json!({
                "key": p.key,
                "ok": ok,
                "readings": p.readings.iter().map(|(g, f)| json!({ "grammar": g.name, "releases": g.releases, "fields": fields_json(f) })).collect::<Vec<_>>(),
                "errors": p.errors.iter().map(|(g, e, _)| json!({ "grammar": g.name, "error": e.to_string() })).collect::<Vec<_>>(),
            }),
        );
    }
    for (g, f) in &p.readings {
        let from = if g.releases.is_empty() { g.source.clone() } else { format!("vLLM {}", g.releases.join(", ")) };
        writeln!(w, "{} ({from})", g.name)?;
        for (k, v) in f {
            writeln!(w, "  {k} = {v}")?;
        }
    }
    if !ok {
        for (_, e, _) in &p.errors {
            writeln!(w, "{e}")?;
        }
        if p.readings.len() > 1 {
            writeln!(w, "the key fits {} grammars", p.readings.len())?;
        }
    }
    Ok(())
}

/// `key grammars`: every grammar of spec/store-keys/.
pub fn grammar_list() -> &'static [Grammar] {
    &StoreKeySpec::builtin().grammars
}

/// Writes `key grammars`: each grammar, its releases and its key shape, as text or JSON.
pub fn write_grammars(w: &mut impl Write, grammars: &[Grammar], json_out: bool) -> io::Result<()> {
    let shape = |g: &Grammar| -> String {
        g.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.clone(),
                Part::Field { name, omit_empty: true, suffix, .. } => format!("[{{{name}}}{suffix}]"),
                Part::Field { name, ty: FieldType::Tags, .. } => format!("[@{{{name}}}…]"),
                Part::Field { name, .. } => format!("{{{name}}}"),
            })
            .collect()
    };
    if json_out {
        return write_json(
            w,
            &J::Array(grammars.iter().map(|g| json!({ "name": g.name, "family": g.family, "releases": g.releases, "shape": shape(g), "source": g.source })).collect()),
        );
    }
    for g in grammars {
        let rel = if g.releases.is_empty() { String::new() } else { format!(" (vLLM {})", g.releases.join(", ")) };
        writeln!(w, "{:<26} {}{rel}", g.name, shape(g))?;
    }
    Ok(())
}
