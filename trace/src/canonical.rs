//! `WIRE-CANONICAL`: whether a peer's bytes are msgspec's encoding of the value they carry, and, when not,
//! where they part from it — the first differing offset, a short window of both encodings around it (hex) and
//! the path of the value there. Bounded whatever the size of the message: the bytes are never echoed whole.

use mooncake_wire::codec::Codec;

/// Bytes shown before the first difference.
const BEFORE: usize = 8;
/// Bytes shown from the first difference on.
const FROM: usize = 12;

/// The detail of a `WIRE-CANONICAL` finding about `bytes` sent as `message`, or `None` when they are `codec`'s
/// (msgspec's) encoding of the value they decode to.
pub fn mismatch(codec: &Codec, message: &str, bytes: &[u8]) -> Option<String> {
    let value = match codec.decode(message, bytes) {
        Ok(v) => v,
        Err(e) => return Some(format!("{} bytes that do not decode as {message}: {e}", bytes.len())),
    };
    let want = match codec.encode(message, &value) {
        Ok(w) if w == bytes => return None,
        Ok(w) => w,
        Err(e) => return Some(format!("{} bytes whose value msgspec would not encode: {e}", bytes.len())),
    };
    let at = bytes.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(bytes.len().min(want.len()));
    let path = codec.path_at(message, bytes, at).map_or_else(String::new, |p| format!(", in `{p}`"));
    Some(format!(
        "not msgspec's encoding of the value sent: first difference at byte {at}{path}: sent {}, msgspec {} ({} bytes sent, {} expected)",
        window(bytes, at),
        window(&want, at),
        bytes.len(),
        want.len()
    ))
}

/// Hex of `b` around `at`: up to [`BEFORE`] bytes, `|`, up to [`FROM`] bytes; `…` where bytes are left out.
fn window(b: &[u8], at: usize) -> String {
    let (start, end) = (at.saturating_sub(BEFORE), (at + FROM).min(b.len()));
    let start = start.min(end);
    let at = at.clamp(start, end);
    format!(
        "{}{}|{}{}",
        if start > 0 { "…" } else { "" },
        hex::encode(&b[start..at]),
        hex::encode(&b[at..end]),
        if end < b.len() { "…" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_bounded_and_marks_the_offset() {
        let b: Vec<u8> = (0..=255).collect();
        assert_eq!(window(&b, 100), "…5c5d5e5f60616263|6465666768696a6b6c6d6e6f…");
        assert_eq!(window(&b[..3], 1), "00|0102");
        assert_eq!(window(&b[..3], 3), "000102|");
    }
}
