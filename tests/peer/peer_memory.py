"""Registered memory, the provenance pattern and the TCP stand-in for Mooncake's transfer engine.

Memory: a testee registers `num_blocks x block_len` bytes at each region's base address (conformance/TESTEE.md).
Regions that touch or overlap are merged into one segment; an access must fall inside one segment.

Provenance pattern (TESTEE.md): the word at byte offset `o` of block `b` of region `i` is the little-endian u64
`0x4d43 << 48 | i << 36 | b << 16 | o // 8`; a block whose length is not a multiple of 8 ends with the low
bytes of the next word.

Transfer engine (the project's own TCP write protocol, reference-impl/src/backend.rs): one connection per
batch write. Request `b"MCWR"`, u32 descriptor count, then per descriptor u64 destination address, u32
length and the bytes; reply an i64 return code, 0 when everything was written, -1 when any destination was
outside the registered memory (nothing is written then). All integers big-endian.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import struct
import sys
from array import array

log = logging.getLogger("peer.memory")

PROVENANCE_TAG = 0x4D43
MAGIC = b"MCWR"
# Caps for one batch write on the receiving side (a declared length is checked against the registered
# memory before any byte is read, so nothing is allocated from an unchecked length).
MAX_TRANSFER_BYTES = 1 << 30
MAX_DESCRIPTORS = 1 << 24
TE_TIMEOUT_S = 30.0


def provenance_word(region: int, block: int, offset: int) -> int:
    return (PROVENANCE_TAG << 48) | (region << 36) | (block << 16) | (offset // 8)


def decode_provenance(word: int):
    """(region, block, word index) of a provenance word, or None when the tag is missing."""
    if word >> 48 != PROVENANCE_TAG:
        return None
    return (word >> 36) & 0xFFF, (word >> 16) & 0xFFFFF, word & 0xFFFF


def provenance_block(region: int, block: int, block_len: int) -> bytes:
    first = provenance_word(region, block, 0)
    words = array("Q", range(first, first + (block_len + 7) // 8))
    if sys.byteorder != "little":
        words.byteswap()
    return words.tobytes()[:block_len]


class Memory:
    """Byte segments at (fake) addresses."""

    def __init__(self):
        self._starts: list[int] = []
        self._bufs: list[bytearray] = []

    @classmethod
    def from_layout(cls, layout: dict, fill_provenance: bool) -> "Memory":
        bases = list(layout.get("kv_caches_base_addr") or [])
        strides = list(layout.get("block_lens") or [])
        num_blocks = int(layout.get("num_blocks", 0))
        if len(bases) != len(strides):
            raise ValueError("layout: kv_caches_base_addr and block_lens differ in length")
        spans = []
        for base, stride in zip(bases, strides):
            if base < 0 or stride < 0 or num_blocks < 0:
                raise ValueError("layout: negative address, block length or block count")
            spans.append((base, base + num_blocks * stride))
        mem = cls()
        for start, end in sorted(spans):
            if mem._starts and start <= mem._starts[-1] + len(mem._bufs[-1]):
                last_end = mem._starts[-1] + len(mem._bufs[-1])
                if end > last_end:
                    mem._bufs[-1].extend(bytes(end - last_end))
            else:
                mem._starts.append(start)
                mem._bufs.append(bytearray(end - start))
        if fill_provenance:
            for i, (base, stride) in enumerate(zip(bases, strides)):
                for b in range(num_blocks):
                    mem.write(base + b * stride, provenance_block(i, b, stride))
        return mem

    def locate(self, addr: int, length: int):
        """(segment index, offset) when [addr, addr+length) lies inside one segment, else None."""
        if addr < 0 or length < 0:
            return None
        k = bisect.bisect_right(self._starts, addr) - 1
        if k < 0:
            return None
        off = addr - self._starts[k]
        if off + length > len(self._bufs[k]):
            return None
        return k, off

    def read(self, addr: int, length: int):
        loc = self.locate(addr, length)
        if loc is None:
            return None
        k, off = loc
        return memoryview(self._bufs[k])[off:off + length]

    def write(self, addr: int, data) -> bool:
        loc = self.locate(addr, len(data))
        if loc is None:
            return False
        k, off = loc
        self._bufs[k][off:off + len(data)] = data
        return True


async def te_write(src: Memory, session: str, descriptors) -> int:
    """Batch write `descriptors` [(src, dst, len)] read from `src` into the peer `session` ("host:port")."""
    parts = [MAGIC, struct.pack(">I", len(descriptors))]
    for s, d, n in descriptors:
        data = src.read(s, n)
        if data is None or d < 0 or d >= 1 << 64 or n >= 1 << 32:
            log.warning("transfer source %#x+%d is not registered (or descriptor out of range)", s, n)
            return -1
        parts.append(struct.pack(">QI", d, n))
        parts.append(data)
    host, _, port = session.rpartition(":")
    host = host.strip("[]")
    writer = None
    try:
        async def io():
            nonlocal writer
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.writelines(parts)
            await writer.drain()
            return struct.unpack(">q", await reader.readexactly(8))[0]

        return await asyncio.wait_for(io(), TE_TIMEOUT_S)
    except (OSError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
        log.warning("transfer to %s failed: %s", session, e)
        return -1
    finally:
        if writer is not None:
            writer.close()


class TeServer:
    """Serves batch writes into a decoder's memory."""

    def __init__(self, mem: Memory):
        self.mem = mem
        self.server = None
        self.writes = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self.server = await asyncio.start_server(self._handle, host, port)
        return self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        try:
            try:
                chunks = await asyncio.wait_for(self._read_request(reader), TE_TIMEOUT_S)
            except (ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError, OSError) as e:
                log.warning("rejected transfer: %s", e)
                rc = -1
            else:
                for dst, data in chunks:
                    self.mem.write(dst, data)
                self.writes += 1
                rc = 0
            writer.write(struct.pack(">q", rc))
            await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader):
        head = await reader.readexactly(8)
        if head[:4] != MAGIC:
            raise ValueError("bad magic")
        (count,) = struct.unpack(">I", head[4:])
        if count > MAX_DESCRIPTORS:
            raise ValueError(f"{count} descriptors")
        chunks = []
        total = 0
        for _ in range(count):
            dst, n = struct.unpack(">QI", await reader.readexactly(12))
            total += n
            # Every destination is checked before its bytes are read and before anything is written.
            if total > MAX_TRANSFER_BYTES or self.mem.locate(dst, n) is None:
                raise ValueError(f"write of {n} bytes at {dst:#x} is outside the registered memory")
            chunks.append((dst, await reader.readexactly(n)))
        return chunks

    def close(self):
        if self.server is not None:
            self.server.close()
