//! The store-key parser (`mooncake_wire::keys`): every grammar of `spec/store-keys/`, and vLLM's typed key of
//! each release. Input: byte 0 picks the grammar (`% grammars`) and the vLLM release whose typed key is checked (the rest), byte 1 says how hints are used, the rest is the key (UTF-8,
//! invalid sequences replaced).
//!
//! Invariants:
//! * a key parses only within the limits of `limits.rs` (`TooLong`, `TooManySeparators` exactly when over);
//! * a single reading renders back to exactly the key (and, with a prefix, the key starts with it);
//! * an ambiguous key lists 2..=MAX_STORE_KEY_READINGS+1 distinct readings, each of which renders back to the
//!   key, and giving any one reading's fields as hints parses to exactly that reading;
//! * a refusal says how far the key matched, never past its end;
//! * vLLM's typed key of a release agrees with its grammar: a parsed key builds back to the same text.

use mooncake_wire::keys::grammar::{Fields, KeyParseError};
use mooncake_wire::keys::spec::StoreKeySpec;
use mooncake_wire::keys::vllm_key::{KeyHints, VllmStoreKey};
use mooncake_wire::limits::{MAX_STORE_KEY_BYTES, MAX_STORE_KEY_READINGS, MAX_STORE_KEY_SEPARATORS};

/// The target body: runs the input through the code under test and checks the invariants above; panics when one
/// breaks, ignores an input it cannot use.
pub fn run(data: &[u8]) {
    let [g, flags, key @ ..] = data else { return };
    let spec = StoreKeySpec::builtin();
    let grammar = &spec.grammars[*g as usize % spec.grammars.len()];
    let key = String::from_utf8_lossy(key);
    let name = &grammar.name;
    let seps = key.matches(grammar.separator.as_str()).count();
    let hints = if flags & 1 == 1 { first_field_hint(grammar, &key) } else { Fields::new() };
    match grammar.parse(&key, &hints) {
        Err(KeyParseError::TooLong { len }) => assert!(len == key.len() && len > MAX_STORE_KEY_BYTES),
        Err(KeyParseError::TooManySeparators { count }) => {
            assert!(count == seps && count > MAX_STORE_KEY_SEPARATORS && key.len() <= MAX_STORE_KEY_BYTES)
        }
        Err(KeyParseError::NoMatch { matched, .. }) => {
            assert!(matched <= key.len(), "{name}: matched {matched} of {} bytes", key.len())
        }
        Ok(fields) => {
            within_limits(&key, seps);
            assert_renders(grammar, &fields, &key);
            for (k, v) in &hints {
                assert_eq!(fields.get(k), Some(v), "{name}: a hint must hold in the reading");
            }
        }
        Err(KeyParseError::Ambiguous { readings, .. }) => {
            within_limits(&key, seps);
            assert!(
                readings.len() >= 2 && readings.len() <= MAX_STORE_KEY_READINGS + 1,
                "{name}: {} readings",
                readings.len()
            );
            for (i, r) in readings.iter().enumerate() {
                assert!(!readings[..i].contains(r), "{name}: the same reading twice");
                assert_renders(grammar, r, &key);
            }
            let r = &readings[*flags as usize / 2 % readings.len()];
            assert_eq!(
                grammar.parse(&key, r).as_ref(),
                Ok(r),
                "{name}: a reading given as hints must be the one parsed"
            );
        }
    }
    // One release per input (the selector byte's high part picks it; the fuzzer explores the others): parsing
    // the key for every release would multiply the cost of each run by their number.
    if grammar.family == "vllm" && !grammar.releases.is_empty() {
        let release = &grammar.releases[*g as usize / spec.grammars.len() % grammar.releases.len()];
        if let Ok(k) = VllmStoreKey::parse(&key, release, &KeyHints::default()) {
            assert_eq!(
                k.build(release).as_deref(),
                Ok(&*key),
                "vLLM {release}: a parsed key must build back to itself"
            );
        }
    }
}

fn within_limits(key: &str, seps: usize) {
    assert!(key.len() <= MAX_STORE_KEY_BYTES && seps <= MAX_STORE_KEY_SEPARATORS, "a key over the limits was parsed");
}

fn assert_renders(g: &mooncake_wire::keys::grammar::Grammar, fields: &Fields, key: &str) {
    let rendered = g
        .render(fields)
        .unwrap_or_else(|e| panic!("{}: a parsed reading must render: {e}\n{key:?} {fields:?}", g.name));
    assert_eq!(rendered, key, "{}: reading {fields:?} renders to another key", g.name);
    if g.prefix_len.is_some() {
        let prefix = g.render_prefix(fields).unwrap_or_else(|e| panic!("{}: prefix of a parsed reading: {e}", g.name));
        assert!(key.starts_with(&prefix), "{}: key {key:?} does not start with its prefix {prefix:?}", g.name);
    }
}

/// A hint for the grammar's first free-text field: the key's text up to the first separator.
fn first_field_hint(g: &mooncake_wire::keys::grammar::Grammar, key: &str) -> Fields {
    use mooncake_wire::keys::grammar::{FieldType, FieldValue, Part};
    let mut f = Fields::new();
    if let Some(Part::Field { name, ty: FieldType::Str | FieldType::Word, .. }) = g.parts.first() {
        let text = key.split(g.separator.as_str()).next().unwrap_or("");
        f.insert(name.clone(), FieldValue::Text(text.to_string()));
    }
    f
}
