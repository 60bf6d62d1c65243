//! Deliberate protocol faults the reference peer can inject into what it sends, so tests can prove the
//! conformance runner catches each kind of deviation. Never enabled unless a configuration asks for it
//! (`"faults": [...]` in a role's start config; not part of the testee protocol).

use crate::error::UnknownFault;
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse, Status};

/// One kind of deliberate deviation in the replies a peer sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// FINISH and CONTINUE swapped.
    WrongStatus,
    /// `ok_reqs` left out.
    MissingField,
    /// An unknown key appended to the map.
    ExtraField,
    /// An empty frame after the payload.
    ExtraFrame,
    /// The first request id renamed.
    WrongId,
    /// The last byte of the payload flipped.
    FlipByte,
    /// Terminal replies never sent.
    MissingResponse,
    /// Terminal replies sent twice.
    DuplicateCompletion,
}

impl Fault {
    /// The fault of a config name (`wrong_status`, `missing_field`, ..., snake case of the variant); errors on
    /// a name it does not know.
    pub fn parse(s: &str) -> Result<Fault, UnknownFault> {
        Ok(match s {
            "wrong_status" => Fault::WrongStatus,
            "missing_field" => Fault::MissingField,
            "extra_field" => Fault::ExtraField,
            "extra_frame" => Fault::ExtraFrame,
            "wrong_id" => Fault::WrongId,
            "flip_byte" => Fault::FlipByte,
            "missing_response" => Fault::MissingResponse,
            "duplicate_completion" => Fault::DuplicateCompletion,
            other => return Err(UnknownFault(other.to_string())),
        })
    }
}

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

fn flip(mut b: Vec<u8>) -> Vec<u8> {
    if let Some(x) = b.last_mut() {
        *x ^= 0x01;
    }
    b
}

/// The frames to send for one reply (`[routing_id, payload]`), after the faults; possibly none or two messages.
pub fn apply_to_reply(faults: &[Fault], rid: Vec<u8>, payload: Vec<u8>) -> Vec<Vec<Vec<u8>>> {
    let Ok(mut r) = MooncakeXferResponse::decode_with(&payload, mooncake_wire::typed::Strictness::OpenStatus) else {
        return vec![vec![rid, payload]];
    };
    let terminal = r.status.is_terminal();
    for f in faults {
        match f {
            Fault::WrongStatus => {
                r.status = if r.status == Status::FINISH {
                    Status::CONTINUE
                } else if r.status == Status::CONTINUE {
                    Status::FINISH
                } else {
                    r.status
                }
            }
            Fault::MissingField => r.ok_reqs = None,
            Fault::WrongId => {
                if let Some(ids) = r.ok_reqs.as_mut().filter(|v| !v.is_empty()) {
                    let id = format!("{}-x", &ids[0]);
                    ids.set(0, &id);
                }
            }
            _ => {}
        }
    }
    let mut bytes = r.encode();
    if faults.contains(&Fault::ExtraField) {
        bytes = extra_field(bytes);
    }
    if faults.contains(&Fault::FlipByte) {
        bytes = flip(bytes);
    }
    let mut frames = vec![rid.clone(), bytes];
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

/// The frames a decoder sends for one pull, after the faults.
pub fn apply_to_request(faults: &[Fault], payload: Vec<u8>) -> Vec<Vec<u8>> {
    let Ok(mut m) = MooncakeXferMetadata::decode(&payload) else { return vec![payload] };
    for f in faults {
        if let Fault::WrongId = f {
            if let Some((id, _)) = m.req_blocks.first_mut() {
                id.push_str("-x");
            }
        }
    }
    let mut bytes = if faults.contains(&Fault::WrongId) { m.encode() } else { payload };
    if faults.contains(&Fault::ExtraField) {
        bytes = extra_field(bytes);
    }
    if faults.contains(&Fault::FlipByte) {
        bytes = flip(bytes);
    }
    let mut frames = vec![bytes];
    if faults.contains(&Fault::ExtraFrame) {
        frames.push(vec![]);
    }
    frames
}
