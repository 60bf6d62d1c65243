#!/usr/bin/env python3
"""Real store gate: objects written under keys from OUR key builder are found and read back, byte for byte, by
keys built independently from the same tokens (releases 0.21.0 … 0.34.0) — through a real Mooncake master and the package's Python store
client (MooncakeDistributedStore), as vLLM's MooncakeStoreConnector uses them.

* The master (`mooncake_master` of the pinned PyPI package mooncake-transfer-engine-non-cuda) runs on
  127.0.0.1 with free ports, no HTTP metadata server; it is started here, waited for with a deadline, and
  always stopped (terminate, then kill) — also when the gate fails.
* One client: `setup("127.0.0.1", "P2PHANDSHAKE", 32 MiB segment, 16 MiB buffer, "tcp", "", master)`,
  MC_TCP_BIND_ADDRESS=127.0.0.1.
* Writer keys: `mooncake-conformance key build --release R --tokens ...` (the Rust builder and block-hash
  chain). Values: two segments per key from one registered buffer, `batch_put_from_multi_buffers` (vLLM's call).
* Reader keys: rebuilt here from the tokens with CPython's own pickle (protocol 5) and hashlib, and the key
  grammar of each release written out below (spec/README.md, "Store keys") — nothing from the Rust side.
  `batch_is_exist` must say 1 for every one, `batch_get_into_multi_buffers` must return every byte; keys of
  another rank or release must say 0 (so the check can fail).

Usage: store_gate.py --cli target/debug/mooncake-conformance   (run with the venv that has the package)
Exit 0 = passed; 1 = failed. Prints one line per configuration and a summary line.
"""
import argparse
import ctypes
import hashlib
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time

DEADLINE_S = 90


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------------------------------------
# The independent key builder (facts: store-keys.md §1.1–§1.4).

def block_hashes(tokens, block_size, none_hash_seed):
    """vLLM's chain: h_i = sha256(pickle.dumps((parent, tuple(block), None), protocol=5)); parent of block 0 is
    NONE_HASH = sha256(pickle.dumps(seed, protocol=5))."""
    h = lambda obj: hashlib.sha256(pickle.dumps(obj, protocol=5)).digest()
    parent = h(none_hash_seed)
    out = []
    for i in range(len(tokens) // block_size):
        parent = h((parent, tuple(tokens[i * block_size:(i + 1) * block_size]), None))
        out.append(parent.hex())
    return out


def vllm_key(release, model, chash, tp_rank=0, pcp_rank=0, dcp_rank=0, pp_rank=0, group_id=0, cache_prefix="", store_namespace=""):
    minor = int(release.split(".")[1])
    name = model.rstrip("/").split("/")[-1]
    ranks = f"@tp_rank:{tp_rank}@pcp{pcp_rank}@dcp{dcp_rank}@pp_rank:{pp_rank}"
    if minor == 21:
        return f"{name}{ranks}@{chash}"
    group = f"@group:{group_id}"
    if minor <= 23:
        return f"{name}{ranks}{group}@{chash}"
    prefix = f"{cache_prefix}@" if cache_prefix else ""
    ns = store_namespace if minor >= 30 else ""
    return f"{prefix}{name}{ns}{ranks}{group}@{chash}"


def self_check():
    """The independent builder reproduces the reference's measured values (store-keys.md §1.4)."""
    hs = block_hashes(list(range(32)), 16, "vllm-none-hash")
    assert hs == ["fe8fa5dda3210d0ca2031e37cbe3b001186773cd1c710beb2d45fcb51d434798",
                  "8be7aaa33831156d316f1f463ae57e643deb63f42e633e2d631df88815cc4629"], hs
    assert block_hashes(list(range(32)), 16, "0")[0] == "6358e31578a64b75ebe28cdb99d3beae65de82a2087321dc6ec84ae048faaaa6"
    assert vllm_key("0.33.0", "Qwen/Qwen2.5-7B-Instruct", hs[1]) == \
        "Qwen2.5-7B-Instruct@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@" + hs[1]
    # vLLM 0.34.0's own output for these parts (conformance/vectors/keys/attention_store_layout_0.34.0.jsonl,
    # full-h2 cases: schema_parts_repr of a FullAttentionSpec with 2 heads, local TP 1, 1 shard, chunk 16).
    assert SCHEMA_034 == "fa50aba996124fc5", SCHEMA_034


# ----------------------------------------------------------------------------------------------------------

TOKENS = [(i * 7919) % 151936 for i in range(48)] + [70000, 2 ** 31 - 1, 0, 65535] * 4   # 64 tokens, 4 blocks
MODEL = "Qwen/Qwen2.5-7B-Instruct"
# vLLM 0.34.0 (store/layout.py, store/worker.py): a TP-shared attention group's namespace ends in
# @store_schema:{sha256(repr(parts)).hexdigest()[:16]} of its layer tuples, and cache_prefix="auto" resolves to
# "auto-" + hash_factors({build, model, hf_commit, cache}) (written out here from those facts).
SCHEMA_034 = hashlib.sha256(repr((("FullAttentionSpec", 16, "16", 512, 2, "torch.bfloat16", "0", "None", "1"),)).encode()).hexdigest()[:16]
AUTO_034 = "auto-" + hashlib.sha256(json.dumps({"build": "vllm/vllm-openai:v0.34.0", "model": "0" * 64, "hf_commit": None,
                                                 "cache": "1" * 64}, sort_keys=True).encode()).hexdigest()

CONFIGS = [
    # (label, release, PYTHONHASHSEED or None, key fields)
    ("0.34.0 rank-local", "0.34.0", None, {"tp_rank": 6}),
    ("0.34.0 cache_prefix auto", "0.34.0", None, {"cache_prefix": AUTO_034, "tp_rank": 1, "group_id": 1}),
    ("0.34.0 head-major schema", "0.34.0", None, {"store_namespace": f"@store_tp:8@store_pp:2@store_format:attention_head_major@store_schema:{SCHEMA_034}", "tp_rank": 5, "pp_rank": 1}),
    ("0.34.0 rank-local fallback", "0.34.0", None, {"store_namespace": "@store_pp:1@store_format:rank_local_tp4_layout_BLNHC", "tp_rank": 2, "group_id": 1}),
    ("0.33.0 rank-local", "0.33.0", None, {}),
    ("0.33.0 prefix+ranks", "0.33.0", None, {"cache_prefix": "team@A", "tp_rank": 1, "pcp_rank": 0, "dcp_rank": 1, "pp_rank": 1, "group_id": 2}),
    ("0.33.0 TP-shared namespace", "0.33.0", None, {"store_namespace": "@store_tp:4@store_pp:1@store_format:tp_shared_lbhnc", "tp_rank": 3}),
    ("0.24.0 seed 0", "0.24.0", "0", {"cache_prefix": "p", "group_id": 1}),
    ("0.22.0 seed 0", "0.22.0", "0", {"tp_rank": 2}),
    ("0.21.0 seed 0", "0.21.0", "0", {"tp_rank": 3}),
]


def our_keys(cli, release, seed, fields):
    args = [cli, "key", "build", "--release", release, "--tokens", ",".join(map(str, TOKENS)), "--block-size", "16",
            "--format", "json", f"model={MODEL}"] + [f"{k}={v}" for k, v in fields.items()]
    if seed is not None:
        args += ["--pythonhashseed", seed]
    out = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise SystemExit(f"key build failed: {out.stdout}{out.stderr}")
    return [k["key"] for k in json.loads(out.stdout)["keys"]]


def independent_keys(release, seed, fields):
    minor = int(release.split(".")[1])
    none_seed = seed if seed is not None else ("vllm-none-hash" if minor >= 29 else None)
    assert none_seed is not None, "before 0.29 NONE_HASH is random unless PYTHONHASHSEED is set"
    return [vllm_key(release, MODEL, h, **fields) for h in block_hashes(TOKENS, 16, none_seed)]


def value_of(key, n):
    """Deterministic, key-specific bytes."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{key}/{counter}".encode()).digest()
        counter += 1
    return bytes(out[:n])


SEG = (2048, 1024)   # two segments per object, like K and V regions of one block


def run_gate(cli, store_cls, replicate_cfg, master_bin):
    rpc, metrics = free_port(), free_port()
    log = open(os.path.join(os.environ.get("STORE_GATE_LOG_DIR", "/tmp"), f"mooncake-master-{os.getpid()}.log"), "w")
    master = subprocess.Popen([master_bin, "--rpc_address=127.0.0.1", f"--rpc_port={rpc}", "--metrics_host=127.0.0.1",
                               f"--metrics_port={metrics}", "--enable_http_metadata_server=false"],
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    store = None
    try:
        t0 = time.time()
        while True:
            if master.poll() is not None:
                raise SystemExit(f"FAIL: mooncake_master exited with {master.returncode} (log {log.name})")
            try:
                socket.create_connection(("127.0.0.1", rpc), 0.2).close()
                break
            except OSError:
                if time.time() - t0 > 10:
                    raise SystemExit("FAIL: mooncake_master did not listen within 10 s")
                time.sleep(0.1)
        store = store_cls()
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 32 << 20, 16 << 20, "tcp", "", f"127.0.0.1:{rpc}")
        if rc != 0:
            raise SystemExit(f"FAIL: setup returned {rc}")
        plan = []
        for label, release, seed, fields in CONFIGS:
            ours = our_keys(cli, release, seed, fields)
            theirs = independent_keys(release, seed, fields)
            plan.append((label, release, seed, fields, ours, theirs))
        # A rank-local key is the same text in 0.33.0 and 0.34.0 (PoolKey moved to layout.py unchanged), so
        # either release reads the other's rank-local objects.
        if our_keys(cli, "0.34.0", None, {}) != our_keys(cli, "0.33.0", None, {}):
            raise SystemExit("FAIL: 0.34.0 and 0.33.0 rank-local keys differ")
        all_ours = [k for p in plan for k in p[4]]
        if len(set(all_ours)) != len(all_ours):
            raise SystemExit("FAIL: two configurations produced the same key")
        total = sum(SEG)
        src = ctypes.create_string_buffer(len(all_ours) * total)
        dst = ctypes.create_string_buffer(len(all_ours) * total)
        sa, da = ctypes.addressof(src), ctypes.addressof(dst)
        if store.register_buffer(sa, len(src)) != 0 or store.register_buffer(da, len(dst)) != 0:
            raise SystemExit("FAIL: register_buffer")
        for i, k in enumerate(all_ours):
            ctypes.memmove(sa + i * total, value_of(k, total), total)
        addrs = [[sa + i * total, sa + i * total + SEG[0]] for i in range(len(all_ours))]
        sizes = [list(SEG) for _ in all_ours]
        if store.batch_is_exist(all_ours) != [0] * len(all_ours):
            raise SystemExit("FAIL: keys exist before they were written")
        put = store.batch_put_from_multi_buffers(all_ours, addrs, sizes, replicate_cfg())
        if put != [0] * len(all_ours):
            raise SystemExit(f"FAIL: batch_put_from_multi_buffers returned {put}")
        failures, checked = [], 0
        for label, release, seed, fields, ours, theirs in plan:
            problems = []
            if ours != theirs:
                problems.append(f"our keys differ from the independent ones: {ours[0]} vs {theirs[0]}")
            exist = store.batch_is_exist(theirs)
            if exist != [1] * len(theirs):
                problems.append(f"batch_is_exist by independent keys: {exist}")
            got = store.batch_get_into_multi_buffers(theirs, [[da + i * total] for i in range(len(theirs))], [[total]] * len(theirs))
            if got != [total] * len(theirs):
                problems.append(f"batch_get_into_multi_buffers: {got}")
            for i, k in enumerate(theirs):
                if ctypes.string_at(da + i * total, total) != value_of(ours[i], total):
                    problems.append(f"bytes of block {i} differ")
                if store.get_size(k) != total:
                    problems.append(f"get_size of block {i}: {store.get_size(k)}")
            # A rank this configuration did not write, and the other grammar's key, must be absent.
            other = dict(fields, tp_rank=int(fields.get("tp_rank", 0)) + 7)
            absent = store.batch_is_exist(independent_keys(release, seed, other))
            if absent != [0] * len(theirs):
                problems.append(f"keys of another rank exist: {absent}")
            checked += len(theirs)
            print(f"{'ok  ' if not problems else 'FAIL'} {label:<28} {len(theirs)} objects, {total} bytes each: {theirs[-1]}")
            failures += [f"{label}: {p}" for p in problems]
        # vLLM 0.34.0 with VLLM_MOONCAKE_STORE_SELECTIVE_LEASE probes lookup keys lease-free with batch_probe_key
        # (Mooncake >= 0.3.14) and leases the keys a hit loads with batch_is_exist (store/selective_lease.py).
        ours_034 = [k for p in plan if p[1] == "0.34.0" for k in p[5]]
        if callable(getattr(store, "batch_probe_key", None)):
            probed = store.batch_probe_key(ours_034 + [k + "0" for k in ours_034[:2]])
            if list(probed) != [1] * len(ours_034) + [0, 0]:
                failures.append(f"batch_probe_key on 0.34.0 keys: {probed}")
            else:
                print(f"ok   {'0.34.0 lease-free probe':<28} batch_probe_key: {len(ours_034)} present, 2 absent")
        else:
            print("SKIPPED: store gate, 0.34.0 selective-lease probe (batch_probe_key) — this Mooncake package has no "
                  "MooncakeDistributedStore.batch_probe_key (VLLM_MOONCAKE_STORE_SELECTIVE_LEASE needs Mooncake >= 0.3.14)")
        if failures:
            raise SystemExit("FAIL:\n  " + "\n  ".join(failures))
        print(f"store gate: {checked} objects written under our keys, found and read back byte for byte by independently built keys "
              f"({len(CONFIGS)} configurations, releases {', '.join(sorted({c[1] for c in CONFIGS}))}); {time.time() - t0:.1f}s")
    finally:
        if store is not None:
            try:
                store.close()
            except Exception:
                pass
        if master.poll() is None:
            os.killpg(master.pid, signal.SIGTERM)
            try:
                master.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(master.pid, signal.SIGKILL)
                master.wait(5)
        log.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    a = ap.parse_args()
    self_check()
    os.environ.setdefault("MC_TCP_BIND_ADDRESS", "127.0.0.1")
    from mooncake.store import MooncakeDistributedStore, ReplicateConfig
    master_bin = os.path.join(os.path.dirname(sys.executable), "mooncake_master")
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(SystemExit(f"FAIL: the gate took longer than {DEADLINE_S} s")))
    signal.alarm(DEADLINE_S)
    run_gate(a.cli, MooncakeDistributedStore, ReplicateConfig, master_bin)


if __name__ == "__main__":
    main()
