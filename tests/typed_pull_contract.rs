//! The wire contract of the typed pull structs (`mooncake_wire::typed::pull`, vllm-ascend 0.23.0.post1),
//! checked against `spec/` row by row, for every message of the revision.
//!
//! For every field (every element of a control tuple) the spec declares, the typed struct must: sit at the
//! same position under the same name; encode a non-default value exactly as the spec-driven codec does;
//! decode to the spec default when absent, drop an explicit default again, and leave it out when encoding;
//! be required exactly when the spec says so; reject every wrongly-typed value with the spec codec's error;
//! and, for a tuple's tag, hold the spec's constant and reject any other bytes as the spec codec does. One more
//! row per message checks the struct options (map or exact-length array, omit_defaults, declared count). A
//! failing row prints as the diff. Then the typed and spec decoders must agree on random and mutated inputs.

use mooncake_wire::codec::testgen::{mutate, noncanonical, random_value, Rng, Size};
use mooncake_wire::codec::{py_bytes_repr, Codec, Value};
use mooncake_wire::msgpack::Writer;
use mooncake_wire::spec::{Spec, StructKind};
use mooncake_wire::typed::pull::{self, DoneRecvingMsg, GetMetaMsg, MooncakeAgentMetadata, RemotePortInfo};

/// Decode then re-encode, as hex, or the error text.
type Outcome = Result<String, String>;
type TypedRoundTrip = fn(&[u8]) -> Outcome;

/// How the typed struct writes itself: what the options row expects of the spec.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    /// A map in declaration order (`omit_defaults` as given).
    Map { omit_defaults: bool },
    /// A control tuple: an array of exactly its elements; element 0 the tag.
    Tuple { tag: &'static [u8] },
}

struct Typed {
    message: &'static str,
    kind: StructKind,
    fields: &'static [&'static str],
    shape: Shape,
    round_trip: TypedRoundTrip,
}

fn typed_messages() -> Vec<Typed> {
    vec![
        Typed {
            message: "MooncakeAgentMetadata",
            kind: StructKind::MsgspecStruct,
            fields: &pull::AGENT_METADATA_FIELDS,
            shape: Shape::Map { omit_defaults: true },
            round_trip: |b| {
                MooncakeAgentMetadata::decode(b).map(|v| hex::encode(v.encode())).map_err(|e| e.msgspec_message())
            },
        },
        Typed {
            message: "RemotePortInfo",
            kind: StructKind::Dataclass,
            fields: &pull::REMOTE_PORT_INFO_FIELDS,
            shape: Shape::Map { omit_defaults: false },
            round_trip: |b| RemotePortInfo::decode(b).map(|v| hex::encode(v.encode())).map_err(|e| e.msgspec_message()),
        },
        Typed {
            message: "GetMetaMsg",
            kind: StructKind::Tuple,
            fields: &pull::GET_META_FIELDS,
            shape: Shape::Tuple { tag: GetMetaMsg::TAG.0.as_ref() },
            round_trip: |b| GetMetaMsg::decode(b).map(|v| hex::encode(v.encode())).map_err(|e| e.msgspec_message()),
        },
        Typed {
            message: "DoneRecvingMsg",
            kind: StructKind::Tuple,
            fields: &pull::DONE_RECVING_FIELDS,
            shape: Shape::Tuple { tag: DoneRecvingMsg::TAG.0.as_ref() },
            round_trip: |b| DoneRecvingMsg::decode(b).map(|v| hex::encode(v.encode())).map_err(|e| e.msgspec_message()),
        },
    ]
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

/// One encoded entry: a field (by index) with its value already encoded, or raw bytes.
type Entry = (usize, Vec<u8>);

/// The message from entries: a map of (wire name, value) in the given order, or an array of the values.
fn message_bytes(codec: &Codec, t: &Typed, entries: &[Entry]) -> Vec<u8> {
    let st = codec.message_struct(t.message).unwrap();
    let mut w = Writer::new();
    match t.shape {
        Shape::Map { .. } => {
            w.map_len(entries.len());
            for (i, v) in entries {
                w.str(&st.fields[*i].wire_name);
                w.raw(v);
            }
        }
        Shape::Tuple { .. } => {
            w.array_len(entries.len());
            for (_, v) in entries {
                w.raw(v);
            }
        }
    }
    w.into_bytes()
}

fn contract(t: &Typed) -> Vec<String> {
    let spec = Spec::builtin();
    let rev = spec.revision(pull::REVISION).unwrap();
    let def = &rev.structs[t.message];
    let codec = Codec::builtin(pull::REVISION).unwrap();
    let st = codec.message_struct(t.message).unwrap();
    let spec_rt = |b: &[u8]| -> Outcome {
        codec
            .decode(t.message, b)
            .map(|v| hex::encode(codec.encode(t.message, &v).unwrap()))
            .map_err(|e| e.msgspec_message())
    };
    let typed = t.round_trip;
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
        // A map takes an extra entry at its end (after the others), as a late key.
        if let (Some((j, raw)), Shape::Map { .. }) = (&extra, t.shape) {
            if skip == Some(*j) {
                out.push((*j, raw.clone()));
            }
        }
        out
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
    let agree = |problems: &mut Vec<String>, what: &str, b: &[u8]| {
        let (x, y) = (typed(b), spec_rt(b));
        if x != y {
            problems.push(format!("{what}: typed {x:?} vs spec {y:?}"));
        }
        y
    };
    for (i, f) in def.fields.iter().enumerate() {
        let mut problems = vec![];
        if t.fields.get(i) != Some(&f.name.as_str()) {
            problems.push(format!("typed field {i} is {:?}", t.fields.get(i)));
        }
        // A non-default value (every element of a tuple is present).
        let full = message_bytes(&codec, t, &entries_with(Some((i, enc(i, &samples[i]))), None));
        if agree(&mut problems, "non-default value", &full).is_err() {
            problems.push("the spec codec rejects a well-typed value".into());
        }
        // Default: absent decodes to it and stays absent; written explicitly, it is dropped again.
        if let Some(d) = &st.fields[i].default {
            let minimal = message_bytes(&codec, t, &entries_with(None, None));
            let r = agree(&mut problems, "default absent", &minimal);
            if r != Ok(hex::encode(&minimal)) {
                problems.push(format!("default absent: spec {r:?}"));
            }
            let explicit = message_bytes(&codec, t, &entries_with(Some((i, enc(i, d))), None));
            let r = agree(&mut problems, "default explicit", &explicit);
            let dropped = matches!(t.shape, Shape::Map { omit_defaults: true });
            if dropped && r != Ok(hex::encode(&minimal)) {
                problems.push(format!("default explicit: spec {r:?}, not the minimal encoding"));
            }
        }
        // Required-ness.
        let without = message_bytes(&codec, t, &entries_with(None, Some(i)));
        let s = agree(&mut problems, "absent", &without);
        if f.required() != s.is_err() {
            problems.push(format!(
                "spec says required={}, the spec codec {}",
                f.required(),
                if s.is_err() { "rejects" } else { "accepts" }
            ));
        }
        // Type: every other kind of value in this field's place.
        for (kind, raw) in WRONG_KINDS {
            // In a map the wrong value comes as the last key; in a tuple it takes the element's place.
            let skip = matches!(t.shape, Shape::Map { .. }).then_some(i);
            let b = message_bytes(&codec, t, &entries_with(Some((i, raw.to_vec())), skip));
            let _ = agree(&mut problems, kind, &b);
        }
        // A tag: the spec's constant is the typed one, and other bytes are refused alike.
        if let Some(c) = &f.const_value {
            if let Shape::Tuple { tag } = t.shape {
                let want = Value::Bytes(tag.to_vec());
                if st.fields[i].const_value.as_ref() != Some(&want) {
                    problems.push(format!("const: spec {c} vs typed {want}"));
                }
            } else {
                problems.push("a const field in a map-shaped typed struct".into());
            }
            for other in
                [&b"other_msg"[..], b"", b"get_meta_msg\x00", b"done_recving_msg", b"get_meta_msg", b"it's \"q\"\n\xff"]
            {
                let b = message_bytes(&codec, t, &entries_with(Some((i, enc(i, &Value::Bytes(other.to_vec())))), None));
                let _ = agree(&mut problems, &format!("tag {}", py_bytes_repr(other)), &b);
            }
        }
        let default = match &f.const_value {
            Some(c) => format!("const {c}"),
            None => f.default_display(),
        };
        row(
            vec![(i + 1).to_string(), format!("`{}`", f.name), format!("`{}`", f.ty), default, problems.join("; ")],
            problems.is_empty(),
        );
    }
    // Struct options.
    let options_ok = def.kind == t.kind
        && st.declared == t.fields.len()
        && st.tag.is_none()
        && match t.shape {
            Shape::Map { omit_defaults } => {
                st.omit_defaults == omit_defaults && !st.array_like && !st.forbid_unknown_fields
            }
            Shape::Tuple { .. } => st.array_like && st.exact_len && st.forbid_unknown_fields,
        };
    row(
        vec![
            "—".into(),
            "(struct options)".into(),
            format!("{:?} {:?}", def.kind, def.options),
            format!("{} declared", st.declared),
            match t.shape {
                Shape::Map { omit_defaults } => format!("typed: map, omit_defaults={omit_defaults}"),
                Shape::Tuple { tag } => format!("typed: array of {}, tag {}", t.fields.len(), py_bytes_repr(tag)),
            },
        ],
        options_ok,
    );
    println!(
        "\n{} ({}):\n| # | field | type | default | notes | result |\n|---|---|---|---|---|---|",
        t.message,
        pull::REVISION
    );
    for r in &rows {
        println!("{r}");
    }
    failures
}

#[test]
fn every_pull_message_matches_the_spec_row_by_row() {
    let all = typed_messages();
    // Every message of the revision has a typed struct.
    let rev = Spec::builtin().revision(pull::REVISION).unwrap();
    let mut spec_names: Vec<&str> = rev.structs.keys().map(String::as_str).collect();
    let mut typed_names: Vec<&str> = all.iter().map(|t| t.message).collect();
    spec_names.sort();
    typed_names.sort();
    assert_eq!(typed_names, spec_names, "typed::pull covers exactly the messages of {}", pull::REVISION);
    let mut failures = vec![];
    for t in &all {
        failures.extend(contract(t).into_iter().map(|f| format!("{}: {f}", t.message)));
    }
    assert!(failures.is_empty(), "typed pull structs differ from spec/:\n{}", failures.join("\n"));
}

#[test]
fn ack_is_the_spec_constant() {
    let rev = Spec::builtin().revision(pull::REVISION).unwrap();
    let ack = rev.message("Ack").unwrap();
    assert_eq!(ack.encoding, "raw");
    assert_eq!(ack.constants.len(), 1);
    assert_eq!(ack.constants[0].bytes.as_bytes(), pull::ACK);
    // The tags are the spec's constants too, and name their messages.
    for (tag, message) in pull::ControlTag::KNOWN {
        let codec = Codec::builtin(pull::REVISION).unwrap();
        assert_eq!(
            codec.message_struct(message).unwrap().fields[0].const_value,
            Some(Value::Bytes(tag.as_bytes().to_vec())),
            "{message}"
        );
        assert_eq!(tag.message(), Some(message));
    }
    assert_eq!(pull::ControlTag(b"other"[..].to_vec().into()).message(), None);
    assert_eq!(pull::ControlTag::GET_META.to_string(), "b'get_meta_msg'");
}

/// Random well-typed values, their non-canonical encodings and mutations of both: typed and spec decoders
/// give the same verdict, error text and re-encoding.
#[test]
fn typed_and_spec_decoders_agree_on_random_and_mutated_inputs() {
    let codec = Codec::builtin(pull::REVISION).unwrap();
    let mut rng = Rng::new(23);
    let all = typed_messages();
    let n = 4_000;
    let mut rejected = 0;
    for k in 0..n {
        let t = &all[k % all.len()];
        let ty = codec.message_type(t.message).unwrap();
        let v = random_value(codec.plan(), ty, &mut rng, Size(3));
        let canonical = codec.encode(t.message, &v).unwrap();
        assert_eq!((t.round_trip)(&canonical), Ok(hex::encode(&canonical)), "{} canonical", t.message);
        let nc = noncanonical(codec.plan(), ty, &v, &mut rng);
        assert_eq!((t.round_trip)(&nc), Ok(hex::encode(&canonical)), "{} from {}", t.message, hex::encode(&nc));
        let base = if rng.chance(50) { canonical } else { nc };
        let input = mutate(&base, &mut rng);
        let spec = codec
            .decode(t.message, &input)
            .map(|v| hex::encode(codec.encode(t.message, &v).unwrap()))
            .map_err(|e| e.msgspec_message());
        assert_eq!((t.round_trip)(&input), spec, "{} input {}", t.message, hex::encode(&input));
        rejected += spec.is_err() as usize;
    }
    assert!(rejected > n / 4 && rejected < n, "rejected {rejected} of {n}");
}

/// Untyped (`any`) maps keep Python's dict rules as the spec codec does: `0.0` and `-0.0` are one key, two
/// NaN keys are two, an int and a float are different keys here, a list key is refused, an ext value is
/// refused. Built by hand inside `kv_group2layeridx`, since random values rarely hit these cases.
#[test]
fn untyped_values_follow_the_spec_codec() {
    let codec = Codec::builtin(pull::REVISION).unwrap();
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
    for (what, any) in cases {
        // {"engine_id": "", ..., "kv_group2layeridx": {7: ({"k": <any>}, [])}, ...}
        let mut w = Writer::new();
        w.map_len(9);
        for (name, value) in [
            ("engine_id", vec![0xa0]),
            ("te_rpc_port", vec![0x01]),
            ("kv_group2layeridx", [&[0x81, 0x07, 0x92, 0x81, 0xa1, 0x6b][..], &any, &[0x90]].concat()),
            ("block_size", vec![0x01]),
            ("kv_caches_base_addr", vec![0x90]),
            ("block_size_scale", vec![0x90]),
            ("num_blocks", vec![0x01]),
            ("block_lens", vec![0x90]),
            ("block_strides", vec![0x90]),
        ] {
            w.str(name);
            w.raw(&value);
        }
        let b = w.into_bytes();
        let spec = codec
            .decode("MooncakeAgentMetadata", &b)
            .map(|v| hex::encode(codec.encode("MooncakeAgentMetadata", &v).unwrap()))
            .map_err(|e| e.msgspec_message());
        let typed = MooncakeAgentMetadata::decode(&b).map(|v| hex::encode(v.encode())).map_err(|e| e.msgspec_message());
        assert_eq!(typed, spec, "{what}");
    }
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
