//! Builds and reads lookup-channel frames from a release's frame list (`spec/store-lookup/vllm.toml`).
//!
//! Strict where vLLM is lenient, and says so: a hash blob whose length is not a multiple of `hash_len`, a
//! non-empty blob with `hash_len` 0, a hex digest that is not lowercase hex, or trailing bytes after a msgpack
//! frame are errors here; vLLM's server would silently ignore the extra bytes (it reads `len // hash_len`
//! digests) or key the store with the odd string.

use std::fmt;

use super::spec::{FrameDef, FrameKind, LookupVersion, RequestDef};
use crate::limits;
use crate::msgpack::{Obj, Reader, Writer};

/// A request from the scheduler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// How many of `num_tokens` prompt tokens the store holds, given every block hash of the request (raw
    /// digests; releases that send hex text carry them hex-encoded).
    Lookup {
        /// The number of prompt tokens asked about.
        num_tokens: u32,
        /// The request's block hashes, in order.
        hashes: Vec<Vec<u8>>,
    },
    /// Drop every object (`remove_all(force=True)`), 0.23.0 on.
    Reset,
}

/// One partial last block a group can load (0.29.0 on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailBoundary {
    /// The KV cache group.
    pub group_id: u32,
    /// How many tokens of the partial block the group can load.
    pub boundary_tokens: u32,
}

/// A reply from the worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The answer to a lookup.
    Hits {
        /// Prompt tokens found in the store (for every rank's namespace).
        hit_tokens: u32,
        /// Partial last blocks that can be loaded too (always empty before 0.29.0).
        tail_boundaries: Vec<TailBoundary>,
    },
    /// The answer to a command (`reset`); also what a 0.23.0+ worker answers to an unknown tag (`ok: false`).
    Status {
        /// Whether the command succeeded.
        ok: bool,
    },
}

/// A frame that cannot be built from a value or read into one, with the frame it concerns. Displays as
/// ``frame `name`: problem``.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupError {
    /// The frame (by its spec name) the problem is in, if one.
    pub frame: Option<String>,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.frame {
            Some(fr) => write!(f, "frame `{fr}`: {}", self.msg),
            None => f.write_str(&self.msg),
        }
    }
}
impl std::error::Error for LookupError {}

fn err(frame: Option<&str>, msg: impl Into<String>) -> LookupError {
    LookupError { frame: frame.map(str::to_string), msg: msg.into() }
}

fn request_def<'v>(v: &'v LookupVersion, r: &Request) -> Result<&'v RequestDef, LookupError> {
    let name = match r {
        Request::Lookup { .. } => "lookup",
        Request::Reset => "reset",
    };
    v.request(name).ok_or_else(|| err(None, format!("releases {} have no `{name}` request", v.releases.join(", "))))
}

/// The frames a `LookupKeyClient` of this release sends.
pub fn encode_request(v: &LookupVersion, r: &Request) -> Result<Vec<Vec<u8>>, LookupError> {
    let def = request_def(v, r)?;
    let (num_tokens, hashes) = match r {
        Request::Lookup { num_tokens, hashes } => (*num_tokens, hashes.as_slice()),
        Request::Reset => (0, &[][..]),
    };
    let hash_len = hashes.first().map_or(0, Vec::len);
    if hashes.iter().any(|h| h.len() != hash_len) {
        return Err(err(None, "every block hash must have the same length"));
    }
    let mut frames = Vec::with_capacity(def.frames.len());
    for f in &def.frames {
        let at = Some(f.name.as_str());
        frames.push(match f.kind {
            FrameKind::Const => f.bytes.clone().unwrap_or_default().into_bytes(),
            FrameKind::U32 => num_tokens.to_be_bytes().to_vec(),
            FrameKind::U16 => u16::try_from(hash_len)
                .map_err(|_| err(at, format!("hash length {hash_len} exceeds u16")))?
                .to_be_bytes()
                .to_vec(),
            FrameKind::Msgpack => {
                // msgspec's encoding of list[str]: the digests as lowercase hex.
                let mut w = Writer::new();
                w.array_len(hashes.len());
                for h in hashes {
                    w.str(&hex::encode(h));
                }
                w.into_bytes()
            }
            FrameKind::Hashes => hashes.concat(),
            FrameKind::Lookup | FrameKind::Status => return Err(err(at, "a reply kind in a request")),
        });
    }
    Ok(frames)
}

/// Reads the frames a `LookupKeyServer` of this release receives. An unknown tag is an error (0.23.0 on the
/// server answers it with the status byte 0).
pub fn decode_request(v: &LookupVersion, frames: &[&[u8]]) -> Result<Request, LookupError> {
    let def = if v.tagged() {
        let tag = frames.first().ok_or_else(|| err(None, "no frames"))?;
        v.request_by_tag(tag)
            .ok_or_else(|| err(Some("tag"), format!("unknown tag {:?}", String::from_utf8_lossy(tag))))?
    } else {
        &v.requests[0]
    };
    if frames.len() != def.frames.len() {
        return Err(err(None, format!("`{}` has {} frames, found {}", def.name, def.frames.len(), frames.len())));
    }
    let mut num_tokens = 0u32;
    // Integer frames read so far, by name (a `hashes` frame takes its digest length from one of them).
    let mut ints: Vec<(&str, usize)> = Vec::new();
    let mut hashes = Vec::new();
    for (f, data) in def.frames.iter().zip(frames) {
        let at = Some(f.name.as_str());
        match f.kind {
            FrameKind::Const => {}
            FrameKind::U32 => {
                num_tokens = u32::from_be_bytes(fixed(f, data)?);
                ints.push((&f.name, num_tokens as usize));
            }
            FrameKind::U16 => ints.push((&f.name, u16::from_be_bytes(fixed(f, data)?) as usize)),
            FrameKind::Msgpack => hashes = hex_list(f, data)?,
            FrameKind::Hashes => {
                let n = ints.iter().find(|(name, _)| Some(*name) == f.item_len.as_deref()).map(|(_, v)| *v);
                let n = n.ok_or_else(|| err(at, "no length frame before the hashes"))?;
                hashes = split_hashes(f, data, n)?;
            }
            FrameKind::Lookup | FrameKind::Status => return Err(err(at, "a reply kind in a request")),
        }
    }
    Ok(match def.name.as_str() {
        "lookup" => Request::Lookup { num_tokens, hashes },
        "reset" => Request::Reset,
        other => return Err(err(None, format!("request `{other}` has no codec value"))),
    })
}

fn fixed<const N: usize>(f: &FrameDef, data: &[u8]) -> Result<[u8; N], LookupError> {
    data.try_into().map_err(|_| err(Some(&f.name), format!("{} bytes, expected {N}", data.len())))
}

fn split_hashes(f: &FrameDef, data: &[u8], n: usize) -> Result<Vec<Vec<u8>>, LookupError> {
    let at = Some(f.name.as_str());
    if n == 0 {
        return if data.is_empty() {
            Ok(vec![])
        } else {
            Err(err(at, format!("{} bytes with a hash length of 0", data.len())))
        };
    }
    if data.len() % n != 0 {
        return Err(err(
            at,
            format!("{} bytes is not a whole number of {n}-byte hashes (vLLM ignores the rest)", data.len()),
        ));
    }
    Ok(data.chunks(n).map(<[u8]>::to_vec).collect())
}

fn hex_list(f: &FrameDef, data: &[u8]) -> Result<Vec<Vec<u8>>, LookupError> {
    let at = Some(f.name.as_str());
    let mut r = Reader::new(data);
    let raw = |e| err(at, format!("MessagePack: {e:?}"));
    let n = match r.read_obj().map_err(raw)? {
        Obj::Array(n) => n,
        o => return Err(err(at, format!("expected an array of str, found {:?}", o.kind()))),
    };
    let mut out = Vec::with_capacity(n.min(r.remaining()).min(limits::MAX_PREALLOC_ELEMENTS));
    for i in 0..n {
        match r.read_obj().map_err(raw)? {
            Obj::Str(s) => out.push(hex_decode(s).ok_or_else(|| err(at, format!("item {i} is not lowercase hex")))?),
            o => return Err(err(at, format!("item {i}: expected str, found {:?}", o.kind()))),
        }
    }
    if !r.is_empty() {
        return Err(err(at, "trailing bytes after the array"));
    }
    Ok(out)
}

/// The single reply frame of the worker.
pub fn encode_reply(v: &LookupVersion, request: &str, reply: &Reply) -> Result<Vec<u8>, LookupError> {
    let def = v.request(request).ok_or_else(|| err(None, format!("no `{request}` request")))?;
    let f = &def.reply[0];
    let at = Some(f.name.as_str());
    Ok(match (f.kind, reply) {
        (FrameKind::U32, Reply::Hits { hit_tokens, tail_boundaries }) if tail_boundaries.is_empty() => {
            hit_tokens.to_be_bytes().to_vec()
        }
        (FrameKind::U32, Reply::Hits { .. }) => {
            return Err(err(at, "releases before 0.29.0 carry no tail-key boundaries"))
        }
        (FrameKind::Lookup, Reply::Hits { hit_tokens, tail_boundaries }) => {
            let mut out = hit_tokens.to_be_bytes().to_vec();
            for b in tail_boundaries {
                out.extend_from_slice(&b.group_id.to_be_bytes());
                out.extend_from_slice(&b.boundary_tokens.to_be_bytes());
            }
            out
        }
        (FrameKind::Status, Reply::Status { ok }) => vec![*ok as u8],
        (k, r) => return Err(err(at, format!("a {k:?} frame cannot carry {r:?}"))),
    })
}

/// Reads the worker's reply to `request`.
pub fn decode_reply(v: &LookupVersion, request: &str, data: &[u8]) -> Result<Reply, LookupError> {
    let def = v.request(request).ok_or_else(|| err(None, format!("no `{request}` request")))?;
    let f = &def.reply[0];
    let at = Some(f.name.as_str());
    Ok(match f.kind {
        FrameKind::U32 => Reply::Hits { hit_tokens: u32::from_be_bytes(fixed(f, data)?), tail_boundaries: vec![] },
        FrameKind::Lookup => {
            if data.len() < 4 || (data.len() - 4) % 8 != 0 {
                return Err(err(at, format!("{} bytes: a lookup result is 4 + 8k bytes", data.len())));
            }
            let be = |i: usize| u32::from_be_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
            let tail_boundaries = (4..data.len())
                .step_by(8)
                .map(|o| TailBoundary { group_id: be(o), boundary_tokens: be(o + 4) })
                .collect();
            Reply::Hits { hit_tokens: be(0), tail_boundaries }
        }
        FrameKind::Status => match data {
            [1] => Reply::Status { ok: true },
            [0] => Reply::Status { ok: false },
            _ => return Err(err(at, format!("expected the byte 01 or 00, found {}", hex::encode(data)))),
        },
        k => return Err(err(at, format!("{k:?} is not a reply kind"))),
    })
}

/// Lowercase hex (what `bytes.hex()` writes) to bytes; uppercase digits are refused.
fn hex_decode(s: &[u8]) -> Option<Vec<u8>> {
    if s.iter().any(u8::is_ascii_uppercase) {
        return None;
    }
    hex::decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::super::spec::for_release;
    use super::*;

    fn h(n: u8, len: usize) -> Vec<u8> {
        (0..len as u8).map(|i| i.wrapping_mul(n)).collect()
    }

    #[test]
    fn every_release_round_trips() {
        for rel in ["0.21.0", "0.22.0", "0.23.0", "0.24.0", "0.28.0", "0.29.0", "0.33.0"] {
            let v = for_release(rel).unwrap();
            for hashes in [vec![], vec![h(3, 32), h(5, 32)], vec![h(7, 16)]] {
                let r = Request::Lookup { num_tokens: 70_000, hashes };
                let frames = encode_request(v, &r).unwrap();
                let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                assert_eq!(decode_request(v, &refs).unwrap(), r, "{rel}");
            }
            let reply = Reply::Hits { hit_tokens: 48, tail_boundaries: vec![] };
            assert_eq!(decode_reply(v, "lookup", &encode_reply(v, "lookup", &reply).unwrap()).unwrap(), reply);
        }
    }

    #[test]
    fn frames_by_release() {
        let hashes = vec![vec![0xab; 32]];
        let r = Request::Lookup { num_tokens: 32, hashes };
        // 0.21: no tag; the hashes as a msgpack array of hex str.
        let f21 = encode_request(for_release("0.21.0").unwrap(), &r).unwrap();
        assert_eq!(f21.len(), 2);
        assert_eq!(f21[0], [0, 0, 0, 32]);
        assert_eq!(&f21[1][..3], &[0x91, 0xd9, 64]);
        // 0.23: the tag first.
        let f23 = encode_request(for_release("0.23.0").unwrap(), &r).unwrap();
        assert_eq!(f23[0], b"lookup");
        assert_eq!(f23[1..], f21[..]);
        // 0.24 on: u16 hash length and the raw digests.
        let f24 = encode_request(for_release("0.24.0").unwrap(), &r).unwrap();
        assert_eq!(f24, vec![b"lookup".to_vec(), vec![0, 0, 0, 32], vec![0, 32], vec![0xab; 32]]);
        assert_eq!(encode_request(for_release("0.33.0").unwrap(), &r).unwrap(), f24);
        // No reset before 0.23.
        assert!(encode_request(for_release("0.22.0").unwrap(), &Request::Reset).is_err());
        assert_eq!(encode_request(for_release("0.23.0").unwrap(), &Request::Reset).unwrap(), vec![b"reset".to_vec()]);
    }

    #[test]
    fn replies_by_release() {
        let with_tail =
            Reply::Hits { hit_tokens: 40, tail_boundaries: vec![TailBoundary { group_id: 1, boundary_tokens: 37 }] };
        let v33 = for_release("0.33.0").unwrap();
        let b = encode_reply(v33, "lookup", &with_tail).unwrap();
        assert_eq!(b, [0, 0, 0, 40, 0, 0, 0, 1, 0, 0, 0, 37]);
        assert!(encode_reply(for_release("0.28.0").unwrap(), "lookup", &with_tail).is_err());
        assert!(decode_reply(v33, "lookup", &[0, 0, 0, 40, 0]).is_err());
        assert!(
            decode_reply(for_release("0.24.0").unwrap(), "lookup", &b).is_err(),
            "a 0.24 scheduler reads exactly 4 bytes"
        );
        assert_eq!(decode_reply(v33, "reset", &[1]).unwrap(), Reply::Status { ok: true });
        assert!(decode_reply(v33, "reset", &[2]).is_err());
    }

    #[test]
    fn strict_where_vllm_is_lenient() {
        let v = for_release("0.33.0").unwrap();
        let e = decode_request(v, &[b"lookup", &[0, 0, 0, 1], &[0, 32], &[1; 33]]).unwrap_err();
        assert_eq!(e.frame.as_deref(), Some("block_hashes"), "{e}");
        assert!(decode_request(v, &[b"lookup", &[0, 0, 0, 1], &[0, 0], &[1]]).is_err());
        assert!(decode_request(v, &[b"lookup", &[0, 0, 1], &[0, 32], &[]]).is_err());
        assert_eq!(decode_request(v, &[b"nope"]).unwrap_err().frame.as_deref(), Some("tag"));
        let v21 = for_release("0.21.0").unwrap();
        // An uppercase hex digest, a huge declared array, trailing bytes.
        assert!(decode_request(v21, &[&[0, 0, 0, 1], &[0x91, 0xa2, b'A', b'B']]).is_err());
        assert!(decode_request(v21, &[&[0, 0, 0, 1], &[0xdd, 0xff, 0xff, 0xff, 0xff]]).is_err());
        assert!(decode_request(v21, &[&[0, 0, 0, 1], &[0x90, 0xc0]]).is_err());
    }
}
