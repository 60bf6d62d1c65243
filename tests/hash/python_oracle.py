#!/usr/bin/env python3
"""Python side of the differential tests of src/hash and src/keys: real CPython json, pickle and hashlib.

Protocol (JSON Lines on stdin/stdout), one answer per request, in order:
  {"op": "dumps", "value": V}    -> {"ok": json.dumps(V, sort_keys=True)} or {"error": "<Type>: <message>"}
  {"op": "pickle", "value": V}   -> {"ok": pickle.dumps(V, protocol=5).hex()}
  {"op": "quit"}
V is a Python value written with the tags of conformance/vectors/GOLDEN.md ($tuple, $bytes, $float, $int,
$dict_items, $set). Every float, dict, tuple and string becomes a new object, as the Rust model assumes,
except what CPython itself shares (empty and one-character Latin-1 strings, empty and one-byte bytes) and
the extra-key tag names vLLM writes as literals, which are interned here as they are in vLLM.
"""
import hashlib
import json
import pickle
import sys

MAX_DIGITS = sys.get_int_max_str_digits()
INTERNED_TAGS = {"lora", "mm", "cache_salt", "prompt_embeds"}


def value(v):
    if isinstance(v, list):
        return [value(x) for x in v]
    if isinstance(v, dict):
        if len(v) == 1:
            (tag, body), = v.items()
            if tag == "$tuple":
                return tuple(value(x) for x in body)
            if tag == "$set":
                return set(value(x) for x in body)
            if tag == "$bytes":
                return bytes.fromhex(body)
            if tag == "$float":
                return float(body)
            if tag == "$int":
                sys.set_int_max_str_digits(0)
                try:
                    return int(body)
                finally:
                    sys.set_int_max_str_digits(MAX_DIGITS)
            if tag == "$dict_items":
                return dict((value(k), value(x)) for k, x in body)
        return {k: value(x) for k, x in v.items()}
    if isinstance(v, str) and v in INTERNED_TAGS:
        return sys.intern(v)
    return v


def main():
    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        if op == "quit":
            break
        try:
            v = value(req["value"])
            if op == "dumps":
                resp = {"ok": json.dumps(v, sort_keys=True)}
            elif op == "pickle":
                data = pickle.dumps(v, protocol=5)
                resp = {"ok": data.hex(), "sha256": hashlib.sha256(data).hexdigest()}
            else:
                resp = {"error": f"unknown op {op!r}"}
        except Exception as e:  # the exception is the answer
            resp = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(resp) + "\n")
        if req.get("flush"):
            out.flush()
    out.flush()


if __name__ == "__main__":
    main()
