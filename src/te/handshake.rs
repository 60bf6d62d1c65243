//! The handshake frame on the engine's RPC port: u64 little-endian length (type byte + body), one type byte,
//! then the body (JSON text). A first body byte above the highest type marks the older, type-less format.

use crate::limits::MAX_TE_HANDSHAKE_BYTES;

/// The handshake message type (the byte after the length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgType {
    /// Type 0: an RDMA endpoint exchange.
    Connection,
    /// Type 1: the segment descriptor exchange: the initiator sends its descriptor, the target answers with its
    /// own.
    Metadata,
    /// Type 2: a notification.
    Notify,
    /// Type 3: a probe.
    Probe,
    /// No type byte: the frame predates typed frames; the engine treats it as `Connection`.
    Untyped,
}

impl MsgType {
    /// The byte on the wire (`None` for [`MsgType::Untyped`], which has none).
    pub(crate) fn byte(self) -> Option<u8> {
        match self {
            MsgType::Connection => Some(0),
            MsgType::Metadata => Some(1),
            MsgType::Notify => Some(2),
            MsgType::Probe => Some(3),
            MsgType::Untyped => None,
        }
    }
    fn from_byte(b: u8) -> Option<MsgType> {
        Some(match b {
            0 => MsgType::Connection,
            1 => MsgType::Metadata,
            2 => MsgType::Notify,
            3 => MsgType::Probe,
            _ => return None,
        })
    }
}

/// One frame, ready to send.
pub fn encode(ty: MsgType, body: &[u8]) -> Vec<u8> {
    let tb = ty.byte();
    let len = body.len() as u64 + u64::from(tb.is_some());
    let mut out = Vec::with_capacity(9 + body.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend(tb);
    out.extend_from_slice(body);
    out
}

/// Why a frame cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The declared length is 0 (the engine refuses it).
    Empty,
    /// The declared length is above the limit (the engine's default cap, 1 MiB).
    TooLong {
        /// The length the frame declares.
        declared: u64,
        /// The largest accepted.
        max: usize,
    },
    /// The stream ended inside a frame.
    Truncated {
        /// Bytes of the frame received (length prefix included).
        have: usize,
        /// Bytes the frame needs (length prefix included).
        need: u64,
    },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Empty => write!(f, "handshake frame of length 0"),
            FrameError::TooLong { declared, max } => {
                write!(f, "handshake frame declares {declared} bytes, more than the {max} accepted")
            }
            FrameError::Truncated { have, need } => {
                write!(f, "handshake stream ended after {have} of {need} frame bytes")
            }
        }
    }
}
impl std::error::Error for FrameError {}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The frame's type (`Untyped` for the older format).
    pub ty: MsgType,
    /// The body without the type byte: JSON text.
    pub body: Vec<u8>,
}

/// Incremental frame reader: feed bytes as they arrive, take one frame when complete.
#[derive(Default, Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
}

impl FrameDecoder {
    /// A reader with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }
    /// Bytes still wanted before [`FrameDecoder::poll`] can make progress (at least 1).
    pub fn wanted(&self) -> usize {
        match self.declared() {
            None => 8 - self.buf.len(),
            Some(n) => (n.min(MAX_TE_HANDSHAKE_BYTES as u64) as usize + 8).saturating_sub(self.buf.len()).max(1),
        }
    }
    fn declared(&self) -> Option<u64> {
        self.buf.get(..8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    /// Appends received bytes. Never grows past one frame's worth plus what is fed.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
    /// A complete frame (`Ok(Some)`), more bytes needed (`Ok(None)`), or an error that ends the connection.
    pub fn poll(&mut self) -> Result<Option<Frame>, FrameError> {
        let Some(n) = self.declared() else { return Ok(None) };
        if n == 0 {
            return Err(FrameError::Empty);
        }
        if n > MAX_TE_HANDSHAKE_BYTES as u64 {
            return Err(FrameError::TooLong { declared: n, max: MAX_TE_HANDSHAKE_BYTES });
        }
        let end = 8 + n as usize;
        if self.buf.len() < end {
            return Ok(None);
        }
        let payload: Vec<u8> = self.buf.drain(..end).skip(8).collect();
        Ok(Some(match MsgType::from_byte(payload[0]) {
            Some(ty) => Frame { ty, body: payload[1..].to_vec() },
            None => Frame { ty: MsgType::Untyped, body: payload },
        }))
    }
    /// The error to report when the stream ends before a frame completed.
    pub fn at_eof(&self) -> FrameError {
        FrameError::Truncated { have: self.buf.len(), need: self.declared().map_or(8, |n| n + 8) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_byte_by_byte() {
        let f = encode(MsgType::Metadata, b"{\"a\":1}\n");
        assert_eq!(&f[..9], &[9, 0, 0, 0, 0, 0, 0, 0, 1]);
        let mut d = FrameDecoder::new();
        for (i, b) in f.iter().enumerate() {
            assert_eq!(d.poll().unwrap(), None, "byte {i}");
            d.feed(&[*b]);
        }
        assert_eq!(d.poll().unwrap(), Some(Frame { ty: MsgType::Metadata, body: b"{\"a\":1}\n".to_vec() }));
    }

    #[test]
    fn untyped_empty_and_oversized_frames() {
        let mut d = FrameDecoder::new();
        d.feed(&encode(MsgType::Untyped, b"{}"));
        assert_eq!(d.poll().unwrap().unwrap().ty, MsgType::Untyped);
        let mut d = FrameDecoder::new();
        d.feed(&0u64.to_le_bytes());
        assert_eq!(d.poll(), Err(FrameError::Empty));
        let mut d = FrameDecoder::new();
        d.feed(&u64::MAX.to_le_bytes());
        assert!(d.wanted() > 0, "no overflow on a huge declared length");
        assert!(matches!(d.poll(), Err(FrameError::TooLong { .. })));
        let mut d = FrameDecoder::new();
        d.feed(&[5, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(d.poll(), Ok(None));
        assert_eq!(d.wanted(), 4);
        assert_eq!(d.at_eof(), FrameError::Truncated { have: 9, need: 13 });
    }
}
