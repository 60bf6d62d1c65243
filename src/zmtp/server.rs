//! One connection of a ZMTP 3 server socket (a ROUTER), as a sans-IO state machine: bytes in ([`ServerFramer::feed`]),
//! events out ([`ServerFramer::poll`]: the peer is ready, a whole message), bytes to send
//! ([`ServerFramer::take_output`]: the greeting, READY, PONGs). The caller owns the socket, the clock and the
//! routing ids; every limit is checked here, before the input it concerns is held.
//!
//! What a peer sees is what a libzmq ROUTER shows it: the greeting (ZMTP 3.1, NULL), a READY with
//! `Socket-Type: ROUTER` and an empty `Identity`; PINGs answered with PONGs carrying their context. A peer that
//! does not speak ZMTP 3 with the NULL mechanism, whose socket type a ROUTER does not talk to, that sends a
//! message before READY, a frame over [`limits::MAX_FRAME_BYTES`], a message whose frames sum to more than
//! [`limits::MAX_MESSAGE_BYTES`] or have more than [`MAX_FRAMES`] of them, or reserved flag bits, is refused
//! with a [`FramingError`] (the caller closes the connection).

use super::{properties, split_command, Truncated, FLAG_COMMAND, FLAG_LONG, FLAG_MORE, GREETING_LEN};
use crate::limits;

/// Most frames one message may have (libzmq has no limit; a Mooncake message has at most three).
pub const MAX_FRAMES: usize = 1024;

/// Why a connection's input is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FramingError {
    /// The greeting is not ZMTP 3's.
    NotZmtp3,
    /// The security mechanism is not NULL.
    Mechanism,
    /// The handshake went wrong (what, in a few words).
    Handshake(&'static str),
    /// A command's body is cut short.
    Truncated(Truncated),
    /// The peer's socket type is not one a ROUTER talks to.
    SocketType(String),
    /// A frame declares more than [`limits::MAX_FRAME_BYTES`].
    FrameTooLarge(u64),
    /// A message's frames would sum to more than [`limits::MAX_MESSAGE_BYTES`].
    MessageTooLarge(u64),
    /// A message has more than [`MAX_FRAMES`] frames.
    TooManyFrames,
    /// A frame's flags set reserved bits.
    ReservedFlags(u8),
}

impl std::fmt::Display for FramingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FramingError::NotZmtp3 => write!(f, "the peer does not speak ZMTP 3"),
            FramingError::Mechanism => write!(f, "the peer's security mechanism is not NULL"),
            FramingError::Handshake(what) => write!(f, "bad handshake: {what}"),
            FramingError::Truncated(t) => write!(f, "bad command: {t}"),
            FramingError::SocketType(t) => write!(f, "a ROUTER does not talk to a {t} socket"),
            FramingError::FrameTooLarge(n) => {
                write!(f, "a frame of {n} bytes is over {} bytes", limits::MAX_FRAME_BYTES)
            }
            FramingError::MessageTooLarge(n) => {
                write!(f, "a message of {n} bytes or more is over {} bytes", limits::MAX_MESSAGE_BYTES)
            }
            FramingError::TooManyFrames => write!(f, "a message of more than {MAX_FRAMES} frames"),
            FramingError::ReservedFlags(b) => write!(f, "frame flags {b:#04x} set reserved bits"),
        }
    }
}

impl std::error::Error for FramingError {}

/// What the input gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The peer finished its handshake, with the `Identity` it asked for (`None`: none, or empty). Nothing more
    /// is parsed until the caller accepts it with [`ServerFramer::open`] (or closes the connection).
    Ready(Option<Vec<u8>>),
    /// A whole message: its frames, in order.
    Message(Vec<Vec<u8>>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Greeting,
    Handshake,
    /// READY seen, waiting for the caller to accept the identity.
    Accepting,
    Open,
}

/// The framing of one server connection.
#[derive(Debug)]
pub struct ServerFramer {
    state: State,
    /// Input not parsed yet.
    rbuf: Vec<u8>,
    /// The frames of the message being received.
    frames: Vec<Vec<u8>>,
    /// Their total size.
    held: usize,
    /// Bytes to send.
    out: Vec<u8>,
}

impl Default for ServerFramer {
    fn default() -> Self {
        ServerFramer::new()
    }
}

impl ServerFramer {
    /// A new connection: the greeting is queued to send at once, as libzmq does.
    pub fn new() -> ServerFramer {
        ServerFramer { state: State::Greeting, rbuf: vec![], frames: vec![], held: 0, out: super::greeting().to_vec() }
    }

    /// Appends bytes read from the peer.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.rbuf.extend_from_slice(bytes);
    }

    /// Parses what is whole in the input, pushing events to `out`; queues the handshake's and PINGs' answers.
    pub fn poll(&mut self, out: &mut Vec<Event>) -> Result<(), FramingError> {
        let mut at = 0;
        let r = self.parse_from(&mut at, out);
        self.rbuf.drain(..at);
        r
    }

    /// Accepts the peer after [`Event::Ready`]: messages flow from now on.
    pub fn open(&mut self) {
        if self.state == State::Accepting {
            self.state = State::Open;
        }
    }

    /// Whether the handshake is over and accepted.
    pub fn is_open(&self) -> bool {
        self.state == State::Open
    }

    /// Takes the bytes queued to send.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Bytes held from the peer: input not parsed, and the frames of a message not finished.
    pub fn buffered(&self) -> usize {
        self.rbuf.len() + self.held
    }

    fn parse_from(&mut self, at: &mut usize, out: &mut Vec<Event>) -> Result<(), FramingError> {
        loop {
            let buf = &self.rbuf[*at..];
            match self.state {
                State::Accepting => return Ok(()),
                State::Greeting => {
                    if !self.greeting(*at)? {
                        return Ok(());
                    }
                    *at += GREETING_LEN;
                    continue;
                }
                State::Handshake | State::Open => {}
            }
            let Some(&flags) = buf.first() else { return Ok(()) };
            if flags & !(FLAG_MORE | FLAG_LONG | FLAG_COMMAND) != 0 {
                return Err(FramingError::ReservedFlags(flags));
            }
            let (head, len) = if flags & FLAG_LONG != 0 {
                let Some(b) = buf.get(1..9) else { return Ok(()) };
                (9, u64::from_be_bytes(b.try_into().expect("eight bytes")))
            } else {
                let Some(&b) = buf.get(1) else { return Ok(()) };
                (2, b as u64)
            };
            if len > limits::MAX_FRAME_BYTES as u64 {
                return Err(FramingError::FrameTooLarge(len));
            }
            let len = len as usize;
            // The message's frames so far are held until its last frame: their sum is bounded too, before the
            // next frame is buffered.
            if flags & FLAG_COMMAND == 0 && self.held + len > limits::MAX_MESSAGE_BYTES {
                return Err(FramingError::MessageTooLarge(self.held as u64 + len as u64));
            }
            let Some(body) = buf.get(head..head + len) else { return Ok(()) };
            *at += head + len;
            if flags & FLAG_COMMAND != 0 {
                let body = body.to_vec();
                if let Some(ready) = self.command(&body)? {
                    out.push(ready);
                    return Ok(());
                }
                continue;
            }
            if self.state != State::Open {
                return Err(FramingError::Handshake("a message before READY"));
            }
            if self.frames.len() >= MAX_FRAMES {
                return Err(FramingError::TooManyFrames);
            }
            self.frames.push(body.to_vec());
            self.held += len;
            if flags & FLAG_MORE == 0 {
                self.held = 0;
                out.push(Event::Message(std::mem::take(&mut self.frames)));
            }
        }
    }

    /// Reads the greeting if it is whole (`Ok(false)`: not yet); refuses what is not ZMTP 3 as soon as the
    /// signature and version show it.
    fn greeting(&mut self, at: usize) -> Result<bool, FramingError> {
        let buf = &self.rbuf[at..];
        if buf.len() < GREETING_LEN {
            if buf.first().is_some_and(|&b| b != 0xFF) || buf.len() > 10 && (buf[9] & 1 == 0 || buf[10] < 3) {
                return Err(FramingError::NotZmtp3);
            }
            return Ok(false);
        }
        if buf[0] != 0xFF || buf[9] & 1 == 0 || buf[10] < 3 {
            return Err(FramingError::NotZmtp3);
        }
        let mech = &buf[12..32];
        if !(mech.starts_with(b"NULL") && mech[4..].iter().all(|&b| b == 0)) {
            return Err(FramingError::Mechanism);
        }
        self.state = State::Handshake;
        // libzmq's ROUTER sends an empty Identity of its own.
        self.out.extend(super::ready("ROUTER", &[("Identity", b"")]));
        Ok(true)
    }

    /// Handles a command: READY during the handshake (the event it gives), PING when open; the rest ignored.
    fn command(&mut self, body: &[u8]) -> Result<Option<Event>, FramingError> {
        let (name, data) = split_command(body).map_err(FramingError::Truncated)?;
        match self.state {
            State::Handshake => {
                if name != b"READY" {
                    return Err(FramingError::Handshake("the first command is not READY"));
                }
                let props = properties(data).map_err(FramingError::Truncated)?;
                let socket_type = props
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(b"Socket-Type"))
                    .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                    .ok_or(FramingError::Handshake("READY without Socket-Type"))?;
                if !["DEALER", "REQ", "ROUTER"].contains(&socket_type.as_str()) {
                    return Err(FramingError::SocketType(socket_type));
                }
                let identity = props
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(b"Identity"))
                    .map(|(_, v)| v.to_vec())
                    .filter(|v| !v.is_empty());
                self.state = State::Accepting;
                Ok(Some(Event::Ready(identity)))
            }
            State::Open if name == b"PING" => {
                // TTL (two bytes), then up to 16 bytes of context that the PONG carries back.
                let context = data.get(2..).unwrap_or_default();
                self.out.extend(super::command(b"PONG", &context[..context.len().min(16)]));
                Ok(None)
            }
            // PONG, ERROR and commands of later revisions: nothing to do.
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{frame, greeting, put_frame, ready};
    use super::*;

    fn open_framer() -> ServerFramer {
        let mut f = ServerFramer::new();
        assert_eq!(&f.take_output()[..GREETING_LEN], &greeting()[..]);
        f.feed(&greeting());
        f.feed(&ready("DEALER", &[("Identity", b"me")]));
        let mut ev = vec![];
        f.poll(&mut ev).unwrap();
        assert_eq!(ev, vec![Event::Ready(Some(b"me".to_vec()))]);
        f.open();
        assert!(f.take_output().starts_with(&ready("ROUTER", &[("Identity", b"")])));
        f
    }

    #[test]
    fn messages_come_out_whole_whatever_the_chunking() {
        let mut stream = vec![];
        put_frame(&mut stream, FLAG_MORE, b"a");
        put_frame(&mut stream, 0, &[9; 300]);
        stream.extend(frame(b"second"));
        for chunk in [1, 2, 7, stream.len()] {
            let mut f = open_framer();
            let mut ev = vec![];
            for part in stream.chunks(chunk) {
                f.feed(part);
                f.poll(&mut ev).unwrap();
            }
            assert_eq!(
                ev,
                vec![Event::Message(vec![b"a".to_vec(), vec![9; 300]]), Event::Message(vec![b"second".to_vec()])]
            );
            assert_eq!(f.buffered(), 0);
        }
    }

    #[test]
    fn limits_are_checked_before_the_input_is_held() {
        let mut f = open_framer();
        let mut head = vec![FLAG_LONG | FLAG_MORE];
        head.extend((limits::MAX_FRAME_BYTES as u64 + 1).to_be_bytes());
        f.feed(&head);
        assert_eq!(f.poll(&mut vec![]), Err(FramingError::FrameTooLarge(limits::MAX_FRAME_BYTES as u64 + 1)));
        let mut f = open_framer();
        let mut ev = vec![];
        let quarter = vec![0u8; limits::MAX_MESSAGE_BYTES / 4];
        let mut chunk = vec![];
        put_frame(&mut chunk, FLAG_MORE, &quarter);
        for _ in 0..4 {
            f.feed(&chunk);
            f.poll(&mut ev).unwrap();
        }
        f.feed(&chunk[..9]);
        assert!(matches!(f.poll(&mut ev), Err(FramingError::MessageTooLarge(_))));
        assert!(ev.is_empty());
        let mut f = ServerFramer::new();
        f.feed(b"GET / HTTP/1.1\r\n");
        assert_eq!(f.poll(&mut vec![]), Err(FramingError::NotZmtp3));
        let mut f = ServerFramer::new();
        f.feed(&greeting());
        f.feed(&frame(b"early"));
        assert_eq!(f.poll(&mut vec![]), Err(FramingError::Handshake("a message before READY")));
    }

    #[test]
    fn nothing_is_parsed_between_ready_and_open_and_pings_are_answered() {
        let mut f = ServerFramer::new();
        f.feed(&greeting());
        f.feed(&ready("REQ", &[]));
        f.feed(&frame(b"x"));
        let mut ev = vec![];
        f.poll(&mut ev).unwrap();
        f.poll(&mut ev).unwrap();
        assert_eq!(ev, vec![Event::Ready(None)]);
        f.take_output();
        f.open();
        f.feed(&super::super::command(b"PING", b"\x00\x01ctx"));
        f.poll(&mut ev).unwrap();
        assert_eq!(ev[1], Event::Message(vec![b"x".to_vec()]));
        assert_eq!(f.take_output(), super::super::command(b"PONG", b"ctx"));
    }
}
