//! The typed decoders (`mooncake_wire::typed`, generated from the spec): every input is decoded as both
//! messages.
//!
//! Invariants:
//! * the typed decoder and the spec-driven decoder of the newest revision agree: same verdict, same msgspec
//!   error text (path included), and for accepted input the same canonical bytes;
//! * typed round trip: `decode(encode(x)) == x` and the encoding is a fixed point;
//! * every proper prefix of an accepted input is rejected as truncated;
//! * the typed struct and the spec-driven value are the same message both ways (`WireProfile::metadata_value`
//!   / `metadata_from_value`: through the generated encoder and decoder, no field list of their own);
//! * `Strictness::OpenStatus` accepts everything `Msgspec` accepts, with the same value; a status it keeps
//!   that vLLM does not define is refused again by the strict decoder after a round trip.
//!
//! Every other generation-2 revision reaches the typed structs through its generated conversions
//! (`to_newest` / `from_newest`, what `WireProfile` decodes and encodes with for a built-in revision): one of
//! them per input (the input's length picks it) decodes the input as both messages, and the generated path
//! must agree with the spec codec (same verdict and error; the struct converts back to the spec codec's value
//! and its canonical bytes, so `from_newest` undoes `to_newest`) and with the spec-driven path a revision
//! loaded at run time takes (`mooncake_wire::codec::convert`: same struct or same error, same bytes).

use std::sync::{Arc, OnceLock};

use mooncake_wire::codec::{Codec, DecodeError, DecodeErrorKind, Value};
use mooncake_wire::proto::{CarryError, WireProfile};
use mooncake_wire::spec::Spec;
use mooncake_wire::typed::{self, MooncakeXferMetadata, MooncakeXferResponse, Strictness};

use super::prefiller::profiles;

use crate::valeq;

const META: &str = "MooncakeXferMetadata";
const RESP: &str = "MooncakeXferResponse";

/// The target body: runs the input through the code under test and checks the invariants above; panics when one
/// breaks, ignores an input it cannot use.
pub fn run(data: &[u8]) {
    let codec = Codec::builtin(typed::REVISION).expect("newest revision");
    let newest = profiles().iter().find(|p| p.name() == typed::REVISION).expect("the newest revision's profile");
    metadata(newest, &codec, data);
    response(newest, &codec, data);
    let others: Vec<(&WireProfile, &WireProfile)> =
        profiles().iter().zip(spec_driven()).filter(|(p, _)| p.name() != typed::REVISION).collect();
    if !others.is_empty() {
        let (p, s) = others[data.len() % others.len()];
        other_revision(p, s, data);
    }
}

/// For each profile of [`profiles`], a profile of the same revision loaded as a copy (not the built-in one):
/// the spec-driven path a revision from a spec given at run time takes.
fn spec_driven() -> &'static [WireProfile] {
    static P: OnceLock<Vec<WireProfile>> = OnceLock::new();
    P.get_or_init(|| {
        profiles()
            .iter()
            .map(|p| {
                let copy = Arc::new((**Spec::builtin().revision(p.name()).expect("built in")).clone());
                let s = WireProfile::new(copy.clone(), Arc::new(Codec::new(copy).expect("compiles")))
                    .expect("a copied revision has a profile");
                assert!(p.is_generated() && !s.is_generated(), "{}: one generated, one spec-driven", p.name());
                s
            })
            .collect()
    })
}

/// The same verdict and error, or the same struct.
fn same<T: PartialEq + std::fmt::Debug>(
    what: &str,
    data: &[u8],
    a: &Result<T, DecodeError>,
    b: &Result<T, DecodeError>,
) {
    match (a, b) {
        (Ok(x), Ok(y)) => assert_eq!(x, y, "{what}: decoded differently: {}", hex::encode(data)),
        (Err(x), Err(y)) => {
            assert_eq!(x.msgspec_message(), y.msgspec_message(), "{what}: errors differ: {}", hex::encode(data))
        }
        _ => panic!("{what}: {a:?} vs {b:?}: {}", hex::encode(data)),
    }
}

/// One message's entry points on a profile.
struct Ops<T> {
    name: &'static str,
    decode: fn(&WireProfile, &[u8]) -> Result<T, DecodeError>,
    encode: fn(&WireProfile, &T) -> Result<Vec<u8>, CarryError>,
    value: fn(&WireProfile, &T) -> Result<Value, CarryError>,
    from_value: fn(&WireProfile, &Value) -> Result<T, CarryError>,
}

const META_OPS: Ops<MooncakeXferMetadata> = Ops {
    name: META,
    decode: WireProfile::decode_metadata,
    encode: WireProfile::encode_metadata,
    value: WireProfile::metadata_value,
    from_value: WireProfile::metadata_from_value,
};

const RESP_OPS: Ops<MooncakeXferResponse> = Ops {
    name: RESP,
    decode: WireProfile::decode_response,
    encode: WireProfile::encode_response,
    value: WireProfile::response_value,
    from_value: WireProfile::response_from_value,
};

/// A revision other than the newest, through its generated conversions and through the spec-driven path.
fn other_revision(p: &WireProfile, s: &WireProfile, data: &[u8]) {
    other_message(&META_OPS, p, s, data);
    other_message(&RESP_OPS, p, s, data);
}

fn other_message<T: PartialEq + std::fmt::Debug>(ops: &Ops<T>, p: &WireProfile, s: &WireProfile, data: &[u8]) {
    let (codec, rev, m) = (p.codec(), p.name(), ops.name);
    let t = (ops.decode)(p, data);
    same(&format!("{rev} {m} generated vs spec-driven"), data, &t, &(ops.decode)(s, data));
    agree(m, data, &t, &codec.decode(m, data));
    let (Ok(t), Ok(v)) = (&t, codec.decode(m, data)) else { return };
    let back = (ops.value)(p, t).unwrap_or_else(|e| panic!("{rev} {m}: a decoded message does not convert back: {e}"));
    assert!(valeq::same(&back, &v), "{rev} {m}: from_newest(to_newest(x)) != x: {}", hex::encode(data));
    assert_eq!((ops.from_value)(p, &v).as_ref(), Ok(t), "{rev} {m}: from the spec value");
    let canonical = hex::encode(codec.encode(m, &v).unwrap());
    assert_eq!(hex::encode((ops.encode)(p, t).unwrap()), canonical, "{rev} {m}: generated encoding");
    assert_eq!(hex::encode((ops.encode)(s, t).unwrap()), canonical, "{rev} {m}: spec-driven encoding");
}

fn agree<T>(
    message: &str,
    data: &[u8],
    typed: &Result<T, mooncake_wire::codec::DecodeError>,
    spec: &Result<mooncake_wire::codec::Value, mooncake_wire::codec::DecodeError>,
) {
    match (typed, spec) {
        (Ok(_), Ok(_)) => {}
        (Err(a), Err(b)) => assert_eq!(
            a.msgspec_message(),
            b.msgspec_message(),
            "{message}: typed and spec decoders give different errors for {}",
            hex::encode(data)
        ),
        (Ok(_), Err(e)) => panic!(
            "{message}: the typed decoder accepts what the spec decoder rejects ({}): {}",
            e.msgspec_message(),
            hex::encode(data)
        ),
        (Err(e), Ok(_)) => panic!(
            "{message}: the typed decoder rejects ({}) what the spec decoder accepts: {}",
            e.msgspec_message(),
            hex::encode(data)
        ),
    }
}

fn truncations_fail<T: std::fmt::Debug>(
    message: &str,
    data: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, mooncake_wire::codec::DecodeError>,
) {
    for cut in [data.len() - 1, data.len() / 2] {
        match decode(&data[..cut]) {
            Err(e) if e.kind == DecodeErrorKind::Truncated => {}
            other => panic!("{message}: the first {cut} of {} bytes must be truncated, got {other:?}", data.len()),
        }
    }
}

fn metadata(p: &WireProfile, codec: &Codec, data: &[u8]) {
    let t = MooncakeXferMetadata::decode(data);
    let s = codec.decode(META, data);
    agree(META, data, &t, &s);
    let (Ok(t), Ok(v)) = (t, s) else { return };
    let bytes = t.encode();
    assert_eq!(
        hex::encode(&bytes),
        hex::encode(codec.encode(META, &v).unwrap()),
        "{META}: typed and spec encodings differ"
    );
    let back = MooncakeXferMetadata::decode(&bytes).unwrap_or_else(|e| panic!("{META}: own encoding must decode: {e}"));
    assert_eq!(back, t, "{META}: decode(encode(x)) != x");
    assert_eq!(back.encode(), bytes, "{META}: encoding is not a fixed point");
    truncations_fail(META, data, |b| MooncakeXferMetadata::decode(b));
    let as_value = p.metadata_value(&t).unwrap_or_else(|e| panic!("{META}: a decoded message as a value: {e}"));
    assert!(valeq::same(&as_value, &v), "{META}: the typed message differs from the spec decoder's value");
    assert_eq!(p.metadata_from_value(&v).as_ref(), Ok(&t), "{META}: the spec value differs from the typed decoder's");
}

fn response(p: &WireProfile, codec: &Codec, data: &[u8]) {
    let t = MooncakeXferResponse::decode(data);
    let s = codec.decode(RESP, data);
    agree(RESP, data, &t, &s);
    let open = MooncakeXferResponse::decode_with(data, Strictness::OpenStatus);
    if let Ok(t) = &t {
        assert_eq!(open.as_ref(), Ok(t), "{RESP}: OpenStatus must accept what Msgspec accepts, unchanged");
    }
    if let Ok(o) = &open {
        let b = o.encode();
        assert_eq!(
            MooncakeXferResponse::decode_with(&b, Strictness::OpenStatus).as_ref(),
            Ok(o),
            "{RESP}: OpenStatus round trip"
        );
        if !o.status.is_known() {
            match MooncakeXferResponse::decode(&b) {
                Err(e) if matches!(e.kind, DecodeErrorKind::InvalidEnum(_)) => {}
                other => panic!("{RESP}: status {:?} must be refused by the strict decoder, got {other:?}", o.status),
            }
        }
    }
    let (Ok(t), Ok(v)) = (t, s) else { return };
    let bytes = t.encode();
    assert_eq!(
        hex::encode(&bytes),
        hex::encode(codec.encode(RESP, &v).unwrap()),
        "{RESP}: typed and spec encodings differ"
    );
    let back = MooncakeXferResponse::decode(&bytes).unwrap_or_else(|e| panic!("{RESP}: own encoding must decode: {e}"));
    assert_eq!(back, t, "{RESP}: decode(encode(x)) != x");
    assert_eq!(back.encode(), bytes, "{RESP}: encoding is not a fixed point");
    truncations_fail(RESP, data, |b| MooncakeXferResponse::decode(b));
    let as_value = p.response_value(&t).unwrap_or_else(|e| panic!("{RESP}: a decoded message as a value: {e}"));
    assert!(valeq::same(&as_value, &v), "{RESP}: the typed message differs from the spec decoder's value");
    assert_eq!(p.response_from_value(&v).as_ref(), Ok(&t), "{RESP}: the spec value differs from the typed decoder's");
}
