#!/usr/bin/env python3
"""msgspec side of the per-revision typed-decode benchmark (issue 16; run by scripts/bench.sh with the pinned
test venv).

Reads what `bench/src/bin/revision_payloads.rs` wrote: per generation-2 push revision the production
`MooncakeXferMetadata` in that revision's encoding and the spec revision as JSON. Builds the revision's
msgspec classes from it as the differential-test oracle does (tests/oracle/msgspec_oracle.py, `build`),
checks that msgspec decodes the payload and re-encodes it to the identical bytes, then times
`Decoder(cls).decode` timeit-style (`msgspec_bench.time_call`: best and median per call). Writes one JSON file.

usage: msgspec_revisions.py PAYLOAD_DIR OUT_JSON [--repeat N] [--min-time S]
"""
import argparse
import json
import os
import platform
import sys

import msgspec

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))
from msgspec_bench import time_call  # noqa: E402
from msgspec_oracle import build  # noqa: E402  (the oracle's spec → msgspec classes, not a second copy)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("payload_dir")
    ap.add_argument("out")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--min-time", type=float, default=0.1)
    a = ap.parse_args()
    with open(os.path.join(a.payload_dir, "manifest.json")) as f:
        manifest = json.load(f)
    enc = msgspec.msgpack.Encoder()
    out = {"msgspec": msgspec.__version__, "python": platform.python_version(), "revisions": {}}
    for p in manifest:
        with open(os.path.join(a.payload_dir, p["spec"])) as f:
            classes = build(json.load(f))
        with open(os.path.join(a.payload_dir, p["file"]), "rb") as f:
            data = f.read()
        dec = msgspec.msgpack.Decoder(classes[p["message"]])
        if enc.encode(dec.decode(data)) != data:
            sys.exit(f"{p['id']}: msgspec re-encodes the payload differently: the input is not canonical")
        row = {"bytes": len(data), "decode": time_call("decode(data)", {"decode": dec.decode, "data": data}, a.repeat, a.min_time)}
        out["revisions"][p["id"]] = row
        print(f"{p['id']:28} decode {row['decode']['best_s'] * 1e6:10.2f} us", file=sys.stderr)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
