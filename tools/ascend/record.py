#!/usr/bin/env python3
"""Records vllm-ascend's own Mooncake pull connector (tools/ascend/worker.py, one process per worker) as pull-family
traces (conformance/traces/README.md, format_version 1, header `family = "pull"`).

Standard library only: the workers import torch, vLLM and vllm-ascend; this coordinator starts them, drives each
scenario as vLLM's scheduler would (via the workers' commands), collects the tapped ZeroMQ traffic of every worker,
merges it by CLOCK_MONOTONIC (shared by the processes of one machine) and writes one trace per scenario.

    record.py --release 0.18.0 --python PY --out DIR [--scenario NAME]... [--log-dir DIR]

The worker processes need PYTHONPATH with the vllm-ascend source tree, the vLLM overlay and the engine package
(scripts/ascend-record.sh sets it). Exit status: 0 every scenario recorded and its pulled blocks checked; 1 a
scenario failed (its trace is still written, with `error` set); 2 bad usage; 3 the workers cannot start.
"""

import argparse
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")
START_TIMEOUT_S = 240
SETTLE_S = 20
POLL_S = 0.05

# The code a failed engine read returns (`c_failed_read`): what tools/mooncake_v1's `fail_next_transfer` uses.
FAILED_READ_RET = -1

# The scenarios are the [pull_scenario.*] entries of conformance/scenarios.toml, which the conformance runner
# replays (one source for recording and replay): as (name, description, prefiller TP, decoder instances, the
# pulls: (decoder index, request id, prefiller blocks, decoder blocks), the requests whose engine read is made
# to fail).
SCENARIOS_FILE = os.path.join(HERE, "..", "..", "conformance", "scenarios.toml")


def load_scenarios(path=SCENARIOS_FILE):
    with open(path, "rb") as f:
        entries = tomllib.load(f).get("pull_scenario", {})
    out = []
    for name, e in entries.items():
        pulls = [(p["decoder"], p["request"], list(p["prefiller_blocks"]), list(p["decoder_blocks"]))
                 for p in e["pulls"]]
        failing = {p["request"] for p in e["pulls"] if p.get("fail_read")}
        out.append((name, e.get("description", ""), 1, e.get("decoders", 1), pulls, failing))
    return out


SCENARIOS = load_scenarios()


def worker_args(role, conn, engine_id, tp_rank, tp_size, prefill_tp, decode_tp, kv_port):
    """worker.py's options for one worker."""
    return ["--role", role, "--conn", conn, "--engine-id", engine_id, "--tp-rank", str(tp_rank), "--tp-size",
            str(tp_size), "--prefill-tp", str(prefill_tp), "--decode-tp", str(decode_tp), "--kv-port", str(kv_port)]


def pull_params(request, prefiller_blocks, host, port, engine_id, prefill_tp=1):
    """The kv_transfer_params vllm-ascend's prefiller scheduler (`request_finished`) returns for a request whose
    blocks a decoder is to pull, as its decoder's scheduler receives them (JSON)."""
    return {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": list(prefiller_blocks),
            "remote_engine_id": engine_id, "remote_request_id": request, "remote_host": host, "remote_port": port,
            "remote_pcp_size": 1, "remote_dcp_size": 1, "remote_ptp_size": prefill_tp,
            "remote_multi_nodes_meta_mapping": {}, "num_prompt_blocks": len(prefiller_blocks)}


class WorkerProc:
    """A worker.py process (`args` its options), its replies read on a thread. Its standard error goes to
    `stderr` (a file, or None: this process's); `log_path` names the file in error messages."""

    def __init__(self, python, conn, args, env, stderr=None, log_path=None, preexec_fn=None):
        self.conn = conn
        self.log_path = log_path
        self.p = subprocess.Popen([python, WORKER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=stderr, text=True, env=env, start_new_session=True, preexec_fn=preexec_fn)
        self.replies = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    @classmethod
    def recorder(cls, rec, role, conn, engine_id, tp_rank, tp_size, prefill_tp, decode_tp, kv_port):
        """A worker of a recorded scenario, logging into the recorder's log directory."""
        log = open(os.path.join(rec.log_dir, f"{conn}.log"), "w")
        args = worker_args(role, conn, engine_id, tp_rank, tp_size, prefill_tp, decode_tp, kv_port)
        return cls(rec.python, conn, args, rec.env, stderr=log, log_path=log.name)

    def where(self):
        return f" (log: {self.log_path})" if self.log_path else ""

    def _read(self):
        for line in self.p.stdout:
            try:
                self.replies.put(json.loads(line))
            except ValueError:
                pass
        self.replies.put(None)

    def get(self, timeout, what):
        try:
            r = self.replies.get(timeout=timeout)
        except queue.Empty:
            raise ReplyTimeout(f"{self.conn}: no reply to {what} in {timeout} s{self.where()}") from None
        if r is None:
            raise RecordError(f"{self.conn}: exited during {what}{self.where()}" +
                              (f":\n{tail(self.log_path)}" if self.log_path else ""))
        if not r.get("ok"):
            raise RecordError(f"{self.conn}: {what}: {r.get('error')}{self.where()}")
        return r

    def cmd(self, what, timeout=60, **kw):
        self.p.stdin.write(json.dumps({"cmd": what, **kw}) + "\n")
        self.p.stdin.flush()
        return self.get(timeout, what)

    def stop(self):
        try:
            if self.p.poll() is None:
                self.p.stdin.write('{"cmd": "quit"}\n')
                self.p.stdin.flush()
                self.p.wait(timeout=5)
        except Exception:  # noqa: BLE001
            pass
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, 9)
            except ProcessLookupError:
                pass
            self.p.wait()


class RecordError(Exception):
    pass


class ReplyTimeout(RecordError):
    """No reply in time (the worker may still answer later)."""


class StartError(RecordError):
    """A worker could not start (the environment): exit status 3."""


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def free_port(span):
    """A base port with `span` consecutive free ports after it."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + span >= 65536:
            continue
        ok = True
        for p in range(base, base + span):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RecordError("no free ports")


def run_scenario(rec, name, description, p_tp, n_dec, pulls, failing=frozenset()):
    workers, events, error, outcome = [], [], None, {}
    p_port = free_port(p_tp)
    started = time.time()
    try:
        prefillers = [WorkerProc.recorder(rec, "prefiller", f"prefiller{r}" if p_tp == 1 else f"prefiller_tp{r}",
                                          "engine-prefill-0", r, p_tp, p_tp, 1, p_port) for r in range(p_tp)]
        workers += prefillers
        decoders = []
        for d in range(n_dec):
            decoders.append(WorkerProc.recorder(rec, "decoder", f"decoder{d}", f"engine-decode-{d}", 0, 1, p_tp,
                                                1, free_port(1)))
        workers += decoders
        for w in workers:
            try:
                w.get(START_TIMEOUT_S, "start")
            except RecordError as e:
                raise StartError(str(e)) from None
        regs = {w.conn: w.cmd("register", timeout=120) for w in workers}
        for d, req, p_blocks, d_blocks in pulls:
            for pw in prefillers:
                pw.cmd("send", req_id=req, blocks=p_blocks)
        outcome = {"finished_sending": {}, "finished_recving": {}, "load_errors": {}, "kv_check": {}}
        for d, req, p_blocks, d_blocks in pulls:
            dw = decoders[d]
            if req in failing:
                dw.cmd("fail_next_read", count=1, ret=FAILED_READ_RET)
            params = pull_params(req, p_blocks, "127.0.0.1", p_port, "engine-prefill-0", p_tp)
            dw.cmd("pull", req_id=req, local_blocks=d_blocks, params=params)
            deadline = time.monotonic() + SETTLE_S
            got = False
            while time.monotonic() < deadline and not got:
                r = dw.cmd("poll")
                if r["load_errors"]:
                    outcome["load_errors"].setdefault(dw.conn, []).extend(r["load_errors"])
                if req in r["recving"]:
                    outcome["finished_recving"].setdefault(dw.conn, []).append(req)
                    got = True
                for pw in prefillers:
                    for s in pw.cmd("poll")["sending"]:
                        outcome["finished_sending"].setdefault(pw.conn, []).append(s)
                time.sleep(POLL_S)
            if not got:
                raise RecordError(f"{dw.conn}: {req} not reported received in {SETTLE_S} s")
            if req in failing:
                # The read returned the failure without reading: no bytes landed to check. What the decoder reported
                # (finished_recving, load_errors) is the outcome; one more poll catches errors reported a step late.
                r = dw.cmd("poll")
                if r["load_errors"]:
                    outcome["load_errors"].setdefault(dw.conn, []).extend(r["load_errors"])
            elif p_tp == 1:
                chk = dw.cmd("check", pairs=list(zip(d_blocks, p_blocks)), prefiller_rank=0)
                chk.pop("ok", None)
                outcome["kv_check"][f"{dw.conn}/{req}"] = chk
                if chk["mismatches"]:
                    raise RecordError(f"{dw.conn}: {req}: pulled blocks differ from the prefiller's: "
                                      f"{chk['mismatches'][:3]}")
        # The prefillers' completions: the last done message may arrive after the decoder reported.
        deadline = time.monotonic() + 5
        want = {req for _, req, _, _ in pulls}
        while time.monotonic() < deadline:
            seen = {s for v in outcome["finished_sending"].values() for s in v}
            if want <= seen:
                break
            for pw in prefillers:
                for s in pw.cmd("poll")["sending"]:
                    outcome["finished_sending"].setdefault(pw.conn, []).append(s)
            time.sleep(POLL_S)
        time.sleep(0.3)  # the last ACK's receive is recorded after the decoder thread returns from it
    except StartError as e:
        error = f"cannot start: {e}"
    except RecordError as e:
        error = str(e)
    finally:
        for w in workers:
            try:
                if w.p.poll() is None:
                    events += w.cmd("events", timeout=10)["events"]
            except RecordError:
                pass
        for w in workers:
            w.stop()
    return trace(rec, name, description, workers, events, outcome, error, started)


def trace(rec, name, description, workers, events, outcome, error, started):
    reads = [dict({"conn": e.get("conn"), "session": e["session"], "n": e["n"], "bytes": e["bytes"], "ret": e["ret"]},
                  **({"injected_failure": True} if e.get("injected_failure") else {}))
             for e in sorted((e for e in events if e.get("kind") == "te_read"), key=lambda e: e["t"])]
    events = sorted((e for e in events if e.get("kind") == "zmq"), key=lambda e: e["t"])
    t0 = events[0]["t"] if events else 0
    socket_ids = {}
    out = []
    endpoints = {}
    for i, e in enumerate(events, 1):
        key = (e["conn"], e["sock"])
        socket_ids.setdefault(key, len(socket_ids) + 1)
        ev = {"seq": i, "t": round((e["t"] - t0) / 1e9, 6), "kind": "zmq", "side": e["side"], "conn": e["conn"],
              "socket": e["socket"], "socket_id": socket_ids[key], "endpoint": e["endpoint"], "bound": e["bound"],
              "dir": e["dir"], "frames": e["frames"]}
        for k in ("decoded", "payload_text"):
            if k in e:
                ev[k] = e[k]
        if e["bound"]:
            ev["note"] = "frame 0 is the ZMQ routing id, not payload"
        out.append(ev)
        lst = endpoints.setdefault(e["conn"], [])
        if e["endpoint"] not in lst:
            lst.append(e["endpoint"])
    roles = {w.conn: ("prefiller" if w.conn.startswith("prefiller") else "decoder") for w in workers}
    roles = dict(sorted(roles.items(), key=lambda kv: (kv[1] != "decoder", kv[0])))
    header = {"format": "mooncake-trace", "format_version": 1, "family": "pull", "vllm_version": rec.release,
              "connector": "MooncakeConnectorV1", "connector_generation": 1, "scenario": name,
              "description": description, "recorded_by": "tools/ascend (mooncake-wire)",
              "recorded_from": rec.recorded_from, "roles": roles,
              "conn_endpoints": {c: endpoints.get(c, []) for c in roles}, "recorded_at_unix": int(started),
              "observed_outcome": outcome, "transfer_engine_calls": [], "transfer_engine_reads": reads,
              "error": error}
    return [header] + out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--release", required=True, help="the vllm-ascend release (0.18.0, 0.23.0.post1)")
    p.add_argument("--python", required=True, help="the environment's python (torch, vLLM, the engine)")
    p.add_argument("--out", required=True, help="writes OUT/vllm-ascend-<release>/<scenario>.jsonl")
    p.add_argument("--scenario", action="append", default=[])
    p.add_argument("--log-dir", default=None)
    p.add_argument("--recorded-from", default="", help="what ran, for the trace header")
    a = p.parse_args(argv)
    known = [s[0] for s in SCENARIOS]
    for s in a.scenario:
        if s not in known:
            print(f"record.py: unknown scenario {s} (known: {', '.join(known)})", file=sys.stderr)
            return 2
    rec = argparse.Namespace(release=a.release, python=a.python, env=dict(os.environ),
                             recorded_from=a.recorded_from or f"vllm-ascend {a.release}'s own connector code",
                             log_dir=a.log_dir or f"/tmp/ascend-record-logs-{os.getpid()}/{a.release}")
    out_dir = os.path.join(a.out, f"vllm-ascend-{a.release}")
    status = 0
    for name, desc, p_tp, n_dec, pulls, failing in SCENARIOS:
        if a.scenario and name not in a.scenario:
            continue
        rec.log_dir = os.path.join(a.log_dir or f"/tmp/ascend-record-logs-{os.getpid()}", a.release, name)
        os.makedirs(rec.log_dir, exist_ok=True)
        t = time.monotonic()
        lines = run_scenario(rec, name, desc, p_tp, n_dec, pulls, failing)
        err = lines[0]["error"]
        if err and err.startswith("cannot start:"):
            print(f"{name}: not recorded: {err}", file=sys.stderr, flush=True)
            return 3
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, f"{name}.jsonl")
        with open(path, "w") as f:
            for line in lines:
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        print(f"{name}: {len(lines) - 1} events, {time.monotonic() - t:.1f} s"
              + (f", ERROR: {err}" if err else "") + f" -> {path}", flush=True)
        if err:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
