//! The spec-driven decoder (`Codec::decode`), every revision and message: the first byte picks them
//! ([`crate::catalog::select`]), the rest is the frame.
//!
//! Invariants, for every accepted frame:
//! * the value encodes; the encoding decodes to the same value and re-encodes to itself (canonical bytes are a
//!   fixed point), so a canonical input re-encodes identically;
//! * every proper prefix of the frame is rejected as truncated (a MessagePack document is prefix-free), and
//!   the frame followed by one more byte is rejected as trailing at exactly its length;
//! * `to_builtins` JSON of the value reads back (`Codec::from_json`) to the same value.
//!
//! For every rejected frame: the error renders (msgspec's text) and names a path inside the message.

use mooncake_wire::codec::{Codec, DecodeErrorKind, Value};

use crate::catalog;
use crate::valeq;

/// The target body: runs the input through the code under test and checks the invariants above; panics when one
/// breaks, ignores an input it cannot use.
pub fn run(data: &[u8]) {
    let Some((&sel, frame)) = data.split_first() else { return };
    let (entry, message) = catalog::select(sel);
    check(&entry.codec, message, frame);
}

/// Decodes `frame` as `message` and checks every invariant; returns the value when accepted.
pub fn check(codec: &Codec, message: &str, frame: &[u8]) -> Option<Value> {
    let rev = &codec.revision().revision;
    let v = match codec.decode(message, frame) {
        Ok(v) => v,
        Err(e) => {
            let text = e.msgspec_message();
            assert!(!text.is_empty());
            assert!(e.path.is_empty() || e.path.starts_with('$'), "{rev} {message}: error path {:?}", e.path);
            assert_eq!(e.message.as_deref(), Some(message));
            let _ = e.to_string();
            return None;
        }
    };
    let canon =
        codec.encode(message, &v).unwrap_or_else(|e| panic!("{rev} {message}: a decoded value must encode: {e}\n{v}"));
    let again = codec.decode(message, &canon).unwrap_or_else(|e| {
        panic!("{rev} {message}: the canonical encoding must decode: {e}\n{}", hex::encode(&canon))
    });
    assert!(valeq::same(&again, &v), "{rev} {message}: decode(encode(v)) != v\n{v}\n{again}");
    assert_eq!(
        codec.encode(message, &again).unwrap(),
        canon,
        "{rev} {message}: canonical bytes must re-encode identically"
    );

    for cut in [frame.len() - 1, frame.len() / 2] {
        match codec.decode(message, &frame[..cut]) {
            Err(e) if e.kind == DecodeErrorKind::Truncated => {}
            other => {
                panic!("{rev} {message}: the first {cut} of {} bytes must be truncated, got {other:?}", frame.len())
            }
        }
    }
    let mut longer = frame.to_vec();
    longer.push(0xc0);
    match codec.decode(message, &longer) {
        Err(e) if e.kind == (DecodeErrorKind::Trailing { offset: frame.len() }) => {}
        other => panic!("{rev} {message}: one byte more must be trailing at {}, got {other:?}", frame.len()),
    }

    if !valeq::has_nonfinite(&v) {
        let j = Codec::to_json(&v);
        let back = codec
            .from_json(message, &j)
            .unwrap_or_else(|e| panic!("{rev} {message}: to_builtins JSON must read back: {e}\n{j}"));
        assert!(valeq::same(&back, &v), "{rev} {message}: from_json(to_json(v)) != v\n{v}\n{back}");
    }
    Some(v)
}
