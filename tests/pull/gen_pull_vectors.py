#!/usr/bin/env python3
"""Generates the pull-family msgspec vectors (conformance/vectors/pull/, format: conformance/vectors/README.md).

The message classes are written here from the facts of the pull family (spec/README.md, "The pull family": the
vllm-ascend 0.18.0 and 0.23.0.post1 sdists and vllm-project/vllm-ascend@3e486e317) — they
are NOT read from spec/, so the vectors are an independent check of the spec and of the codec. msgspec decides
every verdict, value and canonical encoding:

* msgspec.Struct and dataclass messages: msgspec.msgpack.Decoder(<class>);
* tuple control messages: msgspec.msgpack.Decoder(tuple[bytes, ...]) plus the receiver's tag comparison
  (`msg[0] == b"get_meta_msg"`), which vLLM-ascend does after an untyped decode;
* RemotePortInfo is a TypedDict: msgspec keeps a TypedDict's keys in wire order when it re-encodes, so no
  case reorders its keys (the spec models it as a map of both keys in declaration order, which is what vLLM-
  ascend writes).

Usage: gen_pull_vectors.py OUT_DIR [--seed N]   (deterministic for a seed and msgspec version)
"""
import dataclasses
import json
import os
import random
import struct
import sys
import typing
from typing import Any, TypedDict

import msgspec

sys.setrecursionlimit(1000)
SEED = 20261129

# ---------------------------------------------------------------------------------------------------------
# The messages, per revision (written from the facts; field order is the wire order).


class AgentMeta018(msgspec.Struct, omit_defaults=True, dict=True):
    engine_id: str
    te_rpc_port: int
    kv_caches_base_addr: list[int]
    num_blocks: int
    local_ip: str = ""


class AgentMeta023(msgspec.Struct, omit_defaults=True, dict=True):
    engine_id: str
    te_rpc_port: int
    kv_group2layeridx: dict[int, tuple[dict[str, Any], list[int]]]
    block_size: int
    kv_caches_base_addr: list[list[int]]
    block_size_scale: list[list[int]]
    num_blocks: int
    block_lens: list[list[int]]
    block_strides: list[list[int]]
    local_ip: str = ""
    handshake_port: int = 0


class RemotePortInfo(TypedDict):
    num: int
    host: str


@dataclasses.dataclass(frozen=True)
class TPMeta:
    te_rpc_port: int
    layer_indices: list[int]
    kv_caches_base_addr: list[list[int]]
    local_ip: str
    handshake_port: int


@dataclasses.dataclass(frozen=True)
class PPMeta:
    block_size: int
    num_blocks: int
    layer_names: list[str]
    layer_block_sizes: list[int]
    group_indices: list[int]
    block_strides: list[list[int]]
    block_lens: list[list[int]]
    block_shapes: list[list[tuple[int, ...]]]
    block_size_scales: list[list[int]]
    metadata_by_tp_rank: dict[int, TPMeta]


@dataclasses.dataclass(frozen=True)
class Groups:
    engine_id: str
    scheduler_host: str
    scheduler_port: int
    pp_size: int
    pcp_size: int
    dcp_size: int
    tp_size: int
    use_kv_pp: bool
    metadata_by_pp_rank: dict[int, PPMeta]


class TupleMsg:
    """A control tuple: element types, field names (the spec's), and the bin tag of element 0."""

    def __init__(self, names, types, tag):
        self.names, self.types, self.tag = names, types, tag
        self.typ = tuple[tuple(types)]


GET_META_V1 = TupleMsg(["tag", "unused"], [bytes, str], b"get_meta_msg")
DONE_V1 = TupleMsg(["tag", "request_id", "remote_port_send_num"], [bytes, str, dict[int, RemotePortInfo]], b"done_recving_msg")
GET_META_V2 = TupleMsg(["tag"], [bytes], b"get_meta_msg")
DONE_V2 = TupleMsg(["tag", "request_id"], [bytes, str], b"done_recving_msg")

V1_SOURCE = "vllm-ascend {v} sdist, vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py"
V2_COMMIT = "vllm-project/vllm-ascend@3e486e317e443984deb2bb2d83688f4383d8e156"
REVISIONS = [  # (revision, releases, commit when unreleased, source, generation, messages)
    ("vllm-ascend-0.18.0", ["0.18.0"], None, V1_SOURCE.format(v="0.18.0"), 1,
     {"MooncakeAgentMetadata": AgentMeta018, "GetMetaMsg": GET_META_V1, "DoneRecvingMsg": DONE_V1, "RemotePortInfo": RemotePortInfo}),
    ("vllm-ascend-0.23.0.post1", ["0.23.0.post1"], None, V1_SOURCE.format(v="0.23.0.post1"), 1,
     {"MooncakeAgentMetadata": AgentMeta023, "GetMetaMsg": GET_META_V1, "DoneRecvingMsg": DONE_V1, "RemotePortInfo": RemotePortInfo}),
    ("vllm-ascend-main@3e486e317", [], V2_COMMIT, V2_COMMIT + " vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake/", 2,
     {"MooncakeTransferMetadataGroups": Groups, "MooncakePPTransferMetadata": PPMeta, "MooncakeTPTransferMetadata": TPMeta,
      "GetMetaMsg": GET_META_V2, "DoneRecvingMsg": DONE_V2}),
]

# ---------------------------------------------------------------------------------------------------------
# Random well-typed values.

INT_EDGES = [0, 1, -1, 127, 128, -32, -33, 255, 256, 65535, 65536, 2 ** 31 - 1, 2 ** 32, -(2 ** 31), 2 ** 63 - 1,
             2 ** 64 - 1, -(2 ** 63), 2 ** 53 + 1]
STRS = ["", "x", "10.0.0.7", "tcp://[::1]:5555", "é中文🙂", "a" * 31, "b" * 32, "c" * 255, "model.layers.0.self_attn"]


def fields_of(cls):
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        hints = typing.get_type_hints(cls)
        return [(f, hints[f]) for f in cls.__struct_fields__]
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        return [(f.name, hints[f.name]) for f in dataclasses.fields(cls)]
    if typing.is_typeddict(cls):
        return list(typing.get_type_hints(cls).items())
    raise TypeError(cls)


def rand(t, rng, depth=0):
    small = depth > 1
    n = lambda: rng.choice([0, 1, 2, 3] if small else [0, 1, 2, 3, 5, 15, 16])
    if t is int:
        return rng.choice(INT_EDGES) if rng.random() < 0.4 else rng.randint(-(2 ** 40), 2 ** 40)
    if t is str:
        return rng.choice(STRS)
    if t is bool:
        return rng.random() < 0.5
    if t is bytes:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(6)))
    if t is Any:
        return rand(rng.choice([int, str, bool, list[int], dict[str, int]]), rng, depth + 1)
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is list:
        return [rand(args[0], rng, depth + 1) for _ in range(n())]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return tuple(rand(args[0], rng, depth + 1) for _ in range(rng.choice([0, 1, 3])))
    if origin is tuple:
        return tuple(rand(a, rng, depth + 1) for a in args)
    if origin is dict:
        return {rand(args[0], rng, depth + 1): rand(args[1], rng, depth + 1) for _ in range(n())}
    if isinstance(t, TupleMsg):
        return (t.tag,) + tuple(rand(a, rng, depth + 1) for a in t.types[1:])
    return construct(t, {f: rand(ft, rng, depth + 1) for f, ft in fields_of(t)})


def construct(cls, values):
    if typing.is_typeddict(cls):
        return dict(values)
    return cls(**values)


# ---------------------------------------------------------------------------------------------------------
# A MessagePack writer with a choice of widths (for non-canonical but valid encodings).


class W:
    def __init__(self, rng, wide):
        self.b, self.rng, self.wide = bytearray(), rng, wide

    def pick(self):
        return self.wide and self.rng.random() < 0.7

    def int(self, v):
        if self.pick():
            if 0 <= v < 2 ** 64:
                self.b += b"\xcf" + struct.pack(">Q", v) if v >= 2 ** 32 or self.rng.random() < 0.5 else b"\xce" + struct.pack(">I", v)
            else:
                self.b += b"\xd3" + struct.pack(">q", v)
            return
        self.b += msgspec.msgpack.encode(v)

    def length(self, n, fix, fixmax, op16, op32, op8=None):
        if self.pick():
            if op8 is not None and n < 256 and self.rng.random() < 0.4:
                self.b += bytes([op8, n])
            elif n < 65536 and self.rng.random() < 0.6:
                self.b += bytes([op16]) + struct.pack(">H", n)
            else:
                self.b += bytes([op32]) + struct.pack(">I", n)
        elif n <= fixmax:
            self.b += bytes([fix | n])
        elif op8 is not None and n < 256:
            self.b += bytes([op8, n])
        elif n < 65536:
            self.b += bytes([op16]) + struct.pack(">H", n)
        else:
            self.b += bytes([op32]) + struct.pack(">I", n)

    def str(self, s):
        raw = s.encode()
        self.length(len(raw), 0xA0, 31, 0xDA, 0xDB, 0xD9)
        self.b += raw

    def value(self, v, reorder=True, unknown=True):
        if v is None or isinstance(v, (bool, float)):
            self.b += msgspec.msgpack.encode(v)
        elif isinstance(v, int):
            self.int(v)
        elif isinstance(v, str):
            self.str(v)
        elif isinstance(v, bytes):
            self.b += msgspec.msgpack.encode(v)
        elif isinstance(v, (list, tuple)):
            self.length(len(v), 0x90, 15, 0xDC, 0xDD)
            for x in v:
                self.value(x, reorder, unknown)
        elif isinstance(v, dict):
            self.length(len(v), 0x80, 15, 0xDE, 0xDF)
            for k, x in v.items():
                self.value(k, reorder, unknown)
                self.value(x, reorder, unknown)
        else:  # a struct or dataclass: a map of fields, maybe reordered, with unknown keys
            entries = [(f, getattr(v, f)) for f, _ in fields_of(type(v))]
            if isinstance(v, msgspec.Struct) and v.__struct_config__.omit_defaults:
                entries = [(f, x) for f, x in entries if not is_default(type(v), f, x) or self.rng.random() < 0.5]
            if unknown and self.rng.random() < 0.5:
                entries.insert(self.rng.randrange(len(entries) + 1), ("zz_unknown", self.rng.choice([1, "x", [1, 2], {"a": None}, b"\x00"])))
            if reorder and self.rng.random() < 0.7:
                self.rng.shuffle(entries)
            self.length(len(entries), 0x80, 15, 0xDE, 0xDF)
            for k, x in entries:
                self.str(k)
                self.value(x, reorder, unknown)


def is_default(cls, f, x):
    d = cls.__struct_defaults__
    names = cls.__struct_fields__
    i = names.index(f) - (len(names) - len(d))
    return i >= 0 and d[i] == x


# ---------------------------------------------------------------------------------------------------------
# Verdicts from msgspec.


def decoder_for(m):
    return msgspec.msgpack.Decoder(m.typ if isinstance(m, TupleMsg) else m)


def decode(m, data):
    """(ok, decoded or (error, error_type))."""
    try:
        v = decoder_for(m).decode(data)
    except msgspec.ValidationError as e:
        return False, (str(e), "ValidationError")
    except msgspec.DecodeError as e:
        return False, (str(e), "DecodeError")
    except RecursionError as e:
        return False, (str(e), "RecursionError")
    if isinstance(m, TupleMsg) and v[0] != m.tag:
        return False, (f"Invalid value {v[0]!r} - at `$[0]`", "ValidationError")
    return True, v


def builtins(m, v):
    """The decoded value as JSON: every declared field in order (structs, dataclasses, tuple messages)."""
    if isinstance(m, TupleMsg):
        return {n: to_json(x) for n, x in zip(m.names, v)}
    return to_json(v)


def to_json(v):
    if isinstance(v, msgspec.Struct):
        return {f: to_json(getattr(v, f)) for f in v.__struct_fields__}
    if dataclasses.is_dataclass(v):
        return {f.name: to_json(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    if isinstance(v, dict):
        return {str(msgspec.to_builtins(k)): to_json(x) for k, x in v.items()}
    return msgspec.to_builtins(v)


def case(m, cid, data, want=None):
    ok, r = decode(m, data)
    c = {"id": cid, "expect": "accept" if ok else "reject", "hex": data.hex()}
    if ok:
        c["value"] = builtins(m, r)
        c["canonical_hex"] = msgspec.msgpack.encode(r).hex()
    else:
        c["error"], c["error_type"] = r
    if want is not None and c["expect"] != want:
        raise SystemExit(f"{cid}: expected msgspec to {want}, it did {c['expect']} ({c.get('error')})")
    return c


def has_typeddict(t, seen=()):
    if typing.is_typeddict(t):
        return True
    if isinstance(t, TupleMsg):
        return any(has_typeddict(a) for a in t.types)
    args = typing.get_args(t)
    if args:
        return any(has_typeddict(a) for a in args if a is not Ellipsis)
    if isinstance(t, type) and (issubclass(t, msgspec.Struct) or dataclasses.is_dataclass(t)) and t not in seen:
        return any(has_typeddict(ft, seen + (t,)) for _, ft in fields_of(t))
    return False


def cases_for(name, m, rng):
    out = []
    enc = msgspec.msgpack.encode
    typeddict = has_typeddict(m)
    # valid: random values, canonical bytes.
    for i in range(1, 31):
        v = rand(m, rng)
        out.append(case(m, f"valid-{i:04d}", enc(v), "accept"))
    # edge: minimal containers and extreme ints.
    mn = minimal(m)
    out.append(case(m, "edge-minimal", enc(mn), "accept"))
    for k, iv in [("max-u64", 2 ** 64 - 1), ("min-i64", -(2 ** 63)), ("zero", 0)]:
        out.append(case(m, f"edge-int-{k}", enc(with_ints(m, mn, iv)), "accept"))
    # noncanonical: wide headers and ints, reordered keys, unknown keys.
    for i in range(1, 13):
        v = rand(m, rng) if i > 2 else mn
        w = W(rng, wide=True)
        w.value(v, reorder=not typeddict, unknown=not isinstance(m, TupleMsg))
        out.append(case(m, f"noncanon-{i:02d}", bytes(w.b), "accept"))
    # reject.
    base = rand(m, rng)
    good = enc(base)
    out.append(case(m, "reject-top-level-int", enc(5), "reject"))
    out.append(case(m, "reject-trailing", good + b"\xc0", "reject"))
    out.append(case(m, "reject-reserved-c1", b"\xc1", "reject"))
    out.append(case(m, "reject-empty", b"", "reject"))
    out.append(case(m, "reject-huge-array", b"\xdd\xff\xff\xff\xff", "reject"))
    for cut in sorted({1, len(good) // 2, len(good) - 1}):
        if 0 < cut < len(good):
            out.append(case(m, f"reject-trunc-{cut}", good[:cut], "reject"))
    if isinstance(m, TupleMsg):
        vals = list(base)
        out.append(case(m, "reject-tag-str", enc([m.tag.decode()] + vals[1:]), "reject"))
        out.append(case(m, "reject-tag-other", enc([b"other_msg"] + vals[1:]), "reject"))
        out.append(case(m, "reject-arity-short", enc(vals[:-1]), "reject"))
        out.append(case(m, "reject-arity-long", enc(vals + [0]), "reject"))
        out.append(case(m, "reject-map", enc({"tag": m.tag}), "reject"))
        for i, t in enumerate(m.types[1:], start=1):
            bad = vals.copy()
            bad[i] = wrong_value(t)
            out.append(case(m, f"reject-type-{m.names[i]}", enc(bad), "reject"))
    else:
        as_dict = {f: getattr(base, f) if not isinstance(base, dict) else base[f] for f, _ in fields_of(m)}
        for f, ft in fields_of(m):
            if required(m, f):
                d = dict(as_dict)
                del d[f]
                out.append(case(m, f"reject-missing-{f}", enc(d), "reject"))
            d = dict(as_dict)
            d[f] = wrong_value(ft)
            out.append(case(m, f"reject-type-{f}", enc(d), "reject"))
        out.append(case(m, "reject-array", enc(list(as_dict.values())), "reject"))
        out.append(case(m, "reject-key-int", b"\x81\x01\x01", "reject" if any(required(m, f) for f, _ in fields_of(m)) else None))
    return [c for c in out if c is not None]


def required(m, f):
    if isinstance(m, type) and issubclass(m, msgspec.Struct):
        names = m.__struct_fields__
        return names.index(f) < len(names) - len(m.__struct_defaults__)
    if dataclasses.is_dataclass(m):
        fld = {x.name: x for x in dataclasses.fields(m)}[f]
        return fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING
    return True


def wrong_value(t):
    if t is int:
        return "not an int"
    if t is str:
        return 7
    if t is bool:
        return 1
    if t is bytes:
        return "text"
    origin = typing.get_origin(t)
    if origin in (list, tuple):
        return {"a": 1}
    if origin is dict:
        return [1, 2]
    return 5


def minimal(m):
    if isinstance(m, TupleMsg):
        return (m.tag,) + tuple(minimal_of(a) for a in m.types[1:])
    return minimal_of(m)


def minimal_of(t):
    if t is int:
        return 0
    if t is str:
        return ""
    if t is bool:
        return False
    if t is bytes:
        return b""
    origin = typing.get_origin(t)
    if origin is list:
        return []
    if origin is dict:
        return {}
    if origin is tuple:
        args = typing.get_args(t)
        return () if len(args) == 2 and args[1] is Ellipsis else tuple(minimal_of(a) for a in args)
    return construct(t, {f: minimal_of(ft) for f, ft in fields_of(t)})


def with_ints(m, v, iv):
    """v with every int field set to iv (top level only)."""
    if isinstance(m, TupleMsg):
        return tuple(iv if t is int else x for t, x in zip(m.types, v))
    vals = {f: (iv if ft is int else (getattr(v, f) if not isinstance(v, dict) else v[f])) for f, ft in fields_of(m)}
    return construct(m, vals)


def main():
    out_dir = sys.argv[1]
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else SEED
    table = {"format": "mooncake-vectors", "format_version": 1, "family": "pull", "msgspec_version": msgspec.__version__,
             "seed": seed, "revisions": []}
    for rev, releases, commit, source, generation, msgs in REVISIONS:
        os.makedirs(os.path.join(out_dir, rev), exist_ok=True)
        entry = {"revision": rev, "generation": generation, "releases": releases, "messages": {}}
        if commit:
            entry["commit"] = commit
        for name, m in msgs.items():
            rng = random.Random(f"{seed}/{rev}/{name}")
            cases = cases_for(name, m, rng)
            header = {"format": "mooncake-vectors", "format_version": 1, "revision": rev, "vllm_releases": releases,
                      "message": name, "source": source, "msgspec_version": msgspec.__version__, "seed": seed,
                      "project": "vllm-ascend"}
            with open(os.path.join(out_dir, rev, f"{name}.jsonl"), "w") as f:
                for line in [header] + cases:
                    f.write(json.dumps(line, ensure_ascii=False) + "\n")
            acc = sum(c["expect"] == "accept" for c in cases)
            entry["messages"][name] = {"total": len(cases), "accept": acc, "reject": len(cases) - acc}
        table["revisions"].append(entry)
    with open(os.path.join(out_dir, "revisions.json"), "w") as f:
        f.write(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
