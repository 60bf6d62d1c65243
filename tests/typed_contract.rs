//! Checks the typed-layer generator (`src/generate/typed_rs.rs`): the generated structs of every push revision,
//! both generations, against `spec/` and the spec-driven codec of the same revision, row by row.
//!
//! For every field the spec declares, the generated decoder and encoder must: encode a non-default value
//! exactly as the spec-driven codec does; decode to the spec default when absent (and leave it out when
//! encoding); be required exactly when the spec says so; and reject every wrongly-typed value with the spec
//! codec's error and path. One more row checks the struct options (map header from the declared field count,
//! omit_defaults), and the field list must be the spec's. A failing row prints as the diff. That the committed
//! generated code is what the generator makes is `tests/generated.rs`'s job.

use mooncake_wire::codec::testgen::{random_value, Rng, Size};
use mooncake_wire::codec::{Codec, Value};
use mooncake_wire::msgpack::Writer;
use mooncake_wire::spec::Spec;
use mooncake_wire::typed::generated::push::{GeneratedRevision, REVISIONS};
use mooncake_wire::typed::{self, Strictness};

/// Decode then re-encode, as hex, or the error text.
type Outcome = Result<String, String>;

/// Encodes a struct value as a map of the given (name, value) entries, in order (no omission).
fn map_of(codec: &Codec, message: &str, entries: &[(String, Value)]) -> Vec<u8> {
    let st = codec.message_struct(message).unwrap();
    let mut w = Writer::new();
    w.map_len(entries.len());
    for (name, v) in entries {
        w.str(name);
        let f = st.fields.iter().find(|f| &f.wire_name == name).unwrap();
        w.raw(&codec.encode_type(f.ty, v).unwrap());
    }
    w.into_bytes()
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
    ("ext", &[0xd4, 0x01, 0x00]),
];

fn contract(gen: &GeneratedRevision, message: &str) -> Vec<String> {
    let spec = Spec::builtin();
    let rev = spec.revision(gen.revision).unwrap();
    let def = &rev.structs[message];
    let codec = Codec::builtin(gen.revision).unwrap();
    let typed_fields = (gen.fields)(message).expect("generated message");
    let typed = |b: &[u8]| -> Outcome {
        (gen.round_trip)(message, b, Strictness::Msgspec)
            .expect("generated message")
            .map(|v| hex::encode(&v))
            .map_err(|e| e.msgspec_message())
    };
    let st = codec.message_struct(message).unwrap();
    let spec_rt = |b: &[u8]| -> Outcome {
        codec
            .decode(message, b)
            .map(|v| hex::encode(codec.encode(message, &v).unwrap()))
            .map_err(|e| e.msgspec_message())
    };
    let mut rng = Rng::new(20261129);
    // One non-default sample per field, and the required fields' samples as the base of every probe.
    let sample = |i: usize, rng: &mut Rng| loop {
        let v = random_value(codec.plan(), st.fields[i].ty, rng, Size(3));
        if st.fields[i].default.as_ref() != Some(&v) {
            return v;
        }
    };
    let samples: Vec<Value> = (0..st.fields.len()).map(|i| sample(i, &mut rng)).collect();
    let required: Vec<usize> = (0..st.fields.len()).filter(|&i| st.fields[i].default.is_none()).collect();
    let entries_with = |extra: Option<usize>, skip: Option<usize>| -> Vec<(String, Value)> {
        (0..st.fields.len())
            .filter(|i| (required.contains(i) || Some(*i) == extra) && Some(*i) != skip)
            .map(|i| (st.fields[i].wire_name.clone(), samples[i].clone()))
            .collect()
    };

    let mut rows = vec![];
    let mut failures = vec![];
    let mut row = |cells: Vec<String>, ok: bool| {
        let line = format!("| {} | {} |", cells.join(" | "), if ok { "ok" } else { "MISMATCH" });
        if !ok {
            failures.push(line.clone());
        }
        rows.push(line);
    };
    for (i, f) in def.fields.iter().enumerate() {
        let mut problems = vec![];
        // Position and name.
        if typed_fields.get(i) != Some(&f.name.as_str()) {
            problems.push(format!("typed field {i} is {:?}", typed_fields.get(i)));
        }
        // Encoding of a non-default value.
        let full = map_of(&codec, message, &entries_with(Some(i), None));
        match (typed(&full), spec_rt(&full)) {
            (Ok(a), Ok(b)) if a == b => {}
            (a, b) => problems.push(format!("non-default value: typed {a:?} vs spec {b:?}")),
        }
        // Default: absent on the wire decodes to the default and is left out again.
        if f.default.is_some() || f.default_factory.is_some() {
            let minimal = map_of(&codec, message, &entries_with(None, None));
            match (typed(&minimal), spec_rt(&minimal)) {
                (Ok(a), Ok(b)) if a == b && a == hex::encode(&minimal) => {}
                (a, b) => problems.push(format!("default: typed {a:?} vs spec {b:?}")),
            }
        }
        // Required-ness.
        let without = map_of(&codec, message, &entries_with(None, Some(i)));
        let (t, s) = (typed(&without), spec_rt(&without));
        if t != s {
            problems.push(format!("absent: typed {t:?} vs spec {s:?}"));
        }
        if f.required() != s.is_err() {
            problems.push(format!(
                "spec says required={}, the spec codec {}",
                f.required(),
                if s.is_err() { "rejects" } else { "accepts" }
            ));
        }
        // Type: every other kind of value in this field's place.
        for (kind, raw) in WRONG_KINDS {
            let mut w = Writer::new();
            let entries = entries_with(None, Some(i));
            w.map_len(entries.len() + 1);
            for (name, v) in &entries {
                w.str(name);
                let ff = st.fields.iter().find(|x| &x.wire_name == name).unwrap();
                w.raw(&codec.encode_type(ff.ty, v).unwrap());
            }
            w.str(&f.name);
            w.raw(raw);
            let b = w.into_bytes();
            let (t, s) = (typed(&b), spec_rt(&b));
            if t != s {
                problems.push(format!("{kind}: typed {t:?} vs spec {s:?}"));
            }
        }
        row(
            vec![
                (i + 1).to_string(),
                format!("`{}`", f.name),
                format!("`{}`", f.ty),
                f.default_display(),
                problems.join("; "),
            ],
            problems.is_empty(),
        );
    }
    // Struct options: header width from the declared count, omit_defaults on the all-default value.
    let minimal = map_of(&codec, message, &entries_with(None, None));
    let options_ok = typed(&minimal).ok() == spec_rt(&minimal).ok()
        && st.declared == typed_fields.len()
        && st.omit_defaults
        && !st.array_like
        && st.tag.is_none();
    row(
        vec![
            "—".into(),
            "(struct options)".into(),
            format!("{:?}", def.options),
            format!("{} declared", st.declared),
            String::new(),
        ],
        options_ok,
    );
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
fn every_generated_message_matches_the_spec_row_by_row() {
    let spec = Spec::builtin();
    let push = spec.push();
    assert_eq!(
        REVISIONS.iter().map(|g| g.revision).collect::<Vec<_>>(),
        push.revisions.iter().map(|r| r.revision.as_str()).collect::<Vec<_>>(),
        "one generated module per push revision"
    );
    let mut failures = vec![];
    let mut checked = 0;
    for gen in &REVISIONS {
        let rev = push.revision(gen.revision).unwrap();
        let msgpack: Vec<&str> =
            rev.transport.messages.iter().filter(|m| m.encoding == "msgpack").map(|m| m.name.as_str()).collect();
        assert_eq!(gen.messages, msgpack.as_slice(), "{}: generated messages", gen.revision);
        for m in msgpack {
            let names: Vec<&str> = rev.structs[m].fields.iter().map(|f| f.name.as_str()).collect();
            assert_eq!((gen.fields)(m).unwrap(), names.as_slice(), "{} {m}: field list", gen.revision);
            failures.extend(contract(gen, m).into_iter().map(|f| format!("{} {m}: {f}", gen.revision)));
            checked += 1;
        }
    }
    assert!(checked >= 23, "only {checked} messages checked");
    assert!(failures.is_empty(), "generated structs differ from spec/:\n{}", failures.join("\n"));
}

#[test]
fn status_members_match_the_spec_enum_in_every_revision() {
    use typed::generated::push as g;
    let spec = Spec::builtin();
    let members = |r: &str| -> Vec<(String, i64, bool)> {
        spec.revision(r).unwrap().enums["MooncakeXferResponseStatus"]
            .members
            .iter()
            .map(|m| (m.name.clone(), m.value, m.terminal == Some(true)))
            .collect()
    };
    let generated = |list: &[typed::Status]| -> Vec<(String, i64, bool)> {
        list.iter().map(|s| (s.name().unwrap().to_string(), s.0, s.is_terminal())).collect()
    };
    assert_eq!(
        generated(&g::vllm_0_16_0_to_0_18_1::MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS),
        members("vllm-0.16.0..0.18.1")
    );
    assert_eq!(generated(&g::vllm_0_32_0::MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS), members("vllm-0.32.0"));
    assert_eq!(generated(&g::vllm_0_33_0::MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS), members("vllm-0.33.0"));
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
