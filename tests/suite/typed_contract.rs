//! Checks the typed-layer generator (`src/generate/typed_rs/`): the generated code of every revision of both
//! families (`typed::generated::push`, `typed::generated::pull`) against `spec/` and the spec-driven codec of
//! the same revision. Nothing here lists a revision's fields: every expectation comes from the spec or the
//! spec-driven codec, so the test follows a change to `spec/` as the generated code does.
//!
//! * the generated revisions, messages, field lists and required masks are the spec's;
//! * row by row, for every field of every message: a non-default value decodes and re-encodes as the spec
//!   codec does; absent, it takes its default and stays absent (written explicitly, it is dropped again under
//!   `omit_defaults`); it is required exactly when the spec says so; every wrongly-typed value is refused
//!   with the spec codec's error and path; a tuple's tag holds the spec's constant;
//! * every bundled msgspec vector of every revision (`conformance/vectors/`): accepted input re-encodes to
//!   msgspec's canonical bytes, rejected input is refused with msgspec's error text;
//! * random valid messages, non-canonical encodings and mutations: the same verdict, error and bytes;
//! * the open enums (status members and terminal flags), the control tags and the raw constants are the
//!   spec's.
//!
//! That the committed generated code is what the generator makes is `tests/generated.rs`'s job.

use std::path::PathBuf;

use mooncake_wire::codec::testgen::{mutate, noncanonical, random_value, Rng, Size};
use mooncake_wire::codec::{py_bytes_repr, Codec, Value};
use mooncake_wire::msgpack::Writer;
use mooncake_wire::spec::{Family, Spec};
use mooncake_wire::typed::generated::{pull, push};
use mooncake_wire::typed::{self, GeneratedRevision, Strictness};

/// Decode then re-encode, as hex, or the error text.
type Outcome = Result<String, String>;

fn families() -> Vec<(&'static Family, &'static [GeneratedRevision])> {
    let spec = Spec::builtin();
    vec![(spec.push(), &push::REVISIONS[..]), (spec.pull(), &pull::REVISIONS[..])]
}

fn typed_rt(gen: &GeneratedRevision, message: &str, b: &[u8]) -> Outcome {
    (gen.round_trip)(message, b, Strictness::Msgspec)
        .expect("a generated message")
        .map(hex::encode)
        .map_err(|e| e.msgspec_message())
}

fn spec_rt(codec: &Codec, message: &str, b: &[u8]) -> Outcome {
    codec.decode(message, b).map(|v| hex::encode(codec.encode(message, &v).unwrap())).map_err(|e| e.msgspec_message())
}

#[test]
fn generated_revisions_messages_fields_and_masks_are_the_specs() {
    let mut messages = 0;
    for (fam, revisions) in families() {
        assert_eq!(
            revisions.iter().map(|g| g.revision).collect::<Vec<_>>(),
            fam.revisions.iter().map(|r| r.revision.as_str()).collect::<Vec<_>>(),
            "one generated module per {} revision",
            fam.name
        );
        for gen in revisions {
            let rev = fam.revision(gen.revision).unwrap();
            let mut want: Vec<&str> = rev.structs.keys().map(String::as_str).collect();
            let mut have = gen.messages.to_vec();
            want.sort();
            have.sort();
            assert_eq!(have, want, "{}: generated messages", gen.revision);
            for (m, def) in &rev.structs {
                let names: Vec<&str> = def.fields.iter().map(|f| f.name.as_str()).collect();
                assert_eq!((gen.fields)(m).unwrap(), names.as_slice(), "{} {m}: field list", gen.revision);
                let mask =
                    def.fields.iter().enumerate().filter(|(_, f)| f.required()).fold(0u64, |a, (i, _)| a | 1 << i);
                assert_eq!((gen.required)(m), Some(mask), "{} {m}: required mask", gen.revision);
                messages += 1;
            }
            assert_eq!((gen.fields)("NoSuchMessage"), None);
        }
    }
    assert!(messages >= 36, "only {messages} messages");
}

/// Raw MessagePack values of every kind, to put where a field's value belongs.
const WRONG_KINDS: &[(&str, &[u8])] = &[
    ("nil", &[0xc0]),
    ("bool", &[0xc3]),
    ("int", &[0x05]),
    ("negative int", &[0xff]),
    ("float", &[0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0]),
    ("str", &[0xa1, 0x78]),
    ("bin", &[0xc4, 0x01, 0x78]),
    ("array", &[0x91, 0x05]),
    ("array of str", &[0x91, 0xa1, 0x78]),
    ("empty array", &[0x90]),
    ("map", &[0x81, 0xa1, 0x6b, 0x05]),
    ("map with int key", &[0x81, 0x07, 0x81, 0xa1, 0x6b, 0x05]),
    ("ext", &[0xd4, 0x01, 0x00]),
];

/// One encoded entry: a field (by index) with its value already encoded.
type Entry = (usize, Vec<u8>);

/// The message from entries: a map of (wire name, value) in the given order, or (array-like) an array of
/// the values.
fn message_bytes(codec: &Codec, message: &str, entries: &[Entry]) -> Vec<u8> {
    let st = codec.message_struct(message).unwrap();
    let mut w = Writer::new();
    if st.array_like {
        w.array_len(entries.len());
        for (_, v) in entries {
            w.raw(v);
        }
    } else {
        w.map_len(entries.len());
        for (i, v) in entries {
            w.str(&st.fields[*i].wire_name);
            w.raw(v);
        }
    }
    w.into_bytes()
}

/// The rows of one message; returns the failures.
fn contract(gen: &GeneratedRevision, message: &str) -> Vec<String> {
    let rev = Spec::builtin().revision(gen.revision).unwrap();
    let def = &rev.structs[message];
    let codec = Codec::builtin(gen.revision).unwrap();
    let st = codec.message_struct(message).unwrap();
    let enc = |i: usize, v: &Value| codec.encode_type(st.fields[i].ty, v).unwrap();
    let mut rng = Rng::new(20261129);
    // One non-default sample per field (the constant for a tag), and the required fields' samples as the
    // base of every probe.
    let sample = |i: usize, rng: &mut Rng| loop {
        if let Some(c) = &st.fields[i].const_value {
            return c.clone();
        }
        let v = random_value(codec.plan(), st.fields[i].ty, rng, Size(3));
        if st.fields[i].default.as_ref() != Some(&v) {
            return v;
        }
    };
    let samples: Vec<Value> = (0..st.fields.len()).map(|i| sample(i, &mut rng)).collect();
    let required: Vec<usize> = (0..st.fields.len()).filter(|&i| st.fields[i].default.is_none()).collect();
    let entries_with = |extra: Option<(usize, Vec<u8>)>, skip: Option<usize>| -> Vec<Entry> {
        let mut out = vec![];
        for (i, sample) in samples.iter().enumerate() {
            if Some(i) == skip {
                continue;
            }
            match &extra {
                Some((j, raw)) if *j == i => out.push((i, raw.clone())),
                _ if required.contains(&i) => out.push((i, enc(i, sample))),
                _ => {}
            }
        }
        // A map takes an extra entry for a skipped field at its end, as a late key.
        if let (Some((j, raw)), false) = (&extra, st.array_like) {
            if skip == Some(*j) {
                out.push((*j, raw.clone()));
            }
        }
        out
    };
    let mut rows = vec![];
    let mut failures = vec![];
    let agree = |problems: &mut Vec<String>, what: &str, b: &[u8]| {
        let (x, y) = (typed_rt(gen, message, b), spec_rt(&codec, message, b));
        if x != y {
            problems.push(format!("{what}: typed {x:?} vs spec {y:?}"));
        }
        y
    };
    for (i, f) in def.fields.iter().enumerate() {
        let mut problems = vec![];
        let full = message_bytes(&codec, message, &entries_with(Some((i, enc(i, &samples[i]))), None));
        if agree(&mut problems, "non-default value", &full).is_err() {
            problems.push("the spec codec rejects a well-typed value".into());
        }
        if let Some(d) = &st.fields[i].default {
            let minimal = message_bytes(&codec, message, &entries_with(None, None));
            let r = agree(&mut problems, "default absent", &minimal);
            if r != Ok(hex::encode(&minimal)) {
                problems.push(format!("default absent: spec {r:?}"));
            }
            let explicit = message_bytes(&codec, message, &entries_with(Some((i, enc(i, d))), None));
            let r = agree(&mut problems, "default explicit", &explicit);
            if st.omit_defaults && r != Ok(hex::encode(&minimal)) {
                problems.push(format!("default explicit: spec {r:?}, not the minimal encoding"));
            }
        }
        let without = message_bytes(&codec, message, &entries_with(None, Some(i)));
        let s = agree(&mut problems, "absent", &without);
        if f.required() != s.is_err() {
            problems.push(format!(
                "spec says required={}, the spec codec {}",
                f.required(),
                if s.is_err() { "rejects" } else { "accepts" }
            ));
        }
        for (kind, raw) in WRONG_KINDS {
            // In a map the wrong value comes as the last key; in an array it takes the element's place.
            let skip = (!st.array_like).then_some(i);
            let b = message_bytes(&codec, message, &entries_with(Some((i, raw.to_vec())), skip));
            let _ = agree(&mut problems, kind, &b);
        }
        if f.const_value.is_some() {
            for other in
                [&b"other_msg"[..], b"", b"get_meta_msg\x00", b"done_recving_msg", b"get_meta_msg", b"it's \"q\"\n\xff"]
            {
                let b = message_bytes(
                    &codec,
                    message,
                    &entries_with(Some((i, enc(i, &Value::Bytes(other.to_vec())))), None),
                );
                let _ = agree(&mut problems, &format!("tag {}", py_bytes_repr(other)), &b);
            }
        }
        let default = match &f.const_value {
            Some(c) => format!("const {c}"),
            None => f.default_display(),
        };
        let line = format!(
            "| {} | `{}` | `{}` | {default} | {} | {} |",
            i + 1,
            f.name,
            f.ty,
            problems.join("; "),
            if problems.is_empty() { "ok" } else { "MISMATCH" }
        );
        if !problems.is_empty() {
            failures.push(line.clone());
        }
        rows.push(line);
    }
    println!(
        "\n{message} ({}):\n| # | field | type | default | notes | result |\n|---|---|---|---|---|---|",
        gen.revision
    );
    for r in &rows {
        println!("{r}");
    }
    failures
}

#[test]
fn every_generated_message_matches_the_spec_codec_row_by_row() {
    let mut failures = vec![];
    let mut checked = 0;
    for (fam, revisions) in families() {
        for gen in revisions {
            for m in fam.revision(gen.revision).unwrap().structs.keys() {
                failures.extend(contract(gen, m).into_iter().map(|f| format!("{} {m}: {f}", gen.revision)));
                checked += 1;
            }
        }
    }
    assert!(checked >= 36, "only {checked} messages checked");
    assert!(failures.is_empty(), "generated structs differ from spec/:\n{}", failures.join("\n"));
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The bundled vectors of a revision: `conformance/vectors/pull/<revision>/`, or for the push family the
/// directory of the vector revision (`conformance/vectors/revisions.json`) that covers the revision's first
/// release (one vector revision can cover several spec revisions that differ only in behaviour).
fn vector_dir(family: &str, revision: &str) -> PathBuf {
    let base = root().join("conformance/vectors");
    if family != "push" {
        return base.join(family).join(revision);
    }
    let table: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base.join("revisions.json")).unwrap()).unwrap();
    let first = Spec::builtin().revision(revision).unwrap().first_release().to_string();
    let dir = table["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["releases"].as_array().unwrap().iter().any(|x| x.as_str() == Some(first.as_str())))
        .and_then(|r| r["revision"].as_str())
        .unwrap_or(revision);
    base.join(dir)
}

#[test]
fn generated_code_agrees_with_every_bundled_msgspec_vector() {
    if crate::in_repository("conformance/vectors", "the typed structs against the bundled msgspec vectors").is_none() {
        return;
    }
    let (mut accepted, mut rejected, mut files) = (0, 0, 0);
    let mut missing = vec![];
    for (fam, revisions) in families() {
        for gen in revisions {
            for m in gen.messages {
                let p = vector_dir(&fam.name, gen.revision).join(format!("{m}.jsonl"));
                let Ok(text) = std::fs::read_to_string(&p) else {
                    missing.push(format!("{}/{m}", gen.revision));
                    continue;
                };
                files += 1;
                let mut lines = text.lines();
                let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
                assert_eq!(header["message"].as_str(), Some(*m), "{}", p.display());
                for line in lines {
                    let c: serde_json::Value = serde_json::from_str(line).unwrap();
                    let b: Vec<u8> = (0..c["hex"].as_str().unwrap().len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&c["hex"].as_str().unwrap()[i..i + 2], 16).unwrap())
                        .collect();
                    let got = typed_rt(gen, m, &b);
                    let id = c["id"].as_str().unwrap();
                    if c["expect"] == "accept" {
                        assert_eq!(
                            got.as_deref(),
                            Ok(c["canonical_hex"].as_str().unwrap()),
                            "{} {m} {id}",
                            gen.revision
                        );
                        accepted += 1;
                    } else {
                        assert_eq!(
                            got.as_ref().err().map(String::as_str),
                            c["error"].as_str(),
                            "{} {m} {id}",
                            gen.revision
                        );
                        rejected += 1;
                    }
                }
            }
        }
    }
    println!("{files} vector files: {accepted} accepted, {rejected} rejected; no vectors for {missing:?}");
    // Every message of every revision has vectors (a file going missing must not pass silently).
    assert!(missing.is_empty(), "no vector file for {missing:?}");
    assert!(files >= 36 && accepted > 5_000 && rejected > 5_000, "{files} files, {accepted}/{rejected}");
}

/// Random well-typed values, their non-canonical encodings and mutations of both, for every message of every
/// revision: typed and spec decoders give the same verdict, error text and re-encoding.
#[test]
fn typed_and_spec_decoders_agree_on_random_and_mutated_inputs() {
    let mut rng = Rng::new(23);
    let (mut n, mut rejected) = (0, 0);
    for (fam, revisions) in families() {
        for gen in revisions {
            let codec = Codec::builtin(gen.revision).unwrap();
            for m in fam.revision(gen.revision).unwrap().structs.keys() {
                let ty = codec.message_type(m).unwrap();
                for k in 0..150 {
                    let v = random_value(codec.plan(), ty, &mut rng, Size(1 + k % 4));
                    let canonical = codec.encode(m, &v).unwrap();
                    assert_eq!(
                        typed_rt(gen, m, &canonical),
                        Ok(hex::encode(&canonical)),
                        "{} {m} canonical",
                        gen.revision
                    );
                    let nc = noncanonical(codec.plan(), ty, &v, &mut rng);
                    assert_eq!(
                        typed_rt(gen, m, &nc),
                        Ok(hex::encode(&canonical)),
                        "{} {m} from {}",
                        gen.revision,
                        hex::encode(&nc)
                    );
                    let base = if rng.chance(50) { canonical } else { nc };
                    let input = mutate(&base, &mut rng);
                    let spec = spec_rt(&codec, m, &input);
                    assert_eq!(typed_rt(gen, m, &input), spec, "{} {m} input {}", gen.revision, hex::encode(&input));
                    rejected += spec.is_err() as usize;
                    n += 1;
                }
            }
        }
    }
    assert!(rejected > n / 4 && rejected < n, "rejected {rejected} of {n}");
}

/// `any` values (`typed::Untyped`) keep Python's dict rules as the spec codec does: `0.0` and `-0.0` are one
/// key, two NaN keys are two, an int and a float are different keys here, a list key is refused, an ext
/// value is refused. Built by hand into every `dict[str, any]` of every pull message, since random values
/// rarely hit these cases; the message around it is the spec's required fields at their fallback values.
#[test]
fn untyped_values_follow_the_spec_codec() {
    let f64b = |x: f64| [&[0xcb][..], &x.to_be_bytes()].concat();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("zero and minus zero", [&[0x83][..], &f64b(0.0), &[0x01], &f64b(-0.0), &[0x02], &[0xa1, 0x78, 0x03]].concat()),
        ("two NaNs", [&[0x82][..], &f64b(f64::NAN), &[0x01], &f64b(f64::NAN), &[0x02]].concat()),
        ("int and float", [&[0x82][..], &[0x01, 0x01], &f64b(1.0), &[0x02]].concat()),
        ("duplicate str", vec![0x83, 0xa1, 0x61, 0x01, 0xa1, 0x62, 0x02, 0xa1, 0x61, 0x03]),
        ("duplicate bytes and nil", vec![0x84, 0xc4, 0x01, 0x61, 0x01, 0xc0, 0x02, 0xc4, 0x01, 0x61, 0x03, 0xc0, 0x04]),
        ("list key", vec![0x81, 0x91, 0x01, 0x02]),
        ("map key", vec![0x81, 0x81, 0x01, 0x01, 0x02]),
        ("ext value", vec![0x81, 0x01, 0xd4, 0x01, 0x00]),
        ("float32", vec![0x91, 0xca, 0x3f, 0xc0, 0x00, 0x00]),
        ("nested", vec![0x92, 0x81, 0xa1, 0x6b, 0x92, 0xc3, 0xc2, 0x90]),
        ("invalid utf-8", vec![0x91, 0xa1, 0xff]),
    ];
    let mut checked = 0;
    for gen in &pull::REVISIONS {
        let rev = Spec::builtin().revision(gen.revision).unwrap();
        let codec = Codec::builtin(gen.revision).unwrap();
        for (m, def) in &rev.structs {
            let st = codec.message_struct(m).unwrap();
            // The fields holding `dict[int, tuple[dict[str, any], list[int]]]` (vllm-ascend's group table).
            for (i, f) in def.fields.iter().enumerate() {
                if f.ty.to_string() != "dict[int, tuple[dict[str, any], list[int]]]" || st.array_like {
                    continue;
                }
                for (what, any) in &cases {
                    let mut w = Writer::new();
                    let required: Vec<usize> = (0..def.fields.len()).filter(|&j| def.fields[j].required()).collect();
                    w.map_len(required.len());
                    for &j in &required {
                        w.str(&def.fields[j].name);
                        if j == i {
                            // {7: ({"k": <any>}, [])}
                            w.raw(&[&[0x81, 0x07, 0x92, 0x81, 0xa1, 0x6b][..], any, &[0x90]].concat());
                        } else {
                            let lit = rev.fallback_value(&def.fields[j]).unwrap().unwrap();
                            let v =
                                mooncake_wire::codec::Codec::from_json_type(&codec, st.fields[j].ty, &lit_json(&lit))
                                    .unwrap();
                            w.raw(&codec.encode_type(st.fields[j].ty, &v).unwrap());
                        }
                    }
                    let b = w.into_bytes();
                    assert_eq!(typed_rt(gen, m, &b), spec_rt(&codec, m, &b), "{} {m} {what}", gen.revision);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 11, "only {checked} cases: no pull message holds the group table any more");
}

/// A fallback literal as `msgspec.to_builtins` JSON.
fn lit_json(l: &mooncake_wire::spec::Literal) -> serde_json::Value {
    use mooncake_wire::spec::Literal as L;
    match l {
        L::Int(i) => serde_json::json!(*i as i64),
        L::Str(s) => serde_json::json!(s),
        L::Bool(b) => serde_json::json!(b),
        L::EmptyList => serde_json::json!([]),
        L::EmptyDict => serde_json::json!({}),
        L::None => serde_json::Value::Null,
        other => panic!("no JSON for {other:?}"),
    }
}

#[test]
fn status_members_match_the_spec_enum_in_every_revision() {
    for gen in &push::REVISIONS {
        let rev = Spec::builtin().revision(gen.revision).unwrap();
        let Some(e) = rev.enums.get("MooncakeXferResponseStatus") else { continue };
        for m in &e.members {
            let s = typed::Status(m.value);
            assert_eq!(s.name(), Some(m.name.as_str()), "{} {}", gen.revision, m.name);
            assert_eq!(s.is_terminal(), m.terminal == Some(true), "{} {}: terminal", gen.revision, m.name);
        }
    }
    use push as g;
    // A value 0.32.0 lacks is rejected by its decoder and kept by the newest one.
    let b = typed::MooncakeXferResponse::new(typed::Status::LAYOUT_MISS).encode();
    assert_eq!(
        g::vllm_0_32_0::MooncakeXferResponse::decode(&b).unwrap_err().msgspec_message(),
        "Invalid enum value 3 - at `$.status`"
    );
    assert_eq!(typed::MooncakeXferResponse::decode(&b).unwrap().status, typed::Status::LAYOUT_MISS);
    // An unknown value is representable, prints, and round-trips when asked to.
    let b = typed::MooncakeXferResponse::new(typed::Status(7)).encode();
    assert_eq!(
        typed::MooncakeXferResponse::decode(&b).unwrap_err().msgspec_message(),
        "Invalid enum value 7 - at `$.status`"
    );
    let open = typed::MooncakeXferResponse::decode_with(&b, Strictness::OpenStatus).unwrap();
    assert_eq!(open.status.to_string(), "MooncakeXferResponseStatus(7)");
    assert_eq!(open.encode(), b);
}

/// The control tags and the raw replies are the spec's constants, in every pull revision.
#[test]
fn tags_and_raw_constants_are_the_specs() {
    use pull::ControlTag;
    let mut tagged = 0;
    for rev in &Spec::builtin().pull().revisions {
        let codec = Codec::builtin(&rev.revision).unwrap();
        for (tag, message) in ControlTag::ALL {
            if let Some(st) = codec.message_struct(message) {
                assert_eq!(
                    st.fields[0].const_value,
                    Some(Value::Bytes(tag.as_bytes().to_vec())),
                    "{} {message}",
                    rev.revision
                );
                assert_eq!(tag.message(), Some(message));
                tagged += 1;
            }
        }
        let ack = rev.message("Ack").unwrap();
        assert_eq!(ack.constants[0].bytes.as_bytes(), typed::pull::ACK, "{}", rev.revision);
    }
    assert_eq!(tagged, 6, "two control tuples in each of the three revisions");
    assert_eq!(ControlTag(b"other"[..].to_vec().into()).message(), None);
    assert_eq!(ControlTag::GET_META_MSG.to_string(), "b'get_meta_msg'");
    // Matched by element 0, as the prefiller does; an unknown tag decodes as the first tuple, whose error
    // names the tag.
    let done = typed::pull::DoneRecvingMsg { request_id: "r1".into(), remote_port_send_num: vec![] };
    assert_eq!(
        typed::pull::ControlMsg::decode(&done.encode()).unwrap(),
        typed::pull::ControlMsg::DoneRecvingMsg(done.clone())
    );
    let other = [0x92, 0xc4, 0x01, 0x78, 0xa0];
    assert_eq!(
        typed::pull::ControlMsg::decode(&other).unwrap_err().msgspec_message(),
        "Invalid value b'x' - at `$[0]`"
    );
}

/// The tag in an "Invalid value" error is Python's `repr()` of the bytes (values printed by CPython 3).
#[test]
fn bytes_repr_is_pythons() {
    for (b, want) in [
        (&b"other_msg"[..], r#"b'other_msg'"#),
        (b"", r#"b''"#),
        (b"it's", r#"b"it's""#),
        (b"\x00\\'\"", r#"b'\x00\\\'"'"#),
        (b"\t\n\r\x7f\x80\xff ~", r#"b'\t\n\r\x7f\x80\xff ~'"#),
    ] {
        assert_eq!(py_bytes_repr(b), want);
    }
}
