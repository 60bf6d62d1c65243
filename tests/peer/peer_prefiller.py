"""Prefiller role: a ZeroMQ ROUTER serving pulls the way vLLM 0.33.0 (or 0.32.0) does, pushing bytes into the
decoder over the TCP transfer-engine stand-in.

Behaviour (spec/PROTOCOL.md#side-channel, spec/PROTOCOL.md#sequence,
spec/PROTOCOL.md#errors, spec/PROTOCOL.md#tp-fan-out; vLLM `MooncakeConnectorWorker.send_kv_to_decode` and friends):

* Each ROUTER message must be exactly `[routing id, payload]`; anything else ends the listener for good, as
  vLLM's listener loop does (the 3-frame hazard). The payload is decoded strictly with the revision's request
  struct; any exception while decoding or handling becomes one `ERROR` reply carrying `str(exception)`.
* Checks in order: TP pairing, PP/packed-row compatibility, layout (0.33.0: a layout-less pull with a
  non-zero `layout_id` is served from the per-peer layout cache or answered `LAYOUT_MISS`), region length
  validation.
* Rounds: wait (at most `abort_timeout_s` per round) until some requested transfers are ready, make ONE
  transfer-engine write for all that became ready, reply `CONTINUE` while some are still waiting, `FINISH`
  with the last; a round that times out answers `FINISH` with every still-waiting id in `err_reqs`.
* A transfer is finished-sending after `need_send` successful deliveries; a ready transfer nobody pulls
  expires `abort_timeout_s` after it became ready.
* At most 2 x `num_workers` (default 10) messages are handled at a time; more wait in a queue.

Deviation (documented, invisible on the wire): a placeholder entry a pull created for a transfer the
scheduler never named is dropped once no exchange waits on it (vLLM keeps it forever, vllm-project/vllm#51236).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections import OrderedDict

import msgspec
import zmq
import zmq.asyncio

import peer_http
import peer_regions as pr
from peer_memory import Memory, te_write
from peer_wire import CONTINUE, ERROR, FINISH, LAYOUT_MISS, Revision, Unsupported

log = logging.getLogger("peer.prefiller")

MAX_PEER_LAYOUTS = 1024  # vLLM _MAX_PEER_LAYOUTS
MAX_PREPARED = 4096  # our bound on the (unbounded in vLLM) cache of aligned layouts
MAX_WIRE_LOG = 10_000  # messages kept for `status` with record_wire (the first ones)


class Entry:
    """One transfer id on P (vLLM `SendBlockMeta`)."""

    __slots__ = ("p_req_id", "transfer_id", "blocks", "ready", "expire_time", "need_send", "sent", "sending",
                 "watchers", "waiters")

    def __init__(self, p_req_id: str, transfer_id: str):
        self.p_req_id = p_req_id
        self.transfer_id = transfer_id
        self.blocks: list = []
        self.ready = False
        self.expire_time = float("inf")
        self.need_send = 0
        self.sent = 0
        self.sending = 0
        self.watchers: set = set()  # asyncio.Events of exchanges waiting for this entry
        self.waiters = 0  # exchanges holding this entry


class Prefiller:
    def __init__(self, rev: Revision, config: dict):
        self.rev = rev
        c = config
        model = c.get("model") or {}
        self.engine_id = str(c.get("engine_id", "engine-prefill-0"))
        self.dp_rank = int(c.get("dp_rank", 0))
        self.pp_rank = int(c.get("pp_rank", 0))
        self.model = pr.Model(
            tp_rank=int(c.get("tp_rank", 0)),
            tp_size=int(c.get("tp_size", 1)),
            pp_size=int(c.get("pp_size", 1)),
            total_num_kv_heads=int(model.get("total_num_kv_heads", 1)),
            use_mla=bool(model.get("use_mla", False)),
            group_kinds=tuple(model.get("group_kinds") or ("attn",)),
            physical_blocks_per_logical=int(model.get("physical_blocks_per_logical", 1)),
            layer_groups=dict(model.get("layer_groups") or {}),
            padded_pages=bool(model.get("padded_pages", False)),
        )
        self.bootstrap = c.get("bootstrap")
        self.bind = c.get("bind") or "tcp://127.0.0.1:*"
        self.abort_timeout = float(c.get("abort_timeout_s", 480))
        self.num_tasks = 2 * int(c.get("num_workers", 10))
        layout = c.get("layout") or {}
        self.memory = Memory.from_layout(layout, fill_provenance=True)
        self.local_regions, self.local_error = pr.local_regions_of(self.model, layout)

        self.ctx = zmq.asyncio.Context()
        self.sock = None
        self.endpoint = None
        self.table: dict = {}  # transfer id -> Entry
        self.layouts: OrderedDict = OrderedDict()  # per-peer layout cache (0.33.0)
        self.prepared: dict = {}  # full remote layout -> (local, remote, err)
        self.queue: asyncio.Queue = asyncio.Queue()
        self.tasks: list = []
        self.expiry_task = None
        self.active = 0
        self.finished_sending: list = []
        self.writes: list = []
        self.fail_next = 0
        self.fail_ret = -1
        self.expiry: list = []  # heap of (expire_time, seq, transfer id)
        self.expiry_seq = 0
        self.expiry_kick = asyncio.Event()
        self.listener_alive = False
        self.request_decoder = msgspec.msgpack.Decoder(rev.request)
        self.encoder = msgspec.msgpack.Encoder()
        self.record_wire = bool(c.get("record_wire", False))
        self.wire: list = []  # with record_wire: every ROUTER message, {"dir", "frames": [hex]}

    def _log_wire(self, inbound: bool, frames):
        if self.record_wire and len(self.wire) < MAX_WIRE_LOG:
            self.wire.append({"dir": "in" if inbound else "out", "frames": [bytes(f).hex() for f in frames]})

    # ------------------------------------------------------------------------------------------------------
    # lifecycle

    async def start(self) -> dict:
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.bind(self.bind)
        self.endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        if self.bootstrap:
            await asyncio.to_thread(peer_http.register, self.bootstrap, {
                "engine_id": self.engine_id, "dp_rank": self.dp_rank, "tp_rank": self.model.tp_rank,
                "pp_rank": self.pp_rank, "addr": self.endpoint})
        self.expiry_task = asyncio.create_task(self._expire_loop())
        self.tasks = [asyncio.create_task(self._worker()) for _ in range(self.num_tasks)]
        self.tasks += [asyncio.create_task(self._listen()), self.expiry_task]
        return {"endpoint": self.endpoint}

    async def stop(self):
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.sock is not None:
            self.sock.close(linger=0)
        self.ctx.term()

    async def _listen(self):
        self.listener_alive = True
        try:
            while True:
                frames = await self.sock.recv_multipart()
                self._log_wire(True, frames)
                if len(frames) != 2:
                    # vLLM unpacks exactly two frames; anything else ends its listener for good: the
                    # handlers are cancelled (no further replies), queued messages are never served and the
                    # ROUTER is closed.
                    log.error("Error in Mooncake sender thread: %d frames instead of 2. Exiting thread.",
                              len(frames))
                    me = asyncio.current_task()
                    workers = [t for t in self.tasks if t is not me and t is not self.expiry_task]
                    for t in workers:
                        t.cancel()
                    await asyncio.gather(*workers, return_exceptions=True)
                    while not self.queue.empty():
                        self.queue.get_nowait()
                    self.sock.close(linger=0)
                    return
                self.queue.put_nowait((frames[0], frames[1]))
        finally:
            self.listener_alive = False

    async def _worker(self):
        while True:
            identity, payload = await self.queue.get()
            self.active += 1
            try:
                meta = self.request_decoder.decode(payload)
                await self._serve(identity, meta)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - vLLM turns every failure into an ERROR reply
                log.info("pull failed: %s", e)
                await self._reply(identity, self.rev.new_response(ERROR, err_msg=str(e)))
            finally:
                self.active -= 1

    async def _reply(self, identity: bytes, resp):
        frames = [identity, self.encoder.encode(resp)]
        self._log_wire(False, frames)
        await self.sock.send_multipart(frames)

    # ------------------------------------------------------------------------------------------------------
    # control commands

    async def handle(self, cmd: dict) -> dict:
        name = cmd.get("cmd")
        if name == "allocate":
            tid = str(cmd["transfer_id"])
            if tid not in self.table:
                self.table[tid] = Entry(str(cmd["p_req_id"]), tid)
            return {}
        if name == "ready":
            tid = str(cmd["transfer_id"])
            blocks = [[int(b) for b in g] for g in cmd.get("blocks") or []]
            if not any(blocks):
                # vLLM's scheduler hands nothing to the worker when every group is empty.
                log.warning("ready %s without blocks: ignored, as vLLM does", tid)
                return {}
            e = self.table.get(tid)
            if e is None:  # vLLM requires the allocation first; we create the entry instead of failing
                e = self.table[tid] = Entry(str(cmd["p_req_id"]), tid)
            e.p_req_id = str(cmd["p_req_id"])
            e.blocks = blocks
            e.expire_time = time.monotonic() + self.abort_timeout
            e.ready = True
            self._schedule_expiry(e)
            for w in e.watchers:
                w.set()
            return {}
        if name == "abort":
            self.table.pop(str(cmd["transfer_id"]), None)
            return {}
        if name == "forget_layouts":
            self.layouts.clear()
            self.prepared.clear()
            return {}
        if name == "fail_next_transfer":
            self.fail_next = int(cmd.get("count", 1))
            self.fail_ret = int(cmd.get("ret", -1))
            return {}
        if name == "status":
            self._expire(time.monotonic())
            return {
                "tracked_transfers": len(self.table),
                "open_exchanges": self.active + self.queue.qsize(),
                "finished_sending": list(self.finished_sending),
                "writes": list(self.writes),
                "cached_layouts": len(self.layouts),
                "listener_alive": self.listener_alive,
                **({"wire": list(self.wire)} if self.record_wire else {}),
            }
        raise Unsupported(f"unsupported: {name}")

    # ------------------------------------------------------------------------------------------------------
    # expiry of ready transfers nobody pulls

    def _schedule_expiry(self, e: Entry):
        self.expiry_seq += 1
        heapq.heappush(self.expiry, (e.expire_time, self.expiry_seq, e.transfer_id))
        self.expiry_kick.set()

    def _expire(self, now: float):
        while self.expiry and self.expiry[0][0] < now:
            when, _, tid = heapq.heappop(self.expiry)
            e = self.table.get(tid)
            if e is None or e.expire_time != when or not e.p_req_id:
                continue
            if e.sending:
                # A send is in flight: look again shortly.
                self.expiry_seq += 1
                heapq.heappush(self.expiry, (now + 0.05, self.expiry_seq, tid))
                e.expire_time = now + 0.05
                continue
            del self.table[tid]
            log.warning("transfer %s (%s) expired without being sent", tid, e.p_req_id)
            self.finished_sending.append({"p_req_id": e.p_req_id, "transfer_id": tid, "expired": True})

    async def _expire_loop(self):
        while True:
            self._expire(time.monotonic())
            delay = 1.0
            if self.expiry:
                delay = min(delay, max(self.expiry[0][0] - time.monotonic(), 0.0) + 0.001)
            self.expiry_kick.clear()
            try:
                await asyncio.wait_for(self.expiry_kick.wait(), delay)
            except asyncio.TimeoutError:
                pass

    # ------------------------------------------------------------------------------------------------------
    # layouts

    def _prepare(self, meta):
        """Aligned (local, remote, error) regions for the layout the pull carries; remembered per peer."""
        key = (meta.remote_hostname, meta.remote_port, meta.remote_tp_size, meta.remote_tp_rank,
               meta.remote_pp_size, tuple(meta.kv_caches_base_addr), tuple(meta.block_lens),
               tuple(meta.kv_block_lens), tuple(meta.registered_layer_names),
               tuple(meta.registered_layer_indices), tuple(meta.registered_group_indices),
               tuple(tuple(s) for s in meta.registered_shared_group_ids), tuple(meta.registered_row_offsets))
        found = self.prepared.get(key)
        if found is None:
            found = pr.prepare(self.model, self.local_regions, self.local_error, meta)
            if len(self.prepared) >= MAX_PREPARED:
                self.prepared.clear()
            self.prepared[key] = found
        self._remember(meta, found)
        return found

    def _remember(self, meta, prepared):
        if not self.rev.layout_cache or prepared[2] is not None or not meta.layout_id:
            return
        key = (meta.remote_hostname, meta.remote_port, meta.remote_tp_rank, meta.remote_pp_size,
               meta.remote_tp_size, meta.layout_id)
        self.layouts[key] = prepared[:2]
        self.layouts.move_to_end(key)
        while len(self.layouts) > MAX_PEER_LAYOUTS:
            self.layouts.popitem(last=False)

    # ------------------------------------------------------------------------------------------------------
    # one pull

    async def _serve(self, identity: bytes, meta):
        m = self.model
        ranks = pr.target_ranks(m.tp_rank, m.tp_size, meta.remote_tp_size)
        if meta.remote_tp_rank not in ranks:
            msg = (f"This D tp_rank {meta.remote_tp_rank} is not paired with P tp_rank {m.tp_rank}; "
                   f"expected one of {ranks}.")
            await self._reply(identity, self.rev.new_response(ERROR, err_msg=msg))
            return
        if pr.pp_mismatch_hides_layers(m.pp_size, meta.remote_pp_size, False, meta.registered_row_offsets,
                                       meta.kv_block_lens, meta.block_lens):
            # Our own regions are never taken for opaque packed rows: the config names every layer.
            msg = ("Mooncake non-page-contiguous packed regions keep only the first layer name, so they "
                   f"cannot be aligned across PP sizes {m.pp_size} and {meta.remote_pp_size}.")
            await self._reply(identity, self.rev.new_response(ERROR, err_msg=msg))
            return
        layout_id = meta.layout_id if self.rev.layout_cache else 0
        if layout_id and not meta.kv_caches_base_addr:
            key = (meta.remote_hostname, meta.remote_port, meta.remote_tp_rank, meta.remote_pp_size,
                   meta.remote_tp_size, layout_id)
            stored = self.layouts.get(key)
            if stored is None:
                msg = (f"Mooncake KV layout {layout_id:#x} from {meta.remote_hostname}:{meta.remote_port} "
                       "is not cached.")
                await self._reply(identity, self.rev.new_response(LAYOUT_MISS, err_msg=msg))
                return
            self.layouts.move_to_end(key)
            local, remote = stored
        else:
            local, remote, err = self._prepare(meta)
            if err is not None:
                await self._reply(identity, self.rev.new_response(ERROR, err_msg=err))
                return
        err = pr.validate_lengths(local, remote, m.tp_size, meta.remote_tp_size, m.replicated, m.known_heads)
        if err is not None:
            await self._reply(identity, self.rev.new_response(ERROR, err_msg=err))
            return

        pending: dict = {}
        for d_req_id, (tid, _) in meta.req_blocks.items():
            e = self.table.get(tid)
            if e is None:
                e = self.table[tid] = Entry("", tid)  # placeholder until the scheduler names it
            pending[d_req_id] = e
        held = list(pending.values())
        kick = asyncio.Event()
        for e in held:
            e.waiters += 1
            e.watchers.add(kick)
        try:
            await self._rounds(identity, meta, layout_id, ranks, pending, kick, local, remote)
        finally:
            for e in held:
                e.watchers.discard(kick)
                e.waiters -= 1
                if (e.waiters == 0 and not e.p_req_id and not e.ready
                        and self.table.get(e.transfer_id) is e):
                    del self.table[e.transfer_id]

    async def _rounds(self, identity, meta, layout_id, ranks, pending, kick, local, remote):
        session = f"{meta.remote_hostname}:{meta.remote_port}"
        while pending:
            done = [d for d, e in pending.items() if e.ready]
            if not done:
                kick.clear()
                try:
                    await asyncio.wait_for(kick.wait(), self.abort_timeout)
                except asyncio.TimeoutError:
                    log.warning("Timeout waiting for P side ready: %s", list(pending))
                    await self._reply(identity, self.rev.new_response(
                        FINISH, err_reqs=list(pending), err_msg="Timeout waiting for P side ready.",
                        layout_id=layout_id))
                    return
                continue
            ready = []
            for d in done:
                e = pending.pop(d)
                if e.transfer_id in self.table:
                    e.sending += 1
                    if not e.need_send:
                        e.need_send = len(ranks)
                        if meta.remote_pp_size > 1 and meta.remote_pp_size != self.model.pp_size:
                            e.need_send *= meta.remote_pp_size
                    ready.append((d, e))
                else:
                    log.warning("transfer for %s expired before sending", d)
            status = CONTINUE if pending else FINISH
            descs, err_reqs, err_msg = pr.build_descriptors(
                self.model, [(d, e.blocks) for d, e in ready], meta.req_blocks, meta.remote_tp_rank,
                meta.remote_tp_size, local, remote)
            failed = set(err_reqs)
            ok = [d for d, _ in ready if d not in failed]
            if descs:
                ret = await self._transfer(session, descs)
                if ret != 0:
                    text = f"Mooncake transfer engine returned {ret}"
                    err_msg = text if err_msg is None else f"{err_msg}; {text}"
                    err_reqs = err_reqs + ok
                    failed.update(ok)
                    ok = []
            for d, e in ready:
                e.sending -= 1
                if d in failed:
                    continue
                e.sent += 1
                if e.sent == e.need_send and self.table.pop(e.transfer_id, None) is not None:
                    self.finished_sending.append({"p_req_id": e.p_req_id, "transfer_id": e.transfer_id,
                                                  "expired": False})
            await self._reply(identity, self.rev.new_response(
                status, ok_reqs=ok or None, err_reqs=err_reqs or None, err_msg=err_msg, layout_id=layout_id))

    async def _transfer(self, session: str, descs) -> int:
        total = sum(n for _, _, n in descs)
        if self.fail_next > 0:
            self.fail_next -= 1
            ret = self.fail_ret
        else:
            ret = await te_write(self.memory, session, descs)
        self.writes.append({"session": session, "descriptors": len(descs), "bytes": total, "ret": ret})
        return ret
