#!/usr/bin/env python3
"""Mooncake's own vLLM connector live against other implementations of the generation-1 wire, KV bytes moved by
the real Mooncake Transfer Engine over TCP on 127.0.0.1; every pulled block checked word for word against the
provenance pattern of conformance/TESTEE.md. Opt-in: scripts/mooncake-v1.sh.

Peers:
* `mc`   — tools/mooncake_v1/testee.py: the package's `mooncake_connector_v1` on vLLM 0.12.0 (`--attn-backend`);
* `ref`  — `mooncake-peer testee` at vllm-0.13.0..0.15.1 (the reference peer);
* `vllm` — tools/record/peer.py with MOONCAKE_REAL_ENGINE=1: vLLM's own generation-1 MooncakeConnectorWorker of the
  release overlaid with `--vllm-path` (0.15.1 by default), the real engine; its KV cache blocks first, as recorded.

`--tp N` runs N workers on each side (homogeneous TP, spec/PROTOCOL.md "Generation 1"): prefiller rank r binds its
ROUTER at base port + r, decoder rank r sends its pull to remote_port + r, and every rank moves whole blocks of its
own heads. Each rank's regions lie at addresses of their own, and prefiller rank r holds each request in blocks
`P_SHIFT × r` further on than rank 0 (the decoder's blocks are the same on every rank), so the provenance of a
landed block names the prefiller rank it came from: decoder rank r passes only with rank r's bytes.

Each pairing prints `PASS name — detail` or `FAIL name — why`, and with `--show-pull` the decoder's pull bytes (hex)
as the prefiller's ROUTER received them. Exit 0 when every pairing passed (`--expect-fail NAME` turns a known
failure into a pass of its own, printed `XFAIL`, and a pass of it into a failure).
"""
import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = os.path.join(HERE, "..", "record")
sys.path.insert(0, RECORD)
import record  # noqa: E402  (Zygote, Peer, free_port, kill_group)

REVISION = "vllm-0.13.0..0.15.1"
NUM_BLOCKS, BLOCK_LEN, ABORT_S = 32, 2048, 5
P_BASE, D_BASE = 0x6200_0000_0000, 0x6100_0000_0000
RANK_STRIDE = 0x100_0000  # rank r's regions lie r × 16 MiB above rank 0's, on both sides
# (request id, prefiller blocks, decoder blocks): one pull of two requests, generation 1 ids shared by both sides.
REQS = [("req-1", [1, 2, 3], [7, 8, 9]), ("req-2", [4, 5], [20, 21])]
REGIONS = 2
# Prefiller rank r holds a request's blocks P_SHIFT × r further on than rank 0: a landed block's provenance names
# the rank that sent it. MAX_TP ranks fit into NUM_BLOCKS.
P_SHIFT = 8
MAX_TP = (NUM_BLOCKS - 1 - max(b for _, ps, _ in REQS for b in ps)) // P_SHIFT + 1


class Fail(Exception):
    pass


def p_blocks(blocks, rank):
    """The blocks prefiller rank `rank` holds a request in."""
    return [b + P_SHIFT * rank for b in blocks]


def rank_of(block):
    """The prefiller rank whose copy of a request's block `block` is (None: no request's block of any rank)."""
    held = {b for _, ps, _ in REQS for b in ps}
    ranks = [r for r in range(MAX_TP) if block - P_SHIFT * r in held]
    return ranks[0] if ranks else None


def layout(base, rank=0, split=False):
    """A side's regions, rank r's 16 MiB above rank 0's: one per layer, or (`split`) each layer's K and V planes as
    regions of their own, half the block length, at the same addresses — what Mooncake's and vLLM's connectors
    register of FlashAttention's `(2, num_blocks, …)` cache, given to the reference peer so it holds the same."""
    base += rank * RANK_STRIDE
    half, plane = BLOCK_LEN // 2, NUM_BLOCKS * BLOCK_LEN // 2
    addrs = [base + i * 0x10000 + h * plane for i in range(REGIONS) for h in ((0, 1) if split else (0,))]
    n, bl = len(addrs), half if split else BLOCK_LEN
    return {"kv_caches_base_addr": addrs, "block_lens": [bl] * n, "kv_block_lens": [bl] * n,
            "registered_layer_names": [f"region.{j}" for j in range(n)], "registered_layer_indices": list(range(n)),
            "num_blocks": NUM_BLOCKS}


def provenance_word(region, offset, block_len=BLOCK_LEN):
    """The provenance word at byte `offset` of a prefiller region of blocks of `block_len` (conformance/TESTEE.md)."""
    return (0x4D43 << 48) | (region << 36) | ((offset // block_len) << 16) | ((offset % block_len) // 8)


def chunks(kv_first, p, d):
    """(prefiller offset, decoder offset, length) of what moving block p to block d copies in one layer's memory: the
    whole block where the cache is blocks first, else its K half and its V half (`(2, num_blocks, …)`,
    FlashAttention)."""
    if not kv_first:
        return [(p * BLOCK_LEN, d * BLOCK_LEN, BLOCK_LEN)]
    half, plane = BLOCK_LEN // 2, NUM_BLOCKS * BLOCK_LEN // 2
    return [(h * plane + p * half, h * plane + d * half, half) for h in (0, 1)]


class Pattern:
    """How a prefiller's provenance reads at layer `i`, byte `offset` of its memory: `split` (the reference peer on
    FlashAttention's layout, `layout(split=True)`) numbers K and V planes as regions of half-block blocks; else a
    layer's memory is one region of BLOCK_LEN blocks (the Mooncake driver fills its mapped regions so, whatever
    the connector registers of them). `kv_first`: a request's block is a K or V half, not a whole block."""

    def __init__(self, split, kv_first):
        self.split, self.kv_first = split, kv_first
        self.half, self.plane = BLOCK_LEN // 2, NUM_BLOCKS * BLOCK_LEN // 2

    def place(self, i, offset):
        """(pattern region, offset in it, its block length)."""
        if self.split:
            return 2 * i + offset // self.plane, offset % self.plane, self.half
        return i, offset, BLOCK_LEN

    def text(self, region, offset, block_len):
        """A place, and the request block (of which prefiller rank) it is part of, if any."""
        if self.split or not self.kv_first:
            block = offset // block_len
        else:
            block = (offset % self.plane) // self.half
        r = rank_of(block)
        whose = "" if r is None else f" (prefiller rank {r}'s block {block})"
        return f"region {region} block {offset // block_len} word {(offset % block_len) // 8}{whose}"

    def problem(self, hexbytes, i, p_off):
        """The first word of `hexbytes` that is not the provenance from layer `i`'s byte `p_off` on (None: all are)."""
        region, off, bl = self.place(i, p_off)
        b = bytes.fromhex(hexbytes)
        for k in range(len(b) // 8):
            w = int.from_bytes(b[8 * k:8 * k + 8], "little")
            if w != provenance_word(region, off + 8 * k, bl):
                got = "zero" if w == 0 else (
                    self.text((w >> 36) & 0xFFF, ((w >> 16) & 0xFFFFF) * bl + (w & 0xFFFF) * 8, bl)
                    if w >> 48 == 0x4D43 else f"{w:#x}")
                return f"word {k}: {got}, expected {self.text(region, off + 8 * k, bl)}"
        return None


def decoder_ids(suffix):
    """Request id → the decoder's own id for it (`req-1-<suffix>`, as vLLM 0.15.1 suffixes every internal id)."""
    return {r: (f"{r}-{suffix}" if suffix else r) for r, _, _ in REQS}


class Testee:
    """A process speaking conformance/TESTEE.md (the Mooncake driver or mooncake-peer)."""

    def __init__(self, argv, log, label, env=None):
        self.label = label
        self.log = open(log, "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     start_new_session=True, env=env)
        self.q = queue.Queue()
        threading.Thread(target=lambda: [self.q.put(x) for x in self.proc.stdout], daemon=True).start()

    def wait_hello(self):
        self.hello = self._line(60, "hello")

    def _line(self, timeout, what):
        try:
            return json.loads(self.q.get(timeout=timeout))
        except queue.Empty:
            raise Fail(f"{self.label}: no {what} within {timeout} s (log {self.log.name})")

    def send(self, obj):
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def answer(self, what, timeout=120):
        a = self._line(timeout, f"answer to {what}")
        if a.get("ok") is False:
            raise Fail(f"{self.label}: {what}: {a.get('error')} (log {self.log.name})")
        return a

    def cmd(self, obj, timeout=120):
        self.send(obj)
        return self.answer(obj["cmd"], timeout)

    def stop(self):
        try:
            self.proc.stdin.write('{"cmd": "stop"}\n')
            self.proc.stdin.flush()
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001
            pass
        record.kill_group(self.proc.pid)
        self.log.close()


class Side:
    """One TP rank of one side of a pairing, whatever its implementation. Its process starts at construction;
    `wait_ready`, `begin_start` and `end_start` let every rank of both sides start side by side."""

    def __init__(self, ctx, kind, role, rank, run):
        self.kind, self.role, self.rank, self.ctx, self.run = kind, role, rank, ctx, run
        label = f"{kind} {role} rank {rank}"
        log = os.path.join(run.log_dir, f"{role}{rank}-{kind}.log")
        if kind == "mc":
            self.t = Testee([ctx.python, os.path.join(HERE, "testee.py"), "--attn-backend", ctx.attn_backend], log,
                            label, env=ctx.mc_env)
        elif kind == "ref":
            self.t = Testee([ctx.peer, "--log", "info", "testee"], log, label)
        else:
            self.v = run.spawn_vllm(role, f"{role}{rank}")
        run.sides.append(self)

    def wait_ready(self):
        if self.kind != "vllm":
            return self.t.wait_hello()
        self.v.wait_ready()
        kv_role, engine = ("kv_producer", "engine-p") if self.role == "prefiller" else ("kv_consumer", "engine-d")
        self.init_id = self.v.send("init", args=worker_args(self.ctx, kv_role, engine, self.rank))

    def begin_start(self):
        if self.kind == "vllm":
            return
        tp = {"tp_rank": self.rank, "tp_size": self.ctx.tp, "abort_timeout_s": ABORT_S, "record_wire": True}
        if self.role == "prefiller":
            config = {"engine_id": "engine-p", "bind": f"tcp://127.0.0.1:{self.run.port + self.rank}",
                      "model": {"total_num_kv_heads": 4 * self.ctx.tp},
                      "layout": layout(P_BASE, self.rank, self.split()), **tp}
        else:
            config = {"hostname": "127.0.0.1", "layout": layout(D_BASE, self.rank, self.split()), **tp}
        self.t.send({"cmd": "start", "role": self.role, "revision": REVISION, "config": config})

    def split(self):
        """The reference peer on FlashAttention's layout holds K and V planes as regions (`layout`)."""
        return self.kind == "ref" and self.ctx.attn_backend == "FLASH_ATTN"

    def end_start(self):
        if self.kind == "vllm":
            self.v.result(self.init_id, "init", 180)
            self.v.cmd("register", timeout=40, limit=30)
            return
        a = self.t.answer("start", timeout=180)
        if self.role == "prefiller" and int(a["endpoint"].rsplit(":", 1)[1]) != self.run.port + self.rank:
            raise Fail(f"{self.t.label}: ROUTER at {a['endpoint']}, not at base port {self.run.port} + its rank")

    # prefiller
    def offer(self):
        """The requests' prefill finished: rank r's blocks (p_blocks) may be pulled."""
        if self.kind == "vllm":
            self.v.cmd("fill_provenance")
            self.v.cmd("send_reqs", reqs=[[r, r, []] for r, _, _ in REQS])
            self.v.cmd("send_reqs", reqs=[[r, r, [p_blocks(p, self.rank)]] for r, p, _ in REQS])
            return
        for r, p, _ in REQS:
            self.t.cmd({"cmd": "allocate", "p_req_id": r, "transfer_id": r})
            self.t.cmd({"cmd": "ready", "p_req_id": r, "transfer_id": r, "blocks": [p_blocks(p, self.rank)]})

    def received(self):
        """The pulls the prefiller's ROUTER received (payload frames, hex)."""
        if self.kind == "vllm":
            return [bytes.fromhex(e["frames"][-1]).hex() for e in self.v.cmd("events")
                    if e.get("kind") == "zmq" and e.get("bound") and e["dir"] == "recv"]
        return [e["frames"][-1] for e in self.t.cmd({"cmd": "status"}).get("wire", []) if e["dir"] == "in"]

    # decoder
    def send_pull(self, remote_id_known):
        """One scheduler step pulling every request from the prefiller's base port (the connector adds its rank).
        `remote_id_known`: the prefiller's id reached the decoder's scheduler (`remote_request_id`, which only
        Mooncake's own prefiller puts into kv_transfer_params)."""
        own = decoder_ids(self.ctx.id_suffix)
        named = {r: (r if remote_id_known else own[r]) for r in own}
        self.done = set()
        if self.kind == "vllm":
            self.v.cmd("pull", reqs=[[own[r], named[r], [d]] for r, _, d in REQS], side_channel_port=self.run.port)
            return
        self.t.cmd({"cmd": "pull", "requests": [{"d_req_id": own[r], "transfer_id": named[r], "blocks": [d],
                                                 "remote_host": "127.0.0.1", "remote_port": self.run.port}
                                                for r, _, d in REQS]})

    def poll(self):
        """(the requests finished so far, whether every pull of this rank has settled)."""
        if self.kind == "vllm":
            self.done |= set(self.v.cmd("poll")["recving"])
            return self.done, set(decoder_ids(self.ctx.id_suffix).values()) <= self.done
        s = self.t.cmd({"cmd": "status"})
        return set(s["finished"]), s.get("open_exchanges") == 0 and s.get("pending_pulls", 0) == 0

    def landed(self, p_kind):
        """Problems of the pulled blocks (empty: every word of prefiller rank r's blocks arrived where it belongs)."""
        moves = [(i, p, d) for i in range(REGIONS) for _, ps, ds in REQS for p, d in zip(p_blocks(ps, self.rank), ds)]
        if self.kind == "vllm":
            if self.ctx.attn_backend == "FLASH_ATTN":
                raise Fail("the vLLM peer's cache is blocks first; a FLASH_ATTN pairing checks nothing meaningful")
            return [f"rank {self.rank} {x}" for x in
                    self.v.cmd("check_blocks", pairs=[[i, d, p, BLOCK_LEN // 8, 0] for i, p, d in moves])]
        problems = []
        base = layout(D_BASE, self.rank)["kv_caches_base_addr"]
        kv_first = self.ctx.attn_backend == "FLASH_ATTN"
        pattern = Pattern(p_kind == "ref" and kv_first, kv_first)
        for i, p, d in moves:
            for p_off, d_off, n in chunks(kv_first, p, d):
                h = self.t.cmd({"cmd": "read_memory", "addr": base[i] + d_off, "len": n})["hex"]
                why = pattern.problem(h, i, p_off)
                if why:
                    problems.append(f"rank {self.rank} region {i} block {d} (offset {d_off}): {why}")
        return problems


def worker_args(ctx, role, engine, rank):
    # Every rank holds 4 heads (whole-block TP), so a block is BLOCK_LEN bytes on every rank of every kind.
    model = {"block_size": 16, "total_num_kv_heads": 4 * ctx.tp, "head_size": 8, "num_blocks": NUM_BLOCKS,
             "num_layers": REGIONS, "abort_timeout_s": ABORT_S}
    return {"kv_role": role, "engine_id": engine, "tp_rank": rank, "tp_size": ctx.tp, "rpc_port": 0, "model": model}


class Run:
    """What record.Peer needs of a scenario run, plus the testee processes of a pairing."""

    def __init__(self, ctx, name):
        self.rec = type("R", (), {"zygote": ctx.zygote})()
        self.log_dir = os.path.join(ctx.log_dir, name.replace("/", "_").replace(">", "").replace(" ", "_"))
        os.makedirs(self.log_dir, exist_ok=True)
        self.fifo_dir = tempfile.mkdtemp(prefix="fifo-", dir=self.log_dir)
        self.peers, self.env, self.sides = [], {}, []
        self.port = None  # the prefiller's side-channel base port: rank r's ROUTER at port + r

    def spawn_vllm(self, role, conn):
        if self.rec.zygote is None:
            raise Fail("no vLLM environment (--vllm-path)")
        # vLLM's generation-1 prefiller binds rank r's ROUTER at VLLM_MOONCAKE_BOOTSTRAP_PORT + r.
        self.env = {"VLLM_MOONCAKE_BOOTSTRAP_PORT": str(self.port)} if role == "prefiller" else {}
        return record.Peer(self, role, conn)

    def stop(self):
        for p in self.peers:
            p.ask_quit()
        for p in self.peers:
            p.stop()
        for s in self.sides:
            if s.kind != "vllm":
                s.t.stop()
        shutil.rmtree(self.fifo_dir, ignore_errors=True)


def settle(decoders):
    """Poll every decoder rank until all have settled or the abort timeout (plus 10 s) has passed."""
    deadline = time.monotonic() + ABORT_S + 10
    while True:
        state = [d.poll() for d in decoders]
        if all(s for _, s in state) or time.monotonic() >= deadline:
            return [f for f, _ in state]
        time.sleep(0.05)


def pairing(ctx, p_kind, d_kind):
    name = f"{p_kind}-prefiller->{d_kind}-decoder"
    if "mc" in (p_kind, d_kind) or (ctx.attn_backend == "FLASH_ATTN" and "ref" in (p_kind, d_kind)):
        name += f" ({ctx.attn_backend})"
    if ctx.tp > 1:
        name += f" TP {ctx.tp}"
    if ctx.id_suffix:
        name += f" [decoder ids suffixed -{ctx.id_suffix}]"
    t0 = time.monotonic()
    run = Run(ctx, name)
    try:
        run.port = record.free_port(ctx.tp)
        ds = [Side(ctx, d_kind, "decoder", r, run) for r in range(ctx.tp)]
        ps = [Side(ctx, p_kind, "prefiller", r, run) for r in range(ctx.tp)]
        for step in ("wait_ready", "begin_start", "end_start"):
            for s in ds + ps:
                getattr(s, step)()
        for p in ps:
            p.offer()
        for d in ds:
            d.send_pull(p_kind == "mc")
        done = settle(ds)
        pulls = [p.received() for p in ps]
        if ctx.show_pull:
            for p, hs in zip(ps, pulls):
                for h in hs:
                    print(f"     pull received by {p_kind} prefiller rank {p.rank} ({len(h) // 2} bytes): {h}",
                          flush=True)
        want = set(decoder_ids(ctx.id_suffix).values())
        for d, got in zip(ds, done):
            if got != want:
                raise Fail(f"decoder rank {d.rank} finished {sorted(got)} of {sorted(want)}")
        problems = [x for d in ds for x in d.landed(p_kind)]
        if problems:
            raise Fail(f"{len(problems)} pulled block copies wrong, first: {problems[0]}")
        blocks = REGIONS * sum(len(d) for _, _, d in REQS)
        where = "" if ctx.tp == 1 else f" on each of {ctx.tp} decoder ranks"
        return name, True, (f"TP {ctx.tp}: {len(REQS)} requests finished{where}, {blocks * ctx.tp} blocks checked "
                            f"word for word, pulls per prefiller rank {[len(h) for h in pulls]}, "
                            f"{time.monotonic() - t0:.1f} s")
    except (Fail, record.RecordError) as e:
        return name, False, f"{e} ({time.monotonic() - t0:.1f} s; logs: {run.log_dir})"
    finally:
        run.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter of the recorder's environment")
    ap.add_argument("--mc-path", required=True, help="PYTHONPATH entries for the Mooncake driver (vLLM 0.12.0 "
                    "overlay, engine package)")
    ap.add_argument("--vllm-path", default=None, help="overlay of vLLM's generation-1 release for `vllm` peers")
    ap.add_argument("--engine-path", default=None, help="the engine package, for `vllm` peers")
    ap.add_argument("--peer", required=True, help="the mooncake-peer binary")
    ap.add_argument("--attn-backend", default="FLASHINFER")
    ap.add_argument("--pairing", action="append", default=[], help="P:D, e.g. mc:ref (repeatable)")
    ap.add_argument("--expect-fail", action="append", default=[], help="P:D expected to fail")
    ap.add_argument("--show-pull", action="store_true")
    ap.add_argument("--id-suffix", default="", help="the decoder's own request ids get this suffix (vLLM 0.15.1 "
                    "appends 8 random characters to every request id it receives)")
    ap.add_argument("--tp", type=int, default=1, help=f"TP size of both sides, 1 to {MAX_TP} (homogeneous: rank r "
                    "pulls from rank r)")
    ap.add_argument("--log-dir", default=None)
    a = ap.parse_args()
    if not 1 <= a.tp <= MAX_TP:
        ap.error(f"--tp {a.tp}: 1 to {MAX_TP} (every rank's blocks must fit into {NUM_BLOCKS} blocks)")
    a.log_dir = a.log_dir or os.path.join("/tmp", f"mooncake-v1-live-{os.getpid()}")
    os.makedirs(a.log_dir, exist_ok=True)
    a.mc_env = dict(os.environ, PYTHONPATH=a.mc_path, MOONCAKE_V1_LOG=os.environ.get("MOONCAKE_V1_LOG", "debug"))
    pairs = a.pairing or ["mc:ref", "ref:mc", "mc:mc"]
    a.zygote = None
    ok = True
    try:
        if any("vllm" in x for x in pairs):
            if not (a.vllm_path and a.engine_path):
                sys.exit("live.py: a vllm pairing needs --vllm-path and --engine-path")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([a.vllm_path, RECORD, a.engine_path]),
                       MOONCAKE_REAL_ENGINE="1", VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=str(ABORT_S),
                       VLLM_HOST_IP="127.0.0.1", VLLM_TARGET_DEVICE="cpu", CUDA_VISIBLE_DEVICES="",
                       PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", GLOG_minloglevel="1")
            a.zygote = record.Zygote(a.python, env, a.log_dir)
            info = a.zygote.wait_ready()
            print(f"== vllm peers: vLLM {info['vllm_version']} (generation {info['generation']}), real engine", flush=True)
        for x in pairs:
            pk, dk = x.split(":")
            name, passed, detail = pairing(a, pk, dk)
            expected_fail = x in a.expect_fail
            word = ("XPASS" if expected_fail else "PASS") if passed else ("XFAIL" if expected_fail else "FAIL")
            ok &= passed != expected_fail
            print(f"{word} {name} — {detail}", flush=True)
    finally:
        if a.zygote is not None:
            a.zygote.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
