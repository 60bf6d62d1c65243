//! A minimal ZMTP 3.0 DEALER (RFC 23, NULL mechanism) over tokio TCP, used only as the benchmark's load
//! generator: it speaks exactly what a libzmq DEALER puts on the wire (greeting, READY with
//! `Socket-Type: DEALER`, one frame per request) but without libzmq's I/O thread and mailbox hops, so that on
//! a small machine the load generator takes less of the CPU that the prefiller under test needs.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use mooncake_reference::zmtp::{self, FLAG_COMMAND, FLAG_LONG, FLAG_MORE, GREETING_LEN};

pub(crate) struct Dealer {
    rx: BufReader<OwnedReadHalf>,
    tx: OwnedWriteHalf,
}

pub(crate) use zmtp::frame;

impl Dealer {
    /// Connects to `tcp://host:port` and completes the handshake.
    pub(crate) async fn connect(endpoint: &str) -> io::Result<Dealer> {
        let addr = endpoint.strip_prefix("tcp://").ok_or_else(|| io::Error::other("not a tcp:// endpoint"))?;
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let (r, mut tx) = s.into_split();
        let mut rx = BufReader::new(r);
        tx.write_all(&zmtp::greeting()).await?;
        let mut peer = [0u8; GREETING_LEN];
        rx.read_exact(&mut peer).await?;
        if peer[0] != 0xFF || peer[9] != 0x7F || peer[10] < 3 {
            return Err(io::Error::other("the peer does not speak ZMTP 3"));
        }
        tx.write_all(&zmtp::ready("DEALER", &[])).await?;
        let mut d = Dealer { rx, tx };
        let (flags, _) = d.read_frame().await?;
        if flags & FLAG_COMMAND == 0 {
            return Err(io::Error::other("expected the peer's READY"));
        }
        Ok(d)
    }

    async fn read_frame(&mut self) -> io::Result<(u8, Vec<u8>)> {
        let flags = self.rx.read_u8().await?;
        let len = if flags & FLAG_LONG != 0 { self.rx.read_u64().await? } else { self.rx.read_u8().await? as u64 };
        if len > mooncake_wire::limits::MAX_FRAME_BYTES as u64 {
            return Err(io::Error::other("frame over the limit"));
        }
        let mut body = vec![0u8; len as usize];
        self.rx.read_exact(&mut body).await?;
        Ok((flags, body))
    }

    /// Sends one already framed message.
    pub(crate) async fn send_framed(&mut self, framed: &[u8]) -> io::Result<()> {
        self.tx.write_all(framed).await
    }

    /// Receives one message (all its frames), skipping commands such as heartbeats.
    pub(crate) async fn recv(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let mut frames = vec![];
        loop {
            let (flags, body) = self.read_frame().await?;
            if flags & FLAG_COMMAND != 0 {
                continue;
            }
            frames.push(body);
            if flags & FLAG_MORE == 0 {
                return Ok(frames);
            }
        }
    }
}
