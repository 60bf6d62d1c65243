#!/usr/bin/env python3
"""Soak test of the reference peer (`mooncake-peer`): a bootstrap server, several prefillers and 64+ decoders, each
a process of its own on 127.0.0.1, driven for N minutes through the testee control protocol
(conformance/TESTEE.md) with pulls at a steady rate and faults injected at random:

* prefiller_restart  a prefiller killed (SIGKILL) and started again on the same port (it registers again);
* bootstrap_restart  the bootstrap server killed and started again on the same port; the live prefillers'
                     registrations are posted again (vLLM workers register once, at start-up);
* decoder_vanish     a decoder killed right after it was told to pull (mid-transfer); a new one takes its slot;
* transfer_failure   a prefiller's next transfer-engine write fails (`fail_next_transfer`);
* rogue_frames       a rogue ZeroMQ peer sends malformed messages to a prefiller's ROUTER, and malformed HTTP to
                     the bootstrap server;
* slow_peer          a decoder or a prefiller stopped (SIGSTOP) for a few seconds, then continued;
* scheduler_abort    a prefiller request allocated and aborted before its prefill finished (never pulled).

Then it stops injecting, lets every timeout pass, and accounts (exit 1 on any violation):

* decoder side (every live decoder): every request it was told to pull has exactly one outcome — finished,
  failed or left unsettled — and the outcome kinds are ones the revision's `[behaviour]` allows
  (`failure_report`, `failure_finish`); no request twice in one list;
* prefiller side (every prefiller incarnation): every transfer made ready is freed (`finished_sending`) exactly
  once — by a pull, or by expiry after the abort timeout — except those a killed incarnation took with it;
  aborted requests are never freed; a request its decoder reports finished (not failed) was freed by a pull;
* tables: no tracked transfer, open exchange or pending pull left anywhere;
* memory: every decoder's memory read back holds, in every non-zero word, the provenance word of the prefiller
  block its own pulls mapped to that block (conformance/TESTEE.md), and every block of a request reported
  finished holds all of it: no write outside the blocks it was for;
* resources: resident memory and open file descriptors of every process that lived through the run are flat
  after warm-up (growth of the median of the last fifth over the median of the fifth after warm-up at most
  max(8 MiB, 15 %) of RSS and 4 descriptors). Every new process (the first ones and every restarted or
  replacing one) first makes one pull with every live peer of the other role (a stopped peer, when it
  continues, with the ones it missed), so that the connections it keeps are all open before it is judged; a
  pool that keeps growing past that leaks.

Writes a JSON summary, a CSV of RSS/fds samples and an SVG plot of RSS over time into --out, and prints a
summary. Standard library plus pyzmq (the rogue peer), as in tests/oracle/requirements.txt.
"""

import argparse
import json
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BLOCK_LEN = 256
PREFILLER_BLOCKS = 1024
DECODER_BLOCKS = 512
PREFILLER_BASE = 0x1000_0000
DECODER_BASE = 0x7000_0000
LAYERS = ["model.layers.0.self_attn"]


def layout(base, blocks):
    return {
        "kv_caches_base_addr": [base],
        "block_lens": [BLOCK_LEN],
        "kv_block_lens": [BLOCK_LEN],
        "registered_layer_names": LAYERS,
        "registered_layer_indices": [0],
        "num_blocks": blocks,
    }


def provenance_word(region, block, offset):
    return (0x4D43 << 48) | ((region & 0xFFF) << 36) | ((block & 0xFFFFF) << 16) | ((offset // 8) & 0xFFFF)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------------------------------------------
# The revision's behaviour, from spec/push/*.toml: a revision file names its base and `set`s behaviour items.


def behaviour(revision):
    path = os.path.join(ROOT, "spec", "push", f"{revision}.toml")
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    base = doc.get("base")
    out = behaviour(base) if base else {}
    if "generation" in doc:
        out["generation"] = doc["generation"]
    for k, v in doc.get("behaviour", {}).items():
        out[k] = v.get("value") if isinstance(v, dict) else v
    for e in doc.get("edit", []):
        at = e.get("at", "")
        if e.get("op") == "set" and at.startswith("behaviour.") and at.count(".") == 1:
            out[at.split(".", 1)[1]] = e.get("value")
    return out


# ----------------------------------------------------------------------------------------------------------------
# One mooncake-peer testee process.


class Peer:
    def __init__(self, binary, kind, name, start_cmd):
        self.kind, self.name, self.start_cmd = kind, name, start_cmd
        self.proc = subprocess.Popen(
            [binary, "--log", "error", "testee"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.pid = self.proc.pid
        self.lines = queue.Queue()
        self.paused = False
        self.dead = False
        self.started_at = time.time()
        threading.Thread(target=self._read, daemon=True).start()
        self.info = self.call(start_cmd, timeout=60)
        if not self.info.get("ok"):
            self.kill()
            raise RuntimeError(f"{name}: start refused: {self.info}")

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def call(self, cmd, timeout=20):
        if self.dead:
            raise RuntimeError(f"{self.name}: dead")
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.lines.get(timeout=timeout)
            if line is None:
                raise RuntimeError(f"{self.name}: exited (code {self.proc.poll()})")
            line = line.strip()
            if line.startswith("{"):
                a = json.loads(line)
                if "hello" in a:
                    continue
                return a

    def kill(self):
        if not self.dead:
            self.dead = True
            try:
                if self.paused:
                    os.kill(self.pid, signal.SIGCONT)
                self.proc.kill()
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)

    def stop(self):
        if self.dead:
            return
        try:
            self.call({"cmd": "stop"}, timeout=10)
        except Exception:
            pass
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
        self.dead = True

    def sample(self):
        """(RSS bytes, open fds) from /proc, or None once the process is gone."""
        try:
            with open(f"/proc/{self.pid}/status") as f:
                rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
            fds = len(os.listdir(f"/proc/{self.pid}/fd"))
            return rss, fds
        except (OSError, StopIteration):
            return None


# ----------------------------------------------------------------------------------------------------------------


class Soak:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.rev = a.revision
        self.beh = behaviour(self.rev)
        if self.beh.get("generation") != 2:
            raise SystemExit(f"soak: {self.rev} is generation {self.beh.get('generation')}; the soak drives generation 2")
        self.binary = a.peer
        self.bootstrap_port = free_port()
        self.bootstrap_url = None
        self.bootstrap = None
        self.prefillers = []  # slot -> Peer
        self.prefiller_ports = [free_port() for _ in range(a.prefillers)]
        self.decoders = []  # slot -> Peer
        self.incarnation = {}  # Peer name -> Peer (all ever)
        self.seq = 0
        # Decoder-side: decoder name -> {d_req_id: (prefiller name, transfer_id, local blocks)}
        self.pulled = {}
        # Prefiller-side: prefiller name -> {transfer_id: {"p_req_id", "decoder", "d_req_id"}}
        self.readied = {}
        self.aborted = {}  # prefiller name -> set(transfer_id)
        self.killed_prefiller_status = {}  # name -> status snapshot taken just before the kill
        self.faults = {k: 0 for k in (
            "prefiller_restart", "bootstrap_restart", "decoder_vanish", "transfer_failure", "rogue_frames",
            "slow_peer", "scheduler_abort")}
        self.rogue_messages = 0
        self.met = set()  # (decoder name, prefiller name) pairs warm() has pulled between: one pull each
        self.samples = []  # (t, name, kind, rss, fds)
        self.violations = []
        self.t0 = time.time()
        self.paused = []  # (until, Peer)
        self.block_cursor = {}

    # -- processes -------------------------------------------------------------------------------------------

    def start_bootstrap(self):
        for attempt in range(20):
            try:
                p = Peer(self.binary, "bootstrap", f"bootstrap#{self.faults['bootstrap_restart']}", {
                    "cmd": "start", "role": "bootstrap", "revision": self.rev,
                    "config": {"bind": f"127.0.0.1:{self.bootstrap_port}"}})
                self.bootstrap = p
                self.bootstrap_url = p.info["url"]
                self.incarnation[p.name] = p
                return
            except RuntimeError:
                time.sleep(0.25)
        raise RuntimeError("the bootstrap server does not start again on its port")

    def prefiller_cmd(self, slot):
        return {"cmd": "start", "role": "prefiller", "revision": self.rev, "config": {
            "engine_id": f"engine-{slot}", "dp_rank": slot, "tp_rank": 0, "tp_size": 1, "pp_rank": 0, "pp_size": 1,
            "bootstrap": self.bootstrap_url, "bind": f"tcp://127.0.0.1:{self.prefiller_ports[slot]}",
            "abort_timeout_s": self.a.abort_timeout, "model": {"total_num_kv_heads": 8},
            "layout": layout(PREFILLER_BASE, PREFILLER_BLOCKS)}}

    def start_prefiller(self, slot, generation):
        name = f"prefiller{slot}#{generation}"
        for attempt in range(40):
            try:
                p = Peer(self.binary, "prefiller", name, self.prefiller_cmd(slot))
                break
            except RuntimeError as e:
                last = e
                time.sleep(0.25)
        else:
            raise RuntimeError(f"{name}: does not start again on its port: {last}")
        p.slot, p.generation = slot, generation
        self.incarnation[name] = p
        self.readied[name] = {}
        self.aborted[name] = set()
        return p

    def start_decoder(self, slot, generation):
        name = f"decoder{slot}#{generation}"
        p = Peer(self.binary, "decoder", name, {"cmd": "start", "role": "decoder", "revision": self.rev, "config": {
            "hostname": "127.0.0.1", "tp_rank": 0, "tp_size": 1, "pp_rank": 0, "pp_size": 1,
            "layout_id": (self.rng.getrandbits(62) << 1) | 1, "recv_timeout_s": self.a.recv_timeout,
            "layout": layout(DECODER_BASE, DECODER_BLOCKS)}})
        p.slot, p.generation = slot, generation
        self.incarnation[name] = p
        self.pulled[name] = {}
        self.block_cursor[name] = 0
        return p

    def remote_block(self, decoder, local):
        """The prefiller block a decoder's local block is always pulled from (fixed per decoder, so a block
        written twice holds the same bytes)."""
        return (local * 7 + decoder.slot * 131 + decoder.generation * 17) % PREFILLER_BLOCKS

    # -- the load --------------------------------------------------------------------------------------------

    def live(self, peers):
        return [p for p in peers if not p.dead and not p.paused]

    def one_pull(self, vanish=False, pair=None):
        """A pull of 1-3 requests of 1-4 blocks from a random live prefiller by a random live decoder, or, for
        `pair` = (decoder, prefiller), one request of 4 blocks between those two (the warming pull)."""
        if pair is None:
            ds, ps = self.live(self.decoders), self.live(self.prefillers)
            if not ds or not ps:
                return
            d, p = self.rng.choice(ds), self.rng.choice(ps)
        else:
            d, p = pair
        reqs = []
        for _ in range(1 if pair else self.rng.randint(1, 3)):
            self.seq += 1
            n = 4 if pair else self.rng.randint(1, 4)
            c = self.block_cursor[d.name]
            local = [(c + i) % DECODER_BLOCKS for i in range(n)]
            self.block_cursor[d.name] = (c + n) % DECODER_BLOCKS
            remote = [self.remote_block(d, b) for b in local]
            tid, preq, dreq = f"xfer-{self.seq}", f"p-req-{self.seq}", f"d-req-{self.seq}"
            try:
                if p.call({"cmd": "allocate", "p_req_id": preq, "transfer_id": tid}).get("ok") is not True:
                    self.violation(f"{p.name}: allocate refused")
                if p.call({"cmd": "ready", "p_req_id": preq, "transfer_id": tid, "blocks": [remote]}).get("ok") is not True:
                    self.violation(f"{p.name}: ready refused")
            except (RuntimeError, queue.Empty) as e:
                self.violation(f"{p.name}: control channel: {e}")
                return
            self.readied[p.name][tid] = {"p_req_id": preq, "decoder": d.name, "d_req_id": dreq}
            if self.a.sabotage == "outcome" and self.seq == 50:
                # The driver's books get a request nobody pulls: the decoder-side accounting must miss its outcome.
                self.pulled[d.name]["d-req-never-pulled"] = (p.name, tid, local)
            if self.a.sabotage == "memory" and self.seq == 50:
                # The prefiller is told other source blocks than the decoder's mapping: the memory check must see it.
                p.call({"cmd": "ready", "p_req_id": preq + "x", "transfer_id": tid + "x",
                        "blocks": [[(b + 1) % PREFILLER_BLOCKS for b in remote]]})
                self.readied[p.name][tid + "x"] = {"p_req_id": preq + "x", "decoder": d.name, "d_req_id": dreq}
                tid = tid + "x"
            reqs.append({"d_req_id": dreq, "transfer_id": tid, "blocks": [local],
                         "engine_id": f"engine-{p.slot}", "bootstrap_addr": self.bootstrap_url})
            self.pulled[d.name][dreq] = (p.name, tid, local)
        try:
            if d.call({"cmd": "pull", "requests": reqs}).get("ok") is not True:
                self.violation(f"{d.name}: pull refused")
        except (RuntimeError, queue.Empty) as e:
            self.violation(f"{d.name}: control channel: {e}")
        if vanish:
            time.sleep(self.rng.uniform(0, 0.02))
            self.vanish(d)

    # -- faults ----------------------------------------------------------------------------------------------

    def vanish(self, d):
        d.kill()
        self.faults["decoder_vanish"] += 1
        self.decoders[d.slot] = self.start_decoder(d.slot, d.generation + 1)
        self.warm(self.decoders[d.slot])

    def warm(self, new):
        """One pull of 4 scattered blocks between a new process and every live peer of the other role, so that
        the connections it keeps (ZeroMQ sockets, the engine's up to 4 data connections per peer) are all open
        before its resources are judged: a pool filled lazily by random pulls grows for as long as some pair
        has not met yet, which on a short run looks exactly like a leak, and growth past a warmed pool is one.
        These pulls are ordinary pulls, accounted like every other."""
        if new.dead or new.paused:
            return
        if new.kind == "decoder":
            pairs = [(new, p) for p in self.live(self.prefillers)]
        else:
            pairs = [(d, new) for d in self.live(self.decoders)]
        # A peer stopped (slow_peer) is met when it continues: resume_due() warms it with what it missed.
        pairs = [(d, p) for d, p in pairs if (d.name, p.name) not in self.met]
        for d, p in pairs:
            self.one_pull(pair=(d, p))
            self.met.add((d.name, p.name))

    def restart_prefiller(self):
        ps = self.live(self.prefillers)
        if not ps:
            return
        p = self.rng.choice(ps)
        try:
            self.killed_prefiller_status[p.name] = p.call({"cmd": "status"})
        except (RuntimeError, queue.Empty) as e:
            self.violation(f"{p.name}: status before the kill: {e}")
        p.kill()
        self.faults["prefiller_restart"] += 1
        self.prefillers[p.slot] = self.start_prefiller(p.slot, p.generation + 1)
        self.warm(self.prefillers[p.slot])

    def restart_bootstrap(self):
        self.bootstrap.kill()
        self.faults["bootstrap_restart"] += 1
        self.start_bootstrap()
        for p in self.prefillers:
            if p.dead:
                continue
            body = json.dumps({"engine_id": f"engine-{p.slot}", "dp_rank": p.slot, "tp_rank": 0, "pp_rank": 0,
                               "addr": p.info["endpoint"]}).encode()
            req = urllib.request.Request(self.bootstrap_url + "/register", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    if r.status != 200:
                        self.violation(f"re-registering {p.name}: HTTP {r.status}")
            except Exception as e:
                self.violation(f"re-registering {p.name}: {e}")

    def transfer_failure(self):
        ps = self.live(self.prefillers)
        if ps:
            p = self.rng.choice(ps)
            p.call({"cmd": "fail_next_transfer", "count": 1, "ret": -1})
            self.faults["transfer_failure"] += 1

    def scheduler_abort(self):
        ps = self.live(self.prefillers)
        if ps:
            p = self.rng.choice(ps)
            self.seq += 1
            tid = f"xfer-{self.seq}"
            p.call({"cmd": "allocate", "p_req_id": f"p-req-{self.seq}", "transfer_id": tid})
            p.call({"cmd": "abort", "transfer_id": tid})
            self.aborted[p.name].add(tid)
            self.faults["scheduler_abort"] += 1

    def rogue(self):
        import zmq

        ps = self.live(self.prefillers)
        if not ps:
            return
        p = self.rng.choice(ps)
        ctx = zmq.Context.instance()
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 200)
        s.connect(p.info["endpoint"])
        garbage = [
            bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(0, 64))),
            b"\x8f",  # a map of 15 entries, then nothing
            b"\xdf\xff\xff\xff\xff",  # a map claiming 2^32-1 entries
            b"\x81\xafremote_hostname\xcc\x01",  # a field of the wrong type
            b"\xc1",  # never used in MessagePack
            b"\x93\x01\x02",  # an array where a map is expected
        ]
        for _ in range(self.rng.randint(1, 4)):
            g = self.rng.choice(garbage)
            if self.rng.random() < 0.3:
                s.send_multipart([g, b"", g])  # three frames instead of one
            else:
                s.send(g)
            self.rogue_messages += 1
        s.close()
        # Malformed HTTP to the bootstrap server.
        for body in (b"{", b"[1, 2, 3]", b'{"engine_id": 1}', bytes(range(256))):
            try:
                req = urllib.request.Request(self.bootstrap_url + "/register", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=5).read()
            except Exception:
                pass
            self.rogue_messages += 1
        try:
            with socket.create_connection(("127.0.0.1", self.bootstrap_port), timeout=5) as c:
                c.sendall(b"GARBAGE / HTTP/9.9\r\nContent-Length: 99999999\r\n\r\nabc")
                c.settimeout(2)
                try:
                    c.recv(100)
                except OSError:
                    pass
            self.rogue_messages += 1
        except OSError:
            pass
        self.faults["rogue_frames"] += 1

    def slow(self):
        pool = self.live(self.decoders) + self.live(self.prefillers)
        if pool:
            p = self.rng.choice(pool)
            os.kill(p.pid, signal.SIGSTOP)
            p.paused = True
            self.paused.append((time.time() + self.rng.uniform(1, 5), p))
            self.faults["slow_peer"] += 1

    def resume_due(self, all_=False):
        now = time.time()
        keep = []
        for until, p in self.paused:
            if all_ or until <= now:
                if not p.dead:
                    os.kill(p.pid, signal.SIGCONT)
                p.paused = False
                if not all_:
                    self.warm(p)
            else:
                keep.append((until, p))
        self.paused = keep

    def fault(self):
        kinds = ["prefiller_restart", "bootstrap_restart", "decoder_vanish", "transfer_failure", "rogue_frames",
                 "slow_peer", "scheduler_abort"]
        weights = [2, 1, 3, 4, 3, 3, 3]
        k = self.rng.choices(kinds, weights)[0]
        if k == "prefiller_restart":
            self.restart_prefiller()
        elif k == "bootstrap_restart":
            self.restart_bootstrap()
        elif k == "decoder_vanish":
            self.one_pull(vanish=True)
        elif k == "transfer_failure":
            self.transfer_failure()
        elif k == "rogue_frames":
            self.rogue()
        elif k == "slow_peer":
            self.slow()
        else:
            self.scheduler_abort()

    # -- sampling --------------------------------------------------------------------------------------------

    def sample_all(self):
        t = time.time() - self.t0
        for p in [self.bootstrap] + self.prefillers + self.decoders:
            if p.dead:
                continue
            s = p.sample()
            if s:
                self.samples.append((t, p.name, p.kind, s[0], s[1]))

    def violation(self, what):
        if len(self.violations) < 1000:
            self.violations.append(what)

    # -- the run ---------------------------------------------------------------------------------------------

    def run(self):
        a = self.a
        self.start_bootstrap()
        self.prefillers = [self.start_prefiller(i, 0) for i in range(a.prefillers)]
        self.decoders = [self.start_decoder(i, 0) for i in range(a.decoders)]
        for d in self.decoders:
            self.warm(d)
        started = time.time()
        print(f"soak: {self.rev}: bootstrap, {a.prefillers} prefillers, {a.decoders} decoders up and warmed "
              f"({len(self.met)} pulls, one per pair) in {started - self.t0:.1f}s; {a.minutes} min at {a.rate} pulls/s, a fault every ~{a.fault_every}s",
              flush=True)
        end = started + a.minutes * 60
        next_pull, next_fault, next_sample, next_report = started, started + 2, started, started + 60
        pulls_issued = 0
        while time.time() < end:
            now = time.time()
            self.resume_due()
            if now >= next_sample:
                self.sample_all()
                next_sample += a.sample_every
            if now >= next_fault:
                try:
                    self.fault()
                except (RuntimeError, queue.Empty) as e:
                    self.violation(f"fault injection: {e}")
                next_fault = now + self.rng.expovariate(1 / a.fault_every)
            if now >= next_pull:
                self.one_pull()
                pulls_issued += 1
                next_pull += self.rng.expovariate(a.rate / 2.0)  # a batch of 1-3 requests: ~rate requests/s
                if next_pull < now - 5:
                    next_pull = now  # the driver fell behind: do not burst to catch up
            if now >= next_report:
                print(f"soak: {int(now - started)}s: {self.seq} requests, faults {sum(self.faults.values())}, "
                      f"{len(self.violations)} violations", flush=True)
                next_report += 60
            time.sleep(max(0, min(next_pull, next_fault, next_sample) - time.time()))
        self.resume_due(all_=True)
        self.load_seconds = time.time() - started
        print(f"soak: load phase over after {self.load_seconds:.0f}s; draining", flush=True)
        self.drain()
        self.account()
        self.shutdown()
        return self.report()

    def drain(self):
        """Waits (bounded) until every table is empty: decoders past their receive timeouts, prefillers past
        the abort timeout."""
        limit = time.time() + self.a.recv_timeout + self.a.abort_timeout + 30
        self.sample_all()
        while time.time() < limit:
            busy = []
            for p in self.decoders:
                s = p.call({"cmd": "status"})
                if s.get("pending_pulls") or s.get("open_exchanges"):
                    busy.append(p.name)
            for p in self.prefillers:
                s = p.call({"cmd": "status"})
                if s.get("tracked_transfers") or s.get("open_exchanges"):
                    busy.append(p.name)
            if not busy:
                break
            time.sleep(1)
        self.drain_seconds = time.time() - (self.t0 + 0)
        self.sample_all()

    # -- accounting ------------------------------------------------------------------------------------------

    def account(self):
        beh = self.beh
        self.outcomes = {"finished": 0, "failed": 0, "unsettled": 0, "lost_with_decoder": 0}
        self.prefiller_outcomes = {"freed_by_pull": 0, "freed_by_expiry": 0, "lost_with_prefiller": 0,
                                   "aborted_never_freed": 0}
        decoder_finished_ok = {}  # (prefiller name, transfer id) -> decoder name, for finished-not-failed
        # Decoder side.
        for d in self.decoders:
            s = d.call({"cmd": "status"})
            if s.get("pending_pulls") or s.get("open_exchanges"):
                self.violation(f"{d.name}: tables not empty: {s.get('pending_pulls')} pending pulls, "
                               f"{s.get('open_exchanges')} open exchanges")
            fin = s.get("finished", [])
            failed = s.get("failed", [])
            uns = [u["d_req_id"] for u in s.get("unsettled", [])]
            fset, uset = set(fin), set(uns)
            failed_ids = [f["d_req_id"] for f in failed]
            for lst, what in ((fin, "finished"), (failed_ids, "failed"), (uns, "unsettled")):
                if len(lst) != len(set(lst)):
                    self.violation(f"{d.name}: a request {what} twice")
            mine = self.pulled[d.name]
            for x in set(fin) | set(failed_ids) | set(uns):
                if x not in mine:
                    self.violation(f"{d.name}: an outcome for {x}, which it never pulled")
            for f in failed:
                if beh.get("failure_report") == "none":
                    self.violation(f"{d.name}: {f['d_req_id']} reported failed, but failure_report = none")
                if f.get("failed_recving") and beh.get("failure_report") != "invalid-blocks-or-failed-recving":
                    self.violation(f"{d.name}: {f['d_req_id']} failed_recving under {beh.get('failure_report')}")
                if f["d_req_id"] in fset and beh.get("failure_finish") == "never":
                    self.violation(f"{d.name}: {f['d_req_id']} failed and finished, but failure_finish = never")
            failed_set = set(failed_ids)
            for dreq, (pname, tid, local) in mine.items():
                if dreq in failed_set:
                    self.outcomes["failed"] += 1
                elif dreq in fset and dreq in uset:
                    self.violation(f"{d.name}: {dreq} both finished and unsettled")
                elif dreq in fset:
                    self.outcomes["finished"] += 1
                    decoder_finished_ok[(pname, tid)] = d.name
                elif dreq in uset:
                    self.outcomes["unsettled"] += 1
                else:
                    self.violation(f"{d.name}: {dreq} has no outcome")
            self.check_memory(d, fset - failed_set)
        for name, mine in self.pulled.items():
            p = self.incarnation[name]
            if p.dead and p not in self.decoders:
                self.outcomes["lost_with_decoder"] += len(mine)
        # Prefiller side.
        self.rejected = 0
        for name, p in self.incarnation.items():
            if p.kind != "prefiller":
                continue
            killed = name in self.killed_prefiller_status
            if killed:
                s = self.killed_prefiller_status[name]
            else:
                s = p.call({"cmd": "status"})
                if s.get("tracked_transfers") or s.get("open_exchanges"):
                    self.violation(f"{name}: tables not empty: {s.get('tracked_transfers')} tracked transfers, "
                                   f"{s.get('open_exchanges')} open exchanges")
            self.rejected += len(s.get("rejected", []))
            freed = {}
            for e in s.get("finished_sending", []):
                if e["transfer_id"] in freed:
                    self.violation(f"{name}: {e['transfer_id']} freed twice")
                freed[e["transfer_id"]] = e
            for tid in freed:
                if tid not in self.readied[name]:
                    self.violation(f"{name}: {tid} freed but never made ready here")
            for tid in self.aborted[name]:
                if tid in freed:
                    self.violation(f"{name}: {tid} freed after the scheduler aborted it")
                else:
                    self.prefiller_outcomes["aborted_never_freed"] += 1
            for tid, r in self.readied[name].items():
                e = freed.get(tid)
                if e is None:
                    if killed:
                        self.prefiller_outcomes["lost_with_prefiller"] += 1
                    else:
                        self.violation(f"{name}: {tid} never freed")
                    continue
                if e["p_req_id"] != r["p_req_id"]:
                    self.violation(f"{name}: {tid} freed for {e['p_req_id']}, not {r['p_req_id']}")
                self.prefiller_outcomes["freed_by_expiry" if e["expired"] else "freed_by_pull"] += 1
                if e["expired"] and (name, tid) in decoder_finished_ok:
                    self.violation(f"{name}: {tid} expired, but its decoder reports it finished")
            for (pname, tid), dname in decoder_finished_ok.items():
                if pname == name and not killed and tid not in freed:
                    self.violation(f"{name}: {tid} finished on {dname} but never freed")
        self.check_resources()

    def check_memory(self, d, finished):
        """Every non-zero word of the decoder's memory is the provenance word of the block its pulls map there;
        every block of a finished request holds all of it."""
        r = d.call({"cmd": "read_memory", "addr": DECODER_BASE, "len": DECODER_BLOCKS * BLOCK_LEN}, timeout=60)
        if not r.get("ok"):
            self.violation(f"{d.name}: read_memory: {r}")
            return
        mem = bytes.fromhex(r["hex"])
        finished_blocks = set()
        for dreq in finished:
            finished_blocks.update(self.pulled[d.name][dreq][2])
        bad = 0
        self.blocks_checked = getattr(self, "blocks_checked", 0)
        self.blocks_written = getattr(self, "blocks_written", 0)
        for b in range(DECODER_BLOCKS):
            rb = self.remote_block(d, b)
            written = 0
            for o in range(0, BLOCK_LEN, 8):
                w = int.from_bytes(mem[b * BLOCK_LEN + o: b * BLOCK_LEN + o + 8], "little")
                if w == 0:
                    continue
                written += 1
                if w != provenance_word(0, rb, o):
                    bad += 1
            self.blocks_checked += 1
            if written:
                self.blocks_written += 1
            if b in finished_blocks and written != BLOCK_LEN // 8:
                self.violation(f"{d.name}: block {b} of a finished request holds {written} of {BLOCK_LEN // 8} words")
        if bad:
            self.violation(f"{d.name}: {bad} words of its memory are not the provenance of the blocks pulled there")

    def check_resources(self):
        """RSS and fds flat after warm-up, for every process incarnation that lived long enough to judge."""
        self.resource_rows = judge_resources(self.samples, self.a.warmup)
        for name, kind, rss0, rss1, fd0, fd1, ok in self.resource_rows:
            if rss1 - rss0 > max(8 << 20, 0.15 * rss0):
                self.violation(f"{name}: RSS grew from {rss0 >> 10} KiB to {rss1 >> 10} KiB after warm-up")
            if fd1 - fd0 > 4:
                self.violation(f"{name}: open fds grew from {fd0} to {fd1} after warm-up")
        if not self.resource_rows:
            self.violation("no process lived long enough after warm-up to judge RSS and fds")

    def shutdown(self):
        for p in self.incarnation.values():
            if p.paused and not p.dead:
                os.kill(p.pid, signal.SIGCONT)
            p.stop()

    # -- report ----------------------------------------------------------------------------------------------

    def report(self):
        a = self.a
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "samples.csv"), "w") as f:
            f.write("t_s,process,kind,rss_bytes,fds\n")
            for t, name, kind, rss, fds in self.samples:
                f.write(f"{t:.1f},{name},{kind},{rss},{fds}\n")
        svg = plot(self.samples, a.warmup, f"mooncake-peer soak, {self.rev}, {a.minutes} min")
        with open(os.path.join(a.out, "rss.svg"), "w") as f:
            f.write(svg)
        summary = {
            "revision": self.rev,
            "minutes": a.minutes,
            "seed": a.seed,
            "processes": {"bootstrap": 1, "prefillers": a.prefillers, "decoders": a.decoders,
                          "incarnations": len(self.incarnation)},
            "load_seconds": round(self.load_seconds, 1),
            "requests_pulled": self.seq - self.faults["scheduler_abort"],
            "faults": self.faults,
            "rogue_messages": self.rogue_messages,
            "warming_pulls": len(self.met),
            "prefiller_rejections": self.rejected,
            "decoder_outcomes": self.outcomes,
            "prefiller_outcomes": self.prefiller_outcomes,
            "memory": {"decoder_blocks_checked": getattr(self, "blocks_checked", 0),
                       "decoder_blocks_written": getattr(self, "blocks_written", 0)},
            "resources": resources_by_kind(self.resource_rows),
            "behaviour": {k: self.beh.get(k) for k in ("failure_report", "failure_finish", "unreported_after_finish")},
            "violations": self.violations,
        }
        with open(os.path.join(a.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        with open(os.path.join(a.out, "summary.md"), "w") as f:
            f.write(render_markdown(summary, self.samples))
        print(json.dumps({k: v for k, v in summary.items() if k != "violations"}, indent=None))
        for v in self.violations[:30]:
            print(f"VIOLATION: {v}")
        verdict = "PASSED" if not self.violations else f"FAILED ({len(self.violations)} violations)"
        print(f"soak {verdict}: {summary['requests_pulled']} requests over {a.minutes} min, "
              f"{sum(self.faults.values())} faults; results in {a.out}")
        return 0 if not self.violations else 1


def judge_resources(samples, warmup):
    """Per process incarnation (restarted processes are new ones) that has at least 10 samples after its own
    warm-up (`warmup` seconds, or a fifth of its life if shorter): the medians of RSS and fds over the first
    and the last fifth of those samples, and whether growth stays within max(8 MiB, 15 %) and 4 fds."""
    series = {}
    for t, name, kind, rss, fds in samples:
        series.setdefault((name, kind), []).append((t, rss, fds))
    rows = []
    med = lambda xs: sorted(xs)[len(xs) // 2]
    for (name, kind), pts in sorted(series.items()):
        t0, t1 = pts[0][0], pts[-1][0]
        own = min(warmup, (t1 - t0) / 5)
        after = [x for x in pts if x[0] >= t0 + own]
        if len(after) < 10:
            continue
        n = max(2, len(after) // 5)
        rss0, rss1 = med([x[1] for x in after[:n]]), med([x[1] for x in after[-n:]])
        fd0, fd1 = med([x[2] for x in after[:n]]), med([x[2] for x in after[-n:]])
        ok = rss1 - rss0 <= max(8 << 20, 0.15 * rss0) and fd1 - fd0 <= 4
        rows.append((name, kind, rss0, rss1, fd0, fd1, ok))
    return rows


def resources_by_kind(rows):
    by_kind = {}
    for name, kind, rss0, rss1, fd0, fd1, ok in rows:
        k = by_kind.setdefault(kind, [0, 0, 0, 0, 0, 0])
        k[0] += 1
        k[1] = max(k[1], rss0)
        k[2] = max(k[2], rss1)
        k[3] = max(k[3], rss1 - rss0)
        k[4] = max(k[4], fd1 - fd0)
        k[5] += 0 if ok else 1
    return {k: {"processes": v[0], "max_rss_after_warmup_kib": v[1] >> 10, "max_rss_at_end_kib": v[2] >> 10,
                "max_rss_growth_kib": v[3] >> 10, "max_fd_growth": v[4], "not_flat": v[5]} for k, v in by_kind.items()}


def render_markdown(summary, samples):
    """The run's accounting as Markdown (RELIABILITY.md quotes it): pulls, faults by kind, outcomes on both
    sides, memory check, resources, and RSS over time (sums per role at ten instants)."""
    s = summary
    out = [f"Revision `{s['revision']}`, {s['minutes']} min of load (seed {s['seed']}): a bootstrap server, "
           f"{s['processes']['prefillers']} prefillers and {s['processes']['decoders']} decoders, "
           f"{s['processes']['incarnations']} processes over the run (restarts included).", ""]
    out += ["| requests pulled | faults injected | rogue messages sent | prefiller rejections | violations |",
            "|---:|---:|---:|---:|---:|",
            f"| {s['requests_pulled']:,} | {sum(s['faults'].values()):,} | {s['rogue_messages']:,} | "
            f"{s['prefiller_rejections']:,} | {len(s['violations'])} |", ""]
    out += ["| fault | injected |", "|---|---:|"] + [f"| `{k}` | {v:,} |" for k, v in s["faults"].items()] + [""]
    d, p = s["decoder_outcomes"], s["prefiller_outcomes"]
    out += ["| decoder side | requests | prefiller side | transfers |", "|---|---:|---|---:|"]
    dl, pl = list(d.items()), list(p.items())
    for i in range(max(len(dl), len(pl))):
        a = dl[i] if i < len(dl) else ("", "")
        b = pl[i] if i < len(pl) else ("", "")
        fa = f"{a[1]:,}" if a[1] != "" else ""
        fb = f"{b[1]:,}" if b[1] != "" else ""
        out.append(f"| {a[0]} | {fa} | {b[0]} | {fb} |")
    out += ["", f"Memory: {s['memory']['decoder_blocks_checked']:,} decoder blocks read back, "
            f"{s['memory']['decoder_blocks_written']:,} of them written; every non-zero word checked against the "
            "provenance of the block pulled there.", ""]
    out += ["| role | processes judged | max RSS after warm-up | max RSS at the end | max RSS growth | max fd growth | not flat |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for k, v in s["resources"].items():
        out.append(f"| {k} | {v['processes']} | {v['max_rss_after_warmup_kib']:,} KiB | {v['max_rss_at_end_kib']:,} KiB | "
                   f"{v['max_rss_growth_kib']:,} KiB | {v['max_fd_growth']} | {v['not_flat']} |")
    if "resources_every_incarnation" in s:
        out += ["", "Judged again from samples.csv by every process incarnation with 10 samples after its own warm-up "
                "(restarted prefillers and bootstrap servers included; the run itself judged only the processes "
                "that lived through it):", "",
                "| role | incarnations judged | max RSS after warm-up | max RSS at the end | max RSS growth | max fd growth | not flat |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        for k, v in s["resources_every_incarnation"].items():
            out.append(f"| {k} | {v['processes']} | {v['max_rss_after_warmup_kib']:,} KiB | {v['max_rss_at_end_kib']:,} KiB | "
                       f"{v['max_rss_growth_kib']:,} KiB | {v['max_fd_growth']} | {v['not_flat']} |")
    if samples:
        tmin, tmax = min(t for t, *_ in samples), max(t for t, *_ in samples)
        by_t = {}
        for t, name, kind, rss, fds in samples:
            by_t.setdefault(t, {}).setdefault(kind, [0, 0, 0])
            g = by_t[t][kind]
            g[0] += rss
            g[1] += fds
            g[2] += 1
        ts = sorted(by_t)
        out += ["", "RSS over time (sum over the processes of each role at that sample; fds likewise):", "",
                "| minute | decoders: processes, RSS, fds | prefillers: processes, RSS, fds | bootstrap: RSS, fds |",
                "|---:|---|---|---|"]
        for i in range(11):
            want = tmin + (tmax - tmin) * i / 10
            t = min(ts, key=lambda x: abs(x - want))
            g = by_t[t]
            cell = lambda k: (f"{g[k][2]}, {g[k][0] / 2**20:.1f} MiB, {g[k][1]}" if k in g else "–")
            boot = f"{g['bootstrap'][0] / 2**20:.1f} MiB, {g['bootstrap'][1]}" if "bootstrap" in g else "–"
            out.append(f"| {t / 60:.1f} | {cell('decoder')} | {cell('prefiller')} | {boot} |")
    if s["violations"]:
        out += ["", "Violations:", ""] + [f"- {v}" for v in s["violations"][:50]]
    return "\n".join(out) + "\n"


def read_samples(path):
    rows = []
    with open(path) as f:
        next(f)
        for line in f:
            t, name, kind, rss, fds = line.rstrip("\n").split(",")
            rows.append((float(t), name, kind, int(rss), int(fds)))
    return rows


def plot(samples, warmup, title):
    """An SVG of resident memory over time: the bootstrap server, the sum over prefillers, the sum over
    decoders (each sample instant), and the open fds of all processes on a second axis."""
    times = sorted(set(round(t, 1) for t, *_ in samples))
    if not times:
        return "<svg xmlns='http://www.w3.org/2000/svg'/>"
    groups = {}
    for t, name, kind, rss, fds in samples:
        g = groups.setdefault(round(t, 1), {"bootstrap": 0, "prefiller": 0, "decoder": 0, "fds": 0})
        g[kind] += rss
        g["fds"] += fds
    W, H, L, R, T, B = 900, 380, 70, 70, 40, 50
    tmax = max(times) or 1
    ymax = max(max(g["bootstrap"], g["prefiller"], g["decoder"]) for g in groups.values()) / 2**20 * 1.1 or 1
    fmax = max(g["fds"] for g in groups.values()) * 1.1 or 1
    x = lambda t: L + (W - L - R) * t / tmax
    y = lambda v: H - B - (H - T - B) * v / ymax
    yf = lambda v: H - B - (H - T - B) * v / fmax
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}' font-family='sans-serif' font-size='12'>",
           "<rect width='100%' height='100%' fill='white'/>",
           f"<text x='{L}' y='22' font-size='14'>{title}</text>",
           f"<line x1='{L}' y1='{H - B}' x2='{W - R}' y2='{H - B}' stroke='black'/>",
           f"<line x1='{L}' y1='{T}' x2='{L}' y2='{H - B}' stroke='black'/>",
           f"<line x1='{W - R}' y1='{T}' x2='{W - R}' y2='{H - B}' stroke='#999'/>"]
    for i in range(6):
        v = ymax * i / 5
        out.append(f"<text x='{L - 6}' y='{y(v) + 4:.0f}' text-anchor='end'>{v:.0f}</text>")
        out.append(f"<line x1='{L}' y1='{y(v):.0f}' x2='{W - R}' y2='{y(v):.0f}' stroke='#eee'/>")
        f = fmax * i / 5
        out.append(f"<text x='{W - R + 6}' y='{yf(f) + 4:.0f}' fill='#999'>{f:.0f}</text>")
        t = tmax * i / 5
        out.append(f"<text x='{x(t):.0f}' y='{H - B + 16}' text-anchor='middle'>{t / 60:.1f}</text>")
    out.append(f"<text x='{(L + W - R) / 2}' y='{H - 12}' text-anchor='middle'>minutes since start</text>")
    out.append(f"<text x='16' y='{(T + H - B) / 2}' transform='rotate(-90 16 {(T + H - B) / 2})' text-anchor='middle'>RSS (MiB)</text>")
    out.append(f"<text x='{W - 12}' y='{(T + H - B) / 2}' transform='rotate(90 {W - 12} {(T + H - B) / 2})' text-anchor='middle' fill='#999'>open fds (all processes)</text>")
    out.append(f"<line x1='{x(warmup):.1f}' y1='{T}' x2='{x(warmup):.1f}' y2='{H - B}' stroke='#c90' stroke-dasharray='4 3'/>")
    out.append(f"<text x='{x(warmup) + 4:.1f}' y='{T + 12}' fill='#c90'>warm-up ends</text>")
    series = [("decoder", "#1f77b4", "decoders (sum)"), ("prefiller", "#d62728", "prefillers (sum)"),
              ("bootstrap", "#2ca02c", "bootstrap")]
    ts = sorted(groups)
    for i, (k, colour, label) in enumerate(series):
        pts = " ".join(f"{x(t):.1f},{y(groups[t][k] / 2**20):.1f}" for t in ts)
        out.append(f"<polyline fill='none' stroke='{colour}' stroke-width='1.5' points='{pts}'/>")
        out.append(f"<text x='{L + 10 + 150 * i}' y='{T + 14}' fill='{colour}'>{label}</text>")
    pts = " ".join(f"{x(t):.1f},{yf(groups[t]['fds']):.1f}" for t in ts)
    out.append(f"<polyline fill='none' stroke='#999' stroke-dasharray='2 2' points='{pts}'/>")
    out.append(f"<text x='{L + 460}' y='{T + 14}' fill='#999'>open fds (dashed)</text>")
    out.append("</svg>")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--revision", default="vllm-0.33.0")
    ap.add_argument("--peer", default=os.path.join(ROOT, "target", "debug", "mooncake-peer"))
    ap.add_argument("--prefillers", type=int, default=4)
    ap.add_argument("--decoders", type=int, default=64)
    ap.add_argument("--rate", type=float, default=20.0, help="requests pulled per second (in batches of 1-3)")
    ap.add_argument("--fault-every", type=float, default=3.0, help="mean seconds between faults")
    ap.add_argument("--abort-timeout", type=float, default=8.0, help="the prefillers' abort timeout (s)")
    ap.add_argument("--recv-timeout", type=float, default=12.0, help="the decoders' receive timeout (s)")
    ap.add_argument("--warmup", type=float, default=None, help="seconds (default: a fifth of the run, at most 120)")
    ap.add_argument("--sample-every", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "soak"))
    ap.add_argument("--sabotage", choices=["outcome", "memory"], default=None,
                    help="break the driver's own books once, to prove the accounting catches it (the run must fail)")
    ap.add_argument("--render", metavar="DIR", help="only write DIR/summary.md from DIR/summary.json and DIR/samples.csv")
    a = ap.parse_args()
    if a.render:
        with open(os.path.join(a.render, "summary.json")) as f:
            summary = json.load(f)
        samples = read_samples(os.path.join(a.render, "samples.csv"))
        rejudged = resources_by_kind(judge_resources(samples, a.warmup if a.warmup is not None else 120.0))
        if rejudged != summary["resources"]:
            summary["resources_every_incarnation"] = rejudged
        with open(os.path.join(a.render, "summary.md"), "w") as f:
            f.write(render_markdown(summary, samples))
        return 0
    if a.decoders < 1 or a.prefillers < 1 or a.minutes <= 0:
        ap.error("--decoders, --prefillers and --minutes must be positive")
    if a.warmup is None:
        a.warmup = min(120.0, a.minutes * 60 / 5)
    if not os.access(a.peer, os.X_OK):
        print(f"soak: {a.peer} is not built (cargo build -p mooncake-reference)", file=sys.stderr)
        return 3
    try:
        import zmq  # noqa: F401
    except ImportError:
        print("soak: pyzmq is needed for the rogue peer (.venv: tests/oracle/requirements.txt)", file=sys.stderr)
        return 3
    s = Soak(a)
    try:
        return s.run()
    finally:
        for p in s.incarnation.values():
            if not p.dead:
                p.kill()


if __name__ == "__main__":
    sys.exit(main())
