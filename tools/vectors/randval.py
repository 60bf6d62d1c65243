"""Seeded random well-typed values for a message class (the `valid-NNNN` cases).

Every draw goes through one `random.Random`, in a fixed order, so a seed gives the same values on every
CPython 3 (the Mersenne Twister and `random()`/`randrange` are stable across versions). The order of draws
is part of the format: changing it changes every bundled vector.

Shapes:
* a struct: each field in declaration order; a field with a default is set with probability 0.6 (one
  `random()` each), otherwise left at its default;
* `X | None`: None with probability 0.35, else a value of X (the non-None member is picked with `choice`);
* int: one `random()` picks a width class (fixint 0.25, 128..65535 0.15, 65536..2^32-1 0.12, 2^32..2^64-1
  0.15, a width boundary 0.10, a negative of a random width 0.10, a common size or an address 0.13);
* str: one `random()` picks a kind (empty 0.10, request id 0.35, IPv4 0.15, short unicode 0.20, printable
  ASCII of a boundary length 0.18, long unicode 0.02);
* list: the length class depends on the nesting depth (top level: 0, 1-4, 5-15, 16-39, 100-300);
* dict: a size from DICT_SIZES; keys are usually random strings, sometimes `req-<n>`; a value is drawn
  before its key, and entries are drawn until the dict has that many distinct keys;
* tuple: each member; IntEnum: a member.
"""
import enum
import types
import typing

import msgspec

INT_BOUNDARIES = [0, 1, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1,
                  -1, -32, -33, -128, -129, -32768, -32769, -2 ** 31, -2 ** 31 - 1, -2 ** 63]
COMMON_INTS = [1, 2, 4, 8, 16, 1024, 4096, 8192, 16384, 65535]
ADDRESS_BASE = 0x7F00_0000_0000
NEGATIVE_BITS = [5, 7, 15, 31, 63]
# Short unicode strings are made of these pieces (some are two code points: a combining accent, a CJK pair).
UNICODE_PIECES = ["\u00e9", "\u00df", "\u03a9", "\u0436", "\u4e2d", "\u6587", "\u65e5\u672c", "\ud55c",
                  "\U0001f600", "\U0001f680", "e\u0301", "\u200b", "\U0010fffd", "\x00", "\x7f", "\ufeff",
                  "\ufffd", "\u00e4", "\u00f8", "\u2028"]
LONG_UNICODE_PIECES = UNICODE_PIECES + ["x", "y", "-"]
PRINTABLE = "".join(chr(c) for c in range(32, 127))
ASCII_LENGTHS = [31, 32, 33, 100, 255, 256, 300]
DICT_SIZES = [0, 1, 1, 1, 2, 2, 3, 4, 6, 9, 15, 16, 17, 40]

P_FIELD_SET = 0.6
P_NONE = 0.35
P_DICT_KEY_REQ = 0.9  # a draw at or above this makes the key `req-<current size>`

NoneType = type(None)


def rand_int(rng):
    r = rng.random()
    if r < 0.25:
        return rng.randint(0, 127)
    if r < 0.40:
        return rng.randint(128, 65535)
    if r < 0.52:
        return rng.randint(65536, 2 ** 32 - 1)
    if r < 0.67:
        return rng.randint(2 ** 32, 2 ** 64 - 1)
    if r < 0.77:
        return rng.choice(INT_BOUNDARIES)
    if r < 0.87:
        bits = rng.choice(NEGATIVE_BITS)
        return -rng.randint(1, 2 ** bits)
    # The address is drawn whether or not it is the one chosen.
    return rng.choice(COMMON_INTS + [ADDRESS_BASE + rng.randrange(1 << 36)])


def rand_str(rng):
    r = rng.random()
    if r < 0.10:
        return ""
    if r < 0.45:
        return "cmpl-%032x-%d" % (rng.getrandbits(128), rng.randrange(4))
    if r < 0.60:
        return ".".join(str(rng.randrange(256)) for _ in range(4))
    if r < 0.80:
        n = rng.randint(1, 11)
        return "".join(rng.choice(UNICODE_PIECES) for _ in range(n))
    if r < 0.98:
        n = rng.choice(ASCII_LENGTHS)
        return "".join(rng.choice(PRINTABLE) for _ in range(n))
    n = rng.randint(200, 600)
    return "".join(rng.choice(LONG_UNICODE_PIECES) for _ in range(n))


def rand_len(rng, depth):
    r = rng.random()
    if r < 0.18:
        return 0
    if r < 0.58:
        return rng.randint(1, 4)
    if depth == 0:
        if r < 0.82:
            return rng.randint(5, 15)
        if r < 0.97:
            return rng.randrange(16, 40)
        return rng.randint(100, 300)
    if depth == 1:
        return rng.randint(1, 8)
    return rng.randint(1, 4)


def is_union(t):
    return typing.get_origin(t) in (typing.Union, types.UnionType)


def rand_value(t, rng, depth):
    if t is int:
        return rand_int(rng)
    if t is str:
        return rand_str(rng)
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return rng.choice(list(t))
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is list:
        return [rand_value(args[0], rng, depth + 1) for _ in range(rand_len(rng, depth))]
    if origin is tuple:
        return tuple(rand_value(a, rng, depth + 1) for a in args)
    if origin is dict:
        size = rng.choice(DICT_SIZES)
        out = {}
        while len(out) < size:
            value = rand_value(args[1], rng, depth + 1)
            if rng.random() >= P_DICT_KEY_REQ:
                key = "req-%d" % len(out)
            else:
                key = rand_value(args[0], rng, depth + 1)
            out[key] = value
        return out
    if is_union(t):
        if rng.random() < P_NONE:
            return None
        return rand_value(rng.choice([a for a in args if a is not NoneType]), rng, depth)
    raise TypeError(f"no random values for {t!r}")


def field_default(f):
    if f.default is not msgspec.NODEFAULT:
        return f.default
    if f.default_factory is not msgspec.NODEFAULT:
        return f.default_factory()
    return msgspec.NODEFAULT


def rand_struct(cls, rng):
    values = {}
    for f in msgspec.structs.fields(cls):
        default = field_default(f)
        if default is msgspec.NODEFAULT or rng.random() < P_FIELD_SET:
            values[f.name] = rand_value(f.type, rng, 0)
        else:
            values[f.name] = default
    return cls(**values)
