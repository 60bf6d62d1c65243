//! A pcapng writer for TCP over IPv4 on an Ethernet link, as a loopback capture on Linux shows it (zero MAC
//! addresses): a section header, one interface, one enhanced packet block per segment, microsecond timestamps.
//! Checksums are computed, so a reader that verifies them sees none wrong. Pure bytes in, bytes out.

/// pcapng block types (the pcapng specification, draft-ietf-opsawg-pcapng).
const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 0x0000_0001;
const EPB: u32 = 0x0000_0006;
/// The section header's byte-order magic.
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// LINKTYPE_ETHERNET.
const LINKTYPE_ETHERNET: u16 = 1;
/// The largest packet the interface block announces.
pub const SNAPLEN: u32 = 262_144;
/// The largest TCP payload put into one segment (loopback's MTU is 65,536).
pub const MAX_SEGMENT: usize = 65_000;

/// TCP flags of a segment.
pub mod flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
}

/// One end of a TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct End {
    /// IPv4 address.
    pub ip: [u8; 4],
    /// TCP port.
    pub port: u16,
}

/// One TCP segment to write.
#[derive(Clone, Debug)]
pub struct Segment<'a> {
    /// Sender.
    pub src: End,
    /// Receiver.
    pub dst: End,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number (with [`flags::ACK`]).
    pub ack: u32,
    /// TCP flags.
    pub flags: u8,
    /// The payload, at most [`MAX_SEGMENT`] bytes.
    pub payload: &'a [u8],
}

/// A capture file being written into memory.
pub struct Pcapng {
    out: Vec<u8>,
    ip_id: u16,
}

impl Default for Pcapng {
    fn default() -> Self {
        Pcapng::new()
    }
}

impl Pcapng {
    /// A file with its section header and one Ethernet interface (`lo`).
    pub fn new() -> Pcapng {
        let mut p = Pcapng { out: vec![], ip_id: 1 };
        let mut shb = vec![];
        shb.extend(BYTE_ORDER_MAGIC.to_le_bytes());
        shb.extend(1u16.to_le_bytes()); // major
        shb.extend(0u16.to_le_bytes()); // minor
        shb.extend((-1i64).to_le_bytes()); // section length: unknown
        shb.extend(option(4, b"mooncake-conformance pcap")); // shb_userappl
        shb.extend(0u32.to_le_bytes()); // opt_endofopt
        p.block(SHB, &shb);
        let mut idb = vec![];
        idb.extend(LINKTYPE_ETHERNET.to_le_bytes());
        idb.extend(0u16.to_le_bytes());
        idb.extend(SNAPLEN.to_le_bytes());
        idb.extend(option(2, b"lo")); // if_name
        idb.extend(option(9, &[6])); // if_tsresol: microseconds
        idb.extend(0u32.to_le_bytes());
        p.block(IDB, &idb);
        p
    }

    fn block(&mut self, kind: u32, body: &[u8]) {
        let len = (12 + body.len().div_ceil(4) * 4) as u32;
        self.out.extend(kind.to_le_bytes());
        self.out.extend(len.to_le_bytes());
        self.out.extend(body);
        self.out.resize(self.out.len() + (4 - body.len() % 4) % 4, 0);
        self.out.extend(len.to_le_bytes());
    }

    /// Appends one segment at `micros` (microseconds since the Unix epoch).
    pub fn segment(&mut self, micros: u64, s: &Segment<'_>) {
        let frame = ethernet_ipv4_tcp(s, self.ip_id);
        self.ip_id = self.ip_id.wrapping_add(1);
        let mut epb = vec![];
        epb.extend(0u32.to_le_bytes()); // interface 0
        epb.extend(((micros >> 32) as u32).to_le_bytes());
        epb.extend((micros as u32).to_le_bytes());
        epb.extend((frame.len() as u32).to_le_bytes());
        epb.extend((frame.len() as u32).to_le_bytes());
        epb.extend(&frame);
        epb.resize(epb.len() + (4 - frame.len() % 4) % 4, 0);
        self.block(EPB, &epb);
    }

    /// The file's bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.out
    }
}

/// An option: code, length, value padded to 32 bits.
fn option(code: u16, value: &[u8]) -> Vec<u8> {
    let mut o = vec![];
    o.extend(code.to_le_bytes());
    o.extend((value.len() as u16).to_le_bytes());
    o.extend(value);
    o.resize(o.len() + (4 - value.len() % 4) % 4, 0);
    o
}

/// The Internet checksum (RFC 1071) of `data`, starting from `sum`.
fn checksum(mut sum: u32, data: &[u8]) -> u16 {
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet frame (zero addresses, type IPv4) carrying the segment.
fn ethernet_ipv4_tcp(s: &Segment<'_>, ip_id: u16) -> Vec<u8> {
    let mut tcp = vec![];
    tcp.extend(s.src.port.to_be_bytes());
    tcp.extend(s.dst.port.to_be_bytes());
    tcp.extend(s.seq.to_be_bytes());
    tcp.extend(if s.flags & flags::ACK != 0 { s.ack } else { 0 }.to_be_bytes());
    tcp.push(5 << 4); // data offset: 20 bytes
    tcp.push(s.flags);
    tcp.extend(65_535u16.to_be_bytes()); // window
    tcp.extend([0, 0, 0, 0]); // checksum, urgent pointer
    tcp.extend(s.payload);
    let mut pseudo = vec![];
    pseudo.extend(s.src.ip);
    pseudo.extend(s.dst.ip);
    pseudo.extend([0, 6]);
    pseudo.extend((tcp.len() as u16).to_be_bytes());
    let sum = pseudo.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    let c = checksum(sum, &tcp);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    let mut ip = vec![0x45, 0];
    ip.extend(((20 + tcp.len()) as u16).to_be_bytes());
    ip.extend(ip_id.to_be_bytes());
    ip.extend([0x40, 0, 64, 6, 0, 0]); // don't fragment, TTL 64, TCP, checksum
    ip.extend(s.src.ip);
    ip.extend(s.dst.ip);
    let c = checksum(0, &ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut eth = vec![0u8; 12];
    eth.extend([0x08, 0x00]);
    eth.extend(ip);
    eth.extend(tcp);
    eth
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: End = End { ip: [127, 0, 0, 1], port: 50_000 };
    const B: End = End { ip: [127, 0, 0, 1], port: 8998 };

    fn u32le(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    /// The blocks chain: each block's two length fields agree, lengths are multiples of four, and the types are
    /// SHB, IDB, then one EPB per segment.
    #[test]
    fn blocks_are_well_formed() {
        let mut p = Pcapng::new();
        p.segment(1_000_000, &Segment { src: A, dst: B, seq: 1, ack: 0, flags: flags::SYN, payload: b"" });
        p.segment(1_000_001, &Segment { src: A, dst: B, seq: 2, ack: 9, flags: flags::ACK, payload: b"abc" });
        let b = p.into_bytes();
        let (mut at, mut kinds) = (0, vec![]);
        while at < b.len() {
            let (kind, len) = (u32le(&b, at), u32le(&b, at + 4) as usize);
            assert_eq!(len % 4, 0);
            assert_eq!(u32le(&b, at + len - 4) as usize, len, "trailing length of the block at {at}");
            kinds.push(kind);
            at += len;
        }
        assert_eq!(at, b.len());
        assert_eq!(kinds, [SHB, IDB, EPB, EPB]);
        assert_eq!(u32le(&b, 8), BYTE_ORDER_MAGIC);
    }

    /// A packet's IPv4 and TCP checksums verify (the sum over the header, or pseudo-header and segment, with
    /// the checksum in place is 0xFFFF), and its lengths and payload are where a reader looks for them.
    #[test]
    fn packets_carry_valid_checksums_and_the_payload() {
        let s = Segment { src: A, dst: B, seq: 7, ack: 11, flags: flags::ACK | flags::PSH, payload: b"hello" };
        let f = ethernet_ipv4_tcp(&s, 3);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let ip = &f[14..34];
        assert_eq!(checksum(0, ip), 0, "IPv4 header checksum");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, f.len() - 14);
        let tcp = &f[34..];
        let mut pseudo = vec![];
        pseudo.extend(A.ip);
        pseudo.extend(B.ip);
        pseudo.extend([0, 6]);
        pseudo.extend((tcp.len() as u16).to_be_bytes());
        let sum = pseudo.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
        assert_eq!(checksum(sum, tcp), 0, "TCP checksum");
        assert_eq!(u16::from_be_bytes([tcp[0], tcp[1]]), 50_000);
        assert_eq!(u16::from_be_bytes([tcp[2], tcp[3]]), 8998);
        assert_eq!(u32::from_be_bytes(tcp[4..8].try_into().unwrap()), 7);
        assert_eq!(u32::from_be_bytes(tcp[8..12].try_into().unwrap()), 11);
        assert_eq!(&tcp[20..], b"hello");
        // An odd-length payload is summed with a zero byte after it.
        let odd = ethernet_ipv4_tcp(&Segment { payload: b"hell", ..s.clone() }, 4);
        assert_ne!(odd[34 + 16..34 + 18], f[34 + 16..34 + 18]);
    }

    /// Timestamps split into high and low words as the interface's microsecond resolution says.
    #[test]
    fn timestamps_are_microseconds() {
        let mut p = Pcapng::new();
        let before = p.out.len();
        let t = 1_795_961_084_123_456u64;
        p.segment(t, &Segment { src: A, dst: B, seq: 1, ack: 0, flags: flags::SYN, payload: b"" });
        let b = p.into_bytes();
        let hi = u32le(&b, before + 12);
        let lo = u32le(&b, before + 16);
        assert_eq!((u64::from(hi) << 32) | u64::from(lo), t);
    }
}
