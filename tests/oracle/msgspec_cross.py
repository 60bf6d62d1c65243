#!/usr/bin/env python3
"""msgspec oracle for the diff classifier: classes of two revisions side by side, one encodes, the other decodes.

Protocol (JSON Lines on stdin/stdout):
  1. The first line is {"old": <resolved revision>, "new": <resolved revision>} (mooncake-wire's `Revision`
     serialization); both are built into real msgspec classes by msgspec_oracle.build.
  2. {"cmd": "cross", "writer": "old"|"new", "write": <struct>, "read": <struct>, "hex": <bytes>}: decodes the
     bytes with the writer's class, re-encodes that value with msgspec (writer_hex), and decodes writer_hex with
     the other revision's class <read>. Answers {"writer_hex", "ok": true, "value"} or {"writer_hex", "ok":
     false, "error"}; {"writer_error"} when the writer's own class rejects the bytes.
  3. {"cmd": "encode", "rev": "old"|"new", "struct": <name>, "value": <to_builtins JSON>}: msgspec.convert then
     encode; answers {"hex"} or {"error"}.
  4. {"cmd": "quit"} ends the process.
"""
import json
import os
import sys

import msgspec

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from msgspec_oracle import build, builtins  # noqa: E402


def as_input(cls, value):
    """A struct value (field names as keys) as msgspec.convert reads it: keys renamed as the struct says; an
    array_like struct from an array of the fields in order (defaults filled in), after its tag if it has one."""
    config = cls.__struct_config__
    if not config.array_like:
        keys = {f.name: f.encode_name for f in msgspec.structs.fields(cls)}
        return {keys.get(k, k): v for k, v in value.items()}
    out = [config.tag] if config.tag is not None else []
    for f in msgspec.structs.fields(cls):
        if f.name in value:
            out.append(value[f.name])
        elif f.default is not msgspec.NODEFAULT:
            out.append(f.default)
        else:
            out.append(f.default_factory())
    return out


def main():
    hello = json.loads(sys.stdin.readline())
    classes = {side: build(hello[side]) for side in ("old", "new")}
    encoder = msgspec.msgpack.Encoder()
    out = sys.stdout
    out.write(json.dumps({"ready": True, "msgspec": msgspec.__version__}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        cmd = req.get("cmd")
        if cmd == "quit":
            break
        if cmd == "encode":
            try:
                cls = classes[req["rev"]][req["struct"]]
                v = msgspec.convert(as_input(cls, req["value"]), cls, strict=False)
                resp = {"hex": encoder.encode(v).hex()}
            except (msgspec.ValidationError, TypeError, ValueError) as e:
                resp = {"error": str(e)}
        else:
            writer = req["writer"]
            reader = "new" if writer == "old" else "old"
            try:
                v = msgspec.msgpack.Decoder(classes[writer][req["write"]]).decode(bytes.fromhex(req["hex"]))
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                resp = {"writer_error": str(e)}
            else:
                wb = encoder.encode(v)
                try:
                    r = msgspec.msgpack.Decoder(classes[reader][req["read"]]).decode(wb)
                    resp = {"writer_hex": wb.hex(), "ok": True, "value": builtins(r)}
                except (msgspec.DecodeError, msgspec.ValidationError) as e:
                    resp = {"writer_hex": wb.hex(), "ok": False, "error": str(e)}
        out.write(json.dumps(resp) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
