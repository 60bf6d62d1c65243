#!/usr/bin/env python3
"""Self-check of the Python Mooncake test peer (tests/peer/mooncake_test_peer.py).

Starts bootstrap, prefiller and decoder testee processes through the control protocol of
conformance/TESTEE.md and runs the scenarios of the recorded vLLM 0.33.0 traces between the Python decoder and
the Python prefiller, checking replies, transfer-engine writes, the bytes that landed in the decoder's memory
(decoded from the provenance pattern) and that every table is empty afterwards. A few checks replay recorded
trace bytes against the prefiller directly and compare the reply bytes.

Run:  .venv/bin/python tests/peer/test_peer_selfcheck.py     (or any python with msgspec 0.23.0 + pyzmq 27.3.0)
Everything binds 127.0.0.1; every process started is stopped; each wait is bounded. Testee logs (stderr,
level MOONCAKE_PEER_LOG, default INFO here) are kept in a temporary directory when a scenario fails, or always
with MOONCAKE_PEER_KEEP_LOGS=1.
"""

from __future__ import annotations

import faulthandler
import http.server
import json
import os
import queue
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

import msgspec
import zmq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEER = os.path.join(HERE, "mooncake_test_peer.py")
TRACES = os.path.join(ROOT, "conformance", "traces")
REV = "vllm-0.33.0"
ANSWER_TIMEOUT_S = 30.0
WAIT_TIMEOUT_S = 15.0

L0, L1, L2, L3 = (f"model.layers.{k}.self_attn" for k in range(4))
REGION_GAP = 65600  # distance between region bases, as in the recordings (32 x 2048 bytes plus padding)
NUM_BLOCKS = 32


# ------------------------------------------------------------------------------------------------------------
# testee processes


class Testee:
    def __init__(self, name: str, logdir: str):
        self.name = name
        self.log_path = os.path.join(logdir, f"{name}.log")
        self.log = open(self.log_path, "wb")
        env = dict(os.environ, MOONCAKE_PEER_LOG=os.environ.get("MOONCAKE_PEER_LOG", "INFO"))
        self.proc = subprocess.Popen([sys.executable, PEER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env)
        self.lines: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.hello = None

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _next(self):
        try:
            line = self.lines.get(timeout=ANSWER_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"{self.name}: no answer within {ANSWER_TIMEOUT_S} s") from None
        if line is None:
            raise AssertionError(f"{self.name}: testee exited ({self.proc.poll()}); log {self.log_path}")
        return json.loads(line)

    def wait_hello(self):
        self.hello = self._next()
        assert self.hello.get("hello") == "mooncake-testee" and self.hello.get("protocol") == 1, self.hello
        return self.hello

    def cmd(self, **c) -> dict:
        self.proc.stdin.write((json.dumps(c) + "\n").encode())
        self.proc.stdin.flush()
        return self._next()

    def ok(self, **c) -> dict:
        a = self.cmd(**c)
        assert a.get("ok") is True, f"{self.name}: {c.get('cmd')} -> {a}"
        return a

    def stop(self):
        if self.proc.poll() is None:
            try:
                assert self.cmd(cmd="stop") == {"ok": True}
            except (AssertionError, OSError, ValueError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        code = self.proc.returncode
        self.reader.join(timeout=5)
        self.proc.stdout.close()
        self.proc.stdin.close()
        self.log.close()
        return code


def wait_until(pred, what: str, timeout: float = WAIT_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def layout(base: int, block_len: int, names=(L0, L1), indices=None, groups=None, kv=None) -> dict:
    n = len(names)
    groups = list(groups) if groups is not None else [0] * n
    return {
        "kv_caches_base_addr": [base + k * REGION_GAP for k in range(n)],
        "block_lens": [block_len] * n,
        "kv_block_lens": [kv or block_len] * n,
        "registered_layer_names": list(names),
        "registered_layer_indices": list(indices) if indices is not None else list(range(n)),
        "registered_group_indices": groups,
        "registered_shared_group_ids": [[g] for g in groups],
        "registered_row_offsets": [0] * n,
        "num_blocks": NUM_BLOCKS,
    }


def model(heads=4, kinds=("attn",)) -> dict:
    return {"total_num_kv_heads": heads, "use_mla": False, "group_kinds": list(kinds)}


# ------------------------------------------------------------------------------------------------------------
# provenance pattern (TESTEE.md), computed independently of the peer


def prov_bytes(region: int, block: int, block_len: int) -> bytes:
    words = [(0x4D43 << 48) | (region << 36) | (block << 16) | k for k in range((block_len + 7) // 8)]
    return struct.pack(f"<{len(words)}Q", *words)[:block_len]


def describe(data: bytes, at: int) -> str:
    w = int.from_bytes(data[at - at % 8:at - at % 8 + 8].ljust(8, b"\0"), "little")
    if w >> 48 == 0x4D43:
        return f"word(region={(w >> 36) & 0xFFF}, block={(w >> 16) & 0xFFFFF}, index={w & 0xFFFF})"
    return f"raw {w:#018x}"


# ------------------------------------------------------------------------------------------------------------


class Cluster:
    """Testees of one scenario; stops them all at the end."""

    def __init__(self, case: unittest.TestCase):
        self.case = case
        self.logdir = tempfile.mkdtemp(prefix="mooncake-peer-")
        self.testees: list = []
        self.url = None

    def spawn(self, name: str) -> Testee:
        t = Testee(name, self.logdir)
        self.testees.append(t)
        return t

    def bootstrap(self) -> Testee:
        b = self.spawn("bootstrap")
        b.wait_hello()
        self.url = b.ok(cmd="start", role="bootstrap", revision=REV, config={"bind": "127.0.0.1:0"})["url"]
        return b

    def prefiller(self, name="prefiller", rev=REV, **config) -> Testee:
        p = self.spawn(name)
        p.wait_hello()
        cfg = {"engine_id": "engine-prefill-0", "dp_rank": 0, "tp_rank": 0, "tp_size": 1, "pp_rank": 0,
               "pp_size": 1, "bootstrap": self.url, "abort_timeout_s": 10, "model": model(),
               "layout": layout(0x10000000, 2048)}
        cfg.update(config)
        p.endpoint = p.ok(cmd="start", role="prefiller", revision=rev, config=cfg)["endpoint"]
        p.layout = cfg["layout"]
        return p

    def decoder(self, name="decoder", rev=REV, **config) -> Testee:
        d = self.spawn(name)
        d.wait_hello()
        cfg = {"hostname": "127.0.0.1", "tp_rank": 0, "tp_size": 1, "pp_rank": 0, "pp_size": 1,
               "layout_id": 0x6953CFDC2E4F3C7F, "abort_timeout_s": 10, "layout": layout(0x20000000, 2048)}
        cfg.update(config)
        d.session = d.ok(cmd="start", role="decoder", revision=rev, config=cfg)["session"]
        d.layout = cfg["layout"]
        d.layout_id = cfg["layout_id"]
        return d

    def pull(self, d: Testee, *reqs, engine="engine-prefill-0"):
        d.ok(cmd="pull", requests=[{"d_req_id": r, "transfer_id": t, "blocks": b, "engine_id": engine,
                                    "bootstrap_addr": self.url} for r, t, b in reqs])

    def wait_finished(self, d: Testee, *ids, timeout=WAIT_TIMEOUT_S) -> dict:
        return wait_until(lambda: (lambda s: s if set(ids) <= set(s["finished"]) else None)(d.ok(cmd="status")),
                          f"{d.name} to finish {ids}", timeout)

    def check_memory(self, d: Testee, expected: dict):
        """`expected`: (region, block) -> [(dst offset, bytes)]; every other byte must still be zero."""
        lay = d.layout
        for i, (base, stride) in enumerate(zip(lay["kv_caches_base_addr"], lay["block_lens"])):
            got = bytes.fromhex(d.ok(cmd="read_memory", addr=base, len=stride * NUM_BLOCKS)["hex"])
            want = bytearray(stride * NUM_BLOCKS)
            for (ri, b), pieces in expected.items():
                if ri == i:
                    for off, data in pieces:
                        want[b * stride + off:b * stride + off + len(data)] = data
            if got != bytes(want):
                at = next(k for k in range(len(got)) if got[k] != want[k])
                self.case.fail(f"{d.name} region {i} block {at // stride} offset {at % stride}: got "
                               f"{describe(got, at)}, expected {describe(bytes(want), at)}")

    def check_clean(self, *testees):
        for t in testees:
            s = t.ok(cmd="status")
            if "tracked_transfers" in s:
                self.case.assertEqual((s["tracked_transfers"], s["open_exchanges"]), (0, 0), f"{t.name}: {s}")
            else:
                self.case.assertEqual((s["pending_pulls"], s["open_exchanges"]), (0, 0), f"{t.name}: {s}")

    def close(self):
        codes = {t.name: t.stop() for t in self.testees}
        bad = {k: v for k, v in codes.items() if v != 0}
        result = getattr(getattr(self.case, "_outcome", None), "result", None)
        failed = [t for t, _ in getattr(result, "failures", []) + getattr(result, "errors", []) if t is self.case]
        passed = not failed and not bad
        if passed and not os.environ.get("MOONCAKE_PEER_KEEP_LOGS"):
            shutil.rmtree(self.logdir, ignore_errors=True)
        else:
            print(f"\n{self.case.id()}: testee logs kept in {self.logdir}", file=sys.stderr)
        self.case.assertEqual(bad, {}, f"testees exited badly; logs in {self.logdir}")


def whole_blocks(pairs, regions=2, block_len=2048):
    """Expected memory when D block d of every region gets all of P block p of the same region."""
    return {(i, d): [(0, prov_bytes(i, p, block_len))] for i in range(regions) for p, d in pairs}


class PeerSelfCheck(unittest.TestCase):
    def setUp(self):
        self.c = Cluster(self)
        self.addCleanup(self.c.close)

    # --- a_single_success ---------------------------------------------------------------------------------
    def test_a_single_success(self):
        c = self.c
        c.bootstrap()
        p = c.prefiller()
        d = c.decoder()
        p.ok(cmd="allocate", p_req_id="p-req-1", transfer_id="xfer-1")
        p.ok(cmd="ready", p_req_id="p-req-1", transfer_id="xfer-1", blocks=[[10, 11, 12]])
        c.pull(d, ("d-req-1", "xfer-1", [[3, 4, 5]]))
        s = c.wait_finished(d, "d-req-1")
        self.assertEqual(s["failed"], [])
        [ex] = s["exchanges"]
        self.assertTrue(ex["with_layout"])
        self.assertEqual(ex["replies"], [{"status": 0, "ok_reqs": ["d-req-1"], "layout_id": d.layout_id}])
        ps = p.ok(cmd="status")
        self.assertEqual(ps["finished_sending"], [{"p_req_id": "p-req-1", "transfer_id": "xfer-1", "expired": False}])
        self.assertEqual(ps["writes"], [{"session": d.session, "descriptors": 2, "bytes": 12288, "ret": 0}])
        c.check_memory(d, whole_blocks([(10, 3), (11, 4), (12, 5)]))
        c.check_clean(p, d)

    # --- b_batch_success (decoder without layout caching) -------------------------------------------------
    def test_b_batch_of_three(self):
        c = self.c
        c.bootstrap()
        p = c.prefiller()
        d = c.decoder(layout_id=0)
        for k, blocks in ((1, [[4, 5]]), (2, [[7, 8, 9]]), (3, [[31]])):
            p.ok(cmd="allocate", p_req_id=f"p-req-{k}", transfer_id=f"xfer-{k}")
            p.ok(cmd="ready", p_req_id=f"p-req-{k}", transfer_id=f"xfer-{k}", blocks=blocks)
        c.pull(d, ("d-req-1", "xfer-1", [[1, 2]]), ("d-req-2", "xfer-2", [[7, 8, 9]]), ("d-req-3", "xfer-3", [[20]]))
        s = c.wait_finished(d, "d-req-1", "d-req-2", "d-req-3")
        [ex] = s["exchanges"]
        [reply] = ex["replies"]
        self.assertEqual(reply["status"], 0)
        self.assertNotIn("layout_id", reply)  # layout_id 0 is never echoed (omitted default)
        self.assertEqual(sorted(reply["ok_reqs"]), ["d-req-1", "d-req-2", "d-req-3"])
        ps = p.ok(cmd="status")
        self.assertEqual(ps["writes"], [{"session": d.session, "descriptors": 6, "bytes": 24576, "ret": 0}])
        self.assertEqual(sorted(f["p_req_id"] for f in ps["finished_sending"]), ["p-req-1", "p-req-2", "p-req-3"])
        c.check_memory(d, whole_blocks([(4, 1), (5, 2), (7, 7), (8, 8), (9, 9), (31, 20)]))
        # A second pull from the same decoder still carries the layout (layout_id 0 = always send it).
        p.ok(cmd="allocate", p_req_id="p-req-4", transfer_id="xfer-4")
        p.ok(cmd="ready", p_req_id="p-req-4", transfer_id="xfer-4", blocks=[[12]])
        c.pull(d, ("d-req-4", "xfer-4", [[25]]))
        s = c.wait_finished(d, "d-req-4")
        self.assertEqual([e["with_layout"] for e in s["exchanges"]], [True, True])
        c.check_clean(p, d)

    # --- c_multigroup_hybrid ------------------------------------------------------------------------------
    def test_c_multigroup(self):
        c = self.c
        c.bootstrap()
        names, idx, groups = (L0, L2, L1, L3), (0, 2, 1, 3), (0, 0, 1, 1)
        p = c.prefiller(model=model(kinds=("attn", "attn")),
                        layout=layout(0x10000000, 2048, names, idx, groups))
        d = c.decoder(layout=layout(0x20000000, 2048, names, idx, groups))
        p.ok(cmd="allocate", p_req_id="p-req-1", transfer_id="xfer-1")
        # P computed one block more in the full-attention group (D had a prefix hit): only the tail moves.
        p.ok(cmd="ready", p_req_id="p-req-1", transfer_id="xfer-1", blocks=[[10, 11, 12, 13], [14, 15]])
        c.pull(d, ("d-req-1", "xfer-1", [[1, 2, 3], [4, 5]]))
        s = c.wait_finished(d, "d-req-1")
        self.assertEqual(s["failed"], [])
        ps = p.ok(cmd="status")
        self.assertEqual(ps["writes"], [{"session": d.session, "descriptors": 4, "bytes": 20480, "ret": 0}])
        expected = {}
        for i, g in enumerate(groups):
            pairs = [(11, 1), (12, 2), (13, 3)] if g == 0 else [(14, 4), (15, 5)]
            for pb, db in pairs:
                expected[(i, db)] = [(0, prov_bytes(i, pb, 2048))]
        c.check_memory(d, expected)
        c.check_clean(p, d)

    # --- d1_hetero_tp_d2_p1 -------------------------------------------------------------------------------
    def test_d1_decoder_tp2_prefiller_tp1(self):
        c = self.c
        c.bootstrap()
        p = c.prefiller(layout=layout(0x10000000, 2048))
        ds = [c.decoder(f"decoder_tp{r}", tp_rank=r, tp_size=2, layout=layout(0x20000000 + r * 0x1000000, 1024))
              for r in range(2)]
        p.ok(cmd="allocate", p_req_id="p-req-1", transfer_id="xfer-1")
        p.ok(cmd="ready", p_req_id="p-req-1", transfer_id="xfer-1", blocks=[[6, 7]])
        c.pull(ds[0], ("d-req-1", "xfer-1", [[3, 4]]))
        c.wait_finished(ds[0], "d-req-1")
        ps = p.ok(cmd="status")
        # need_send is 2: one delivery does not free the transfer.
        self.assertEqual((ps["tracked_transfers"], ps["finished_sending"]), (1, []))
        c.pull(ds[1], ("d-req-1", "xfer-1", [[3, 4]]))
        c.wait_finished(ds[1], "d-req-1")
        ps = p.ok(cmd="status")
        self.assertEqual(ps["finished_sending"], [{"p_req_id": "p-req-1", "transfer_id": "xfer-1", "expired": False}])
        self.assertEqual(ps["writes"], [{"session": d.session, "descriptors": 4, "bytes": 4096, "ret": 0} for d in ds])
        for r, d in enumerate(ds):
            # D rank r holds heads [2r, 2r+2): bytes [r*1024, r*1024+1024) of each P block.
            c.check_memory(d, {(i, db): [(0, prov_bytes(i, pb, 2048)[r * 1024:(r + 1) * 1024])]
                               for i in range(2) for pb, db in ((6, 3), (7, 4))})
        c.check_clean(p, *ds)

    # --- d2_hetero_tp_d1_p2 -------------------------------------------------------------------------------
    def test_d2_decoder_tp1_prefiller_tp2(self):
        c = self.c
        c.bootstrap()
        ps = [c.prefiller(f"prefiller_tp{r}", tp_rank=r, tp_size=2, layout=layout(0x10000000, 1024))
              for r in range(2)]
        d = c.decoder(layout=layout(0x20000000, 2048))
        for p in ps:
            p.ok(cmd="allocate", p_req_id="p-req-1", transfer_id="xfer-1")
            p.ok(cmd="ready", p_req_id="p-req-1", transfer_id="xfer-1", blocks=[[6, 7]])
        c.pull(d, ("d-req-1", "xfer-1", [[3, 4]]))
        s = c.wait_finished(d, "d-req-1")
        self.assertEqual(sorted(e["worker"] for e in s["exchanges"]), sorted(p.endpoint for p in ps))
        self.assertEqual(len({e["bytes"] for e in s["exchanges"]}), 1)  # same request bytes to both
        for p in ps:
            st = p.ok(cmd="status")
            self.assertEqual(st["writes"], [{"session": d.session, "descriptors": 4, "bytes": 4096, "ret": 0}])
            self.assertEqual(st["finished_sending"], [{"p_req_id": "p-req-1", "transfer_id": "xfer-1", "expired": False}])
        # P rank r writes its whole 1024-byte block at offset r*1024 of the decoder's block.
        c.check_memory(d, {(i, db): [(r * 1024, prov_bytes(i, pb, 1024)) for r in range(2)]
                           for i in range(2) for pb, db in ((6, 3), (7, 4))})
        c.check_clean(*ps, d)

    # --- e_transfer_engine_failure (then expiry of the undelivered transfers) -----------------------------
    def test_e_transfer_failure_then_expiry(self):
        c = self.c
        c.bootstrap()
        p = c.prefiller(abort_timeout_s=1.0)
        d = c.decoder()
        for k, blocks in ((1, [[3, 4]]), (2, [[5]])):
            p.ok(cmd="allocate", p_req_id=f"p-req-{k}", transfer_id=f"xfer-{k}")
            p.ok(cmd="ready", p_req_id=f"p-req-{k}", transfer_id=f"xfer-{k}", blocks=blocks)
        p.ok(cmd="fail_next_transfer", count=1, ret=-1)
        c.pull(d, ("d-req-1", "xfer-1", [[3, 4]]), ("d-req-2", "xfer-2", [[5]]))
        s = c.wait_finished(d, "d-req-1", "d-req-2")
        reason = "Mooncake transfer engine returned -1"
        self.assertEqual(sorted((f["d_req_id"], f["reason"]) for f in s["failed"]),
                         [("d-req-1", reason), ("d-req-2", reason)])
        [reply] = s["exchanges"][0]["replies"]
        self.assertEqual((reply["status"], sorted(reply["err_reqs"]), reply["err_msg"], reply["layout_id"]),
                         (0, ["d-req-1", "d-req-2"], reason, d.layout_id))
        self.assertNotIn("ok_reqs", reply)
        ps = p.ok(cmd="status")
        self.assertEqual(ps["writes"], [{"session": d.session, "descriptors": 4, "bytes": 12288, "ret": -1}])
        c.check_memory(d, {})
        # Failed deliveries do not count: both transfers stay until they expire (abort timeout after ready).
        wait_until(lambda: p.ok(cmd="status")["tracked_transfers"] == 0, "expiry", timeout=5)
        ps = p.ok(cmd="status")
        self.assertEqual(sorted((f["p_req_id"], f["expired"]) for f in ps["finished_sending"]),
                         [("p-req-1", True), ("p-req-2", True)])
        c.check_clean(p, d)

    # --- f_unknown_request --------------------------------------------------------------------------------
    def test_f_unknown_request_times_out(self):
        c = self.c
        c.bootstrap()
        p = c.prefiller(abort_timeout_s=1.0)
        d = c.decoder()
        t0 = time.monotonic()
        c.pull(d, ("d-req-404", "xfer-unknown", [[3, 4]]))
        s = c.wait_finished(d, "d-req-404")
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.assertEqual(s["failed"], [{"d_req_id": "d-req-404", "reason": "Timeout waiting for P side ready.",
                                        "invalid_blocks": [3, 4], "failed_recving": False}])
        self.assertEqual(s["exchanges"][0]["replies"], [{"status": 0, "err_reqs": ["d-req-404"],
                                                         "err_msg": "Timeout waiting for P side ready.",
                                                         "layout_id": d.layout_id}])
        self.assertEqual(p.ok(cmd="status")["writes"], [])
        c.check_memory(d, {})
        c.check_clean(p, d)

    # --- g_continue_then_finish ---------------------------------------------------------------------------
    def test_g_continue_then_finish(self):
        c = self.c
        c.bootstrap()
        p = c.prefiller()
        d = c.decoder()
        p.ok(cmd="allocate", p_req_id="p-req-1", transfer_id="xfer-1")
        p.ok(cmd="allocate", p_req_id="p-req-2", transfer_id="xfer-2")
        p.ok(cmd="ready", p_req_id="p-req-1", transfer_id="xfer-1", blocks=[[3, 4]])
        c.pull(d, ("d-req-1", "xfer-1", [[3, 4]]), ("d-req-2", "xfer-2", [[5, 6, 7]]))
        s = c.wait_finished(d, "d-req-1")
        self.assertNotIn("d-req-2", s["finished"])
        self.assertEqual((s["pending_pulls"], s["open_exchanges"]), (1, 1))
        self.assertEqual(p.ok(cmd="status")["open_exchanges"], 1)
        p.ok(cmd="ready", p_req_id="p-req-2", transfer_id="xfer-2", blocks=[[10, 11, 12]])
        s = c.wait_finished(d, "d-req-2")
        self.assertEqual(s["exchanges"][0]["replies"], [
            {"status": 1, "ok_reqs": ["d-req-1"], "layout_id": d.layout_id},
            {"status": 0, "ok_reqs": ["d-req-2"], "layout_id": d.layout_id}])
        self.assertEqual(p.ok(cmd="status")["writes"], [
            {"session": d.session, "descriptors": 2, "bytes": 8192, "ret": 0},
            {"session": d.session, "descriptors": 2, "bytes": 12288, "ret": 0}])
        c.check_memory(d, whole_blocks([(3, 3), (4, 4), (10, 5), (11, 6), (12, 7)]))
        c.check_clean(p, d)

    # --- h1_layout_reuse_and_miss -------------------------------------------------------------------------
    def test_h1_layout_cache_and_miss(self):
        c = self.c
        c.bootstrap()
        p = c.prefiller()
        d = c.decoder()
        for k, pb in ((1, [[11, 12]]), (2, [[13, 14]]), (3, [[15, 16]])):
            p.ok(cmd="allocate", p_req_id=f"p-req-{k}", transfer_id=f"xfer-{k}")
            p.ok(cmd="ready", p_req_id=f"p-req-{k}", transfer_id=f"xfer-{k}", blocks=pb)
        c.pull(d, ("d-req-1", "xfer-1", [[1, 2]]))
        c.wait_finished(d, "d-req-1")
        c.pull(d, ("d-req-2", "xfer-2", [[2, 3]]))
        s = c.wait_finished(d, "d-req-2")
        self.assertEqual([e["with_layout"] for e in s["exchanges"]], [True, False])
        self.assertEqual(s["exchanges"][1]["bytes"], 173)  # the recorded layout-less pull has 173 bytes too
        self.assertEqual(p.ok(cmd="status")["cached_layouts"], 1)
        p.ok(cmd="forget_layouts")
        c.pull(d, ("d-req-3", "xfer-3", [[3, 4]]))
        s = c.wait_finished(d, "d-req-3")
        self.assertEqual(s["failed"], [])
        ex = s["exchanges"][2:]
        self.assertEqual([e["with_layout"] for e in ex], [False, True])
        port = d.session.rsplit(":", 1)[1]
        self.assertEqual(ex[0]["replies"], [{"status": 3, "err_msg": f"Mooncake KV layout {d.layout_id:#x} from "
                                                                      f"127.0.0.1:{port} is not cached."}])
        self.assertEqual(ex[1]["replies"], [{"status": 0, "ok_reqs": ["d-req-3"], "layout_id": d.layout_id}])
        # Later pulls overwrite D blocks 2 and 3, as in the recording.
        c.check_memory(d, whole_blocks([(11, 1), (13, 2), (15, 3), (16, 4)]))
        c.check_clean(p, d)

    # --- h2_layout_mismatch_error -------------------------------------------------------------------------
    def test_h2_layout_mismatch(self):
        c = self.c
        c.bootstrap()
        p = c.prefiller()
        d = c.decoder(layout=layout(0x20000000, 4096))
        p.ok(cmd="allocate", p_req_id="p-req-1", transfer_id="xfer-1")
        c.pull(d, ("d-req-1", "xfer-1", [[3, 4]]))
        s = c.wait_finished(d, "d-req-1")
        msg = "Mooncake KV region length mismatch for homogeneous TP at region 0: local=2048, remote=4096."
        self.assertEqual(s["failed"], [{"d_req_id": "d-req-1", "reason": msg, "invalid_blocks": [3, 4],
                                        "failed_recving": False}])
        self.assertEqual(s["exchanges"][0]["replies"], [{"status": 2, "err_msg": msg}])
        self.assertEqual(p.ok(cmd="status")["writes"], [])
        p.ok(cmd="abort", transfer_id="xfer-1")
        c.check_memory(d, {})
        c.check_clean(p, d)

    # --- free-only pull (D has nothing to receive, P may free its blocks) ---------------------------------
    def test_free_only_pull(self):
        c = self.c
        c.bootstrap()
        p = c.prefiller()
        d = c.decoder()
        p.ok(cmd="allocate", p_req_id="p-req-1", transfer_id="xfer-1")
        p.ok(cmd="ready", p_req_id="p-req-1", transfer_id="xfer-1", blocks=[[3]])
        c.pull(d, ("d-req-1", "xfer-1", []))
        wait_until(lambda: p.ok(cmd="status")["finished_sending"], "free-only delivery")
        s = wait_until(lambda: (lambda s: s if s["pending_pulls"] == 0 else None)(d.ok(cmd="status")), "settle")
        self.assertEqual(s["finished"], [])  # a request without local blocks is never reported
        self.assertEqual(s["exchanges"][0]["replies"], [{"status": 0, "ok_reqs": ["d-req-1"], "layout_id": d.layout_id}])
        self.assertEqual(p.ok(cmd="status")["writes"], [])  # nothing to write, no transfer-engine call
        c.check_clean(p, d)

    # --- mixed revisions: 0.33.0 decoder with a 0.32.0 prefiller and the other way round --------------------
    def test_mixed_revisions(self):
        c = self.c
        c.bootstrap()
        p32 = c.prefiller("prefiller32", rev="vllm-0.32.0")
        d33 = c.decoder("decoder33")
        for k in (1, 2):
            p32.ok(cmd="allocate", p_req_id=f"p-req-{k}", transfer_id=f"xfer-{k}")
            p32.ok(cmd="ready", p_req_id=f"p-req-{k}", transfer_id=f"xfer-{k}", blocks=[[k]])
            c.pull(d33, (f"d-req-{k}", f"xfer-{k}", [[k + 10]]))
            s = c.wait_finished(d33, f"d-req-{k}")
        # A 0.32.0 prefiller never echoes layout_id, so the 0.33.0 decoder keeps sending its layout.
        self.assertEqual([e["with_layout"] for e in s["exchanges"]], [True, True])
        self.assertEqual([e["replies"] for e in s["exchanges"]],
                         [[{"status": 0, "ok_reqs": [f"d-req-{k}"]}] for k in (1, 2)])
        c.check_memory(d33, whole_blocks([(1, 11), (2, 12)]))
        p33 = c.prefiller("prefiller33", engine_id="engine-prefill-1", dp_rank=1)
        d32 = c.decoder("decoder32", rev="vllm-0.32.0")
        p33.ok(cmd="allocate", p_req_id="p-req-9", transfer_id="xfer-9")
        p33.ok(cmd="ready", p_req_id="p-req-9", transfer_id="xfer-9", blocks=[[9]])
        c.pull(d32, ("d-req-9", "xfer-9", [[19]]), engine="engine-prefill-1")
        s = c.wait_finished(d32, "d-req-9")
        self.assertEqual(s["exchanges"][0]["replies"], [{"status": 0, "ok_reqs": ["d-req-9"]}])
        c.check_memory(d32, whole_blocks([(9, 19)]))
        c.check_clean(p32, d33, p33, d32)

    # --- i_bootstrap_register_query (and a conflicting prefiller) -----------------------------------------
    def test_i_bootstrap(self):
        c = self.c
        b = c.bootstrap()

        def call(method, path, body=None, raw=None):
            data = raw if raw is not None else (None if body is None else json.dumps(body, separators=(",", ":")).encode())
            req = urllib.request.Request(c.url + path, data=data, method=method,
                                         headers={"content-type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()

        def reg(tp, addr, engine="engine-prefill-0", dp=0):
            return call("POST", "/register", {"engine_id": engine, "dp_rank": dp, "tp_rank": tp, "pp_rank": 0,
                                              "addr": addr})

        a0, a1, a2 = "tcp://127.0.0.1:37175", "tcp://127.0.0.1:43531", "tcp://127.0.0.1:36339"
        self.assertEqual(call("GET", "/query"), (200, "{}"))
        self.assertEqual(reg(0, a0), (200, '{"status":"ok"}'))
        self.assertEqual(reg(1, a1), (200, '{"status":"ok"}'))
        self.assertEqual(reg(0, a0), (200, '{"status":"ok"}'))  # identical re-registration (0.31.0+)
        self.assertEqual(reg(0, a2), (400, json.dumps({"detail": (
            f"Worker with dp_rank=0, tp_rank=0, pp_rank=0 is already registered at {a0}, "
            f"but still want to register at {a2}")}, separators=(",", ":"))))
        self.assertEqual(reg(2, a2, engine="engine-other"), (400, json.dumps({"detail": (
            "Engine ID mismatch for dp_rank=0: expected engine-prefill-0, got engine-other")}, separators=(",", ":"))))
        status, body = call("POST", "/register", {"engine_id": "e", "dp_rank": 0, "tp_rank": 0, "pp_rank": 0})
        self.assertEqual(status, 422)
        self.assertEqual([e["loc"] for e in json.loads(body)["detail"]], [["body", "addr"]])
        self.assertEqual(call("POST", "/register", raw=b"{not json")[0], 422)
        self.assertEqual(call("POST", "/register", {"engine_id": 5, "dp_rank": "x", "tp_rank": 0, "pp_rank": 0,
                                                    "addr": a0})[0], 422)
        self.assertEqual(call("GET", "/register")[0], 405)
        self.assertEqual(call("GET", "/nope")[0], 404)
        # The recorded /query body, byte for byte (insertion order, decimal string keys).
        self.assertEqual(call("GET", "/query"), (200, (
            '{"0":{"engine_id":"engine-prefill-0","worker_addr":{"0":{"0":"%s"},"1":{"0":"%s"}}}}' % (a0, a1))))

        # A prefiller whose slot is taken fails to start with the bootstrap's 400.
        dup = c.spawn("prefiller_dup")
        dup.wait_hello()
        a = dup.cmd(cmd="start", role="prefiller", revision=REV, config={
            "engine_id": "engine-prefill-0", "dp_rank": 0, "tp_rank": 0, "tp_size": 2, "pp_rank": 0, "pp_size": 1,
            "bootstrap": c.url, "abort_timeout_s": 10, "model": model(), "layout": layout(0x10000000, 1024)})
        self.assertFalse(a["ok"])
        self.assertIn("400", a["error"])
        self.assertIn("already registered", a["error"])

        # What a prefiller sends to /register, byte for byte (vLLM key order, compact JSON).
        seen = []

        class Capture(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                seen.append((self.path, self.rfile.read(int(self.headers["content-length"])).decode()))
                out = b'{"status":"ok"}'
                self.send_response(200)
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        srv = http.server.HTTPServer(("127.0.0.1", 0), Capture)
        th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        th.start()
        try:
            p = c.prefiller("prefiller_capture", bootstrap=f"http://127.0.0.1:{srv.server_address[1]}", tp_rank=1,
                            tp_size=2, dp_rank=3, layout=layout(0x10000000, 1024))
        finally:
            srv.shutdown()
            srv.server_close()
            th.join(timeout=5)
        self.assertEqual(seen, [("/register", '{"engine_id":"engine-prefill-0","dp_rank":3,"tp_rank":1,"pp_rank":0,'
                                              f'"addr":"{p.endpoint}"}}')])
        self.assertEqual(b.ok(cmd="status")["table"]["0"]["worker_addr"]["0"]["0"], a0)

    # --- raw wire: recorded request bytes against the prefiller, reply bytes compared ---------------------
    def test_raw_wire_against_prefiller(self):
        c = self.c
        c.bootstrap()
        p = c.prefiller()  # the recorded prefiller layout: 2 regions of 2048 bytes

        def recorded(name):
            with open(os.path.join(TRACES, REV, name + ".jsonl")) as f:
                events = [json.loads(x) for x in f][1:]
            return [(e["dir"], bytes.fromhex(e["frames"][-1])) for e in events
                    if e["kind"] == "zmq" and e["socket"] == "DEALER"]

        ctx = zmq.Context()

        def exchange(frames, replies=1):
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.RCVTIMEO, 10000)
            try:
                s.connect(p.endpoint)
                s.send_multipart(frames)
                return [s.recv() for _ in range(replies)]
            finally:
                s.close()

        try:
            h2 = recorded("h2_layout_mismatch_error")
            self.assertEqual(exchange([h2[0][1]]), [h2[1][1]])  # ERROR, byte for byte
            h1 = recorded("h1_layout_reuse_and_miss")
            miss = [k for k, (d, b) in enumerate(h1) if d == "recv" and b[8:9] == b"\x03"][0]
            self.assertEqual(exchange([h1[miss - 1][1]]), [h1[miss][1]])  # LAYOUT_MISS, byte for byte

            enc = msgspec.msgpack.Encoder()
            dec = msgspec.msgpack.Decoder()
            base = dec.decode(h2[0][1])
            cases = [
                (b"\x90", "Expected `object`, got `array`"),
                (enc.encode({k: v for k, v in base.items() if k != "kv_block_lens"}),
                 "Object missing required field `kv_block_lens`"),
                (enc.encode(dict(base, remote_tp_rank=1)),
                 "This D tp_rank 1 is not paired with P tp_rank 0; expected one of [0]."),
                (enc.encode(dict(base, remote_tp_size=0)), "integer modulo by zero"),
                (enc.encode(dict(base, req_blocks={"d": ["x", [[1]], 3]})),
                 "Expected `array` of length 2, got 3 - at `$.req_blocks[...]`"),
                (enc.encode(dict(base, registered_layer_indices=[0])),
                 "Mooncake transfer regions require matching metadata lengths, got base_addrs=2, block_lens=2, "
                 "kv_block_lens=2, layer_names=2, layer_indices=1."),
                (enc.encode(dict(base, registered_layer_indices=[0, 7])),
                 "Mooncake registered layer index mismatch for model.layers.1.self_attn: producer=1, consumer=7."),
                (enc.encode(dict(base, registered_layer_names=[L0, L3])),
                 "Mooncake producer registered layer has no matching consumer occurrence: "
                 "model.layers.1.self_attn occurrence 0."),
            ]
            for payload, msg in cases:
                [reply] = exchange([payload])
                self.assertEqual(dec.decode(reply), {"status": 2, "err_msg": msg})
            self.assertTrue(p.ok(cmd="status")["listener_alive"])
            # Three frames (what a REQ socket would send) end a vLLM prefiller's listener for good: a pull
            # that was waiting never gets its answer, later pulls get none either.
            good = dec.decode(h1[0][1])  # a layout-carrying pull that fits the prefiller's layout
            waiting = ctx.socket(zmq.DEALER)
            waiting.setsockopt(zmq.LINGER, 0)
            waiting.connect(p.endpoint)
            waiting.send(enc.encode(dict(good, req_blocks={"d-wait": ["xfer-never", [[1]]]})))
            wait_until(lambda: p.ok(cmd="status")["open_exchanges"] == 1, "the waiting pull")
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(p.endpoint)
            s.send_multipart([b"", h2[0][1]])
            wait_until(lambda: not p.ok(cmd="status")["listener_alive"], "listener to stop")
            s.close()
            self.assertEqual(waiting.poll(300), 0)
            waiting.close()
            late = ctx.socket(zmq.DEALER)
            late.setsockopt(zmq.LINGER, 0)
            late.connect(p.endpoint)
            late.send(h2[0][1])
            self.assertEqual(late.poll(300), 0)
            late.close()
        finally:
            ctx.term()
        p.ok(cmd="status")
        c.check_clean(p)


# ------------------------------------------------------------------------------------------------------------
# The prefiller's planning code against vLLM 0.33.0's own outputs (conformance/vectors/plan, see GOLDEN.md)

sys.path.insert(0, HERE)
import peer_regions as pr  # noqa: E402  (the peer's module under test)

PLAN = os.path.join(ROOT, "conformance", "vectors", "plan")


def golden(name):
    with open(os.path.join(PLAN, name + ".jsonl")) as f:
        lines = [json.loads(x) for x in f]
    assert lines[0]["format"] == "mooncake-golden" and lines[0]["vllm_version"] == "0.33.0"
    return lines[1:]


def outcome(fn):
    try:
        return {"output": fn()}
    except (AssertionError, ZeroDivisionError, ValueError, KeyError, IndexError) as e:
        return {"error": f"{type(e).__name__}: {e}"}


def regions(objs):
    return [pr.Region(o["layer_name"], o["layer_index"], o["base_addr"], o["block_len"], o["kv_block_len"],
                      o["group_index"], tuple(o["shared_group_ids"]), o["row_offset"]) for o in objs]


def as_json(rs):
    return [{"layer_name": r.layer_name, "layer_index": r.layer_index, "base_addr": r.base_addr,
             "block_len": r.block_len, "kv_block_len": r.kv_block_len, "group_index": r.group_index,
             "shared_group_ids": list(r.shared_group_ids), "row_offset": r.row_offset} for r in rs]


def worker_model(w, pp_size=1):
    return pr.Model(tp_rank=w["tp_rank"], tp_size=w["tp_size"], pp_size=pp_size,
                    total_num_kv_heads=w["total_num_kv_heads"], use_mla=w["use_mla"],
                    group_kinds=tuple(w["group_kinds"]),
                    physical_blocks_per_logical=w.get("physical_blocks_per_logical", 1),
                    layer_groups={}, padded_pages=w.get("padded_pages", False))


class PlanGolden(unittest.TestCase):
    def check(self, name, compute, skip=lambda case: False):
        n = 0
        for case in golden(name):
            if skip(case):
                continue
            want = {k: case[k] for k in ("output", "error") if k in case}
            got = outcome(lambda: compute(case["input"]))
            self.assertEqual(got, want, f"{name} {case['id']}")
            n += 1
        self.assertGreater(n, 0)

    def test_tp_ratio(self):
        self.check("get_tp_ratio", lambda i: pr.tp_ratio(i["local_tp_size"], i["remote_tp_size"]))

    def test_topology(self):
        def run(i):
            out = {}
            for key, fn in (("tp_ratio", lambda: pr.tp_ratio(i["tp_size"], i["remote_tp_size"])),
                            ("handshake_target_ranks", lambda: pr.target_ranks(i["tp_rank"], i["tp_size"],
                                                                                i["remote_tp_size"]))):
                r = outcome(fn)
                out[key] = r["output"] if "output" in r else {"error": r["error"]}
            out["local_replicates_kv_cache"] = pr.Model(tp_size=i["tp_size"], total_num_kv_heads=i["total_num_kv_heads"],
                                                        use_mla=i["is_mla"]).replicated
            return out

        def compute(i):
            want_keys = ("tp_ratio", "handshake_target_ranks", "local_replicates_kv_cache")
            return {k: v for k, v in run(i).items() if k in want_keys}

        for case in golden("transfer_topology"):
            i = case["input"]
            if i["dcp_size"] != 1 or i["remote_dcp_size"] != 1:
                continue  # decode context parallelism is out of scope
            want = {k: case["output"][k] for k in ("tp_ratio", "handshake_target_ranks", "local_replicates_kv_cache")}
            self.assertEqual(compute(i), want, case["id"])

    def test_byte_plan(self):
        self.check("compute_sender_transfer_plan", lambda i: list(pr.byte_plan(
            i["local_tp_rank"], i["local_tp_size"], i["remote_tp_rank"], i["remote_tp_size"],
            i["local_kv_block_len"], i["remote_kv_block_len"], i["producer_cache_replicated"],
            i["total_num_kv_heads"])))

    def test_can_merge(self):
        self.check("can_coalesce_block_transfers", lambda i: pr.can_merge_blocks(
            i["local_region_block_len"], i["remote_region_block_len"], i["src_region_offset"],
            i["dst_region_offset"], i["transfer_len"]))

    def test_contiguous_runs(self):
        self.check("group_concurrent_contiguous", lambda i: list(pr.contiguous_runs(i["src_indices"], i["dst_indices"])),
                   skip=lambda c: len(c["input"]["src_indices"]) != len(c["input"]["dst_indices"]))

    def test_block_ids_for_region(self):
        self.check("block_ids_for_region", lambda i: pr.region_block_ids(
            i["block_ids_by_group"], i["group_index"], tuple(i["shared_group_ids"] or ())))

    def test_build_regions(self):
        def run(i):
            shared = i.get("shared_group_ids")
            return as_json(pr.build_regions(i["base_addrs"], i["block_lens"], i["kv_block_lens"], i["layer_names"],
                                            i["layer_indices"], i.get("group_indices"),
                                            None if shared is None else [tuple(x) for x in shared],
                                            i.get("row_offsets")))
        self.check("expand_transfer_regions", run)

    def test_validate_lengths(self):
        self.check("validate_asymmetric_region_lengths", lambda i: pr.validate_lengths(
            regions(i["local_regions"]), regions(i["remote_regions"]), i["local_tp_size"], i["remote_tp_size"],
            i["producer_cache_replicated"], i["total_num_kv_heads"]))

    def test_align(self):
        def run(i):
            a, b, err = pr.align(regions(i["local_regions"]), regions(i["remote_regions"]), i["allow_partial_layers"])
            return [as_json(a), as_json(b), err]
        self.check("align_transfer_regions", run)

    def test_coalesce(self):
        def run(i):
            a, b = pr.coalesce(regions(i["local_regions"]), regions(i["remote_regions"]), i["promote_full_row"])
            return [as_json(a), as_json(b)]
        self.check("coalesce_contiguous_transfer_regions", run)

    def test_opaque_rows(self):
        self.check("has_opaque_packed_row", lambda i: pr.has_opaque_row(i["row_offsets"], i["kv_block_lens"],
                                                                        i["block_lens"]))
        self.check("pp_mismatch_hides_packed_layers", lambda i: pr.pp_mismatch_hides_layers(
            i["local_pp_size"], i["remote_pp_size"], i["local_has_opaque_row"], i["remote_row_offsets"],
            i["remote_kv_block_lens"], i["remote_block_lens"]))

    def test_build_descriptors(self):
        def run(i):
            model = worker_model(i["worker"])
            reqs = i["reqs"]
            descs, err_reqs, err_msg = pr.build_descriptors(
                model, [(r["d_req_id"], r["local_block_ids"]) for r in reqs],
                {r["d_req_id"]: (r["transfer_id"], r["remote_block_ids"]) for r in reqs},
                i["remote_tp_rank"], i["remote_tp_size"], regions(i["local_regions"]), regions(i["remote_regions"]))
            return {"src_ptrs": [d[0] for d in descs], "dst_ptrs": [d[1] for d in descs],
                    "lengths": [d[2] for d in descs], "err_reqs": err_reqs, "err_msg": err_msg}
        self.check("build_transfer_params", run)

    def test_sender_pipeline(self):
        """The prefiller's whole preparation, in its order, on vLLM's pipeline cases."""
        import peer_wire

        dec = msgspec.msgpack.Decoder(peer_wire.Request33)
        enc = msgspec.msgpack.Encoder()

        def run(i):
            prod = i["producer"]
            model = worker_model(prod, prod["pp_size"])
            meta = dec.decode(enc.encode(i["xfer_metadata"]))
            local, local_err = pr.local_regions_of(model, prod["layout"])
            out = {"handshake_target_ranks": pr.target_ranks(model.tp_rank, model.tp_size, meta.remote_tp_size)}
            out["paired"] = meta.remote_tp_rank in out["handshake_target_ranks"]
            out["pp_mismatch_hides_packed_layers"] = pr.pp_mismatch_hides_layers(
                model.pp_size, meta.remote_pp_size, False, meta.registered_row_offsets, meta.kv_block_lens,
                meta.block_lens)
            # (vLLM's recorded pipeline keeps going after a failed pairing or PP check; so do we, here)
            a, b, err = pr.prepare(model, local, local_err, meta)
            out["prepare"] = {"local_regions": as_json(a), "remote_regions": as_json(b), "error": err}
            if err is not None:
                return out
            out["validation_total_num_kv_heads"] = model.known_heads
            out["producer_cache_replicated"] = model.replicated
            out["validation_error"] = pr.validate_lengths(a, b, model.tp_size, meta.remote_tp_size, model.replicated,
                                                          model.known_heads)
            if out["validation_error"] is not None:
                return out
            ready = [(d, i["producer_block_ids"][d]) for d in meta.req_blocks]
            descs, err_reqs, err_msg = pr.build_descriptors(model, ready, meta.req_blocks, meta.remote_tp_rank,
                                                            meta.remote_tp_size, a, b)
            out["build"] = {"src_ptrs": [d[0] for d in descs], "dst_ptrs": [d[1] for d in descs],
                            "lengths": [d[2] for d in descs], "err_reqs": err_reqs, "err_msg": err_msg}
            return out
        self.check("sender_pipeline", run)


if __name__ == "__main__":
    faulthandler.dump_traceback_later(600, exit=True)
    unittest.main(verbosity=2)
