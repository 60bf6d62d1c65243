#!/usr/bin/env python3
"""Compares tshark's dissection of `mooncake-conformance pcap` captures with their traces (scripts/dissector-check.sh).

For each trace: the messages the capture carries are the trace's send events, in order; the plugin must show,
in the same order, each one's payload as the trace decoded it (`decoded`, or `payload_text` for a raw reply),
name its trace's revision among the revisions the message fits, and raise no malformed or unknown-message
expert info; every bootstrap body the trace records must appear as the plugin's annotated JSON, in order.
Standard library only. Usage: check.py CAPTURE.json DISSECTION.json — CAPTURE.json is `mooncake-conformance pcap
--format json` of the traces (each trace's frames), DISSECTION.json `tshark -T json --no-duplicate-keys` of it.
Prints per trace one line `counts TRACE zmq=N/W http=M/V mismatches=K` (dissected/in the trace), then one line
per mismatch, and a total line; exit 1 on a mismatch.
"""
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def revision_of(header):
    """The spec revision a trace's header names (its family's revision covering vllm_version, or the revision
    its `implementation` speaks: spec/implementations/)."""
    family = header.get("family", "push")
    if header.get("implementation"):
        for f in sorted((ROOT / "spec" / "implementations").glob("*.toml")):
            imp = tomllib.loads(f.read_text())
            if imp["name"] == header["implementation"] and header.get("implementation_version") in imp["releases"]:
                return imp["speaks"]
        raise SystemExit(f"no implementation {header['implementation']} {header.get('implementation_version')}")
    version = header["vllm_version"]
    for f in sorted((ROOT / "spec" / family).glob("*.toml")):
        spec = tomllib.loads(f.read_text())
        if version in spec.get("releases", []) or spec["revision"].endswith(version):
            return spec["revision"]
    raise SystemExit(f"no {family} revision covers {version}")


def values(layer, key):
    """A field's values in one protocol layer of tshark's JSON (one value or a list), in order."""
    v = layer.get(key)
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def layers(frame, name):
    """The frame's layers of that protocol (tshark merges duplicates into a list with --no-duplicate-keys)."""
    ls = frame["_source"]["layers"].get(name)
    if ls is None:
        return []
    ls = ls if isinstance(ls, list) else [ls]
    return [l for l in ls if isinstance(l, dict)]  # an item without fields is its label, a string


def expert_messages(obj, out):
    """Every expert message anywhere under obj."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "_ws.expert.message":
                out.extend(v if isinstance(v, list) else [v])
            elif k in ("_ws.lua.text", "_ws.lua.error"):
                out.append(f"Lua: {v}")
            else:
                expert_messages(v, out)
    elif isinstance(obj, list):
        for v in obj:
            expert_messages(v, out)
    return out


def check(trace_path, frames):
    """The mismatches of one trace's frames, and its counts."""
    lines = [json.loads(l) for l in Path(trace_path).read_text().splitlines() if l.strip()]
    header, events = lines[0], lines[1:]
    revision = revision_of(header)
    want_zmq = []
    for e in events:
        if e.get("kind") == "zmq" and e["dir"] == "send":
            want_zmq.append(("json", e["decoded"]) if "decoded" in e else ("text", e.get("payload_text")))
    want_http = [e["body"] for e in events if e.get("kind") == "http" and e.get("body") is not None]
    got_zmq, got_http, problems = [], [], []
    for fr in frames:
        no = fr["_source"]["layers"]["frame"]["frame.number"]
        for layer in layers(fr, "mooncake"):
            revs = values(layer, "mooncake.revisions")
            fitting = any(revision in r.split(", ") for r in revs)
            for j in values(layer, "mooncake.json"):
                got_zmq.append(("json", json.loads(j)))
                if not fitting:
                    problems.append(f"frame {no}: fits {revs or 'no revision'}, not the trace's {revision}")
            for t in values(layer, "mooncake.text"):
                got_zmq.append(("text", t))
                if not fitting:
                    problems.append(f"frame {no}: raw reply {t!r} fits {revs or 'no revision'}, not {revision}")
        for layer in layers(fr, "mooncake_bootstrap"):
            for j in values(layer, "mooncake_bootstrap.json"):
                got_http.append(json.loads(j))
        for m in expert_messages(fr["_source"]["layers"], []):
            if "Not MessagePack" in m or "No spec revision" in m or "Lua" in m or "Malformed" in m:
                problems.append(f"frame {no}: {m}")
    if got_zmq != want_zmq:
        n = next((i for i, (a, b) in enumerate(zip(got_zmq, want_zmq)) if a != b), min(len(got_zmq), len(want_zmq)))
        problems.append(f"ZeroMQ payloads: {len(got_zmq)} dissected, {len(want_zmq)} in the trace; first difference at message {n + 1}")
    if got_http != want_http:
        problems.append(f"bootstrap bodies: {len(got_http)} dissected, {len(want_http)} in the trace")
    return problems, (len(got_zmq), len(want_zmq), len(got_http), len(want_http))


def live(dissection_path):
    """A live capture's dissection: counts of what the plugin read, and every malformed, unknown or Lua-error
    expert info (a live capture has no trace to compare with)."""
    frames = json.loads(Path(dissection_path).read_text() or "[]")
    counts, problems = {}, []
    for fr in frames:
        ls = fr["_source"]["layers"]
        no = ls["frame"]["frame.number"]
        for layer in layers(fr, "mooncake"):
            for m in values(layer, "mooncake.message"):
                key = m + "".join(f" {x}" for x in values(layer, "mooncake.status"))
                counts[key] = counts.get(key, 0) + 1
            if not values(layer, "mooncake.revisions"):
                problems.append(f"frame {no}: a message that fits no revision exactly")
        for layer in layers(fr, "mooncake_te"):
            for k in ("mooncake_te.type", "mooncake_te.opcode", "mooncake_te.status"):
                n = len(values(layer, k))
                if n:
                    counts[k] = counts.get(k, 0) + n
        for layer in layers(fr, "mooncake_bootstrap"):
            n = len(values(layer, "mooncake_bootstrap.json"))
            counts["bootstrap bodies"] = counts.get("bootstrap bodies", 0) + n
        for m in expert_messages(ls, []):
            if any(w in m for w in ("Not MessagePack", "No spec revision", "Lua", "Malformed", "frame length", "not ZMTP")):
                problems.append(f"frame {no}: {m}")
    for k in sorted(counts):
        print(f"live {k}: {counts[k]}")
    for p in problems:
        print(f"  MISMATCH {p}")
    messages = sum(v for k, v in counts.items() if k.startswith("Mooncake"))
    print(f"total live messages={messages} te_handshakes={counts.get('mooncake_te.type', 0)} problems={len(problems)}")
    sys.exit(1 if problems or messages == 0 else 0)


def main():
    if sys.argv[1] == "--live":
        live(sys.argv[2])
    capture = json.loads(Path(sys.argv[1]).read_text())
    frames = json.loads(Path(sys.argv[2]).read_text() or "[]")
    by_number = {int(f["_source"]["layers"]["frame"]["frame.number"]): f for f in frames}
    total = [0, 0, 0, 0]
    failed = 0
    for entry in capture["traces"]:
        s = entry["summary"]
        mine = [by_number[n] for n in range(s["first_packet"], s["first_packet"] + s["packets"]) if n in by_number]
        problems, counts = check(entry["trace"], mine)
        total = [a + b for a, b in zip(total, counts)]
        failed += bool(problems)
        print(f"counts {entry['trace']} zmq={counts[0]}/{counts[1]} http={counts[2]}/{counts[3]} mismatches={len(problems)}")
        for p in problems:
            print(f"  MISMATCH {p}")
    print(f"total traces={len(capture['traces'])} zmq={total[0]}/{total[1]} http={total[2]}/{total[3]} traces_with_mismatches={failed}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
