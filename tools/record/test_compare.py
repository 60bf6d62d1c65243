#!/usr/bin/env python3
"""Self-check of compare.py on the bundled traces (standard library only, no vLLM): a trace is equivalent to itself
and to copies that differ only where recordings differ by nature, and not equivalent to copies with a changed
byte, a reordered socket stream or a changed outcome. Also the recorder's parts that need no vLLM for `--impl
mooncake`: the trace header (vLLM's own connector's unchanged), the fake engine inside a real package, the
import-time settings set on a module.

Usage: python3 tools/record/test_compare.py
"""

import copy
import json
import os
import sys
import tempfile
import tomllib
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import compat  # noqa: E402
import fakes  # noqa: E402
import record  # noqa: E402

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


def expect(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    return ok


def check_implementation_header():
    """--impl vllm: the header is the one a recording has always had (same keys, same order, same values);
    --impl mooncake: the implementation fields at their places, every other field as it was."""
    with open(os.path.join(REPO, "conformance", "traces", "vllm-0.13.0", "a_single_success.jsonl")) as f:
        header = json.loads(f.readline())
    text = json.dumps(header)
    out = [expect(json.dumps(record.with_implementation(header, record.implementation_fields({}, "0.13.0"))) == text,
                  "header of vLLM's own connector: unchanged")]
    info = {"implementation": "mooncake", "implementation_version": "9.8.7", "implementation_dist": "some-dist",
            "implementation_source": "pkg/mod.py"}
    fields = record.implementation_fields(info, "0.12.0")
    got = record.with_implementation(header, fields)
    keys = list(header)
    at = keys.index("vllm_version") + 1
    keys[at:at] = ["implementation", "implementation_version"]
    at = keys.index("recorded_by") + 1
    keys[at:at] = ["recorded_from"]
    out.append(expect(list(got) == keys and all(got[k] == v for k, v in header.items())
                      and got["implementation"] == "mooncake" and got["implementation_version"] == "9.8.7",
                      "header of another implementation: its fields after vllm_version and recorded_by, the rest "
                      "as is"))
    out.append(expect(got["recorded_from"].startswith("some-dist 9.8.7, pkg/mod.py, on vLLM 0.12.0; faked: "),
                      "recorded_from names the distribution, its version, the module and the host vLLM"))
    return out


def check_fake_engine_in_package(tmp):
    """The fake engine becomes `<package>.engine` of a real package: module entry, attribute, `from … import`."""
    os.makedirs(os.path.join(tmp, "recfakepkg"))
    with open(os.path.join(tmp, "recfakepkg", "__init__.py"), "w") as f:
        f.write("REAL = True\n")
    sys.path.insert(0, tmp)
    try:
        fakes.install_fake_engine_in_package("recfakepkg")
        from recfakepkg.engine import TransferEngine  # noqa: E402
        import recfakepkg  # noqa: E402

        ok = (TransferEngine is fakes.FakeTransferEngine and recfakepkg.REAL
              and recfakepkg.engine is sys.modules["recfakepkg.engine"])
    finally:
        sys.path.remove(tmp)
        for name in ("recfakepkg", "recfakepkg.engine"):
            sys.modules.pop(name, None)
    return [expect(ok, "fake engine installed inside the real package")]


def check_import_time_env():
    """Settings a module read at import are set from the worker's environment, in the module's type."""
    mod = types.SimpleNamespace(PORT=6557, NAME="rdma")
    done = compat.set_import_time_env(mod, ("PORT", "NAME", "ABSENT", "UNSET"), {"PORT": "41000", "NAME": "tcp",
                                                                                 "ABSENT": "1"})
    return [expect(mod.PORT == 41000 and mod.NAME == "tcp" and not hasattr(mod, "ABSENT")
                   and done == ["PORT", "NAME"], "import-time settings set on the module from the environment")]


def check_mooncake_traces():
    """Mooncake's own connector's bundled recordings against vLLM 0.13.0's (--ignore-version: the host vLLM is
    0.12.0): the same wire and outcomes, scenario by scenario (tools/record/README.md)."""
    mc = os.path.join(REPO, "conformance", "traces", "mooncake-0.3.13.post1")
    ref = os.path.join(REPO, "conformance", "traces", "vllm-0.13.0")
    names = sorted(n for n in os.listdir(mc) if n.endswith(".jsonl"))
    out = []
    for n in names:
        diffs, _, _ = compare.compare_files(os.path.join(mc, n), os.path.join(ref, n), True)
        out.append(expect(not diffs, f"mooncake-0.3.13.post1/{n} equivalent to vllm-0.13.0's" +
                          "".join("\n      " + d for d in diffs)))
    with open(os.path.join(REPO, "conformance", "scenarios.toml"), "rb") as f:
        scenarios = tomllib.load(f)["scenario"]
    gen1 = sorted(f"{n}.jsonl" for n, sc in scenarios.items() if 1 in (sc.get("generations") or [1, 2]))
    return out + [expect(names == gen1, f"a bundled recording of Mooncake's connector for every generation-1 "
                                        f"scenario ({len(names)} of {len(gen1)})")]


def main():
    results = check_implementation_header() + check_import_time_env() + check_mooncake_traces()
    with tempfile.TemporaryDirectory() as tmp:
        results += check_fake_engine_in_package(tmp)

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
