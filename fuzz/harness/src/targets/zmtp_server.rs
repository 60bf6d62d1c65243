//! The ROUTER's connection framing (`mooncake_wire::zmtp::server::ServerFramer`), as the prefiller reads it from
//! a peer: greeting, READY, frames with MORE, commands, PINGs.
//!
//! Input: byte 0 is the chunk size the stream is fed in, byte 1 says whether an identity is accepted at READY,
//! the rest is the stream. Invariants: whatever the chunking, the same events and the same error come out as
//! from the whole stream fed at once; input held never exceeds what one message and one frame header may take
//! beyond the chunk just fed (the limits are checked before input is held); every message has at most
//! `MAX_FRAMES` frames summing to at most `limits::MAX_MESSAGE_BYTES`; nothing comes out after an error or
//! between READY and the caller accepting it; every output is whole ZMTP (the greeting, then frames).

use mooncake_wire::limits;
use mooncake_wire::zmtp::server::{Event, FramingError, ServerFramer, MAX_FRAMES};
use mooncake_wire::zmtp::{FLAG_LONG, GREETING_LEN};

/// The target body: runs the input through the code under test and checks the invariants above; panics when one
/// breaks, ignores an input it cannot use.
pub fn run(data: &[u8]) {
    let (Some(&chunk), Some(&accept)) = (data.first(), data.get(1)) else { return };
    let stream = &data[2..];
    let accept = accept % 2 == 0;
    let whole = drive(stream, stream.len().max(1), accept);
    let chunked = drive(stream, usize::from(chunk).max(1), accept);
    assert_eq!(whole.0, chunked.0, "events depend on the chunking (chunk {chunk})");
    assert_eq!(whole.1, chunked.1, "the error depends on the chunking (chunk {chunk})");
}

/// Feeds `stream` in `chunk`-byte parts; returns the events, the error if any, and checks the per-step bounds.
fn drive(stream: &[u8], chunk: usize, accept: bool) -> (Vec<Event>, Option<FramingError>) {
    let mut f = ServerFramer::new();
    let mut events = vec![];
    let mut output = f.take_output();
    assert_eq!(output.len(), GREETING_LEN, "the greeting goes first");
    for part in stream.chunks(chunk) {
        f.feed(part);
        let before = events.len();
        let r = f.poll(&mut events);
        output.extend(f.take_output());
        for e in &events[before..] {
            match e {
                Event::Message(frames) => {
                    assert!(f.is_open(), "a message before the handshake was accepted");
                    assert!(frames.len() <= MAX_FRAMES, "{} frames", frames.len());
                    let total: usize = frames.iter().map(Vec::len).sum();
                    assert!(total <= limits::MAX_MESSAGE_BYTES, "a message of {total} bytes");
                }
                Event::Ready(id) => assert!(id.as_ref().is_none_or(|i| !i.is_empty()), "an empty identity"),
            }
        }
        if let Err(e) = r {
            return (events, Some(e));
        }
        if events[before..].iter().any(|e| matches!(e, Event::Ready(_))) {
            if !accept {
                return (events, None);
            }
            f.open();
            let again = events.len();
            if let Err(e) = f.poll(&mut events) {
                return (events, Some(e));
            }
            output.extend(f.take_output());
            assert!(events[again..].iter().all(|e| matches!(e, Event::Message(_))), "a second READY");
        }
        // What is held is at most one message being received plus one frame not yet whole, plus this chunk.
        let bound = limits::MAX_MESSAGE_BYTES + limits::MAX_FRAME_BYTES + 9 + GREETING_LEN + part.len();
        assert!(f.buffered() <= bound, "holds {} bytes", f.buffered());
    }
    check_output(&output);
    (events, None)
}

/// The output is the greeting and then whole frames (READY, PONGs): a peer can read it.
fn check_output(out: &[u8]) {
    let mut rest = &out[GREETING_LEN..];
    while let Some(&flags) = rest.first() {
        let (head, len) = if flags & FLAG_LONG != 0 {
            (9, u64::from_be_bytes(rest[1..9].try_into().expect("a whole long size")) as usize)
        } else {
            (2, usize::from(rest[1]))
        };
        assert!(rest.len() >= head + len, "a cut frame in the output");
        rest = &rest[head + len..];
    }
}
