//! The typed 0.33.0 decoders (`mooncake_wire::typed`): every input is decoded as both messages.
//!
//! Invariants:
//! * the typed decoder and the spec-driven decoder of `vllm-0.33.0` agree: same verdict, same msgspec error
//!   text (path included), and for accepted input the same canonical bytes;
//! * typed round trip: `decode(encode(x)) == x` and the encoding is a fixed point;
//! * every proper prefix of an accepted input is rejected as truncated;
//! * the conversions to and from spec values (`to_revision` / `from_revision`) are inverse and agree with the
//!   spec-driven decoder's value;
//! * `Strictness::OpenStatus` accepts everything `Msgspec` accepts, with the same value; a status it keeps
//!   that vLLM does not define is refused again by the strict decoder after a round trip.
//!
//! Every other generation-2 revision reaches the typed structs through its spec codec (`WireProfile`, what
//! the sans-IO cores decode and encode with): one of them per input (the input's length picks it) decodes the
//! input as both messages, and for accepted input `from_revision` converts, `to_revision` gives back the
//! decoded value, the profile's decode gives the same struct and its encode the spec codec's canonical bytes.

use mooncake_wire::codec::{Codec, DecodeErrorKind};
use mooncake_wire::proto::WireProfile;
use mooncake_wire::typed::{self, MooncakeXferMetadata, MooncakeXferResponse, Strictness};

use super::prefiller::profiles;

use crate::valeq;

const META: &str = "MooncakeXferMetadata";
const RESP: &str = "MooncakeXferResponse";

pub fn run(data: &[u8]) {
    let codec = Codec::builtin(typed::REVISION).expect("newest revision");
    metadata(&codec, data);
    response(&codec, data);
    let others: Vec<&WireProfile> = profiles().iter().filter(|p| p.name() != typed::REVISION).collect();
    if !others.is_empty() {
        other_revision(others[data.len() % others.len()], data);
    }
}

/// The typed view of a revision other than the typed one, through its spec codec.
fn other_revision(p: &WireProfile, data: &[u8]) {
    let codec = p.codec();
    let rev = p.name();
    if let Ok(v) = codec.decode(META, data) {
        let t = MooncakeXferMetadata::from_revision(&v)
            .unwrap_or_else(|e| panic!("{rev} {META}: a decoded value does not convert: {e}: {}", hex::encode(data)));
        let back = t.to_revision(codec).unwrap_or_else(|e| panic!("{rev} {META}: to_revision: {e}"));
        assert!(valeq::same(&back, &v), "{rev} {META}: to_revision(from_revision(v)) != v: {}", hex::encode(data));
        assert_eq!(p.decode_metadata(data).as_ref(), Ok(&t), "{rev} {META}: the profile decodes otherwise");
        assert_eq!(
            hex::encode(p.encode_metadata(&t).unwrap_or_else(|e| panic!("{rev} {META}: encode: {e}"))),
            hex::encode(codec.encode(META, &v).unwrap()),
            "{rev} {META}: the profile's encoding is not the canonical one"
        );
    } else {
        assert!(p.decode_metadata(data).is_err(), "{rev} {META}: the profile accepts what its codec refuses");
    }
    if let Ok(v) = codec.decode(RESP, data) {
        let t = MooncakeXferResponse::from_revision(&v)
            .unwrap_or_else(|e| panic!("{rev} {RESP}: a decoded value does not convert: {e}: {}", hex::encode(data)));
        let back = t.to_revision(codec).unwrap_or_else(|e| panic!("{rev} {RESP}: to_revision: {e}"));
        assert!(valeq::same(&back, &v), "{rev} {RESP}: to_revision(from_revision(v)) != v: {}", hex::encode(data));
        assert_eq!(p.decode_response(data).as_ref(), Ok(&t), "{rev} {RESP}: the profile decodes otherwise");
        assert_eq!(
            hex::encode(p.encode_response(&t).unwrap_or_else(|e| panic!("{rev} {RESP}: encode: {e}"))),
            hex::encode(codec.encode(RESP, &v).unwrap()),
            "{rev} {RESP}: the profile's encoding is not the canonical one"
        );
    } else {
        assert!(p.decode_response(data).is_err(), "{rev} {RESP}: the profile accepts what its codec refuses");
    }
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

fn metadata(codec: &Codec, data: &[u8]) {
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
    let as_value = t.to_revision(codec).unwrap_or_else(|e| panic!("{META}: to_revision of a decoded message: {e}"));
    assert!(valeq::same(&as_value, &v), "{META}: to_revision differs from the spec decoder's value");
    assert_eq!(
        MooncakeXferMetadata::from_revision(&v).as_ref(),
        Ok(&t),
        "{META}: from_revision differs from the typed decoder"
    );
}

fn response(codec: &Codec, data: &[u8]) {
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
    let as_value = t.to_revision(codec).unwrap_or_else(|e| panic!("{RESP}: to_revision of a decoded message: {e}"));
    assert!(valeq::same(&as_value, &v), "{RESP}: to_revision differs from the spec decoder's value");
    assert_eq!(
        MooncakeXferResponse::from_revision(&v).as_ref(),
        Ok(&t),
        "{RESP}: from_revision differs from the typed decoder"
    );
}
