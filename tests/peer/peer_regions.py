"""Prefiller-side region logic of vLLM 0.33.0's Mooncake connector, reimplemented from the facts in
spec/PROTOCOL.md#regions and spec/PROTOCOL.md#byte-plan and the 0.33.0 wheel (`mooncake_connector.py`:
region expansion, alignment by (layer name, occurrence), coalescing, length validation, per-rank byte plan,
descriptor building). No I/O here.

Texts that end up in `err_msg` on the wire (assertions included: vLLM sends `str(exception)`) are kept
verbatim; they are wire facts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Optional

SHARED_GROUP = -1  # registered_group_indices value of a region several KV groups share
NULL_BLOCK_ID = 0  # Mamba placeholder block id, never transferred


@dataclass(frozen=True)
class Region:
    layer_name: str
    layer_index: int
    base_addr: int
    block_len: int  # stride between blocks
    kv_block_len: int  # bytes that belong to the block
    group_index: int = 0
    shared_group_ids: tuple = ()
    row_offset: int = 0


# ----------------------------------------------------------------------------------------------------------
# TP arithmetic (kv_connector/utils.py TransferTopology and mooncake_connector._get_tp_ratio)


def tp_ratio(local_tp: int, remote_tp: int) -> int:
    """> 0: `ratio` local ranks share one remote rank; < 0: one local rank spans |ratio| remote ranks."""
    if local_tp >= remote_tp:
        assert local_tp % remote_tp == 0, (
            f"Local tensor parallel size {local_tp} is not divisible "
            f"by remote tensor parallel size {remote_tp}."
        )
        return local_tp // remote_tp
    assert remote_tp % local_tp == 0, (
        f"Remote tensor parallel size {remote_tp} is not divisible "
        f"by local tensor parallel size {local_tp}."
    )
    return -(remote_tp // local_tp)


def target_ranks(local_rank: int, local_tp: int, remote_tp: int) -> list:
    """Remote TP ranks the local rank pairs with (`handshake_target_ranks`, DCP 1)."""
    ratio = tp_ratio(local_tp, remote_tp)
    if ratio > 0:
        return [local_rank // ratio]
    return [local_rank * -ratio + k for k in range(-ratio)]


# ----------------------------------------------------------------------------------------------------------
# Region lists


def build_regions(bases, strides, lengths, names, indices, groups=None, shared=None, rows=None) -> list:
    assert len(bases) == len(strides) == len(lengths) == len(names) == len(indices), (
        "Mooncake transfer regions require matching metadata lengths, got "
        f"base_addrs={len(bases)}, block_lens={len(strides)}, "
        f"kv_block_lens={len(lengths)}, "
        f"layer_names={len(names)}, "
        f"layer_indices={len(indices)}."
    )
    n = len(names)
    if groups is None:
        groups = [0] * n
    assert len(groups) == n, (
        "Mooncake transfer regions require matching group metadata lengths, "
        f"got group_indices={len(groups)}, layer_names={n}."
    )
    if shared is None:
        shared = [()] * n
    assert len(shared) == n
    if rows is None:
        # Unknown offsets must never count as row starts (no promotion to the full row).
        rows = [-1] * n
    assert len(rows) == n
    return [
        Region(names[k], indices[k], bases[k], strides[k], lengths[k], groups[k], tuple(shared[k]), rows[k])
        for k in range(n)
    ]


def align(local: list, remote: list, allow_partial: bool):
    """Pair every local region with the remote one of the same (layer name, occurrence).

    Returns (local, remote, error text or None). Remote regions without a local counterpart are ignored;
    a local one without a remote counterpart is an error unless `allow_partial` and the remote side has
    no region of that layer at all.
    """

    def keys(regions):
        seen = defaultdict(int)
        out = []
        for r in regions:
            out.append(((r.layer_name, seen[r.layer_name]), r))
            seen[r.layer_name] += 1
        return out

    by_key = dict(keys(remote))
    out_l, out_r = [], []
    for key, lr in keys(local):
        rr = by_key.get(key)
        if rr is None:
            if allow_partial and (lr.layer_name, 0) not in by_key:
                continue
            return [], [], (
                "Mooncake producer registered layer has no matching "
                f"consumer occurrence: {key[0]} occurrence {key[1]}."
            )
        if lr.layer_index != rr.layer_index:
            return [], [], (
                f"Mooncake registered layer index mismatch for {lr.layer_name}: "
                f"producer={lr.layer_index}, consumer={rr.layer_index}."
            )
        if lr.group_index != rr.group_index:
            return [], [], (
                f"Mooncake registered group index mismatch for {lr.layer_name}: "
                f"producer={lr.group_index}, consumer={rr.group_index}."
            )
        if lr.shared_group_ids and rr.shared_group_ids and lr.shared_group_ids != rr.shared_group_ids:
            return [], [], (
                f"Mooncake shared-group set mismatch for {lr.layer_name}: "
                f"producer={lr.shared_group_ids}, consumer={rr.shared_group_ids}."
            )
        out_l.append(lr)
        out_r.append(rr)
    return out_l, out_r, None


def coalesce(local: list, remote: list, promote_full_row: bool):
    """Merge runs of aligned regions that sit next to each other inside one block row on both sides, then
    (when both sides were fully covered) widen row-start regions with equal strides to the whole row."""
    if len(local) != len(remote):
        return local, remote

    def fits(first: Region, prev: Region, nxt: Region) -> bool:
        return (
            prev.group_index == nxt.group_index
            and prev.shared_group_ids == nxt.shared_group_ids
            and prev.block_len == nxt.block_len
            and prev.base_addr + prev.kv_block_len <= nxt.base_addr
            and nxt.base_addr + nxt.kv_block_len <= first.base_addr + first.block_len
        )

    def widen(pairs_l, pairs_r):
        if not promote_full_row:
            return pairs_l, pairs_r
        wl, wr = [], []
        for a, b in zip(pairs_l, pairs_r):
            if (
                a.row_offset == 0
                and b.row_offset == 0
                and a.block_len == b.block_len
                and a.kv_block_len <= a.block_len
                and b.kv_block_len <= b.block_len
            ):
                a = replace(a, kv_block_len=a.block_len)
                b = replace(b, kv_block_len=b.block_len)
            wl.append(a)
            wr.append(b)
        return wl, wr

    if len(local) <= 1:
        return widen(list(local), list(remote))

    merged_l, merged_r = [], []
    run_l, run_r = [local[0]], [remote[0]]

    def close_run():
        if len(run_l) == 1:
            merged_l.append(run_l[0])
            merged_r.append(run_r[0])
            return
        for out, run in ((merged_l, run_l), (merged_r, run_r)):
            out.append(replace(run[0], kv_block_len=run[-1].base_addr + run[-1].kv_block_len - run[0].base_addr))

    for a, b in zip(local[1:], remote[1:]):
        if fits(run_l[0], run_l[-1], a) and fits(run_r[0], run_r[-1], b):
            run_l.append(a)
            run_r.append(b)
        else:
            close_run()
            run_l, run_r = [a], [b]
    close_run()
    return widen(merged_l, merged_r)


def has_opaque_row(rows, lengths, strides) -> bool:
    """A region at row offset 0 as long as the whole row: a packed row that kept only its first layer name."""
    if not rows or len(rows) != len(lengths) or len(rows) != len(strides):
        return False
    return any(o == 0 and n == s for o, n, s in zip(rows, lengths, strides))


def pp_mismatch_hides_layers(local_pp: int, remote_pp: int, local_opaque: bool, rows, lengths, strides) -> bool:
    """Different PP sizes cannot be aligned by layer name when either side collapsed a row to one name."""
    if local_pp == remote_pp:
        return False
    return local_opaque or has_opaque_row(rows, lengths, strides)


def validate_lengths(local, remote, local_tp, remote_tp, replicated: bool, heads: Optional[int]):
    """Region-count and per-region length rules for the TP ratio (spec/PROTOCOL.md#byte-plan)."""
    if len(local) != len(remote):
        return "Mooncake asymmetric TP requires matching KV region counts between producer and consumer."
    if heads is not None:
        local_tp = min(local_tp, heads)
        remote_tp = min(remote_tp, heads)
    elif replicated:
        return None
    ratio = tp_ratio(local_tp, remote_tp)
    for idx, (a, b) in enumerate(zip(local, remote)):
        if ratio == 1:
            if a.kv_block_len != b.kv_block_len:
                return (
                    "Mooncake KV region length mismatch for homogeneous TP at "
                    f"region {idx}: local={a.kv_block_len}, remote={b.kv_block_len}."
                )
        elif ratio > 0:
            if b.kv_block_len != a.kv_block_len * ratio:
                return (
                    "Mooncake destination KV region length does not match the producer TP ratio at region "
                    f"{idx}: local={a.kv_block_len}, remote={b.kv_block_len}, tp_ratio={ratio}."
                )
        elif a.kv_block_len != b.kv_block_len * -ratio:
            return (
                "Mooncake source KV region length does not match the consumer TP ratio at region "
                f"{idx}: local={a.kv_block_len}, remote={b.kv_block_len}, tp_ratio={ratio}."
            )
    return None


def byte_plan(p_rank, p_tp, d_rank, d_tp, p_len, d_len, p_replicated: bool, heads: Optional[int]):
    """What P rank `p_rank` copies of each block into D rank `d_rank`: (send?, src offset, dst offset, length)."""
    ratio = tp_ratio(p_tp, d_tp)
    if ratio == 1:
        return True, 0, 0, p_len
    if heads is not None and p_replicated != (d_tp > heads):
        # One side holds whole replicated caches, the other a head shard: copy head by head.
        p_heads = max(heads // p_tp, 1)
        p_copies = max(p_tp // heads, 1)
        first_p = p_rank * heads // p_tp
        first_d = d_rank * heads // d_tp
        head_bytes = p_len // p_heads
        return (
            p_rank % p_copies == 0,
            max(first_d - first_p, 0) * head_bytes,
            max(first_p - first_d, 0) * head_bytes,
            head_bytes,
        )
    if ratio > 0:
        if p_replicated:
            return p_rank % ratio == 0, 0, 0, p_len
        return True, 0, (p_rank % ratio) * p_len, p_len
    if p_replicated:
        return True, 0, 0, p_len
    return True, (d_rank % -ratio) * d_len, 0, d_len


# ----------------------------------------------------------------------------------------------------------
# Descriptors for one round


def region_block_ids(by_group: list, group_index: int, shared: tuple) -> list:
    if group_index == SHARED_GROUP:
        assert shared, "Shared packed region is missing its group ids."
        out = []
        for g in shared:
            out.extend(by_group[g])
        return out
    assert 0 <= group_index < len(by_group), "Transfer region references a missing KV group."
    return list(by_group[group_index])


def contiguous_runs(src: list, dst: list):
    """Split paired id lists where either side stops counting up by one."""
    if not src:
        return [], []
    runs_s, runs_d = [[src[0]]], [[dst[0]]]
    for k in range(1, len(src)):
        if src[k] - src[k - 1] == 1 and dst[k] - dst[k - 1] == 1:
            runs_s[-1].append(src[k])
            runs_d[-1].append(dst[k])
        else:
            runs_s.append([src[k]])
            runs_d.append([dst[k]])
    return runs_s, runs_d


def can_merge_blocks(local_stride: int, remote_stride: int, src_off: int, dst_off: int, n: int) -> bool:
    """A run of consecutive blocks is one descriptor when whole strides are copied on both sides."""
    return src_off == 0 and dst_off == 0 and n == local_stride and n == remote_stride


@dataclass
class Model:
    """What P knows about its own model (TESTEE.md `model`)."""

    tp_rank: int = 0
    tp_size: int = 1
    pp_size: int = 1
    total_num_kv_heads: int = 1
    use_mla: bool = False
    group_kinds: tuple = ("attn",)
    physical_blocks_per_logical: int = 1
    layer_groups: dict = None
    # Extension (not in TESTEE.md): attention pages carry padding, so KV-head re-sharding is refused.
    padded_pages: bool = False

    @property
    def has_mamba(self) -> bool:
        return "mamba" in self.group_kinds

    @property
    def replicated(self) -> bool:
        return self.use_mla or self.tp_size > self.total_num_kv_heads

    @property
    def known_heads(self) -> Optional[int]:
        return None if self.use_mla or self.has_mamba else self.total_num_kv_heads

    def is_mamba_group(self, g: int) -> bool:
        return g < len(self.group_kinds) and self.group_kinds[g] == "mamba"

    def kernel_ids(self, by_group: list) -> list:
        k = self.physical_blocks_per_logical
        if k == 1:
            return by_group
        return [
            ids if self.is_mamba_group(g) else [b * k + j for b in ids for j in range(k)]
            for g, ids in enumerate(by_group)
        ]


def build_descriptors(model: Model, ready, req_blocks: dict, remote_tp_rank: int, remote_tp_size: int,
                      local: list, remote: list):
    """Descriptors for the ready entries of one round.

    `ready`: [(d_req_id, local block ids per group)]. Returns (descriptors [(src, dst, len)], err_reqs,
    err_msg). A request with nothing to receive produces no descriptor and no error.
    """
    descs = []
    err_reqs = []
    err_msg = None
    for d_req_id, local_groups in ready:
        remote_groups = req_blocks[d_req_id][1]
        if not remote_groups or all(len(g) == 0 for g in remote_groups):
            continue
        if len(local_groups) != len(remote_groups):
            err_reqs.append(d_req_id)
            err_msg = err_msg or "KV group count mismatch"
            continue
        by_group_l, by_group_r = [], []
        short = False
        for g, (lg, rg) in enumerate(zip(local_groups, remote_groups)):
            if model.is_mamba_group(g):
                lg = [b for b in lg if b != NULL_BLOCK_ID]
                rg = [b for b in rg if b != NULL_BLOCK_ID]
            if len(lg) < len(rg):
                short = True
                break
            if len(lg) > len(rg):
                # P computed more than D needs (D had a prefix hit): send the tail.
                lg = lg[-len(rg):] if rg else []
            by_group_l.append(list(lg))
            by_group_r.append(list(rg))
        if short:
            err_reqs.append(d_req_id)
            err_msg = err_msg or "P num blocks less than D"
            continue
        if not any(by_group_l):
            continue
        by_group_l = model.kernel_ids(by_group_l)
        by_group_r = model.kernel_ids(by_group_r)
        for lr, rr in zip(local, remote):
            assert lr.group_index == rr.group_index, (
                "Aligned Mooncake transfer regions must belong to the same KV group."
            )
            src_ids = region_block_ids(by_group_l, lr.group_index, lr.shared_group_ids)
            dst_ids = region_block_ids(by_group_r, rr.group_index, lr.shared_group_ids)
            if not src_ids:
                continue
            runs_s, runs_d = contiguous_runs(src_ids, dst_ids)
            send, src_off, dst_off, n = byte_plan(
                model.tp_rank, model.tp_size, remote_tp_rank, remote_tp_size,
                lr.kv_block_len, rr.kv_block_len, model.replicated, model.known_heads,
            )
            if not send:
                continue
            assert src_off + n <= lr.kv_block_len, "Computed source transfer region exceeds local KV block size."
            assert dst_off + n <= rr.kv_block_len, "Destination transfer region exceeds remote KV block size."
            whole_blocks = can_merge_blocks(lr.block_len, rr.block_len, src_off, dst_off, n)
            for rs, rd in zip(runs_s, runs_d):
                if whole_blocks:
                    descs.append((lr.base_addr + rs[0] * lr.block_len, rr.base_addr + rd[0] * rr.block_len, n * len(rs)))
                else:
                    for s, d in zip(rs, rd):
                        descs.append((lr.base_addr + s * lr.block_len + src_off, rr.base_addr + d * rr.block_len + dst_off, n))
    return descs, err_reqs, err_msg


# ----------------------------------------------------------------------------------------------------------
# Preparing a peer's layout (vLLM `_prepare_transfer_regions` without its caches)


def local_regions_of(model: Model, layout: dict):
    """(regions, error text or None) for P's own registered layout (TESTEE.md `layout`).

    Missing group indices come from `model.layer_groups`; missing or mismatched shared-group / row-offset
    columns count as unknown (no sharing, offset -1), which is fatal only for a shared (-1) region.
    """
    names = list(layout.get("registered_layer_names") or [])
    groups = [int(g) for g in layout.get("registered_group_indices") or []]
    shared = [tuple(int(g) for g in s) for s in layout.get("registered_shared_group_ids") or []]
    rows = [int(r) for r in layout.get("registered_row_offsets") or []]
    error = None
    if len(shared) != len(names):
        if SHARED_GROUP in groups:
            error = ("Mooncake shared-group metadata does not match registered layers, so a shared packed "
                     "region cannot be transferred.")
        shared = None
    if not groups:
        groups = [int((model.layer_groups or {}).get(n, 0)) for n in names]
    regions = build_regions(
        [int(x) for x in layout.get("kv_caches_base_addr") or []],
        [int(x) for x in layout.get("block_lens") or []],
        [int(x) for x in layout.get("kv_block_lens") or []],
        names,
        [int(x) for x in layout.get("registered_layer_indices") or []],
        groups, shared, rows if len(rows) == len(names) else None)
    return regions, error


def prepare(model: Model, local: list, local_error, meta):
    """Align P's regions with the layout a pull carries, check head re-sharding, coalesce.

    `meta` is the decoded request. Returns (local, remote, error text or None); assertion texts of
    malformed column lengths propagate as AssertionError (vLLM sends them as ERROR).
    """
    if local_error:
        return [], [], local_error
    names = meta.registered_layer_names
    groups = list(meta.registered_group_indices)
    if not groups:
        groups = [int((model.layer_groups or {}).get(n, 0)) for n in names]
    shared = [tuple(s) for s in meta.registered_shared_group_ids]
    rows = meta.registered_row_offsets
    remote_all = build_regions(meta.kv_caches_base_addr, meta.block_lens, meta.kv_block_lens, names,
                               meta.registered_layer_indices, groups,
                               shared if len(shared) == len(names) else None,
                               rows if len(rows) == len(names) else None)
    al, ar, err = align(local, remote_all, allow_partial=meta.remote_pp_size != model.pp_size)
    if err is not None:
        return [], [], err
    heads = model.total_num_kv_heads
    if (model.padded_pages and not model.use_mla and not model.has_mamba
            and min(model.tp_size, heads) != min(meta.remote_tp_size, heads) and al):
        return [], [], ("Mooncake KV-head re-sharding is not supported for padded "
                        f"KV pages (layer {al[0].layer_name}).")
    if tp_ratio(model.tp_size, meta.remote_tp_size) == 1 or model.replicated:
        whole = len(al) == len(local) and len(ar) == len(remote_all)
        al, ar = coalesce(al, ar, promote_full_row=whole)
    return al, ar, None
