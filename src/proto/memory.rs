//! Registered memory as a transfer engine sees it: regions at (virtual) base addresses, written by
//! descriptors. Used by the simulated network and by the reference peer's transfer backends.

use std::collections::BTreeMap;

use super::planner::Descriptor;

/// Byte-addressed memory made of registered regions (base address → bytes).
#[derive(Clone, Debug, Default)]
pub struct Memory {
    regions: BTreeMap<u64, Vec<u8>>,
}

impl Memory {
    /// Registers a region of `len` bytes at `base`, byte `i` set to `fill(i)`.
    pub fn register(&mut self, base: u64, len: usize, fill: impl Fn(usize) -> u8) {
        self.regions.insert(base, (0..len).map(fill).collect());
    }
    /// The region holding `[addr, addr + len)` whole, as (its base, the offset in it); `None` if no region does.
    pub fn locate(&self, addr: u64, len: u64) -> Option<(u64, usize)> {
        let (&base, r) = self.regions.range(..=addr).next_back()?;
        let off = (addr - base) as usize;
        (off as u64).checked_add(len).is_some_and(|end| end <= r.len() as u64).then_some((base, off))
    }
    /// The bytes `[addr, addr + len)`, if one region holds them.
    pub fn read(&self, addr: u64, len: u64) -> Option<&[u8]> {
        let (base, off) = self.locate(addr, len)?;
        Some(&self.regions[&base][off..off + len as usize])
    }
    /// Writes `data` at `addr`; false (and nothing written) if no region holds it whole.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> bool {
        match self.locate(addr, data.len() as u64) {
            Some((base, off)) => {
                self.regions.get_mut(&base).expect("located")[off..off + data.len()].copy_from_slice(data);
                true
            }
            None => false,
        }
    }
    /// The region registered at `base`.
    pub fn region(&self, base: u64) -> Option<&[u8]> {
        self.regions.get(&base).map(Vec::as_slice)
    }
    /// Every registered region as (base address, length), by address.
    pub fn regions(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.regions.iter().map(|(b, r)| (*b, r.len() as u64))
    }
}

/// Copies descriptors from `src` memory into `dst` memory as a transfer engine would; -1 if any address is
/// outside the registered regions (nothing is written then).
pub fn perform_write(src: &Memory, dst: &mut Memory, descriptors: &[Descriptor]) -> i64 {
    let mut chunks = Vec::with_capacity(descriptors.len());
    for d in descriptors {
        match (src.read(d.src, d.len), dst.locate(d.dst, d.len)) {
            (Some(bytes), Some(_)) => chunks.push((d.dst, bytes.to_vec())),
            _ => return -1,
        }
    }
    for (addr, bytes) in chunks {
        dst.write(addr, &bytes);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn writes_are_all_or_nothing_and_bounded() {
        let mut src = Memory::default();
        src.register(100, 10, |i| i as u8);
        let mut dst = Memory::default();
        dst.register(1000, 10, |_| 0);
        assert_eq!(perform_write(&src, &mut dst, &[Descriptor { src: 102, dst: 1005, len: 3 }]), 0);
        assert_eq!(dst.region(1000).unwrap(), &[0, 0, 0, 0, 0, 2, 3, 4, 0, 0]);
        // One descriptor out of range: nothing at all is written.
        let bad = [Descriptor { src: 100, dst: 1000, len: 2 }, Descriptor { src: 100, dst: 1009, len: 2 }];
        assert_eq!(perform_write(&src, &mut dst, &bad), -1);
        assert_eq!(dst.region(1000).unwrap()[..2], [0, 0]);
        assert!(dst.read(999, 1).is_none() && dst.read(1000, 11).is_none());
    }
}

/// The provenance pattern of `conformance/TESTEE.md`: the 8-byte little-endian word at byte offset `o` of block
/// `b` of region `i` of a prefiller's memory, so a reader of the decoder's memory can tell which source bytes
/// landed where without knowing the planner.
pub fn provenance_word(region: u64, block: u64, offset: u64) -> u64 {
    (0x4d43 << 48) | ((region & 0xfff) << 36) | ((block & 0xf_ffff) << 16) | ((offset / 8) & 0xffff)
}

/// (region, block, byte offset) of a provenance word; `None` for anything else (zero: never written).
pub fn decode_provenance(word: u64) -> Option<(u64, u64, u64)> {
    (word >> 48 == 0x4d43).then(|| ((word >> 36) & 0xfff, (word >> 16) & 0xf_ffff, (word & 0xffff) * 8))
}

/// Fills `len` bytes of block-structured memory for region `region` with the provenance pattern.
pub fn provenance_bytes(region: u64, block_len: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut o = 0u64;
    while out.len() < len {
        let (b, off) = (o / block_len.max(1), o % block_len.max(1));
        let word = provenance_word(region, b, off - off % 8).to_le_bytes();
        let start = (off % 8) as usize;
        let take = (8 - start).min(len - out.len()).min((block_len - off) as usize);
        out.extend_from_slice(&word[start..start + take]);
        o += take as u64;
    }
    out
}

#[cfg(test)]
mod provenance_tests {
    use super::*;
    #[test]
    fn round_trips() {
        let w = provenance_word(3, 17, 64);
        assert_eq!(decode_provenance(w), Some((3, 17, 64)));
        assert_eq!(decode_provenance(0), None);
        let b = provenance_bytes(1, 16, 48);
        assert_eq!(b.len(), 48);
        let word = u64::from_le_bytes(b[16..24].try_into().unwrap());
        assert_eq!(decode_provenance(word), Some((1, 1, 0)));
        let word = u64::from_le_bytes(b[40..48].try_into().unwrap());
        assert_eq!(decode_provenance(word), Some((1, 2, 8)));
        // A block length that is not a multiple of 8 ends each block with a partial word.
        let b = provenance_bytes(0, 12, 24);
        assert_eq!(decode_provenance(u64::from_le_bytes(b[12..20].try_into().unwrap())), Some((0, 1, 0)));
    }
}
