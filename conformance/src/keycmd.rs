//! `mooncake-conformance key build|parse|grammars`: store keys of a vLLM release (or of another family's
//! grammar), from fields or from token ids through vLLM's block-hash chain, and keys read back into fields.
//!
//! Exit codes: 0 = done; 1 = the fields do not make a key of that grammar / the key does not parse (or has
//! several readings); 2 = bad usage.

use serde_json::{json, Value as J};

use hex::encode as hex;
use mooncake_wire::hash::PyInt;
use mooncake_wire::keys::block_hash::{self, HashAlgo, TextRequest};
use mooncake_wire::keys::grammar::{FieldType, FieldValue, Fields, Grammar, KeyParseError, Part};
use mooncake_wire::keys::spec::StoreKeySpec;
use mooncake_wire::keys::vllm_key::{model_name_of, VllmStoreKey};

use crate::outcome::{Outcome, AGREE, DISAGREE, USAGE};

/// Which grammar: a vLLM release's, a named one, or (parse only) any of a family's.
pub struct Target {
    pub release: Option<String>,
    pub grammar: Option<String>,
    pub family: Option<String>,
}

fn grammars(t: &Target) -> Result<Vec<&'static Grammar>, String> {
    let spec = StoreKeySpec::builtin();
    match (&t.release, &t.grammar, &t.family) {
        (Some(r), None, None) => Ok(vec![spec.vllm_grammar(&release_of(r)?).map_err(|e| e.to_string())?]),
        (None, Some(g), None) => {
            Ok(vec![spec.grammar(g).ok_or_else(|| format!("no grammar {g:?}; `key grammars` lists them"))?])
        }
        (None, None, Some(f)) => {
            let v: Vec<_> = spec.grammars.iter().filter(|g| &g.family == f).collect();
            if v.is_empty() {
                Err(format!("no key family {f:?} (vllm, vllm-ascend, lmcache)"))
            } else {
                Ok(v)
            }
        }
        _ => Err("give exactly one of --release, --grammar, --family".into()),
    }
}

/// `--release` in any form the spec's resolver takes, as the release the key tables list.
fn release_of(name: &str) -> Result<String, String> {
    let spec = StoreKeySpec::builtin();
    crate::hashcmd::vllm_release(name, |r| spec.vllm_releases().contains(&r)).map_err(|e| format!("--release {e}"))
}

/// `FIELD=VALUE` typed by the grammar (ints as decimal, tags as a JSON array of `[name, value]` pairs). The same
/// names for `key build` and `key parse --hint`: the grammar's fields, for vLLM keys also the KeyMetadata
/// fields the release's key leaves out, and `model=` for the configured model (its last path component is
/// the key's `model_name`). `what` names the option in errors (`--hint`, or nothing for build's arguments).
fn parse_assignments(g: &Grammar, items: &[String], vllm: bool, what: &str) -> Result<Fields, String> {
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
        let (k, v) = item.split_once('=').ok_or_else(|| format!("{what}`{item}` is not FIELD=VALUE"))?;
        let (k, v) = if k == "model" && !names.iter().any(|n| n == "model") && names.iter().any(|n| n == "model_name") {
            ("model_name", model_name_of(v))
        } else {
            (k, v.to_string())
        };
        if !names.iter().any(|n| n == k) {
            let alias = if names.iter().any(|n| n == "model_name") { ", model (the configured model)" } else { "" };
            return Err(format!("{what}`{k}` is not a field of {} keys (fields: {}{alias})", g.name, names.join(", ")));
        }
        let ty = g.parts.iter().find_map(|p| match p {
            Part::Field { name, ty, .. } if name == k => Some(ty),
            _ => None,
        });
        let int = |v: &str| v.parse().map_err(|_| format!("{what}{k} must be an integer, got `{v}`"));
        let value = match (ty, defaults.get(k)) {
            (Some(FieldType::Int), _) | (None, Some(FieldValue::Int(_))) => FieldValue::Int(int(&v)?),
            (Some(FieldType::Tags), _) => FieldValue::Tags(
                serde_json::from_str(&v).map_err(|e| format!("{what}{k}: a JSON array of [name, value] pairs: {e}"))?,
            ),
            _ => FieldValue::Text(v),
        };
        out.insert(k.to_string(), value);
    }
    Ok(out)
}

/// Options of `key build --tokens`.
pub struct TokenOptions {
    pub tokens: Vec<i64>,
    pub block_size: usize,
    pub hash_block_size: Option<usize>,
    pub algo: String,
    pub pythonhashseed: Option<String>,
    pub lora: Option<(String, String)>,
    pub cache_salt: Option<String>,
}

fn fields_json(f: &Fields) -> J {
    J::Object(f.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or(J::Null))).collect())
}

/// `key build`.
pub fn build(target: &Target, assignments: &[String], tokens: Option<TokenOptions>, json_out: bool) -> Outcome {
    let mut o = Outcome::default();
    let g = match grammars(target) {
        Ok(g) if g.len() == 1 => g[0],
        Ok(_) => return Outcome::usage("key build needs --release or --grammar, not --family"),
        Err(e) => return Outcome::usage(e),
    };
    if assignments.is_empty() && tokens.is_none() {
        return Outcome::usage(format!(
            "nothing to build: give FIELD=VALUE pairs (the fields of {}: `key grammars` shows them) or --tokens",
            g.name
        ));
    }
    let mut fields = match parse_assignments(g, assignments, target.release.is_some(), "") {
        Ok(f) => f,
        Err(e) => return Outcome::usage(e),
    };
    // vLLM keys: unspecified parts take KeyMetadata's defaults.
    if let Some(release) = &target.release {
        if tokens.is_none()
            && !fields.contains_key("chunk_hash")
            && g.parts.iter().any(|p| matches!(p, Part::Field { name, .. } if name == "chunk_hash"))
        {
            return Outcome::usage(
                "no chunk_hash: give chunk_hash=HEX, or --tokens to hash token ids into one key per block",
            );
        }
        let mut base = VllmStoreKey::default().to_fields();
        for (k, v) in fields {
            base.insert(k, v);
        }
        fields = base;
        if let Some(t) = tokens {
            let release = match release_of(release) {
                Ok(r) => r,
                Err(e) => return Outcome::usage(e),
            };
            return build_from_tokens(&release, g, fields, t, json_out);
        }
    } else if tokens.is_some() {
        return Outcome::usage("--tokens needs --release (the block-hash chain is vLLM's)");
    }
    match g.render(&fields) {
        Ok(key) => {
            if json_out {
                o.json(&json!({ "grammar": g.name, "key": key, "fields": fields_json(&fields) }));
            } else {
                o.say(&key);
            }
            o.done(AGREE)
        }
        Err(e) => {
            o.error(e.to_string());
            o.done(USAGE)
        }
    }
}

fn build_from_tokens(release: &str, g: &Grammar, fields: Fields, t: TokenOptions, json_out: bool) -> Outcome {
    let mut o = Outcome::default();
    let spec = StoreKeySpec::builtin();
    let run = || -> Result<Vec<J>, String> {
        let rules = spec.block_hash_rules(release).map_err(|e| e.to_string())?;
        let algo = HashAlgo::parse(&t.algo).map_err(|e| e.to_string())?;
        let seed = rules.seed(t.pythonhashseed.as_deref()).map_err(|e| e.to_string())?;
        let none_hash = block_hash::none_hash(algo, seed).map_err(|e| e.to_string())?;
        let hbs = t.hash_block_size.unwrap_or(t.block_size);
        if hbs == 0 || t.block_size == 0 || !t.block_size.is_multiple_of(hbs) {
            return Err(format!(
                "block size {} must be a positive multiple of the hash block size {hbs}",
                t.block_size
            ));
        }
        let rule = &spec.chunk_hash_rule(release).map_err(|e| e.to_string())?.rule;
        let hash_size = if rule == "block" { t.block_size } else { hbs };
        let req = TextRequest {
            token_ids: t.tokens.iter().map(|x| PyInt::from(*x)).collect(),
            lora: t.lora.clone(),
            cache_salt: t.cache_salt.clone(),
        };
        let blocks =
            block_hash::request_block_hashes(rules, algo, &none_hash, hash_size, &req).map_err(|e| e.to_string())?;
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
            out.push(
                json!({ "start": i * t.block_size, "end": (i + 1) * t.block_size, "hash": hex(&hash), "key": key }),
            );
        }
        Ok(out)
    };
    match run() {
        Ok(keys) => {
            if json_out {
                o.json(&json!({ "release": release, "grammar": g.name, "keys": keys }));
            } else {
                for k in &keys {
                    o.say(k["key"].as_str().unwrap_or(""));
                }
            }
            o.done(AGREE)
        }
        Err(e) => {
            o.error(e.to_string());
            o.done(USAGE)
        }
    }
}

/// `key parse`: the key's fields under the grammar(s); with a family, every grammar of it is tried.
pub fn parse(target: &Target, key: &str, hints: &[String], json_out: bool) -> Outcome {
    let mut o = Outcome::default();
    let gs = match grammars(target) {
        Ok(g) => g,
        Err(e) => return Outcome::usage(e),
    };
    let mut found = vec![];
    let mut errors = vec![];
    for g in gs {
        let h = match parse_assignments(g, hints, g.family == "vllm", "--hint ") {
            Ok(h) => h,
            Err(e) => return Outcome::usage(e),
        };
        match g.parse(key, &h) {
            Ok(f) => found.push((g, f)),
            Err(e @ KeyParseError::Ambiguous { .. }) => errors.push((g, e, true)),
            Err(e) => errors.push((g, e, false)),
        }
    }
    let ok = found.len() == 1 && !errors.iter().any(|(_, _, ambiguous)| *ambiguous);
    if json_out {
        o.json(&json!({
            "key": key,
            "ok": ok,
            "readings": found.iter().map(|(g, f)| json!({ "grammar": g.name, "releases": g.releases, "fields": fields_json(f) })).collect::<Vec<_>>(),
            "errors": errors.iter().map(|(g, e, _)| json!({ "grammar": g.name, "error": e.to_string() })).collect::<Vec<_>>(),
        }));
    } else {
        for (g, f) in &found {
            o.say(format!(
                "{} ({})",
                g.name,
                if g.releases.is_empty() { g.source.clone() } else { format!("vLLM {}", g.releases.join(", ")) }
            ));
            for (k, v) in f {
                o.say(format!("  {k} = {v}"));
            }
        }
        if !ok {
            for (_, e, _) in &errors {
                o.say(format!("{e}"));
            }
            if found.len() > 1 {
                o.say(format!("the key fits {} grammars", found.len()));
            }
        }
    }
    o.done(if ok { AGREE } else { DISAGREE })
}

/// `key grammars`: every grammar, its releases and its key shape.
pub fn list(json_out: bool) -> Outcome {
    let mut o = Outcome::default();
    let spec = StoreKeySpec::builtin();
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
        o.json(&J::Array(spec.grammars.iter().map(|g| json!({ "name": g.name, "family": g.family, "releases": g.releases, "shape": shape(g), "source": g.source })).collect()));
    } else {
        for g in &spec.grammars {
            let rel = if g.releases.is_empty() { String::new() } else { format!(" (vLLM {})", g.releases.join(", ")) };
            o.say(format!("{:<26} {}{rel}", g.name, shape(g)));
        }
    }
    o.done(AGREE)
}
