#!/usr/bin/env python3
"""Compare two directories of traces (e.g. a fresh recording against the bundled conformance/traces/vllm-X) and say,
per scenario, whether they are equivalent:

* the same messages on every socket and in every HTTP exchange, in the same order per socket (the interleaving of
  independent sockets may differ);
* the same bytes, except what differs from run to run by nature (conformance/traces/README.md §3): ZeroMQ ports and
  the addresses that carry them, the bootstrap port, kv_caches_base_addr values, layout_id values (compared as "which
  earlier id is this the same as") and ROUTER routing ids (compared the same way). MessagePack payloads are
  compared as token streams that keep every format byte (int width, str/bin, fixmap/map16, ...), so an equal
  stream means equal bytes apart from those values; the order of ids inside ok_reqs / err_reqs may differ;
* the same observed_outcome, transfer_engine_calls, roles and conn_endpoints (addresses mapped), no error;
  `finished_sending_t` (when a prefiller reported each request freed) is timing and only noted;
* KV-lease heartbeats (vLLM 0.34.0+: a DEALER whose message is a MooncakeLeaseHeartbeat, and the prefiller ROUTER's
  exchanges with that routing id) are timing too: how many there are depends on the clock, so they are compared as
  the set of distinct exchanges (request and reply, normalized), both recordings must have some or none, and their
  counts are noted. The event fields `t` and `socket_id` are not compared (socket ids only tell the heartbeat
  sockets apart).

Standard library only. Usage: compare.py RECORDED_DIR REFERENCE_DIR [--scenario NAME]... [--ignore-version]
(--ignore-version: compare recordings of two releases of one revision, e.g. 0.26.0 against 0.28.0.)
Exit status 0 when every scenario present in both is equivalent and none is missing from the recording.
"""

import argparse
import json
import os
import re
import struct
import sys

# ----------------------------------------------------------------------------------------------------------------
# MessagePack tokens


class Tok:
    __slots__ = ("fmt", "kind", "value")

    def __init__(self, fmt, kind, value):
        self.fmt, self.kind, self.value = fmt, kind, value

    def __eq__(self, other):
        return isinstance(other, Tok) and (self.fmt, self.kind, self.value) == (other.fmt, other.kind, other.value)

    def __repr__(self):
        return f"{self.kind}<{self.fmt}>:{self.value!r}"


class Bad(Exception):
    pass


def mp_read(b, i=0):
    """Parse one MessagePack value at b[i:]; return (token tree, next index). Every token keeps its format name."""
    if i >= len(b):
        raise Bad("truncated")
    c = b[i]
    i += 1

    def take(n):
        nonlocal i
        if i + n > len(b):
            raise Bad("truncated")
        v = b[i:i + n]
        i += n
        return v

    if c <= 0x7F:
        return Tok("posfixint", "int", c), i
    if 0x80 <= c <= 0x8F:
        return read_map(b, i, c & 0x0F, "fixmap")
    if 0x90 <= c <= 0x9F:
        return read_arr(b, i, c & 0x0F, "fixarray")
    if 0xA0 <= c <= 0xBF:
        n = c & 0x1F
        return Tok("fixstr", "str", take(n).decode("utf-8", "surrogateescape")), i
    if c >= 0xE0:
        return Tok("negfixint", "int", c - 0x100), i
    if c == 0xC0:
        return Tok("nil", "nil", None), i
    if c in (0xC2, 0xC3):
        return Tok("bool", "bool", c == 0xC3), i
    ints = {0xCC: ("uint8", ">B"), 0xCD: ("uint16", ">H"), 0xCE: ("uint32", ">I"), 0xCF: ("uint64", ">Q"),
            0xD0: ("int8", ">b"), 0xD1: ("int16", ">h"), 0xD2: ("int32", ">i"), 0xD3: ("int64", ">q")}
    if c in ints:
        name, f = ints[c]
        return Tok(name, "int", struct.unpack(f, take(struct.calcsize(f)))[0]), i
    if c in (0xCA, 0xCB):
        f = ">f" if c == 0xCA else ">d"
        return Tok("float32" if c == 0xCA else "float64", "float", struct.unpack(f, take(struct.calcsize(f)))[0]), i
    lens = {0xD9: ("str8", ">B", "str"), 0xDA: ("str16", ">H", "str"), 0xDB: ("str32", ">I", "str"),
            0xC4: ("bin8", ">B", "bin"), 0xC5: ("bin16", ">H", "bin"), 0xC6: ("bin32", ">I", "bin")}
    if c in lens:
        name, f, kind = lens[c]
        n = struct.unpack(f, take(struct.calcsize(f)))[0]
        raw = take(n)
        return Tok(name, kind, raw.decode("utf-8", "surrogateescape") if kind == "str" else raw.hex()), i
    if c in (0xDC, 0xDD):
        f = ">H" if c == 0xDC else ">I"
        n = struct.unpack(f, take(struct.calcsize(f)))[0]
        return read_arr(b, i, n, "array16" if c == 0xDC else "array32")
    if c in (0xDE, 0xDF):
        f = ">H" if c == 0xDE else ">I"
        n = struct.unpack(f, take(struct.calcsize(f)))[0]
        return read_map(b, i, n, "map16" if c == 0xDE else "map32")
    raise Bad(f"unsupported format byte {c:#x}")


def read_arr(b, i, n, fmt):
    items = []
    for _ in range(n):
        v, i = mp_read(b, i)
        items.append(v)
    return Tok(fmt, "array", items), i


def read_map(b, i, n, fmt):
    items = []
    for _ in range(n):
        k, i = mp_read(b, i)
        v, i = mp_read(b, i)
        items.append((k, v))
    return Tok(fmt, "map", items), i


def mp_parse(b):
    tok, i = mp_read(b, 0)
    if i != len(b):
        raise Bad("trailing bytes")
    return tok


# ----------------------------------------------------------------------------------------------------------------
# Normalization


ENDPOINT = re.compile(r"tcp://127\.0\.0\.1:(\d+)")
HTTP_URL = re.compile(r"http://127\.0\.0\.1:\d+")
HEX_ID = re.compile(r"0x[0-9a-f]{6,}")


class Labels:
    """Names run-dependent values by order of first appearance: E1, E2 ... for endpoints, L1 ... for layout ids,
    R1 ... for routing ids."""

    def __init__(self):
        self.maps = {}

    def get(self, kind, value):
        m = self.maps.setdefault(kind, {})
        if value not in m:
            m[value] = f"{kind if isinstance(kind, str) else kind[0]}{len(m) + 1}"
        return m[value]

    def text(self, s):
        s = ENDPOINT.sub(lambda m: "tcp://127.0.0.1:<" + self.get("E", m.group(1)) + ">", s)
        s = HTTP_URL.sub("http://127.0.0.1:<bootstrap>", s)
        s = HEX_ID.sub(lambda m: "<" + self.get("L", int(m.group(0), 16)) + ">", s)
        return s


def norm_tok(tok, labels, key=None):
    if tok.kind == "map":
        out = []
        for k, v in tok.value:
            kname = k.value if k.kind == "str" else None
            out.append((norm_tok(k, labels), norm_tok(v, labels, kname)))
        return Tok(tok.fmt, "map", out)
    if tok.kind == "array":
        items = [norm_tok(v, labels) for v in tok.value]
        if key == "kv_caches_base_addr":
            # Host pointers of this run: only their count and encoding width are compared.
            items = [Tok(v.fmt, "addr", None) for v in items]
        if key in ("ok_reqs", "err_reqs"):
            items = sorted(items, key=repr)
        return Tok(tok.fmt, "array", items)
    if tok.kind == "int" and key == "layout_id":
        return Tok("layout_id", "layout", labels.get("L", tok.value) if tok.value else 0)
    if tok.kind == "str":
        return Tok(tok.fmt if tok.value == labels.text(tok.value) else "str*", "str", labels.text(tok.value))
    return tok


def norm_json(v, labels):
    if isinstance(v, str):
        return labels.text(v)
    if isinstance(v, list):
        return [norm_json(x, labels) for x in v]
    if isinstance(v, dict):
        return {labels.text(k): norm_json(x, labels) for k, x in v.items()}
    return v


def norm_frame(hexstr, labels, routing=None):
    raw = bytes.fromhex(hexstr)
    if routing is not None:
        return ("routing-id", labels.get(("R", routing), raw))
    try:
        return ("msgpack", norm_tok(mp_parse(raw), labels))
    except Bad:
        return ("raw", raw)


def is_heartbeat(hexstr):
    """A MooncakeLeaseHeartbeat: a MessagePack map holding only `lease_transfer_ids`."""
    try:
        tok = mp_parse(bytes.fromhex(hexstr))
    except (Bad, ValueError):
        return False
    return (tok.kind == "map" and len(tok.value) == 1 and tok.value[0][0].kind == "str"
            and tok.value[0][0].value == "lease_transfer_ids")


def heartbeat_events(events):
    """Indexes of the events that belong to a KV-lease heartbeat: every event of a connecting socket (by
    `socket_id`) whose first send is a heartbeat, and a ROUTER's events with the routing id a heartbeat came from."""
    first_send, routing = {}, set()
    for e in events:
        if e["kind"] != "zmq" or not e["frames"]:
            continue
        if e["bound"]:
            if e["dir"] == "recv" and is_heartbeat(e["frames"][-1]):
                routing.add((e["conn"], e["endpoint"], e["frames"][0]))
        elif e["dir"] == "send" and "socket_id" in e:
            first_send.setdefault((e["conn"], e["socket_id"]), is_heartbeat(e["frames"][-1]))
    out = set()
    for i, e in enumerate(events):
        if e["kind"] != "zmq" or not e["frames"]:
            continue
        if e["bound"]:
            if (e["conn"], e["endpoint"], e["frames"][0]) in routing:
                out.add(i)
        elif first_send.get((e["conn"], e.get("socket_id"))) or (e["dir"] == "send" and is_heartbeat(e["frames"][-1])):
            out.add(i)
    return out


def load(path):
    with open(path) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    return lines[0], lines[1:]


IGNORED_FIELDS = ("seq", "frames", "decoded", "endpoint", "t", "socket_id")


def normalize(path):
    header, events = load(path)
    labels = Labels()
    streams = {}
    order = []
    beats = heartbeat_events(events)
    # Heartbeat exchanges, per socket stream: DEALER sockets by socket_id, ROUTER exchanges by routing id.
    exchanges = {}
    for i, e in enumerate(events):
        if e["kind"] == "zmq":
            ep = labels.text(e["endpoint"])
            key = ("zmq", e["conn"], e["socket"], ep, e["bound"])
            if i in beats:
                hkey = ("heartbeat",) + key[1:]
                who = e["frames"][0] if e["bound"] else e.get("socket_id", i)
                payload = e["frames"][1:] if e["bound"] else e["frames"]
                fr = tuple(norm_frame(f, labels) for f in payload)
                exchanges.setdefault(hkey, {}).setdefault(who, []).append((e["dir"], fr))
                continue
            # Routing ids are named per ROUTER: only "the reply goes to the id the request came from" matters.
            frames = [norm_frame(f, labels, routing=key if (e["bound"] and i == 0) else None)
                      for i, f in enumerate(e["frames"])]
            item = (e["dir"], tuple(sorted(k for k in e if k not in IGNORED_FIELDS)), frames)
        elif e["kind"] == "http":
            key = ("http", e["conn"])
            item = (e["dir"], e["method"], labels.text(e["path"]), e.get("status"), labels.text(e["body_raw"]))
        else:
            key = (e["kind"],)
            item = json.dumps(e, sort_keys=True)
        streams.setdefault(key, []).append(item)
        order.append((key, len(streams[key]) - 1))
    heartbeats = {k: ({repr(x) for x in v.values()}, len(v)) for k, v in exchanges.items()}
    outcome = dict(header.get("observed_outcome") or {})
    sending_t = outcome.pop("finished_sending_t", None)
    head = {
        "vllm_version": header.get("vllm_version"),
        "connector": header.get("connector"),
        "scenario": header.get("scenario"),
        "roles": header.get("roles"),
        "conn_endpoints": norm_json(header.get("conn_endpoints"), labels),
        "observed_outcome": norm_json(outcome, labels),
        "transfer_engine_calls": header.get("transfer_engine_calls"),
        "error": header.get("error"),
        "finished_sending_t": sending_t,
    }
    return head, streams, order, len(events), heartbeats


# ----------------------------------------------------------------------------------------------------------------


def window(x, y, before=200, after=300):
    """The two representations around the first place they differ."""
    sx, sy = repr(x), repr(y)
    p = next((i for i, (cx, cy) in enumerate(zip(sx, sy)) if cx != cy), min(len(sx), len(sy)))
    lo = max(0, p - before)

    def cut(s):
        return ("..." if lo else "") + s[lo:p + after] + ("..." if p + after < len(s) else "")

    return cut(sx), cut(sy)


def compare_files(rec_path, ref_path, ignore_version=False):
    rh, rs, ro, rn, rb = normalize(rec_path)
    fh, fs, fo, fn, fb = normalize(ref_path)
    diffs, notes = [], []
    for k in ("vllm_version", "connector", "scenario", "roles", "conn_endpoints", "observed_outcome",
              "transfer_engine_calls"):
        if k == "vllm_version" and ignore_version:
            continue
        if rh[k] != fh[k]:
            diffs.append(f"header {k}: recorded {json.dumps(rh[k])} / reference {json.dumps(fh[k])}")
    if rh["error"]:
        diffs.append(f"recording has an error: {rh['error']}")
    for key in sorted(set(rs) | set(fs), key=repr):
        a, b = rs.get(key, []), fs.get(key, [])
        if len(a) != len(b):
            diffs.append(f"stream {key}: {len(a)} events recorded, {len(b)} in the reference")
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                wx, wy = window(x, y)
                diffs.append(f"stream {key} event {i + 1}:\n      recorded  {wx}\n      reference {wy}")
                break
    for key in sorted(set(rb) | set(fb), key=repr):
        (ra, rc), (fa, fc) = rb.get(key, (set(), 0)), fb.get(key, (set(), 0))
        if ra != fa:
            only_r, only_f = sorted(ra - fa), sorted(fa - ra)
            diffs.append(f"heartbeats {key}: exchanges only recorded {only_r[:2]} / only in the reference {only_f[:2]}")
        elif rc != fc:
            notes.append(f"{rc} heartbeat exchanges recorded, {fc} in the reference on {key[1]} {key[2]}")
    if rh["finished_sending_t"] != fh["finished_sending_t"] and (rh["finished_sending_t"] or fh["finished_sending_t"]):
        notes.append(f"finished_sending_t {json.dumps(rh['finished_sending_t'])} recorded, "
                     f"{json.dumps(fh['finished_sending_t'])} in the reference")
    if not diffs and ro != fo:
        notes.append("same events per socket, different interleaving of sockets")
    return diffs, notes, rn


def main(argv=None):
    ap = argparse.ArgumentParser(description="Compare recorded traces with reference traces.")
    ap.add_argument("recorded")
    ap.add_argument("reference")
    ap.add_argument("--scenario", action="append", default=[], help="compare only this scenario (repeatable)")
    ap.add_argument("--ignore-version", action="store_true",
                    help="do not compare the headers' vllm_version (two releases of one revision)")
    a = ap.parse_args(argv)
    ref_names = sorted(f[:-6] for f in os.listdir(a.reference) if f.endswith(".jsonl"))
    rec_names = sorted(f[:-6] for f in os.listdir(a.recorded) if f.endswith(".jsonl"))
    names = a.scenario or sorted(set(ref_names) | set(rec_names))
    bad = 0
    for n in names:
        rp, fp = os.path.join(a.recorded, n + ".jsonl"), os.path.join(a.reference, n + ".jsonl")
        if not os.path.exists(rp):
            print(f"MISSING     {n}: not in the recording")
            bad += 1
            continue
        if not os.path.exists(fp):
            print(f"EXTRA       {n}: no reference trace")
            continue
        diffs, notes, count = compare_files(rp, fp, a.ignore_version)
        if diffs:
            bad += 1
            print(f"DIFFERENT   {n}")
            for d in diffs:
                print("    " + d)
        else:
            extra = f" ({'; '.join(notes)})" if notes else ""
            print(f"EQUIVALENT  {n}: {count} events{extra}")
    print(f"{len(names) - bad}/{len(names)} equivalent")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
