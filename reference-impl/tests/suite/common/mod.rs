//! What the ROUTER tests (`router.rs`) and the hostile-client suite (`hostile.rs`) both need: a raw ZMTP
//! client over a plain TCP stream, from a loopback address of its own (another address stands for another
//! host), with every read and write bounded by [`WAIT`].

#![allow(dead_code)] // each test binary uses its own part of this module

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use mooncake_reference::zmtp::{self, FLAG_LONG, GREETING_LEN};

/// The longest any single read, write or connect of a test waits.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// A TCP connection to `to` from `source`, reads and writes bounded by [`WAIT`].
pub(crate) fn connect_from(source: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    sock.bind(&format!("{source}:0").parse::<SocketAddr>().expect("an IPv4 source").into())?;
    sock.connect_timeout(&to.into(), WAIT)?;
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(WAIT))?;
    s.set_write_timeout(Some(WAIT))?;
    Ok(s)
}

/// Reads one ZMTP frame or command: (flags, body).
pub(crate) fn read_frame(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut head = [0u8; 2];
    s.read_exact(&mut head)?;
    let len = if head[0] & FLAG_LONG != 0 {
        let mut rest = [0u8; 7];
        s.read_exact(&mut rest)?;
        let mut b = [head[1], 0, 0, 0, 0, 0, 0, 0];
        b[1..].copy_from_slice(&rest);
        u64::from_be_bytes(b) as usize
    } else {
        head[1] as usize
    };
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    Ok((head[0], body))
}

/// A DEALER through the ZMTP handshake, by hand: greeting and READY both ways (the ROUTER's READY read, not
/// checked).
pub(crate) fn dealer_from(source: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    let mut s = connect_from(source, to)?;
    s.write_all(&zmtp::greeting())?;
    let mut g = [0u8; GREETING_LEN];
    s.read_exact(&mut g)?;
    s.write_all(&zmtp::ready("DEALER", &[]))?;
    read_frame(&mut s)?;
    Ok(s)
}
