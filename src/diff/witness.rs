//! Runs a change's witness messages through the spec-driven codecs of both revisions (byte-identical to
//! msgspec, see `conformance/tests/suite/differential_msgspec.rs`): the writer revision encodes each probe value, the
//! reader revision decodes the bytes. The outcome confirms the verdict, and a rejection's text (msgspec's own
//! error message) becomes the verdict's example.

// Without the `testing` feature the module is private, and the parts only the test uses are unreachable.
#![cfg_attr(not(feature = "testing"), allow(unreachable_pub, dead_code))]

use serde_json::Value as J;

use super::model::{Bytes, Change, Effect, Probe, Verdict, Witness};
use crate::codec::{Codec, EncodeError, FromJsonError, Value};

/// What the reader made of a writer's message.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every field the reader declares holds what the writer sent (or the reader's default, for fields the
    /// writer does not declare).
    Faithful,
    /// Decoded, but a field holds something else than was sent.
    Misread(Misread),
    /// msgspec's error text.
    Rejected(String),
}

impl Outcome {
    pub(crate) fn ok(&self) -> bool {
        matches!(self, Outcome::Faithful)
    }
    /// The verdict's example text: msgspec's error, or what was misread (`None` when faithful).
    pub fn text(&self) -> Option<String> {
        match self {
            Outcome::Faithful => None,
            Outcome::Misread(m) => Some(format!("decoded, but {m}")),
            Outcome::Rejected(e) => Some(e.clone()),
        }
    }
}

/// What a reader's value holds differently from the writer's ([`faithful`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Misread {
    /// One of the two values is not a struct.
    #[error("not a struct")]
    NotAStruct,
    /// A field reads as something else than was sent.
    #[error("`{field}` reads as {got} instead of {want}")]
    ReadsAs {
        /// The reader's field.
        field: String,
        /// What it holds (JSON).
        got: String,
        /// What the writer sent, or the reader's default (JSON).
        want: String,
    },
    /// A reader's field with neither a writer's field nor a default behind it.
    #[error("`{0}` has no counterpart")]
    NoCounterpart(String),
}

/// Why a witness probe could not be run: its message does not fit or encode in the writer's revision.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WitnessError {
    /// The probe's JSON is not a value of the writer's message.
    #[error("witness does not fit {message}: {source}")]
    DoesNotFit {
        /// The writer's message.
        message: String,
        /// Why.
        source: FromJsonError,
    },
    /// The probe's value does not encode.
    #[error("witness does not encode: {0}")]
    DoesNotEncode(EncodeError),
}

/// One probe message: what the reader made of it, and whether the reader's revision encodes the same content
/// to the same bytes (`None`: the reader cannot hold that content).
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// What the reader made of it.
    pub outcome: Outcome,
    /// Whether the reader re-encodes the content to the writer's bytes (`None`: the reader cannot hold it).
    pub same_bytes: Option<bool>,
}

/// The runs of one direction's probe.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The run of the message that does not use the change.
    pub plain: Run,
    /// The run of the message that uses it.
    pub using: Option<Run>,
    /// The run of the message `Breaks { except }` exempts.
    pub exception: Option<Run>,
}

/// Numbers compare by value (an int read as a float is the same number).
pub(crate) fn same_json(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Number(x), J::Number(y)) => x == y || x.as_f64().is_some_and(|x| y.as_f64() == Some(x)),
        (J::Array(x), J::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b)),
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Whether the reader's value holds what the writer's value holds, field by field (through `renames`, given
/// as (writer name, reader name)). Returns the first difference.
pub fn faithful(
    writer: &J,
    reader: &J,
    reader_defaults: &serde_json::Map<String, J>,
    renames: &[(String, String)],
) -> Result<(), Misread> {
    let (Some(w), Some(r)) = (writer.as_object(), reader.as_object()) else { return Err(Misread::NotAStruct) };
    for (k, got) in r {
        let wk = renames.iter().find(|(_, rn)| rn == k).map(|(wn, _)| wn.as_str()).unwrap_or(k);
        let want = w.get(wk).or_else(|| reader_defaults.get(k));
        match want {
            Some(want) if same_json(want, got) => {}
            Some(want) => {
                return Err(Misread::ReadsAs { field: k.clone(), got: got.to_string(), want: want.to_string() })
            }
            None => return Err(Misread::NoCounterpart(k.clone())),
        }
    }
    Ok(())
}

/// The writer side of one probe: the message bytes and its value as JSON.
pub fn write(codec: &Codec, message: &str, value: &J) -> Result<(Vec<u8>, J), WitnessError> {
    let v: Value = codec
        .from_json(message, value)
        .map_err(|source| WitnessError::DoesNotFit { message: message.to_string(), source })?;
    let bytes = codec.encode(message, &v).map_err(WitnessError::DoesNotEncode)?;
    Ok((bytes, Codec::to_json(&v)))
}

/// Defaults of the reader struct's fields, as JSON.
pub fn defaults(codec: &Codec, message: &str) -> serde_json::Map<String, J> {
    codec
        .message_struct(message)
        .map(|s| {
            s.fields.iter().filter_map(|f| f.default.as_ref().map(|d| (f.name.clone(), Codec::to_json(d)))).collect()
        })
        .unwrap_or_default()
}

/// The writer's content as a value of the reader's struct: fields by name (through `renames`), a field the
/// reader lacks only if it holds the writer's default. `None` when the reader cannot hold the content.
pub fn counterpart(
    writer: &J,
    writer_defaults: &serde_json::Map<String, J>,
    reader_fields: &[String],
    renames: &[(String, String)],
) -> Option<J> {
    let mut out = serde_json::Map::new();
    for (k, v) in writer.as_object()? {
        let rk = renames.iter().find(|(w, _)| w == k).map(|(_, r)| r.as_str()).unwrap_or(k);
        if reader_fields.iter().any(|f| f == rk) {
            out.insert(rk.to_string(), v.clone());
        } else if !writer_defaults.get(k).is_some_and(|d| same_json(d, v)) {
            return None;
        }
    }
    Some(J::Object(out))
}

/// `j` as a value of the reader's struct, if it holds exactly that content (JSON forms overlap: `"x"` is
/// also base64 for bytes).
pub fn reader_value(rc: &Codec, rs: &str, j: &J) -> Option<Value> {
    let v = rc.from_json(rs, j).ok()?;
    same_json(&Codec::to_json(&v), &filled(rc, rs, j)).then_some(v)
}

/// `j` with the struct's defaults filled in (what `to_json` of the decoded value shows).
fn filled(rc: &Codec, rs: &str, j: &J) -> J {
    let mut out = serde_json::Map::new();
    let d = defaults(rc, rs);
    if let (Some(s), Some(m)) = (rc.message_struct(rs), j.as_object()) {
        for f in &s.fields {
            if let Some(v) = m.get(&f.name).or_else(|| d.get(&f.name)) {
                out.insert(f.name.clone(), v.clone());
            }
        }
    }
    J::Object(out)
}

fn run(
    wc: &Codec,
    ws: &str,
    rc: &Codec,
    rs: &str,
    renames: &[(String, String)],
    value: &J,
) -> Result<Run, WitnessError> {
    let (bytes, wj) = write(wc, ws, value)?;
    let outcome = match rc.decode(rs, &bytes) {
        Err(e) => Outcome::Rejected(e.msgspec_message()),
        Ok(rv) => match faithful(&wj, &Codec::to_json(&rv), &defaults(rc, rs), renames) {
            Err(m) => Outcome::Misread(m),
            Ok(()) => Outcome::Faithful,
        },
    };
    let reader_fields: Vec<String> =
        rc.message_struct(rs).map(|s| s.fields.iter().map(|f| f.name.clone()).collect()).unwrap_or_default();
    let same_bytes = counterpart(&wj, &defaults(wc, ws), &reader_fields, renames)
        .and_then(|j| reader_value(rc, rs, &j))
        .and_then(|v| rc.encode(rs, &v).ok())
        .map(|b| b == bytes);
    Ok(Run { outcome, same_bytes })
}

fn observe_probe(
    wc: &Codec,
    ws: &str,
    rc: &Codec,
    rs: &str,
    renames: &[(String, String)],
    p: &Probe,
) -> Result<Observed, WitnessError> {
    Ok(Observed {
        plain: run(wc, ws, rc, rs, renames, &p.plain)?,
        using: p.using.as_ref().map(|u| run(wc, ws, rc, rs, renames, u)).transpose()?,
        exception: p.exception.as_ref().map(|u| run(wc, ws, rc, rs, renames, u)).transpose()?,
    })
}

/// Both directions: (old reads new, new reads old).
pub(crate) fn observe(old: &Codec, new: &Codec, w: &Witness) -> Result<(Observed, Observed), WitnessError> {
    let to_new: Vec<(String, String)> = w.renames.clone();
    let to_old: Vec<(String, String)> = w.renames.iter().map(|(a, b)| (b.clone(), a.clone())).collect();
    Ok((
        observe_probe(new, &w.new_struct, old, &w.old_struct, &to_old, &w.old_reads_new)?,
        observe_probe(old, &w.old_struct, new, &w.new_struct, &to_new, &w.new_reads_old)?,
    ))
}

/// Whether what happened matches the effect; a `BreaksWhenSent` without a `using` probe (message
/// replacements) can only be checked on its plain message.
pub fn agrees(effect: &Effect, o: &Observed) -> bool {
    let ok = |r: &Run| r.outcome.ok();
    match effect {
        Effect::Compatible => ok(&o.plain) && o.using.as_ref().is_none_or(ok),
        Effect::BreaksWhenSent { .. } => ok(&o.plain) && o.using.as_ref().is_none_or(|u| !ok(u)),
        Effect::Breaks { .. } => !ok(&o.plain) && o.exception.as_ref().is_none_or(ok),
        Effect::Review => true,
    }
}

/// Whether the bytes claim holds for the messages whose content both revisions can hold: `Same` — every
/// such plain and using message keeps its bytes; `DifferWhen` — the plain ones keep them and the using ones
/// (when representable) do not; `Differ` — some plain message changes.
pub fn bytes_agree(b: &Bytes, dirs: [&Observed; 2]) -> bool {
    let plain: Vec<bool> = dirs.iter().filter_map(|d| d.plain.same_bytes).collect();
    let using: Vec<bool> = dirs.iter().filter_map(|d| d.using.as_ref().and_then(|u| u.same_bytes)).collect();
    match b {
        Bytes::Same => plain.iter().chain(&using).all(|s| *s),
        Bytes::DifferWhen(_) => plain.iter().all(|s| *s) && using.iter().all(|s| !*s),
        Bytes::Differ(_) => plain.iter().any(|s| !*s),
        Bytes::NotApplicable(_) => true,
    }
}

/// The example of a verdict: the outcome of the message that breaks.
fn example(v: &mut Verdict, o: &Observed) {
    v.example = match v.effect {
        Effect::Breaks { .. } => o.plain.outcome.text(),
        Effect::BreaksWhenSent { .. } => o.using.as_ref().and_then(|u| u.outcome.text()),
        _ => None,
    };
}

/// Parts of a witness that cannot show this change on its own: another change of the same struct breaks
/// every message in that direction, or changes the bytes of every message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Confounded {
    /// The old-reads-new direction cannot be shown.
    pub old_reads_new: bool,
    /// The new-reads-old direction cannot be shown.
    pub new_reads_old: bool,
    /// The bytes verdict cannot be shown.
    pub bytes: bool,
}

/// For each change, what the other changes of its struct confound.
pub fn confounded(changes: &[Change]) -> Vec<Confounded> {
    let key = |c: &Change| c.witness.as_ref().map(|w| (w.old_struct.clone(), w.new_struct.clone()));
    let always = |e: &Effect| matches!(e, Effect::Breaks { .. });
    changes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let Some(k) = key(c) else { return Confounded::default() };
            let others: Vec<&Change> = changes
                .iter()
                .enumerate()
                .filter(|(j, o)| *j != i && key(o).as_ref() == Some(&k))
                .map(|(_, o)| o)
                .collect();
            Confounded {
                old_reads_new: !always(&c.old_reads_new.effect)
                    && others.iter().any(|o| always(&o.old_reads_new.effect)),
                new_reads_old: !always(&c.new_reads_old.effect)
                    && others.iter().any(|o| always(&o.new_reads_old.effect)),
                bytes: others.iter().any(|o| matches!(o.bytes, Bytes::Differ(_) | Bytes::NotApplicable(_))),
            }
        })
        .collect()
}

/// Runs the change's witness, fills in the examples and sets `confirmed` (on the parts `skip` leaves).
pub(crate) fn confirm(old: &Codec, new: &Codec, c: &mut Change, skip: Confounded) {
    let Some(w) = &c.witness else { return };
    match observe(old, new, w) {
        Err(e) => {
            c.notes.push(format!("witness failed: {e}"));
            c.confirmed = Some(false);
        }
        Ok((orn, nro)) => {
            let ok = (skip.old_reads_new || agrees(&c.old_reads_new.effect, &orn))
                && (skip.new_reads_old || agrees(&c.new_reads_old.effect, &nro))
                && (skip.bytes || skip.old_reads_new || skip.new_reads_old || bytes_agree(&c.bytes, [&orn, &nro]));
            example(&mut c.old_reads_new, &orn);
            example(&mut c.new_reads_old, &nro);
            if skip != Confounded::default() {
                c.notes.push(format!(
                    "witness checked without {}: another change of this struct affects every message there",
                    [
                        (skip.old_reads_new, "old reads new"),
                        (skip.new_reads_old, "new reads old"),
                        (skip.bytes, "bytes")
                    ]
                    .iter()
                    .filter(|(s, _)| *s)
                    .map(|(_, n)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
                ));
            }
            if !ok {
                c.notes.push(format!(
                    "the codecs disagree with this verdict: old reads new {orn:?}; new reads old {nro:?}"
                ));
            }
            c.confirmed = Some(ok);
        }
    }
}
