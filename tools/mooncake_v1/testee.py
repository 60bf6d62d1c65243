#!/usr/bin/env python3
"""Mooncake's own vLLM connector (`mooncake.mooncake_connector_v1`, pip mooncake-transfer-engine-non-cuda) as a
testee of conformance/TESTEE.md, prefiller and decoder roles, generation-1 wire (vllm-0.13.0..0.15.1).

What runs is the package's own `MooncakeConnectorWorker` — its ROUTER listener, sender workers, transfer planning,
REQ pulls and `get_finished` — on vLLM 0.12.0's API, with the real Mooncake Transfer Engine over TCP
(`VLLM_MOONCAKE_PROTOCOL=tcp`) moving the bytes between CPU tensors. Faked are only the lookups a worker makes of its
GPU and torch.distributed surroundings, with tools/record's fakes (`peer.install_lookup_fakes`: TP rank and group,
`get_ip`, the attention backend) and its configuration builder (`compat.make_vllm_config`). What the scheduler would
hand the worker is built with the connector's own `MooncakeConnectorMetadata.add_new_req`, as its
`MooncakeConnectorScheduler` does.

The KV caches are CPU tensors placed exactly at the `kv_caches_base_addr` the runner gives (anonymous memory mapped
at that address), so what the connector advertises and what the runner reads back are the runner's layout. Each
region is one layer's tensor in the shape vLLM 0.12.0's attention backend declares (`--attn-backend`):

* `FLASHINFER` (default): `(num_blocks, 2, block_size, heads, head_size)`, one region per layer — the layout of the
  bundled generation-1 recordings (vLLM 0.13.0's topology does not split it; Mooncake's connector does not split a
  FlashInfer cache);
* `FLASH_ATTN`: `(2, num_blocks, block_size, heads, head_size)`; the connector registers K and V of each layer as two
  regions of half the block length (vLLM 0.12.0 wheel, vllm/v1/attention/backends/flash_attn.py);
* `TRITON_ATTN`: `(num_blocks, 2, block_size, heads, head_size)` (vllm/v1/attention/backends/triton_attn.py), which
  the connector splits along its first axis like FlashAttention's (README.md, "Interop: Mooncake's own connector").

Process model: one role per process; the hello is written at once, while torch, vLLM and the connector import on a
thread (about 12 s); `start` waits for it. Logs go to standard error; standard output carries only protocol lines.

    PYTHONPATH=<vllm-0.12.0 overlay>:<engine package> python tools/mooncake_v1/testee.py [--attn-backend NAME]
"""

import argparse
import asyncio
import ctypes
import json
import os
import socket
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "record"))

REVISION = "vllm-0.13.0..0.15.1"
ROLES = ["prefiller", "decoder"]
MODULE = "mooncake.mooncake_connector_v1"
BLOCK_SIZE, HEAD_SIZE = 16, 8  # tokens per block and head size of the bundled scenarios (conformance/scenarios.toml)
POLL_S = 0.02
HELLO_WAIT_S = 25  # an engine step: how often get_finished is read, as vLLM's engine reads it every step

# The KV cache shape of one layer per attention backend of vLLM 0.12.0 (its get_kv_cache_shape).
SHAPES = {
    "FLASHINFER": lambda n, h: (n, 2, BLOCK_SIZE, h, HEAD_SIZE),
    "FLASH_ATTN": lambda n, h: (2, n, BLOCK_SIZE, h, HEAD_SIZE),
    "TRITON_ATTN": lambda n, h: (n, 2, BLOCK_SIZE, h, HEAD_SIZE),
}


LOG = __import__("logging").getLogger("testee")


class Unsupported(Exception):
    pass


def versions():
    import importlib.metadata as md

    out = {}
    for dist in ("vllm", "mooncake-transfer-engine-non-cuda"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


# ----------------------------------------------------------------------------------------------------------------
# Import on a thread, so the hello is not late


class Importer:
    def __init__(self):
        self.mod, self.error = None, None
        self.done = threading.Event()
        threading.Thread(target=self.run, name="import", daemon=True).start()

    def run(self):
        try:
            os.environ.setdefault("VLLM_MOONCAKE_PROTOCOL", "tcp")
            import importlib

            import compat

            compat.before_vllm_import()
            self.mod = importlib.import_module(MODULE)
            import peer  # noqa: F401  (tools/record: the lookup fakes; it imports vLLM's parallel state)
            import taps

            taps.install_zmq_taps()  # observes pyzmq's send/recv (for `record_wire`); changes nothing
        except BaseException as e:  # noqa: BLE001
            traceback.print_exc()
            self.error = e
        self.done.set()

    def get(self, timeout=300):
        if not self.done.wait(timeout):
            raise RuntimeError(f"importing {MODULE} took over {timeout} s")
        if self.error is not None:
            raise RuntimeError(f"cannot import {MODULE}: {type(self.error).__name__}: {self.error}")
        return self.mod


# ----------------------------------------------------------------------------------------------------------------
# Memory at the runner's addresses


class Regions:
    """Anonymous memory mapped at each `kv_caches_base_addr` of the layout (MAP_FIXED_NOREPLACE: never over
    something already mapped), `num_blocks × block_len` bytes each, zeroed."""

    PROT_RW, FLAGS = 0x1 | 0x2, 0x02 | 0x20 | 0x100000  # MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE

    def __init__(self, layout):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mmap.restype = ctypes.c_void_p
        self.libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_long]
        self.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.num_blocks = int(layout["num_blocks"])
        self.bases = [int(a) for a in layout["kv_caches_base_addr"]]
        self.block_lens = [int(b) for b in layout["block_lens"]]
        if len(self.block_lens) != len(self.bases) or not self.bases:
            raise ValueError("layout: kv_caches_base_addr and block_lens must be parallel and not empty")
        page = os.sysconf("SC_PAGE_SIZE")
        self.maps = []
        for base, bl in zip(self.bases, self.block_lens):
            size = self.num_blocks * bl
            length = (size + page - 1) // page * page
            if base % page:
                raise ValueError(f"layout: region at {base:#x} is not page-aligned")
            got = self.libc.mmap(base, length, self.PROT_RW, self.FLAGS, -1, 0)
            if got is None or got == ctypes.c_void_p(-1).value or got != base:
                if got not in (None, ctypes.c_void_p(-1).value):
                    self.libc.munmap(got, length)
                raise OSError(f"cannot map {length} bytes at {base:#x} (errno {ctypes.get_errno()})")
            self.maps.append((base, length, size))

    def tensor(self, i):
        import torch

        base, _, size = self.maps[i]
        buf = (ctypes.c_uint8 * size).from_address(base)
        t = torch.frombuffer(buf, dtype=torch.uint8)
        assert t.data_ptr() == base
        return t

    def fill_provenance(self):
        """conformance/TESTEE.md, "The provenance pattern": region i, block b, word k (standard library only, so the
        self-check needs no numpy)."""
        import array

        for i, (base, _, size) in enumerate(self.maps):
            bl = self.block_lens[i]
            if bl % 8:
                raise ValueError(f"region {i}: block length {bl} is not a multiple of 8")
            for b in range(self.num_blocks):
                head = (0x4D43 << 48) | (i << 36) | (b << 16)
                words = array.array("Q", (head | k for k in range(bl // 8)))
                if sys.byteorder != "little":
                    words.byteswap()
                ctypes.memmove(base + b * bl, words.tobytes(), bl)

    def read(self, addr, n):
        for base, _, size in self.maps:
            if base <= addr and addr + n <= base + size:
                return ctypes.string_at(addr, n).hex()
        raise ValueError(f"{addr:#x}+{n} is outside every registered region")


# ----------------------------------------------------------------------------------------------------------------
# The transfer engine, observed


class EngineTap:
    """The real TransferEngine with its writes counted (`status.writes`) and `fail_next_transfer` applied: while
    failures remain, a write returns the given code without reaching the engine."""

    def __init__(self, real):
        self._real = real
        self._lock = threading.Lock()
        self.writes, self.fail_left, self.fail_ret = [], 0, -1

    def batch_transfer_sync_write(self, session, src, dst, lengths):
        with self._lock:
            failing = self.fail_left > 0
            if failing:
                self.fail_left -= 1
        ret = self.fail_ret if failing else self._real.batch_transfer_sync_write(session, src, dst, lengths)
        with self._lock:
            self.writes.append({"session": session, "descriptors": len(src), "bytes": int(sum(lengths)),
                                "ret": int(ret)})
        return ret

    def __getattr__(self, name):
        return getattr(self._real, name)


# ----------------------------------------------------------------------------------------------------------------
# A worker of either role


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Role:
    def __init__(self, importer, role, config, backend_name):
        import compat
        import fakes
        import peer

        self.mc = mc = importer.get()
        self.role = role
        self.record_wire = bool(config.get("record_wire"))
        self.tp_rank, self.tp_size = int(config.get("tp_rank", 0)), int(config.get("tp_size", 1))
        if config.get("bootstrap"):
            raise Unsupported("unsupported: a bootstrap server (generation 1 has none)")
        if role == "decoder" and config.get("te_port"):
            raise Unsupported("unsupported: te_port (the connector lets its engine pick its RPC port)")
        self.regions = Regions(config["layout"])
        bl = self.regions.block_lens[0]
        if any(b != bl for b in self.regions.block_lens):
            raise ValueError("layout: the connector registers regions of one block length only")
        per_head = 2 * BLOCK_SIZE * HEAD_SIZE * 2  # K and V, fp16
        if bl % per_head:
            raise ValueError(f"layout: block length {bl} is not a whole number of {per_head}-byte heads")
        heads = bl // per_head
        n = self.regions.num_blocks
        model = {"block_size": BLOCK_SIZE, "total_num_kv_heads": heads * self.tp_size, "head_size": HEAD_SIZE,
                 "num_blocks": n, "num_layers": len(self.regions.bases)}
        shape = SHAPES[backend_name]

        class Backend(fakes.make_fake_backend(lambda nb, bs, h, d: shape(nb, h))):
            @staticmethod
            def get_name():
                return backend_name

        peer.install_lookup_fakes(mc, self.tp_rank, self.tp_size, Backend)
        # What VLLM_MOONCAKE_* would set in the environment; the module reads them once, at import.
        if config.get("abort_timeout_s") is not None:
            mc.VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT = int(round(float(config["abort_timeout_s"])))
        self.endpoint = None
        if role == "prefiller":
            bind = str(config.get("bind") or "tcp://127.0.0.1:*")
            port_text = bind.rsplit(":", 1)[-1]
            port = free_port() if port_text in ("*", "0") else int(port_text)
            mc.VLLM_MOONCAKE_SIDE_CHANNEL_PORT = port - self.tp_rank
            self.endpoint = f"tcp://127.0.0.1:{port}"
        a = {"kv_role": "kv_producer" if role == "prefiller" else "kv_consumer",
             "engine_id": str(config.get("engine_id") or f"mooncake-v1-{role}"), "tp_rank": self.tp_rank,
             "tp_size": self.tp_size}
        self.vllm_config = compat.make_vllm_config(mc, a, model, HEAD_SIZE)
        # As the package's usage says: --kv-transfer-config '{"kv_connector": "MooncakeConnector", ...,
        # "kv_connector_module_path": "mooncake.mooncake_connector_v1"}'.
        self.vllm_config.kv_transfer_config.kv_connector_module_path = MODULE
        with compat.current_vllm_config(self.vllm_config):
            self.w = mc.MooncakeConnectorWorker(self.vllm_config, a["engine_id"])
        self.tap = EngineTap(self.w.engine)
        self.w.engine = self.tap
        self.caches = {}
        for i in range(len(self.regions.bases)):
            t = self.regions.tensor(i).view(__import__("torch").float16).view(shape(n, heads))
            self.caches[f"model.layers.{i}.self_attn"] = t
        if role == "prefiller":
            self.regions.fill_provenance()
        with compat.current_vllm_config(self.vllm_config):
            self.w.register_kv_caches(self.caches)
        self.lock = threading.RLock()
        self.freed = []  # prefiller: finished_sending entries
        self.finished, self.pulled = [], []  # decoder
        self.stopping = False
        threading.Thread(target=self.poll_loop, name="engine-step", daemon=True).start()

    def start_answer(self):
        if self.role == "prefiller":
            return {"endpoint": self.endpoint}
        return {"session": f"{self.w.hostname}:{self.w.rpc_port}"}

    # -- the engine's step: get_finished, as vLLM's engine reads it every step ---------------------------------

    def poll_loop(self):
        while not self.stopping:
            try:
                self.step()
            except Exception:  # noqa: BLE001
                traceback.print_exc()
            time.sleep(POLL_S)

    def step(self):
        w = self.w
        with self.lock:
            if self.role == "prefiller":

                async def expired_now():
                    now = time.perf_counter()
                    return {r for r, m in w.reqs_need_send.items() if m.expire_time < now}

                # Requests whose expiry get_finished is about to act on (read on the sender loop, where it acts).
                expired = asyncio.run_coroutine_threadsafe(expired_now(), w.sender_loop).result(10)
                sending, _ = w.get_finished()
                for r in sorted(sending or ()):
                    self.freed.append({"p_req_id": r, "transfer_id": r, "expired": r in expired})
            else:
                _, recving = w.get_finished()
                self.finished.extend(r for r in sorted(recving or ()) if r not in self.finished)

    def on_loop(self, loop, fn):
        async def run():
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(10)

    # -- commands ----------------------------------------------------------------------------------------------

    def handle(self, cmd):
        name = cmd.get("cmd")
        if name == "status":
            self.step()
            return self.prefiller_status() if self.role == "prefiller" else self.decoder_status()
        if self.role == "prefiller" and name in ("allocate", "ready"):
            blocks = [b for g in (cmd.get("blocks") or []) for b in g] if name == "ready" else []
            self.send_reqs(str(cmd["p_req_id"]), blocks)
            return {}
        if self.role == "prefiller" and name == "abort":
            # vLLM's scheduler tells the worker nothing when a request ends without a transfer
            # (request_finished returns (False, None) unless it finished length-capped).
            return {}
        if self.role == "prefiller" and name == "fail_next_transfer":
            with self.tap._lock:
                self.tap.fail_left, self.tap.fail_ret = int(cmd.get("count", 1)), int(cmd.get("ret", -1))
            return {}
        if self.role == "decoder" and name == "pull":
            self.pull(cmd.get("requests") or [])
            return {}
        if self.role == "decoder" and name == "announce":
            return {}  # no KV leases in this connector
        if self.role == "decoder" and name == "read_memory":
            return {"hex": self.regions.read(int(cmd["addr"]), int(cmd["len"]))}
        raise Unsupported(f"unsupported: {name}")

    def send_reqs(self, req_id, blocks):
        """The scheduler's metadata for a prefill request: allocated (no blocks: update_state_after_alloc), then
        finished with its blocks (request_finished)."""
        meta = self.mc.MooncakeConnectorMetadata()
        meta.add_new_req(request_id=req_id, local_block_ids=blocks, kv_transfer_params={}, load_remote_cache=False)
        self.w.start_load_kv(meta)
        self.on_loop(self.w.sender_loop, lambda: None)  # record_send_reqs has run

    def pull(self, requests):
        """One scheduler step of pulls: kv_transfer_params as a generation-1 prefiller hands them to the router
        (remote_host, remote_port; a remote_request_id only when the runner names a transfer other than the
        request, as Mooncake's own prefiller would)."""
        meta = self.mc.MooncakeConnectorMetadata()
        for r in requests:
            d = str(r["d_req_id"])
            params = {"do_remote_prefill": True, "do_remote_decode": False, "remote_host": r.get("remote_host"),
                      "remote_port": int(r.get("remote_port"))}
            if r.get("transfer_id") and r["transfer_id"] != d:
                params["remote_request_id"] = r["transfer_id"]
            blocks = [b for g in (r.get("blocks") or []) for b in g]
            meta.add_new_req(request_id=d, local_block_ids=blocks, kv_transfer_params=params)
            with self.lock:
                self.pulled.append(d)
        self.w.start_load_kv(meta)

    def prefiller_status(self):
        w = self.w

        def tables():
            q = w.sender_worker_queue
            # pulls queued or being served (asyncio.Queue counts both until task_done)
            return len(w.reqs_need_send), getattr(q, "_unfinished_tasks", q.qsize())

        tracked, open_ex = self.on_loop(w.sender_loop, tables)
        with self.lock, self.tap._lock:
            return {"tracked_transfers": tracked, "open_exchanges": open_ex, "finished_sending": list(self.freed),
                    "writes": list(self.tap.writes), **self.wire()}

    def decoder_status(self):
        w = self.w

        def exchanges():
            live = []
            for t in asyncio.all_tasks(w.receiver_loop):
                coro = t.get_coro()
                if getattr(coro, "__name__", "") == "receive_kv" and not t.done():
                    frame = getattr(coro, "cr_frame", None)
                    blocks = frame.f_locals.get("req_blocks", []) if frame is not None else []
                    live.append([str(b[0]) for b in blocks])
            return live

        live = self.on_loop(w.receiver_loop, exchanges)
        in_flight = {d for ids in live for d in ids}
        with self.lock:
            unsettled = [{"d_req_id": d, "reason": "its pull ended without trans_done (logged, never reported)"}
                         for d in self.pulled if d not in self.finished and d not in in_flight]
            return {"finished": list(self.finished), "failed": [], "unsettled": unsettled,
                    "pending_pulls": len([d for d in self.pulled if d in in_flight]), "open_exchanges": len(live),
                    **self.wire()}

    def wire(self):
        """`record_wire`: every ZeroMQ message sent and received on the connector's tcp:// sockets, in order
        (tools/record/taps.py observes them)."""
        if not self.record_wire:
            return {}
        import taps

        with self.lock:
            self.events = getattr(self, "events", []) + [e for e in taps.drain() if e.get("kind") == "zmq"]
            return {"wire": [{"dir": "out" if e["dir"] == "send" else "in", "frames": e["frames"],
                              **({} if e["bound"] else {"endpoint": e["endpoint"]})} for e in self.events]}

    def stop(self):
        self.stopping = True
        t = threading.Thread(target=self.w.shutdown, daemon=True)
        t.start()
        t.join(3)


# ----------------------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attn-backend", choices=sorted(SHAPES), default="FLASHINFER")
    args = ap.parse_args()
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever vLLM, torch or the engine print goes to standard error

    def send(obj):
        LOG.debug("-> %s", json.dumps(obj)[:2000])
        out.write(json.dumps(obj, separators=(",", ":")) + "\n")
        out.flush()

    level = os.environ.get("MOONCAKE_V1_LOG", "").upper()
    if level:  # the connector logs under its module's name, outside vLLM's "vllm" logger
        import logging

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        for name in ("mooncake", "testee"):
            logging.getLogger(name).addHandler(handler)
            logging.getLogger(name).setLevel(level)
    v = versions()
    importer = Importer()
    # The runner waits 30 s for the hello and 30 s for each answer: most of the import (12-20 s, more on a loaded
    # machine) happens before the hello, the rest before `start` answers.
    importer.done.wait(HELLO_WAIT_S)
    send({"hello": "mooncake-testee", "protocol": 1,
          "name": f"mooncake_connector_v1 (mooncake-transfer-engine-non-cuda {v['mooncake-transfer-engine-non-cuda']}"
                  f", vLLM {v['vllm']}, {args.attn_backend})",
          "revisions": [REVISION], "roles": ROLES})
    role = None
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                cmd = json.loads(line)
                if not isinstance(cmd, dict):
                    raise ValueError("a command is a JSON object")
            except ValueError as e:
                send({"ok": False, "error": f"bad command line: {e}"})
                continue
            name = cmd.get("cmd")
            LOG.debug("<- %s", line.strip()[:2000])
            if name == "stop":
                send({"ok": True})
                break
            try:
                if name == "start":
                    if role is not None:
                        raise RuntimeError("a role is already started")
                    if cmd.get("role") not in ROLES:
                        raise Unsupported(f"unsupported: role {cmd.get('role')}")
                    if cmd.get("revision") not in (None, REVISION):
                        raise Unsupported(f"unsupported: revision {cmd.get('revision')}")
                    role = Role(importer, cmd["role"], cmd.get("config") or {}, args.attn_backend)
                    answer = role.start_answer()
                elif role is None:
                    raise Unsupported(f"unsupported: {name}" if name not in ("status", "pull", "allocate", "ready")
                                      else f"no role started for {name}")
                else:
                    answer = role.handle(cmd)
                send({"ok": True, **answer})
            except Unsupported as e:
                send({"ok": False, "error": str(e)})
            except Exception as e:  # noqa: BLE001 - every failure is an answer
                traceback.print_exc()
                send({"ok": False, "error": f"{type(e).__name__}: {e}"})
    finally:
        if role is not None:
            role.stop()
        out.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
