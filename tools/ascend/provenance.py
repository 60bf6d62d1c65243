"""The provenance pattern of conformance/TESTEE.md ("The provenance pattern"), standard library only: what a
prefiller testee's block holds, so the runner can tell which source block landed where. Shared by the worker (which
fills its caches with it) and the testee's self-check."""

import struct

MAGIC = 0x4D43


def word(region, block, index):
    """The 8-byte word at index `index` (byte offset / 8) of block `block` of region `region`."""
    if not (0 <= region < 4096 and 0 <= block < 1 << 20 and 0 <= index < 65536):
        raise ValueError(f"region {region}, block {block}, word {index}: outside the pattern's ranges")
    return (MAGIC << 48) | (region << 36) | (block << 16) | index


def block_bytes(region, block, block_len):
    """Block `block` of region `region`, `block_len` bytes: little-endian words, the last one cut to what fits."""
    n = (block_len + 7) // 8
    return struct.pack(f"<{n}Q", *(word(region, block, k) for k in range(n)))[:block_len]


def decode(word_value):
    """(region, block, word index) of a pattern word, or None for anything else (zero: nothing landed)."""
    if word_value >> 48 != MAGIC:
        return None
    return (word_value >> 36) & 0xFFF, (word_value >> 16) & 0xFFFFF, word_value & 0xFFFF
