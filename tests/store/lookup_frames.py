#!/usr/bin/env python3
"""The two ends of vLLM's store lookup channel, over real pyzmq sockets, built and parsed the way each release's
LookupKeyClient / LookupKeyServer does. Written from the facts (vLLM 0.21.0 … 0.34.0 wheels,
.../mooncake/store/worker.py and protocol.py; spec/README.md, "Store lookup channel"), not copied. The msgpack frame
of 0.21.0 – 0.23.0 is msgspec's encoding of list[str] (vLLM's MsgpackEncoder adds no extra buffer for str),
decoded untyped as its MsgpackDecoder does.

    lookup_frames.py client     the scheduler's side: for each JSON line on stdin
        {"release", "endpoint", "request": "lookup", "num_tokens", "hashes": [hex...]} or {..., "request": "reset"}
      connects a REQ socket to `endpoint`, sends the frames, waits for the reply and prints
        {"sent": [hex...], "reply": {"hit_tokens", "tail"} | {"ok"} | {"error"}}
    lookup_frames.py server ENDPOINT   the worker's side: binds a REP socket (unlinking a stale ipc file first),
      prints {"ready": true}; then for each JSON line {"release", "hit_tokens", "tail", "ok"} on stdin receives
      one request, parses it, answers with the reply the line describes and prints
        {"received": [hex...], "request": {"request", "num_tokens", "hashes"} | {"error"}, "sent": hex}

Every socket has a 10 s send/receive timeout and linger 0; the script exits when stdin closes.
"""
import json
import os
import sys

import msgspec
import zmq

TIMEOUT_MS = 10_000


def minor(release):
    return int(release.split(".")[1])


def build_request(m, q):
    if q["request"] == "reset":
        return [b"reset"]
    hashes = [bytes.fromhex(h) for h in q["hashes"]]
    n = q["num_tokens"].to_bytes(4, "big")
    if m <= 23:
        frames = [n, msgspec.msgpack.encode([h.hex() for h in hashes])]
        return ([b"lookup"] if m == 23 else []) + frames
    hash_len = len(hashes[0]) if hashes else 0
    return [b"lookup", n, hash_len.to_bytes(2, "big"), b"".join(hashes)]


def parse_request(m, frames):
    if m >= 23:
        tag, frames = frames[0], frames[1:]
        if tag == b"reset":
            return {"request": "reset"}
        if tag != b"lookup":
            return {"error": "unknown tag"}
    n = int.from_bytes(frames[0], "big")
    if m <= 23:
        hashes = [bytes.fromhex(s) for s in msgspec.msgpack.decode(frames[1])]
    else:
        hash_len = int.from_bytes(frames[1], "big")
        blob = frames[2]
        count = len(blob) // hash_len if hash_len else 0
        hashes = [blob[i * hash_len:(i + 1) * hash_len] for i in range(count)]
    return {"request": "lookup", "num_tokens": n, "hashes": [h.hex() for h in hashes]}


def build_reply(m, request, q):
    if request.get("request") != "lookup":
        return b"\x01" if request.get("request") == "reset" and q.get("ok", True) else b"\x00"
    out = bytearray(q["hit_tokens"].to_bytes(4, "big"))
    if m >= 29:
        for g, t in q.get("tail", []):
            out += g.to_bytes(4, "big") + t.to_bytes(4, "big")
    return bytes(out)


def parse_reply(m, request, data):
    if request == "reset":
        return {"ok": data == b"\x01"}
    if m < 29:
        return {"hit_tokens": int.from_bytes(data, "big"), "tail": []}
    if len(data) < 4 or (len(data) - 4) % 8:
        return {"error": "Invalid Mooncake lookup response"}
    tail = [[int.from_bytes(data[o:o + 4], "big"), int.from_bytes(data[o + 4:o + 8], "big")] for o in range(4, len(data), 8)]
    return {"hit_tokens": int.from_bytes(data[:4], "big"), "tail": tail}


def socket(ctx, kind):
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.SNDTIMEO, TIMEOUT_MS)
    s.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    return s


def emit(obj):
    print(json.dumps(obj), flush=True)


def client(ctx):
    sockets = {}
    for line in sys.stdin:
        q = json.loads(line)
        m = minor(q["release"])
        s = sockets.get(q["endpoint"])
        if s is None:
            s = sockets[q["endpoint"]] = socket(ctx, zmq.REQ)
            if m >= 34:
                # 0.34.0's LookupKeyClient: a request-id envelope frame on the ZMTP wire, late replies dropped.
                s.setsockopt(zmq.REQ_RELAXED, 1)
                s.setsockopt(zmq.REQ_CORRELATE, 1)
            s.connect(q["endpoint"])
        frames = build_request(m, q)
        s.send_multipart(frames)
        reply = s.recv()
        emit({"sent": [f.hex() for f in frames], "reply": parse_reply(m, q["request"], reply)})
    for s in sockets.values():
        s.close()


def server(ctx, endpoint):
    path = endpoint.removeprefix("ipc://")
    if endpoint.startswith("ipc://") and os.path.exists(path):
        os.unlink(path)
    s = socket(ctx, zmq.REP)
    s.bind(endpoint)
    emit({"ready": True})
    try:
        for line in sys.stdin:
            q = json.loads(line)
            m = minor(q["release"])
            frames = s.recv_multipart()
            try:
                request = parse_request(m, frames)
            except Exception as e:  # noqa: BLE001 - report what the worker would choke on
                request = {"error": f"{type(e).__name__}: {e}"}
            reply = build_reply(m, request, q)
            s.send(reply)
            emit({"received": [f.hex() for f in frames], "request": request, "sent": reply.hex()})
    finally:
        s.close()
        if endpoint.startswith("ipc://") and os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    ctx = zmq.Context()
    try:
        if sys.argv[1:2] == ["client"]:
            client(ctx)
        elif sys.argv[1:2] == ["server"] and len(sys.argv) == 3:
            server(ctx, sys.argv[2])
        else:
            sys.exit(__doc__)
    finally:
        ctx.term()
