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


def set_import_time_env(mod, names, environ):
    """Set the module-level settings `names` that `mod` read from the environment when it was imported (in the
    zygote, before a scenario's ports were known) to the values in `environ`, converted to the type of the value the
    module holds; a name the module or `environ` lacks is left alone. Returns the names set."""
    done = []
    for name in names:
        if name in environ and hasattr(mod, name):
            setattr(mod, name, type(getattr(mod, name))(environ[name]))
            done.append(name)
    return done


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


def _release():
    try:
        import vllm

        return vllm.__version__
    except Exception:  # noqa: BLE001
        return "?"


def _missing(where, name, fix):
    return AttributeError(f"vLLM {_release()} reads {where}.{name}, which the recorder's stand-in does not have: {fix}")


def _field_default(cls, name):
    """(True, value) when the dataclass `cls` declares `name` with a default (or a default factory that builds
    without arguments); (False, None) otherwise."""
    if cls is None or not dataclasses.is_dataclass(cls):
        return False, None
    for f in dataclasses.fields(cls):
        if f.name != name:
            continue
        if f.default is not dataclasses.MISSING:
            return True, f.default
        if f.default_factory is not dataclasses.MISSING:
            try:
                return True, f.default_factory()
            except Exception:  # noqa: BLE001
                return False, None
    return False, None


class FakeModelConfig:
    """The model the recordings use: 4 KV heads in total, fp16, no MLA. vLLM's ModelConfig cannot be built without
    a model to load, so this stands in for it: the values below, and for any other attribute the default vLLM's own
    ModelConfig declares for it; an attribute with neither fails naming itself, the release and the fix."""

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

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            from vllm.config import ModelConfig
        except ImportError:
            ModelConfig = None
        ok, value = _field_default(ModelConfig, name)
        if ok:
            return value
        raise _missing("vllm_config.model_config", name,
                       "vLLM's ModelConfig declares no default for it; add it to FakeModelConfig in "
                       "tools/record/compat.py")

    def get_total_num_kv_heads(self):
        return self.total_num_kv_heads

    def get_num_kv_heads(self, parallel_config):
        return max(1, self.total_num_kv_heads // parallel_config.tensor_parallel_size)

    def get_head_size(self):
        return self.head_size

    def get_num_layers(self, parallel_config=None):
        return self.num_layers


class VllmConfigStandIn:
    """Used only where the release's own VllmConfig cannot be built here: the parts the recorder builds, every other
    field of the release's VllmConfig at its default, and a clear error for anything else."""

    def __init__(self, cls, parts):
        self.__dict__.update(parts)
        self._cls = cls

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        ok, value = _field_default(self.__dict__.get("_cls"), name)
        if ok:
            self.__dict__[name] = value
            return value
        raise _missing("vllm_config", name, "its VllmConfig gives no default for it; build it in make_vllm_config "
                       "(tools/record/compat.py)")


def _build(cls, values, what):
    """`cls` built from vLLM's own defaults with only `values` overridden (those of them it declares; a release that
    lacks a field does not read it). What is not a constructor argument is set afterwards by `_override`."""
    names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else \
        set(inspect.signature(cls).parameters)
    try:
        obj = cls(**{k: v for k, v in values.items() if k in names})
    except Exception as e:
        raise RuntimeError(f"vLLM {_release()}: cannot build {what} ({cls.__module__}.{cls.__qualname__}) from "
                           f"{ {k: v for k, v in values.items() if k in names} }: {type(e).__name__}: {e}; adjust "
                           "make_vllm_config in tools/record/compat.py") from e
    return obj


def _override(obj, values):
    """Set what the recording needs (again: a __post_init__ may have adjusted it), where the release has it."""
    for k, v in values.items():
        if not hasattr(obj, k):
            continue
        try:
            setattr(obj, k, v)
        except Exception:  # noqa: BLE001 - a frozen or validating class: the value is the recording's all the same
            object.__setattr__(obj, k, v)


def make_vllm_config(mod, a, model, head_size):
    """The worker's VllmConfig: the release's own VllmConfig built from its own CacheConfig, ParallelConfig and
    KVTransferConfig with their defaults, overriding only what the recording needs; the model config is
    FakeModelConfig (a ModelConfig needs a model to load). Where the release's VllmConfig cannot be built here,
    VllmConfigStandIn takes its place (the same parts, every other field at its default)."""
    import vllm.config as vc

    extra = {}
    if a.get("bootstrap_port"):
        extra["bootstrap_server_address"] = f"127.0.0.1:{a['bootstrap_port']}"
    if os.environ.get("MOONCAKE_REAL_ENGINE"):
        extra["mooncake_protocol"] = "tcp"  # tools/record/interop.py: the real engine's TCP transport
    if a.get("kv_lease_s") is not None:
        extra["kv_lease_duration"] = a["kv_lease_s"]  # vLLM 0.34.0+; earlier releases ignore it
    ktc = vc.KVTransferConfig(kv_connector="MooncakeConnector", kv_role=a["kv_role"], engine_id=a["engine_id"],
                              kv_connector_extra_config=extra)
    parallel_values = {
        "tensor_parallel_size": a["tp_size"],
        "pipeline_parallel_size": 1,
        "data_parallel_size": 1,
    }
    # Per worker, as the engine sets it; and the addresses that must stay on 127.0.0.1.
    parallel_after = {"rank": a["tp_rank"], "data_parallel_master_ip": "127.0.0.1", "master_addr": "127.0.0.1"}
    cache_values = {"block_size": model["block_size"], "cache_dtype": "auto"}
    cache_after = {"block_size": model["block_size"], "cache_dtype": "auto", "num_gpu_blocks": model["num_blocks"]}
    parallel = _build(vc.ParallelConfig, parallel_values, "the parallel config")
    cache = _build(vc.CacheConfig, cache_values, "the cache config")
    parts = {"kv_transfer_config": ktc, "parallel_config": parallel, "cache_config": cache}
    try:
        config = vc.VllmConfig(**parts)
    except Exception as e:  # noqa: BLE001
        print(f"recorder: vLLM {_release()}'s VllmConfig cannot be built here ({type(e).__name__}: {e}); "
              "using VllmConfigStandIn", file=sys.stderr)
        config = VllmConfigStandIn(vc.VllmConfig, parts)
    for name, part in parts.items():
        if getattr(config, name) is not part:
            object.__setattr__(config, name, part)
    _override(parallel, parallel_after)
    _override(cache, cache_after)
    object.__setattr__(config, "model_config", FakeModelConfig(model, head_size))
    return config


def engine_core_setup(vllm_config, backend, kv_cache_config):
    """What the engine core settles in the configuration before any worker registers its KV caches, where the
    release does it there: the KV cache layout (vLLM 0.34.0 wheel, vllm/v1/engine/core.py, resolves it with
    vllm/v1/attention/backends/utils.py, resolve_kv_cache_layout, from the layouts the workers' attention backends
    support). The recorder's backend declares no preference, as FlashAttention's does not, so the release's own
    resolution picks the layout."""
    cache = vllm_config.cache_config
    if not hasattr(cache, "get_resolved_kv_cache_layout") or getattr(cache, "kv_cache_layout", None) is not None:
        return
    try:
        import vllm.v1.attention.backends.utils as bu

        supported = [layout.name for layout in bu.get_supported_kv_cache_layouts([backend])]
        specs = [g.kv_cache_spec for g in kv_cache_config.kv_cache_groups]
        bu.resolve_kv_cache_layout(vllm_config, [supported], specs)
    except Exception as e:
        raise RuntimeError(f"vLLM {_release()} expects the engine core to resolve cache_config.kv_cache_layout, and "
                           f"the recorder cannot do it the release's way ({type(e).__name__}: {e}); adjust "
                           "engine_core_setup in tools/record/compat.py") from e


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
