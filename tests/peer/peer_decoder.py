"""Decoder role: pulls the way vLLM 0.33.0 (or 0.32.0) does and receives bytes on a TCP transfer-engine port.

Behaviour (spec/PROTOCOL.md#side-channel, spec/PROTOCOL.md#sequence,
spec/PROTOCOL.md#bootstrap-query, spec/PROTOCOL.md#tp-fan-out; vLLM `receive_kv`, `receive_kv_from_single_worker`,
`_handle_failed_recv`, `process_pulling_result`):

* Requests of one `pull` command are grouped by remote engine id. An unknown engine is looked up with
  `GET {bootstrap}/query` (one query per bootstrap address at a time, the answer cached for good); a missing
  engine fails the group.
* P TP ranks: our `handshake_target_ranks(P tp size)`; P PP ranks: our own when the PP sizes agree and our
  rank is listed, else all of them in order. Each selected worker gets the same bytes on a NEW DEALER
  (linger 0), one frame per request message.
* 0.33.0: the layout is left out for an address that echoed the current `layout_id` (config `layout_id`,
  0 = always send it); `LAYOUT_MISS` on a layout-less pull makes us resend with the layout on a new DEALER.
* Replies: `ERROR` (or `LAYOUT_MISS` after a full layout) fails every request of the message; otherwise
  `err_reqs` fail and `ok_reqs` settle; 0.33.0 fails whatever a `FINISH` left unreported. No reply within
  `abort_timeout_s + 60` s fails the message's unsettled requests.
* A request is finished once every contacted worker settled it; a failed request is finished too, and
  reported with its blocks invalid (flattened over its KV groups), or in `failed_recving` when the layout has
  several KV-cache groups. Requests without local blocks (free-only) are never reported.
"""

from __future__ import annotations

import asyncio
import logging

import msgspec
import zmq
import zmq.asyncio

import peer_http
import peer_regions as pr
from peer_memory import Memory, TeServer
from peer_wire import ERROR, FINISH, LAYOUT_MISS, Revision, Unsupported

log = logging.getLogger("peer.decoder")

MAX_EXCHANGE_LOG = 10_000  # exchanges kept for `status` (the first ones)


class Pull:
    """One D request (vLLM `PullReqMeta`) plus our bookkeeping."""

    __slots__ = ("d_req_id", "transfer_id", "blocks", "engine_id", "bootstrap", "tasks", "failed", "alive")
    # pending_pulls counts a Pull until every contacted worker settled it, it was reported finished, or
    # every exchange carrying it ended (a 0.32.0 FINISH may leave it unsettled for good).

    def __init__(self, r: dict):
        self.d_req_id = str(r["d_req_id"])
        self.transfer_id = str(r["transfer_id"])
        self.blocks = [[int(b) for b in g] for g in r.get("blocks") or []]
        self.engine_id = str(r["engine_id"])
        self.bootstrap = str(r["bootstrap_addr"])
        self.tasks = 0  # contacted workers that have not settled it yet (pull_tasks_count)
        self.failed = False
        self.alive = 0  # exchanges still running for it (ours, for pending_pulls)


class Decoder:
    def __init__(self, rev: Revision, config: dict):
        self.rev = rev
        c = config
        self.hostname = str(c.get("hostname", "127.0.0.1"))
        self.tp_rank = int(c.get("tp_rank", 0))
        self.tp_size = int(c.get("tp_size", 1))
        self.pp_rank = int(c.get("pp_rank", 0))
        self.pp_size = int(c.get("pp_size", 1))
        self.layout_id = int(c.get("layout_id", 0)) if rev.layout_cache else 0
        self.abort_timeout = float(c.get("abort_timeout_s", 480))
        self.layout = c.get("layout") or {}
        self.memory = Memory.from_layout(self.layout, fill_provenance=False)
        self.te = TeServer(self.memory)
        self.te_port = 0
        self.ctx = zmq.asyncio.Context()
        self.agents: dict = {}  # engine id -> {tp: {pp: addr}}
        self.queries: dict = {}  # bootstrap address -> asyncio.Event of the query in flight
        self.acked: set = set()  # worker addresses that echoed our layout_id
        self.tasks: set = set()
        self.pending: set = set()
        self.open_exchanges = 0
        self.finished: list = []
        self.finished_set: set = set()
        self.failed: list = []
        self.exchanges: list = []  # log of every exchange (informational, for tests)
        self.encoder = msgspec.msgpack.Encoder()
        self.resp_decoder = msgspec.msgpack.Decoder(rev.response)
        self.record_wire = bool(c.get("record_wire", False))
        self.wire: list = []  # with record_wire: every message sent and received, {"dir", "frames", "endpoint"}

    def _log_wire(self, inbound: bool, frame: bytes, addr: str):
        if self.record_wire and len(self.wire) < MAX_EXCHANGE_LOG:
            self.wire.append({"dir": "in" if inbound else "out", "frames": [bytes(frame).hex()], "endpoint": addr})

    async def start(self) -> dict:
        self.te_port = await self.te.start("127.0.0.1", 0)
        return {"session": f"127.0.0.1:{self.te_port}"}

    async def stop(self):
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.te.close()
        self.ctx.destroy(linger=0)

    def _spawn(self, coro):
        t = asyncio.create_task(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    # ------------------------------------------------------------------------------------------------------
    # control commands

    async def handle(self, cmd: dict) -> dict:
        name = cmd.get("cmd")
        if name == "pull":
            groups: dict = {}
            for r in cmd.get("requests") or []:
                p = Pull(r)
                groups.setdefault(p.engine_id, {})[p.d_req_id] = p
            for engine, pulls in groups.items():
                self.pending.update(pulls.values())
                if engine in self.agents:
                    self._dispatch(engine, pulls)
                else:
                    self._spawn(self._new_engine(engine, pulls))
            return {}
        if name == "status":
            return {"finished": list(self.finished), "failed": list(self.failed),
                    "pending_pulls": len(self.pending), "open_exchanges": self.open_exchanges,
                    "exchanges": list(self.exchanges), "writes_received": self.te.writes,
                    **({"wire": list(self.wire)} if self.record_wire else {})}
        if name == "read_memory":
            addr, n = int(cmd["addr"]), int(cmd["len"])
            data = self.memory.read(addr, n)
            if data is None:
                raise ValueError(f"{n} bytes at {addr:#x} are not registered memory")
            return {"hex": bytes(data).hex()}
        raise Unsupported(f"unsupported: {name}")

    # ------------------------------------------------------------------------------------------------------
    # outcomes

    def _report_failed(self, p: Pull, reason: str):
        # vLLM `_handle_failed_recv` (0.31.0 on): with several KV-cache groups the request goes to
        # `failed_recving`; otherwise its destination blocks, flattened over the groups, are reported invalid so
        # the scheduler recomputes them.
        groups = {g for g in self.layout.get("registered_group_indices") or [] if isinstance(g, int) and g >= 0}
        by_request = len(groups) > 1
        self.failed.append({"d_req_id": p.d_req_id, "reason": reason,
                            "invalid_blocks": [] if by_request else [b for g in p.blocks for b in g],
                            "failed_recving": by_request})

    def _report_finished(self, p: Pull):
        self.pending.discard(p)
        if p.d_req_id not in self.finished_set:
            self.finished_set.add(p.d_req_id)
            self.finished.append(p.d_req_id)

    def _settle(self, p: Pull):
        """One contacted worker is done with `p` (0.33.0 `_complete_pull_task`)."""
        if p.tasks > 0:
            p.tasks -= 1
        if p.tasks == 0:
            self.pending.discard(p)
            if any(p.blocks):
                self._report_finished(p)

    def _fail(self, table: dict, ids, reason: str):
        if self.rev.settle_per_worker:
            for rid in list(ids):
                p = table.pop(rid, None)
                if p is None:
                    continue
                if p.failed:
                    self._settle(p)
                    continue
                p.failed = True
                if any(p.blocks):
                    log.info("pull of %s failed: %s", rid, reason)
                    self._report_failed(p, reason)
                self._settle(p)
        else:
            for rid in list(ids):
                p = table.get(rid)
                if p is None or p.failed:
                    continue
                p.failed = True
                if not any(p.blocks):
                    continue
                log.info("pull of %s failed: %s", rid, reason)
                self._report_failed(p, reason)
                self._report_finished(p)

    def _apply(self, resp, table: dict):
        if self.rev.settle_per_worker:
            if resp.err_reqs:
                self._fail(table, resp.err_reqs, resp.err_msg or "unknown error")
            for rid in resp.ok_reqs or []:
                p = table.pop(rid, None)
                if p is not None:
                    self._settle(p)
        else:
            for rid in resp.ok_reqs or []:
                p = table[rid]  # an id we never asked for raises, as in vLLM 0.32.0
                if p.failed:
                    continue
                p.tasks -= 1
                if p.tasks == 0:
                    self.pending.discard(p)
                    if any(p.blocks):
                        self._report_finished(p)
            if resp.err_reqs:
                self._fail(table, resp.err_reqs, resp.err_msg or "unknown error")

    # ------------------------------------------------------------------------------------------------------
    # discovery and fan-out

    async def _new_engine(self, engine: str, pulls: dict):
        addr = next(iter(pulls.values())).bootstrap
        if addr in self.queries:
            await self.queries[addr].wait()
        else:
            done = self.queries[addr] = asyncio.Event()
            try:
                data = await asyncio.to_thread(peer_http.query, addr)
                for entry in data.values():
                    self.agents[entry["engine_id"]] = {
                        int(tp): {int(pp): a for pp, a in pps.items()} for tp, pps in entry["worker_addr"].items()
                    }
            except Exception as e:  # noqa: BLE001 - a failed query just leaves the engine unknown
                log.error("bootstrap query to %s failed: %s", addr, e)
            finally:
                done.set()
                del self.queries[addr]
        if engine not in self.agents:
            self._fail(pulls, list(pulls), f"remote engine_id {engine} not found from bootstrap server {addr}")
            self.pending.difference_update(pulls.values())
            return
        self._dispatch(engine, pulls)

    def _dispatch(self, engine: str, pulls: dict):
        agents = self.agents[engine]
        try:
            workers = []
            for tp in pr.target_ranks(self.tp_rank, self.tp_size, len(agents)):
                by_pp = agents[tp]
                if self.pp_size == len(by_pp) and self.pp_rank in by_pp:
                    pps = [self.pp_rank]
                else:
                    pps = sorted(by_pp)
                workers.extend(by_pp[pp] for pp in pps)
        except (AssertionError, KeyError, ZeroDivisionError) as e:
            # vLLM raises inside its task and never settles these; we fail them instead.
            self._fail(pulls, list(pulls), f"cannot select prefill workers: {e!r}")
            self.pending.difference_update(pulls.values())
            return
        for p in pulls.values():
            p.tasks = len(workers)
            p.alive += len(workers)
        for addr in workers:
            self._spawn(self._exchange(addr, pulls))

    # ------------------------------------------------------------------------------------------------------
    # one worker

    def _request(self, table: dict, with_layout: bool):
        req_blocks = {rid: (p.transfer_id, p.blocks) for rid, p in table.items()}
        common = dict(remote_hostname=self.hostname, remote_port=self.te_port, remote_tp_size=self.tp_size,
                      remote_tp_rank=self.tp_rank, remote_pp_size=self.pp_size, req_blocks=req_blocks)
        if self.rev.layout_cache:
            common["layout_id"] = self.layout_id
        if not with_layout:
            return self.rev.request(kv_caches_base_addr=[], block_lens=[], kv_block_lens=[], **common)
        lay = self.layout
        return self.rev.request(
            kv_caches_base_addr=list(lay.get("kv_caches_base_addr") or []),
            block_lens=list(lay.get("block_lens") or []),
            kv_block_lens=list(lay.get("kv_block_lens") or []),
            registered_layer_names=list(lay.get("registered_layer_names") or []),
            registered_layer_indices=list(lay.get("registered_layer_indices") or []),
            registered_group_indices=list(lay.get("registered_group_indices") or []),
            registered_shared_group_ids=[list(s) for s in lay.get("registered_shared_group_ids") or []],
            registered_row_offsets=list(lay.get("registered_row_offsets") or []),
            **common)

    async def _exchange(self, addr: str, shared_table: dict):
        # 0.33.0 settles from a per-worker copy; 0.32.0 shares one table between workers.
        table = dict(shared_table) if self.rev.settle_per_worker else shared_table
        members = list(shared_table.values())
        ids = list(table)
        with_layout = not self.layout_id or addr not in self.acked
        try:
            while True:
                payload = self.encoder.encode(self._request(table, with_layout))
                record = {"worker": addr, "with_layout": with_layout, "bytes": len(payload), "replies": []}
                if len(self.exchanges) < MAX_EXCHANGE_LOG:
                    self.exchanges.append(record)
                resend = False
                try:
                    sock = self.ctx.socket(zmq.DEALER)
                    self.open_exchanges += 1
                    try:
                        sock.setsockopt(zmq.LINGER, 0)
                        sock.setsockopt(zmq.SNDHWM, 0)
                        sock.setsockopt(zmq.RCVHWM, 0)
                        sock.connect(addr)
                        await sock.send(payload)
                        self._log_wire(False, payload, addr)
                        while True:
                            try:
                                raw = await asyncio.wait_for(sock.recv(), self.abort_timeout + 60)
                            except asyncio.TimeoutError:
                                raise zmq.Again() from None
                            self._log_wire(True, raw, addr)
                            resp = self.resp_decoder.decode(raw)
                            record["replies"].append(msgspec.to_builtins(resp))
                            status = int(resp.status)
                            if status == LAYOUT_MISS:
                                self.acked.discard(addr)
                                if not with_layout:
                                    log.info("%s lost our layout; resending it", addr)
                                    with_layout = resend = True
                                    break
                            if status in (ERROR, LAYOUT_MISS):
                                self._fail(table, ids, resp.err_msg or "transfer error")
                                return
                            if self.layout_id and resp.layout_id == self.layout_id:
                                self.acked.add(addr)
                            self._apply(resp, table)
                            if status == FINISH:
                                if self.rev.settle_per_worker:
                                    self._fail(table, list(table),
                                               "peer finished without reporting a transfer result")
                                return
                    finally:
                        sock.close(linger=0)
                        self.open_exchanges -= 1
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - any failure fails the message, as in vLLM
                    record["error"] = str(e)
                    self._fail(table, ids, f"transfer failed: {e}")
                    return
                if not resend:
                    return
        finally:
            for p in members:
                p.alive -= 1
                if p.alive <= 0:
                    self.pending.discard(p)
