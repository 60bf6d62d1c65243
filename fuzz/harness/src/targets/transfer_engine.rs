//! Mooncake Transfer Engine framing (`mooncake_wire::te`): handshake frames, segment descriptors, TCP request
//! headers and status frames, as a target or initiator reads them from a peer.
//!
//! Input: byte 0 picks the reader, byte 1 the chunk size the stream is fed in, the rest is the stream.
//! * handshake: frames come out of the incremental decoder whatever the chunking; every descriptor that parses
//!   re-encodes to JSON that parses to the same descriptor and re-encodes identically (a fixed point);
//! * data: every 24-byte header that decodes re-encodes to bytes that decode to the same header; every 8-byte
//!   window that is a status frame re-encodes to itself; the range check never panics and never accepts an
//!   empty or wrapping range.

use mooncake_wire::te::data::{range_allowed, Header, Status, HEADER_LEN};
use mooncake_wire::te::handshake::FrameDecoder;
use mooncake_wire::te::SegmentDesc;

/// The target body: runs the input through the code under test and checks the invariants above; panics when one
/// breaks, ignores an input it cannot use.
pub fn run(data: &[u8]) {
    let (Some(&mode), Some(&chunk)) = (data.first(), data.get(1)) else { return };
    let stream = &data[2..];
    let chunk = usize::from(chunk).max(1);
    if mode % 2 == 0 {
        handshake(stream, chunk);
    } else {
        requests(stream);
    }
}

fn handshake(stream: &[u8], chunk: usize) {
    let mut dec = FrameDecoder::new();
    let mut whole = FrameDecoder::new();
    whole.feed(stream);
    let mut frames = vec![];
    for part in stream.chunks(chunk) {
        dec.feed(part);
        loop {
            match dec.poll() {
                Ok(Some(f)) => frames.push(f),
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    // Chunking does not change what comes out.
    for f in &frames {
        assert_eq!(whole.poll().ok().flatten().as_ref(), Some(f), "frames differ with chunking");
        if let Ok(d) = SegmentDesc::parse(&f.body) {
            let j = d.to_json();
            let again = SegmentDesc::parse(j.as_bytes()).expect("our own JSON parses");
            assert_eq!(again, d, "descriptor round trip");
            assert_eq!(again.to_json(), j, "descriptor JSON is a fixed point");
        }
    }
}

fn requests(stream: &[u8]) {
    for c in stream.chunks_exact(HEADER_LEN) {
        let b: &[u8; HEADER_LEN] = c.try_into().expect("24 bytes");
        if let Ok(h) = Header::decode(b) {
            assert_eq!(Header::decode(&h.encode()), Ok(h), "header round trip");
            let bufs = stream.chunks_exact(16).take(8).map(|w| {
                (u64::from_le_bytes(w[..8].try_into().expect("8")), u64::from_le_bytes(w[8..].try_into().expect("8")))
            });
            if range_allowed(bufs, h.addr, h.size) {
                assert!(h.size > 0 && h.addr.checked_add(h.size).is_some(), "an empty or wrapping range accepted");
            }
        }
    }
    for w in stream.windows(8) {
        let b: [u8; 8] = w.try_into().expect("8 bytes");
        if let Some(s) = Status::decode(b) {
            assert_eq!(s.encode(), b, "status frame round trip");
        }
    }
}
