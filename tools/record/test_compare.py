#!/usr/bin/env python3
"""Self-check of compare.py on the bundled traces (standard library only, no vLLM): a trace is equivalent to itself
and to copies that differ only where recordings differ by nature, and not equivalent to copies with a changed
byte, a reordered socket stream or a changed outcome.

Usage: python3 tools/record/test_compare.py
"""

import copy
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
TRACES = os.path.join(REPO, "conformance", "traces", "vllm-0.33.0")
TRACES_LEASES = os.path.join(REPO, "conformance", "traces", "vllm-0.34.0")


def trace_dir(name):
    return TRACES_LEASES if name.startswith("j") else TRACES


def load(name):
    with open(os.path.join(trace_dir(name), name + ".jsonl")) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    return lines[0], lines[1:]


def write(dirname, name, header, events):
    with open(os.path.join(dirname, name + ".jsonl"), "w") as f:
        f.write(json.dumps(header) + "\n")
        for e in events:
            f.write(json.dumps(e) + "\n")
    return os.path.join(dirname, name + ".jsonl")


def check(name, mutate, expect_equivalent, tmp, ignore_version=False):
    header, events = load(name)
    orig = json.dumps([header, events])
    header, events = mutate(copy.deepcopy(header), copy.deepcopy(events))
    if mutate.__name__ != "same" and json.dumps([header, events]) == orig:
        print(f"FAIL {name}: {mutate.__doc__}: the mutation changed nothing")
        return False
    path = write(tmp, name, header, events)
    diffs, _, _ = compare.compare_files(path, os.path.join(trace_dir(name), name + ".jsonl"), ignore_version)
    ok = (not diffs) == expect_equivalent
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {mutate.__doc__} -> {'equivalent' if not diffs else 'different'}")
    if not ok and diffs:
        for d in diffs:
            print("      " + d)
    return ok


def replace_hex(events, old, new):
    for e in events:
        if e["kind"] == "zmq":
            e["frames"] = [f.replace(old, new) for f in e["frames"]]
    return events


def main():
    results = []
    with tempfile.TemporaryDirectory() as tmp:

        def same(h, e):
            """unchanged"""
            return h, e

        def other_port(h, e):
            """another ROUTER port everywhere (endpoints, /register, /query, conn_endpoints)"""
            s = json.dumps([h, e]).replace("43809", "51234")
            h, e = json.loads(s)
            return h, e

        def other_base_addr(h, e):
            """other kv_caches_base_addr values (same width)"""
            return h, replace_hex(e, "cf0000559eb246e5c0", "cf00007f0000001000")

        def other_layout_id(h, e):
            """another layout_id, consistently"""
            return h, replace_hex(e, "cf075015b8e3b69ed1", "cf1234567890abcdef")

        def other_routing_id(h, e):
            """another ROUTER routing id"""
            return h, replace_hex(e, "006b8b4567", "0012345678")

        def changed_port_field(h, e):
            """remote_port 17002 -> 17003 in the request bytes"""
            return h, replace_hex(e, "ab72656d6f74655f706f7274cd426a", "ab72656d6f74655f706f7274cd426b")

        def changed_block(h, e):
            """a destination block id changed"""
            return h, replace_hex(e, "9193030405", "9193030406")

        def changed_outcome(h, e):
            """finished_sending differs"""
            h["observed_outcome"]["finished_sending"]["prefiller0"] = []
            return h, e

        def changed_te(h, e):
            """a transfer-engine call with another byte count"""
            h["transfer_engine_calls"][0]["bytes"] += 1
            return h, e

        def dropped_event(h, e):
            """the last reply is missing"""
            return h, e[:-1]

        for m, eq in ((same, True), (other_port, True), (other_base_addr, True), (other_layout_id, True),
                      (other_routing_id, True), (changed_port_field, False), (changed_block, False),
                      (changed_outcome, False), (changed_te, False), (dropped_event, False)):
            results.append(check("a_single_success", m, eq, tmp))

        def permuted_ok_reqs(h, e):
            """ids inside ok_reqs in another order (same bytes otherwise)"""
            # 93 a7 642d7265712d32 a7 642d7265712d31 a7 642d7265712d33 : d-req-2, d-req-1, d-req-3
            return h, replace_hex(e, "93a7642d7265712d32a7642d7265712d31a7642d7265712d33",
                                  "93a7642d7265712d33a7642d7265712d32a7642d7265712d31")

        results.append(check("b_batch_success", permuted_ok_reqs, True, tmp))

        def reordered_stream(h, e):
            """the two replies on one DEALER swapped (CONTINUE after FINISH)"""
            i = [k for k, x in enumerate(e) if x["kind"] == "zmq" and x["conn"] == "decoder0" and x["dir"] == "recv"]
            e[i[0]]["frames"], e[i[1]]["frames"] = e[i[1]]["frames"], e[i[0]]["frames"]
            return h, e

        results.append(check("g_continue_then_finish", reordered_stream, False, tmp))

        def interleaving(h, e):
            """the two prefillers' replies in the other order (independent sockets)"""
            i = [k for k, x in enumerate(e) if x["kind"] == "zmq" and x["bound"] and x["dir"] == "send"]
            e[i[0]], e[i[1]] = e[i[1]], e[i[0]]
            return h, e

        results.append(check("d2_hetero_tp_d1_p2", interleaving, True, tmp))

        def other_release(h, e):
            """recorded from another release (vllm_version)"""
            h["vllm_version"] = "0.32.1"
            return h, e

        results.append(check("a_single_success", other_release, False, tmp))
        results.append(check("a_single_success", other_release, True, tmp, ignore_version=True))

        def heartbeat_events(e):
            return [k for k, x in enumerate(e) if x["kind"] == "zmq" and x["seq"] < next(
                y["seq"] for y in e if y["kind"] == "zmq" and "kv_caches_base_addr" in (y.get("decoded") or {}))]

        def fewer_heartbeats(h, e):
            """one KV-lease heartbeat exchange fewer (their count follows the clock)"""
            drop = set(heartbeat_events(e)[-4:])
            return h, [x for k, x in enumerate(e) if k not in drop]

        def heartbeat_rejected(h, e):
            """a heartbeat answered ERROR instead of FINISH"""
            k = [k for k in heartbeat_events(e) if e[k]["dir"] == "recv" and not e[k]["bound"]][0]
            e[k]["frames"] = ["82a673746174757302a76572725f6d7367a178"]  # {status: 2, err_msg: "x"}
            return h, e

        def no_heartbeats(h, e):
            """no heartbeats at all"""
            drop = set(heartbeat_events(e))
            return h, [x for k, x in enumerate(e) if k not in drop]

        for m, eq in ((same, True), (fewer_heartbeats, True), (heartbeat_rejected, False), (no_heartbeats, False)):
            results.append(check("j1_lease_renewal_keeps_slow_pull", m, eq, tmp))

    failed = results.count(False)
    print(f"compare self-check: {len(results) - failed}/{len(results)} as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
