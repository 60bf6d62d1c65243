#!/usr/bin/env python3
"""Mooncake's own vLLM connector live against other implementations of the generation-1 wire, KV bytes moved by
the real Mooncake Transfer Engine over TCP on 127.0.0.1; every pulled block checked word for word against the
provenance pattern of conformance/TESTEE.md. Opt-in: scripts/mooncake-v1.sh.

Peers:
* `mc`   — tools/mooncake_v1/testee.py: the package's `mooncake_connector_v1` on vLLM 0.12.0 (`--attn-backend`);
* `ref`  — `mooncake-peer testee` at vllm-0.13.0..0.15.1 (the reference peer);
* `vllm` — tools/record/peer.py with MOONCAKE_REAL_ENGINE=1: vLLM's own generation-1 MooncakeConnectorWorker of the
  release overlaid with `--vllm-path` (0.15.1 by default), the real engine; its KV cache blocks first, as recorded.

Each pairing prints `PASS name — detail` or `FAIL name — why`, and with `--show-pull` the decoder's pull bytes (hex)
as the prefiller's ROUTER received them. Exit 0 when every pairing passed (`--expect-fail NAME` turns a known
failure into a pass of its own, printed `XFAIL`, and a pass of it into a failure).
"""
import argparse
import json
import os
import queue
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
# (request id, prefiller blocks, decoder blocks): one pull of two requests, generation 1 ids shared by both sides.
REQS = [("req-1", [1, 2, 3], [7, 8, 9]), ("req-2", [4, 5], [20, 21])]


class Fail(Exception):
    pass


def layout(base):
    return {"kv_caches_base_addr": [base, base + 0x10000], "block_lens": [BLOCK_LEN] * 2,
            "kv_block_lens": [BLOCK_LEN] * 2, "registered_layer_names": ["region.0", "region.1"],
            "registered_layer_indices": [0, 1], "num_blocks": NUM_BLOCKS}


def provenance_word(region, offset):
    """The provenance word at byte `offset` of a prefiller region (conformance/TESTEE.md)."""
    return (0x4D43 << 48) | (region << 36) | ((offset // BLOCK_LEN) << 16) | ((offset % BLOCK_LEN) // 8)


def chunks(kv_first, p, d):
    """(prefiller offset, decoder offset, length) of what moving block p to block d copies in one region: the whole
    block where the cache is blocks first, else its K half and its V half (`(2, num_blocks, …)`, FlashAttention)."""
    if not kv_first:
        return [(p * BLOCK_LEN, d * BLOCK_LEN, BLOCK_LEN)]
    half, plane = BLOCK_LEN // 2, NUM_BLOCKS * BLOCK_LEN // 2
    return [(h * plane + p * half, h * plane + d * half, half) for h in (0, 1)]


def provenance_problem(hexbytes, region, p_off):
    b = bytes.fromhex(hexbytes)
    for k in range(len(b) // 8):
        w = int.from_bytes(b[8 * k:8 * k + 8], "little")
        want = provenance_word(region, p_off + 8 * k)
        if w != want:
            got = "zero" if w == 0 else (f"region {(w >> 36) & 0xFFF} block {(w >> 16) & 0xFFFFF} word {w & 0xFFFF}"
                                         if w >> 48 == 0x4D43 else f"{w:#x}")
            return (f"word {k}: {got}, expected region {region} block {(p_off + 8 * k) // BLOCK_LEN} word "
                    f"{((p_off + 8 * k) % BLOCK_LEN) // 8}")
    return None


class Testee:
    """A process speaking conformance/TESTEE.md (the Mooncake driver or mooncake-peer)."""

    def __init__(self, argv, log, env=None):
        self.log = open(log, "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     start_new_session=True, env=env)
        self.q = queue.Queue()
        threading.Thread(target=lambda: [self.q.put(x) for x in self.proc.stdout], daemon=True).start()
        self.hello = self._line(60, "hello")

    def _line(self, timeout, what):
        try:
            return json.loads(self.q.get(timeout=timeout))
        except queue.Empty:
            raise Fail(f"{self.proc.args[-1]}: no {what} within {timeout} s (log {self.log.name})")

    def cmd(self, obj, timeout=120):
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()
        a = self._line(timeout, f"answer to {obj['cmd']}")
        if a.get("ok") is False:
            raise Fail(f"{obj['cmd']}: {a.get('error')} (log {self.log.name})")
        return a

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
    """One worker of a pairing, whatever its implementation."""

    def __init__(self, ctx, kind, role, run):
        self.kind, self.role, self.ctx, self.run = kind, role, ctx, run
        log = os.path.join(run.log_dir, f"{role}-{kind}.log")
        if kind == "mc":
            self.t = Testee([ctx.python, os.path.join(HERE, "testee.py"), "--attn-backend", ctx.attn_backend], log,
                            env=ctx.mc_env)
        elif kind == "ref":
            self.t = Testee([ctx.peer, "--log", "info", "testee"], log)
        run.sides.append(self)

    # prefiller
    def start_prefiller(self):
        if self.kind == "vllm":
            self.port = record.free_port()
            self.run.env = {"VLLM_MOONCAKE_BOOTSTRAP_PORT": str(self.port)}
            self.v = self.run.vllm("prefiller", "prefiller0", worker_args(self.ctx, "kv_producer", "engine-p"))
            self.v.cmd("register", timeout=40, limit=30)
            self.v.cmd("fill_provenance")
            self.v.cmd("send_reqs", reqs=[[r, r, []] for r, _, _ in REQS])
            self.v.cmd("send_reqs", reqs=[[r, r, [p]] for r, p, _ in REQS])
            return self.port
        a = self.t.cmd({"cmd": "start", "role": "prefiller", "revision": REVISION, "config": {
            "engine_id": "engine-p", "tp_rank": 0, "tp_size": 1, "abort_timeout_s": ABORT_S,
            "model": {"total_num_kv_heads": 4}, "layout": layout(P_BASE), "record_wire": True}}, timeout=180)
        for r, p, _ in REQS:
            self.t.cmd({"cmd": "allocate", "p_req_id": r, "transfer_id": r})
            self.t.cmd({"cmd": "ready", "p_req_id": r, "transfer_id": r, "blocks": [p]})
        return int(a["endpoint"].rsplit(":", 1)[1])

    def received(self):
        """The pulls the prefiller's ROUTER received (payload frames, hex)."""
        if self.kind == "vllm":
            return [bytes.fromhex(e["frames"][-1]).hex() for e in self.v.cmd("events")
                    if e.get("kind") == "zmq" and e.get("bound") and e["dir"] == "recv"]
        return [e["frames"][-1] for e in self.t.cmd({"cmd": "status"}).get("wire", []) if e["dir"] == "in"]

    # decoder
    def start_decoder(self):
        if self.kind == "vllm":
            self.v = self.run.vllm("decoder", "decoder0", worker_args(self.ctx, "kv_consumer", "engine-d"))
            self.v.cmd("register", timeout=40, limit=30)
            return
        self.t.cmd({"cmd": "start", "role": "decoder", "revision": REVISION, "config": {
            "hostname": "127.0.0.1", "tp_rank": 0, "tp_size": 1, "abort_timeout_s": ABORT_S,
            "layout": layout(D_BASE), "record_wire": True}}, timeout=180)

    def pull(self, port, suffix, remote_id_known):
        """`suffix`: the decoder knows each request by an id of its own (`req-1-<suffix>`, as vLLM 0.15.1 suffixes
        every internal id); `remote_id_known`: the prefiller's id reached the decoder's scheduler
        (`remote_request_id`, which only Mooncake's own prefiller puts into kv_transfer_params)."""
        own = {r: (f"{r}-{suffix}" if suffix else r) for r, _, _ in REQS}
        named = {r: (r if remote_id_known else own[r]) for r in own}
        ids = list(own.values())
        deadline = time.monotonic() + ABORT_S + 10
        if self.kind == "vllm":
            self.v.cmd("pull", reqs=[[own[r], named[r], [d]] for r, _, d in REQS], side_channel_port=port)
            done = set()
            while time.monotonic() < deadline and not set(ids) <= done:
                done |= set(self.v.cmd("poll")["recving"])
                time.sleep(0.05)
            return done
        self.t.cmd({"cmd": "pull", "requests": [{"d_req_id": own[r], "transfer_id": named[r], "blocks": [d],
                                                 "remote_host": "127.0.0.1", "remote_port": port}
                                                for r, _, d in REQS]})
        while time.monotonic() < deadline:
            s = self.t.cmd({"cmd": "status"})
            if s.get("open_exchanges") == 0 and s.get("pending_pulls", 0) == 0:
                return set(s["finished"])
            time.sleep(0.05)
        return set(self.t.cmd({"cmd": "status"})["finished"])

    def landed(self):
        """Problems of the pulled blocks (empty: every word arrived where it belongs)."""
        problems = []
        if self.kind == "vllm":
            if self.ctx.attn_backend == "FLASH_ATTN":
                raise Fail("the vLLM peer's cache is blocks first; a FLASH_ATTN pairing checks nothing meaningful")
            pairs = [[i, d, p, BLOCK_LEN // 8, 0] for i in range(2) for _, ps, ds in REQS for p, d in zip(ps, ds)]
            return self.v.cmd("check_blocks", pairs=pairs)
        base = layout(D_BASE)["kv_caches_base_addr"]
        kv_first = self.ctx.attn_backend == "FLASH_ATTN"
        for i in range(2):
            for _, ps, ds in REQS:
                for p, d in zip(ps, ds):
                    for p_off, d_off, n in chunks(kv_first, p, d):
                        h = self.t.cmd({"cmd": "read_memory", "addr": base[i] + d_off, "len": n})["hex"]
                        why = provenance_problem(h, i, p_off)
                        if why:
                            problems.append(f"region {i} block {d} (offset {d_off}): {why}")
        return problems


def worker_args(ctx, role, engine):
    model = {"block_size": 16, "total_num_kv_heads": 4, "head_size": 8, "num_blocks": NUM_BLOCKS, "num_layers": 2,
             "abort_timeout_s": ABORT_S}
    return {"kv_role": role, "engine_id": engine, "tp_rank": 0, "tp_size": 1, "rpc_port": 0, "model": model}


class Run:
    """What record.Peer needs of a scenario run, plus the testee processes of a pairing."""

    def __init__(self, ctx, name):
        self.rec = type("R", (), {"zygote": ctx.zygote})()
        self.log_dir = os.path.join(ctx.log_dir, name.replace("/", "_").replace(">", ""))
        os.makedirs(self.log_dir, exist_ok=True)
        self.fifo_dir = tempfile.mkdtemp(prefix="fifo-", dir=self.log_dir)
        self.peers, self.env, self.sides = [], {}, []

    def vllm(self, role, conn, args):
        if self.rec.zygote is None:
            raise Fail("no vLLM environment (--vllm-path)")
        p = record.Peer(self, role, conn)
        p.wait_ready()
        p.cmd("init", timeout=180, args=args)
        return p

    def stop(self):
        for p in self.peers:
            p.ask_quit()
        for p in self.peers:
            p.stop()
        for s in self.sides:
            if s.kind != "vllm":
                s.t.stop()


def pairing(ctx, p_kind, d_kind):
    name = f"{p_kind}-prefiller->{d_kind}-decoder"
    if "mc" in (p_kind, d_kind):
        name += f" ({ctx.attn_backend})"
    if ctx.id_suffix:
        name += f" [decoder ids suffixed -{ctx.id_suffix}]"
    run = Run(ctx, name)
    try:
        p = Side(ctx, p_kind, "prefiller", run)
        d = Side(ctx, d_kind, "decoder", run)
        d.start_decoder()
        port = p.start_prefiller()
        done = d.pull(port, ctx.id_suffix, p_kind == "mc")
        pulls = p.received()
        if ctx.show_pull:
            for h in pulls:
                print(f"     pull received by the {p_kind} prefiller ({len(h) // 2} bytes): {h}", flush=True)
        want = {f"{r}-{ctx.id_suffix}" if ctx.id_suffix else r for r, _, _ in REQS}
        if done != want:
            raise Fail(f"the decoder finished {sorted(done)} of {sorted(want)}")
        problems = d.landed()
        if problems:
            raise Fail(f"{len(problems)} pulled block copies wrong, first: {problems[0]}")
        return name, True, f"2 requests finished, 10 blocks checked word for word, {len(pulls)} pull(s)"
    except (Fail, record.RecordError) as e:
        return name, False, f"{e} (logs: {run.log_dir})"
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
    ap.add_argument("--log-dir", default=None)
    a = ap.parse_args()
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
