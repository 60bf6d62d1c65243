#!/usr/bin/env python3
"""Coordinator of a recording: starts vLLM's bootstrap server and every connector worker of a scenario as separate
processes on 127.0.0.1 (peer.py), drives them as the scenario in conformance/scenarios.toml says, merges the events
all of them tapped into one `seq` order, and writes one trace per scenario in the format of
conformance/traces/README.md.

Needs only the standard library (Python 3.11+); the peers run under the interpreter given with --python, with the
release's vLLM first on PYTHONPATH (--vllm-path).
"""

import argparse
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import shutil
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RECORDED_BY = "tools/record (mooncake-wire)"
ENGINE_P = "engine-prefill-0"
ENGINE_D = "engine-decode-0"
FIRST_RPC_PORT = 17001
# --impl: which connector the zygote imports (peer.py, IMPL), and the environment variable that gives a
# generation-1 prefiller its side-channel base port (rank r listens at base + r).
SIDE_CHANNEL_ENV = {"vllm": "VLLM_MOONCAKE_BOOTSTRAP_PORT", "mooncake": "VLLM_MOONCAKE_SIDE_CHANNEL_PORT"}
POLL_S = 0.02
VERBOSE = bool(os.environ.get("MOONCAKE_RECORD_VERBOSE"))
_T0 = time.monotonic()


def trace_step(msg):
    if VERBOSE:
        print(f"    [{time.monotonic() - _T0:7.2f}] {msg}", flush=True)


class RecordError(Exception):
    pass


def version_tuple(v):
    out = []
    for part in v.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def free_port(consecutive=1):
    """A port (and the `consecutive - 1` after it) that nothing on 127.0.0.1 listens on right now."""
    for _ in range(200):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
        s.close()
        if base + consecutive > 65535:
            continue
        ok = True
        for p in range(base, base + consecutive):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                t.close()
        if ok:
            return base
    raise RecordError("no free port on 127.0.0.1")


# ----------------------------------------------------------------------------------------------------------------
# Peer processes


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def kill_group(pid):
    """SIGTERM, then SIGKILL, to a peer's session (its process group); bounded."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            if not alive(pid):
                return
            time.sleep(0.05)


class Channel:
    """Line-delimited JSON answers read on a thread of their own; every wait is bounded and notices a dead pid."""

    def __init__(self, stream, name):
        self.name = name
        self.pid = None
        self.q = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        try:
            for line in stream:
                try:
                    self.q.put(json.loads(line))
                except ValueError:
                    self.q.put({"garbage": line})
        except (OSError, ValueError):
            pass
        self.q.put(None)

    def get(self, timeout, what, on_dead=""):
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self.q.get(timeout=0.5)
            except queue.Empty:
                if self.pid is not None and not alive(self.pid):
                    raise RecordError(f"{self.name}: process exited during {what}{on_dead}")
                if time.monotonic() > deadline:
                    raise RecordError(f"{self.name}: no answer to {what} within {timeout:.0f} s{on_dead}")
                continue
            if msg is None:
                raise RecordError(f"{self.name}: channel closed during {what}{on_dead}")
            return msg


class Zygote:
    """`peer.py zygote`: imports vLLM once per release, forks the peers."""

    def __init__(self, python, env, log_dir):
        self.log_path = os.path.join(log_dir, "zygote.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([python, "-u", os.path.join(HERE, "peer.py"), "zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, env=env, cwd=HERE,
                                     start_new_session=True)
        self.chan = Channel(self.proc.stdout, "zygote")
        self.chan.pid = self.proc.pid
        self.lock = threading.Lock()

    def wait_ready(self, timeout=600):
        try:
            msg = self.chan.get(timeout, "start-up (importing vLLM)", f" (log: {self.log_path}){tail(self.log_path)}")
        except RecordError:
            raise
        if not msg.get("ready"):
            raise RecordError(f"zygote: unexpected start-up line {msg}")
        return msg

    def spawn(self, role, conn, cmd_fifo, reply_fifo, log, env):
        with self.lock:
            self.proc.stdin.write(json.dumps({"cmd": "spawn", "role": role, "conn": conn, "cmd_fifo": cmd_fifo,
                                              "reply_fifo": reply_fifo, "log": log, "env": env}) + "\n")
            self.proc.stdin.flush()
            msg = self.chan.get(30, f"spawn {conn}")
        if "pid" not in msg:
            raise RecordError(f"zygote: cannot spawn {conn}: {msg}")
        return msg["pid"]

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=5)
            except Exception:
                pass
        if self.proc.poll() is None:
            kill_group(self.proc.pid)
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
        self.log.close()


def tail(path, n=12):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()[-n:]
        return "\n    " + "\n    ".join(lines) if lines else ""
    except OSError:
        return ""


class Peer:
    """One recorder process, forked by the zygote, talked to over two FIFOs. stop() ends it and its session."""

    def __init__(self, run, role, conn):
        self.run, self.role, self.conn = run, role, conn
        self.log_path = os.path.join(run.log_dir, f"{conn}.log")
        cmd_fifo = os.path.join(run.fifo_dir, f"{conn}.cmd")
        reply_fifo = os.path.join(run.fifo_dir, f"{conn}.reply")
        os.mkfifo(cmd_fifo)
        os.mkfifo(reply_fifo)
        # O_RDWR never blocks on a FIFO; the peer opens the other ends.
        self.w = os.fdopen(os.open(cmd_fifo, os.O_RDWR), "w", buffering=1)
        r = os.fdopen(os.open(reply_fifo, os.O_RDWR), "r")
        self.chan = Channel(r, conn)
        self.pid = None
        run.peers.append(self)
        self.pid = self.chan.pid = run.rec.zygote.spawn(role, conn, cmd_fifo, reply_fifo, self.log_path, run.env)
        self.next_id = 0

    def _get(self, timeout, what):
        return self.chan.get(timeout, what, f" (log: {self.log_path}){tail(self.log_path)}")

    def wait_ready(self, timeout=60):
        msg = self._get(timeout, "start-up")
        if not msg.get("ready"):
            raise RecordError(f"{self.conn}: unexpected start-up line {msg}")

    def send(self, cmd, **kw):
        self.next_id += 1
        try:
            self.w.write(json.dumps({"id": self.next_id, "cmd": cmd, **kw}) + "\n")
            self.w.flush()
        except OSError as e:
            raise RecordError(f"{self.conn}: cannot send {cmd}: {e}")
        return self.next_id

    def result(self, mid, cmd, timeout):
        msg = self._get(timeout, cmd)
        if msg.get("id") != mid:
            raise RecordError(f"{self.conn}: answer out of order for {cmd}: {msg}")
        if not msg.get("ok"):
            raise PeerError(self.conn, cmd, msg.get("error"))
        return msg.get("result")

    def cmd(self, cmd, timeout=30, **kw):
        return self.result(self.send(cmd, **kw), cmd, timeout)

    def ask_quit(self):
        """vLLM's own shutdown, bounded (it can block on a context term with open sockets)."""
        if self.pid is not None and alive(self.pid):
            try:
                self.send("quit", timeout=1)
            except RecordError:
                pass

    def stop(self, grace=3.0):
        if self.pid is not None:
            deadline = time.monotonic() + grace
            while alive(self.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            # Whatever is left of the peer or its session goes too.
            kill_group(self.pid)
        self.w.close()


class PeerError(RecordError):
    def __init__(self, conn, cmd, error):
        super().__init__(f"{conn}: {cmd} failed: {error}")
        self.conn, self.cmd, self.error = conn, cmd, error


# ----------------------------------------------------------------------------------------------------------------
# One scenario


def names(role, tp):
    return [f"{role}0"] if tp == 1 else [f"{role}_tp{r}" for r in range(tp)]


class ScenarioRun:
    def __init__(self, rec, name, sc):
        self.rec, self.name, self.sc = rec, name, sc
        self.python = rec.python
        self.log_dir = os.path.join(rec.log_dir, name)
        os.makedirs(self.log_dir, exist_ok=True)
        self.fifo_dir = tempfile.mkdtemp(prefix="fifo-", dir=self.log_dir)
        self.peers = []
        self.model = dict(rec.model)
        self.abort_timeout = float(self.model["abort_timeout_s"])
        self.settle_timeout = self.abort_timeout + rec.settle_extra
        # CLOCK_MONOTONIC of the scenario's start (set by run_pulls / the query); until then, of its set-up.
        self.setup_ns = time.monotonic_ns()
        self.start_ns = None

    def run(self):
        started = int(time.time())
        outcome, error = None, None
        events = []
        try:
            try:
                outcome = self.drive()
            except RecordError as e:
                error = str(e)
            for p in self.peers:
                if p.pid is not None and alive(p.pid):
                    try:
                        events += p.cmd("events", timeout=10)
                    except RecordError as e:
                        error = error or str(e)
            if error is None and outcome is not None:
                error = self.timing_problem(outcome, events)
        finally:
            # Every process this scenario started ends here, also on an error or Ctrl-C.
            for p in self.peers:
                p.ask_quit()
            for p in reversed(self.peers):
                p.stop()
            shutil.rmtree(self.fifo_dir, ignore_errors=True)
        return self.trace(started, outcome, error, events)

    # -- set-up ---------------------------------------------------------------------------------------------

    def drive(self):
        sc, gen = self.sc, self.rec.generation
        ptp, dtp = sc.get("prefiller_tp", 1), sc.get("decoder_tp", 1)
        self.prefillers = names("prefiller", ptp)
        self.decoders = names("decoder", dtp)
        dup = sc.get("duplicate_register_tp_rank")
        self.dup = f"prefiller_tp{dup}_dup" if dup is not None else None

        env = {}
        if gen == 2:
            self.bootstrap_port = free_port()
            env["VLLM_MOONCAKE_BOOTSTRAP_PORT"] = str(self.bootstrap_port)
            self.bootstrap_addr = f"http://127.0.0.1:{self.bootstrap_port}"
        else:
            # Generation 1: prefiller rank r listens at base + r (base: SIDE_CHANNEL_ENV of the implementation).
            self.side_port = free_port(ptp)
            env[SIDE_CHANNEL_ENV[self.rec.impl]] = str(self.side_port)
            self.bootstrap_port, self.bootstrap_addr = None, None
        self.env = env

        # Every process is started at once (imports take the time); workers are created and registered in order.
        self.bootstrap = Peer(self, "bootstrap", "bootstrap") if gen == 2 else None
        p_list = [(n, r) for r, n in enumerate(self.prefillers)]
        if self.dup is not None:
            p_list.append((self.dup, dup))
        self.p = {n: Peer(self, "prefiller", n) for n, _ in p_list}
        self.d = {n: Peer(self, "decoder", n) for n in self.decoders}
        trace_step("peers started")
        for peer in self.peers:
            peer.wait_ready()
        trace_step("peers ready")
        init_ids = []
        if self.bootstrap:
            init_ids.append((self.bootstrap, self.bootstrap.send("init", args={"port": self.bootstrap_port})))

        rpc = FIRST_RPC_PORT
        for n, r in p_list:
            init_ids.append((self.p[n], self.p[n].send("init", args=self.worker_args("kv_producer", ENGINE_P, r, ptp, rpc))))
            rpc += 1
        for r, n in enumerate(self.decoders):
            head = sc.get("decoder_head_size")
            init_ids.append((self.d[n], self.d[n].send("init", args=self.worker_args("kv_consumer", ENGINE_D, r, dtp, rpc, head))))
            rpc += 1
        for peer, mid in init_ids:
            peer.result(mid, "init", 180)
        trace_step("workers created")

        self.dup_error = None
        for n, _ in p_list:
            limit = self.rec.dup_register_timeout if n == self.dup else self.rec.register_timeout
            try:
                self.p[n].cmd("register", timeout=limit + 10, limit=limit)
            except RecordError as e:
                if n != self.dup:
                    raise
                self.dup_error = e.error if isinstance(e, PeerError) else str(e)
        for n in self.decoders:
            self.d[n].cmd("register", timeout=self.rec.register_timeout + 10, limit=self.rec.register_timeout)
        trace_step("KV caches registered")

        if sc.get("query_only"):
            self.start_ns = time.monotonic_ns()
            agents = self.d[self.decoders[0]].cmd("query", timeout=30, bootstrap_addr=self.bootstrap_addr)
            return {"duplicate_register_error": self.dup_error, "decoder_remote_agents": agents}
        return self.run_pulls()

    def worker_args(self, role, engine, rank, tp, rpc, head=None):
        a = {"kv_role": role, "engine_id": engine, "tp_rank": rank, "tp_size": tp, "rpc_port": rpc,
             "model": self.model, "bootstrap_port": self.bootstrap_port}
        # kv_connector_extra_config.kv_lease_duration of that side (absent: leases off on that side).
        lease = self.sc.get("prefiller_kv_lease_s" if role == "kv_producer" else "decoder_kv_lease_s")
        if lease is not None:
            a["kv_lease_s"] = lease
        if head:
            a["head_size"] = head
        if self.sc.get("kv_groups"):
            a["kv_groups"] = self.sc["kv_groups"]
        return a

    # -- the scenario ---------------------------------------------------------------------------------------

    def p_req_id(self, t):
        """Generation 1 has no transfer id: the prefiller knows the request by the decoder's request id."""
        if self.rec.generation == 2:
            return t["p_req_id"]
        for batch in self.sc.get("pulls", []):
            for r in batch:
                if r["transfer_id"] == t["transfer_id"]:
                    return r["d_req_id"]
        return t["p_req_id"]

    def make_ready(self, transfers):
        reqs = [[self.p_req_id(t), t["transfer_id"], t["blocks"]] for t in transfers]
        if reqs:
            for n in self.prefillers:
                self.p[n].cmd("send_reqs", reqs=reqs)

    def run_pulls(self):
        sc = self.sc
        transfers = sc.get("transfers", [])
        if sc.get("fail_transfers"):
            for n in self.prefillers:
                self.p[n].cmd("fail_writes", count=sc["fail_transfers"], ret=-1)
        # The prefiller's scheduler: every request is allocated first (no blocks), then the ready ones finish.
        for n in self.prefillers:
            alloc = [[self.p_req_id(t), t["transfer_id"], []] for t in transfers if t.get("ready", "before") != "never"]
            if alloc:
                self.p[n].cmd("send_reqs", reqs=alloc)
        self.make_ready([t for t in transfers if t.get("ready", "before") == "before"])
        # The scenario's start: the trace's `t` counts from here, and so do announce and pull_delay_s.
        self.start_ns = time.monotonic_ns()
        trace_step("start (transfers ready)")
        self.pending_ready = {}
        for t in transfers:
            rd = t.get("ready", "before")
            if rd.startswith("after_reply:"):
                self.pending_ready.setdefault(int(rd.split(":", 1)[1]), []).append(t)
        self.forget_after = sc.get("forget_layouts_after_reply")
        # What each worker's get_finished / get_transfer_results reported, polled on every engine step.
        self.reported = {n: {"recving": set(), "failed": set()} for n in self.decoders}
        self.sending = {n: {} for n in self.prefillers}  # p_req_id -> seconds since the start when first reported

        pulls = sc.get("pulls", [])
        if sc.get("announce"):
            # The decoder's scheduler learns of every request it will pull (vLLM's on_new_request).
            reqs = [[r["d_req_id"], r["transfer_id"], r["blocks"]] for batch in pulls for r in batch]
            for dn in self.decoders:
                self.d[dn].cmd("announce", reqs=reqs, **self.pull_target())
        delay = float(sc.get("pull_delay_s", 0) or 0)
        if delay > 0:
            # The engines keep stepping until the first pull: heartbeats go out, prefillers expire requests.
            until = self.start_ns + int(delay * 1e9)
            while time.monotonic_ns() < until:
                self.step()
                time.sleep(min(POLL_S, max(0.0, (until - time.monotonic_ns()) / 1e9)))
            trace_step(f"pull delay {delay:g} s over")

        per_pull = []
        for i, batch in enumerate(pulls):
            per_dec = {}
            for dn in self.decoders:
                per_dec[dn] = self.pull_and_settle(dn, batch)
            per_pull.append(per_dec)

        trace_step("pulls settled")
        self.step(decoders=False)
        sending = {n: sorted(v) for n, v in self.sending.items()}
        sending_t = {n: dict(sorted(v.items())) for n, v in self.sending.items()}

        def shape(per_dec):
            if len(per_dec) == 1:
                return next(iter(per_dec.values()))
            return dict(per_dec)

        if len(per_pull) == 1:
            out = shape(per_pull[0])
            out = dict(out)
        else:
            out = {f"pull{i + 1}": shape(pd) for i, pd in enumerate(per_pull)}
        out["finished_sending"] = sending
        if any(sending_t.values()):
            out["finished_sending_t"] = sending_t
        return out

    def pull_target(self):
        return {"bootstrap_addr": self.bootstrap_addr, "remote_engine_id": ENGINE_P,
                "side_channel_port": getattr(self, "side_port", None)}

    def since_start(self):
        return round((time.monotonic_ns() - self.start_ns) / 1e9, 3)

    def step(self, decoders=True):
        """One engine step of every worker, as far as the connector sees it (vLLM's engine calls get_finished every
        step; a prefiller expires requests there): each decoder's scheduler hands its worker the lease renewals
        that are due, then every worker's get_finished (get_transfer_results) is read and kept."""
        if decoders:
            for dn in self.decoders:
                got = self.d[dn].cmd("poll")
                self.reported[dn]["recving"].update(got["recving"])
                self.reported[dn]["failed"].update(got["failed"])
                if got.get("heartbeats"):
                    trace_step(f"{dn}: lease heartbeats handed to the worker")
        for n in self.prefillers:
            for r in self.p[n].cmd("poll")["sending"]:
                if r not in self.sending[n]:
                    self.sending[n][r] = self.since_start()
                    trace_step(f"{n}: finished_sending {r}")

    def total_replies(self):
        return sum(self.d[n].cmd("replies") for n in self.decoders)

    def triggers(self):
        if not self.pending_ready and self.forget_after is None:
            return
        seen = self.total_replies()
        for n in sorted(k for k in self.pending_ready if k <= seen):
            self.make_ready(self.pending_ready.pop(n))
        if self.forget_after is not None and seen >= self.forget_after:
            for n in self.prefillers:
                self.p[n].cmd("forget_layouts")
            self.forget_after = None

    def pull_and_settle(self, dn, batch):
        d = self.d[dn]
        reqs = [[r["d_req_id"], r["transfer_id"], r["blocks"]] for r in batch]
        d.cmd("pull", reqs=reqs, **self.pull_target())
        want = {r["d_req_id"] for r in batch}
        rep = self.reported[dn]
        rep["recving"].clear()
        rep["failed"].clear()
        deadline = time.monotonic() + self.settle_timeout
        while True:
            self.triggers()
            self.step()
            if want <= (rep["recving"] | rep["failed"]) or time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
        self.triggers()
        recving, failed = set(rep["recving"]), set(rep["failed"])
        invalid = d.cmd("load_errors")
        load_errors = {}
        if invalid or failed:
            load_errors[dn] = {"invalid_block_ids": invalid, "failed_reqs": sorted(failed)}
        return {
            "finished_recving": {dn: sorted(recving)},
            "not_finished": [f"{dn}:{r}" for r in sorted(want - recving - failed)],
            "load_errors": load_errors,
        }

    def timing_problem(self, outcome, events):
        """The text for the trace's `error` when the recording did not keep the scenario's timing (a machine too
        loaded for it), else None: a prefiller freed a request of the first pull batch before that pull reached it,
        although the scenario means the pull to come first (it comes well within the prefiller's hold — its lease or
        abort timeout — or the decoder renews a lease); or, where the scenario means the expiry to come first, the
        pull came more than an abort timeout after it (vLLM 0.34.0 remembers an expired transfer that long)."""
        sc = self.sc
        sending_t = outcome.get("finished_sending_t") or {}
        pulls = sc.get("pulls") or []
        if not sending_t or not pulls or self.start_ns is None:
            return None
        first = {t["transfer_id"] for t in pulls[0]}
        ready = [t for t in sc.get("transfers", []) if t["transfer_id"] in first and t.get("ready", "before") == "before"]
        hold = sc.get("prefiller_kv_lease_s") or self.abort_timeout
        delay = float(sc.get("pull_delay_s", 0) or 0)
        renewed = bool(sc.get("prefiller_kv_lease_s") and sc.get("decoder_kv_lease_s") and sc.get("announce"))
        pull_first = renewed or delay + 0.5 < hold
        for conn, freed in sending_t.items():
            arrivals = [(e["t"] - self.start_ns) / 1e9 for e in events
                        if e["kind"] == "zmq" and e["conn"] == conn and e["bound"] and e["dir"] == "recv"
                        and e["t"] >= self.start_ns
                        and not (isinstance(e.get("decoded"), dict) and set(e["decoded"]) == {"lease_transfer_ids"})]
            if not arrivals:
                continue
            t_pull = min(arrivals)
            for t in ready:
                t_free = freed.get(self.p_req_id(t))
                if t_free is None:
                    continue
                if pull_first and t_free < t_pull:
                    return (f"timing not kept: {conn} freed {self.p_req_id(t)} at t={t_free:.3f} s, before the first "
                            f"pull reached it at t={t_pull:.3f} s (pull_delay_s {delay:g}, hold {hold:g} s); the "
                            "machine was too loaded for this scenario: record it again")
                if not pull_first and t_free < t_pull and t_pull - t_free > self.abort_timeout:
                    return (f"timing not kept: the first pull reached {conn} at t={t_pull:.3f} s, more than the abort "
                            f"timeout ({self.abort_timeout:g} s) after it freed {self.p_req_id(t)} at t={t_free:.3f} s; "
                            "the machine was too loaded for this scenario: record it again")
        return None

    # -- the trace ------------------------------------------------------------------------------------------

    def trace(self, started, outcome, error, events):
        events.sort(key=lambda e: e["t"])
        te = [{"session": e["session"], "n": e["n"], "bytes": e["bytes"]} for e in events if e["kind"] == "te"]
        wire = [e for e in events if e["kind"] in ("zmq", "http")]
        # `t`: seconds since the scenario's start (negative for the set-up before it: registrations);
        # `socket_id`: one number per tapped socket, in the order of the sockets' first events.
        start = self.start_ns if self.start_ns is not None else self.setup_ns
        socket_ids = {}
        endpoints = {}
        lines = []
        for seq, e in enumerate(wire, 1):
            line = {"seq": seq, "t": round((e["t"] - start) / 1e9, 6)}
            for k, v in e.items():
                if k == "sock":
                    line["socket_id"] = socket_ids.setdefault((e["conn"], v), len(socket_ids) + 1)
                elif k != "t":
                    line[k] = v
            if e["kind"] == "zmq":
                eps = endpoints.setdefault(e["conn"], [])
                if e["endpoint"] not in eps:
                    eps.append(e["endpoint"])
            lines.append(line)
        roles = {}
        if self.rec.generation == 2:
            roles["bootstrap"] = "bootstrap"
        for p in getattr(self, "p", {}):
            roles[p] = "prefiller"
        for d in getattr(self, "d", {}):
            roles[d] = "decoder"
        header = with_implementation({
            "format": "mooncake-trace",
            "format_version": 1,
            "vllm_version": self.rec.release,
            "connector": "MooncakeConnector",
            "connector_generation": self.rec.generation,
            "scenario": self.name,
            "description": self.sc.get("description", ""),
            "recorded_by": RECORDED_BY,
            "roles": roles,
            "conn_endpoints": endpoints,
            "recorded_at_unix": started,
            "observed_outcome": outcome if outcome is not None else {},
            "transfer_engine_calls": te,
            "error": error,
        }, self.rec.implementation)
        return header, lines


def implementation_fields(info, release):
    """The header fields that name a connector other than vLLM's own, from the zygote's ready line (peer.py);
    None for vLLM's own connector, whose traces name it by `vllm_version` alone."""
    if info.get("implementation") in (None, "vllm"):
        return None
    return {
        "implementation": info["implementation"],
        "implementation_version": info["implementation_version"],
        "recorded_from": f"{info['implementation_dist']} {info['implementation_version']}, "
                         f"{info['implementation_source']}, on vLLM {release}; faked: the transfer engine (no bytes "
                         "move), the GPU and torch.distributed lookups (tools/record/README.md)",
    }


def with_implementation(header, fields):
    """`header` with the implementation fields: `implementation` and `implementation_version` after
    `vllm_version` (the host vLLM the connector ran on), `recorded_from` after `recorded_by`; unchanged when
    `fields` is None."""
    if fields is None:
        return header
    out = {}
    for k, v in header.items():
        out[k] = v
        if k == "vllm_version":
            out["implementation"] = fields["implementation"]
            out["implementation_version"] = fields["implementation_version"]
        elif k == "recorded_by":
            out["recorded_from"] = fields["recorded_from"]
    return out


# ----------------------------------------------------------------------------------------------------------------


class Recorder:
    def __init__(self, a):
        self.release = a.release
        self.impl = a.impl
        self.implementation = None  # header fields of a connector other than vLLM's own (implementation_fields)
        self.python = a.python
        self.out = a.out or (os.path.join("recordings", f"vllm-{a.release}") if a.impl == "vllm" else None)
        self.settle_extra = a.settle_extra
        self.register_timeout = a.register_timeout
        self.dup_register_timeout = a.dup_register_timeout
        with open(a.scenarios, "rb") as f:
            doc = tomllib.load(f)
        self.model = doc["model"]
        self.model.setdefault("num_layers", 2)
        self.scenarios = doc.get("scenario", {})
        run_name = f"vllm-{a.release}" if a.impl == "vllm" else f"{a.impl}-on-vllm-{a.release}"
        self.log_dir = a.log_dir or os.path.join("/tmp", f"mooncake-record-logs-{os.getpid()}", run_name)
        os.makedirs(self.log_dir, exist_ok=True)
        pp = [os.path.join(HERE)]
        if a.vllm_path:
            pp.insert(0, a.vllm_path)
        if os.environ.get("PYTHONPATH"):
            pp.append(os.environ["PYTHONPATH"])
        self.base_env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(pp),
            MOONCAKE_RECORD_IMPL=a.impl,
            VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=str(int(self.model["abort_timeout_s"])),
            VLLM_HOST_IP="127.0.0.1",
            VLLM_LOGGING_LEVEL=os.environ.get("VLLM_LOGGING_LEVEL", "DEBUG"),
            VLLM_TARGET_DEVICE="cpu",
            CUDA_VISIBLE_DEVICES="",
            TOKENIZERS_PARALLELISM="false",
            PYTHONUNBUFFERED="1",
            OMP_NUM_THREADS="1",
        )
        self.zygote = None

    def start(self):
        """The zygote imports the release's vLLM once; it tells which release and generation it found."""
        t0 = time.monotonic()
        self.zygote = Zygote(self.python, self.base_env, self.log_dir)
        info = self.zygote.wait_ready()
        version, gen = info["vllm_version"], info["generation"]
        if version != self.release:
            raise RecordError(f"{self.python} (PYTHONPATH {self.base_env['PYTHONPATH']}) imports vLLM {version}, "
                              f"not {self.release}")
        self.generation = gen
        if self.impl != "vllm":
            if info.get("implementation") != self.impl:
                raise RecordError(f"the zygote imported {info.get('implementation', 'vllm')}'s connector, "
                                  f"not {self.impl}'s")
            self.implementation = implementation_fields(info, version)
            self.out = self.out or os.path.join("recordings", f"{self.impl}-{info['implementation_version']}")
        trace_step(f"zygote ready in {time.monotonic() - t0:.1f} s")

    def stop(self):
        if self.zygote is not None:
            self.zygote.stop()

    def applies(self, sc):
        gens = sc.get("generations") or [1, 2]
        if self.generation not in gens:
            return False, f"generation {self.generation} (scenario: {gens})"
        since = sc.get("since")
        if since and version_tuple(self.release) < version_tuple(since):
            return False, f"needs {since}+"
        return True, ""

    def run(self, wanted):
        os.makedirs(self.out, exist_ok=True)
        names_ = wanted or list(self.scenarios)
        unknown = [n for n in names_ if n not in self.scenarios]
        if unknown:
            raise RecordError(f"unknown scenario(s): {', '.join(unknown)}")
        failures = 0
        t_all = time.monotonic()
        for name in names_:
            sc = self.scenarios[name]
            ok, why = self.applies(sc)
            if not ok:
                print(f"  skip   {name}: {why}", flush=True)
                continue
            t0 = time.monotonic()
            header, lines = ScenarioRun(self, name, sc).run()
            path = os.path.join(self.out, f"{name}.jsonl")
            with open(path, "w") as f:
                f.write(json.dumps(header) + "\n")
                for line in lines:
                    f.write(json.dumps(line) + "\n")
            took = time.monotonic() - t0
            if header["error"]:
                failures += 1
                print(f"  ERROR  {name} ({took:.1f} s): {header['error']}", flush=True)
            else:
                print(f"  ok     {name} ({took:.1f} s, {len(lines)} events) -> {path}", flush=True)
        print(f"vLLM {self.release}: {time.monotonic() - t_all:.1f} s, logs in {self.log_dir}", flush=True)
        return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", required=True, help="the vLLM release the connector runs on")
    ap.add_argument("--impl", choices=sorted(SIDE_CHANNEL_ENV), default="vllm",
                    help="the connector recorded: vLLM's own (default) or Mooncake's own, "
                         "mooncake.mooncake_connector_v1 of pip mooncake-transfer-engine-non-cuda (generation 1; "
                         "the package on PYTHONPATH)")
    ap.add_argument("--scenario", action="append", default=[])
    ap.add_argument("--out")
    ap.add_argument("--python", default=sys.executable, help="interpreter of an environment with vLLM's dependencies")
    ap.add_argument("--vllm-path", help="directory holding the release's `vllm` package, put first on PYTHONPATH")
    ap.add_argument("--scenarios", default=os.path.join(REPO, "conformance", "scenarios.toml"))
    ap.add_argument("--log-dir")
    ap.add_argument("--settle-extra", type=float, default=4.0,
                    help="a decoder that has not reported a pull within abort timeout + this many seconds is "
                         "recorded in not_finished")
    ap.add_argument("--register-timeout", type=float, default=20.0,
                    help="bound on a worker's register_kv_caches (bootstrap registration included)")
    ap.add_argument("--dup-register-timeout", type=float, default=5.0,
                    help="bound on register_kv_caches of the worker that registers a TP rank twice (releases that "
                         "wait for their listener without a timeout never return from it)")
    a = ap.parse_args(argv)

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    # Ctrl-C and SIGTERM end the run the same way (also when started in the background, where SIGINT arrives
    # ignored): every process started so far is stopped on the way out.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    rec = None
    try:
        rec = Recorder(a)
        rec.start()
        what = f"vLLM {a.release}" if rec.implementation is None else rec.implementation["recorded_from"].split(";")[0]
        print(f"{what} (connector generation {rec.generation}) with {a.python}", flush=True)
        failures = rec.run(a.scenario)
    except RecordError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if rec is not None:
            rec.stop()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
