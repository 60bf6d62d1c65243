"""The hand-made cases: `edge-*` (values at the boundaries, canonically encoded), `noncanon-*` (valid bytes
that msgspec would not have produced) and `reject-*` (bytes msgspec refuses). Each builder returns
(id, bytes) pairs; the verdict, value and canonical bytes are then whatever msgspec makes of the bytes."""
import msgspec

import mpw
import shapes
from shapes import kind

UNICODE_SAMPLE = ("\u00e9\u00df\u03a9\u0436\u4e2d\u6587\u65e5\u672c\ud55c\U0001f600\U0001f680e\u0301\u200b"
                  "\U0010fffd\x00\x7f\ufeff\ufffd\u00e4\u00f8\u2028")
EDGE_INTS = [0, 1, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1,
             -1, -32, -33, -128, -129, -32768, -32769, -2 ** 31, -2 ** 31 - 1, -2 ** 63]


def int_label(v):
    return str(v) if v >= 0 else "m%d" % -v


VALID_COUNT = 220


class Profile:
    """Which of the generated cases a file keeps. `full` keeps all of them (the newest revision's files);
    `compact` (the older revisions' files) keeps the first 80 random values, except those whose JSON line would be
    longer than 8000 characters, no 65536-long string or list and no 300-entry dict, every 4th prefix of the
    truncated messages and no 5000-deep nesting. The revision table counts the full set either way. Dropping
    never changes the remaining cases: every value is drawn whether or not it is kept."""

    def __init__(self, name):
        self.name = name
        self.full = name == "full"

    def keeps(self, case, dumps):
        if self.full:
            return True
        cid = case["id"]
        if cid.startswith("valid-"):
            return int(cid[6:]) <= 80 and len(dumps(case)) <= 8000
        if cid in ("edge-strlen-65536", "edge-listlen-65536") or (cid.startswith("edge-dictlen-") and cid.endswith("-300")):
            return False
        if cid.startswith("reject-trunc-"):
            return int(cid.rsplit("-", 1)[1]) % 4 == 0
        return not cid.startswith("reject-deep-")


def encode(cls, values):
    return msgspec.msgpack.encode(cls(**values))


def edge_cases(cls, fs):
    out = []
    minimal = shapes.minimal_values(fs)
    typical = shapes.all_set_values(fs)
    out.append(("edge-minimal", encode(cls, minimal)))
    out.append(("edge-all-fields-set", encode(cls, typical)))
    out.append(("edge-max", encode(cls, {f.name: shapes.largest(f.type) for f in fs})))
    out.append(("edge-min", encode(cls, {f.name: shapes.smallest(f.type) for f in fs})))
    out.append(("edge-explicit-defaults", encode(cls, dict(minimal))))
    for f in fs:
        if shapes.is_optional(f.type) and kind(f.type) == "list":
            out.append((f"edge-empty-list-{f.name}", encode(cls, {**minimal, f.name: []})))
    for f in fs:
        if shapes.is_optional(f.type) and kind(f.type) == "str":
            out.append((f"edge-empty-str-{f.name}", encode(cls, {**minimal, f.name: ""})))
    for f in fs:
        if kind(f.type) == "enum":
            for m in shapes.non_none(f.type):
                out.append((f"edge-{f.name}-{m.name}", encode(cls, {**minimal, f.name: m})))
    ints = [f for f in fs if kind(f.type) == "int"]
    if ints:
        for v in EDGE_INTS:
            out.append((f"edge-int-{int_label(v)}", encode(cls, {**typical, **{f.name: v for f in ints}})))
    strs = [f for f in fs if kind(f.type) == "str"]
    if strs:
        s = strs[0].name
        for n in (31, 32, 255, 256, 65536):
            out.append((f"edge-strlen-{n}", encode(cls, {**minimal, s: "s" * n})))
        out.append(("edge-str-unicode", encode(cls, {**minimal, s: UNICODE_SAMPLE})))
        out.append(("edge-str-multibyte-31chars", encode(cls, {**minimal, s: "\u00e9" * 31})))
    lists = [f for f in fs if kind(f.type) == "list"]
    if lists:
        f = lists[0]
        elem = shapes.zero(shapes.args(f.inner)[0])
        for n in (15, 16, 65536):
            out.append((f"edge-listlen-{n}", encode(cls, {**minimal, f.name: [elem] * n})))
    for f in fs:
        if kind(f.type) == "dict":
            vt = shapes.args(f.inner)[1]
            for n in (15, 16, 300):
                d = {"r%05d" % i: shapes.typical(vt) for i in range(n)}
                out.append((f"edge-dictlen-{f.name}-{n}", encode(cls, {**minimal, f.name: d})))
    for f in fs:
        if kind(f.type) == "dict":
            vt = shapes.args(f.inner)[1]
            d = {"": shapes.zero(vt), "\u00e9\u4e2d\U0001f600": shapes.largest(vt), "x" * 300: shapes.smallest(vt)}
            out.append((f"edge-dict-keys-{f.name}", encode(cls, {**minimal, f.name: d})))
    return out


# ---------------------------------------------------------------------------------------------------------
# noncanon-*: the same values written in ways msgspec itself would not.

X_UNKNOWN = mpw.Raw(bytes.fromhex("81a66e65737465649501a374776fc0cb400c000000000000c40100"))  # {"nested": [1, "two", nil, 3.5, bin 00]}
# Unknown keys of every MessagePack type: zz_int, zz_str, zz_nil, zz_bin (300 bytes), zz_float, zz_bool, zz_ext,
# zz_ext32, the empty key, a field name in capitals, a 64-deep array, nested maps, a float32.
ALL_TYPES_UNKNOWN = [
    ("zz_int", 2 ** 64 - 1),
    ("zz_str", "\u00e9" * 40),
    ("zz_nil", None),
    ("zz_bin", mpw.Raw(b"\xc5\x01\x2c" + b"\xff" * 300)),
    ("zz_float", 1.5),
    ("zz_bool", True),
    ("zz_ext", mpw.Raw(bytes.fromhex("d40100"))),
    ("zz_ext32", mpw.Raw(bytes.fromhex("c900000002056162"))),
    ("", 0),
    ("REMOTE_PORT", "no"),
    ("zz_deep64", mpw.Raw(b"\x91" * 64 + b"\x90")),
    ("zz_map", {"a": {"b": {"c": []}}}),
    ("zz_f32", mpw.Raw(bytes.fromhex("ca3f800000"))),
]
INVALID_UTF8_KEY = mpw.Key(b"\xff\xfe")
HUGE_COUNT_VALUE = mpw.Raw(bytes.fromhex("dc0003010203"))  # an array16 header for 3 items


def present_entries(obj, fs):
    """(name, builtins value) of the fields msgspec writes (those not equal to their default), in order."""
    out = []
    for f in fs:
        v = getattr(obj, f.name)
        if f.has_default and v == f.default:
            continue
        out.append((f.name, msgspec.to_builtins(v)))
    return out


def other_value(f, v):
    """A different valid value of the field's type, for the first of two duplicate keys."""
    k = kind(f.type)
    if k == "str":
        return v + "-dup"
    if k in ("int", "enum"):
        return 0 if v != 0 else 1
    if k == "list":
        return []
    if k == "dict":
        return {}
    raise TypeError(k)


def noncanon_cases(obj, fs, tag):
    out = []
    canon = mpw.Style()
    entries = present_entries(obj, fs)

    def add(name, data):
        out.append((f"noncanon-{name}-{tag}", data))

    rev = list(reversed(entries))
    rot = entries[1:] + entries[:1]
    add("reorder-reversed", mpw.write_entries(rev, canon))
    if rot != rev:
        add("reorder-rotated", mpw.write_entries(rot, canon))
    add("unknown-key-first", mpw.write_entries([("x_unknown_first", X_UNKNOWN)] + entries, canon))
    mid = len(entries) // 2
    add("unknown-key-middle", mpw.write_entries(entries[:mid] + [("x_unknown_middle", X_UNKNOWN)] + entries[mid:], canon))
    add("unknown-key-last", mpw.write_entries(entries + [("x_unknown_last", X_UNKNOWN)], canon))
    add("unknown-keys-all-types", mpw.write_entries(entries + ALL_TYPES_UNKNOWN, canon))
    add("unknown-key-invalid-utf8", mpw.write_entries(entries + [(INVALID_UTF8_KEY, 1)], canon))
    add("unknown-key-bin-value-huge-count", mpw.write_entries(entries + [("zz", HUGE_COUNT_VALUE)], canon))
    by_name = {f.name: f for f in fs}
    for name, v in entries[:3]:
        add(f"dupkey-{name}-first-other", mpw.write_entries([(name, other_value(by_name[name], v))] + entries, canon))
    if entries:
        name, v = entries[-1]
        add(f"dupkey-{name}-last-other", mpw.write_entries(entries + [(name, other_value(by_name[name], v))], canon))
    add("int-wide", mpw.write_entries(entries, mpw.Style(ints="wide")))
    add("int-signed-family", mpw.write_entries(entries, mpw.Style(ints="signed")))
    add("int-u16", mpw.write_entries(entries, mpw.Style(ints="u16")))
    add("str8-all", mpw.write_entries(entries, mpw.Style(strs=8)))
    add("str16-all", mpw.write_entries(entries, mpw.Style(strs=16)))
    add("str32-all", mpw.write_entries(entries, mpw.Style(strs=32)))
    add("str8-keys-only", mpw.write_entries(entries, mpw.Style(keys=8)))
    add("array16-all", mpw.write_entries(entries, mpw.Style(arrays=16)))
    add("array32-all", mpw.write_entries(entries, mpw.Style(arrays=32)))
    add("map16-all", mpw.write_entries(entries, mpw.Style(maps=16)))
    add("map32-all", mpw.write_entries(entries, mpw.Style(maps=32)))
    add("everything-widest-reversed", mpw.write_entries(rev, mpw.Style(ints="wide", strs=32, arrays=32, maps=32)))
    present = {n for n, _ in entries}
    defaults = [(f.name, msgspec.to_builtins(f.default)) for f in fs if f.has_default and f.name not in present]
    if defaults:
        add("explicit-defaults", mpw.write_entries(entries + defaults, canon))
    for f in fs:
        if kind(f.type) == "enum" and f.name in present:
            for mode, label in (("u64", "uint64"), ("i8", "int8")):
                data = mpw.write_entries([(n, mpw.Raw(mpw.write_int(v, mode)) if n == f.name else v) for n, v in entries], canon)
                add(f"enum-{f.name}-{label}", data)
    for f in fs:
        if shapes.is_optional(f.type):
            add(f"explicit-nil-{f.name}", mpw.write_entries([e for e in entries if e[0] != f.name] + [(f.name, None)], canon))
    return out


def noncanon_bases(cls, fs, valid_objects):
    """01 all fields set, 02 minimal, 03/04 the second and third random values whose encoding is 60..400 bytes
    (the first one is the truncation base of the rejects)."""
    small = [o for o in valid_objects if 60 <= len(msgspec.msgpack.encode(o)) <= 400]
    bases = [cls(**shapes.all_set_values(fs)), cls(**shapes.minimal_values(fs))] + small[1:3]
    return bases, (small[0] if small else None)


# ---------------------------------------------------------------------------------------------------------
# reject-*: bytes msgspec refuses.

R = mpw.Raw
ENUM_BAD = [-2 ** 63, -1, 3, 4, 100, 255, 65535, 2 ** 32, 2 ** 64 - 1]
HUGE = [("str32", "dbffffffff"), ("array32", "ddffffffff"), ("map32", "dfffffffff"), ("bin32", "c6ffffffff"),
        ("array16", "dcffff"), ("str16", "daffff"), ("ext32", "c9ffffffff01")]
TOP = [("nil", "c0"), ("int", "05"), ("str", "af72656d6f74655f686f73746e616d65"), ("bin", "c40100"), ("ext", "d40100"),
       ("float", "cb0000000000000000")]
NON_STR_KEYS = [("int", 1), ("nil", None), ("bin", b"remote_port"), ("array", [1]), ("map", {}), ("bool", True), ("float", 1.0)]
TRAILING = [("00", b"\x00"), ("c0", b"\xc0"), ("c1", b"\xc1"), ("copy", None), ("90", b"\x90")]


def wrong_types(f):
    """(label, wrong value) for a field, by its type."""
    t = f.type
    k = kind(t)
    if shapes.is_optional(t):
        if k == "list":
            return [("int", 1), ("bool", True), ("map", {}), ("float", 0.5), ("elem-int", [1]), ("elem-nil", [None]),
                    ("str", "r")]
        if k == "str":
            return [("int", 1), ("bool", True), ("map", {}), ("float", 0.5), ("bin", b"e"), ("array", ["e"])]
    if k == "str":
        return [("int", 1), ("bin", b"host"), ("nil", None), ("bool", False), ("array", ["a"])]
    if k in ("int", "enum"):
        return [("str", "1"), ("float", 1.0), ("bool", True), ("nil", None), ("array", [1]), ("bin", b"\x01")]
    if k == "list":
        out = [("nil", None), ("str", "a"), ("map", {}), ("int", 0), ("bin", b"")]
        ek = kind(shapes.args(shapes.non_none(t))[0])
        if ek == "int":
            out += [("elem-str", ["1"]), ("elem-float", [1.5]), ("elem-bool", [True]), ("elem-nil", [None])]
        elif ek == "str":
            out += [("elem-int", [1]), ("elem-bin", [b"r"]), ("elem-nil", [None])]
        else:
            out += [("elem-int", [1]), ("elem-elem-str", [["1"]]), ("elem-nil", [None])]
        return out
    if k == "dict":
        vt = shapes.args(shapes.non_none(t))[1]
        typ = msgspec.to_builtins(shapes.typical(vt))
        typ = list(typ) if isinstance(typ, tuple) else typ
        out = [("nil", None), ("array", []), ("str", "a"), ("int", 0)]
        if kind(vt) == "tuple":
            out += [("tuple-arity-1", {"r": typ[:1]}), ("tuple-arity-3", {"r": typ + typ[-1:]}), ("tuple-arity-0", {"r": []}),
                    ("tuple-as-map", {"r": {"a": 1}}), ("tuple-item0-int", {"r": [1] + typ[1:]}),
                    ("tuple-item1-wrong", {"r": [typ[0], "x"] + typ[2:]}),
                    ("tuple-item1-elem-wrong", {"r": [typ[0], ["x"]] + typ[2:]})]
        out += [("value-nil", {"r": None}), ("key-int", {1: typ}), ("key-nil", {None: typ}), ("key-bin", {b"r": typ})]
        return out
    raise TypeError(k)


def dup_wrong(f):
    k = kind(f.type)
    if shapes.is_optional(f.type):
        return 1
    if k == "str":
        return 1
    if k in ("int", "enum"):
        return "1"
    return None


def replaced(entries, name, value):
    return [(n, value if n == name else v) for n, v in entries]


def moved_last(entries, name, value):
    return [(n, v) for n, v in entries if n != name] + [(name, value)]


def reject_cases(cls, fs, trunc_base):
    out = []
    canon = mpw.Style()
    typical_obj = cls(**shapes.all_set_values(fs))
    minimal_obj = cls(**shapes.minimal_values(fs))
    entries = [(f.name, msgspec.to_builtins(getattr(typical_obj, f.name))) for f in fs]
    typical = mpw.write_entries(entries, canon)
    w = lambda e: mpw.write_entries(e, canon)  # noqa: E731

    def add(name, data):
        out.append((f"reject-{name}", data))

    for f in fs:
        if f.required:
            add(f"missing-{f.name}", w([e for e in entries if e[0] != f.name]))
    for f in fs:
        for label, bad in wrong_types(f):
            add(f"type-{f.name}-{label}", w(replaced(entries, f.name, bad)))
    for f in fs:
        if kind(f.type) == "enum":
            members = {int(m) for m in shapes.non_none(f.type)}
            for v in ENUM_BAD:
                if v not in members:
                    add(f"enum-{f.name}-{int_label(v)}", w(replaced(entries, f.name, v)))
    for f in fs:
        add(f"dupkey-first-wrongtype-{f.name}", w([(f.name, dup_wrong(f))] + entries))
    add("array-instead-of-map", mpw.write([v for _, v in entries], canon))
    add("array-instead-of-map-empty", b"\x90")
    for label, h in TOP:
        add(f"top-{label}", bytes.fromhex(h))
    add("empty-input", b"")
    add("empty-map", b"\x80")
    add("reserved-c1-top", b"\xc1")
    add("reserved-c1-value", w(entries[:-1] + [(entries[-1][0], R(b"\xc1"))]))
    add("reserved-c1-unknown-value", w(entries + [("zz", R(b"\xc1"))]))
    for label, tail in TRAILING:
        add(f"trailing-{label}", typical + (typical if tail is None else tail))
    for label, key in NON_STR_KEYS:
        add(f"key-{label}", w([(key, 1)] + entries))
    for f in fs:
        k = kind(f.type)
        if k == "str":
            add(f"utf8-value-{f.name}", w(moved_last(entries, f.name, R(b"\xa3a\xff\xfe"))))
            add(f"utf8-surrogate-{f.name}", w(moved_last(entries, f.name, R(b"\xa3\xed\xa0\x80"))))
        elif k == "dict":
            typ = msgspec.to_builtins(shapes.typical(shapes.args(f.inner)[1]))
            add(f"utf8-dictkey-{f.name}", w(moved_last(entries, f.name, {mpw.Key(b"\xc3\x28"): typ})))
        elif k == "list" and kind(shapes.args(f.inner)[0]) == "str":
            add(f"utf8-listitem-{f.name}", w(moved_last(entries, f.name, [R(b"\xa1\x80")])))
    # The last required field's name corrupted (a message without one, the lease heartbeat: its last field's,
    # which leaves an unknown key and the default: msgspec accepts that).
    last_required = ([f for f in fs if f.required] or fs)[-1]
    bad_key = mpw.Key(last_required.name.encode()[:-1] + b"\xff")
    add(f"utf8-known-key-{last_required.name}", w([(bad_key if n == last_required.name else n, v) for n, v in entries]))
    add("huge-map32-header", mpw.write_entries(entries, canon, header=b"\xdf\xff\xff\xff\xff"))
    add("huge-map16-header", mpw.write_entries(entries, canon, header=b"\xde\xff\xff"))
    first = entries[0][0]
    for label, h in HUGE:
        body = R(bytes.fromhex(h) + b"abc")
        add(f"huge-{label}-in-{first}", mpw.map_header(len(entries)) + mpw.write(first, canon, key=True) + body)
        add(f"huge-{label}-in-unknown", w(entries + [("zz", body)]))
    plain_lists = [f for f in fs if kind(f.type) == "list" and not shapes.is_optional(f.type)]
    deep_array, deep_map = R(b"\x91" * 5000 + b"\x90"), R(b"\x81\xa1k" * 5000 + b"\x80")  # past the recursion limit
    add("deep-array-5000-unknown", w(entries + [("zz", deep_array)]))
    add("deep-map-5000-unknown", w(entries + [("zz", deep_map)]))
    if plain_lists:
        add(f"deep-array-5000-in-{plain_lists[0].name}", w(moved_last(entries, plain_lists[0].name, deep_array)))
    if plain_lists:
        add(f"nesting-one-too-deep-{plain_lists[0].name}", w(moved_last(entries, plain_lists[0].name, R(b"\x91\x91\x91\x90"))))
    for label, obj in (("minimal", minimal_obj), ("all-fields", typical_obj), ("random", trunc_base)):
        if obj is None:
            continue
        data = msgspec.msgpack.encode(obj)
        for cut in range(len(data)):
            add("trunc-%s-%04d" % (label, cut), data[:cut])
    return out
