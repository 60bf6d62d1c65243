#!/usr/bin/env python3
"""Long-lived msgspec oracle for differential tests.

Protocol (JSON Lines on stdin/stdout):
  1. The first line is a resolved spec revision as JSON (mooncake-wire's `Revision` serialization). The
     oracle builds real msgspec Struct classes and IntEnums from it with msgspec.defstruct.
  2. Every further line is {"id": ..., "message": "<struct name>", "hex": "<input bytes>"}; the oracle
     answers one line {"id", "ok", "value", "canonical_hex"} or {"id", "ok": false, "error", "error_type"},
     decoding with msgspec.msgpack.Decoder(<struct>) and re-encoding with msgspec.msgpack.Encoder().
  3. {"cmd": "schema", "message": ...} answers {"schema": msgspec.json.schema(<struct>)}.
  4. {"cmd": "quit"} ends the process.
"""
import ast
import enum
import json
import math
import sys
from typing import Optional

import msgspec

sys.setrecursionlimit(1000)


class TypeParser:
    """Parses the spec's type language into Python annotations."""

    def __init__(self, text, names):
        self.s, self.i, self.names = text, 0, names

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def ident(self):
        self.ws()
        j = self.i
        while j < len(self.s) and (self.s[j].isalnum() or self.s[j] == "_"):
            j += 1
        name, self.i = self.s[self.i:j], j
        return name

    def eat(self, c):
        self.ws()
        if self.s.startswith(c, self.i):
            self.i += 1
            return True
        return False

    def args(self):
        assert self.eat("[")
        out = [self.union()]
        while self.eat(","):
            out.append(self.union())
        assert self.eat("]")
        return out

    def atom(self):
        n = self.ident()
        simple = {"int": int, "str": str, "bool": bool, "float": float, "bytes": bytes}
        if n in simple:
            return simple[n]
        if n == "list":
            (t,) = self.args()
            return list[t]
        if n == "optional":
            (t,) = self.args()
            return Optional[t]
        if n == "dict":
            k, v = self.args()
            return dict[k, v]
        if n == "tuple":
            return tuple[tuple(self.args())]
        return self.names[n]()

    def union(self):
        t = self.atom()
        if self.eat("|"):
            assert self.ident() == "None"
            return Optional[t]
        return t


def parse_type(text, names):
    return TypeParser(text, names).union()


def parse_default(text, t):
    """A default written as a Python literal; for an IntEnum field, the member with that value."""
    v = ast.literal_eval(text)
    if isinstance(t, type) and issubclass(t, enum.IntEnum):
        return t(v)
    return v


def build(rev):
    """msgspec classes for every struct and enum of a resolved revision."""
    built = {}
    names = {}
    for alias, a in rev.get("aliases", {}).items():
        names[alias] = (lambda t=a["type"]: parse_type(t, names))
    for ename, e in rev.get("enums", {}).items():
        cls = enum.IntEnum(ename, [(m["name"], m["value"]) for m in e["members"]])
        built[ename] = cls
        names[ename] = (lambda c=cls: c)
    pending = dict(rev.get("structs", {}))

    def struct(sname):
        if sname in built:
            return built[sname]
        d = pending[sname]
        fields = []
        for f in d["fields"]:
            t = parse_type(f["type"], names)
            if "default_factory" in f:
                fields.append((f["name"], t, msgspec.field(default_factory={"list": list, "dict": dict}[f["default_factory"]])))
            elif "default" in f:
                fields.append((f["name"], t, parse_default(f["default"], t)))
            else:
                fields.append((f["name"], t))
        o = d.get("options", {})
        kw = {}
        for k in ("omit_defaults", "array_like", "forbid_unknown_fields", "rename", "tag_field", "tag"):
            if k in o:
                kw[k] = o[k]
        built[sname] = msgspec.defstruct(sname, fields, **kw)
        return built[sname]

    for sname in pending:
        names[sname] = (lambda n=sname: struct(n))
    for sname in pending:
        struct(sname)
    return built


def builtins(v):
    """msgspec.to_builtins, but a struct becomes every declared field (defaults included), in order."""
    if isinstance(v, msgspec.Struct):
        return {f: builtins(getattr(v, f)) for f in v.__struct_fields__}
    if isinstance(v, (list, tuple)):
        return [builtins(x) for x in v]
    if isinstance(v, dict):
        return {msgspec.to_builtins(k): builtins(x) for k, x in v.items()}
    if isinstance(v, float) and not math.isfinite(v):
        return {"$float": repr(v)}
    return msgspec.to_builtins(v)


def main():
    rev = json.loads(sys.stdin.readline())
    classes = build(rev)
    decoders = {n: msgspec.msgpack.Decoder(c) for n, c in classes.items() if isinstance(c, type) and issubclass(c, msgspec.Struct)}
    encoder = msgspec.msgpack.Encoder()
    out = sys.stdout
    out.write(json.dumps({"ready": True, "msgspec": msgspec.__version__, "messages": sorted(decoders)}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("cmd") == "quit":
            break
        if req.get("cmd") == "schema":
            out.write(json.dumps({"schema": msgspec.json.schema(classes[req["message"]])}) + "\n")
            out.flush()
            continue
        rid = req.get("id")
        try:
            v = decoders[req["message"]].decode(bytes.fromhex(req["hex"]))
            resp = {"id": rid, "ok": True, "value": builtins(v), "canonical_hex": encoder.encode(v).hex()}
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
            resp = {"id": rid, "ok": False, "error": str(e), "error_type": type(e).__name__}
        # Python keeps big ints exact in JSON; the Rust side parses them as u64/i64.
        out.write(json.dumps(resp) + "\n")
        if req.get("flush"):
            out.flush()
    out.flush()


if __name__ == "__main__":
    main()
