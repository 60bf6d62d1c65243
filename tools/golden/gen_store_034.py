#!/usr/bin/env python3
"""Golden vectors of vLLM 0.34.0's store-key, block-hash and NIXL compatibility-hash functions.

Runs the release's own functions (nothing here re-implements them) and writes `mooncake-golden` files
(conformance/vectors/GOLDEN.md) under OUT (default conformance/vectors):

    keys/pool_key_0.34.0.jsonl                 store.layout.PoolKey (+ RankLocalStoreLayout, _make_mooncake_group_id)
    keys/attention_store_layout_0.34.0.jsonl   store.layout.HeadMajorStoreLayout / TokenMajorStoreLayout
    keys/process_tokens_0.34.0.jsonl           store.data.ChunkedTokenDatabase.process_tokens
    keys/store_worker_keys_0.34.0.jsonl        store.worker: the layout selection stages of MooncakeStoreWorker
    keys/cache_prefix_0.34.0.jsonl             store.worker._resolve_cache_prefix
    keys/block_hash_chain_0.34.0.jsonl         v1.core.kv_cache_utils.get_request_block_hasher
    hash/nixl_compatibility_hash_0.34.0.jsonl  nixl.metadata.compute_nixl_compatibility_hash
    lookup/lookup_frames_0.34.0.jsonl          store.worker.LookupKeyClient._lookup / _reset, store.protocol

Needs a Python where `import vllm` is vLLM 0.34.0 with its dependencies (torch, numpy): the recorder's
environment (tools/record/README.md, "Environment") with the 0.34.0 wheel unpacked first on PYTHONPATH:

    python3 -m zipfile -e ~/.cache/mooncake-wire/wheels/vllm-0.34.0-*.whl /tmp/vllm-0.34.0
    PYTHONPATH=/tmp/vllm-0.34.0 ~/.cache/mooncake-wire/record/venv/bin/python tools/golden/gen_store_034.py

Stand-ins, only where the functions read objects the engine would build: the bare MooncakeStoreWorker
(`__new__`, attributes set as __init__ sets them), the cache/KV-cache configs (namespaces with the attributes
read), the request (a namespace), the vllm_config of the NIXL hash and of _resolve_cache_prefix, and
torch.distributed.all_gather_object across PP stages (it runs the same stages for every other PP rank).
Specs (FullAttentionSpec, SlidingWindowSpec, MLAAttentionSpec, MambaSpec, UniformTypeKVCacheSpecs,
KVCacheGroupSpec) are vLLM's own classes. Deterministic: no randomness beyond random.Random(SEED).
"""
import argparse
import copy
import dataclasses
import hashlib
import json
import os
import random
import sys
import types
from fractions import Fraction

SEED = 20261116
RELEASE = "0.34.0"
S = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store"


def err(e):
    return f"{type(e).__name__}: {e}"


class Out:
    def __init__(self, root, name, header):
        self.path = os.path.join(root, name)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.lines = [dict({"format": "mooncake-golden", "format_version": 1}, **header)]
        self.ids = set()

    def case(self, cid, inp, fn):
        assert cid not in self.ids, cid
        self.ids.add(cid)
        try:
            self.lines.append({"id": cid, "input": inp, "output": fn()})
        except Exception as e:  # noqa: BLE001 - the raised error is the expected result
            self.lines.append({"id": cid, "input": inp, "error": err(e)})

    def write(self):
        with open(self.path, "w") as f:
            for line in self.lines:
                f.write(json.dumps(line, ensure_ascii=True) + "\n")
        print(f"{self.path}: {len(self.lines) - 1} cases", file=sys.stderr)


# ----------------------------------------------------------------------------------------------------------
# Specs from JSON descriptions.

def dtype_of(name):
    import torch
    return getattr(torch, name.removeprefix("torch."))


def tps_of(v):
    return Fraction(v) if isinstance(v, str) else v


def make_spec(d):
    """A real vLLM KVCacheSpec from {class, block_size, num_kv_heads, head_size, dtype, ...}."""
    from vllm.v1 import kv_cache_interface as K
    cls = getattr(K, d["class"])
    kw = {k: v for k, v in d.items() if k not in ("class",)}
    if "dtype" in kw:
        kw["dtype"] = dtype_of(kw["dtype"])
    if "tokens_per_state" in kw:
        kw["tokens_per_state"] = tps_of(kw["tokens_per_state"])
    if "kv_quant_mode" in kw:
        kw["kv_quant_mode"] = K.KVQuantMode(kw["kv_quant_mode"])
    if d["class"] == "MambaSpec":
        from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum
        kw["shapes"] = tuple(tuple(s) for s in kw["shapes"])
        kw["dtypes"] = tuple(dtype_of(t) for t in kw["dtypes"])
        kw["mamba_type"] = MambaAttentionBackendEnum[kw.get("mamba_type", "MAMBA2")]
    return cls(**kw)


def make_group(g, index):
    """KVCacheGroupSpec from {layers: [spec...], uniform: bool}: one spec per layer (uniform) or one spec for
    every layer."""
    from vllm.v1.kv_cache_interface import KVCacheGroupSpec, UniformTypeKVCacheSpecs
    names = [f"model.layers.{index}.{i}.attn" for i in range(g["num_layers"])]
    if g.get("uniform"):
        specs = {n: make_spec(s) for n, s in zip(names, g["layers"], strict=True)}
        spec = UniformTypeKVCacheSpecs(block_size=next(iter(specs.values())).block_size, kv_cache_specs=specs)
    else:
        spec = make_spec(g["layers"][0])
    return KVCacheGroupSpec(layer_names=names, kv_cache_spec=spec)


def key_metadata(m):
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.layout import KeyMetadata
    return KeyMetadata(**m)


def md(model_name="Qwen3-8B", tp=0, pcp=0, dcp=0, pp=0, group=0, prefix="", ns=""):
    return {"model_name": model_name, "tp_rank": tp, "pcp_rank": pcp, "dcp_rank": dcp, "pp_rank": pp,
            "group_id": group, "cache_prefix": prefix, "store_namespace": ns}


H = "8be7aaa33831156d316f1f463ae57e643deb63f42e633e2d631df88815cc4629"
AUTO = "auto-" + hashlib.sha256(b"mooncake-wire").hexdigest()
SCHEMA_NS = "@store_tp:8@store_pp:2@store_format:attention_head_major@store_schema:0f1e2d3c4b5a6978"
NAMESPACES = [
    "",
    "@store_pp:1@store_format:rank_local_tp4_layout_LBHNC",
    "@store_tp:4@store_pp:1@store_format:attention_token_major@store_schema:a0b1c2d3e4f50617",
    "@store_tp:2@store_pp:1@store_format:mamba_state@store_schema:ffffffffffffffff",
    SCHEMA_NS,
]


# ----------------------------------------------------------------------------------------------------------

def pool_keys(out):
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store import layout as L
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store import worker as W
    o = Out(out, f"keys/pool_key_{RELEASE}.jsonl", {
        "kind": "keys", "vllm_version": RELEASE, "function": f"{S}.layout.PoolKey.to_string", "seed": SEED,
        "also": [f"{S}.layout.PoolKey.build_prefix", f"{S}.layout.PoolKey.build_key_string",
                 f"{S}.layout.RankLocalStoreLayout.key_for", f"{S}.layout.RankLocalStoreLayout.lookup_key_prefixes",
                 f"{S}.worker._make_mooncake_group_id"],
        "note": "chunk_hash is the str passed to PoolKey (vLLM passes BlockHash.hex()); rank_local_key_for takes raw hash bytes"})
    rng = random.Random(SEED)
    prefixes = ["", "teamA", "team@A", AUTO, "a/b c"]
    models = ["Qwen3-8B", "DeepSeek-V3.2", "m@x", "llama@store_pp:1@store_format:mamba_state"]
    n = 0
    for prefix in prefixes:
        for ns in NAMESPACES:
            for model in models[:2] if prefix not in ("", "teamA") else models:
                m = md(model, tp=rng.randrange(0, 8), pcp=rng.randrange(0, 2), dcp=rng.randrange(0, 2),
                       pp=rng.randrange(0, 4), group=rng.randrange(0, 3), prefix=prefix, ns=ns)
                h = hashlib.sha256(f"{n}".encode()).hexdigest()
                ov = {"tp_rank": rng.randrange(0, 8), "pp_rank": rng.randrange(0, 4)}
                rns = [[rng.randrange(0, 8), rng.randrange(0, 2), rng.randrange(0, 2), rng.randrange(0, 4)] for _ in range(rng.randrange(0, 4))]
                inp = {"key_metadata": m, "hash_hex": h, "build_prefix_overrides": ov, "lookup_rank_namespaces": rns}

                def run(m=m, h=h, ov=ov, rns=rns):
                    km = key_metadata(m)
                    layout = L.RankLocalStoreLayout(km, 16, 16)
                    return {
                        "to_string": L.PoolKey(km, h).to_string(),
                        "build_prefix": L.PoolKey.build_prefix(km),
                        "build_prefix_overridden": L.PoolKey.build_prefix(km, **ov),
                        "build_key_string": L.PoolKey.build_key_string(L.PoolKey.build_prefix(km), h),
                        "rank_local_key_for": layout.key_for(0, bytes.fromhex(h)),
                        "rank_local_lookup_prefixes": list(layout.lookup_key_prefixes([tuple(x) for x in rns])),
                        "mooncake_group_id": W._make_mooncake_group_id(km, h),
                    }
                o.case(f"p{prefixes.index(prefix)}-ns{NAMESPACES.index(ns)}-{models.index(model)}-{n}", inp, run)
                n += 1
    o.write()


def attn(block_size=16, heads=2, head_size=128, dtype="bfloat16", cls="FullAttentionSpec", **kw):
    d = {"class": cls, "block_size": block_size, "num_kv_heads": heads, "head_size": head_size, "dtype": f"torch.{dtype}"}
    d.update(kw)
    return d


def attention_layouts(out):
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store import layout as L
    o = Out(out, f"keys/attention_store_layout_{RELEASE}.jsonl", {
        "kind": "keys", "vllm_version": RELEASE, "function": f"{S}.layout.AttentionStoreLayout", "seed": SEED,
        "also": [f"{S}.layout.AttentionStoreLayout.resolve_store_shard_count", f"{S}.layout.AttentionStoreLayout.resolve_store_chunk_size",
                 f"{S}.layout.AttentionStoreLayout.schema_fingerprint", f"{S}.layout._schema_fingerprint",
                 "KVCacheSpec.num_heads / state_content_size_bytes / tokens_per_state"],
        "note": "layer_specs are vLLM's own spec classes built from the input; requested_store_tp_size feeds resolve_store_shard_count, whose result is the layout's store_tp_size; schema_parts is the tuple _schema_fingerprint hashed (repr), captured"})
    spec_sets = {
        "full-h8": [attn(heads=8)],
        "full-h2": [attn(heads=2)],
        "full-h1-fp16": [attn(heads=1, dtype="float16")],
        "full-h4-bs32": [attn(block_size=32, heads=4)],
        "full-h4-x2": [attn(heads=4), attn(heads=4)],
        "swa-h4": [attn(cls="SlidingWindowSpec", heads=4, sliding_window=128)],
        "full-h4-fp8": [attn(heads=4, dtype="uint8", kv_quant_mode=1)],
        "full-h4-hsv64": [attn(heads=4, head_size_v=64)],
        "full-slots16-c96": [attn(heads=2, num_head_slots=16, state_content_bytes=96)],
        "full-tps2": [attn(heads=4, tokens_per_state=2)],
        "full-tps1/4": [attn(heads=4, tokens_per_state="1/4")],
        "mla": [attn(cls="MLAAttentionSpec", heads=1, head_size=576, cache_dtype_str="auto")],
        "mixed-heads": [attn(heads=4), attn(heads=2)],
    }
    captured = []
    real = L._schema_fingerprint

    def capture(parts):
        captured.append(parts)
        return real(parts)
    L._schema_fingerprint = capture
    n = 0
    for name, specs in spec_sets.items():
        for cls in ("HeadMajorStoreLayout", "TokenMajorStoreLayout"):
            for local_tp, req_tp, tp_rank in ((1, 1, 0), (1, 2, 0), (2, 4, 1), (2, 8, 0), (4, 2, 3), (2, 16, 1), (4, 4, 2), (3, 6, 2)):
                for chunk in (None, 16, 8):
                    if cls == "TokenMajorStoreLayout" and chunk == 8 and n % 3:
                        continue
                    m = md(tp=tp_rank, ns=SCHEMA_NS, group=1)
                    inp = {"class": cls, "key_metadata": m, "block_size": specs[0]["block_size"], "hash_block_size": 16 if chunk != 8 else 8,
                           "local_tp_size": local_tp, "requested_store_tp_size": req_tp, "tp_rank": tp_rank,
                           "layer_specs": specs, "requested_store_chunk_size": chunk, "hash_hex": H,
                           "lookup_rank_namespaces": [[0, 0, 0, 0], [1, 0, 0, 1]]}

                    def run(inp=inp):
                        layer_specs = [make_spec(s) for s in inp["layer_specs"]]
                        res = {"spec_num_heads": [s.num_heads for s in layer_specs],
                               "spec_state_content_size_bytes": [s.state_content_size_bytes for s in layer_specs],
                               "spec_tokens_per_state": [str(s.tokens_per_state) for s in layer_specs]}
                        count = L.AttentionStoreLayout.resolve_store_shard_count(layer_specs, inp["local_tp_size"], inp["requested_store_tp_size"])
                        res["resolve_store_shard_count"] = count
                        chunk_size = L.AttentionStoreLayout.resolve_store_chunk_size(layer_specs, inp["requested_store_chunk_size"])
                        res["resolve_store_chunk_size"] = chunk_size
                        if count is None or chunk_size is None:
                            return res
                        captured.clear()
                        res["schema_fingerprint"] = L.AttentionStoreLayout.schema_fingerprint(layer_specs, inp["local_tp_size"], count, chunk_size)
                        res["schema_parts_repr"] = repr(captured[-1])
                        layout = getattr(L, inp["class"])(key_metadata(inp["key_metadata"]), inp["block_size"], inp["hash_block_size"],
                                                         local_tp_size=inp["local_tp_size"], store_tp_size=count, tp_rank=inp["tp_rank"],
                                                         layer_specs=layer_specs, store_chunk_size=chunk_size)
                        res.update({
                            "store_format": layout.store_format,
                            "local_shard_ids": list(layout.local_shard_ids),
                            "heads_per_store_shard": layout.heads_per_store_shard,
                            "chunks_per_block": layout.chunks_per_block,
                            "store_chunk_size": layout.store_chunk_size,
                            "key_for": {str(s): layout.key_for(s, bytes.fromhex(inp["hash_hex"])) for s in layout.local_shard_ids},
                            "lookup_key_prefixes": list(layout.lookup_key_prefixes([tuple(x) for x in inp["lookup_rank_namespaces"]])),
                        })
                        return res
                    o.case(f"{name}-{cls[:-11]}-l{local_tp}-s{req_tp}-r{tp_rank}-c{chunk}", inp, run)
                    n += 1
    L._schema_fingerprint = real
    o.write()


def process_tokens(out):
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store import data as D
    o = Out(out, f"keys/process_tokens_{RELEASE}.jsonl", {
        "kind": "keys", "vllm_version": RELEASE, "function": f"{S}.data.ChunkedTokenDatabase.process_tokens", "seed": SEED,
        "also": [f"{S}.data.chunk_hashes_for_block_size", f"{S}.layout.RankLocalStoreLayout.key_for (store_layout.key_for(0, h))"],
        "note": "block_hashes are synthetic 32-byte values h_i = bytes([i % 256])*32 (num_block_hashes of them), passed raw as worker.py does; chunk_size is the ChunkedTokenDatabase's second argument (0.33.0: block_size)"})
    rng = random.Random(SEED + 1)
    n = 0
    for chunk, hbs in ((16, 16), (64, 16), (32, 8), (16, 4), (24, 16), (16, None)):
        for token_len in (0, 16, 48, 64, 96, 100):
            for mask_num in (0, 16, 17, 64):
                for tail in (None, 16, 32, 48, 0):
                    for put_step, rank in ((1, 0), (2, 1), (3, 0)):
                        if rng.random() < 0.55:
                            continue
                        nh = (token_len // (hbs or chunk)) + rng.choice((0, 0, 1))
                        mask = None if rng.random() < 0.5 else [rng.random() < 0.7 for _ in range(rng.randrange(0, 6))]
                        inp = {"key_metadata": md(ns=NAMESPACES[n % 3]), "chunk_size": chunk, "hash_block_size": hbs, "token_len": token_len,
                               "num_block_hashes": nh, "mask_num": mask_num, "chunk_mask": mask, "tail_key_boundary": tail,
                               "put_step": put_step, "put_step_rank": rank}

                        def run(inp=inp):
                            db = D.ChunkedTokenDatabase(key_metadata(inp["key_metadata"]), inp["chunk_size"], hash_block_size=inp["hash_block_size"])
                            hs = [bytes([i % 256]) * 32 for i in range(inp["num_block_hashes"])]
                            chunks = [{"start": s, "end": e, "hash": h.hex(), "key": db.store_layout.key_for(0, h)}
                                      for s, e, h in db.process_tokens(inp["token_len"], hs, inp["mask_num"], chunk_mask=inp["chunk_mask"],
                                                                       tail_key_boundary=inp["tail_key_boundary"], put_step=inp["put_step"],
                                                                       put_step_rank=inp["put_step_rank"])]
                            compact = D.chunk_hashes_for_block_size(hs, db.hash_block_size, inp["chunk_size"])
                            return {"chunks": chunks, "chunk_hashes_for_block_size": [h.hex() for h in compact]}
                        o.case(f"c{chunk}-h{hbs}-t{token_len}-m{mask_num}-k{tail}-s{put_step}.{rank}-{n}", inp, run)
                        n += 1
    o.write()


# ----------------------------------------------------------------------------------------------------------
# The worker's stages on a bare MooncakeStoreWorker.

WORKER_STAGES = [
    f"{S}.worker.resolve_store_tp_size", f"{S}.worker.resolve_store_chunk_size",
    f"{S}.worker.MooncakeStoreWorker._compute_group_tp_replication_factors",
    f"{S}.worker.MooncakeStoreWorker._select_store_layout (+ _make_store_group_plan)",
    f"{S}.layout.KeyMetadata (model_name given; vLLM derives it as model_config.model.rstrip('/').split('/')[-1]; pp_rank as in __init__)",
    f"{S}.worker.MooncakeStoreWorker._build_token_databases",
    f"{S}.worker.MooncakeStoreWorker._init_lookup_key_prefixes (PP all_gather_object: the same stages run for every PP rank)",
    "StoreLayout.key_for for each local shard id",
]


def run_worker(inp, gather=True):
    import torch
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store import worker as W
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.layout import KeyMetadata
    from vllm.v1.kv_cache_layout import KVCacheLayout
    w = W.MooncakeStoreWorker.__new__(W.MooncakeStoreWorker)
    w.tp_size, w.tp_rank = inp["tp_size"], inp["tp_rank"]
    w.pp_size = inp["pp_size"]
    w.pcp_size, w.pcp_rank = inp["pcp_size"], inp["pcp_rank"] if inp["pcp_size"] > 1 else 0
    w.dcp_size, w.dcp_rank = inp["dcp_size"], inp["dcp_rank"] if inp["dcp_size"] > 1 else 0
    w.pp_rank = inp["pp_rank"] if "pp_rank" in inp else (inp["rank"] // (w.tp_size * w.pcp_size)) % w.pp_size
    w.num_kv_head = inp["num_kv_heads"]
    w.hash_block_size = inp["hash_block_size"]
    layout = KVCacheLayout[inp["kv_cache_layout"]]
    w.cache_config = types.SimpleNamespace(prefix_match_unit=inp["prefix_match_unit"], get_resolved_kv_cache_layout=lambda: layout)
    w._kv_cache_config = types.SimpleNamespace(hisparse_host_num_blocks=16 if inp["hisparse"] else None)
    w._kv_cache_groups = [make_group(g, i) for i, g in enumerate(inp["groups"])]
    extra = inp["extra_config"]
    res = {"pp_rank": w.pp_rank, "resolve_store_tp_size": W.resolve_store_tp_size(extra),
           "resolve_store_chunk_size": W.resolve_store_chunk_size(extra)}
    w._group_tp_replication_factors = w._compute_group_tp_replication_factors()
    res["group_tp_replication_factors"] = list(w._group_tp_replication_factors)
    w.store_tp_size, ns, plans = w._select_store_layout(extra)
    res["select_store_layout"] = {
        "store_tp_size": w.store_tp_size, "store_namespace": ns,
        "plans": None if plans is None else [None if p is None else {
            "layout_cls": p.layout_cls.__name__, "local_block_size": p.local_block_size, "logical_tp_size": p.logical_tp_size,
            "store_shard_count": p.store_shard_count, "tp_rank": p.tp_rank, "schema_fingerprint": p.schema_fingerprint,
            "store_chunk_size": p.store_chunk_size} for p in plans]}
    cache_prefix = str(extra.get("cache_prefix", ""))
    metadata = KeyMetadata(model_name=inp["model_name"], tp_rank=w.tp_rank, pcp_rank=w.pcp_rank, dcp_rank=w.dcp_rank,
                           pp_rank=w.pp_rank, cache_prefix=cache_prefix, store_namespace=ns)
    w.token_dbs = w._build_token_databases(metadata, plans)
    res["token_databases"] = [{"chunk_size": db.chunk_size, "hash_block_size": db.hash_block_size,
                               "store_layout": type(db.store_layout).__name__, "key_metadata": dataclasses.asdict(db.metadata)}
                              for db in w.token_dbs]

    def all_gather_object(out_list, obj, group=None):
        for stage in range(len(out_list)):
            if stage == w.pp_rank:
                out_list[stage] = obj
            else:
                other = dict(inp, pp_rank=stage)
                other.pop("rank", None)
                out_list[stage] = run_worker(other, gather=False)["_local_prefixes"]
    saved = (torch.distributed.all_gather_object, W.get_pp_group)
    if gather:
        torch.distributed.all_gather_object = all_gather_object
        W.get_pp_group = lambda: types.SimpleNamespace(cpu_group=None)
    else:
        torch.distributed.all_gather_object = lambda out_list, obj, group=None: out_list.__setitem__(slice(None), [obj] * len(out_list))
        W.get_pp_group = lambda: types.SimpleNamespace(cpu_group=None)
    try:
        pp_size = w.pp_size
        if not gather:
            # The local prefixes, before the gather.
            w.pp_size = 1
            w._init_lookup_key_prefixes()
            w.pp_size = pp_size
            return {"_local_prefixes": w._lookup_key_prefixes}
        w._init_lookup_key_prefixes()
    finally:
        torch.distributed.all_gather_object, W.get_pp_group = saved
    res["lookup_key_prefixes"] = [list(p) for p in w._lookup_key_prefixes]
    h = bytes.fromhex(inp["hash_hex"])
    res["keys"] = [{str(s): db.store_layout.key_for(s, h) for s in db.store_layout.local_shard_ids} for db in w.token_dbs]
    return res


def worker_keys(out):
    o = Out(out, f"keys/store_worker_keys_{RELEASE}.jsonl", {
        "kind": "keys", "vllm_version": RELEASE, "function": f"{S}.worker.MooncakeStoreWorker._select_store_layout", "seed": SEED,
        "stages": WORKER_STAGES,
        "driven_via": "bare MooncakeStoreWorker instance (no __init__); cache_config, _kv_cache_config are namespaces with prefix_match_unit, get_resolved_kv_cache_layout() and hisparse_host_num_blocks; groups are real KVCacheGroupSpec with real specs (uniform = UniformTypeKVCacheSpecs, one spec per layer)"})
    rng = random.Random(SEED + 2)
    group_sets = {
        "attn8": [{"num_layers": 2, "layers": [attn(heads=1)]}],            # per-rank heads; the model total is num_kv_heads
        "attn2": [{"num_layers": 2, "layers": [attn(heads=2)]}],
        "attn4-uniform": [{"num_layers": 2, "uniform": True, "layers": [attn(heads=4), attn(heads=4)]}],
        "mla": [{"num_layers": 2, "layers": [attn(cls="MLAAttentionSpec", heads=1, head_size=576, cache_dtype_str="auto")]}],
        "full+swa": [{"num_layers": 2, "layers": [attn(heads=2)]},
                     {"num_layers": 2, "layers": [attn(cls="SlidingWindowSpec", heads=2, sliding_window=64)]}],
        "full+mamba": [{"num_layers": 1, "layers": [attn(heads=2, block_size=64)]},
                       {"num_layers": 3, "layers": [{"class": "MambaSpec", "block_size": 64, "shapes": [[3, 1024], [16, 64, 64]],
                                                     "dtypes": ["torch.bfloat16", "torch.float32"], "mamba_type": "GDN_ATTN"}]}],
        "uniform-mla+full": [{"num_layers": 2, "uniform": True, "layers": [attn(cls="MLAAttentionSpec", heads=1, head_size=576, cache_dtype_str="auto"), attn(heads=2)]}],
    }
    extras = [
        {}, {"store_tp_size": 8}, {"store_tp_size": 4}, {"store_tp_size": 2}, {"store_tp_size": 16},
        {"store_tp_size": 3}, {"store_tp_size": "4"}, {"store_tp_size": 0}, {"store_tp_size": None},
        {"enable_store_tp_lcm": True, "prefill_tp_sizes": [2, 4]}, {"enable_store_tp_lcm": True, "prefill_tp_sizes": []},
        {"store_tp_size": 8, "store_chunk_size": 16}, {"store_tp_size": 8, "store_chunk_size": 8}, {"store_tp_size": 8, "store_chunk_size": 0},
        {"store_tp_size": 8, "enable_cross_layers_blocks": "true"}, {"store_tp_size": 8, "enable_cross_layers_blocks": True},
        {"store_tp_size": 8, "cache_prefix": "teamA"}, {"store_tp_size": 4, "cache_prefix": AUTO}, {"cache_prefix": 7},
    ]
    n = 0
    for gname, groups in group_sets.items():
        for extra in extras:
            for tp, pp, pcp, dcp in ((1, 1, 1, 1), (2, 1, 1, 1), (4, 1, 1, 1), (8, 1, 1, 1), (4, 2, 1, 1), (2, 1, 2, 1), (4, 1, 1, 2)):
                if rng.random() < 0.6:
                    continue
                heads = {"attn8": 8, "attn2": 2, "attn4-uniform": 8, "mla": 1}.get(gname, 4)
                per_rank = max(1, heads // tp)
                gs = json.loads(json.dumps(groups).replace('"num_kv_heads": 1,', f'"num_kv_heads": {per_rank},') if gname == "attn8" else json.dumps(groups))
                rank = rng.randrange(0, tp * pp * pcp)
                inp = {"extra_config": extra, "tp_size": tp, "tp_rank": rank % tp, "pp_size": pp, "rank": rank,
                       "pcp_size": pcp, "pcp_rank": (rank // tp) % pcp, "dcp_size": dcp, "dcp_rank": (rank % tp) % dcp,
                       "num_kv_heads": heads, "kv_cache_layout": rng.choice(["LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"]),
                       # A Mamba group stops TP sharing before group planning only without prefix_match_unit:
                       # MambaStoreLayout's segments (derive_mamba_conv_split) are not reproduced by mooncake-wire.
                       "prefix_match_unit": rng.choice([None, 16, 64]) if len(groups) > 1 and gname != "full+mamba" else None, "hisparse": rng.random() < 0.08,
                       "hash_block_size": 16, "groups": gs, "model_name": "Qwen3-8B", "hash_hex": H}
                o.case(f"{gname}-x{extras.index(extra)}-tp{tp}-pp{pp}-pcp{pcp}-dcp{dcp}-r{rank}-{n}", inp, lambda inp=inp: run_worker(inp))
                n += 1
    o.write()


def cache_prefix(out):
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store import worker as W
    o = Out(out, f"keys/cache_prefix_{RELEASE}.jsonl", {
        "kind": "keys", "vllm_version": RELEASE, "function": f"{S}.worker._resolve_cache_prefix", "seed": SEED,
        "also": ["vllm.config.utils.hash_config", "vllm.config.utils.hash_factors", "vllm.envs.VLLM_IMAGE_TAG", "vllm.envs.VLLM_BUILD_COMMIT"],
        "driven_via": "vllm_config stand-in: kv_transfer_config.kv_connector_extra_config, model_config and cache_config whose compile_factors() return the input dicts, model_config.hf_config._commit_hash (absent when hf_commit is not in the input); the environment variables set (null = unset)"})
    model_f = {"model": "Qwen/Qwen3-8B", "dtype": "torch.bfloat16", "max_model_len": 40960, "quantization": None}
    cache_f = {"block_size": 16, "cache_dtype": "auto", "mamba_cache_dtype": "auto"}
    n = 0
    for prefix in ("", "teamA", "auto", "AUTO", "auto ", None, 3, True):
        for tag, commit in ((None, None), ("vllm/vllm-openai:v0.34.0", None), (" local/vllm-openai:dev ", None), ("local/vllm-openai:dev", "abc123"),
                            (None, "0decac0d9"), (None, "unknown"), ("", " unknown "), ("  ", "f00d")):
            for hf in ((), (None,), ("a1b2c3",)):
                if prefix != "auto" and (tag, commit) != (None, None):
                    continue
                extra = {} if prefix is None else {"cache_prefix": prefix}
                inp = {"extra_config": extra, "VLLM_IMAGE_TAG": tag, "VLLM_BUILD_COMMIT": commit,
                       "model_compile_factors": dict(model_f, n=n % 3), "cache_compile_factors": cache_f}
                if hf:
                    inp["hf_commit"] = hf[0]

                def run(inp=inp):
                    for k in ("VLLM_IMAGE_TAG", "VLLM_BUILD_COMMIT"):
                        if inp[k] is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = inp[k]
                    hf_config = types.SimpleNamespace(**({"_commit_hash": inp["hf_commit"]} if "hf_commit" in inp else {}))
                    cfg = types.SimpleNamespace(
                        kv_transfer_config=types.SimpleNamespace(kv_connector_extra_config=inp["extra_config"]),
                        model_config=types.SimpleNamespace(compile_factors=lambda: copy.deepcopy(inp["model_compile_factors"]), hf_config=hf_config),
                        cache_config=types.SimpleNamespace(compile_factors=lambda: copy.deepcopy(inp["cache_compile_factors"])))
                    return W._resolve_cache_prefix(cfg)
                o.case(f"p{json.dumps(prefix)}-t{json.dumps(tag)}-c{json.dumps(commit)}-hf{len(hf) and json.dumps(hf[0])}-{n}".replace('"', "'"), inp, run)
                n += 1
    for k in ("VLLM_IMAGE_TAG", "VLLM_BUILD_COMMIT"):
        os.environ.pop(k, None)
    o.write()


def block_hash_chain(out):
    from vllm.utils.hashing import sha256, sha256_cbor
    from vllm.v1.core import kv_cache_utils as U
    o = Out(out, f"keys/block_hash_chain_{RELEASE}.jsonl", {
        "kind": "keys", "vllm_version": RELEASE, "function": "vllm.v1.core.kv_cache_utils.get_request_block_hasher", "seed": SEED,
        "also": ["vllm.v1.core.kv_cache_utils.init_none_hash", "vllm.v1.core.kv_cache_utils.hash_block_tokens",
                 "vllm.v1.core.kv_cache_utils.generate_block_hash_extra_keys", "vllm.utils.hashing.sha256", "vllm.utils.hashing.sha256_cbor"],
        "driven_via": "request stand-in (SimpleNamespace) with block_hashes=[], mm_features=[], prompt_embeds=None, lora_request, cache_salt, all_token_ids and _all_token_ids (0.34.0 slices _all_token_ids with token_slice), num_tokens; serialized_hex captured by wrapping the hash function"})
    rng = random.Random(SEED + 3)
    n = 0
    for algo, fn in (("sha256", sha256), ("sha256_cbor", sha256_cbor)):
        for seed in (None, "0", "42"):
            for bs in (16, 64):
                for length in (15, 16, 40, 128):
                    for lora, salt in ((None, None), ({"lora_name": "adapter", "lora_path": "/loras/a"}, None), (None, "s@lt")):
                        tokens = [rng.randrange(0, 151936) for _ in range(length)]
                        if seed is None:
                            os.environ.pop("PYTHONHASHSEED", None)
                        else:
                            os.environ["PYTHONHASHSEED"] = seed
                        none_seed = U.resolve_none_hash_seed(fn) if hasattr(U, "resolve_none_hash_seed") else seed
                        U.init_none_hash(fn)
                        inp = {"algo": algo, "pythonhashseed": seed, "none_hash_seed": none_seed,
                               "none_hash_seed_serialized_hex": None, "block_size": bs, "token_ids": tokens, "lora": lora, "cache_salt": salt}
                        seen = []

                        def wrapped(obj, fn=fn):
                            import pickle
                            import cbor2
                            seen.append(pickle.dumps(obj, protocol=5) if fn is sha256 else cbor2.dumps(obj, canonical=True))
                            return fn(obj)
                        seen.clear()
                        wrapped(none_seed)
                        inp["none_hash_seed_serialized_hex"] = seen[0].hex()
                        lora_req = None if lora is None else types.SimpleNamespace(lora_name=lora["lora_name"], lora_path=lora["lora_path"], lora_int_id=1, name=lora["lora_name"], path=lora["lora_path"])
                        req = types.SimpleNamespace(block_hashes=[], mm_features=[], prompt_embeds=None, lora_request=lora_req, cache_salt=salt,
                                                    all_token_ids=tokens, _all_token_ids=tokens, num_tokens=len(tokens))

                        def run(req=req, bs=bs, wrapped=wrapped, seen=seen):
                            seen.clear()
                            hashes = U.get_request_block_hasher(bs, wrapped)(req)
                            blocks = []
                            for i, h in enumerate(hashes):
                                start = i * bs
                                extra, _ = U.generate_block_hash_extra_keys(req, start, start + bs, 0)
                                blocks.append({"tokens_start": start, "tokens_end": start + bs, "extra_keys": tagged(extra),
                                               "serialized_hex": seen[i].hex(), "hash": bytes(h).hex()})
                            return {"none_hash": bytes(U.NONE_HASH).hex(), "blocks": blocks}
                        o.case(f"{algo}-{seed}-bs{bs}-n{length}-{'lora' if lora else 'salt' if salt else 'none'}-{n}", inp, run)
                        n += 1
    os.environ.pop("PYTHONHASHSEED", None)
    o.write()


def tagged(v):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v if abs(v) < 2 ** 53 else {"$int": str(v)}
    if isinstance(v, tuple):
        return {"$tuple": [tagged(x) for x in v]}
    if isinstance(v, list):
        return [tagged(x) for x in v]
    if isinstance(v, bytes):
        return {"$bytes": v.hex()}
    raise TypeError(type(v))


def nixl_hash(out):
    from vllm.config import utils as CU
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl import metadata as M
    o = Out(out, f"hash/nixl_compatibility_hash_{RELEASE}.jsonl", {
        "kind": "hash", "vllm_version": RELEASE, "function": "vllm.distributed.kv_transfer.kv_connector.v1.nixl.metadata.compute_nixl_compatibility_hash",
        "seed": SEED, "nixl_connector_version": M.NIXL_CONNECTOR_VERSION, "driven_via": "SimpleNamespace config stand-in exposing only the attributes read; speculative_config.uses_target_hidden_states is the input's flag"})
    import vllm
    assert vllm.__version__ == RELEASE, vllm.__version__  # set by main() from --release
    n = 0
    rng = random.Random(SEED + 4)
    models = [("Qwen/Qwen2.5-7B-Instruct", "torch.bfloat16", 4, 128, 28), ("/models/llama", "torch.float16", 8, 128, 32), ("deepseek-ai/DeepSeek-V3", "torch.bfloat16", 1, 576, 61)]
    for model, dtype, heads, hs, layers in models:
        for cache_dtype in ("auto", "fp8"):
            for backend in ("FLASH_ATTN", "FLASHINFER,TRITON_ATTN"):
                for hma_off in (False, True):
                    for mode in (None, "pull", "push"):
                        for spec in (None, "off", "eagle3", "mtp"):
                            if rng.random() < 0.5 and spec not in (None, "eagle3"):
                                continue
                            inp = {"model": model, "dtype": dtype, "num_kv_heads": heads, "head_size": hs, "num_hidden_layers": layers,
                                   "cache_dtype": cache_dtype, "disable_hybrid_kv_cache_manager": hma_off, "attn_backend_name": backend,
                                   "transfer_mode": mode, "speculative_config": None}
                            if spec is not None:
                                inp["speculative_config"] = {"uses_target_hidden_states": spec != "off", "method": spec if spec != "off" else "ngram",
                                                             "model": "org/drafter", "revision": None if n % 2 else "main", "code_revision": None,
                                                             "kv_cache_dtype": None if n % 3 else "fp8", **({"aux": [1, 2, 30]} if spec == "eagle3" else {})}

                            def run(inp=inp):
                                captured = []
                                real = CU.hash_factors

                                def cap(f):
                                    captured.append(f)
                                    return real(f)
                                CU.hash_factors = cap
                                try:
                                    s = inp["speculative_config"]
                                    spec_cfg = None if s is None else types.SimpleNamespace(
                                        uses_target_hidden_states=s["uses_target_hidden_states"], method=s["method"], kv_cache_dtype=s["kv_cache_dtype"],
                                        parallel_drafting=False,
                                        draft_model_config=types.SimpleNamespace(model=s["model"], revision=s["revision"], code_revision=s["code_revision"],
                                                                                 hf_config=types.SimpleNamespace(**({"eagle_aux_hidden_state_layer_ids": s["aux"]} if "aux" in s else {}))))
                                    cfg = types.SimpleNamespace(
                                        model_config=types.SimpleNamespace(model=inp["model"], dtype=inp["dtype"], get_total_num_kv_heads=lambda: inp["num_kv_heads"],
                                                                           get_head_size=lambda: inp["head_size"], get_total_num_hidden_layers=lambda: inp["num_hidden_layers"]),
                                        cache_config=types.SimpleNamespace(cache_dtype=inp["cache_dtype"]),
                                        scheduler_config=types.SimpleNamespace(disable_hybrid_kv_cache_manager=inp["disable_hybrid_kv_cache_manager"]),
                                        speculative_config=spec_cfg)
                                    args = {} if inp["transfer_mode"] is None else {"transfer_mode": inp["transfer_mode"]}
                                    h = M.compute_nixl_compatibility_hash(cfg, inp["attn_backend_name"], **args)
                                finally:
                                    CU.hash_factors = real
                                f = captured[-1]
                                text = json.dumps(f, sort_keys=True)
                                return {"hash": h, "factors": json.loads(json.dumps(f)), "hash_factors_of_factors": {
                                    "digest": real(f), "hashed_utf8": text, "hashed_hex": text.encode().hex()}}
                            o.case(f"m{models.index((model, dtype, heads, hs, layers))}-{cache_dtype}-{backend}-hmaoff{int(hma_off)}-{mode or 'default'}-{spec}", inp, run)
                            n += 1
    o.write()


def lookup_frames(out):
    import time
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store import protocol as P
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store import worker as W
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.data import MooncakeLookupResult, TailKeyBoundary
    o = Out(out, f"lookup/lookup_frames_{RELEASE}.jsonl", {
        "kind": "lookup", "vllm_version": RELEASE, "function": f"{S}.worker.LookupKeyClient._lookup", "seed": SEED,
        "also": [f"{S}.worker.LookupKeyClient._reset", f"{S}.protocol.encode_lookup_response", f"{S}.protocol.decode_lookup_response"],
        "driven_via": "bare LookupKeyClient (no __init__) whose socket is a stand-in: poll() is always ready, send_multipart records the frames, recv returns reply_hex; ZMQ envelope frames (REQ_CORRELATE) are libzmq's and not seen here",
        "note": "request = lookup: {num_tokens, hashes, reply_hex} -> {request_frames, result{hit_length, tail_key_boundaries[[group_id, num_tokens]]} or result{error} when decode_lookup_response raises}; reset: {reply_hex} -> {request_frames, ok}; encode: {hit_length, tail} -> {response_hex}"})

    class Sock:
        def __init__(self, reply):
            self.reply, self.sent = reply, None

        def poll(self, timeout, event):
            return True

        def send_multipart(self, frames, copy=True, flags=0):
            self.sent = [bytes(f) for f in frames]

        def recv(self, flags=0):
            return self.reply

    def client(reply):
        c = W.LookupKeyClient.__new__(W.LookupKeyClient)
        c.socket = Sock(reply)
        return c
    rng = random.Random(SEED + 5)
    n = 0
    for num_tokens in (0, 1, 16, 17, 4096, 2 ** 32 - 1):
        for count, hlen in ((0, 32), (1, 32), (3, 32), (2, 16), (40, 32)):
            for reply in ("00000000", "00000010", "0000001000000001000000c0", "00000010000000", "", "ffffffff00000000ffffffff00000002000000007f"):
                if rng.random() < 0.5 and reply not in ("00000010", ""):
                    continue
                hashes = [bytes(rng.randrange(256) for _ in range(hlen)).hex() for _ in range(count)]
                inp = {"request": "lookup", "num_tokens": num_tokens, "hashes": hashes, "reply_hex": reply}

                def run(inp=inp):
                    c = client(bytes.fromhex(inp["reply_hex"]))
                    try:
                        r = c._lookup(inp["num_tokens"], [bytes.fromhex(h) for h in inp["hashes"]], time.monotonic() + 60)
                    except ValueError as e:
                        return {"request_frames": [f.hex() for f in c.socket.sent], "result": {"error": err(e)}}
                    return {"request_frames": [f.hex() for f in c.socket.sent], "result": {
                        "hit_length": r.hit_length, "tail_key_boundaries": [[b.group_id, b.num_tokens] for b in r.tail_key_boundaries]}}
                o.case(f"lookup-t{num_tokens}-n{count}x{hlen}-r{len(reply) // 2}-{n}", inp, run)
                n += 1
    for reply in ("01", "00", "02", ""):
        inp = {"request": "reset", "reply_hex": reply}

        def run(inp=inp):
            c = client(bytes.fromhex(inp["reply_hex"]))
            ok = c._reset()
            return {"request_frames": [f.hex() for f in c.socket.sent], "ok": ok}
        o.case(f"reset-r{reply or 'empty'}", inp, run)
    for hit, tail in ((0, []), (16, []), (2 ** 32 - 1, [[0, 16]]), (48, [[0, 40], [3, 33]]), (5, [[2 ** 32 - 1, 2 ** 32 - 1]])):
        inp = {"request": "encode", "hit_length": hit, "tail": tail}

        def run(inp=inp):
            res = MooncakeLookupResult(inp["hit_length"], tuple(TailKeyBoundary(g, t) for g, t in inp["tail"]))
            return {"response_hex": P.encode_lookup_response(res).hex()}
        o.case(f"encode-h{hit}-t{len(tail)}", inp, run)
    o.write()


def main():
    global RELEASE
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "conformance", "vectors"))
    ap.add_argument("--only", action="append")
    ap.add_argument("--release", default=RELEASE,
                    help="the release `import vllm` must give; its files are named after it. Written for 0.34.0's "
                         "functions: a later release runs it as far as its functions have the same shape "
                         "(scripts/intake.sh tries it and reports what it could not generate)")
    a = ap.parse_args()
    import vllm
    if vllm.__version__ != a.release:
        sys.exit(f"import vllm gives {vllm.__version__} ({vllm.__file__}), not {a.release}")
    RELEASE = a.release
    jobs = {"pool_key": pool_keys, "attention_store_layout": attention_layouts, "process_tokens": process_tokens,
            "store_worker_keys": worker_keys, "cache_prefix": cache_prefix, "lookup_frames": lookup_frames, "block_hash_chain": block_hash_chain, "nixl": nixl_hash}
    failed = []
    for name, job in jobs.items():
        if a.only and name not in a.only:
            continue
        try:
            job(os.path.abspath(a.out))
        except Exception as e:  # a release whose functions changed shape: say which, go on with the others
            failed.append(name)
            print(f"gen_store_034: {name}: not generated for {RELEASE}: {err(e)}", file=sys.stderr)
    if failed:
        sys.exit(f"gen_store_034: {len(failed)} of the golden files not generated: {', '.join(failed)}")


if __name__ == "__main__":
    main()
