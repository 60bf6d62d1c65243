"""Recorder processes: vLLM's bootstrap server, or one MooncakeConnectorWorker (prefiller or decoder).

`python peer.py zygote` imports vLLM once (with the fakes in place) and then forks one process per peer on request,
so that a scenario's four or five processes do not each spend ~12 s importing torch and vLLM. Each forked peer is
a separate process in a session of its own; the zygote stays single-threaded and never runs vLLM code itself.

A peer is driven by the coordinator (record.py) over two FIFOs, one JSON object a line:
    -> {"id": N, "cmd": "...", ...}        <- {"id": N, "ok": true, "result": ...} | {"id": N, "ok": false, "error": "..."}
Its standard output and error go to its log file, so nothing vLLM prints can corrupt the command channel.

Zygote commands (stdin/stdout): {"cmd": "spawn", "role", "conn", "cmd_fifo", "reply_fifo", "log"} -> {"pid": N};
{"cmd": "quit"}.
"""

import os
import sys

_PROTO = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)

import asyncio  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

import taps  # noqa: E402
import fakes  # noqa: E402
import compat  # noqa: E402
import scheduler  # noqa: E402

ROLE, CONN = None, None
_write_lock = threading.Lock()


def reply(obj):
    line = json.dumps(obj)
    with _write_lock:
        _PROTO.write(line + "\n")
        _PROTO.flush()


def exc_text(e):
    return f"{type(e).__name__}: {e}"


# ----------------------------------------------------------------------------------------------------------------
# vLLM import, with the fakes in place


GEN2_MODULE = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector"
GEN1_MODULE = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake_connector"

# Which connector implementation runs (record.py --impl): "vllm", vLLM's own module of the release, or "mooncake",
# Mooncake's own connector as pip mooncake-transfer-engine-non-cuda ships it (generation-1 wire, on vLLM 0.10-0.12).
IMPL = os.environ.get("MOONCAKE_RECORD_IMPL", "vllm")
MOONCAKE_MODULE = "mooncake.mooncake_connector_v1"  # also its kv_connector_module_path, as the package's usage says
MOONCAKE_DIST = "mooncake-transfer-engine-non-cuda"
# It decides by the attention backend's name whether to register K and V as regions of their own; FlashInfer's
# cache is one region per layer in the recorder's layout (num_blocks, 2, block_size, heads, head_size).
MOONCAKE_BACKEND_NAME = "FLASHINFER"
# Settings it reads from the environment once, when the module is imported (in the zygote, before any scenario's
# ports are known): a forked worker sets them on the module from its own environment.
MOONCAKE_IMPORT_TIME_ENV = ("VLLM_MOONCAKE_SIDE_CHANNEL_PORT", "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT",
                            "VLLM_MOONCAKE_SENDER_WORKERS")


_CONNECTOR = []


def import_connector():
    """(generation, connector module), imported once per process with the fake Mooncake module in place."""
    if not _CONNECTOR:
        _CONNECTOR.append(_import_connector())
    return _CONNECTOR[0]


def _import_connector():
    import importlib
    import importlib.util

    # tools/record/interop.py runs the real engine (pip mooncake-transfer-engine-non-cuda, TCP transport).
    if IMPL == "mooncake":  # the engine module inside the real package, where Mooncake's connector imports it
        if not os.environ.get("MOONCAKE_REAL_ENGINE"):
            fakes.install_fake_engine_in_package("mooncake")
        # Its logger is named after its module, outside vLLM's "vllm" logger: into the peer's log at vLLM's level.
        import logging

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s [%(name)s:%(lineno)d] %(message)s"))
        logging.getLogger("mooncake").addHandler(handler)
        logging.getLogger("mooncake").setLevel(os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper())
        compat.before_vllm_import()
        return 1, importlib.import_module(MOONCAKE_MODULE)
    if not os.environ.get("MOONCAKE_REAL_ENGINE"):
        fakes.install_fake_mooncake()
    compat.before_vllm_import()
    if importlib.util.find_spec("vllm.distributed.kv_transfer.kv_connector.v1.mooncake") is not None:
        return 2, importlib.import_module(GEN2_MODULE)
    return 1, importlib.import_module(GEN1_MODULE)


def replace_everywhere(originals, replacement):
    """Point every loaded vLLM module's reference to one of `originals` at `replacement` (a lookup swap)."""
    for mod in list(sys.modules.values()):
        name = getattr(mod, "__name__", "") or ""
        if not name.startswith("vllm"):
            continue
        d = getattr(mod, "__dict__", None)
        if not d:
            continue
        for attr, value in list(d.items()):
            if any(value is o for o in originals):
                setattr(mod, attr, replacement)


def install_lookup_fakes(mod, tp_rank, tp_size, backend):
    import torch

    import vllm.distributed.parallel_state as ps

    def fake_rank():
        return tp_rank

    def fake_world():
        return tp_size

    def fake_pp_group():
        return fakes.FakeGroup(0, 1)

    def fake_tp_group():
        return fakes.FakeGroup(tp_rank, tp_size)

    for name, fake in (
        ("get_tensor_model_parallel_rank", fake_rank),
        ("get_tensor_model_parallel_world_size", fake_world),
        ("get_pp_group", fake_pp_group),
        ("get_tp_group", fake_tp_group),
    ):
        orig = getattr(ps, name, None)
        if orig is not None:
            replace_everywhere([orig], fake)
        if hasattr(mod, name):
            setattr(mod, name, fake)
    if hasattr(ps, "is_local_first_rank"):
        replace_everywhere([ps.is_local_first_rank], lambda: tp_rank == 0)

    import vllm.utils.network_utils as nu  # exists in every release with the connector

    replace_everywhere([nu.get_ip], lambda: "127.0.0.1")
    if hasattr(mod, "get_ip"):
        mod.get_ip = lambda: "127.0.0.1"

    if hasattr(mod, "current_platform"):
        mod.current_platform = fakes.PlatformProxy(mod.current_platform)
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "current_device_index"):
        acc.current_device_index = lambda: 0

    if hasattr(mod, "get_current_attn_backends"):
        mod.get_current_attn_backends = lambda *a, **k: [backend]
    if hasattr(mod, "get_current_attn_backend"):
        mod.get_current_attn_backend = lambda *a, **k: backend
    if hasattr(mod, "get_attn_backend"):  # 0.13.0 selects the backend itself
        mod.get_attn_backend = lambda *a, **k: backend

    # The bootstrap server runs in a process of its own on 127.0.0.1. Releases that read
    # `bootstrap_server_address` from the connector's extra config skip starting one by themselves; for the
    # others the rank-0 lookup that decides it is answered "no".
    src = inspect.getsource(mod)
    if "bootstrap_server_address" not in src and hasattr(mod, "should_launch_bootstrap_server"):
        mod.should_launch_bootstrap_server = lambda *a, **k: False


# ----------------------------------------------------------------------------------------------------------------
# Worker


class Worker:
    def __init__(self, args):
        self.args = args
        self.gen, self.mod = import_connector()
        a = args
        fakes.FakeTransferEngine.rpc_port = a["rpc_port"]
        self.tp_rank, self.tp_size = a["tp_rank"], a["tp_size"]
        model = a["model"]
        self.block_size = model["block_size"]
        self.total_heads = model["total_num_kv_heads"]
        self.head_size = a.get("head_size") or model["head_size"]
        self.heads = max(1, self.total_heads // self.tp_size)
        self.num_blocks = model["num_blocks"]
        self.layout = compat.kv_layout(self.mod)
        backend = fakes.make_fake_backend(self.layout.backend_shape,
                                          MOONCAKE_BACKEND_NAME if IMPL == "mooncake" else "CUSTOM")
        backend.block_size = self.block_size
        install_lookup_fakes(self.mod, self.tp_rank, self.tp_size, backend)
        if IMPL == "mooncake":
            compat.set_import_time_env(self.mod, MOONCAKE_IMPORT_TIME_ENV, os.environ)
        self.per_group_blocks = compat.per_group_blocks(self.mod, self.gen)

        groups = a.get("kv_groups") or [{"kind": "full", "layers": list(range(model["num_layers"]))}]
        self.groups = groups
        vllm_config = compat.make_vllm_config(self.mod, a, model, self.head_size)
        if IMPL == "mooncake":
            vllm_config.kv_transfer_config.kv_connector_module_path = MOONCAKE_MODULE
        self.kv_cache_config = compat.make_kv_cache_config(self.mod, model, groups, self.heads, self.head_size)
        compat.engine_core_setup(vllm_config, backend, self.kv_cache_config)
        kw = {}
        params = inspect.signature(self.mod.MooncakeConnectorWorker.__init__).parameters
        if "kv_cache_config" in params:
            kw["kv_cache_config"] = self.kv_cache_config
        self.vllm_config = vllm_config
        with compat.current_vllm_config(vllm_config):
            self.w = self.mod.MooncakeConnectorWorker(vllm_config, a["engine_id"], **kw)
        self.kv_caches = self.make_kv_caches()
        # The decoder scheduler's lease bookkeeping (tools/record/scheduler.py), where the scenario gives the decoder
        # a kv_lease_duration; None otherwise.
        self.leases = None
        self.announced = set()
        if a["kv_role"] == "kv_consumer" and a.get("kv_lease_s") is not None:
            why = scheduler.supported(self.mod)
            if why is not None:
                raise RuntimeError(f"the scenario gives the decoder a kv_lease_duration, but {why}")
            self.leases = scheduler.DecoderLeases(self.mod, vllm_config.kv_transfer_config)

    def make_kv_caches(self):
        import torch

        caches = {}
        for g in self.groups:
            for layer in g["layers"]:
                shape = self.layout.tensor_shape(self.num_blocks, self.block_size, self.heads, self.head_size)
                caches[f"model.layers.{layer}.self_attn"] = torch.zeros(shape, dtype=torch.float16)
        return caches

    # -- interop (tools/record/interop.py): the KV caches hold the provenance pattern of conformance/TESTEE.md --

    def _words(self, name):
        t = self.kv_caches[name]
        return t.view(-1).view(__import__("torch").int64).view(self.num_blocks, -1)

    def fill_provenance(self):
        """Region i (registration order) block b: 8-byte words 0x4d43 << 48 | i << 36 | b << 16 | word index."""
        import torch

        for i, name in enumerate(self.kv_caches):
            w = self._words(name)
            k = torch.arange(w.shape[1], dtype=torch.int64)
            for b in range(self.num_blocks):
                w[b] = (0x4D43 << 48) | (i << 36) | (b << 16) | k
        return None

    def check_blocks(self, pairs):
        """`pairs`: [region, local block, source block, mod, add]: word k must be the source block's provenance
        word (k % mod) + add (heterogeneous TP: a block holds slices of several ranks' blocks, or one slice of a
        larger one). Returns the problems (empty: every word of every pulled block arrived)."""
        import torch

        names = list(self.kv_caches)
        problems = []
        for i, b, src, mod, add in pairs:
            w = self._words(names[i])[b]
            k = torch.arange(w.shape[0], dtype=torch.int64) % mod + add
            want = (0x4D43 << 48) | (i << 36) | (src << 16) | k
            bad = (w != want).nonzero()
            if len(bad):
                k = int(bad[0][0])
                problems.append(f"region {i} block {b} word {k}: {int(w[k]) & (2**64 - 1):#x}, expected {int(want[k]):#x}")
        return problems

    def register(self, timeout):
        """register_kv_caches, bounded: some releases wait for their listener without a timeout, and never return
        when its bootstrap registration failed. The call then stays blocked on its own thread."""
        done, failure = threading.Event(), []

        def run():
            try:
                with compat.current_vllm_config(self.vllm_config):
                    self.w.register_kv_caches(self.kv_caches)
            except BaseException as e:  # noqa: BLE001
                traceback.print_exc(file=sys.stderr)
                failure.append(e)
            done.set()

        threading.Thread(target=run, name="recorder-register", daemon=True).start()
        if not done.wait(timeout):
            raise TimeoutError(f"register_kv_caches did not return within {timeout:g} s")
        if failure:
            raise failure[0]
        return {"side_channel_port": getattr(self.w, "side_channel_port", None)}

    # -- metadata as the scheduler would build it -----------------------------------------------------------

    def _blocks(self, blocks):
        return [list(b) for b in blocks] if self.per_group_blocks else list(blocks[0] if blocks else [])

    def _barrier(self, loop):
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(timeout=10)

    def send_reqs(self, reqs):
        """Prefiller: `reqs` is a list of [p_req_id, transfer_id, blocks]; empty blocks is the allocation step,
        non-empty the request_finished step."""
        meta = self.mod.MooncakeConnectorMetadata()
        for p_req_id, transfer_id, blocks in reqs:
            if self.gen == 1:
                meta.add_new_req(request_id=p_req_id, local_block_ids=self._blocks(blocks) if blocks else [],
                                 kv_transfer_params={}, load_remote_cache=False)
            else:
                meta.add_new_req(request_id=p_req_id,
                                 local_block_ids=self._blocks(blocks) if blocks else [],
                                 kv_transfer_params={"transfer_id": transfer_id}, load_remote_cache=False)
        self.w.start_load_kv(meta)
        # Generation 2 and 0.14.0+ record the requests on the sender loop; wait until it has run them. (0.13.0
        # records them synchronously under a lock.)
        if getattr(self.w, "sender_loop", None) is not None:
            self._barrier(self.w.sender_loop)
        return None

    def _pull_params(self, d_req_id, transfer_id, bootstrap_addr, remote_engine_id, side_channel_port):
        """The request's kv_transfer_params as the decoder's scheduler gets them from the router."""
        if self.gen == 1:
            params = {"do_remote_prefill": True, "do_remote_decode": False,
                      "remote_host": "127.0.0.1", "remote_port": side_channel_port}
            if IMPL == "mooncake":
                # Mooncake's prefiller also advertises its own request id; generation-1 scenarios register the
                # prefiller's request under the decoder's request id (record.py, p_req_id), so the two are equal.
                params["remote_request_id"] = d_req_id
            return params
        return {"do_remote_prefill": True, "do_remote_decode": False, "transfer_id": transfer_id,
                "remote_engine_id": remote_engine_id, "remote_bootstrap_addr": bootstrap_addr}

    def announce(self, reqs, bootstrap_addr, remote_engine_id, side_channel_port):
        """Decoder: the requests arrive at the decoder's scheduler (on_new_request) before they are scheduled for
        their pull. Only the lease bookkeeping sees them; without a decoder lease this does nothing."""
        for d_req_id, transfer_id, _blocks in reqs:
            self.announced.add(d_req_id)
            if self.leases is not None:
                self.leases.arrive(d_req_id, self._pull_params(d_req_id, transfer_id, bootstrap_addr,
                                                               remote_engine_id, side_channel_port))
        return None

    def pull(self, reqs, bootstrap_addr, remote_engine_id, side_channel_port):
        """Decoder: `reqs` is a list of [d_req_id, transfer_id, blocks]. One engine step that schedules them: the
        requests not announced arrive now, and the metadata also carries the lease renewals that are due."""
        meta = self.mod.MooncakeConnectorMetadata()
        for d_req_id, transfer_id, blocks in reqs:
            params = self._pull_params(d_req_id, transfer_id, bootstrap_addr, remote_engine_id, side_channel_port)
            if self.leases is not None:
                if d_req_id not in self.announced:
                    self.leases.arrive(d_req_id, params)
                self.leases.allocated(d_req_id, blocks)
            meta.add_new_req(request_id=d_req_id, local_block_ids=self._blocks(blocks), kv_transfer_params=params)
        if self.leases is not None:
            self.leases.add_heartbeats(meta)
        self.w.start_load_kv(meta)
        return None

    def poll(self):
        """One engine step as far as the connector sees it: on a decoder with leases, the scheduler's metadata with
        the renewals that are due goes to start_load_kv first; then what get_finished (or get_transfer_results,
        where the release has it) reports, which the lease bookkeeping reads as update_connector_output does."""
        beats = 0
        if self.leases is not None:
            meta = self.mod.MooncakeConnectorMetadata()
            if self.leases.add_heartbeats(meta):
                self.w.start_load_kv(meta)
                beats = 1
        out = self._finished()
        if self.leases is not None:
            self.leases.output(out["recving"])
        out["heartbeats"] = beats
        return out

    def _finished(self):
        if hasattr(self.w, "get_transfer_results"):
            r = self.w.get_transfer_results()
            return {"sending": sorted(r.finished_sending or ()), "recving": sorted(r.finished_recving or ()),
                    "failed": sorted(getattr(r, "failed_recving", None) or ())}
        sending, recving = self.w.get_finished()
        failed = []
        q = getattr(self.w, "_failed_recv_reqs", None)
        if q is not None:
            import queue

            while True:
                try:
                    failed.append(q.get_nowait())
                except queue.Empty:
                    break
        return {"sending": sorted(sending or ()), "recving": sorted(recving or ()), "failed": sorted(failed)}

    def load_errors(self):
        if hasattr(self.w, "get_block_ids_with_load_errors"):
            return sorted(self.w.get_block_ids_with_load_errors())
        return []

    def forget_layouts(self):
        """The prefiller's private cache of peers' layouts is cleared (simulated eviction)."""
        cleared = []
        for name in ("_layout_by_peer",):
            cache = getattr(self.w, name, None)
            if cache is not None:

                async def clear(c=cache):
                    c.clear()

                asyncio.run_coroutine_threadsafe(clear(), self.w.sender_loop).result(timeout=10)
                cleared.append(name)
        if not cleared:
            raise RuntimeError("this release keeps no per-peer layout cache")
        return cleared

    def query(self, bootstrap_addr):
        """Decoder: only the bootstrap query, through the worker's own client coroutine."""
        w = self.w
        pending = next((n for n in vars(w) if n.startswith("_pending_bootstrap_quer")), None)

        async def run():
            if pending is not None:
                getattr(w, pending)[bootstrap_addr] = asyncio.Event()
            await w._connect_to_prefiller_bootstrap(bootstrap_addr)

        asyncio.run_coroutine_threadsafe(run(), w.receiver_loop).result(timeout=30)
        return json.loads(json.dumps(w._remote_agents))

    def shutdown(self):
        try:
            self.w.shutdown()
        except Exception:
            pass


# ----------------------------------------------------------------------------------------------------------------
# Bootstrap server


class Bootstrap:
    def __init__(self, args):
        gen, mod = import_connector()
        if gen != 2:
            raise RuntimeError("generation 1 has no bootstrap server")
        import importlib

        utils = importlib.import_module("vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_utils")
        cls = utils.MooncakeBootstrapServer
        params = list(inspect.signature(cls.__init__).parameters)
        host, port = "127.0.0.1", args["port"]
        if "vllm_config" in params:
            self.server = cls(None, host, port)
        else:
            self.server = cls(host, port)
        # Server-side HTTP tap: the application uvicorn serves is wrapped, the routes are vLLM's.
        self.server.app = taps.HttpTap(self.server.app)
        self.server.start()

    def shutdown(self):
        try:
            self.server.shutdown()
        except Exception:
            pass


# ----------------------------------------------------------------------------------------------------------------


def serve(commands):
    """A peer's command loop."""
    taps.configure(CONN, ROLE if ROLE != "bootstrap" else None)
    obj = None
    reply({"ready": True, "pid": os.getpid()})
    for line in commands:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        mid, cmd = msg.get("id"), msg.get("cmd")
        try:
            if cmd == "init":
                obj = Bootstrap(msg["args"]) if ROLE == "bootstrap" else Worker(msg["args"])
                result = None
            elif cmd == "register":
                result = obj.register(msg.get("limit", 20))
            elif cmd == "fail_writes":
                fakes.FakeTransferEngine.fail_remaining = msg["count"]
                fakes.FakeTransferEngine.fail_ret = msg.get("ret", -1)
                result = None
            elif cmd == "fill_provenance":
                result = obj.fill_provenance()
            elif cmd == "check_blocks":
                result = obj.check_blocks(msg["pairs"])
            elif cmd == "send_reqs":
                result = obj.send_reqs(msg["reqs"])
            elif cmd in ("pull", "announce"):
                result = getattr(obj, cmd)(msg["reqs"], msg.get("bootstrap_addr"), msg.get("remote_engine_id"),
                                           msg.get("side_channel_port"))
            elif cmd == "poll":
                result = obj.poll()
            elif cmd == "load_errors":
                result = obj.load_errors()
            elif cmd == "forget_layouts":
                result = obj.forget_layouts()
            elif cmd == "query":
                result = obj.query(msg["bootstrap_addr"])
            elif cmd == "replies":
                result = taps.replies()
            elif cmd == "events":
                result = taps.drain()
            elif cmd == "quit":
                if obj is not None:
                    # vLLM's own shutdown; it can block (a context term with open sockets), so it is bounded.
                    t = threading.Thread(target=obj.shutdown, daemon=True)
                    t.start()
                    t.join(msg.get("timeout", 3))
                reply({"id": mid, "ok": True, "result": None})
                break
            else:
                raise ValueError(f"unknown command {cmd!r}")
            reply({"id": mid, "ok": True, "result": result})
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the coordinator
            traceback.print_exc(file=sys.stderr)
            reply({"id": mid, "ok": False, "error": exc_text(e)})
    _PROTO.flush()
    os._exit(0)


def become_peer(msg):
    """In the forked child: own session, own log, own command channel; then serve."""
    global _PROTO, ROLE, CONN
    os.setsid()
    # A peer never outlives the zygote (which exits when the coordinator's pipe closes): PR_SET_PDEATHSIG.
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:
            os._exit(1)
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, lambda *a: os._exit(143))
    log = os.open(msg["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    ROLE, CONN = msg["role"], msg["conn"]
    os.environ.update(msg.get("env") or {})
    commands = os.fdopen(os.open(msg["cmd_fifo"], os.O_RDONLY), "r")
    _PROTO = os.fdopen(os.open(msg["reply_fifo"], os.O_WRONLY), "w", buffering=1)
    serve(commands)


def zygote():
    """Import everything once, then fork peers on request. Stays single-threaded."""
    import threading as _t

    import importlib

    gen, mod = import_connector()
    if gen == 2:
        importlib.import_module("vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_utils")
    import vllm
    import vllm.config  # noqa: F401
    import vllm.v1.kv_cache_interface  # noqa: F401
    # The HTTP client stack's lazy imports (anyio loads its asyncio backend on the first request): imported here once,
    # or each decoder pays for them in its first bootstrap query — up to 2 s on a loaded machine (0.28.0/0.29.0),
    # which is a whole abort timeout. Nothing of vLLM's changes; the import only happens earlier.
    for name in ("httpx", "anyio._backends._asyncio"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass

    taps.install_zmq_taps()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked peers are reaped automatically
    ready = {"ready": True, "pid": os.getpid(), "vllm_version": vllm.__version__, "generation": gen,
             "threads": [t.name for t in _t.enumerate()]}
    if IMPL == "mooncake":
        import importlib.metadata

        ready.update(implementation="mooncake", implementation_version=importlib.metadata.version(MOONCAKE_DIST),
                     implementation_dist=MOONCAKE_DIST, implementation_source=MOONCAKE_MODULE.replace(".", "/") + ".py")
    reply(ready)
    stdin = os.fdopen(0, "rb", buffering=0)
    buf = b""
    while True:
        chunk = stdin.read(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            msg = json.loads(line)
            if msg.get("cmd") == "quit":
                os._exit(0)
            if msg.get("cmd") == "spawn":
                if _t.active_count() != 1:
                    reply({"error": "the zygote has threads; refusing to fork"})
                    continue
                pid = os.fork()
                if pid == 0:
                    try:
                        become_peer(msg)
                    finally:
                        os._exit(1)
                reply({"pid": pid})
    os._exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: os._exit(143))
    if sys.argv[1:] == ["zygote"]:
        zygote()
    else:
        # One peer started directly: python peer.py ROLE CONN (commands on stdin, answers on stdout).
        ROLE, CONN = sys.argv[1], sys.argv[2]
        import_connector()
        taps.install_zmq_taps()
        serve(sys.stdin)
