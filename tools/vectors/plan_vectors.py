#!/usr/bin/env python3
"""Golden plan vectors of one vLLM release, computed by that release's own planning code.

    plan_vectors.py --release X [--seed N] [--out DIR] [--no-download]
    plan_vectors.py --release X --verify FILE...
    plan_vectors.py --release X --changed-since W

Writes DIR/plan/<function>_<release>.jsonl (format: conformance/vectors/GOLDEN.md), default DIR the bundled
conformance/vectors:

* build_transfer_params_<X>.jsonl — `MooncakeConnectorWorker._build_transfer_params` on the paired-block-order
  cases (`order-*`, hand-picked; `order-rand-NNN`, drawn from random.Random(seed)) and, for a release other than
  the one the bundled plan/build_transfer_params.jsonl was made with, on every input of that file too (same ids);
* normalize_paired_block_order_<X>.jsonl, contiguous_runs_<X>.jsonl — the module functions
  `_normalize_paired_block_order` and `_contiguous_runs`, for a release that has them (0.34.0 on).

`--verify FILE` recomputes the cases of golden files made with the release's `_build_transfer_params` (the bundled
0.33.0 one included, which another generator made) and reports every output that differs: the proof that this
harness drives vLLM's code as the bundled vectors were made. `--changed-since W` lists the functions and classes
(methods one by one) of the connector module and `kv_connector/utils.py` whose code differs between release W
and X (docstrings and comments aside): which golden files a new release can change at all.

Where the code comes from: the connector module, `kv_connector/utils.py` and `v1/attention/backends/utils.py` are
read out of the release's wheel (wheel.py finds or fetches it) and parsed with `ast`; only the planning functions,
the `MooncakeConnectorWorker` methods `_build_transfer_params` calls, `TransferRegion`, `TransferTopology` and
`NULL_BLOCK_ID` are kept, with docstrings and signature annotations dropped (nothing of vLLM is stored in this
repository), and executed with numpy. vLLM and torch are neither installed nor imported: the worker is a bare
instance (`__new__`) holding only the attributes those methods read, as GOLDEN.md says — the KV groups' specs are
stand-in classes, `MambaSpec` among them, which is all `isinstance` needs.
"""
import argparse
import ast
import asyncio
import copy
import dataclasses
import inspect
import itertools
import json
import logging
import os
import random
import sys
import types
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wheel  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLED = os.path.join(REPO, "conformance", "vectors")
DEFAULT_SEED = 20260534

CONNECTOR = "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py"
UTILS = "vllm/distributed/kv_transfer/kv_connector/utils.py"
BACKEND_UTILS = "vllm/v1/attention/backends/utils.py"
MC = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector."
WORKER = MC + "MooncakeConnectorWorker."

MODULE_FUNCTIONS = ["_block_ids_for_region", "_get_tp_ratio", "_compute_sender_transfer_plan",
                    "_can_coalesce_block_transfers", "_contiguous_runs", "_normalize_paired_block_order",
                    "group_concurrent_contiguous"]
WORKER_METHODS = ["_build_transfer_params", "_logical_to_kernel_block_ids", "_get_sender_transfer_plan",
                  "_producer_cache_is_replicated"]


# ---- loading the release's code -------------------------------------------------------------------------------

def _strip(fn):
    """A function without its docstring and signature annotations (annotations would need vLLM's types)."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:] or [ast.Pass()]
    fn.body = body
    a = fn.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if arg is not None:
            arg.annotation = None
    fn.returns = None
    return fn


def _class(node, keep_methods=None):
    """A class without docstrings; methods filtered by name when `keep_methods` is given."""
    body = []
    for s in node.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if keep_methods is None or s.name in keep_methods:
                body.append(_strip(s))
        elif isinstance(s, (ast.AnnAssign, ast.Assign)):
            body.append(s)
    return ast.ClassDef(name=node.name, bases=[] if keep_methods is not None else node.bases, keywords=[],
                        body=body or [ast.Pass()], decorator_list=node.decorator_list, type_params=[])


def extract(connector_src, utils_src, backend_utils_src):
    """The code (a string) of the planning subset of a release, and which of MODULE_FUNCTIONS it defines."""
    out, have = [], []
    for node in ast.parse(backend_utils_src).body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["NULL_BLOCK_ID"]:
            out.append(node)
    for node in ast.parse(utils_src).body:
        if isinstance(node, ast.ClassDef) and node.name == "TransferTopology":
            out.append(_class(node))
    for node in ast.parse(connector_src).body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["_SHARED_REGION_GROUP_ID"]:
            out.append(node)
        elif isinstance(node, ast.ClassDef) and node.name == "TransferRegion":
            out.append(_class(node))
        elif isinstance(node, ast.FunctionDef) and node.name in MODULE_FUNCTIONS:
            out.append(_strip(node))
            have.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name == "MooncakeConnectorWorker":
            out.append(_class(node, WORKER_METHODS))
    module = ast.Module(body=out, type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module)), have


class MambaSpec:
    """Stand-in for vLLM's MambaSpec: `_build_transfer_params` and `_logical_to_kernel_block_ids` only ask
    `isinstance(spec, MambaSpec)`."""


class AttentionSpec:
    """Stand-in for any other KV-cache spec (FullAttentionSpec, SlidingWindowSpec, ...)."""


def _quiet_logger():
    log = logging.getLogger("plan_vectors.vllm")
    log.setLevel(logging.CRITICAL + 1)
    log.propagate = False
    return log


def load(release, download=True, python=None):
    """(module holding the release's planning code, path of its wheel, functions it defines)."""
    path = wheel.find_wheel(release, download=download, python=python)
    with zipfile.ZipFile(path) as z:
        srcs = [z.read(p).decode("utf-8") for p in (CONNECTOR, UTILS, BACKEND_UTILS)]
    code, have = extract(*srcs)
    mod = types.ModuleType(f"plan_vllm_{release.replace('.', '_')}")
    mod.__dict__.update({
        "np": np, "itertools": itertools, "dataclass": dataclasses.dataclass, "field": dataclasses.field,
        "logger": _quiet_logger(), "MambaSpec": MambaSpec, "EngineId": str,
        # TransferTopology's field annotations (evaluated when the dataclass is made) name these.
        "torch": types.SimpleNamespace(Size=tuple), "AttentionBackend": type("AttentionBackend", (), {}),
    })
    sys.modules[mod.__name__] = mod
    exec(compile(code, f"<vLLM {release} planning code>", "exec"), mod.__dict__)
    return mod, path, have


# ---- driving it -----------------------------------------------------------------------------------------------

def raised(e):
    return f"{type(e).__name__}: {e}"


def regions(mod, rs):
    return [mod.TransferRegion(**{**r, "shared_group_ids": tuple(r["shared_group_ids"])}) for r in rs]


def build_transfer_params(mod, inp):
    """`_build_transfer_params` on a bare worker (GOLDEN.md, "How the methods were driven")."""
    inp = copy.deepcopy(inp)
    wk = inp["worker"]
    kinds = wk["group_kinds"]
    w = mod.MooncakeConnectorWorker.__new__(mod.MooncakeConnectorWorker)
    w.tp_rank, w.tp_size, w.use_mla = wk["tp_rank"], wk["tp_size"], wk["use_mla"]
    has_mamba = "mamba" in kinds
    w.kv_cache_config = types.SimpleNamespace(
        transfer_groups=[types.SimpleNamespace(kv_cache_spec=MambaSpec() if k == "mamba" else AttentionSpec())
                         for k in kinds],
        has_mamba_layers=has_mamba)
    w._physical_blocks_per_logical_kv_block = wk.get("physical_blocks_per_logical", 1)
    w.transfer_topo = mod.TransferTopology(
        tp_rank=wk["tp_rank"], tp_size=wk["tp_size"], block_size=16, engine_id="prefiller", is_mla=wk["use_mla"],
        is_mamba=has_mamba, total_num_kv_heads=wk["total_num_kv_heads"], attn_backends=[])
    reqs = inp["reqs"]
    meta = types.SimpleNamespace(
        req_blocks={q["d_req_id"]: (q["transfer_id"], q["remote_block_ids"]) for q in reqs},
        remote_hostname="10.0.0.2", remote_port=15000,
        remote_tp_rank=inp["remote_tp_rank"], remote_tp_size=inp["remote_tp_size"])
    ready = [(q["d_req_id"], types.SimpleNamespace(local_block_ids=q["local_block_ids"])) for q in reqs]
    try:
        r = w._build_transfer_params(ready, meta, regions(mod, inp["local_regions"]),
                                     regions(mod, inp["remote_regions"]))
        if inspect.iscoroutine(r):
            r = asyncio.run(r)
    except Exception as e:  # noqa: BLE001 - vLLM's exception is the recorded result
        return {"error": raised(e)}
    src, dst, lengths, err_reqs, err_msg = r
    return {"output": {"src_ptrs": [int(x) for x in src], "dst_ptrs": [int(x) for x in dst],
                       "lengths": [int(x) for x in lengths], "err_reqs": list(err_reqs), "err_msg": err_msg}}


def normalize_paired_block_order(mod, inp):
    try:
        s, d = mod._normalize_paired_block_order(list(inp["src_ids"]), list(inp["dst_ids"]))
    except Exception as e:  # noqa: BLE001
        return {"error": raised(e)}
    return {"output": [[int(x) for x in s], [int(x) for x in d]]}


def contiguous_runs(mod, inp):
    """As `_build_transfer_params` calls it: both sides as int64 arrays."""
    try:
        starts, lens = mod._contiguous_runs(np.asarray(inp["src_ids"], dtype=np.int64),
                                            np.asarray(inp["dst_ids"], dtype=np.int64))
    except Exception as e:  # noqa: BLE001
        return {"error": raised(e)}
    return {"output": [[int(x) for x in starts], [int(x) for x in lens]]}


# ---- the cases ------------------------------------------------------------------------------------------------

BASE_L, BASE_R = 0x7F00_0000_0000, 0x7E00_0000_0000


def region(name, index, base, block_len, kv_block_len, group=0, shared=(), row_offset=0):
    return {"layer_name": name, "layer_index": index, "base_addr": base, "block_len": block_len,
            "kv_block_len": kv_block_len, "group_index": group, "shared_group_ids": list(shared),
            "row_offset": row_offset}


def layout(groups, local_kv, remote_kv, layers_per_group=2, shared=None):
    """Regions of both sides: `layers_per_group` layers per KV group (group i's layers at 1 GiB steps), and, when
    `shared` lists groups, one more region shared by them (group index -1)."""
    loc, rem, i = [], [], 0
    for g in range(groups):
        for _ in range(layers_per_group):
            name = f"model.layers.{i}.attn"
            loc.append(region(name, i, BASE_L + i * 2 ** 30, local_kv, local_kv, g))
            rem.append(region(name, i, BASE_R + i * 2 ** 30, remote_kv, remote_kv, g))
            i += 1
    if shared:
        name = f"model.layers.{i}.packed"
        loc.append(region(name, i, BASE_L + i * 2 ** 30, local_kv, local_kv, -1, shared))
        rem.append(region(name, i, BASE_R + i * 2 ** 30, remote_kv, remote_kv, -1, shared))
    return loc, rem


def case(local, remote, kinds=("attn",), tp=(0, 1), remote_tp=(0, 1), heads=8, mla=False, n=1, kv=4096,
         shared=None, extra_reqs=(), remote_kv=None):
    lt_rank, lt = tp
    rt_rank, rt = remote_tp
    ratio = lt // rt if lt >= rt else -(rt // lt)
    local_kv = kv
    if remote_kv is None:
        remote_kv = kv if ratio == 1 or mla or lt > heads else (kv * ratio if ratio > 0 else kv // -ratio)
    loc, rem = layout(len(kinds), local_kv, remote_kv, shared=shared)
    worker = {"tp_rank": lt_rank, "tp_size": lt, "total_num_kv_heads": heads, "use_mla": mla,
              "group_kinds": list(kinds)}
    if n != 1:
        worker["physical_blocks_per_logical"] = n
    reqs = [{"d_req_id": "d0", "transfer_id": "t0", "local_block_ids": local, "remote_block_ids": remote}]
    for k, (l2, r2) in enumerate(extra_reqs, start=1):
        reqs.append({"d_req_id": f"d{k}", "transfer_id": f"t{k}", "local_block_ids": l2, "remote_block_ids": r2})
    return {"worker": worker, "local_regions": loc, "remote_regions": rem, "remote_tp_rank": rt_rank,
            "remote_tp_size": rt, "reqs": reqs}


def order_cases():
    """Hand-picked cases for the paired block order: descending runs on both sides, on one side, mixed with
    ascending ones, short lists, Mamba groups (NULL blocks dropped first), prefix hits, kernel blocks, shared
    regions, heterogeneous TP (no coalescing: only the order differs) and the per-request failures."""
    c = []
    add = lambda cid, inp: c.append((cid, inp))  # noqa: E731
    add("order-ascending-control", case([[1, 2, 3, 4]], [[10, 11, 12, 13]]))
    add("order-descending-both", case([[4, 3, 2, 1]], [[13, 12, 11, 10]]))
    add("order-descending-local-only", case([[4, 3, 2, 1]], [[10, 11, 12, 13]]))
    add("order-descending-remote-only", case([[1, 2, 3, 4]], [[13, 12, 11, 10]]))
    add("order-descending-then-ascending", case([[9, 8, 7, 1, 2, 3]], [[29, 28, 27, 11, 12, 13]]))
    add("order-ascending-then-descending", case([[1, 2, 3, 9, 8, 7]], [[11, 12, 13, 29, 28, 27]]))
    add("order-two-descending-runs", case([[5, 4, 9, 8]], [[15, 14, 19, 18]]))
    add("order-descending-runs-apart", case([[6, 5, 4, 40, 8, 7]], [[16, 15, 14, 50, 18, 17]]))
    add("order-descending-turning-ascending", case([[3, 2, 1, 2, 3]], [[13, 12, 11, 12, 13]]))
    add("order-descending-into-ascending-one-side", case([[3, 2, 1, 2]], [[13, 12, 11, 10]]))
    add("order-len0", case([[5, 4]], [[]]))
    add("order-len1", case([[7]], [[3]]))
    add("order-len2-descending", case([[8, 7]], [[4, 3]]))
    add("order-len2-descending-local-only", case([[8, 7]], [[3, 4]]))
    add("order-repeated-ids", case([[5, 5, 4]], [[9, 9, 8]]))
    add("order-step-minus-two", case([[8, 6, 4]], [[18, 16, 14]]))
    add("order-minus-one-and-minus-two", case([[4, 3, 2]], [[14, 12, 10]]))
    add("order-negative-ids", case([[-1, -2, -3]], [[5, 4, 3]]))
    add("order-prefix-hit-descending-tail", case([[20, 9, 8, 7]], [[3, 2, 1]]))
    add("order-prefix-hit-cut-in-run", case([[9, 8, 7, 6]], [[2, 1]]))
    add("order-mamba-null-blocks-make-a-run", case([[4, 3], [6, 0, 5]], [[9, 8], [3, 0, 2]], kinds=("attn", "mamba")))
    add("order-mamba-descending", case([[1, 2], [7, 6]], [[5, 6], [3, 2]], kinds=("attn", "mamba")))
    add("order-kernel-x2-descending", case([[5, 4]], [[9, 8]], n=2))
    add("order-kernel-x2-descending-local-only", case([[5, 4]], [[8, 9]], n=2))
    add("order-kernel-x3-mixed-with-mamba", case([[3, 2, 1, 7], [6, 5]], [[12, 11, 10, 20], [0, 4]], kinds=("attn", "mamba"), n=3))
    add("order-kernel-x2-mamba-descending", case([[2, 3], [9, 8]], [[4, 5], [6, 5]], kinds=("attn", "mamba"), n=2))
    add("order-groups-independent", case([[3, 2, 1], [1, 2, 3], [6, 5, 4]], [[13, 12, 11], [11, 12, 13], [4, 5, 6]], kinds=("attn", "attn", "attn")))
    add("order-shared-region", case([[3, 2], [7, 6]], [[13, 12], [17, 16]], kinds=("attn", "attn"), shared=(0, 1)))
    add("order-shared-region-reversed-groups", case([[3, 2], [4, 5]], [[13, 12], [14, 15]], kinds=("attn", "attn"), shared=(1, 0)))
    add("order-hetero-tp-p2-d1-rank1", case([[4, 3, 2]], [[14, 13, 12]], tp=(1, 2), remote_tp=(0, 1)))
    add("order-hetero-tp-p1-d2-rank1", case([[4, 3, 2]], [[14, 13, 12]], tp=(0, 1), remote_tp=(1, 2)))
    add("order-hetero-tp-replicated-sender", case([[4, 3, 2]], [[14, 13, 12]], tp=(0, 4), remote_tp=(0, 2), heads=2))
    add("order-hetero-tp-head-resharding", case([[4, 3, 2]], [[14, 13, 12]], tp=(1, 4), remote_tp=(2, 8), heads=4,
                                                   remote_kv=4096))
    add("order-mla-silent-rank", case([[4, 3, 2]], [[14, 13, 12]], tp=(1, 2), remote_tp=(0, 1), mla=True))
    add("order-mla-sending-rank", case([[4, 3, 2]], [[14, 13, 12]], tp=(0, 2), remote_tp=(0, 1), mla=True))
    add("order-two-requests", case([[4, 3]], [[8, 7]], extra_reqs=[([[1, 2]], [[5, 6]]), ([[9, 8, 7]], [[3, 2, 1]])]))
    add("order-group-count-mismatch", case([[4, 3]], [[8, 7], [1]], extra_reqs=[([[6, 5]], [[2, 1]])]))
    add("order-producer-has-fewer", case([[4]], [[8, 7]], extra_reqs=[([[6, 5]], [[2, 1]])]))
    add("order-long-descending", case([list(range(300, 44, -1))], [list(range(1000, 744, -1))]))
    return c


def random_blocks(rng, n):
    """Two id lists of length n made of runs: each run ascends or descends by one (on both sides, on one side,
    or neither), so joint descending runs, one-sided ones and breaks all occur."""
    src, dst = [], []
    while len(src) < n:
        k = min(n - len(src), rng.choice([1, 1, 2, 2, 3, 4, 6]))
        shape = rng.choice(["both-down", "both-down", "both-up", "src-down", "dst-down", "scatter"])
        s0, d0 = rng.randrange(1, 200), rng.randrange(1, 200)
        for j in range(k):
            if shape == "scatter":
                src.append(rng.randrange(1, 200))
                dst.append(rng.randrange(1, 200))
                continue
            src.append(s0 - j if shape in ("both-down", "src-down") else s0 + j)
            dst.append(d0 - j if shape in ("both-down", "dst-down") else d0 + j)
    return src, dst


TP_CONFIGS = [((0, 1), (0, 1)), ((0, 1), (0, 1)), ((0, 1), (0, 1)), ((1, 2), (0, 1)), ((0, 2), (0, 1)),
              ((0, 1), (1, 2)), ((0, 2), (1, 4)), ((3, 4), (1, 2))]


def random_case(rng):
    kinds = [rng.choice(["attn", "attn", "mamba"]) for _ in range(rng.choice([1, 1, 2, 3]))]
    n = rng.choice([1, 1, 1, 2, 3])
    tp, remote_tp = rng.choice(TP_CONFIGS)
    reqs = []
    for _ in range(rng.choice([1, 1, 2])):
        loc, rem = [], []
        for k in kinds:
            m = rng.randrange(0, 9)
            s, d = random_blocks(rng, m)
            extra = [rng.randrange(1, 200) for _ in range(rng.choice([0, 0, 1, 2]))]  # a prefix hit on D
            if k == "mamba" and rng.random() < 0.5:  # NULL placeholders, on either side
                s = [0 if rng.random() < 0.3 else b for b in s]
                d = [0 if rng.random() < 0.3 else b for b in d]
            loc.append(extra + s)
            rem.append(d)
        reqs.append((loc, rem))
    c = case(reqs[0][0], reqs[0][1], kinds=kinds, tp=tp, remote_tp=remote_tp, n=n, extra_reqs=reqs[1:],
             shared=(tuple(range(len(kinds))) if len(kinds) > 1 and "mamba" not in kinds and rng.random() < 0.3 else None))
    return c


def edge_lists():
    """Every pair of id lists of length 0-4 whose steps are -1, +1 or +3 (on each side independently)."""
    out = []
    for n in range(5):
        for s_steps in itertools.product((-1, 1, 3), repeat=max(n - 1, 0)):
            for d_steps in itertools.product((-1, 1, 3), repeat=max(n - 1, 0)):
                s = [10] + [10 + sum(s_steps[:i + 1]) for i in range(len(s_steps))] if n else []
                d = [50] + [50 + sum(d_steps[:i + 1]) for i in range(len(d_steps))] if n else []
                out.append((s, d))
    return out


I64_MIN, I64_MAX = -2 ** 63, 2 ** 63 - 1
WRAP_CASES = [
    ("wrap-max-min", [I64_MAX, I64_MIN], [7, 6]),  # MIN - MAX wraps to +1 in int64
    ("wrap-min-max", [I64_MIN, I64_MAX], [7, 6]),  # MAX - MIN wraps to -1
    ("wrap-min-max-both", [I64_MIN, I64_MAX], [I64_MIN, I64_MAX]),
    ("extremes-descending", [I64_MIN + 1, I64_MIN], [I64_MAX, I64_MAX - 1]),
]


def unequal_lists():
    """Lists of unequal length (vLLM never passes them: numpy broadcasting, or vLLM's assertion, decides)."""
    return [("unequal-2-3", [5, 4], [9, 8, 7]), ("unequal-3-2", [5, 4, 3], [9, 8]), ("unequal-2-4", [5, 4], [1, 2, 3, 4]),
            ("unequal-2-4-desc", [5, 4], [9, 8, 7, 6]), ("unequal-4-2", [5, 4, 3, 2], [9, 8]),
            ("unequal-3-4", [5, 4, 3], [9, 8, 7, 6]), ("unequal-1-3", [5], [9, 8, 7]), ("unequal-3-0", [5, 4, 3], []),
            ("unequal-2-0", [5, 4], []), ("unequal-2-1", [5, 4], [9]), ("unequal-0-2", [], [9, 8]),
            ("unequal-3-1", [3, 2, 1], [1]), ("unequal-5-2", [5, 4, 3, 9, 8], [2, 1])]


def pair_cases(rng, count):
    out = []
    for i, (s, d) in enumerate(edge_lists()):
        out.append((f"grid-{i:04d}", {"src_ids": s, "dst_ids": d}))
    for cid, s, d in WRAP_CASES + unequal_lists():
        out.append((cid, {"src_ids": s, "dst_ids": d}))
    for i in range(count):
        s, d = random_blocks(rng, rng.randrange(5, 40))
        out.append((f"rand-{i:03d}", {"src_ids": s, "dst_ids": d}))
    return out


# ---- files ----------------------------------------------------------------------------------------------------

def dumps(obj):
    return json.dumps(obj, ensure_ascii=True)


def header(release, function, seed, **extra):
    return {"format": "mooncake-golden", "format_version": 1, "kind": "plan", "vllm_version": release,
            "function": function, "seed": seed,
            "generator": "tools/vectors/plan_vectors.py (the release's own code, read out of its wheel)",
            "numpy_version": np.__version__, **extra}


def write(path, head, cases, run, mod):
    with open(path, "w", encoding="ascii", newline="") as f:
        f.write(dumps(head) + "\n")
        for cid, inp in cases:
            f.write(dumps({"id": cid, "input": inp, **run(mod, inp)}) + "\n")
    print(f"  {path}: {len(cases)} cases", file=sys.stderr)


def read_golden(path):
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return lines[0], lines[1:]


def verify(mod, release, paths):
    total = 0
    for path in paths:
        bad = 0
        head, cases = read_golden(path)
        if head.get("vllm_version") != release or head.get("function") != WORKER + "_build_transfer_params":
            raise SystemExit(f"{path}: not {release}'s _build_transfer_params")
        for c in cases:
            got = build_transfer_params(mod, c["input"])
            want = {k: c[k] for k in ("output", "error") if k in c}
            if got != want:
                bad += 1
                print(f"{path}: {c['id']}: vLLM {release} now gives {got}, the file says {want}", file=sys.stderr)
        print(f"{path}: {len(cases) - bad} of {len(cases)} cases reproduced", file=sys.stderr)
        total += bad
    return total


def code_units(source):
    """name -> ast dump of every top-level function and class of a module (a class's methods one by one, its
    other statements as the class), docstrings dropped."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = ast.dump(_strip(node))
        elif isinstance(node, ast.ClassDef):
            rest = [s for s in node.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            out[node.name] = ast.dump(ast.ClassDef(name=node.name, bases=node.bases, keywords=node.keywords,
                                                   body=rest, decorator_list=node.decorator_list, type_params=[]))
            for m in node.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{m.name}"] = ast.dump(_strip(m))
    return out


def changed_since(old, new, download, python):
    for path in (CONNECTOR, UTILS):
        units = []
        for release in (old, new):
            with zipfile.ZipFile(wheel.find_wheel(release, download=download, python=python)) as z:
                units.append(code_units(z.read(path).decode("utf-8")))
        a, b = units
        print(f"{path}: {old} -> {new}")
        for name in sorted(set(a) | set(b)):
            if name not in a:
                print(f"  added    {name}")
            elif name not in b:
                print(f"  removed  {name}")
            elif a[name] != b[name]:
                print(f"  changed  {name}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", required=True)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--out", default=BUNDLED, help="vectors directory; files go to OUT/plan/")
    ap.add_argument("--verify", nargs="+", metavar="FILE", help="recompute these golden files instead")
    ap.add_argument("--changed-since", metavar="RELEASE", help="list the code that differs from RELEASE's instead")
    ap.add_argument("--no-download", action="store_true")
    ap.add_argument("--pip-python")
    a = ap.parse_args(argv)

    if a.changed_since:
        changed_since(a.changed_since, a.release, not a.no_download, a.pip_python)
        return
    mod, path, have = load(a.release, download=not a.no_download, python=a.pip_python)
    print(f"vLLM {a.release}: planning code from {os.path.basename(path)} ({', '.join(have)})", file=sys.stderr)
    if a.verify:
        sys.exit(1 if verify(mod, a.release, a.verify) else 0)

    out = os.path.join(a.out, "plan")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(a.seed)
    build = order_cases() + [(f"order-rand-{i:03d}", random_case(rng)) for i in range(200)]
    bundled_head, bundled = read_golden(os.path.join(BUNDLED, "plan", "build_transfer_params.jsonl"))
    also = {}
    if bundled_head["vllm_version"] != a.release:
        build = [(c["id"], c["input"]) for c in bundled] + build
        also = {"note": f"the cases before `order-*` are the inputs of plan/build_transfer_params.jsonl "
                        f"(vLLM {bundled_head['vllm_version']}), same ids"}
    driven = "bare MooncakeConnectorWorker instance (no __init__), see GOLDEN.md"
    write(os.path.join(out, f"build_transfer_params_{a.release}.jsonl"),
          header(a.release, WORKER + "_build_transfer_params", a.seed, driven_via=driven, **also),
          build, build_transfer_params, mod)
    pair_rng = random.Random(a.seed + 1)
    pairs = pair_cases(pair_rng, 60)
    if "_normalize_paired_block_order" in have:
        write(os.path.join(out, f"normalize_paired_block_order_{a.release}.jsonl"),
              header(a.release, MC + "_normalize_paired_block_order", a.seed + 1), pairs,
              normalize_paired_block_order, mod)
    if "_contiguous_runs" in have:
        write(os.path.join(out, f"contiguous_runs_{a.release}.jsonl"),
              header(a.release, MC + "_contiguous_runs", a.seed + 1,
                     note="both sides passed as int64 arrays, as _build_transfer_params passes them"),
              pairs, contiguous_runs, mod)


if __name__ == "__main__":
    main()
