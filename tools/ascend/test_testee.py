#!/usr/bin/env python3
"""Self-check of tools/ascend/testee.py that needs neither torch, vLLM, vllm-ascend nor the engine (standard library
only; run by scripts/test.sh): the runner's addresses map onto the worker's regions, the layout becomes the worker's
cache shape, each testee command becomes the worker commands the recorder uses (with the kv_transfer_params a
prefiller returns), the worker's answers and tapped traffic become the protocol's status, and a testee whose worker
cannot import its stack still says hello and answers `start` with why."""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import provenance  # noqa: E402
import record  # noqa: E402
import testee  # noqa: E402

BASE = 0x7100_0000_0000
SPAN = 0x1_0000_0000
# The bundled recordings' layout, as the runner's pull players derive it (conformance/src/setup/pull.rs).
LAYOUT = {"kv_caches_base_addr": [BASE + r * SPAN for r in range(4)], "block_lens": [1024] * 4, "num_blocks": 32}


class FakeWorker:
    """A worker process stand-in: records each command, answers from `answers` (name → dict or list of dicts)."""

    def __init__(self, answers=None, imported=None):
        self.sent, self.answers = [], dict(answers or {})
        self.imported = imported or {"ok": True, "imported": True}

    def get(self, timeout, what):
        if isinstance(self.imported, Exception):
            raise self.imported
        if not self.imported.get("ok"):
            raise record.RecordError(self.imported["error"])
        return self.imported

    def cmd(self, what, timeout=60, **kw):
        self.sent.append((what, kw))
        a = self.answers.get(what, {})
        if isinstance(a, list):
            a = a.pop(0) if len(a) > 1 else a[0]
        return dict(a, ok=True)


REG = {"register": {"handshake_port": 41000, "te_rpc_port": 15000, "kv_caches_base_addr": [[1, 2], [3, 4]]},
       "tables": {"reqs_to_process": 0, "delayed": 0}}


def zmq(bound, direction):
    return {"kind": "zmq", "bound": bound, "dir": direction, "frames": []}


def start(role, config=None, answers=None):
    w = FakeWorker(dict(REG, **(answers or {})))
    d = testee.Driver("0.18.0", w)
    cfg = {"layout": LAYOUT, "model": {"block_size": 16}, **(config or {})}
    answer = d.handle({"cmd": "start", "role": role, "revision": "vllm-ascend-0.18.0", "config": cfg})
    return d, w, answer


class LayoutTest(unittest.TestCase):
    def test_the_runners_addresses_map_onto_the_regions(self):
        m = testee.AddressMap(LAYOUT)
        self.assertEqual(m.locate(BASE, 32 * 1024), (0, 0))
        self.assertEqual(m.locate(BASE + 3 * SPAN + 5 * 1024, 1024), (3, 5 * 1024))
        for addr, n in ((BASE + 32 * 1024 - 8, 16), (BASE - 1, 1), (BASE + 4 * SPAN, 1)):
            with self.assertRaises(ValueError):
                m.locate(addr, n)
        with self.assertRaises(ValueError):
            testee.AddressMap({"kv_caches_base_addr": [BASE], "block_lens": [], "num_blocks": 32})

    def test_region_lists_flatten_in_order(self):
        self.assertEqual(testee.flat([[1, 2], [3, 4]]), [1, 2, 3, 4])  # 0.23.0.post1: per layer
        self.assertEqual(testee.flat([1, 2, 3, 4]), [1, 2, 3, 4])  # 0.18.0

    def test_the_layout_gives_the_worker_its_cache_shape(self):
        self.assertEqual(testee.model_options(LAYOUT, 16, 1),
                         ["--num-blocks", "32", "--num-layers", "2", "--kv-heads", "4", "--block-size", "16"])
        self.assertEqual(testee.model_options(LAYOUT, 16, 2)[5], "8")  # heads per rank × ranks
        for bad in ({"block_lens": [1024] * 3, "kv_caches_base_addr": [BASE] * 3},
                    {"block_lens": [1000] * 4}, {"block_lens": [1024, 512, 1024, 512]}):
            with self.assertRaises(testee.Unsupported):
                testee.model_options(dict(LAYOUT, **bad), 16, 1)

    def test_the_provenance_pattern_names_region_block_and_word(self):
        b = provenance.block_bytes(3, 5, 64)
        self.assertEqual(len(b), 64)
        w = int.from_bytes(b[8:16], "little")
        self.assertEqual(w, 0x4D43 << 48 | 3 << 36 | 5 << 16 | 1)
        self.assertEqual(provenance.decode(w), (3, 5, 1))
        self.assertIsNone(provenance.decode(0))
        self.assertEqual(provenance.block_bytes(0, 0, 12), provenance.block_bytes(0, 0, 16)[:12])


class PrefillerTest(unittest.TestCase):
    def test_start_configures_a_prefiller_worker_with_the_pattern(self):
        d, w, answer = start("prefiller", {"engine_id": "engine-prefill-0", "abort_timeout_s": 2,
                                           "bind": "tcp://127.0.0.1:41000"})
        self.assertEqual(answer, {"endpoint": "tcp://127.0.0.1:41000"})
        (name, kw), (reg, _) = w.sent
        self.assertEqual((name, reg), ("configure", "register"))
        argv = kw["argv"]
        opt = lambda k: argv[argv.index(k) + 1]  # noqa: E731
        self.assertEqual((opt("--role"), opt("--engine-id"), opt("--kv-port"), opt("--fill"), opt("--num-blocks")),
                         ("prefiller", "engine-prefill-0", "41000", "provenance", "32"))
        self.assertEqual(kw["env"], {"VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT": "2"})

    def test_ready_and_status(self):
        d, w, _ = start("prefiller", answers={
            "poll": [{"sending": ["req-1"], "expired": []}, {"sending": ["req-2"], "expired": ["req-2"]}],
            "tables": [{"reqs_to_process": 1}, {"reqs_to_process": 0}],
            "events": [{"events": [zmq(True, "recv"), zmq(True, "send"), zmq(True, "recv")]},
                       {"events": [zmq(True, "send")]}]})
        d.handle({"cmd": "ready", "p_req_id": "p-1", "transfer_id": "req-1", "blocks": [[1, 2], [3]]})
        self.assertEqual(w.sent[-1], ("send", {"req_id": "req-1", "blocks": [1, 2, 3]}))
        s = d.handle({"cmd": "status"})
        self.assertEqual((s["tracked_transfers"], s["open_exchanges"], s["writes"]), (1, 1, []))
        self.assertEqual(s["finished_sending"], [{"p_req_id": "p-1", "transfer_id": "req-1", "expired": False}])
        s = d.handle({"cmd": "status"})
        self.assertEqual((s["tracked_transfers"], s["open_exchanges"]), (0, 0))
        self.assertEqual(s["finished_sending"][1], {"p_req_id": "req-2", "transfer_id": "req-2", "expired": True})

    def test_what_the_pull_prefiller_has_not(self):
        d, _, _ = start("prefiller")
        for cmd in ({"cmd": "fail_next_transfer"}, {"cmd": "forget_layouts"}, {"cmd": "pull", "requests": []}):
            with self.assertRaises(testee.Unsupported):
                d.handle(cmd)
        with self.assertRaises(testee.Unsupported):
            start("prefiller", {"bootstrap": "http://127.0.0.1:1"})
        with self.assertRaises(testee.Unsupported):
            testee.Driver("0.18.0", FakeWorker()).handle({"cmd": "start", "role": "prefiller",
                                                          "revision": "vllm-ascend-0.23.0.post1", "config": {}})


class DecoderTest(unittest.TestCase):
    def test_pull_hands_the_worker_the_prefillers_kv_transfer_params(self):
        d, w, answer = start("decoder")
        self.assertEqual(answer, {"session": "127.0.0.1:15000"})
        d.handle({"cmd": "pull", "requests": [{"d_req_id": "d-1", "transfer_id": "req-1", "blocks": [[4, 5, 6]],
                                               "remote_blocks": [[1, 2, 3]], "engine_id": "engine-prefill-0",
                                               "remote_host": "127.0.0.1", "remote_port": 33000}]})
        name, kw = w.sent[-1]
        self.assertEqual((name, kw["req_id"], kw["local_blocks"]), ("pull", "d-1", [4, 5, 6]))
        self.assertEqual(kw["params"], record.pull_params("req-1", [1, 2, 3], "127.0.0.1", 33000,
                                                          "engine-prefill-0"))
        self.assertEqual((kw["params"]["remote_request_id"], kw["params"]["remote_port"]), ("req-1", 33000))

    def test_status_maps_finished_load_errors_reads_and_open_exchanges(self):
        read = {"kind": "te_read", "session": "127.0.0.1:9", "n": 4, "bytes": 12288, "ret": -1}
        d, w, _ = start("decoder", answers={
            "poll": [{"recving": [], "load_errors": []}, {"recving": ["d-1"], "load_errors": [4, 5, 6]}],
            "tables": [{"reqs_to_process": 1}, {"reqs_to_process": 0}],
            "events": [{"events": [zmq(False, "send"), zmq(False, "recv"), read, zmq(False, "send")]},
                       {"events": [zmq(False, "recv")]}]})
        d.handle({"cmd": "fail_next_transfer", "count": 1, "ret": -1})
        self.assertEqual(w.sent[-1], ("fail_next_read", {"count": 1, "ret": -1}))
        d.handle({"cmd": "pull", "requests": [{"d_req_id": "d-1", "transfer_id": "d-1", "blocks": [[4, 5, 6]],
                                               "remote_blocks": [[1, 2, 3]], "remote_host": "127.0.0.1",
                                               "remote_port": 1}]})
        d.pulled["d-2"] = [7, 8]  # another request, not failed
        s = d.handle({"cmd": "status"})
        self.assertEqual((s["finished"], s["failed"], s["pending_pulls"], s["open_exchanges"]), ([], [], 1, 1))
        self.assertEqual(s["reads"], [{"session": "127.0.0.1:9", "descriptors": 4, "bytes": 12288, "ret": -1}])
        s = d.handle({"cmd": "status"})
        self.assertEqual((s["finished"], s["pending_pulls"], s["open_exchanges"]), (["d-1"], 0, 0))
        self.assertEqual(s["failed"], [{"d_req_id": "d-1", "reason": "its blocks are in get_block_ids_with_load_"
                                        "errors", "invalid_blocks": [4, 5, 6], "failed_recving": False}])
        self.assertEqual(len(d.handle({"cmd": "status"})["finished"]), 1)  # each request once

    def test_read_memory_reads_the_worker_region_at_the_runners_address(self):
        d, w, _ = start("decoder", answers={"read": {"hex": "00" * 16}})
        self.assertEqual(d.handle({"cmd": "read_memory", "addr": BASE + 2 * SPAN + 4096, "len": 16}),
                         {"hex": "00" * 16})
        self.assertEqual(w.sent[-1], ("read", {"region": 2, "offset": 4096, "len": 16}))
        with self.assertRaises(ValueError):
            d.handle({"cmd": "read_memory", "addr": 4096, "len": 16})


class ProtocolTest(unittest.TestCase):
    def test_serve_answers_each_line_once(self):
        d = testee.Driver("0.23.0.post1", FakeWorker(imported={"ok": False, "error": "no torch"}))
        out = []
        testee.serve(d, ["not json\n", "\n", '{"cmd": "status"}\n', '{"cmd": "forget_layouts"}\n',
                         '{"cmd": "start", "role": "decoder", "config": {"layout": %s}}\n' % json.dumps(LAYOUT),
                         '{"cmd": "stop"}\n', '{"cmd": "status"}\n'], out.append)
        self.assertEqual([a["ok"] for a in out], [False, False, False, False, True])
        self.assertIn("bad command line", out[0]["error"])
        self.assertEqual(out[1]["error"], "no role started for status")
        self.assertEqual(out[2]["error"], "unsupported: forget_layouts")
        self.assertIn("cannot import its stack: no torch", out[3]["error"])

    def test_still_importing_is_not_a_failure(self):
        w = FakeWorker(imported=record.ReplyTimeout("slow"))
        d = testee.Driver("0.18.0", w)
        with self.assertRaises(RuntimeError):
            d.wait_imported(0)
        self.assertIsNone(d.imported)
        w.imported = {"ok": True, "imported": True}
        d.wait_imported(0)
        self.assertTrue(d.imported["ok"])

    def test_a_testee_without_its_stack_says_hello_then_why(self):
        probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True)
        if probe.returncode == 0:
            print("SKIPPED: tools/ascend testee start-failure check — this python has torch")
            return
        cmds = ['{"cmd": "start", "role": "prefiller", "config": {"layout": %s}}' % json.dumps(LAYOUT),
                '{"cmd": "stop"}']
        p = subprocess.run([sys.executable, os.path.join(HERE, "testee.py"), "--release", "0.18.0"],
                           input="\n".join(cmds) + "\n", capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        hello, started, stopped = [json.loads(line) for line in p.stdout.splitlines()]
        self.assertEqual((hello["hello"], hello["revisions"], hello["roles"]),
                         ("mooncake-testee", ["vllm-ascend-0.18.0"], ["prefiller", "decoder"]))
        self.assertFalse(started["ok"])
        self.assertIn("torch", started["error"])
        self.assertEqual(stopped, {"ok": True})


if __name__ == "__main__":
    unittest.main(verbosity=2)
