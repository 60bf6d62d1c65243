//! Faults in what the peer sends: a prefiller's replies, a decoder's pulls and heartbeats. The payload is
//! decoded as the newest revision's message, changed, and encoded again where a field changes; a payload that is
//! not that message (a heartbeat, a generation-1 reply) passes unchanged except for the byte-level faults.

use super::Fault;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::typed::{MooncakeLeaseHeartbeat, MooncakeXferMetadata, MooncakeXferResponse, Status, StrList};

/// Appends `"zz_extra": 1` to a fixmap-encoded struct.
fn extra_field(mut b: Vec<u8>) -> Vec<u8> {
    if let Some(h) = b.first_mut() {
        if (0x80..0x8f).contains(h) {
            *h += 1;
            b.extend_from_slice(&[0xa8, b'z', b'z', b'_', b'e', b'x', b't', b'r', b'a', 0x01]);
        }
    }
    b
}

/// Writes a fixmap's first key, a fixstr, as a `str8`: the same value in bytes msgspec never writes.
fn long_str_header(b: Vec<u8>) -> Vec<u8> {
    match (b.first(), b.get(1)) {
        (Some(0x81..=0x8f), Some(&key @ 0xa0..=0xbf)) => {
            let mut out = vec![b[0], 0xd9, key - 0xa0];
            out.extend_from_slice(&b[2..]);
            out
        }
        _ => b,
    }
}

fn flip(mut b: Vec<u8>) -> Vec<u8> {
    if let Some(x) = b.last_mut() {
        *x ^= 0x01;
    }
    b
}

/// The byte-level faults, after any re-encoding.
fn bytes_after(faults: &[Fault], mut bytes: Vec<u8>) -> Vec<u8> {
    if faults.contains(&Fault::ExtraField) {
        bytes = extra_field(bytes);
    }
    if faults.contains(&Fault::LongStrHeader) {
        bytes = long_str_header(bytes);
    }
    if faults.contains(&Fault::FlipByte) {
        bytes = flip(bytes);
    }
    bytes
}

/// A reply's fields after the field-level faults.
fn change_reply(faults: &[Fault], r: &mut MooncakeXferResponse) {
    for f in faults {
        match f {
            Fault::WrongStatus if r.status == Status::FINISH => r.status = Status::CONTINUE,
            Fault::WrongStatus if r.status == Status::CONTINUE => r.status = Status::FINISH,
            Fault::MissingField => r.ok_reqs = None,
            Fault::WrongId => {
                if let Some(ids) = r.ok_reqs.as_mut().filter(|v| !v.is_empty()) {
                    let id = format!("{}-x", &ids[0]);
                    ids.set(0, &id);
                }
            }
            Fault::WrongLayoutEcho if matches!(r.status, Status::FINISH | Status::CONTINUE) => {
                r.layout_id = WireInt::from(r.layout_id.as_u64().unwrap_or(0) + 1);
            }
            Fault::WrongErrMsg => r.err_msg = r.err_msg.take().map(|m| format!("{m} (reworded)")),
            Fault::EmptyIdLists => {
                r.ok_reqs.get_or_insert_with(StrList::default);
                r.err_reqs.get_or_insert_with(StrList::default);
            }
            _ => {}
        }
    }
}

/// The frames to send for one reply (`[routing_id, payload]`), after the faults; possibly none or two messages.
pub fn apply_to_reply(faults: &[Fault], rid: Vec<u8>, payload: Vec<u8>) -> Vec<Vec<Vec<u8>>> {
    let Ok(mut r) = MooncakeXferResponse::decode_with(&payload, mooncake_wire::typed::Strictness::OpenStatus) else {
        return vec![vec![rid, payload]];
    };
    let terminal = r.status.is_terminal();
    change_reply(faults, &mut r);
    let mut frames = vec![rid, bytes_after(faults, r.encode())];
    if faults.contains(&Fault::ExtraFrame) {
        frames.push(vec![]);
    }
    if terminal && faults.contains(&Fault::MissingResponse) {
        return vec![];
    }
    if terminal && faults.contains(&Fault::DuplicateCompletion) {
        return vec![frames.clone(), frames];
    }
    vec![frames]
}

/// A pull's fields after the field-level faults; whether any changed.
/// A reply to a REQ (`[routing_id, "", payload]`: generation 1's raw constants, the pull family's metadata and
/// `ACK`) after the faults that act on any payload: a byte flipped, an extra frame, never sent.
pub fn apply_to_enveloped_reply(faults: &[Fault], rid: Vec<u8>, payload: Vec<u8>) -> Vec<Vec<Vec<u8>>> {
    if faults.contains(&Fault::MissingResponse) {
        return vec![];
    }
    let payload = if faults.contains(&Fault::FlipByte) { flip(payload) } else { payload };
    let mut frames = vec![rid, vec![], payload];
    if faults.contains(&Fault::ExtraFrame) {
        frames.push(vec![]);
    }
    vec![frames]
}

/// A request sent on a REQ (the pull family's query and completion) after the faults that act on any payload:
/// a byte flipped.
pub fn apply_to_raw_request(faults: &[Fault], payload: Vec<u8>) -> Vec<u8> {
    if faults.contains(&Fault::FlipByte) {
        flip(payload)
    } else {
        payload
    }
}

fn change_request(faults: &[Fault], m: &mut MooncakeXferMetadata) -> bool {
    let mut changed = false;
    for f in faults {
        match f {
            Fault::WrongId => {
                if let Some((id, _)) = m.req_blocks.first_mut() {
                    id.push_str("-x");
                    changed = true;
                }
            }
            Fault::WrongSession => {
                m.remote_port = WireInt::from(m.remote_port.as_u64().unwrap_or(0) + 1);
                changed = true;
            }
            Fault::WrongBlocks => {
                let first = m.req_blocks.first_mut().and_then(|(_, rb)| rb.blocks.first_mut()?.first_mut());
                if let Some(b) = first {
                    *b = WireInt::from(b.as_u64().unwrap_or(0) + 1);
                    changed = true;
                }
            }
            _ => {}
        }
    }
    changed
}

/// The messages a decoder sends on one exchange's connection (normally one, of one frame), after the faults.
pub fn apply_to_request(faults: &[Fault], payload: Vec<u8>) -> Vec<Vec<Vec<u8>>> {
    let heartbeat = MooncakeLeaseHeartbeat::decode(&payload).is_ok_and(|h| !h.lease_transfer_ids.is_empty());
    if heartbeat && faults.contains(&Fault::DropHeartbeats) {
        return vec![];
    }
    let mut bytes = payload;
    if let Ok(mut m) = MooncakeXferMetadata::decode(&bytes) {
        if change_request(faults, &mut m) {
            bytes = m.encode();
        }
    }
    let mut frames = vec![bytes_after(faults, bytes)];
    if faults.contains(&Fault::ExtraFrame) {
        frames.push(vec![]);
    }
    if faults.contains(&Fault::DuplicateRequest) && !heartbeat {
        return vec![frames.clone(), frames];
    }
    vec![frames]
}
