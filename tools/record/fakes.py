"""The only parts of a recording that are not vLLM's own code: Mooncake's transfer engine (RDMA), and the GPU,
torch.distributed and platform lookups a connector worker makes. Everything here replaces a lookup; no vLLM
function body is changed.
"""

import sys
import threading
import types

from taps import emit


class FakeTransferEngine:
    """Stands in for mooncake.engine.TransferEngine. No bytes move: a write is recorded (session, descriptor count,
    byte total) and answered with 0, or with the configured failure code while failures remain."""

    rpc_port = 17001
    fail_remaining = 0
    fail_ret = -1
    _lock = threading.Lock()

    def initialize(self, *args, **kwargs):
        return 0

    def get_rpc_port(self):
        return FakeTransferEngine.rpc_port

    def register_memory(self, *args, **kwargs):
        return 0

    def unregister_memory(self, *args, **kwargs):
        return 0

    def batch_register_memory(self, *args, **kwargs):
        return 0

    def batch_unregister_memory(self, *args, **kwargs):
        return 0

    def batch_transfer_sync_write(self, session, src_ptrs, dst_ptrs, lengths):
        with FakeTransferEngine._lock:
            if FakeTransferEngine.fail_remaining > 0:
                FakeTransferEngine.fail_remaining -= 1
                ret = FakeTransferEngine.fail_ret
            else:
                ret = 0
        emit({"kind": "te", "session": session, "n": len(src_ptrs), "bytes": int(sum(lengths)), "ret": ret})
        return ret

    def __getattr__(self, name):
        raise AttributeError(f"the recorder's fake TransferEngine has no {name!r} (add it to tools/record/fakes.py)")


def install_fake_mooncake():
    """A `mooncake.engine` module whose TransferEngine is the fake, installed before vLLM imports it."""
    pkg = types.ModuleType("mooncake")
    pkg.__path__ = []
    engine = types.ModuleType("mooncake.engine")
    engine.TransferEngine = FakeTransferEngine
    pkg.engine = engine
    sys.modules["mooncake"] = pkg
    sys.modules["mooncake.engine"] = engine


def install_fake_engine_in_package(package="mooncake"):
    """The fake as `<package>.engine` inside the installed package (its module entry and the package attribute),
    for a connector that ships in that package and imports the engine from it (Mooncake's own
    `mooncake.mooncake_connector_v1`). Called before the connector module is imported."""
    import importlib

    pkg = importlib.import_module(package)
    engine = types.ModuleType(f"{package}.engine")
    engine.TransferEngine = FakeTransferEngine
    sys.modules[engine.__name__] = engine
    pkg.engine = engine


class FakeGroup:
    """What the connector reads from a torch.distributed process-group wrapper."""

    def __init__(self, rank, world_size):
        self.rank_in_group = rank
        self.rank = rank
        self.local_rank = rank
        self.world_size = world_size
        self.ranks = list(range(world_size))


class PlatformProxy:
    """The real current_platform, with device selection turned into a no-op (the KV caches are CPU tensors)."""

    def __init__(self, real):
        object.__setattr__(self, "_real", real)

    def set_device(self, *args, **kwargs):
        return None

    def __getattr__(self, name):
        return getattr(self._real, name)


def make_fake_backend(kv_shape, name="CUSTOM"):
    """An attention backend class with what the connector asks of one: its name, supported kernel block sizes and
    the KV cache shape (`kv_shape(num_blocks, block_size, num_kv_heads, head_size)`). The default name is the slot
    vLLM's backend registry keeps for out-of-tree backends (0.13.0 looks it up); a connector that decides by the
    name (Mooncake's own splits K and V unless it is FlashInfer's) gets the name of the backend whose shape this is."""

    class FakeAttentionBackend:
        accept_output_buffer = True

        @staticmethod
        def get_name():
            return name

        @classmethod
        def full_cls_name(cls):
            return (cls.__module__, cls.__qualname__)

        @staticmethod
        def get_supported_kernel_block_sizes(*args, **kwargs):
            return [FakeAttentionBackend.block_size]

        @staticmethod
        def get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size, cache_dtype_str="auto"):
            return kv_shape(num_blocks, block_size, num_kv_heads, head_size)

        @staticmethod
        def get_kv_cache_stride_order(*args, **kwargs):
            raise NotImplementedError

        @staticmethod
        def is_mla():
            return False

        @classmethod
        def supported_kv_cache_layouts(cls):
            # vLLM 0.34.0+: no preference (FlashAttention's own declaration); the engine core resolves the layout.
            return None

    FakeAttentionBackend.block_size = 16
    return FakeAttentionBackend
