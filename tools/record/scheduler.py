"""The decoder scheduler's KV-lease bookkeeping, which the recorder plays because it drives the worker without vLLM's
scheduler (requests enter through the worker's `start_load_kv`, as for pulls).

What it follows (vLLM 0.34.0 wheel, vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py,
MooncakeConnectorScheduler):

* `on_new_request`: with a `kv_lease_duration` of its own, the decoder leases every request that arrives with
  `do_remote_prefill` and a remote engine id, bootstrap address and transfer id — from its arrival, which may be long
  before it is scheduled for its pull;
* `update_state_after_alloc`: a pull with no local blocks (one that only frees the prefiller's blocks) is no longer
  leased;
* `update_connector_output`: a request reported in `finished_recving` (failed pulls are reported there too) is no
  longer leased;
* `request_finished`: the request is no longer leased (not played: a recorded request finishes only after its pull
  settled, when its lease has already ended);
* `build_connector_meta`, once per engine step: when something is leased and at least `kv_lease_duration / 6` s
  (time.perf_counter) have passed since the last renewal, the metadata handed to the worker's `start_load_kv`
  carries one `LeaseHeartbeat` per prefill engine with the transfer ids of every leased request, in lease order.

The check `supported()` looks for this bookkeeping in the release's own scheduler class, so a release that changes
it is refused (by name) instead of being recorded with the wrong cadence.
"""

import inspect
import time


# Where each step lives in the release's scheduler, and a text its source must hold for this emulation to apply.
_EXPECTED = {
    "on_new_request": "_lease_reqs[",
    "update_state_after_alloc": "_lease_reqs.pop",
    "update_connector_output": "_lease_reqs.pop",
    "request_finished": "_lease_reqs.pop",
    "build_connector_meta": "_kv_lease_duration / 6",
}


def supported(mod):
    """None when the release's scheduler keeps leases the way this module plays them; else why not."""
    sched = getattr(mod, "MooncakeConnectorScheduler", None)
    if sched is None or not hasattr(mod, "LeaseHeartbeat") or not hasattr(mod, "_get_kv_lease_duration"):
        return "the release has no KV leases (no LeaseHeartbeat / _get_kv_lease_duration)"
    for name, text in _EXPECTED.items():
        fn = getattr(sched, name, None)
        try:
            src = inspect.getsource(fn) if fn is not None else ""
        except (OSError, TypeError):
            src = ""
        if text not in src:
            return (f"MooncakeConnectorScheduler.{name} does not hold {text!r}: its lease bookkeeping differs from "
                    "vLLM 0.34.0's, which tools/record/scheduler.py plays; update that module")
    return None


class DecoderLeases:
    """One decoder engine's leased requests (the scheduler's `_lease_reqs`) and its last renewal."""

    def __init__(self, mod, kv_transfer_config):
        self.mod = mod
        # The release's own reading of kv_connector_extra_config.kv_lease_duration (None: leases off).
        self.duration = mod._get_kv_lease_duration(kv_transfer_config)
        self.reqs = {}  # d_req_id -> (remote engine id, bootstrap address, transfer id), in lease order
        self.last = 0.0
        self.sent = 0  # heartbeat steps handed to the worker

    def arrive(self, d_req_id, params):
        """on_new_request."""
        if (self.duration is not None and params.get("do_remote_prefill")
                and all(params.get(p) for p in ("remote_engine_id", "remote_bootstrap_addr", "transfer_id"))):
            self.reqs[d_req_id] = (params["remote_engine_id"], params["remote_bootstrap_addr"], params["transfer_id"])

    def allocated(self, d_req_id, local_block_ids):
        """update_state_after_alloc: `local_block_ids` one list per KV-cache group."""
        if not any(local_block_ids):
            self.reqs.pop(d_req_id, None)

    def add_heartbeats(self, meta):
        """build_connector_meta's renewal; True when `meta` now carries heartbeats."""
        now = time.perf_counter()
        if self.reqs and self.duration is not None and now - self.last >= self.duration / 6:
            self.last = now
            for engine_id, bootstrap_addr, transfer_id in self.reqs.values():
                hb = meta.lease_heartbeats.get(engine_id)
                if hb is None:
                    hb = meta.lease_heartbeats[engine_id] = self.mod.LeaseHeartbeat(
                        remote_bootstrap_addr=bootstrap_addr, transfer_ids=[])
                hb.transfer_ids.append(transfer_id)
            self.sent += 1
            return True
        return False

    def output(self, finished_recving):
        """update_connector_output."""
        for req_id in finished_recving or ():
            self.reqs.pop(req_id, None)
