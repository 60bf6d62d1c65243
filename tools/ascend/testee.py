#!/usr/bin/env python3
"""vllm-ascend's own Mooncake pull connector (kv_p2p/mooncake_connector.py of a released sdist) as a testee of
conformance/TESTEE.md ("The pull family (vllm-ascend)"), prefiller and decoder roles, one release per process.

This process speaks the testee protocol (standard library only); the connector runs in a tools/ascend/worker.py
process (the recorder's worker: the release's own `MooncakeConnector` with torch_npu, the NPU device calls and the
parallel-state lookups faked, the real Mooncake Transfer Engine over TCP; tools/ascend/README.md), started at once
with --deferred so that its imports (~12 s of CPU) overlap the hello. The protocol maps onto the worker as:

* prefiller `start` → a prefiller worker with the layout's block count, block length and regions (region r is layer
  r/2's K or V), its caches holding the provenance pattern, its ROUTER on `bind`'s port (its handshake port);
  `ready` → the request finished prefill (`start_load_kv` with `reqs_in_batch` and `requests_to_send`, as the
  recorder's `send`); `status` → `get_finished`'s finished_sending (`expired` where the tracker's abort timeout had
  passed), `tracked_transfers` the sending thread's requests still waiting for a completion, `open_exchanges` the
  messages its ROUTER received and has not answered (from the tapped ZeroMQ traffic);
* decoder `start` → a decoder worker (zeroed caches); `pull` → `start_load_kv` with the kv_transfer_params a
  prefiller's `request_finished` returns (`transfer_id` as `remote_request_id`); `fail_next_transfer` → the next
  engine reads return `ret` without reading; `status` → `get_finished`'s finished_recving, `failed` from
  `get_block_ids_with_load_errors` (an entry per pulled request whose destination blocks it names), `reads` the
  engine batches, `pending_pulls` the receiving thread's requests not yet done, `open_exchanges` the REQ sends
  still without their reply; `read_memory` → the caches' bytes.

The worker's caches are its own CPU tensors, not at the layout's addresses: the prefiller's metadata carries their
real addresses (the runner treats them as live values), and `read_memory` maps the layout's `kv_caches_base_addr`
(region r) onto the worker's region r.

    PYTHONPATH=<vllm_ascend-R>:<vLLM overlay>:<engine> VLLM_PLUGINS= python tools/ascend/testee.py --release R
"""

import argparse
import ctypes
import json
import os
import signal
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import record  # noqa: E402  (the worker process, its options, the kv_transfer_params)
import worker  # noqa: E402  (its model constants; torch is imported only in the worker process)

REVISIONS = {"0.18.0": "vllm-ascend-0.18.0", "0.23.0.post1": "vllm-ascend-0.23.0.post1"}
ROLES = ["prefiller", "decoder"]
HEAD_SIZE = worker.MODEL["head_size"]
DTYPE_BYTES = 2  # fp16
IMPORT_WAIT_S = 25  # before the hello: the runner waits 30 s for it, then 30 s for `start`
ANSWER_S = 25  # for one worker command: the runner waits 30 s for an answer
LOG = lambda *a: print("[ascend-testee]", *a, file=sys.stderr, flush=True)  # noqa: E731


class Unsupported(Exception):
    pass


# ----------------------------------------------------------------------------------------------------------------
# The layout: the runner's regions, and the worker options that give the caches the same shape


class AddressMap:
    """The runner's regions (its `kv_caches_base_addr`, `num_blocks × block_len` bytes each) onto the worker's
    region of the same index."""

    def __init__(self, layout):
        self.bases = [int(a) for a in layout.get("kv_caches_base_addr") or []]
        self.block_lens = [int(b) for b in layout.get("block_lens") or []]
        self.num_blocks = int(layout.get("num_blocks") or 0)
        if not self.bases or len(self.bases) != len(self.block_lens) or self.num_blocks <= 0:
            raise ValueError("layout: kv_caches_base_addr and block_lens must be parallel and not empty, "
                             "num_blocks positive")

    def locate(self, addr, length):
        """(region, offset) of `length` bytes at the runner's address `addr`."""
        for r, (base, bl) in enumerate(zip(self.bases, self.block_lens)):
            if base <= addr and addr + length <= base + bl * self.num_blocks:
                return r, addr - base
        raise ValueError(f"{addr:#x}+{length} is outside every region of the layout")


def model_options(layout, block_size, tp_size):
    """worker.py's options for caches of the layout's shape: two regions (K, V) per layer, one block length, the
    heads it holds at the recordings' head size and fp16."""
    m = AddressMap(layout)
    regions, bl = len(m.bases), m.block_lens[0]
    if regions % 2:
        raise Unsupported(f"unsupported: {regions} regions (the connector registers K and V of each layer)")
    if any(b != bl for b in m.block_lens):
        raise Unsupported("unsupported: regions of different block lengths (no MLA here)")
    per_head = block_size * HEAD_SIZE * DTYPE_BYTES
    if bl % per_head:
        raise Unsupported(f"unsupported: block length {bl} is not a whole number of {per_head}-byte heads "
                          f"(block size {block_size}, head size {HEAD_SIZE}, fp16)")
    return ["--num-blocks", str(m.num_blocks), "--num-layers", str(regions // 2), "--kv-heads",
            str(bl // per_head * tp_size), "--block-size", str(block_size)]


# ----------------------------------------------------------------------------------------------------------------
# What the tapped traffic says


class Wire:
    """The worker's tapped events, accumulated: ZeroMQ messages (a bound socket's are the prefiller's ROUTER, a
    connected one's the decoder's REQs) and engine reads."""

    def __init__(self):
        self.counts = {("bound", "recv"): 0, ("bound", "send"): 0, ("req", "recv"): 0, ("req", "send"): 0}
        self.reads = []

    def add(self, events):
        for e in events:
            if e.get("kind") == "zmq":
                self.counts[("bound" if e.get("bound") else "req", e.get("dir"))] += 1
            elif e.get("kind") == "te_read":
                self.reads.append({"session": e["session"], "descriptors": int(e["n"]), "bytes": int(e["bytes"]),
                                   "ret": int(e["ret"])})

    def unanswered(self):
        """Messages the ROUTER received and did not answer."""
        return max(0, self.counts[("bound", "recv")] - self.counts[("bound", "send")])

    def awaiting(self):
        """REQ sends still waiting for their reply."""
        return max(0, self.counts[("req", "send")] - self.counts[("req", "recv")])


# ----------------------------------------------------------------------------------------------------------------
# The driver


class Driver:
    """One role of the testee protocol on one worker (`proc`: a record.WorkerProc started with --deferred, or a
    stand-in with `get(timeout, what)` and `cmd(what, timeout, **kw)`)."""

    def __init__(self, release, proc):
        self.release, self.revision, self.proc = release, REVISIONS[release], proc
        self.role, self.imported, self.map = None, None, None
        self.wire = Wire()
        self.freed, self.ready_ids = [], {}  # prefiller: finished_sending entries; transfer_id → p_req_id
        self.finished, self.pulled, self.errors = [], {}, set()  # decoder: finished, d_req_id → blocks, load errors

    def wait_imported(self, timeout):
        """The worker's first answer (its imports done), kept."""
        if self.imported is None:
            try:
                self.imported = self.proc.get(timeout, "import")
            except record.ReplyTimeout:
                raise RuntimeError(f"the worker is still importing its stack after {timeout} s") from None
            except record.RecordError as e:
                self.imported = {"ok": False, "error": str(e)}
        if not self.imported.get("ok", True):
            raise RuntimeError(f"the worker cannot import its stack: {self.imported.get('error')}")

    def handle(self, cmd):
        name = cmd.get("cmd")
        if name == "start":
            return self.start(cmd)
        if self.role is None:
            raise Unsupported(f"unsupported: {name}" if name not in ("status", "pull", "ready", "read_memory")
                              else f"no role started for {name}")
        if name == "status":
            return self.prefiller_status() if self.role == "prefiller" else self.decoder_status()
        if self.role == "prefiller" and name == "ready":
            return self.ready(cmd)
        if self.role == "prefiller" and name == "allocate":
            return {}  # vllm-ascend's prefiller worker hears of a request only once its prefill finished
        if self.role == "decoder" and name == "pull":
            return self.pull(cmd.get("requests") or [])
        if self.role == "decoder" and name == "fail_next_transfer":
            self.proc.cmd("fail_next_read", timeout=ANSWER_S, count=int(cmd.get("count", 1)),
                          ret=int(cmd.get("ret", -1)))
            return {}
        if self.role == "decoder" and name == "read_memory":
            region, offset = self.map.locate(int(cmd["addr"]), int(cmd["len"]))
            r = self.proc.cmd("read", timeout=ANSWER_S, region=region, offset=offset, len=int(cmd["len"]))
            return {"hex": r["hex"]}
        raise Unsupported(f"unsupported: {name}")

    def start(self, cmd):
        if self.role is not None:
            raise RuntimeError("a role is already started")
        role, config = cmd.get("role"), cmd.get("config") or {}
        if role not in ROLES:
            raise Unsupported(f"unsupported: role {role}")
        if cmd.get("revision") not in (None, self.revision):
            raise Unsupported(f"unsupported: revision {cmd.get('revision')} (this testee runs {self.revision})")
        for key in ("bootstrap", "kv_lease_duration_s"):
            if config.get(key):
                raise Unsupported(f"unsupported: {key} (not in the pull family)")
        argv, env, port = self.worker_options(role, config)
        self.map = AddressMap(config["layout"])
        self.wait_imported(ANSWER_S)
        self.proc.cmd("configure", timeout=ANSWER_S, argv=argv, env=env)
        reg = self.proc.cmd("register", timeout=ANSWER_S)
        self.role = role
        LOG(f"{role} started: handshake port {reg['handshake_port']}, engine RPC port {reg['te_rpc_port']}, "
            f"regions at {[hex(a) for a in flat(reg['kv_caches_base_addr'])]}")
        if role == "prefiller":
            return {"endpoint": f"tcp://127.0.0.1:{reg['handshake_port']}"}
        return {"session": f"127.0.0.1:{reg['te_rpc_port']}"}

    def worker_options(self, role, config):
        """worker.py's options and environment for `start`'s config, and its side-channel base port."""
        tp_rank, tp_size = int(config.get("tp_rank", 0)), int(config.get("tp_size", 1))
        block_size = int((config.get("model") or {}).get("block_size") or worker.MODEL["block_size"])
        if role == "prefiller":
            port_text = str(config.get("bind") or "tcp://127.0.0.1:*").rsplit(":", 1)[-1]
            handshake = record.free_port(1) if port_text in ("*", "0") else int(port_text)
            port, engine_id = handshake - tp_rank, str(config.get("engine_id") or "ascend-testee-prefill")
        else:
            port, engine_id = record.free_port(1), f"ascend-testee-decode-{os.getpid()}"
        argv = record.worker_args(role, role, engine_id, tp_rank, tp_size, tp_size, 1 if role == "prefiller"
                                  else tp_size, port)
        argv += model_options(config["layout"], block_size, tp_size) + ["--fill", "provenance"]
        env = {}
        if config.get("abort_timeout_s") is not None:
            # vLLM's VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (whole seconds), which the prefiller's task tracker reads.
            env["VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT"] = str(max(1, round(float(config["abort_timeout_s"]))))
        return argv, env, port

    # -- prefiller --------------------------------------------------------------------------------------------

    def ready(self, cmd):
        transfer = str(cmd.get("transfer_id") or cmd["p_req_id"])
        self.ready_ids[transfer] = str(cmd.get("p_req_id") or transfer)
        blocks = [b for g in (cmd.get("blocks") or []) for b in g]
        self.proc.cmd("send", timeout=ANSWER_S, req_id=transfer, blocks=blocks)
        return {}

    def prefiller_status(self):
        p = self.proc.cmd("poll", timeout=ANSWER_S)
        expired = set(p.get("expired") or [])
        for r in p["sending"]:
            self.freed.append({"p_req_id": self.ready_ids.get(r, r), "transfer_id": r, "expired": r in expired})
        tables = self.proc.cmd("tables", timeout=ANSWER_S)
        self.wire.add(self.proc.cmd("events", timeout=ANSWER_S)["events"])
        # The engine serves the decoder's reads itself: the prefiller makes no engine calls (`writes`).
        return {"tracked_transfers": tables["reqs_to_process"], "open_exchanges": self.wire.unanswered(),
                "finished_sending": list(self.freed), "writes": []}

    # -- decoder ----------------------------------------------------------------------------------------------

    def pull(self, requests):
        for r in requests:
            d = str(r["d_req_id"])
            local = [b for g in (r.get("blocks") or []) for b in g]
            remote = [b for g in (r.get("remote_blocks") or []) for b in g]
            if r.get("remote_port") is None:
                raise Unsupported("unsupported: a pull without remote_host/remote_port (no bootstrap server)")
            params = record.pull_params(str(r.get("transfer_id") or d), remote, str(r.get("remote_host") or
                                        "127.0.0.1"), int(r["remote_port"]), str(r.get("engine_id") or ""))
            self.proc.cmd("pull", timeout=ANSWER_S, req_id=d, local_blocks=local, params=params)
            self.pulled[d] = local
        return {}

    def decoder_status(self):
        p = self.proc.cmd("poll", timeout=ANSWER_S)
        self.finished.extend(r for r in p["recving"] if r not in self.finished)
        self.errors.update(int(b) for b in p.get("load_errors") or [])
        tables = self.proc.cmd("tables", timeout=ANSWER_S)
        self.wire.add(self.proc.cmd("events", timeout=ANSWER_S)["events"])
        return {"finished": list(self.finished), "failed": failed_entries(self.pulled, self.errors),
                "pending_pulls": tables["reqs_to_process"], "open_exchanges": self.wire.awaiting(),
                "reads": list(self.wire.reads)}


def flat(value):
    """Every integer of a (nested) list, in order: 0.23.0.post1's metadata lists its regions per layer."""
    return [x for v in value for x in flat(v)] if isinstance(value, list) else [value]


def failed_entries(pulled, errors):
    """`failed`: one entry per pulled request whose destination blocks `get_block_ids_with_load_errors` named
    (the connector reports blocks, not requests)."""
    out = []
    for d, blocks in pulled.items():
        bad = sorted(set(blocks) & errors)
        if bad:
            out.append({"d_req_id": d, "reason": "its blocks are in get_block_ids_with_load_errors",
                        "invalid_blocks": bad, "failed_recving": False})
    return out


# ----------------------------------------------------------------------------------------------------------------
# The process


def die_with_parent():
    """In the worker, before exec: killed when this process ends, however it ends (the runner may kill it)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def start_worker(python):
    return record.WorkerProc(python, "worker", ["--deferred"], dict(os.environ), stderr=None,
                             preexec_fn=die_with_parent)


def stop_worker(proc):
    try:
        proc.stop()
    except Exception:  # noqa: BLE001
        pass


def serve(driver, lines, send):
    """Answers every command line until `stop` or the end of input."""
    for line in lines:
        if not line.strip():
            continue
        try:
            cmd = json.loads(line)
            if not isinstance(cmd, dict):
                raise ValueError("a command is a JSON object")
        except ValueError as e:
            send({"ok": False, "error": f"bad command line: {e}"})
            continue
        if cmd.get("cmd") == "stop":
            send({"ok": True})
            return
        try:
            send({"ok": True, **driver.handle(cmd)})
        except Unsupported as e:
            send({"ok": False, "error": str(e)})
        except Exception as e:  # noqa: BLE001 - every failure is an answer
            LOG(f"{cmd.get('cmd')}: {type(e).__name__}: {e}")
            send({"ok": False, "error": f"{type(e).__name__}: {e}"})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", choices=sorted(REVISIONS), required=True)
    ap.add_argument("--python", default=sys.executable, help="the worker's python (torch, vLLM, the engine)")
    a = ap.parse_args(argv)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    lock = threading.Lock()

    def send(obj):
        with lock:
            out.write(json.dumps(obj, separators=(",", ":")) + "\n")
            out.flush()

    proc = start_worker(a.python)
    driver = Driver(a.release, proc)
    try:
        driver.wait_imported(IMPORT_WAIT_S)
    except RuntimeError as e:
        LOG(str(e))  # `start` answers it
    send({"hello": "mooncake-testee", "protocol": 1,
          "name": f"vllm-ascend {a.release} kv_p2p/mooncake_connector.py (tools/ascend worker, TCP engine)",
          "revisions": [REVISIONS[a.release]], "roles": ROLES})
    try:
        serve(driver, sys.stdin, send)
    finally:
        stop_worker(proc)
        out.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
