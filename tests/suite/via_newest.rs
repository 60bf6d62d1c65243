//! The generated per-revision codecs the sans-IO cores speak (`src/typed/generated/via_newest.rs`) against the
//! spec-driven path they replace for built-in revisions: for every generation-2 revision, random valid
//! messages, mutations of them and random newest-revision messages must give the same decoded struct or the
//! same msgspec error, and the same bytes or a refusal in both. A revision loaded at run time keeps the
//! spec-driven path; this test builds one such profile per revision to compare with.

use std::sync::Arc;

use mooncake_wire::codec::convert::ConvertError;
use mooncake_wire::codec::testgen::{mutate, random_value, Rng, Size};
use mooncake_wire::codec::Codec;
use mooncake_wire::proto::{CarryError, WireProfile};
use mooncake_wire::spec::Spec;
use mooncake_wire::typed::{self, MooncakeXferMetadata, MooncakeXferResponse};

const META: &str = "MooncakeXferMetadata";
const RESP: &str = "MooncakeXferResponse";

/// The built-in profile (generated code) and a spec-driven one of the same revision (a copy of the spec
/// revision, so not the built-in one).
fn both(revision: &str) -> (WireProfile, WireProfile) {
    let generated = WireProfile::builtin(revision).unwrap();
    let copy = Arc::new((**Spec::builtin().revision(revision).unwrap()).clone());
    let spec = WireProfile::new(copy.clone(), Arc::new(Codec::new(copy).unwrap())).unwrap();
    assert!(generated.is_generated(), "{revision}: the built-in profile is not generated");
    assert!(!spec.is_generated(), "{revision}: a copied revision must take the spec-driven path");
    (generated, spec)
}

fn gen2() -> Vec<String> {
    Spec::builtin().push().revisions.iter().filter(|r| r.generation == 2).map(|r| r.revision.clone()).collect()
}

/// Same verdict from both decoders; the same struct or the same msgspec error.
fn same_decode<T: PartialEq + std::fmt::Debug>(
    what: &str,
    bytes: &[u8],
    a: Result<T, mooncake_wire::codec::DecodeError>,
    b: Result<T, mooncake_wire::codec::DecodeError>,
) -> bool {
    match (&a, &b) {
        (Ok(x), Ok(y)) => assert_eq!(x, y, "{what}: decoded differently: {}", hex::encode(bytes)),
        (Err(x), Err(y)) => {
            assert_eq!(x.msgspec_message(), y.msgspec_message(), "{what}: different errors: {}", hex::encode(bytes))
        }
        _ => panic!("{what}: generated {a:?}, spec-driven {b:?}: {}", hex::encode(bytes)),
    }
    a.is_ok()
}

fn same_encode(what: &str, a: Result<Vec<u8>, CarryError>, b: Result<Vec<u8>, CarryError>) -> bool {
    match (&a, &b) {
        (Ok(x), Ok(y)) => assert_eq!(hex::encode(x), hex::encode(y), "{what}: encoded differently"),
        (Err(_), Err(_)) => {}
        _ => panic!("{what}: generated {a:?}, spec-driven {b:?}"),
    }
    a.is_ok()
}

#[test]
fn generated_codecs_agree_with_the_spec_driven_path_in_every_revision() {
    let newest = Codec::builtin(typed::REVISION).unwrap();
    let mut rng = Rng::new(0x5eed_0016);
    let (mut accepted, mut refused, mut sayable, mut unsayable) = (0, 0, 0, 0);
    let revisions = gen2();
    assert!(revisions.len() >= 11, "{revisions:?}");
    for rev in &revisions {
        let (g, s) = both(rev);
        let codec = g.codec().clone();
        for i in 0..200 {
            let size = Size(1 + i % 6);
            // Valid messages of this revision, then mutations of them.
            let v = random_value(codec.plan(), codec.message_type(META).unwrap(), &mut rng, size);
            let bytes = codec.encode(META, &v).unwrap();
            let what = format!("{rev} {META} #{i}");
            assert!(same_decode(&what, &bytes, g.decode_metadata(&bytes), s.decode_metadata(&bytes)));
            let m = g.decode_metadata(&bytes).unwrap();
            same_encode(&what, g.encode_metadata(&m), s.encode_metadata(&m));
            assert_eq!(
                hex::encode(g.encode_metadata(&m).unwrap()),
                hex::encode(&bytes),
                "{what}: not the canonical bytes"
            );
            let v = random_value(codec.plan(), codec.message_type(RESP).unwrap(), &mut rng, size);
            let rbytes = codec.encode(RESP, &v).unwrap();
            let what = format!("{rev} {RESP} #{i}");
            assert!(same_decode(&what, &rbytes, g.decode_response(&rbytes), s.decode_response(&rbytes)));
            let r = g.decode_response(&rbytes).unwrap();
            assert_eq!(
                hex::encode(g.encode_response(&r).unwrap()),
                hex::encode(&rbytes),
                "{what}: not the canonical bytes"
            );
            for _ in 0..4 {
                let bad = mutate(&bytes, &mut rng);
                let ok = same_decode(
                    &format!("{rev} {META} mutated"),
                    &bad,
                    g.decode_metadata(&bad),
                    s.decode_metadata(&bad),
                );
                if ok {
                    accepted += 1
                } else {
                    refused += 1
                }
                let bad = mutate(&rbytes, &mut rng);
                let ok = same_decode(
                    &format!("{rev} {RESP} mutated"),
                    &bad,
                    g.decode_response(&bad),
                    s.decode_response(&bad),
                );
                if ok {
                    accepted += 1
                } else {
                    refused += 1
                }
            }
            // A newest-revision message said in this revision: same bytes, or refused by both.
            let v = random_value(newest.plan(), newest.message_type(META).unwrap(), &mut rng, size);
            let m = MooncakeXferMetadata::decode(&newest.encode(META, &v).unwrap()).unwrap();
            let ok = same_encode(&format!("{rev} newest {META} #{i}"), g.encode_metadata(&m), s.encode_metadata(&m));
            if ok {
                sayable += 1
            } else {
                unsayable += 1
            }
            let v = random_value(newest.plan(), newest.message_type(RESP).unwrap(), &mut rng, size);
            let r = MooncakeXferResponse::decode(&newest.encode(RESP, &v).unwrap()).unwrap();
            let ok = same_encode(&format!("{rev} newest {RESP} #{i}"), g.encode_response(&r), s.encode_response(&r));
            if ok {
                sayable += 1
            } else {
                unsayable += 1
            }
        }
    }
    println!("mutated: {accepted} accepted, {refused} refused; newest messages: {sayable} sayable, {unsayable} not");
    // Both branches of each comparison were taken, so neither side agreed only by never being asked.
    assert!(accepted > 100 && refused > 1000, "{accepted} accepted, {refused} refused");
    assert!(sayable > 100 && unsayable > 100, "{sayable} sayable, {unsayable} not");
}

#[test]
fn what_an_older_revision_cannot_carry_is_named() {
    let (g, _) = both("vllm-0.19.0..0.19.1");
    let mut m = MooncakeXferMetadata { layout_id: 7u64.into(), ..Default::default() };
    let e = g.encode_metadata(&m).unwrap_err();
    assert_eq!(e.to_string(), "vllm-0.19.0..0.19.1: no field `layout_id`, so 7 cannot be sent");
    match &e {
        CarryError::Convert(ConvertError::InRevision { revision, source }) => {
            assert_eq!(revision, "vllm-0.19.0..0.19.1");
            assert!(
                matches!(&**source, ConvertError::Lacking { field, value } if field == "layout_id" && value == "7")
            );
        }
        other => panic!("{other:?}"),
    }
    m.layout_id = 0u64.into();
    m.req_blocks.push((
        "r1".into(),
        typed::ReqBlocks { transfer_id: "t".into(), blocks: vec![vec![1u64.into()], vec![2u64.into()]] },
    ));
    assert_eq!(
        g.encode_metadata(&m).unwrap_err().to_string(),
        "vllm-0.19.0..0.19.1: one block list per request is carried; r1 has 2 groups"
    );
    let r = MooncakeXferResponse::new(typed::Status::LAYOUT_MISS);
    assert_eq!(
        g.encode_response(&r).unwrap_err().to_string(),
        "vllm-0.19.0..0.19.1: no MooncakeXferResponseStatus member LAYOUT_MISS"
    );
}
