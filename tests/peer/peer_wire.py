"""Side-channel message types of vLLM's Mooncake push protocol, written by hand for this test peer.

Two revisions are spoken (field lists from the released vLLM 0.32.0 / 0.33.0 wheels,
`kv_connector/v1/mooncake/mooncake_connector.py`):

* vllm-0.32.0: 14-field request, 4-field response, statuses FINISH/CONTINUE/ERROR.
* vllm-0.33.0: adds `layout_id` (request field 15, response field 5) and status LAYOUT_MISS = 3.

Both structs are plain `msgspec.Struct` with `omit_defaults=True`, so they encode as MessagePack maps keyed
by field name in declaration order, leave out fields equal to their default and ignore unknown keys on
decode. Field order, types and defaults below are wire facts; keep them exactly as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Optional

import msgspec

# ---------------------------------------------------------------------------------------------------------
# vllm-0.33.0


class Status33(IntEnum):
    FINISH = 0
    CONTINUE = 1
    ERROR = 2
    LAYOUT_MISS = 3


class Request33(msgspec.Struct, omit_defaults=True):
    remote_hostname: str
    remote_port: int
    remote_tp_size: int
    remote_tp_rank: int
    # D request id -> (transfer id, block ids per KV transfer group)
    req_blocks: dict[str, tuple[str, list[list[int]]]]
    kv_caches_base_addr: list[int]
    block_lens: list[int]
    kv_block_lens: list[int]
    registered_layer_names: list[str] = msgspec.field(default_factory=list)
    registered_layer_indices: list[int] = msgspec.field(default_factory=list)
    registered_group_indices: list[int] = msgspec.field(default_factory=list)
    registered_shared_group_ids: list[list[int]] = msgspec.field(default_factory=list)
    registered_row_offsets: list[int] = msgspec.field(default_factory=list)
    remote_pp_size: int = 1
    layout_id: int = 0


class Response33(msgspec.Struct, omit_defaults=True):
    status: Status33
    ok_reqs: Optional[list[str]] = None
    err_reqs: Optional[list[str]] = None
    err_msg: Optional[str] = None
    layout_id: int = 0


# ---------------------------------------------------------------------------------------------------------
# vllm-0.32.0 (no layout_id anywhere, no LAYOUT_MISS)


class Status32(IntEnum):
    FINISH = 0
    CONTINUE = 1
    ERROR = 2


class Request32(msgspec.Struct, omit_defaults=True):
    remote_hostname: str
    remote_port: int
    remote_tp_size: int
    remote_tp_rank: int
    req_blocks: dict[str, tuple[str, list[list[int]]]]
    kv_caches_base_addr: list[int]
    block_lens: list[int]
    kv_block_lens: list[int]
    registered_layer_names: list[str] = msgspec.field(default_factory=list)
    registered_layer_indices: list[int] = msgspec.field(default_factory=list)
    registered_group_indices: list[int] = msgspec.field(default_factory=list)
    registered_shared_group_ids: list[list[int]] = msgspec.field(default_factory=list)
    registered_row_offsets: list[int] = msgspec.field(default_factory=list)
    remote_pp_size: int = 1


class Response32(msgspec.Struct, omit_defaults=True):
    status: Status32
    ok_reqs: Optional[list[str]] = None
    err_reqs: Optional[list[str]] = None
    err_msg: Optional[str] = None


# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Revision:
    """What differs between the revisions this peer speaks."""

    name: str
    request: type
    response: type
    status: type
    # 0.33.0: layout_id on both structs, LAYOUT_MISS, per-peer layout cache on P, layout-less pulls on D.
    layout_cache: bool
    # 0.33.0 D: per-worker copies of the pull table, failures settle a worker's share, FINISH fails the
    # requests it left unreported. 0.32.0 D: shared table, first failure reports the request finished,
    # FINISH just stops reading.
    settle_per_worker: bool

    def new_response(self, status: int, ok_reqs=None, err_reqs=None, err_msg=None, layout_id: int = 0):
        kwargs = dict(status=self.status(status), ok_reqs=ok_reqs, err_reqs=err_reqs, err_msg=err_msg)
        if self.layout_cache:
            kwargs["layout_id"] = layout_id
        return self.response(**kwargs)


REVISIONS = {
    "vllm-0.33.0": Revision("vllm-0.33.0", Request33, Response33, Status33, True, True),
    "vllm-0.32.0": Revision("vllm-0.32.0", Request32, Response32, Status32, False, False),
}

class Unsupported(Exception):
    """A command, role or revision this peer does not implement (answered "unsupported: ...")."""


FINISH = 0
CONTINUE = 1
ERROR = 2
LAYOUT_MISS = 3
