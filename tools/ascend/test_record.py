#!/usr/bin/env python3
"""Self-check of tools/ascend that needs neither torch, vLLM, vllm-ascend nor the engine (standard library only;
run by scripts/test.sh): the coordinator merges the workers' tapped events into one trace in time order, with the
header the pull-family validator reads; a worker that cannot import its stack answers `start` with the reason and
the recorder exits 3 without writing a trace; bad usage exits 2."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import record  # noqa: E402


def zmq(conn, side, sock, bound, direction, t, frames):
    return {"kind": "zmq", "side": side, "conn": conn, "socket": "ROUTER" if bound else "REQ",
            "endpoint": "tcp://127.0.0.1:30000", "sock": sock, "bound": bound, "dir": direction,
            "frames": frames, "t": t}


class Worker:
    def __init__(self, conn):
        self.conn = conn


class TraceTest(unittest.TestCase):
    def test_events_merge_by_time_with_the_pull_header(self):
        rec = type("R", (), {"release": "0.18.0", "recorded_from": "test"})()
        events = [  # as the workers' `events` replies arrive: per process, not in time order across them
            zmq("prefiller0", "prefiller", 1, True, "recv", 2_000, ["00aa", "", "92"]),
            zmq("prefiller0", "prefiller", 1, True, "send", 3_000, ["00aa", "", "85"]),
            zmq("decoder0", "decoder", 1, False, "send", 1_000, ["92"]),
            zmq("decoder0", "decoder", 1, False, "recv", 4_000, ["85"]),
            {"kind": "te_read", "conn": "decoder0", "session": "127.0.0.1:1", "n": 4, "bytes": 4096, "ret": 0,
             "t": 3_500},
        ]
        lines = record.trace(rec, "a_meta_then_done", "d", [Worker("prefiller0"), Worker("decoder0")], events,
                             {}, None, 0)
        h, evs = lines[0], lines[1:]
        self.assertEqual((h["family"], h["vllm_version"], h["connector_generation"]), ("pull", "0.18.0", 1))
        self.assertEqual(list(h["roles"].items()), [("decoder0", "decoder"), ("prefiller0", "prefiller")])
        self.assertEqual(h["conn_endpoints"]["decoder0"], ["tcp://127.0.0.1:30000"])
        self.assertEqual(h["transfer_engine_reads"],
                         [{"conn": "decoder0", "session": "127.0.0.1:1", "n": 4, "bytes": 4096, "ret": 0}])
        self.assertEqual([(e["seq"], e["conn"], e["dir"]) for e in evs],
                         [(1, "decoder0", "send"), (2, "prefiller0", "recv"), (3, "prefiller0", "send"),
                          (4, "decoder0", "recv")])
        self.assertEqual([e["t"] for e in evs], [0.0, 1e-6, 2e-6, 3e-6])
        # Socket ids: one per (process, socket), numbered by first event; the ROUTER's events carry the note.
        self.assertEqual([e["socket_id"] for e in evs], [1, 2, 2, 1])
        self.assertEqual(["note" in e for e in evs], [False, True, True, False])
        self.assertNotIn("sock", evs[0])
        json.dumps(lines)  # every line is JSON

    def test_an_injected_read_failure_is_marked_in_the_header(self):
        rec = type("R", (), {"release": "0.23.0.post1", "recorded_from": "test"})()
        events = [{"kind": "te_read", "conn": "decoder0", "session": "127.0.0.1:1", "n": 4, "bytes": 12288,
                   "ret": record.FAILED_READ_RET, "injected_failure": True, "t": 1}]
        lines = record.trace(rec, "c_failed_read", "d", [Worker("decoder0")], events, {}, None, 0)
        self.assertEqual(lines[0]["transfer_engine_reads"],
                         [{"conn": "decoder0", "session": "127.0.0.1:1", "n": 4, "bytes": 12288, "ret": -1,
                           "injected_failure": True}])

    def test_only_c_failed_read_fails_a_read_of_its_own_requests(self):
        for name, _, _, _, pulls, failing in record.SCENARIOS:
            self.assertLessEqual(failing, {req for _, req, _, _ in pulls}, name)
            self.assertEqual(bool(failing), name == "c_failed_read", name)

    def test_the_scenarios_are_the_runners(self):
        # One source: conformance/scenarios.toml's [pull_scenario.*], which `mooncake-conformance run` replays;
        # each bundled recording's header says its scenario's description.
        names = [s[0] for s in record.SCENARIOS]
        self.assertEqual(names, ["a_meta_then_done", "b_two_decoders", "c_failed_read"])
        traces = os.path.join(HERE, "..", "..", "conformance", "traces-pull")
        for name, desc, _, n_dec, pulls, _ in record.SCENARIOS:
            self.assertEqual(sorted({d for d, _, _, _ in pulls}), list(range(n_dec)), name)
            for rel in ("0.18.0", "0.23.0.post1"):
                with open(os.path.join(traces, f"vllm-ascend-{rel}", f"{name}.jsonl")) as f:
                    self.assertEqual(json.loads(f.readline())["description"], desc, (rel, name))

    def test_free_port_span(self):
        base = record.free_port(3)
        self.assertTrue(1024 <= base < 65533)


class ProcessTest(unittest.TestCase):
    def test_a_worker_without_its_stack_exits_3_and_writes_nothing(self):
        # This interpreter has no torch/vLLM/vllm-ascend (the test command's python3): the worker says why.
        probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True)
        if probe.returncode == 0:
            print("SKIPPED: tools/ascend start-failure check — this python has torch, the worker would start")
            return
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([sys.executable, os.path.join(HERE, "record.py"), "--release", "0.18.0", "--python",
                                sys.executable, "--out", d, "--scenario", "a_meta_then_done", "--log-dir", d],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 3, p.stderr)
            self.assertIn("cannot start", p.stderr)
            self.assertIn("torch", p.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "vllm-ascend-0.18.0")))

    def test_bad_usage_exits_2(self):
        p = subprocess.run([sys.executable, os.path.join(HERE, "record.py"), "--release", "0.18.0", "--python",
                            sys.executable, "--out", "/nonexistent", "--scenario", "z_nothing"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("unknown scenario z_nothing", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
