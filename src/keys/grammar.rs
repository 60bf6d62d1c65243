//! Key grammars: a key is a sequence of literal texts and typed fields, read from `spec/store-keys/*.toml`
//! (format `mooncake-store-keys/1`, `spec/README.md` "Store keys"). One grammar both builds a key
//! ([`Grammar::render`]) and parses it ([`Grammar::parse`]), so the parts a parser expects are, by
//! construction, the parts the builder writes — the bug class of a parser demanding five parts for a
//! four-part key cannot occur.
//!
//! Parsing is exact: every reading of the key that fits the grammar is collected. Free-text fields (a model
//! name, a cache prefix) may contain the separator, so a key can have more than one reading; the parser then
//! returns [`KeyParseError::Ambiguous`] unless hints (known field values, e.g. the deployment's
//! `cache_prefix`) leave exactly one.

use std::fmt;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::limits::{MAX_STORE_KEY_BYTES, MAX_STORE_KEY_READINGS, MAX_STORE_KEY_SEPARATORS};
use crate::spec::SpecError;

/// A field's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FieldValue {
    /// An integer part.
    Int(i64),
    /// A text part (hex digests included).
    Text(String),
    /// LMCache tags: `(name, value)` pairs written `@name%value`.
    Tags(Vec<(String, String)>),
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::Int(i) => write!(f, "{i}"),
            FieldValue::Text(s) => write!(f, "{s:?}"),
            FieldValue::Tags(t) => write!(f, "{t:?}"),
        }
    }
}

/// Field values by name, in grammar order.
pub type Fields = IndexMap<String, FieldValue>;

/// The type of a field (`type` in the data file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldType {
    /// A Python int in decimal: `-?[0-9]+` without leading zeros (`f"{int}"`).
    Int,
    /// Lowercase hex digits, at least one (`bytes.hex()`).
    Hex,
    /// Lowercase hex with an optional `-` (`f"{int:x}"` or `bytes.hex()`).
    SignedHex,
    /// Any text, the separator included; must be followed by the separator or end the key.
    Str,
    /// Text without the separator.
    Word,
    /// One of a named set of words.
    Choice(Vec<String>),
    /// One of a named list of forms with `{int}`, `{hexN}` and `{<set>}` holes; the value is the matched text.
    Pattern(Vec<Vec<PatternItem>>),
    /// Zero or more `@name%value` items (name without `@` and `%`, value without `@`).
    Tags,
}

/// One piece of a [`FieldType::Pattern`] form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternItem {
    /// Literal text.
    Text(String),
    /// An `{int}` hole: a Python int in decimal.
    Int,
    /// A `{<set>}` hole: one of the set's words.
    Set(Vec<String>),
    /// A `{hexN}` hole: exactly N lowercase hex digits (`hexdigest()[:N]`).
    Hex(usize),
}

/// One part of a key grammar, in key order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// Literal text (the separator between fields is not a part).
    Text(String),
    /// A field.
    Field {
        /// The field's name (`model_name`, `tp_rank`).
        name: String,
        /// What text the field holds.
        ty: FieldType,
        /// Written only when not empty (then followed by `suffix`).
        omit_empty: bool,
        /// Text written after a non-empty `omit_empty` field.
        suffix: String,
    },
}

/// A compiled grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grammar {
    /// The grammar's name (`vllm-0.30`, `lmcache-key`).
    pub name: String,
    /// The file's family (`vllm`, `vllm-ascend`, `lmcache`).
    pub family: String,
    /// The releases that write keys with this grammar (vLLM only).
    pub releases: Vec<String>,
    /// Where the format was read (release and file).
    pub source: String,
    /// The text between parts (`@`).
    pub separator: String,
    /// The parts, in key order.
    pub parts: Vec<Part>,
    /// Number of leading parts that form the key prefix (`PoolKey.build_prefix`), when the data marks one.
    pub prefix_len: Option<usize>,
}

/// Building a key failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyBuildError {
    /// A part of the grammar has no value.
    MissingField {
        /// The grammar.
        grammar: String,
        /// The part.
        field: String,
    },
    /// A field the grammar does not have holds a non-default value.
    NotInGrammar {
        /// The grammar.
        grammar: String,
        /// The field.
        field: String,
        /// Its value, as displayed.
        value: String,
    },
    /// A value the part's type cannot write.
    WrongType {
        /// The grammar.
        grammar: String,
        /// The part.
        field: String,
        /// What the part holds, in words.
        expected: String,
        /// The value, as displayed.
        value: String,
    },
}

impl fmt::Display for KeyBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyBuildError::MissingField { grammar, field } => write!(f, "{grammar}: field `{field}` is missing"),
            KeyBuildError::NotInGrammar { grammar, field, value } => {
                write!(f, "{grammar}: keys have no `{field}` part, but it is {value}")
            }
            KeyBuildError::WrongType { grammar, field, expected, value } => {
                write!(f, "{grammar}: `{field}` must be {expected}, got {value}")
            }
        }
    }
}
impl std::error::Error for KeyBuildError {}

/// Parsing a key failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyParseError {
    /// The key is longer than [`MAX_STORE_KEY_BYTES`].
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The key has more separators than [`MAX_STORE_KEY_SEPARATORS`].
    TooManySeparators {
        /// How many.
        count: usize,
    },
    /// No reading fits; `matched` is the longest prefix of the key some reading accounted for.
    /// `matched` bytes fit the grammar up to the part `expected`; `found` is what the key has there (up to
    /// its next separator).
    NoMatch {
        /// The grammar.
        grammar: String,
        /// Bytes of the key some reading accounted for.
        matched: usize,
        /// The part expected there.
        expected: String,
        /// What the key has there.
        found: String,
    },
    /// More than one reading fits (after hints); each candidate is listed.
    Ambiguous {
        /// The grammar.
        grammar: String,
        /// Every reading that fits.
        readings: Vec<Fields>,
    },
}

impl fmt::Display for KeyParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyParseError::TooLong { len } => write!(f, "key of {len} bytes is longer than {MAX_STORE_KEY_BYTES}"),
            KeyParseError::TooManySeparators { count } => {
                write!(f, "key has {count} separators, more than {MAX_STORE_KEY_SEPARATORS}")
            }
            KeyParseError::NoMatch { grammar, matched, expected, found } => {
                write!(f, "not a {grammar} key: at byte {matched} expected {expected}")?;
                match found.as_str() {
                    "" => write!(f, ", found the end of the key"),
                    t => write!(f, ", found `{t}`"),
                }
            }
            KeyParseError::Ambiguous { grammar, readings } => {
                write!(f, "{grammar}: the key has {} readings (give the known fields as hints):", readings.len())?;
                for r in readings {
                    let shown: Vec<String> = r.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    write!(f, " [{}]", shown.join(", "))?;
                }
                Ok(())
            }
        }
    }
}
impl std::error::Error for KeyParseError {}

fn is_hex(s: &str, signed: bool) -> bool {
    let body = if signed { s.strip_prefix('-').unwrap_or(s) } else { s };
    !body.is_empty() && body.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn canonical_int(s: &str) -> Option<i64> {
    let body = s.strip_prefix('-').unwrap_or(s);
    if body.is_empty()
        || !body.bytes().all(|b| b.is_ascii_digit())
        || (body.len() > 1 && body.starts_with('0'))
        || s == "-0"
    {
        return None;
    }
    s.parse().ok()
}

impl Grammar {
    fn type_error(&self, field: &str, expected: &str, value: &FieldValue) -> KeyBuildError {
        KeyBuildError::WrongType {
            grammar: self.name.clone(),
            field: field.into(),
            expected: expected.into(),
            value: value.to_string(),
        }
    }

    /// The key for these field values. Fields the grammar does not have must be absent or hold their
    /// default (`0`, `""`, no tags).
    pub fn render(&self, fields: &Fields) -> Result<String, KeyBuildError> {
        self.render_parts(fields, self.parts.len())
    }

    /// The key prefix (`PoolKey.build_prefix`): the parts before the one the data marks `prefix_end`.
    pub fn render_prefix(&self, fields: &Fields) -> Result<String, KeyBuildError> {
        self.render_parts(fields, self.prefix_len.unwrap_or(self.parts.len()))
    }

    fn render_parts(&self, fields: &Fields, upto: usize) -> Result<String, KeyBuildError> {
        for (name, v) in fields {
            let known = self.parts.iter().any(|p| matches!(p, Part::Field { name: n, .. } if n == name));
            let default = matches!(v, FieldValue::Int(0))
                || matches!(v, FieldValue::Text(t) if t.is_empty())
                || matches!(v, FieldValue::Tags(t) if t.is_empty());
            if !known && !default {
                return Err(KeyBuildError::NotInGrammar {
                    grammar: self.name.clone(),
                    field: name.clone(),
                    value: v.to_string(),
                });
            }
        }
        let mut out = String::new();
        for part in &self.parts[..upto] {
            let (name, ty, omit_empty, suffix) = match part {
                Part::Text(t) => {
                    out.push_str(t);
                    continue;
                }
                Part::Field { name, ty, omit_empty, suffix } => (name, ty, *omit_empty, suffix),
            };
            let v = fields
                .get(name)
                .ok_or_else(|| KeyBuildError::MissingField { grammar: self.name.clone(), field: name.clone() })?;
            match (ty, v) {
                (FieldType::Int, FieldValue::Int(i)) => out.push_str(&i.to_string()),
                (FieldType::Int, _) => return Err(self.type_error(name, "an integer", v)),
                (FieldType::Tags, FieldValue::Tags(tags)) => {
                    for (k, val) in tags {
                        if k.contains(['%'])
                            || k.contains(self.separator.as_str())
                            || val.contains(self.separator.as_str())
                        {
                            return Err(self.type_error(
                                name,
                                "tags whose names hold no '%' or separator and values no separator",
                                v,
                            ));
                        }
                        out.push_str(&format!("{}{k}%{val}", self.separator));
                    }
                }
                (FieldType::Tags, _) => return Err(self.type_error(name, "a list of (name, value) tags", v)),
                (_, FieldValue::Text(t)) => {
                    let ok = match ty {
                        FieldType::Hex => is_hex(t, false),
                        FieldType::SignedHex => is_hex(t, true),
                        FieldType::Str => true,
                        FieldType::Word => !t.contains(self.separator.as_str()),
                        FieldType::Choice(set) => set.contains(t),
                        FieldType::Pattern(_) => self.match_field(ty, t, 0, None).contains(&t.len()),
                        FieldType::Int | FieldType::Tags => unreachable!("handled above"),
                    };
                    if !ok {
                        return Err(self.type_error(name, &describe(ty, &self.separator), v));
                    }
                    if !(omit_empty && t.is_empty()) {
                        out.push_str(t);
                        if omit_empty {
                            out.push_str(suffix);
                        }
                    }
                }
                _ => return Err(self.type_error(name, &describe(ty, &self.separator), v)),
            }
        }
        Ok(out)
    }

    /// Every reading of `key`; exactly one must remain after applying `hints` (known field values).
    pub fn parse(&self, key: &str, hints: &Fields) -> Result<Fields, KeyParseError> {
        if key.len() > MAX_STORE_KEY_BYTES {
            return Err(KeyParseError::TooLong { len: key.len() });
        }
        let seps = key.matches(self.separator.as_str()).count();
        if seps > MAX_STORE_KEY_SEPARATORS {
            return Err(KeyParseError::TooManySeparators { count: seps });
        }
        // A one-byte separator's positions, found once: where free text may end (searching the rest of the key
        // again at every position a field may start cost a scan per start).
        let sep_positions =
            (self.separator.len() == 1).then(|| key.match_indices(self.separator.as_str()).map(|(j, _)| j).collect());
        let mut st = MatchState {
            readings: vec![],
            furthest: None,
            hints,
            seps: sep_positions,
            dead: DeadStates::new(self.parts.len() + 1, key.len() + 1),
        };
        self.match_parts(key, 0, 0, &mut Vec::new(), &mut st);
        match st.readings.len() {
            0 => {
                let (matched, part) = st.furthest.unwrap_or((0, 0));
                let expected = self
                    .parts
                    .get(part)
                    .map(|p| describe_part(p, &self.separator))
                    .unwrap_or_else(|| "the end of the key".into());
                let rest = &key[matched..];
                let found =
                    rest.get(1..).and_then(|r| r.find(self.separator.as_str())).map_or(rest, |j| &rest[..j + 1]);
                Err(KeyParseError::NoMatch {
                    grammar: self.name.clone(),
                    matched,
                    expected,
                    found: found.chars().take(40).collect(),
                })
            }
            1 => Ok(st.readings.remove(0)),
            _ => Err(KeyParseError::Ambiguous { grammar: self.name.clone(), readings: st.readings }),
        }
    }

    /// Depth-first search for every reading of `key[pos..]` by `parts[i..]`; `acc` holds the fields read so
    /// far, in grammar order (a stack: cheaper than a map, which is built only for a complete reading).
    /// Returns whether some path reached the end of the key (a reading, even one already collected).
    ///
    /// A state `(i, pos)` from which no path reaches the end is recorded in `st.dead` and never searched
    /// again: whether the rest of the key fits the rest of the grammar does not depend on how the key was read
    /// up to `pos` (the hints are fixed for the whole parse), so the search costs at most one visit per state
    /// and per way of entering it that leads to a reading — not one visit per combination of the free-text
    /// fields' ends before it, which grew with the product of the separators each could end at. A dead
    /// state also cannot move `furthest`: its first visit already recorded every position it reaches.
    fn match_parts<'g>(
        &'g self,
        key: &str,
        i: usize,
        pos: usize,
        acc: &mut Vec<(&'g str, FieldValue)>,
        st: &mut MatchState<'_>,
    ) -> bool {
        if st.readings.len() > MAX_STORE_KEY_READINGS {
            return false;
        }
        if st.dead.get(i, pos) {
            return false;
        }
        // The failure reported is the one deepest in the grammar (then furthest in the key): a free-text field
        // can swallow the rest of a key and fail at its end on an early part, which named the wrong field
        // (`store_namespace` for a key whose chunk hash is not hex).
        match st.furthest {
            Some((p, j)) if (i, pos) <= (j, p) => {}
            _ => st.furthest = Some((pos, i)),
        }
        let Some(part) = self.parts.get(i) else {
            if pos == key.len() {
                let reading: Fields = acc.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
                if !st.readings.contains(&reading) {
                    st.readings.push(reading);
                }
                return true;
            }
            st.dead.set(i, pos);
            return false;
        };
        let mut alive = false;
        match part {
            Part::Text(t) => {
                if key[pos..].starts_with(t.as_str()) {
                    alive = self.match_parts(key, i + 1, pos + t.len(), acc, st);
                }
            }
            Part::Field { name, ty, omit_empty, suffix } => {
                let hint = st.hints.get(name);
                // (next pos, value); the value is built only for a reachable next state that the hint allows.
                let mut ends: Vec<(usize, usize)> = vec![]; // (value end, next pos)
                if *omit_empty {
                    ends.push((pos, pos));
                    for e in self.match_field(ty, key, pos, st.seps.as_deref()) {
                        if e > pos && key[e..].starts_with(suffix.as_str()) {
                            ends.push((e, e + suffix.len()));
                        }
                    }
                } else if *ty == FieldType::Tags {
                    for (e, tags) in self.match_tags(key, pos) {
                        let v = FieldValue::Tags(tags);
                        if hint.is_some_and(|h| *h != v) || st.dead.get(i + 1, e) {
                            continue;
                        }
                        acc.push((name, v));
                        alive |= self.match_parts(key, i + 1, e, acc, st);
                        acc.pop();
                    }
                } else {
                    ends.extend(self.match_field(ty, key, pos, st.seps.as_deref()).into_iter().map(|e| (e, e)));
                }
                for (e, next) in ends {
                    if st.dead.get(i + 1, next) {
                        continue;
                    }
                    let text = &key[pos..e];
                    let v = match ty {
                        FieldType::Int => match canonical_int(text) {
                            Some(n) => FieldValue::Int(n),
                            None => continue,
                        },
                        _ => {
                            if hint.is_some_and(|h| !matches!(h, FieldValue::Text(s) if s == text)) {
                                continue;
                            }
                            FieldValue::Text(text.to_string())
                        }
                    };
                    if hint.is_some_and(|h| *h != v) {
                        continue;
                    }
                    acc.push((name, v));
                    alive |= self.match_parts(key, i + 1, next, acc, st);
                    acc.pop();
                }
            }
        }
        if !alive {
            st.dead.set(i, pos);
        }
        alive
    }

    /// The positions where a value of this type starting at `pos` may end. `seps`, when given, holds every
    /// position of the (one-byte) separator in `key`.
    fn match_field(&self, ty: &FieldType, key: &str, pos: usize, seps: Option<&[usize]>) -> Vec<usize> {
        let rest = &key[pos..];
        let sep = self.separator.as_str();
        match ty {
            FieldType::Int => {
                let n =
                    rest.bytes().enumerate().take_while(|(j, b)| b.is_ascii_digit() || (*j == 0 && *b == b'-')).count();
                (1..=n.min(21)).map(|l| pos + l).collect()
            }
            FieldType::Hex | FieldType::SignedHex => {
                let signed = *ty == FieldType::SignedHex;
                let n = rest
                    .bytes()
                    .enumerate()
                    .take_while(|(j, b)| matches!(b, b'0'..=b'9' | b'a'..=b'f') || (signed && *j == 0 && *b == b'-'))
                    .count();
                // A value holds at least one digit: the sign alone is not hex (`f'{i:x}'` never writes it, and
                // `render` refuses it). Found by the store_keys fuzz target (FUZZING.md).
                let sign = usize::from(signed && rest.starts_with('-'));
                (1 + sign..=n).map(|l| pos + l).collect()
            }
            FieldType::Str => {
                let mut v: Vec<usize> = match seps {
                    Some(all) => all[all.partition_point(|&j| j < pos)..].to_vec(),
                    None => rest.match_indices(sep).map(|(j, _)| pos + j).collect(),
                };
                v.push(key.len());
                v
            }
            FieldType::Word => {
                let n = match seps {
                    Some(all) => all.get(all.partition_point(|&j| j < pos)).map_or(rest.len(), |j| j - pos),
                    None => rest.find(sep).unwrap_or(rest.len()),
                };
                (0..=n).filter(|l| rest.is_char_boundary(*l)).map(|l| pos + l).collect()
            }
            FieldType::Choice(set) => {
                set.iter().filter(|w| rest.starts_with(w.as_str())).map(|w| pos + w.len()).collect()
            }
            FieldType::Pattern(forms) => {
                let mut out = vec![];
                for form in forms {
                    let mut at = vec![pos];
                    for item in form {
                        let mut next = vec![];
                        for p in at {
                            match item {
                                PatternItem::Text(t) => {
                                    if key[p..].starts_with(t.as_str()) {
                                        next.push(p + t.len());
                                    }
                                }
                                PatternItem::Int => next.extend(
                                    self.match_field(&FieldType::Int, key, p, None)
                                        .into_iter()
                                        .filter(|e| canonical_int(&key[p..*e]).is_some()),
                                ),
                                PatternItem::Set(words) => next.extend(
                                    words.iter().filter(|w| key[p..].starts_with(w.as_str())).map(|w| p + w.len()),
                                ),
                                PatternItem::Hex(n) => {
                                    let digits = key.as_bytes().get(p..p + n);
                                    if digits.is_some_and(|d| d.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
                                    {
                                        next.push(p + n);
                                    }
                                }
                            }
                        }
                        at = next;
                    }
                    out.extend(at);
                }
                out.sort_unstable();
                out.dedup();
                out
            }
            FieldType::Tags => vec![],
        }
    }

    /// Every run of `@name%value` tags starting at `pos`: (end, tags) for 0, 1, 2, … tags.
    fn match_tags(&self, key: &str, pos: usize) -> Vec<(usize, Vec<(String, String)>)> {
        let sep = self.separator.as_str();
        let mut out = vec![(pos, vec![])];
        let mut p = pos;
        let mut tags = vec![];
        while let Some(rest) = key[p..].strip_prefix(sep) {
            let item_end = rest.find(sep).unwrap_or(rest.len());
            let item = &rest[..item_end];
            let Some((k, v)) = item.split_once('%') else { break };
            tags.push((k.to_string(), v.to_string()));
            p += sep.len() + item_end;
            out.push((p, tags.clone()));
        }
        out
    }
}

struct MatchState<'h> {
    readings: Vec<Fields>,
    /// The furthest position a search reached, and the index of the part expected there (the first visit
    /// that reached it); `parts.len()` means the end of the key.
    furthest: Option<(usize, usize)>,
    hints: &'h Fields,
    /// Positions of the separator when it is one byte (`Grammar::parse`).
    seps: Option<Vec<usize>>,
    dead: DeadStates,
}

/// The search states `(part index, key position)` known to lead to no reading, one bit each.
struct DeadStates {
    positions: usize,
    bits: Vec<u64>,
}

impl DeadStates {
    fn new(parts: usize, positions: usize) -> DeadStates {
        DeadStates { positions, bits: vec![0; (parts * positions).div_ceil(64)] }
    }
    fn get(&self, i: usize, pos: usize) -> bool {
        let n = i * self.positions + pos;
        self.bits[n / 64] >> (n % 64) & 1 == 1
    }
    fn set(&mut self, i: usize, pos: usize) {
        let n = i * self.positions + pos;
        self.bits[n / 64] |= 1 << (n % 64);
    }
}

fn describe(ty: &FieldType, sep: &str) -> String {
    match ty {
        FieldType::Int => "a decimal integer".into(),
        FieldType::Hex => "lowercase hex".into(),
        FieldType::SignedHex => "lowercase hex, optionally signed".into(),
        FieldType::Str => "text".into(),
        FieldType::Word => format!("text without {sep:?}"),
        FieldType::Choice(set) => format!("one of {set:?}"),
        FieldType::Pattern(_) => "one of the forms the data lists".into(),
        FieldType::Tags => "tags".into(),
    }
}

fn describe_part(p: &Part, sep: &str) -> String {
    match p {
        Part::Text(t) => format!("{t:?}"),
        Part::Field { name, ty, .. } => format!("`{name}` ({})", describe(ty, sep)),
    }
}

// ---------------------------------------------------------------------------------------------------------
// The data files.

/// The `format` of store-key data files.
pub(crate) const FORMAT: &str = "mooncake-store-keys/1";

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoreKeysFile {
    pub(crate) format: String,
    pub(crate) family: String,
    pub(crate) doc: String,
    pub(crate) separator: String,
    /// Helper function → the first release that has it.
    #[serde(default)]
    pub(crate) api: IndexMap<String, String>,
    #[serde(default)]
    pub(crate) sets: IndexMap<String, Vec<String>>,
    #[serde(default)]
    pub(crate) patterns: IndexMap<String, Vec<String>>,
    pub(crate) grammars: Vec<GrammarDef>,
    #[serde(default)]
    pub(crate) chunk_hash: Vec<ChunkHashRule>,
    #[serde(default)]
    pub(crate) block_hash: Vec<super::block_hash::BlockHashRules>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrammarDef {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) releases: Vec<String>,
    pub(crate) source: String,
    pub(crate) parts: Vec<PartDef>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PartDef {
    #[serde(default)]
    pub(crate) text: Option<String>,
    #[serde(default)]
    pub(crate) field: Option<String>,
    #[serde(default, rename = "type")]
    pub(crate) ty: Option<String>,
    #[serde(default)]
    pub(crate) omit_empty: bool,
    #[serde(default)]
    pub(crate) suffix: Option<String>,
    #[serde(default)]
    pub(crate) prefix_end: bool,
    #[serde(default)]
    pub(crate) set: Option<String>,
    #[serde(default)]
    pub(crate) pattern: Option<String>,
}

/// How a release keys a `block_size` chunk from `hash_block_size` hashes: `block`, `concat` or `last`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkHashRule {
    /// The vLLM releases of the rule.
    pub releases: Vec<String>,
    /// `block` (the block's own hash), `concat` (the sub-block hashes concatenated) or `last` (the last one).
    pub rule: String,
    /// What the rule means, in words.
    #[serde(default)]
    pub doc: String,
    /// Where it was read (release and file).
    pub source: String,
}

/// Why a key-grammar file's grammars do not compile ([`StoreKeysFile::grammars`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GrammarError {
    /// Two grammars of one name.
    #[error("grammar {0} is defined twice")]
    DefinedTwice(String),
    /// A pattern form with a `{` that is never closed.
    #[error("pattern {0:?}: unclosed '{{'")]
    Unclosed(String),
    /// A pattern form naming a set the file does not define.
    #[error("pattern {form:?}: no set `{set}`")]
    PatternSet {
        /// The pattern form.
        form: String,
        /// The set it names.
        set: String,
    },
    /// A part of a grammar (1-based) that is wrong; the text says how.
    #[error("grammar {grammar} part {part}: {what}")]
    Part {
        /// The grammar.
        grammar: String,
        /// The part, counted from 1.
        part: usize,
        /// What is wrong with it.
        what: PartError,
    },
    /// A free-text field the parser cannot find the end of.
    #[error("grammar {grammar}: free-text field `{field}` must be followed by the separator")]
    FreeTextEnd {
        /// The grammar.
        grammar: String,
        /// The field.
        field: String,
    },
}

/// What is wrong with one part of a grammar ([`GrammarError::Part`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PartError {
    /// A `choice` field without `set`.
    #[error("a choice needs `set`")]
    ChoiceWithoutSet,
    /// A `choice` field naming a set the file does not define.
    #[error("no set `{0}`")]
    NoSet(String),
    /// A `pattern` field without `pattern`.
    #[error("a pattern field needs `pattern`")]
    PatternWithoutName,
    /// A `pattern` field naming a pattern list the file does not define.
    #[error("no pattern list `{0}`")]
    NoPatternList(String),
    /// A field type the grammars do not have (`None`: no type given).
    #[error("unknown type {0:?}")]
    UnknownType(Option<String>),
    /// `omit_empty` on a field that is not `str`.
    #[error("omit_empty applies to str fields")]
    OmitEmptyNotStr,
    /// A field named twice in one grammar.
    #[error("field `{0}` appears twice")]
    FieldTwice(String),
    /// A part that is neither text nor a typed field.
    #[error("a part is either {{ text }} or {{ field, type }}")]
    Neither,
}

fn compile_pattern(form: &str, sets: &IndexMap<String, Vec<String>>) -> Result<Vec<PatternItem>, GrammarError> {
    let mut out = vec![];
    let mut rest = form;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            out.push(PatternItem::Text(rest[..open].to_string()));
        }
        let close = rest[open..].find('}').ok_or_else(|| GrammarError::Unclosed(form.to_string()))? + open;
        let hole = &rest[open + 1..close];
        let hex_len = hole.strip_prefix("hex").and_then(|n| n.parse::<usize>().ok()).filter(|n| *n > 0);
        out.push(match (hole, hex_len) {
            ("int", _) => PatternItem::Int,
            (_, Some(n)) => PatternItem::Hex(n),
            (name, None) => PatternItem::Set(
                sets.get(name)
                    .cloned()
                    .ok_or_else(|| GrammarError::PatternSet { form: form.to_string(), set: name.to_string() })?,
            ),
        });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        out.push(PatternItem::Text(rest.to_string()));
    }
    Ok(out)
}

impl StoreKeysFile {
    pub(crate) fn parse(path: &str, text: &str) -> Result<StoreKeysFile, SpecError> {
        let f: StoreKeysFile = toml::from_str(text).map_err(|e| SpecError::new(path, e.to_string()))?;
        if f.format != FORMAT {
            return Err(SpecError::new(path, format!("format must be {FORMAT:?}")));
        }
        f.grammars().map_err(|e| SpecError::new(path, e.to_string()))?;
        for r in &f.chunk_hash {
            if !matches!(r.rule.as_str(), "block" | "concat" | "last") {
                return Err(SpecError::new(path, format!("chunk_hash rule {:?} is not block, concat or last", r.rule)));
            }
        }
        for r in &f.block_hash {
            if !matches!(r.extra_keys.as_str(), "tagged" | "untagged") {
                return Err(SpecError::new(
                    path,
                    format!("block_hash extra_keys {:?} is not tagged or untagged", r.extra_keys),
                ));
            }
        }
        Ok(f)
    }

    /// The compiled grammars. Checks: parts are a text or a typed field; names are unique; every `str`
    /// field is followed by text starting with the separator (or ends the key), which is what lets the
    /// parser find where free text ends.
    pub(crate) fn grammars(&self) -> Result<Vec<Grammar>, GrammarError> {
        let mut out: Vec<Grammar> = vec![];
        for g in &self.grammars {
            if out.iter().any(|o| o.name == g.name) {
                return Err(GrammarError::DefinedTwice(g.name.clone()));
            }
            let mut parts = vec![];
            let mut prefix_len = None;
            for (i, p) in g.parts.iter().enumerate() {
                let at = |what: PartError| GrammarError::Part { grammar: g.name.clone(), part: i + 1, what };
                if p.prefix_end {
                    prefix_len = Some(i);
                }
                match (&p.text, &p.field) {
                    (Some(t), None) if !t.is_empty() && p.ty.is_none() => parts.push(Part::Text(t.clone())),
                    (None, Some(name)) => {
                        let ty = match p.ty.as_deref() {
                            Some("int") => FieldType::Int,
                            Some("hex") => FieldType::Hex,
                            Some("signed_hex") => FieldType::SignedHex,
                            Some("str") => FieldType::Str,
                            Some("word") => FieldType::Word,
                            Some("tags") => FieldType::Tags,
                            Some("choice") => {
                                let set = p.set.as_ref().ok_or_else(|| at(PartError::ChoiceWithoutSet))?;
                                FieldType::Choice(
                                    self.sets.get(set).cloned().ok_or_else(|| at(PartError::NoSet(set.clone())))?,
                                )
                            }
                            Some("pattern") => {
                                let name = p.pattern.as_ref().ok_or_else(|| at(PartError::PatternWithoutName))?;
                                let forms = self
                                    .patterns
                                    .get(name)
                                    .ok_or_else(|| at(PartError::NoPatternList(name.clone())))?;
                                FieldType::Pattern(
                                    forms.iter().map(|f| compile_pattern(f, &self.sets)).collect::<Result<_, _>>()?,
                                )
                            }
                            other => return Err(at(PartError::UnknownType(other.map(str::to_string)))),
                        };
                        if p.omit_empty && ty != FieldType::Str {
                            return Err(at(PartError::OmitEmptyNotStr));
                        }
                        if parts.iter().any(|q| matches!(q, Part::Field { name: n, .. } if n == name)) {
                            return Err(at(PartError::FieldTwice(name.clone())));
                        }
                        parts.push(Part::Field {
                            name: name.clone(),
                            ty,
                            omit_empty: p.omit_empty,
                            suffix: p.suffix.clone().unwrap_or_default(),
                        });
                    }
                    _ => return Err(at(PartError::Neither)),
                }
            }
            for (i, p) in parts.iter().enumerate() {
                if let Part::Field { name, ty: FieldType::Str, omit_empty, suffix } = p {
                    let next_ok = if *omit_empty {
                        suffix.starts_with(self.separator.as_str())
                    } else {
                        match parts.get(i + 1) {
                            None => true,
                            Some(Part::Text(t)) => t.starts_with(self.separator.as_str()),
                            Some(Part::Field { ty: FieldType::Pattern(forms), .. }) => {
                                forms.iter().all(|f| f.is_empty() || matches!(f.first(), Some(PatternItem::Text(t)) if t.starts_with(self.separator.as_str())))
                                    && matches!(parts.get(i + 2), Some(Part::Text(t)) if t.starts_with(self.separator.as_str()))
                            }
                            _ => false,
                        }
                    };
                    if !next_ok {
                        return Err(GrammarError::FreeTextEnd { grammar: g.name.clone(), field: name.clone() });
                    }
                }
            }
            out.push(Grammar {
                name: g.name.clone(),
                family: self.family.clone(),
                releases: g.releases.clone(),
                source: g.source.clone(),
                separator: self.separator.clone(),
                parts,
                prefix_len,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grammar(text: &str, name: &str) -> Grammar {
        StoreKeysFile::parse("t", text).unwrap().grammars().unwrap().into_iter().find(|g| g.name == name).unwrap()
    }

    const DATA: &str = r#"
format = "mooncake-store-keys/1"
family = "t"
doc = ""
separator = "@"
[sets]
layout = ["AB", "ABC"]
[patterns]
ns = ["", "@x:{int}_{layout}"]
[[grammars]]
name = "g"
source = "test"
parts = [
  { field = "prefix", type = "str", omit_empty = true, suffix = "@" },
  { field = "model", type = "str" },
  { field = "ns", type = "pattern", pattern = "ns" },
  { text = "@r:" }, { field = "rank", type = "int" },
  { text = "@", prefix_end = true }, { field = "hash", type = "hex" },
  { field = "tags", type = "tags" },
]
"#;

    fn fields(pairs: &[(&str, FieldValue)]) -> Fields {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }
    fn t(s: &str) -> FieldValue {
        FieldValue::Text(s.into())
    }

    #[test]
    fn render_and_parse_round_trip() {
        let g = grammar(DATA, "g");
        let f = fields(&[
            ("prefix", t("")),
            ("model", t("m")),
            ("ns", t("@x:3_ABC")),
            ("rank", FieldValue::Int(-2)),
            ("hash", t("0a")),
            ("tags", FieldValue::Tags(vec![("k".into(), "v%w".into())])),
        ]);
        let key = g.render(&f).unwrap();
        assert_eq!(key, "m@x:3_ABC@r:-2@0a@k%v%w");
        assert_eq!(g.render_prefix(&f).unwrap(), "m@x:3_ABC@r:-2");
        // Free text may hold the separator: without hints the key has three readings (the namespace may be
        // part of the model name, and the model may be a cache prefix).
        assert!(
            matches!(g.parse(&key, &Fields::new()), Err(KeyParseError::Ambiguous { ref readings, .. }) if readings.len() == 3)
        );
        assert_eq!(g.parse(&key, &fields(&[("prefix", t("")), ("model", t("m"))])).unwrap(), f);
        // A model containing the separator: two readings until the prefix is known.
        let f2 = fields(&[
            ("prefix", t("")),
            ("model", t("a@b")),
            ("ns", t("")),
            ("rank", FieldValue::Int(0)),
            ("hash", t("ff")),
            ("tags", FieldValue::Tags(vec![])),
        ]);
        let key = g.render(&f2).unwrap();
        assert!(
            matches!(g.parse(&key, &Fields::new()), Err(KeyParseError::Ambiguous { ref readings, .. }) if readings.len() == 2)
        );
        assert_eq!(g.parse(&key, &fields(&[("prefix", t(""))])).unwrap(), f2);
        assert_eq!(g.parse(&key, &fields(&[("prefix", t("a"))])).unwrap()["model"], t("b"));
    }

    #[test]
    fn rejects_what_the_grammar_cannot_write() {
        let g = grammar(DATA, "g");
        let base = fields(&[
            ("prefix", t("")),
            ("model", t("m")),
            ("ns", t("")),
            ("rank", FieldValue::Int(1)),
            ("hash", t("ab")),
            ("tags", FieldValue::Tags(vec![])),
        ]);
        let mut bad = base.clone();
        bad.insert("hash".into(), t("AB"));
        assert!(matches!(g.render(&bad), Err(KeyBuildError::WrongType { .. })));
        let mut bad = base.clone();
        bad.insert("ns".into(), t("@x:01_AB"));
        assert!(g.render(&bad).is_err(), "non-canonical int in a pattern");
        let mut bad = base.clone();
        bad.insert("group".into(), FieldValue::Int(2));
        assert!(matches!(g.render(&bad), Err(KeyBuildError::NotInGrammar { .. })));
        bad.insert("group".into(), FieldValue::Int(0));
        assert!(g.render(&bad).is_ok(), "a default value of an absent part is fine");
        for key in ["m@r:01@ab", "m@r:1@AB", "m@r:1", "m@r:-0@ab", "m@r:1@ab@k", "m@r:1@ab@"] {
            assert!(matches!(g.parse(key, &Fields::new()), Err(KeyParseError::NoMatch { .. })), "{key}");
        }
        let long = "@".repeat(300);
        assert!(matches!(g.parse(&long, &Fields::new()), Err(KeyParseError::TooManySeparators { .. })));
    }

    /// Regression (store_keys fuzz target): a signed-hex field matched a lone "-", so a key parsed to a reading
    /// that `render` refuses. Every accepted reading must render back to the key.
    #[test]
    fn a_sign_alone_is_not_signed_hex() {
        let g = grammar(&DATA.replace("type = \"hex\"", "type = \"signed_hex\""), "g");
        for key in ["m@r:1@-", "m@r:1@-@k%v", "m@r:1@--1"] {
            assert!(
                matches!(g.parse(key, &Fields::new()), Err(KeyParseError::NoMatch { .. })),
                "{key}: {:?}",
                g.parse(key, &Fields::new())
            );
        }
        for (key, hash) in [("m@r:1@-1f", "-1f"), ("m@r:1@0", "0")] {
            let f = g.parse(key, &fields(&[("prefix", t(""))])).unwrap();
            assert_eq!(f["hash"], t(hash));
            assert_eq!(g.render(&f).unwrap(), key);
        }
    }

    #[test]
    fn data_checks() {
        let bad = DATA.replace(
            "{ field = \"model\", type = \"str\" },\n  { field = \"ns\", type = \"pattern\", pattern = \"ns\" },",
            "{ field = \"model\", type = \"str\" },\n  { field = \"m2\", type = \"int\" },",
        );
        assert!(StoreKeysFile::parse("t", &bad).unwrap_err().msg.contains("followed by the separator"));
        assert!(StoreKeysFile::parse("t", &DATA.replace("type = \"hex\"", "type = \"hexx\"")).is_err());
        assert!(StoreKeysFile::parse("t", &DATA.replace("{layout}", "{nope}")).is_err());
    }
}
