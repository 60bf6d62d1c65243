#!/usr/bin/env python3
"""One worker of vllm-ascend's Mooncake pull connector (`MooncakeConnector` of
`vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py`, registered as "MooncakeConnectorV1"), as its
own code runs it, in one process, driven over standard input/output by `tools/ascend/record.py`.

What runs is the release's own code: `MooncakeConnector(vllm_config, KVConnectorRole.WORKER)` and its worker —
`register_kv_caches` (its region table, `global_te.register_buffer`, the KVCacheSendingThread's ROUTER or the
KVCacheRecvingThread), `start_load_kv` (its rank choice, the REQ pool, `_get_remote_metadata`,
`batch_transfer_sync_read`, `_send_done_recv_signal`) and `get_finished` — on the vLLM release it pairs with, with
the real Mooncake Transfer Engine (pip mooncake-transfer-engine-non-cuda) moving the bytes between the processes'
CPU tensors over TCP on 127.0.0.1.

Faked (lookups and NPU calls only; see tools/ascend/README.md for why none of it reaches the wire):

* `torch_npu`: a module with no NPU behind it; its ops raise if called (the scenarios recorded do not reach the
  KV reformatting that uses them), `torch.npu`'s stream/event/synchronize calls are no-ops on CPU tensors;
* the parallel-state lookups the connector makes by name (TP/PP/PCP/DCP rank and group) and `get_ip`
  (→ 127.0.0.1);
* the engine's transport: the connector initializes it with protocol "ascend" (HCCS/RoCE on NPUs); the driver
  passes "tcp" instead, everything else of the call (P2PHANDSHAKE, host, device name) as the connector makes it;
* the configuration: vLLM's own KVTransferConfig / ParallelConfig / CacheConfig, with tools/record's stand-ins
  for the model config and (where the release's VllmConfig cannot be built without a device) VllmConfig;
* the scheduler: what it would hand the worker is built with the connector's own `MooncakeConnectorMetadata`
  (`add_new_req` with the kv_transfer_params its scheduler's `request_finished` returns; `requests_to_send`,
  `reqs_in_batch`).

Commands (one JSON object per line on stdin, one reply per line on stdout; logs on stderr):
  {"cmd": "register"}                        → {"ok": true, "handshake_port", "te_rpc_port", "kv_caches_base_addr"}
  {"cmd": "send", "req_id", "blocks"}        prefiller: the request finished prefill; its blocks wait for a pull
  {"cmd": "pull", "req_id", "local_blocks", "params"}  decoder: start_load_kv with the scheduler's request
  {"cmd": "poll"}                            → {"ok": true, "sending": [...], "recving": [...], "load_errors": [...]}
                                             (get_finished, get_block_ids_with_load_errors)
  {"cmd": "fail_next_read", "count", "ret"}  decoder: the next `count` engine reads return `ret` without reading
  {"cmd": "check", "req_id", "pairs"}        decoder: compare pulled blocks with the prefiller's pattern
  {"cmd": "events"}                          → {"ok": true, "events": [...]} (the tapped ZeroMQ traffic)
  {"cmd": "read", "region", "offset", "len"} → {"ok": true, "hex"}: bytes of a registered region
  {"cmd": "tables"}                          → {"ok": true, "reqs_to_process", "delayed"}: the sizes of the
                                             sending or receiving thread's task tracker
  {"cmd": "quit"}

With --deferred (tools/ascend/testee.py) the worker imports its stack first and answers {"ok": true, "imported":
true}; the first command is then {"cmd": "configure", "argv": [...]} with the other options, answered as a worker
started without --deferred answers (`hello`). Either way the process ends at end of input.
"""

import argparse
import importlib.machinery
import inspect
import json
import os
import sys
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "record"))

MODULE = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
# The model of the recordings: 4 KV heads, head size 8, 2 layers, block size 16, fp16, no MLA.
MODEL = {"total_num_kv_heads": 4, "head_size": 8, "num_layers": 2, "block_size": 16}
OUT = sys.stdout
# The engine reads still to fail (`fail_next_read`) and the code they return.
READ_FAULTS = {"left": 0, "ret": -1}


def log(*a):
    print("[ascend-worker]", *a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------------------------
# Fakes, installed before the connector is imported


def _unavailable(name):
    def call(*args, **kwargs):
        raise RuntimeError(f"torch_npu.{name} is faked (no NPU here); the recorded scenarios do not reach it")

    return call


def install_torch_npu_fake():
    """`torch_npu` as an empty module with the ops the connector names (raising if called), and `torch.npu` with
    the device calls as no-ops: the caches are CPU tensors, whose writes are complete when the call returns."""
    import torch

    mod = types.ModuleType("torch_npu")
    mod.__version__ = "0+mooncake-wire-fake"
    mod.__file__ = __file__
    # A spec, so that importlib.util.find_spec("torch_npu") (transformers asks it) answers instead of raising; with
    # no distribution metadata behind it, transformers still reports no NPU.
    mod.__spec__ = importlib.machinery.ModuleSpec("torch_npu", None)
    for name in ("_npu_reshape_and_cache", "npu_scatter_pa_kv_cache", "npu_format_cast", "get_npu_format"):
        setattr(mod, name, _unavailable(name))
    mod.atb = types.SimpleNamespace(npu_paged_cache_load=_unavailable("atb.npu_paged_cache_load"))
    sys.modules["torch_npu"] = mod
    # What vllm-ascend's setup.py generates at build time from SOC_VERSION (0.23.0.post1 reads it to pick
    # device-specific paths): an Atlas A2 (ascend910b1), the device vllm-ascend's default images target.
    build_info = types.ModuleType("vllm_ascend._build_info")
    build_info.__device_type__ = "A2"
    sys.modules["vllm_ascend._build_info"] = build_info

    class Event:
        def __init__(self, *a, **k):
            pass

        def record(self, *a, **k):
            pass

        def synchronize(self):
            pass

        def wait(self, *a, **k):
            pass

        def query(self):
            return True

    class Stream(Event):
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    npu = types.SimpleNamespace(
        synchronize=lambda *a, **k: None,
        current_stream=lambda *a, **k: Stream(),
        Stream=Stream,
        Event=Event,
        stream=lambda s=None: Stream(),
        set_device=lambda *a, **k: None,
        current_device=lambda: 0,
        device_count=lambda: 1,
        is_available=lambda: False,
    )
    torch.npu = npu


def install_tcp_engine():
    """The real TransferEngine, initialized with protocol "tcp" where the connector asks for "ascend"."""
    import mooncake.engine as me

    real = me.TransferEngine
    if getattr(real, "_mw_tcp", False):
        return

    class TransferEngine(real):
        _mw_tcp = True

        def initialize(self, hostname, metadata_server, protocol, device_name):
            log(f"TransferEngine.initialize({hostname!r}, {metadata_server!r}, {protocol!r} -> 'tcp', {device_name!r})")
            return super().initialize(hostname, metadata_server, "tcp" if protocol == "ascend" else protocol,
                                      device_name)

        def batch_transfer_sync_read(self, session_id, buffers, peer_buffer_addresses, lengths):
            # `fail_next_read`: while failures remain, the read returns the given code without reaching the engine
            # (nothing is read), as tools/mooncake_v1's EngineTap does to writes.
            failing = READ_FAULTS["left"] > 0
            if failing:
                READ_FAULTS["left"] -= 1
                ret = READ_FAULTS["ret"]
            else:
                ret = super().batch_transfer_sync_read(session_id, buffers, peer_buffer_addresses, lengths)
            import taps

            ev = {"kind": "te_read", "conn": taps._conn, "session": session_id, "n": len(lengths),
                  "bytes": int(sum(lengths)), "ret": ret}
            if failing:
                ev["injected_failure"] = True
            taps.emit(ev)
            return ret

    me.TransferEngine = TransferEngine


def Group(rank, world_size):
    """The recorder's process-group stand-in (tools/record/fakes.py), with the two handles vllm-ascend also reads."""
    import fakes

    g = fakes.FakeGroup(rank, world_size)
    g.device_group = None
    g.cpu_group = None
    return g


def install_lookup_fakes(mods, tp_rank, tp_size):
    """The parallel-state lookups the connector imports by name, and `get_ip`, in every module given."""
    values = {
        "get_tensor_model_parallel_rank": lambda: tp_rank,
        "get_tensor_model_parallel_world_size": lambda: tp_size,
        "get_tp_group": lambda: Group(tp_rank, tp_size),
        "get_pp_group": lambda: Group(0, 1),
        "get_pcp_group": lambda: Group(0, 1),
        "get_dcp_group": lambda: Group(0, 1),
        "get_decode_context_model_parallel_rank": lambda: 0,
        "get_decode_context_model_parallel_world_size": lambda: 1,
        "get_ip": lambda: "127.0.0.1",
    }
    for mod in mods:
        for name, fn in values.items():
            if hasattr(mod, name):
                setattr(mod, name, fn)


# ----------------------------------------------------------------------------------------------------------------
# Configuration


def make_vllm_config(a):
    import compat
    import vllm.config as vc

    prefill = {"tp_size": a.prefill_tp, "dp_size": 1}
    decode = {"tp_size": a.decode_tp, "dp_size": 1}
    ktc = vc.KVTransferConfig(kv_connector="MooncakeConnectorV1", kv_role=a.kv_role, engine_id=a.engine_id,
                              kv_port=a.kv_port, kv_connector_extra_config={"prefill": prefill, "decode": decode})
    parallel = compat._build(vc.ParallelConfig, {"tensor_parallel_size": a.tp_size, "pipeline_parallel_size": 1,
                                                 "data_parallel_size": 1}, "the parallel config")
    cache = compat._build(vc.CacheConfig, {"block_size": MODEL["block_size"], "cache_dtype": "auto"},
                          "the cache config")
    parts = {"kv_transfer_config": ktc, "parallel_config": parallel, "cache_config": cache}
    # vllm-ascend's AscendConfig reads the compilation and scheduler configs: vLLM's own, at their defaults.
    for name, cls, kw in (("compilation_config", "CompilationConfig", {}),
                          ("scheduler_config", "SchedulerConfig", {"max_model_len": 2048, "is_encoder_decoder": False})):
        try:
            parts[name] = getattr(vc, cls)(**kw)  # max_model_len, is_encoder_decoder: InitVars, not fields
        except Exception as e:  # noqa: BLE001
            log(f"{cls}() cannot be built here ({type(e).__name__}: {e}); left to VllmConfig's default")
    try:
        config = vc.VllmConfig(**parts)
    except Exception as e:  # noqa: BLE001
        log(f"VllmConfig cannot be built here ({type(e).__name__}: {e}); using tools/record's VllmConfigStandIn")
        config = compat.VllmConfigStandIn(vc.VllmConfig, parts)
    for name, part in parts.items():
        if getattr(config, name) is not part:
            object.__setattr__(config, name, part)
    compat._override(parallel, {"rank": a.tp_rank, "data_parallel_rank": 0, "data_parallel_rank_local": 0,
                                "data_parallel_size_local": 1, "data_parallel_master_ip": "127.0.0.1"})
    compat._override(cache, {"block_size": MODEL["block_size"], "num_gpu_blocks": a.num_blocks})
    model = compat.FakeModelConfig(MODEL, MODEL["head_size"])
    from transformers import LlamaConfig

    # A real (text-only) Hugging Face config of the recordings' model: vllm-ascend reads its heads, head size and
    # layers, and compares hf_config with hf_text_config to tell a vision-language model.
    text = LlamaConfig(num_key_value_heads=MODEL["total_num_kv_heads"], head_dim=MODEL["head_size"],
                       num_hidden_layers=MODEL["num_layers"], num_attention_heads=MODEL["total_num_kv_heads"],
                       hidden_size=MODEL["total_num_kv_heads"] * MODEL["head_size"], architectures=["LlamaForCausalLM"])
    model.hf_config = text
    model.hf_text_config = text
    model.is_deepseek_mla = False
    model.get_total_num_hidden_layers = lambda: MODEL["num_layers"]
    object.__setattr__(config, "model_config", model)
    for name, value in (("additional_config", {}), ("speculative_config", None)):
        try:
            object.__setattr__(config, name, value)
        except Exception:  # noqa: BLE001
            pass
    return config


# ----------------------------------------------------------------------------------------------------------------
# The worker


def pattern_byte(region, block, tp_rank):
    """The prefiller's provenance byte of a block: which region, block and rank it came from."""
    return (region * 37 + block * 5 + tp_rank * 101 + 1) % 251


def prepare():
    """The stack imported, with the fakes and taps the connector must find at import: its module."""
    import importlib

    install_torch_npu_fake()
    install_tcp_engine()
    import taps

    taps.install_zmq_taps()
    return importlib.import_module(MODULE)


class Worker:
    def __init__(self, a, mod=None):
        self.a = a
        import torch

        mod = mod or prepare()
        import taps

        taps.configure(a.conn, a.role)
        self.taps = taps
        self.mod = mod
        mods = [m for n, m in list(sys.modules.items()) if n.startswith("vllm_ascend") and m is not None]
        install_lookup_fakes(mods, a.tp_rank, a.tp_size)
        self.config = make_vllm_config(a)
        from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

        self.mod.init_ascend_config(self.config)
        try:
            from vllm.config import set_current_vllm_config
        except ImportError:
            set_current_vllm_config = None
        self.set_current = set_current_vllm_config
        import compat

        # What the engine core hands the connector (0.23.0.post1 requires it; 0.18.0 ignores it): one full-attention
        # KV-cache group with every layer, as vLLM's KVCacheConfig.
        kv_model = dict(MODEL, num_blocks=a.num_blocks)
        self.kv_cache_config = compat.make_kv_cache_config(
            None, kv_model, [{"layers": list(range(MODEL["num_layers"]))}],
            max(1, MODEL["total_num_kv_heads"] // a.tp_size), MODEL["head_size"])
        with self._current():
            self.connector = self.mod.MooncakeConnector(self.config, KVConnectorRole.WORKER, self.kv_cache_config)
        self.worker = self.connector.connector_worker
        heads = max(1, MODEL["total_num_kv_heads"] // a.tp_size)
        shape = (a.num_blocks, MODEL["block_size"], heads, MODEL["head_size"])
        self.kv_caches = {}
        for layer in range(MODEL["num_layers"]):
            k = torch.zeros(shape, dtype=torch.float16)
            v = torch.zeros(shape, dtype=torch.float16)
            self.kv_caches[f"model.layers.{layer}.self_attn"] = (k, v)
        self.torch = torch

    def _current(self):
        import contextlib

        if self.set_current is None:
            return contextlib.nullcontext()
        try:
            return self.set_current(self.config)
        except Exception:  # noqa: BLE001
            return contextlib.nullcontext()

    def regions(self):
        return [t for pair in self.kv_caches.values() for t in pair]

    def fill_pattern(self):
        for r, t in enumerate(self.regions()):
            u8 = t.view(self.torch.uint8).view(t.shape[0], -1)
            for b in range(t.shape[0]):
                u8[b].fill_(pattern_byte(r, b, self.a.tp_rank))

    def fill_provenance(self):
        """conformance/TESTEE.md's provenance pattern (tools/ascend/testee.py): region r is the r-th of
        `kv_caches_base_addr` as registered, each layer's K then V."""
        import provenance

        for r, t in enumerate(self.regions()):
            u8 = t.view(self.torch.uint8).view(t.shape[0], -1)
            for b in range(t.shape[0]):
                row = bytearray(provenance.block_bytes(r, b, u8.shape[1]))
                u8[b].copy_(self.torch.frombuffer(row, dtype=self.torch.uint8))

    def read(self, region, offset, length):
        """`length` bytes at `offset` of region `region` (as registered), hex."""
        t = self.regions()[region]
        u8 = t.view(self.torch.uint8).reshape(-1)
        if offset < 0 or length < 0 or offset + length > u8.numel():
            raise ValueError(f"region {region}: {offset}+{length} is outside its {u8.numel()} bytes")
        return {"hex": bytes(u8[offset:offset + length].tolist()).hex()}

    def tables(self):
        """The sizes of the task tracker of the sending (prefiller) or receiving (decoder) thread: the requests
        still waiting for their completion, and those of them under the abort timeout."""
        thread = self.worker.kv_send_thread or self.worker.kv_recv_thread
        tracker = thread.task_tracker
        with tracker.done_task_lock:
            return {"reqs_to_process": len(tracker.reqs_to_process), "delayed": len(tracker.delayed_free_requests)}

    def expiring(self):
        """The prefiller's requests whose abort timeout has passed (vLLM's VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT, as
        the tracker reads it): the next get_finished frees them as expired."""
        thread = self.worker.kv_send_thread
        if thread is None:
            return []
        from vllm import envs

        tracker, now = thread.task_tracker, time.time()
        with tracker.done_task_lock:
            return sorted(r for r, t0 in tracker.delayed_free_requests.items()
                          if now - t0 > envs.VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT)

    def register(self):
        if self.a.kv_role == "kv_producer":
            self.fill_provenance() if self.a.fill == "provenance" else self.fill_pattern()
        with self._current():
            self.connector.register_kv_caches(self.kv_caches)
        meta = self.worker.xfer_handshake_metadata
        return {"handshake_port": self.worker.handshake_port, "te_rpc_port": self.worker.te_rpc_port,
                "kv_caches_base_addr": list(getattr(meta, "kv_caches_base_addr", []))}

    def new_metadata(self):
        return self.mod.MooncakeConnectorMetadata()

    def send(self, req_id, blocks):
        """What the prefiller's scheduler hands the worker for a request that finished prefill: in the batch, and
        its blocks held until the decoder's completion (`request_finished` → `requests_to_send`)."""
        meta = self.new_metadata()
        meta.reqs_in_batch = {req_id}
        meta.requests_to_send = {req_id: time.time()}
        self.worker.start_load_kv(meta)
        return {}

    def pull(self, req_id, local_blocks, params):
        """What the decoder's scheduler hands the worker for a request whose KV the prefiller holds: its
        `update_state_after_alloc` / `build_connector_meta` call `add_new_req` with the newly allocated blocks and
        the kv_transfer_params the prefiller's `request_finished` returned (which arrive as JSON)."""
        meta = self.new_metadata()
        kw = {}
        params = dict(params)
        if "local_full_block_ids" in inspect.signature(meta.add_new_req).parameters:
            # 0.23.0.post1: block ids per KV-cache group (one group here), and the prefiller's block size.
            kw["local_full_block_ids"] = (list(local_blocks),)
            local_blocks = [list(local_blocks)]
            params["remote_block_ids"] = [params["remote_block_ids"]]
            params["remote_block_size"] = MODEL["block_size"]
        meta.add_new_req(request_id=req_id, local_block_ids=local_blocks,
                         num_external_tokens=len(params["remote_block_ids"][-1] if kw else local_blocks)
                         * MODEL["block_size"], kv_transfer_params=params, **kw)
        meta.reqs_in_batch = {req_id}
        self.worker.start_load_kv(meta)
        return {}

    def poll(self):
        """The scheduler's two questions after a step: `get_finished` and `get_block_ids_with_load_errors` (the
        connector's own in 0.23.0.post1; 0.18.0 inherits vLLM's base class's)."""
        expiring = self.expiring()
        sending, recving = self.worker.get_finished()
        errors = self.connector.get_block_ids_with_load_errors()
        return {"sending": sorted(sending), "recving": sorted(recving), "load_errors": sorted(errors),
                "expired": [r for r in expiring if r in sending]}

    def fail_next_read(self, count, ret):
        READ_FAULTS["left"], READ_FAULTS["ret"] = int(count), int(ret)
        return {}

    def check(self, pairs, prefiller_rank):
        """Every (local block, remote block) pulled holds the prefiller's pattern of the remote block, in every
        region: the engine moved the right bytes to the right place."""
        bad = []
        for r, t in enumerate(self.regions()):
            u8 = t.view(self.torch.uint8).view(t.shape[0], -1)
            for local, remote in pairs:
                want = pattern_byte(r, remote, prefiller_rank)
                row = u8[local]
                if not bool((row == want).all()):
                    bad.append({"region": r, "local": local, "remote": remote, "want": want,
                                "got": sorted(set(row.tolist()))[:4]})
        return {"mismatches": bad, "blocks": len(pairs), "regions": len(self.regions())}


def hex_decoded(event):
    """`decoded` as the pull traces (and the Wireshark plugin) write it: bytes as hex, not msgspec.json's base64."""
    if event.get("kind") != "zmq" or "decoded" not in event:
        return event
    import msgspec

    value = msgspec.msgpack.decode(bytes.fromhex(event["frames"][-1]))
    event["decoded"] = json.loads(json.dumps(value, default=lambda b: b.hex() if isinstance(b, bytes) else str(b)))
    return event


def serve(w):
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        cmd = msg.get("cmd")
        try:
            if cmd == "register":
                out = w.register()
            elif cmd == "send":
                out = w.send(msg["req_id"], msg["blocks"])
            elif cmd == "pull":
                out = w.pull(msg["req_id"], msg["local_blocks"], msg["params"])
            elif cmd == "poll":
                out = w.poll()
            elif cmd == "fail_next_read":
                out = w.fail_next_read(msg.get("count", 1), msg.get("ret", -1))
            elif cmd == "check":
                out = w.check(msg["pairs"], msg["prefiller_rank"])
            elif cmd == "read":
                out = w.read(int(msg["region"]), int(msg["offset"]), int(msg["len"]))
            elif cmd == "tables":
                out = w.tables()
            elif cmd == "events":
                out = {"events": [hex_decoded(e) for e in w.taps.drain()]}
            elif cmd == "quit":
                reply({"ok": True})
                break
            else:
                raise ValueError(f"unknown command {cmd!r}")
            out["ok"] = True
            reply(out)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            reply({"ok": False, "error": f"{type(e).__name__}: {e}"})


def reply(obj):
    OUT.write(json.dumps(obj) + "\n")
    OUT.flush()


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--role", choices=["prefiller", "decoder"], required=True)
    p.add_argument("--conn", required=True)
    p.add_argument("--engine-id", required=True)
    p.add_argument("--tp-rank", type=int, default=0)
    p.add_argument("--tp-size", type=int, default=1)
    p.add_argument("--prefill-tp", type=int, default=1)
    p.add_argument("--decode-tp", type=int, default=1)
    p.add_argument("--kv-port", type=int, required=True)
    p.add_argument("--num-blocks", type=int, default=32)
    # The model, where it differs from the recordings' (MODEL): layers (two regions each, K and V), KV heads in
    # all (split over the TP ranks), tokens per block.
    p.add_argument("--num-layers", type=int, default=MODEL["num_layers"])
    p.add_argument("--kv-heads", type=int, default=MODEL["total_num_kv_heads"])
    p.add_argument("--block-size", type=int, default=MODEL["block_size"])
    p.add_argument("--fill", choices=["pattern", "provenance"], default="pattern",
                   help="a prefiller's caches: the recorder's byte per block, or conformance/TESTEE.md's pattern")
    return p


def configure(argv):
    a = parser().parse_args(argv)
    a.kv_role = "kv_producer" if a.role == "prefiller" else "kv_consumer"
    MODEL.update(num_layers=a.num_layers, total_num_kv_heads=a.kv_heads, block_size=a.block_size)
    return a


def deferred():
    """--deferred: import first (the slow part), then take the options from the first command."""
    try:
        mod = prepare()
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        reply({"ok": False, "error": f"import: {type(e).__name__}: {e}"})
        return 3
    reply({"ok": True, "imported": True})
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    try:
        msg = json.loads(line)
        if msg.get("cmd") != "configure":
            raise ValueError(f"the first command is configure, not {msg.get('cmd')!r}")
        # The environment the release reads at run time (VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT), set before any use.
        os.environ.update({str(k): str(v) for k, v in (msg.get("env") or {}).items()})
        a = configure([str(x) for x in msg.get("argv") or []])
        w = Worker(a, mod)
    except (Exception, SystemExit) as e:  # noqa: BLE001  (argparse exits on bad options)
        traceback.print_exc()
        reply({"ok": False, "error": f"configure: {type(e).__name__}: {e}"})
        return 3
    reply({"ok": True, "hello": a.conn})
    serve(w)
    return 0


def main(argv=None):
    global OUT
    argv = sys.argv[1:] if argv is None else argv
    # Standard output carries only replies: everything the libraries print goes to standard error.
    OUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if argv == ["--deferred"]:
        status = deferred()
        OUT.flush()
        # The connector's threads (its ROUTER, the REQ pool's executor) never end: leave without waiting for them.
        os._exit(status)
    a = configure(argv)
    try:
        w = Worker(a)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        reply({"ok": False, "error": f"start: {type(e).__name__}: {e}"})
        return 3
    reply({"ok": True, "hello": a.conn})
    serve(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
