//! The TCP transport's data connection: per request a 24-byte header (u64 LE size, u64 LE target address,
//! u8 opcode, 7 bytes of padding), then for a write the payload and (version 2) an 8-byte status; for a read
//! (version 2) the status, then the data. Requests on one connection are sequential.

use crate::limits::MAX_TE_REQUEST_BYTES;

/// Header length on the wire.
pub const HEADER_LEN: usize = 24;
/// The opcode flag that asks for the acknowledged (version 2) exchange.
pub(crate) const V2_FLAG: u8 = 0x80;
/// High 32 bits of every status frame.
pub(crate) const STATUS_MAGIC: u64 = 0x4D43_5456 << 32;

/// The request's operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    /// Opcode 0: the target sends `size` bytes from `addr`.
    Read,
    /// Opcode 1: the initiator sends `size` bytes that the target writes at `addr`.
    Write,
}

/// One request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Payload length in bytes.
    pub size: u64,
    /// The target's own address (as registered) of the first byte.
    pub addr: u64,
    /// Read or write.
    pub op: Opcode,
    /// Whether the initiator asked for the acknowledged exchange.
    pub v2: bool,
}

/// Why a header is refused before any payload is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// An opcode that is neither READ nor WRITE (a version-1 engine would serve it as a read).
    UnknownOpcode(u8),
    /// More bytes than [`MAX_TE_REQUEST_BYTES`].
    TooLarge(u64),
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::UnknownOpcode(o) => write!(f, "unknown transfer opcode {o:#04x}"),
            HeaderError::TooLarge(n) => {
                write!(f, "a request of {n} bytes is above the {MAX_TE_REQUEST_BYTES} accepted")
            }
        }
    }
}
impl std::error::Error for HeaderError {}

impl Header {
    /// The 24 bytes an initiator sends (padding zeroed).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..8].copy_from_slice(&self.size.to_le_bytes());
        b[8..16].copy_from_slice(&self.addr.to_le_bytes());
        b[16] = match self.op {
            Opcode::Read => 0,
            Opcode::Write => 1,
        } | if self.v2 { V2_FLAG } else { 0 };
        b
    }
    /// Reads a header; the padding is ignored (the engine does not zero it).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, HeaderError> {
        let size = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let addr = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let v2 = b[16] & V2_FLAG != 0;
        let op = match b[16] & !V2_FLAG {
            0 => Opcode::Read,
            1 => Opcode::Write,
            o => return Err(HeaderError::UnknownOpcode(o)),
        };
        if size > MAX_TE_REQUEST_BYTES as u64 {
            return Err(HeaderError::TooLarge(size));
        }
        Ok(Header { size, addr, op, v2 })
    }
}

/// A status frame's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The write is in the target's memory / the read's data follows.
    Ok,
    /// The range is not inside one registered buffer; the target closes the connection.
    AddrRejected,
    /// Another code under the right magic (not sent by any engine release known here).
    Other(u32),
}

impl Status {
    /// The 8 bytes of the frame: the magic in the high half, the code in the low half, little-endian.
    pub fn encode(self) -> [u8; 8] {
        let code = match self {
            Status::Ok => 0,
            Status::AddrRejected => 1,
            Status::Other(c) => c,
        };
        (STATUS_MAGIC | u64::from(code)).to_le_bytes()
    }
    /// `None` when the frame lacks the magic (e.g. a version-1 target streaming data instead).
    pub fn decode(b: [u8; 8]) -> Option<Status> {
        let v = u64::from_le_bytes(b);
        if v & 0xFFFF_FFFF_0000_0000 != STATUS_MAGIC {
            return None;
        }
        Some(match v as u32 {
            0 => Status::Ok,
            1 => Status::AddrRejected,
            c => Status::Other(c),
        })
    }
}

/// The target's check: the range `[addr, addr+size)` lies entirely inside one of `buffers` (base, length), and
/// is not empty (the engine refuses size 0 and wrapping ranges).
pub fn range_allowed(buffers: impl IntoIterator<Item = (u64, u64)>, addr: u64, size: u64) -> bool {
    let Some(end) = addr.checked_add(size) else { return false };
    size != 0
        && buffers.into_iter().any(|(base, len)| base.checked_add(len).is_some_and(|bend| base <= addr && end <= bend))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_status_bytes() {
        let h = Header { size: 4096, addr: 0x1000, op: Opcode::Write, v2: true };
        let b = h.encode();
        assert_eq!(&b[..17], &[0, 16, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0x81]);
        let mut dirty = b;
        dirty[17..].copy_from_slice(&[0xaa; 7]);
        assert_eq!(Header::decode(&dirty), Ok(h));
        dirty[16] = 0x82;
        assert_eq!(Header::decode(&dirty), Err(HeaderError::UnknownOpcode(2)));
        assert_eq!(Status::Ok.encode(), [0, 0, 0, 0, 0x56, 0x54, 0x43, 0x4d]);
        assert_eq!(Status::decode(Status::AddrRejected.encode()), Some(Status::AddrRejected));
        assert_eq!(Status::decode([1, 2, 3, 4, 5, 6, 7, 8]), None);
    }

    #[test]
    fn ranges_must_fit_one_buffer() {
        let bufs = [(100, 10), (110, 10)];
        assert!(range_allowed(bufs, 100, 10) && range_allowed(bufs, 115, 5));
        assert!(!range_allowed(bufs, 105, 10), "spans two buffers");
        assert!(!range_allowed(bufs, 100, 0) && !range_allowed(bufs, u64::MAX, 2) && !range_allowed(bufs, 99, 2));
        assert!(!range_allowed([(u64::MAX - 1, 10)], u64::MAX - 1, 1), "a wrapping buffer is skipped");
    }
}
