//! ZMTP 3 wire pieces (RFC 23 and 37, NULL mechanism): the greeting, frames and commands a libzmq peer puts on
//! the wire, and [`server`], the sans-IO framing state machine of a ROUTER's connection (the reference peer's
//! prefiller drives it over its sockets; the fuzz target `zmtp_server` drives it over arbitrary bytes), and
//! [`relay`], the sans-IO leg table of a ROUTER-to-DEALER relay (the conformance tap's; fuzz target `tap_relay`).

pub mod relay;
pub mod server;

/// More frames of this message follow.
pub const FLAG_MORE: u8 = 0x01;
/// The size is eight bytes, not one.
pub const FLAG_LONG: u8 = 0x02;
/// A command (READY, PING, ...), not a message frame.
pub const FLAG_COMMAND: u8 = 0x04;
/// Bytes of a ZMTP 3 greeting.
pub const GREETING_LEN: usize = 64;

/// The greeting of a ZMTP 3.1 peer with the NULL mechanism (as-server 0, as libzmq sends it for NULL).
pub fn greeting() -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[0] = 0xFF;
    g[9] = 0x7F;
    g[10] = 3;
    g[11] = 1;
    g[12..16].copy_from_slice(b"NULL");
    g
}

/// Appends one frame: the flags, a one-byte size up to 255 bytes (eight bytes, [`FLAG_LONG`], above), the body.
pub fn put_frame(out: &mut Vec<u8>, flags: u8, body: &[u8]) {
    if body.len() <= 255 {
        out.extend([flags, body.len() as u8]);
    } else {
        out.push(flags | FLAG_LONG);
        out.extend((body.len() as u64).to_be_bytes());
    }
    out.extend_from_slice(body);
}

/// One frame, the last of its message.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 9);
    put_frame(&mut out, 0, body);
    out
}

/// A command frame: the name with its length, then the data.
pub fn command(name: &[u8], data: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(1 + name.len() + data.len());
    body.push(name.len() as u8);
    body.extend_from_slice(name);
    body.extend_from_slice(data);
    let mut out = Vec::with_capacity(body.len() + 9);
    put_frame(&mut out, FLAG_COMMAND, &body);
    out
}

/// The READY command of a `socket_type` socket with these properties after `Socket-Type` (libzmq adds
/// `Identity`, empty unless set, for DEALER, REQ and ROUTER sockets).
pub fn ready(socket_type: &str, more: &[(&str, &[u8])]) -> Vec<u8> {
    let mut props = vec![];
    for (name, value) in [("Socket-Type", socket_type.as_bytes())].iter().chain(more) {
        props.push(name.len() as u8);
        props.extend_from_slice(name.as_bytes());
        props.extend((value.len() as u32).to_be_bytes());
        props.extend_from_slice(value);
    }
    command(b"READY", &props)
}

/// What is wrong with a command's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncated(pub &'static str);

impl std::fmt::Display for Truncated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "truncated {}", self.0)
    }
}

impl std::error::Error for Truncated {}

/// A command body's name and data.
pub fn split_command(body: &[u8]) -> Result<(&[u8], &[u8]), Truncated> {
    let n = *body.first().ok_or(Truncated("command"))? as usize;
    let name = body.get(1..1 + n).ok_or(Truncated("command name"))?;
    Ok((name, &body[1 + n..]))
}

/// The properties of a READY command's data: `(name, value)` pairs.
pub fn properties(data: &[u8]) -> Result<Vec<(&[u8], &[u8])>, Truncated> {
    let mut props = vec![];
    let mut rest = data;
    while !rest.is_empty() {
        let n = rest[0] as usize;
        let name = rest.get(1..1 + n).ok_or(Truncated("property name"))?;
        let len = rest.get(1 + n..5 + n).ok_or(Truncated("property length"))?;
        let len = u32::from_be_bytes(len.try_into().expect("four bytes")) as usize;
        let value = rest.get(5 + n..).and_then(|r| r.get(..len)).ok_or(Truncated("property value"))?;
        props.push((name, value));
        rest = &rest[5 + n + len..];
    }
    Ok(props)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip_and_every_truncation_is_refused() {
        let r = ready("DEALER", &[("Identity", b"abc")]);
        assert_eq!(r[0], FLAG_COMMAND);
        let (name, data) = split_command(&r[2..]).unwrap();
        assert_eq!(name, b"READY");
        assert_eq!(properties(data).unwrap(), vec![(&b"Socket-Type"[..], &b"DEALER"[..]), (b"Identity", b"abc")]);
        // Socket-Type (1 + 11 + 4 + 6 bytes) is whole at 22: a READY of one property.
        let first = 1 + 11 + 4 + 6;
        assert_eq!(properties(&data[..first]).unwrap().len(), 1);
        for cut in (1..data.len()).filter(|&c| c != first) {
            assert!(properties(&data[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = data.to_vec();
        huge[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(properties(&huge), Err(Truncated("property value")));
        assert_eq!(split_command(&[]), Err(Truncated("command")));
        assert_eq!(split_command(&[5, b'R']), Err(Truncated("command name")));
    }

    #[test]
    fn frames_switch_to_the_long_form_above_255_bytes() {
        assert_eq!(frame(&[7; 255])[..2], [0, 255]);
        let long = frame(&[7; 256]);
        assert_eq!(long[0], FLAG_LONG);
        assert_eq!(long[1..9], 256u64.to_be_bytes());
        assert_eq!(long.len(), 9 + 256);
    }
}
