"""Registered memory, the provenance pattern and the TCP stand-in for Mooncake's transfer engine.

Memory: a testee registers `num_blocks x block_len` bytes at each region's base address (conformance/TESTEE.md).
Regions that touch or overlap are merged into one segment; an access must fall inside one segment.

Provenance pattern (TESTEE.md): the word at byte offset `o` of block `b` of region `i` is the little-endian u64
`0x4d43 << 48 | i << 36 | b << 16 | o // 8`; a block whose length is not a multiple of 8 ends with the low
bytes of the next word.

Transfer engine: Mooncake Transfer Engine's P2P handshake and TCP transport (spec/transfer-engine/mooncake.toml),
written independently of the Rust one. Handshake on the target's RPC port: u64 LE length (type byte + JSON), type
byte 1 (Metadata), the segment descriptor JSON; the target answers its own descriptor in the same frame type. Data
on the port the descriptor names: per descriptor a 24-byte header (u64 LE size, u64 LE target address, opcode
WRITE | 0x80, 7 bytes padding), the payload, then an 8-byte status u64 LE `0x4D435456 << 32 | code` (0 = written,
1 = outside the registered memory: nothing written, the target closes the connection).
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


HS_METADATA = 1
HS_MAX = 1 << 20
HEADER = struct.Struct("<QQB7x")
STATUS_MAGIC = 0x4D435456 << 32
OP_READ, OP_WRITE, V2 = 0, 1, 0x80


def _frame(body: bytes, ty: int = HS_METADATA) -> bytes:
    return struct.pack("<Q", len(body) + 1) + bytes([ty]) + body


async def _read_frame(reader: asyncio.StreamReader):
    (n,) = struct.unpack("<Q", await reader.readexactly(8))
    if n == 0 or n > HS_MAX:
        raise ValueError(f"handshake frame of {n} bytes")
    payload = await reader.readexactly(n)
    if payload[0] <= 3:
        return payload[0], payload[1:]
    return None, payload  # the older, type-less frame


def _descriptor(name: str, host: str, data_port: int, buffers) -> bytes:
    import json

    d = {"buffers": [{"addr": a, "length": n, "name": name} for a, n in buffers], "name": name, "protocol": "tcp",
         "rdma_server_name": "", "tcp_data_host": host, "tcp_data_port": data_port, "tcp_proto_version": 2,
         "timestamp": ""}
    return (json.dumps(d, separators=(",", ":")) + "\n").encode()


async def te_write(src: Memory, session: str, descriptors) -> int:
    """Batch write `descriptors` [(src, dst, len)] read from `src` into the engine segment `session`
    ("host:rpc_port"): handshake, then one request per descriptor on one data connection. 0, or -1 on any
    failure (a refused descriptor writes nothing of itself)."""
    import json

    reqs = []
    for s, d, n in descriptors:
        data = src.read(s, n)
        if data is None or d < 0 or d >= 1 << 64:
            log.warning("transfer source %#x+%d is not registered (or descriptor out of range)", s, n)
            return -1
        reqs.append((d, bytes(data)))
    host, _, port = session.rpartition(":")
    host = host.strip("[]")
    writers = []
    try:
        async def io():
            reader, writer = await asyncio.open_connection(host, int(port))
            writers.append(writer)
            writer.write(_frame(_descriptor(session, host, 0, [])))
            await writer.drain()
            ty, body = await _read_frame(reader)
            if ty != HS_METADATA:
                raise ValueError(f"handshake answered with type {ty}")
            seg = json.loads(body)
            v2 = int(seg.get("tcp_proto_version", 1)) >= 2
            dhost = seg.get("tcp_data_host") or seg["name"].rpartition(":")[0]
            reader, writer = await asyncio.open_connection(dhost, int(seg["tcp_data_port"]))
            writers.append(writer)
            for d, data in reqs:
                if not data:
                    continue
                writer.write(HEADER.pack(len(data), d, OP_WRITE | (V2 if v2 else 0)) + data)
                await writer.drain()
                if v2:
                    (st,) = struct.unpack("<Q", await reader.readexactly(8))
                    if st & 0xFFFFFFFF00000000 != STATUS_MAGIC or st & 0xFFFFFFFF != 0:
                        log.warning("transfer to %s refused: status %#x", session, st)
                        return -1
            return 0

        return await asyncio.wait_for(io(), TE_TIMEOUT_S)
    except (OSError, ValueError, KeyError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
        log.warning("transfer to %s failed: %s", session, e)
        return -1
    finally:
        for w in writers:
            w.close()


class TeServer:
    """A transfer-engine target for a decoder's memory: handshake server (the port `start` returns, sent as
    remote_port) and data server; a request outside the registered memory is refused with status 1."""

    def __init__(self, mem: Memory):
        self.mem = mem
        self.server = None
        self.data = None
        self.writes = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self.data = await asyncio.start_server(self._data, host, 0)
        self.server = await asyncio.start_server(self._handshake, host, port)
        rpc = self.server.sockets[0].getsockname()[1]
        data_port = self.data.sockets[0].getsockname()[1]
        name = f"{host}:{rpc}"
        self.desc = _descriptor(name, host, data_port, [(a, len(b)) for a, b in zip(self.mem._starts, self.mem._bufs)])
        return rpc

    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        try:
            ty, _ = await asyncio.wait_for(_read_frame(reader), 5)
            writer.write(_frame(self.desc, ty if ty is not None else 0))
            await writer.drain()
            writer.write_eof()
            await asyncio.wait_for(reader.read(1), 5)
        except (ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError, OSError) as e:
            log.warning("handshake: %s", e)
        finally:
            writer.close()

    async def _data(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        try:
            while True:
                try:
                    head = await reader.readexactly(HEADER.size)
                except asyncio.IncompleteReadError:
                    return
                size, addr, op = HEADER.unpack(head)
                v2, op = bool(op & V2), op & ~V2
                # Checked before any payload byte is read: nothing is allocated from an unchecked length.
                if size == 0 or size > MAX_TRANSFER_BYTES or op not in (OP_READ, OP_WRITE) or self.mem.locate(addr, size) is None:
                    log.warning("rejected transfer of %d bytes at %#x", size, addr)
                    if v2:
                        writer.write(struct.pack("<Q", STATUS_MAGIC | 1))
                        await writer.drain()
                    return
                if op == OP_WRITE:
                    data = await asyncio.wait_for(reader.readexactly(size), TE_TIMEOUT_S)
                    self.mem.write(addr, data)
                    self.writes += 1
                    if v2:
                        writer.write(struct.pack("<Q", STATUS_MAGIC))
                else:
                    if v2:
                        writer.write(struct.pack("<Q", STATUS_MAGIC))
                    writer.write(bytes(self.mem.read(addr, size)))
                await writer.drain()
        except (asyncio.TimeoutError, OSError):
            pass
        finally:
            writer.close()

    def close(self):
        for s in (self.server, self.data):
            if s is not None:
                s.close()
