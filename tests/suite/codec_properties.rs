//! Properties of the spec-driven codec over every revision, and agreement of the typed 0.33.0 decoders with
//! it and with msgspec's own vectors.

use mooncake_wire::codec::testgen::{mutate, noncanonical, random_value, Rng, Size};
use mooncake_wire::codec::Codec;
use mooncake_wire::msgpack::Writer;
use mooncake_wire::spec::Spec;
use mooncake_wire::typed::{
    MooncakeXferMetadata, MooncakeXferMetadataRef, MooncakeXferResponse, MooncakeXferResponseRef,
};

/// The owned typed decoder's answer (re-encoded), after checking that the borrowed variant gives the same.
fn typed(message: &str, b: &[u8]) -> Result<Vec<u8>, String> {
    let (owned, borrowed) = match message {
        "MooncakeXferMetadata" => {
            let o = MooncakeXferMetadata::decode(b).map_err(|e| e.msgspec_message());
            let r = MooncakeXferMetadataRef::decode(b).map_err(|e| e.msgspec_message());
            if let (Ok(o), Ok(r)) = (&o, &r) {
                assert_eq!(&r.to_owned_message(), o, "borrowed metadata of {}", hex::encode(b));
            }
            (o.map(|v| v.encode()), r.map(|v| v.encode()))
        }
        _ => {
            let o = MooncakeXferResponse::decode(b).map_err(|e| e.msgspec_message());
            let r = MooncakeXferResponseRef::decode(b).map_err(|e| e.msgspec_message());
            if let (Ok(o), Ok(r)) = (&o, &r) {
                assert_eq!(&r.to_owned_message(), o, "borrowed response of {}", hex::encode(b));
            }
            (o.map(|v| v.encode()), r.map(|v| v.encode()))
        }
    };
    assert_eq!(owned, borrowed, "owned vs borrowed typed decoder on {}", hex::encode(b));
    owned
}

#[test]
fn random_values_round_trip_in_every_revision() {
    let mut rng = Rng::new(7);
    let mut cases = 0;
    for rev in &Spec::builtin().push().revisions {
        let codec = Codec::builtin(&rev.revision).unwrap();
        for message in codec.messages().collect::<Vec<_>>() {
            let ty = codec.message_type(message).unwrap();
            for _ in 0..300 {
                let v = random_value(codec.plan(), ty, &mut rng, Size(4));
                let bytes = codec.encode(message, &v).unwrap();
                let back =
                    codec.decode(message, &bytes).unwrap_or_else(|e| panic!("{} {message}: {e}\n{v}", rev.revision));
                assert_eq!(back, v, "{} {message}", rev.revision);
                // Any valid non-canonical encoding decodes to the same value and re-encodes canonically.
                let nc = noncanonical(codec.plan(), ty, &v, &mut rng);
                let back = codec
                    .decode(message, &nc)
                    .unwrap_or_else(|e| panic!("{} {message}: {e}\n{}", rev.revision, hex::encode(&nc)));
                assert_eq!(
                    codec.encode(message, &back).unwrap(),
                    bytes,
                    "{} {message} from {}",
                    rev.revision,
                    hex::encode(&nc)
                );
                cases += 2;
            }
        }
    }
    assert!(cases > 10_000);
}

#[test]
fn typed_decoders_agree_with_msgspec_vectors() {
    let Some(dir) =
        crate::in_repository("conformance/vectors/vllm-0.33.0", "the typed decoders against msgspec's vectors")
    else {
        return;
    };
    let dir = dir.display();
    let mut checked = 0;
    for message in ["MooncakeXferMetadata", "MooncakeXferResponse"] {
        let text = std::fs::read_to_string(format!("{dir}/{message}.jsonl")).unwrap();
        for line in text.lines().skip(1) {
            let c: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = c["id"].as_str().unwrap();
            let got = typed(message, &hex::decode(c["hex"].as_str().unwrap()).unwrap());
            match c["expect"].as_str().unwrap() {
                "accept" => {
                    let want = c.get("canonical_hex").or(c.get("hex")).unwrap().as_str().unwrap();
                    assert_eq!(got.map(|b| hex::encode(&b)), Ok(want.to_string()), "{message} {id}");
                }
                _ => assert_eq!(got, Err(c["error"].as_str().unwrap().to_string()), "{message} {id}"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 1229 + 600);
}

#[test]
fn typed_and_spec_decoders_agree_on_mutated_inputs() {
    let codec = Codec::builtin("vllm-0.33.0").unwrap();
    let mut rng = Rng::new(11);
    let mut rejected = 0;
    let n = 20_000;
    for i in 0..n {
        let message = if i % 2 == 0 { "MooncakeXferMetadata" } else { "MooncakeXferResponse" };
        let ty = codec.message_type(message).unwrap();
        let v = random_value(codec.plan(), ty, &mut rng, Size(3));
        let base = if rng.chance(50) {
            codec.encode(message, &v).unwrap()
        } else {
            noncanonical(codec.plan(), ty, &v, &mut rng)
        };
        let input = mutate(&base, &mut rng);
        let spec =
            codec.decode(message, &input).map(|v| codec.encode(message, &v).unwrap()).map_err(|e| e.msgspec_message());
        let t = typed(message, &input);
        assert_eq!(t, spec, "{message} input {}", hex::encode(&input));
        rejected += spec.is_err() as usize;
    }
    // The mutations must exercise both outcomes.
    assert!(rejected > n / 4 && rejected < n, "rejected {rejected} of {n}");
}

/// `req_blocks` past the size where the decoders switch from scanning to a hash index, with duplicate keys
/// before and after the switch: last value wins, first position stays (a Python dict), in both decoders.
#[test]
fn large_dicts_with_duplicate_keys() {
    let codec = Codec::builtin("vllm-0.33.0").unwrap();
    // Key of each entry on the wire: 40 distinct ids, with repeats of ids 2, 15, 16 and 30.
    let mut order: Vec<usize> = (0..40).collect();
    order.extend([2, 15, 30, 16, 2]);
    let mut w = Writer::new();
    w.map_len(2);
    w.str("remote_hostname");
    w.str("h");
    w.str("req_blocks");
    w.map_len(order.len());
    for (n, k) in order.iter().enumerate() {
        w.str(&format!("req-{k}"));
        w.array_len(2);
        w.str(&format!("x{n}"));
        w.array_len(1);
        w.int_list(&[(n as u64).into()]);
    }
    let b = w.into_bytes();
    // Missing required fields: decode the dict through the spec decoder's type of `req_blocks` instead.
    let st = codec.message_struct("MooncakeXferMetadata").unwrap();
    let rb_ty = st.fields.iter().find(|f| f.name == "req_blocks").unwrap().ty;
    let dict_bytes = &b[b.iter().position(|&x| x == 0xde).unwrap()..];
    let v = codec.decode_type(rb_ty, dict_bytes).unwrap();
    let entries = v.as_dict().unwrap();
    assert_eq!(entries.len(), 40);
    let last_n = |k: usize| order.iter().rposition(|&x| x == k).unwrap();
    for (i, (key, val)) in entries.iter().enumerate() {
        assert_eq!(key.as_str(), Some(format!("req-{i}").as_str()));
        assert_eq!(val.as_seq().unwrap()[0].as_str(), Some(format!("x{}", last_n(i)).as_str()), "entry {i}");
    }
    // The typed decoders, on a whole message.
    let mut m = Writer::new();
    m.map_len(6);
    {
        let (name, val) = ("remote_hostname", "h");
        m.str(name);
        m.str(val);
    }
    for name in ["remote_port", "remote_tp_size", "remote_tp_rank"] {
        m.str(name);
        m.uint(1);
    }
    m.str("req_blocks");
    m.raw(dict_bytes);
    m.str("kv_caches_base_addr");
    m.array_len(0);
    let m = m.into_bytes();
    let t = MooncakeXferMetadata::decode(&m).unwrap_err();
    assert!(t.msgspec_message().contains("block_lens"), "{t}");
    let spec = codec.decode("MooncakeXferMetadata", &m).unwrap_err();
    assert_eq!(t.msgspec_message(), spec.msgspec_message());
    let mut full = m.clone();
    full[0] = 0x88;
    for name in ["block_lens", "kv_block_lens"] {
        let mut w = Writer::new();
        w.str(name);
        w.array_len(0);
        full.extend(w.into_bytes());
    }
    let t = MooncakeXferMetadata::decode(&full).unwrap();
    assert_eq!(t.req_blocks.len(), 40);
    for (i, (k, rb)) in t.req_blocks.iter().enumerate() {
        assert_eq!(
            (k.as_str(), rb.transfer_id.as_str()),
            (format!("req-{i}").as_str(), format!("x{}", last_n(i)).as_str())
        );
    }
    assert_eq!(
        typed("MooncakeXferMetadata", &full),
        Ok(codec.encode("MooncakeXferMetadata", &codec.decode("MooncakeXferMetadata", &full).unwrap()).unwrap())
    );
}
