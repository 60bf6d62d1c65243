#!/usr/bin/env python3
"""Records pull-family traffic in the trace format (conformance/traces/README.md, format_version 1, plus the
header field `family = "pull"`): real pyzmq REQ and ROUTER sockets on 127.0.0.1 exchanging the pull messages
encoded and decoded with real msgspec.

WHAT THESE TRACES ARE MADE FROM: no vllm-ascend code runs (its package is source-only and needs Ascend
hardware). The messages are the classes of tests/pull/gen_pull_vectors.py — written from the facts of the
vllm-ascend 0.18.0 and 0.23.0.post1 sdists and vllm-project/vllm-ascend@3e486e317, not read from spec/ — and
the two ends follow those sources' socket handling: the decoder's REQ sends one frame; the prefiller's ROUTER
receives [routing id, empty, payload], decodes the payload untyped as a tuple and compares element 0 with the
bin tag, then answers [routing id, empty, reply] with the metadata (encoded once) or the raw b"ACK". So the
traces check the spec, the codec and the validator against independent definitions over a real transport; they
are not recordings of vllm-ascend itself.

Usage: record_pull_traces.py OUT_DIR   (writes OUT_DIR/<revision>/<scenario>.jsonl)
"""
import json
import os
import sys

import msgspec
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_pull_vectors as defs  # noqa: E402

TIMEOUT_MS = 5000
RECORDED_BY = f"tests/pull/record_pull_traces.py (pyzmq {zmq.__version__}, libzmq {zmq.zmq_version()}, msgspec {msgspec.__version__})"


def metadata(rev):
    """A plausible prefiller reply of each revision (2 layers, K and V regions)."""
    if rev == "vllm-ascend-0.18.0":
        return defs.AgentMeta018(engine_id="engine-prefill-0", te_rpc_port=17001,
                                 kv_caches_base_addr=[0x7F0000000000, 0x7F0000100000, 0x7F0000200000, 0x7F0000300000],
                                 num_blocks=32, local_ip="127.0.0.1")
    if rev == "vllm-ascend-0.23.0.post1":
        return defs.AgentMeta023(engine_id="engine-prefill-0", te_rpc_port=17001,
                                 kv_group2layeridx={0: ({"kv_cache_spec_type": "FullAttentionSpec", "block_size": 128}, [0, 1])},
                                 block_size=128,
                                 kv_caches_base_addr=[[0x7F0000000000, 0x7F0000100000], [0x7F0000200000, 0x7F0000300000]],
                                 block_size_scale=[[1, 1], [1, 1]], num_blocks=32,
                                 block_lens=[[32768, 32768], [32768, 32768]], block_strides=[[32768, 32768], [32768, 32768]],
                                 local_ip="127.0.0.1", handshake_port=30000)
    tp = {r: defs.TPMeta(te_rpc_port=17001 + r, layer_indices=[0, 1],
                         kv_caches_base_addr=[[0x7F0000000000 + r * 0x1000000, 0x7F0000100000 + r * 0x1000000]] * 2,
                         local_ip="127.0.0.1", handshake_port=30000 + r) for r in range(2)}
    pp = defs.PPMeta(block_size=128, num_blocks=32, layer_names=["model.layers.0.self_attn", "model.layers.1.self_attn"],
                     layer_block_sizes=[128, 128], group_indices=[0, 0], block_strides=[[32768, 32768]] * 2,
                     block_lens=[[32768, 32768]] * 2, block_shapes=[[(128, 8, 16), (128, 8, 16)]] * 2,
                     block_size_scales=[[1, 1]] * 2, metadata_by_tp_rank=tp)
    return defs.Groups(engine_id="engine-prefill-0", scheduler_host="127.0.0.1", scheduler_port=30100, pp_size=1,
                       pcp_size=1, dcp_size=1, tp_size=2, use_kv_pp=False, metadata_by_pp_rank={0: pp})


def get_meta(generation):
    return (b"get_meta_msg", "") if generation == 1 else (b"get_meta_msg",)


def done(generation, req_id, ports):
    if generation == 1:
        return (b"done_recving_msg", req_id, {p: {"num": 1, "host": "127.0.0.1"} for p in ports})
    return (b"done_recving_msg", req_id)


def to_builtins(data):
    try:
        return json.loads(json.dumps(msgspec.msgpack.decode(data), default=lambda b: b.hex() if isinstance(b, bytes) else str(b)))
    except Exception:  # noqa: BLE001 - not a complete msgpack value (the raw ACK)
        return None


class Recorder:
    def __init__(self):
        self.events = []

    def zmq(self, side, conn, sock_type, endpoint, bound, direction, frames):
        ev = {"seq": len(self.events) + 1, "kind": "zmq", "side": side, "conn": conn, "socket": sock_type,
              "endpoint": endpoint, "bound": bound, "dir": direction, "frames": [bytes(f).hex() for f in frames]}
        d = to_builtins(frames[-1])
        if d is not None:
            ev["decoded"] = d
        else:
            ev["payload_text"] = bytes(frames[-1]).decode("utf-8", "replace")
        if bound:
            ev["note"] = "frame 0 is the ZMQ routing id, not payload"
        self.events.append(ev)


def prefiller_answer(rec, router, endpoint, reply_meta):
    """One request on the ROUTER, answered as the sources do; returns the message kind."""
    frames = router.recv_multipart()
    rec.zmq("prefiller", "prefiller0", "ROUTER", endpoint, True, "recv", frames)
    ident, payload = frames[0], [f for f in frames[1:] if f][0]
    msg = msgspec.msgpack.Decoder(type=tuple).decode(payload)
    if msg[0] == b"get_meta_msg":
        out = [ident, b"", reply_meta]
    elif msg[0] == b"done_recving_msg":
        out = [ident, b"", b"ACK"]
    else:
        return None
    router.send_multipart(out)
    rec.zmq("prefiller", "prefiller0", "ROUTER", endpoint, True, "send", out)
    return msg[0]


def exchange(rec, ctx, router, endpoint, conn, request, reply_meta, reply_type):
    req = ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.setsockopt(zmq.SNDTIMEO, TIMEOUT_MS)
    req.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    req.connect(endpoint)
    payload = msgspec.msgpack.encode(request)
    req.send(payload)
    rec.zmq("decoder", conn, "REQ", endpoint, False, "send", [payload])
    prefiller_answer(rec, router, endpoint, reply_meta)
    reply = req.recv()
    rec.zmq("decoder", conn, "REQ", endpoint, False, "recv", [reply])
    if reply_type is None:
        assert reply == b"ACK", reply
    else:
        msgspec.msgpack.Decoder(reply_type).decode(reply)
    req.close()


def scenario(rev, generation, releases, commit, name, description, steps):
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    endpoint = f"tcp://127.0.0.1:{port}"
    meta = metadata(rev)
    reply_meta = msgspec.msgpack.encode(meta)  # encoded once, as the prefiller does
    rec = Recorder()
    conns = set()
    try:
        for conn, kind, req_id in steps:
            conns.add(conn)
            if kind == "get_meta":
                exchange(rec, ctx, router, endpoint, conn, get_meta(generation), reply_meta, type(meta))
            else:
                exchange(rec, ctx, router, endpoint, conn, done(generation, req_id, [30000, 30001]), reply_meta, None)
    finally:
        router.close()
        ctx.term()
    version = releases[0] if releases else f"main@{commit.split('@')[1][:9]}"
    header = {"format": "mooncake-trace", "format_version": 1, "family": "pull", "vllm_version": version,
              "connector": "MooncakeConnectorV1" if generation == 1 else "MooncakePullConnector",
              "connector_generation": generation, "scenario": name, "description": description,
              "recorded_by": RECORDED_BY, "recorded_from": "definitions (not vllm-ascend code): see recorded_by's docstring",
              "roles": {**{c: "decoder" for c in sorted(conns)}, "prefiller0": "prefiller"},
              "conn_endpoints": {**{c: [endpoint] for c in sorted(conns)}, "prefiller0": [endpoint]},
              "recorded_at_unix": 0, "observed_outcome": {}, "transfer_engine_calls": [], "error": None}
    return [header] + rec.events


SCENARIOS = [
    ("a_meta_then_done", "One decoder worker asks for the metadata, reads, and sends the completion.",
     [("decoder0", "get_meta", None), ("decoder0", "done", "req-0")]),
    ("b_two_decoders", "Two decoder workers ask for the metadata (same bytes each time), then both send completions.",
     [("decoder_tp0", "get_meta", None), ("decoder_tp1", "get_meta", None), ("decoder_tp0", "done", "req-1"),
      ("decoder_tp1", "done", "req-1")]),
]


def main():
    out = sys.argv[1]
    for rev, releases, commit, _source, generation, _msgs in defs.REVISIONS:
        os.makedirs(os.path.join(out, rev), exist_ok=True)
        for name, desc, steps in SCENARIOS:
            lines = scenario(rev, generation, releases, commit, name, desc, steps)
            with open(os.path.join(out, rev, f"{name}.jsonl"), "w") as f:
                for line in lines:
                    f.write(json.dumps(line, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
