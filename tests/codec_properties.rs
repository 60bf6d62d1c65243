//! Properties of the spec-driven codec over every revision, and agreement of the typed 0.33.0 decoders with
//! it and with msgspec's own vectors.

use mooncake_wire::codec::testgen::{mutate, noncanonical, random_value, Rng, Size};
use mooncake_wire::codec::Codec;
use mooncake_wire::spec::Spec;
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn typed(message: &str, b: &[u8]) -> Result<Vec<u8>, String> {
    match message {
        "MooncakeXferMetadata" => MooncakeXferMetadata::decode(b).map(|v| v.encode()).map_err(|e| e.msgspec_message()),
        _ => MooncakeXferResponse::decode(b).map(|v| v.encode()).map_err(|e| e.msgspec_message()),
    }
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
                let back = codec.decode(message, &bytes).unwrap_or_else(|e| panic!("{} {message}: {e}\n{v}", rev.revision));
                assert_eq!(back, v, "{} {message}", rev.revision);
                // Any valid non-canonical encoding decodes to the same value and re-encodes canonically.
                let nc = noncanonical(codec.plan(), ty, &v, &mut rng);
                let back = codec.decode(message, &nc).unwrap_or_else(|e| panic!("{} {message}: {e}\n{}", rev.revision, hex(&nc)));
                assert_eq!(codec.encode(message, &back).unwrap(), bytes, "{} {message} from {}", rev.revision, hex(&nc));
                cases += 2;
            }
        }
    }
    assert!(cases > 10_000);
}

#[test]
fn typed_decoders_agree_with_msgspec_vectors() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance/vectors/vllm-0.33.0");
    let mut checked = 0;
    for message in ["MooncakeXferMetadata", "MooncakeXferResponse"] {
        let text = std::fs::read_to_string(format!("{dir}/{message}.jsonl")).unwrap();
        for line in text.lines().skip(1) {
            let c: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = c["id"].as_str().unwrap();
            let got = typed(message, &unhex(c["hex"].as_str().unwrap()));
            match c["expect"].as_str().unwrap() {
                "accept" => {
                    let want = c.get("canonical_hex").or(c.get("hex")).unwrap().as_str().unwrap();
                    assert_eq!(got.map(|b| hex(&b)), Ok(want.to_string()), "{message} {id}");
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
        let base = if rng.chance(50) { codec.encode(message, &v).unwrap() } else { noncanonical(codec.plan(), ty, &v, &mut rng) };
        let input = mutate(&base, &mut rng);
        let spec = codec.decode(message, &input).map(|v| codec.encode(message, &v).unwrap()).map_err(|e| e.msgspec_message());
        let t = typed(message, &input);
        assert_eq!(t, spec, "{message} input {}", hex(&input));
        rejected += spec.is_err() as usize;
    }
    // The mutations must exercise both outcomes.
    assert!(rejected > n / 4 && rejected < n, "rejected {rejected} of {n}");
}
