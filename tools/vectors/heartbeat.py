"""The lease heartbeat of 0.34.0 and the prefiller's ROUTER it shares with the pull.

vLLM 0.34.0's listener (`MooncakeConnectorWorker._mooncake_sender_listener`) hands every inbound payload to
`_decode_heartbeat` first: a payload that decodes as `MooncakeLeaseHeartbeat` with a non-empty
`lease_transfer_ids` is answered at once as a heartbeat; anything else — a decode error included, which
`_decode_heartbeat` catches as `msgspec.DecodeError` — goes on to the pull path (the sender workers, which decode
it as `MooncakeXferMetadata`). An exception `_decode_heartbeat` does not catch (msgspec's `RecursionError` for
nesting past the recursion limit) leaves the listener's loop through its `except Exception`, which logs, closes
the ROUTER and ends the listener: that prefiller answers nothing any more.

`route(data)` is that decision, made by the release's own `_decode_heartbeat` (read out of the wheel with `ast`,
its docstring and annotations dropped, run on a bare object holding the decoder the worker builds):
`heartbeat`, `pull` or `listener-exits`. `classification_cases(mod)` are the extra `classify-*` cases of the
heartbeat file: what decoders send that is not a heartbeat (pulls of every shape, one carrying a
`lease_transfer_ids` key among its unknown fields) and heartbeats at the edge of the rule.
"""
import ast
import types

import msgspec

import mpw

HEARTBEAT = "MooncakeLeaseHeartbeat"


def _method(source, cls, name):
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for m in node.body:
                if isinstance(m, ast.FunctionDef) and m.name == name:
                    body = m.body
                    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                        body = body[1:] or [ast.Pass()]
                    m.body = body
                    for arg in m.args.args:
                        arg.annotation = None
                    m.returns = None
                    return ast.unparse(ast.fix_missing_locations(ast.Module(body=[m], type_ignores=[])))
    raise SystemExit(f"the connector has no {cls}.{name}")


def router(connector_source, heartbeat_cls):
    """route(data) -> 'heartbeat' | 'pull' | 'listener-exits', by the release's `_decode_heartbeat`."""
    ns = {"msgspec": msgspec}
    exec(compile(_method(connector_source, "MooncakeConnectorWorker", "_decode_heartbeat"),
                 "<_decode_heartbeat>", "exec"), ns)
    decode = ns["_decode_heartbeat"]
    worker = types.SimpleNamespace(_heartbeat_decoder=msgspec.msgpack.Decoder(heartbeat_cls))

    def route(data):
        try:
            return "pull" if decode(worker, data) is None else "heartbeat"
        except Exception:  # noqa: BLE001 - what the listener's `except Exception` ends on
            return "listener-exits"

    return route


def classification_cases(mod):
    """(id, bytes) of the `classify-*` cases: payloads a prefiller's ROUTER receives that are no heartbeat, and
    heartbeats at the edge of the rule."""
    meta, resp = mod.MooncakeXferMetadata, mod.MooncakeXferResponse
    enc = msgspec.msgpack.encode
    base = dict(remote_hostname="10.0.0.2", remote_port=15000, remote_tp_size=1, remote_tp_rank=0)
    pull = meta(**base, req_blocks={"d-req-1": ("xfer-1", [[3, 4]])}, kv_caches_base_addr=[0x7F0000000000],
                block_lens=[4096], kv_block_lens=[4096], registered_layer_names=["model.layers.0.attn"],
                registered_layer_indices=[0], registered_group_indices=[0], registered_row_offsets=[-1])
    layoutless = meta(**base, req_blocks={"d-req-1": ("xfer-1", [[3, 4]])}, kv_caches_base_addr=[], block_lens=[],
                      kv_block_lens=[], layout_id=0x1234)
    free_only = meta(**base, req_blocks={"d-req-1": ("xfer-1", [])}, kv_caches_base_addr=[], block_lens=[],
                     kv_block_lens=[])
    pull_entries = [(f, msgspec.to_builtins(getattr(pull, f))) for f in pull.__struct_fields__
                    if getattr(pull, f) != _default(meta, f)]
    w = lambda entries: mpw.write_entries(entries, mpw.Style())  # noqa: E731
    out = [
        ("classify-pull", enc(pull)),
        ("classify-pull-layoutless", enc(layoutless)),
        ("classify-pull-free-only", enc(free_only)),
        ("classify-pull-with-empty-lease-ids", w(pull_entries + [("lease_transfer_ids", [])])),
        # A pull that also names transfers to renew: the listener takes it for a heartbeat and never queues the pull.
        ("classify-pull-with-lease-ids", w(pull_entries + [("lease_transfer_ids", ["xfer-1"])])),
        ("classify-response-finish", enc(resp(status=mod.MooncakeXferResponseStatus.FINISH))),
        ("classify-heartbeat-one", enc(getattr(mod, HEARTBEAT)(lease_transfer_ids=["xfer-1"]))),
        ("classify-heartbeat-empty-id", enc(getattr(mod, HEARTBEAT)(lease_transfer_ids=[""]))),
        ("classify-heartbeat-repeated-id", enc(getattr(mod, HEARTBEAT)(lease_transfer_ids=["xfer-1", "xfer-1"]))),
        ("classify-heartbeat-explicit-empty", w([("lease_transfer_ids", [])])),
        ("classify-heartbeat-ids-then-pull-fields", w([("lease_transfer_ids", ["xfer-1"])] + pull_entries)),
        ("classify-heartbeat-nil-ids", w([("lease_transfer_ids", None)])),
        ("classify-heartbeat-int-id", w([("lease_transfer_ids", [1])])),
        ("classify-heartbeat-deep-unknown", w([("lease_transfer_ids", ["xfer-1"]),
                                               ("zz", mpw.Raw(b"\x91" * 5000 + b"\x90"))])),
        ("classify-pull-deep-unknown", w(pull_entries + [("zz", mpw.Raw(b"\x91" * 5000 + b"\x90"))])),
    ]
    return out


def _default(cls, name):
    for f in msgspec.structs.fields(cls):
        if f.name == name:
            if f.default is not msgspec.NODEFAULT:
                return f.default
            if f.default_factory is not msgspec.NODEFAULT:
                return f.default_factory()
    return msgspec.NODEFAULT
