#!/usr/bin/env python3
"""msgspec side of the codec benchmarks (run by scripts/bench.sh with the pinned test venv).

Reads the payloads `bench/src/bin/payloads.rs` wrote (same bytes the Rust benches decode), builds the vLLM
0.33.0 classes from the spec revision exactly as the differential-test oracle does (tests/oracle/
msgspec_oracle.py, `build`), checks that msgspec decodes every payload and re-encodes it to the identical bytes,
then times `Decoder(cls).decode` and `Encoder().encode` timeit-style: loops sized to about `--min-time`
seconds, `--repeat` repeats, best and median per call. Also records the heap a single decode allocates
(tracemalloc: peak and retained). Writes one JSON file.

usage: msgspec_bench.py PAYLOAD_DIR OUT_JSON [--repeat N] [--min-time S]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import timeit
import tracemalloc

import msgspec

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))
from msgspec_oracle import build  # noqa: E402  (the oracle's spec → msgspec classes, not a second copy)


def time_call(stmt, env, repeat, min_time):
    """Best and median seconds per call of `stmt`, over `repeat` runs of a loop lasting about `min_time`."""
    t = timeit.Timer(stmt, globals=env)
    loops = 1
    while True:
        if t.timeit(loops) >= min_time:
            break
        loops *= 2
    runs = [x / loops for x in t.repeat(repeat=repeat, number=loops)]
    return {"best_s": min(runs), "median_s": statistics.median(runs), "loops": loops, "repeat": repeat}


def heap_of_decode(decode, data):
    """(peak, retained) bytes the Python allocators hand out during one decode."""
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    obj = decode(data)
    now, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del obj
    return peak - before, now - before


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("payload_dir")
    ap.add_argument("out")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--min-time", type=float, default=0.1)
    ap.add_argument("--only", default="", help="comma-separated payload ids (default: all)")
    a = ap.parse_args()

    with open(os.path.join(a.payload_dir, "revision.json")) as f:
        classes = build(json.load(f))
    with open(os.path.join(a.payload_dir, "manifest.json")) as f:
        manifest = json.load(f)
    only = set(filter(None, a.only.split(",")))
    enc = msgspec.msgpack.Encoder()
    out = {
        "msgspec": msgspec.__version__,
        "python": platform.python_version(),
        "python_impl": platform.python_implementation(),
        "payloads": {},
    }
    for p in manifest:
        if only and p["id"] not in only:
            continue
        with open(os.path.join(a.payload_dir, p["file"]), "rb") as f:
            data = f.read()
        dec = msgspec.msgpack.Decoder(classes[p["message"]])
        obj = dec.decode(data)
        if enc.encode(obj) != data:
            sys.exit(f"{p['id']}: msgspec re-encodes the payload differently: the inputs are not canonical")
        peak, retained = heap_of_decode(dec.decode, data)
        row = {
            "bytes": len(data),
            "decode": time_call("decode(data)", {"decode": dec.decode, "data": data}, a.repeat, a.min_time),
            "encode": time_call("encode(obj)", {"encode": enc.encode, "obj": obj}, a.repeat, a.min_time),
            "decode_peak_bytes": peak,
            "decode_retained_bytes": retained,
        }
        out["payloads"][p["id"]] = row
        print(f"{p['id']:22} decode {row['decode']['best_s'] * 1e6:10.2f} us   encode {row['encode']['best_s'] * 1e6:10.2f} us",
              file=sys.stderr)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
