"""What differs between releases on the recorder's side: the configuration objects a worker is built from, the KV
tensor layout a release expects, and shims that let an old release import in the one shared environment (built for
the newest release). Decisions are made from the release's own code (signatures, annotations, source text), not
from version numbers, wherever that is possible.
"""

import os
import dataclasses
import inspect
import sys
import types
import typing


# ----------------------------------------------------------------------------------------------------------------
# Import shims (applied before vLLM is imported)


def before_vllm_import():
    """Shims for compiled parts and third-party APIs that an older release expects but the shared environment
    (built for the newest release) does not provide. Each one only makes an import succeed; none of them is on the
    connector's path."""
    import shims

    shims.install()


# ----------------------------------------------------------------------------------------------------------------
# KV layout


class Layout:
    """KV tensor per layer `(num_blocks, 2, block_size, heads, head_size)`: K and V of one block side by side, so
    one block of one layer is one contiguous run of `2 * block_size * heads * head_size` elements."""

    @staticmethod
    def tensor_shape(num_blocks, block_size, heads, head_size):
        return (num_blocks, 2, block_size, heads, head_size)

    @staticmethod
    def backend_shape(num_blocks, block_size, heads, head_size):
        return (num_blocks, 2, block_size, heads, head_size)


class Standardized4D(Layout):
    """Releases that require a standardized 4-D cache per layer: `(num_blocks, heads, block_size, 2 * head_size)`,
    the same bytes per block."""

    @staticmethod
    def tensor_shape(num_blocks, block_size, heads, head_size):
        return (num_blocks, heads, block_size, 2 * head_size)

    @staticmethod
    def backend_shape(num_blocks, block_size, heads, head_size):
        return (num_blocks, heads, block_size, 2 * head_size)


def kv_layout(mod):
    """The layout the release's transfer topology accepts from an attention backend."""
    import vllm.distributed.kv_transfer.kv_connector.utils as kv_utils

    if "must be standardized" in inspect.getsource(kv_utils):
        return Standardized4D
    return Layout


def per_group_blocks(mod, gen):
    """Whether block ids travel as one list per KV-cache group (0.20.0+) or one flat list."""
    if gen == 1:
        return False
    hints = typing.get_type_hints(mod.MooncakeXferMetadata)
    return "list[list[int]]" in str(hints["req_blocks"])


# ----------------------------------------------------------------------------------------------------------------
# Configuration


def current_vllm_config(vllm_config):
    """The engine builds and registers a worker inside set_current_vllm_config(); some releases look the
    configuration up that way (e.g. the KV cache layout in 0.25-0.29)."""
    import contextlib

    try:
        from vllm.config import set_current_vllm_config
    except ImportError:
        return contextlib.nullcontext()
    return set_current_vllm_config(vllm_config)


class FakeModelConfig:
    """The model the recordings use: 4 KV heads in total, fp16, no MLA."""

    def __init__(self, model, head_size):
        import torch

        self.total_num_kv_heads = model["total_num_kv_heads"]
        self.head_size = head_size
        self.num_layers = model["num_layers"]
        self.use_mla = False
        self.dtype = torch.float16
        self.is_attention_free = False
        self.is_hybrid = False
        self.hf_config = types.SimpleNamespace(model_type="llama", architectures=["LlamaForCausalLM"])
        self.hf_text_config = self.hf_config
        self.model = "recorder-fake-model"

    def get_total_num_kv_heads(self):
        return self.total_num_kv_heads

    def get_num_kv_heads(self, parallel_config):
        return max(1, self.total_num_kv_heads // parallel_config.tensor_parallel_size)

    def get_head_size(self):
        return self.head_size

    def get_num_layers(self, parallel_config=None):
        return self.num_layers


def make_vllm_config(mod, a, model, head_size):
    from vllm.config import KVTransferConfig

    extra = {}
    if a.get("bootstrap_port"):
        extra["bootstrap_server_address"] = f"127.0.0.1:{a['bootstrap_port']}"
    if os.environ.get("MOONCAKE_REAL_ENGINE"):
        extra["mooncake_protocol"] = "tcp"  # tools/record/interop.py: the real engine's TCP transport
    ktc = KVTransferConfig(kv_connector="MooncakeConnector", kv_role=a["kv_role"], engine_id=a["engine_id"],
                           kv_connector_extra_config=extra)
    parallel = types.SimpleNamespace(
        tensor_parallel_size=a["tp_size"],
        pipeline_parallel_size=1,
        data_parallel_size=1,
        data_parallel_index=0,
        data_parallel_rank=0,
        data_parallel_rank_local=0,
        local_engines_only=False,
        data_parallel_master_ip="127.0.0.1",
        master_addr="127.0.0.1",
        nnodes_within_dp=1,
        decode_context_parallel_size=1,
        prefill_context_parallel_size=1,
    )
    cache = types.SimpleNamespace(block_size=model["block_size"], cache_dtype="auto", num_gpu_blocks=model["num_blocks"])
    return types.SimpleNamespace(
        kv_transfer_config=ktc,
        parallel_config=parallel,
        cache_config=cache,
        model_config=FakeModelConfig(model, head_size),
        compilation_config=types.SimpleNamespace(static_forward_context={}),
        speculative_config=None,
    )


def _construct(cls, known):
    """Build a (data)class from the keyword values we know, passing only the fields it declares."""
    if dataclasses.is_dataclass(cls):
        names = {f.name for f in dataclasses.fields(cls)}
    else:
        names = set(inspect.signature(cls).parameters)
    return cls(**{k: v for k, v in known.items() if k in names})


def make_kv_cache_config(mod, model, groups, heads, head_size):
    import torch

    import vllm.v1.kv_cache_interface as kci

    group_specs = []
    for g in groups:
        known = {
            "block_size": model["block_size"],
            "num_kv_heads": heads,
            "head_size": head_size,
            "dtype": torch.float16,
            "use_mla": False,
        }
        if g.get("kind", "full") == "sliding_window":
            cls = kci.SlidingWindowSpec
            known["sliding_window"] = g.get("sliding_window", 4 * model["block_size"])
        else:
            cls = kci.FullAttentionSpec
        spec = _construct(cls, known)
        names = [f"model.layers.{i}.self_attn" for i in g["layers"]]
        group_specs.append(_construct(kci.KVCacheGroupSpec, {"layer_names": names, "kv_cache_spec": spec}))
    return _construct(kci.KVCacheConfig, {"num_blocks": model["num_blocks"], "kv_cache_tensors": [],
                                          "kv_cache_groups": group_specs})
