"""A MessagePack writer that can pick non-canonical encodings (wider headers and ints) on purpose.

Values are msgspec builtins (int, str, bytes, None, bool, float, list, dict) plus `Raw` (bytes written as is).
A `Style` says how to write ints, strings, map keys, arrays and maps; the default style is msgspec's own
(smallest widths), so `write(v, Style())` equals `msgspec.msgpack.encode(v)` for these values."""
import struct


class Raw(bytes):
    """Already-encoded MessagePack, written unchanged."""


class Key(str):
    """A map key whose UTF-8 bytes are given explicitly (may be invalid UTF-8)."""

    def __new__(cls, raw):
        obj = super().__new__(cls, raw.decode("latin-1"))
        obj.raw = raw
        return obj


class Style:
    def __init__(self, ints="canonical", strs=None, keys=None, arrays=None, maps=None):
        self.ints = ints      # canonical | wide (u64/i64) | signed (i64 below 2^63) | u16 (cd/d1 where it fits)
        self.strs = strs      # None | 8 | 16 | 32: width of every string (values and keys)
        self.keys = keys      # None | 8 | 16 | 32: width of map keys only (overrides strs for keys)
        self.arrays = arrays  # None | 16 | 32
        self.maps = maps      # None | 16 | 32


def canonical_int(v):
    if 0 <= v:
        if v <= 0x7F:
            return bytes([v])
        if v <= 0xFF:
            return b"\xcc" + struct.pack(">B", v)
        if v <= 0xFFFF:
            return b"\xcd" + struct.pack(">H", v)
        if v <= 0xFFFFFFFF:
            return b"\xce" + struct.pack(">I", v)
        return b"\xcf" + struct.pack(">Q", v)
    if v >= -32:
        return struct.pack(">b", v)
    if v >= -128:
        return b"\xd0" + struct.pack(">b", v)
    if v >= -32768:
        return b"\xd1" + struct.pack(">h", v)
    if v >= -2 ** 31:
        return b"\xd2" + struct.pack(">i", v)
    return b"\xd3" + struct.pack(">q", v)


def write_int(v, mode):
    if mode == "wide":
        return b"\xcf" + struct.pack(">Q", v) if v >= 0 else b"\xd3" + struct.pack(">q", v)
    if mode == "signed":
        return b"\xd3" + struct.pack(">q", v) if v < 2 ** 63 else b"\xcf" + struct.pack(">Q", v)
    if mode == "u16":
        if 0 <= v <= 0xFFFF:
            return b"\xcd" + struct.pack(">H", v)
        if -32768 <= v < 0:
            return b"\xd1" + struct.pack(">h", v)
    if mode == "u64":
        return b"\xcf" + struct.pack(">Q", v)
    if mode == "i8":
        return b"\xd0" + struct.pack(">b", v)
    return canonical_int(v)


def str_header(n, width=None):
    if width == 8 and n <= 0xFF:
        return b"\xd9" + struct.pack(">B", n)
    if width == 16 and n <= 0xFFFF:
        return b"\xda" + struct.pack(">H", n)
    if width == 32:
        return b"\xdb" + struct.pack(">I", n)
    if n <= 31:
        return bytes([0xA0 | n])
    if n <= 0xFF:
        return b"\xd9" + struct.pack(">B", n)
    if n <= 0xFFFF:
        return b"\xda" + struct.pack(">H", n)
    return b"\xdb" + struct.pack(">I", n)


def array_header(n, width=None):
    if width == 16 and n <= 0xFFFF:
        return b"\xdc" + struct.pack(">H", n)
    if width == 32:
        return b"\xdd" + struct.pack(">I", n)
    if n <= 15:
        return bytes([0x90 | n])
    if n <= 0xFFFF:
        return b"\xdc" + struct.pack(">H", n)
    return b"\xdd" + struct.pack(">I", n)


def map_header(n, width=None):
    if width == 16 and n <= 0xFFFF:
        return b"\xde" + struct.pack(">H", n)
    if width == 32:
        return b"\xdf" + struct.pack(">I", n)
    if n <= 15:
        return bytes([0x80 | n])
    if n <= 0xFFFF:
        return b"\xde" + struct.pack(">H", n)
    return b"\xdf" + struct.pack(">I", n)


def write_str(s, width):
    raw = s.raw if isinstance(s, Key) else s.encode("utf-8")
    return str_header(len(raw), width) + raw


def write(v, st, out=None, key=False):
    out = bytearray() if out is None else out
    if isinstance(v, Raw):
        out += v
    elif v is None:
        out += b"\xc0"
    elif v is True:
        out += b"\xc3"
    elif v is False:
        out += b"\xc2"
    elif isinstance(v, int):
        out += write_int(v, st.ints)
    elif isinstance(v, float):
        out += b"\xcb" + struct.pack(">d", v)
    elif isinstance(v, str):
        out += write_str(v, (st.keys or st.strs) if key else st.strs)
    elif isinstance(v, (bytes, bytearray)):
        n = len(v)
        out += (b"\xc4" + struct.pack(">B", n) if n <= 0xFF else b"\xc5" + struct.pack(">H", n) if n <= 0xFFFF
                else b"\xc6" + struct.pack(">I", n)) + v
    elif isinstance(v, (list, tuple)):
        out += array_header(len(v), st.arrays)
        for x in v:
            write(x, st, out)
    elif isinstance(v, dict):
        write_entries(list(v.items()), st, out)
    else:
        raise TypeError(type(v))
    return bytes(out)


def write_entries(entries, st, out=None, header=None):
    """A map from (key, value) pairs (duplicates allowed), with its header (or `header` bytes)."""
    out = bytearray() if out is None else out
    out += header if header is not None else map_header(len(entries), st.maps)
    for k, x in entries:
        write(k, st, out, key=True)
        write(x, st, out)
    return bytes(out)
