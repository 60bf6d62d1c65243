#!/usr/bin/env python3
"""vLLM's own Mooncake connector processes against the reference peer (`mooncake-peer`), bytes moved by the real
Mooncake Transfer Engine over TCP (pip mooncake-transfer-engine-non-cuda; vLLM's `mooncake_protocol: tcp`) on
127.0.0.1. Opt-in: scripts/vllm-interop.sh. Every pulled block is checked word for word against the provenance
pattern of conformance/TESTEE.md, which every prefiller (vLLM's: filled by the `fill_provenance` command; ours:
by construction) holds.

The vLLM side is tools/record/peer.py with MOONCAKE_REAL_ENGINE=1: the release's real MooncakeConnectorWorker and
MooncakeBootstrapServer, the real engine, CPU tensors; fakes only for GPU / torch.distributed lookups.
Each pairing prints one line `PASS name — detail` or `FAIL name — why`; exit 0 when every pairing passed.
"""
import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import record  # noqa: E402  (Zygote, Peer, free_port, kill_group)

MODEL = {"block_size": 16, "total_num_kv_heads": 4, "head_size": 8, "num_blocks": 32, "num_layers": 2,
         "abort_timeout_s": 5}
ENGINE_P, ENGINE_D = "engine-prefill-0", "engine-decode-0"
LAYERS = ["model.layers.0.self_attn", "model.layers.1.self_attn"]


def block_len(tp):
    heads = max(1, MODEL["total_num_kv_heads"] // tp)
    return MODEL["block_size"] * heads * MODEL["head_size"] * 2 * 2  # K and V, fp16


def rust_layout(tp, base):
    bl = block_len(tp)
    return {"kv_caches_base_addr": [base, base + 0x1000_0000], "block_lens": [bl, bl], "kv_block_lens": [bl, bl],
            "registered_layer_names": LAYERS, "registered_layer_indices": [0, 1], "registered_group_indices": [0, 0],
            "registered_shared_group_ids": [[0], [0]], "registered_row_offsets": [0, 0],
            "num_blocks": MODEL["num_blocks"]}


def provenance_ok(hexbytes, region, src, mod, add):
    b = bytes.fromhex(hexbytes)
    for k in range(len(b) // 8):
        w = int.from_bytes(b[8 * k:8 * k + 8], "little")
        want = (0x4D43 << 48) | (region << 36) | (src << 16) | (k % mod + add)
        if w != want:
            return f"region {region} word {k}: {w:#x}, expected {want:#x}"
    return None


class Fail(Exception):
    pass


class RustPeer:
    """`mooncake-peer testee`, one JSON command a line (conformance/TESTEE.md)."""

    def __init__(self, binary, log):
        self.log = open(log, "w")
        self.proc = subprocess.Popen([binary, "--log", "info", "testee"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True)
        self.q = queue.Queue()
        threading.Thread(target=lambda: [self.q.put(l) for l in self.proc.stdout], daemon=True).start()
        try:
            self.hello = json.loads(self.q.get(timeout=30))  # the testee's first line (conformance/TESTEE.md)
        except queue.Empty:
            raise Fail(f"mooncake-peer did not start (log {log})")

    def cmd(self, obj, timeout=30):
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()
        try:
            a = json.loads(self.q.get(timeout=timeout))
        except queue.Empty:
            raise Fail(f"mooncake-peer: no answer to {obj['cmd']} within {timeout} s (log {self.log.name})")
        if a.get("ok") is False or "error" in a:
            raise Fail(f"mooncake-peer: {obj['cmd']}: {a}")
        return a

    def stop(self):
        try:
            self.proc.stdin.write(json.dumps({"cmd": "stop"}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=3)
        except Exception:
            pass
        record.kill_group(self.proc.pid)
        self.log.close()


class Run:
    """What record.Peer needs of a scenario run."""

    def __init__(self, zygote, log_dir, name, env):
        self.rec = type("R", (), {"zygote": zygote})()
        self.log_dir = os.path.join(log_dir, name)
        os.makedirs(self.log_dir, exist_ok=True)
        self.fifo_dir = tempfile.mkdtemp(prefix="fifo-", dir=self.log_dir)
        self.peers, self.env = [], env
        self.rust = []

    def vllm(self, role, conn, args=None):
        p = record.Peer(self, role, conn)
        p.wait_ready()
        if role != "bootstrap":
            p.cmd("init", timeout=180, args=args)
        return p

    def stop(self):
        for p in self.peers:
            p.ask_quit()
        for p in self.peers:
            p.stop()
        for r in self.rust:
            r.stop()


def worker_args(role, engine, rank, tp, bootstrap_port):
    return {"kv_role": role, "engine_id": engine, "tp_rank": rank, "tp_size": tp, "rpc_port": 0, "model": MODEL,
            "bootstrap_port": bootstrap_port}


def settle_vllm(d, ids, timeout):
    """Poll a vLLM decoder until each id is finished or failed."""
    done, failed = set(), set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not set(ids) <= done | failed:
        r = d.cmd("poll")
        done |= set(r["recving"])
        failed |= set(r["failed"])
        time.sleep(0.05)
    return done, failed


def settle_rust(d, ids, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = d.cmd({"cmd": "status"})
        done = set(s.get("finished", []))
        failed = {f["d_req_id"] for f in s.get("failed", [])}
        if set(ids) <= done | failed:
            return done, failed
        time.sleep(0.05)
    return set(), set()


def pairing(ctx, name, p_kind, d_kind, b_kind, p_tp=1, d_tp=1, layout_miss=False):
    """One pairing: bootstrap, prefiller rank(s), decoder rank(s); pull blocks, check every word."""
    run = Run(ctx.zygote, ctx.log_dir, name, {})
    try:
        port = record.free_port()
        url = f"http://127.0.0.1:{port}"
        if b_kind == "vllm":
            boot = run.vllm("bootstrap", "bootstrap")
            boot.cmd("init", args={"port": port})
        else:
            rb = RustPeer(ctx.binary, os.path.join(run.log_dir, "bootstrap-rust.log"))
            run.rust.append(rb)
            rb.cmd({"cmd": "start", "role": "bootstrap", "revision": "vllm-0.33.0",
                    "config": {"bind": f"127.0.0.1:{port}"}})
        transfers = [("p-req-1", "xfer-1", [[3, 4, 5]]), ("p-req-2", "xfer-2", [[9, 10]])]
        pulls = [("d-req-1", "xfer-1", [[7, 8, 9]]), ("d-req-2", "xfer-2", [[20, 21]])]
        # Prefillers: every rank registers, fills, allocates and readies.
        prefillers = []
        for r in range(p_tp):
            if p_kind == "vllm":
                p = run.vllm("prefiller", f"prefiller{r}", worker_args("kv_producer", ENGINE_P, r, p_tp, port))
                p.cmd("register", timeout=40, limit=30)
                p.cmd("fill_provenance")
                p.cmd("send_reqs", reqs=[[a, b, []] for a, b, _ in transfers])
                p.cmd("send_reqs", reqs=[list(t) for t in transfers])
            else:
                p = RustPeer(ctx.binary, os.path.join(run.log_dir, f"prefiller{r}-rust.log"))
                run.rust.append(p)
                p.cmd({"cmd": "start", "role": "prefiller", "revision": "vllm-0.33.0", "config": {
                    "engine_id": ENGINE_P, "tp_rank": r, "tp_size": p_tp, "bootstrap": url,
                    "abort_timeout_s": MODEL["abort_timeout_s"], "model": {"total_num_kv_heads": 4},
                    "layout": rust_layout(p_tp, 0x5000_0000_0000 + r * 0x1_0000_0000)}})
                for a, b, blocks in transfers:
                    p.cmd({"cmd": "allocate", "p_req_id": a, "transfer_id": b})
                    p.cmd({"cmd": "ready", "p_req_id": a, "transfer_id": b, "blocks": blocks})
            prefillers.append(p)
        # Decoders: each rank pulls every request (vLLM's decoders with TP > 1 do).
        rounds = [pulls[:1], pulls[1:]] if layout_miss else [pulls]
        problems, moved = [], 0
        decoders = []
        for r in range(d_tp):
            if d_kind == "vllm":
                d = run.vllm("decoder", f"decoder{r}", worker_args("kv_consumer", ENGINE_D, r, d_tp, port))
                d.cmd("register", timeout=40, limit=30)
            else:
                d = RustPeer(ctx.binary, os.path.join(run.log_dir, f"decoder{r}-rust.log"))
                run.rust.append(d)
                d.cmd({"cmd": "start", "role": "decoder", "revision": "vllm-0.33.0", "config": {
                    "hostname": "127.0.0.1", "tp_rank": r, "tp_size": d_tp, "layout_id": 0x1234567 | 1,
                    "record_wire": True,
                    "abort_timeout_s": MODEL["abort_timeout_s"],
                    "layout": rust_layout(d_tp, 0x6000_0000_0000 + r * 0x1_0000_0000)}})
            decoders.append(d)
        for k, batch in enumerate(rounds):
            if layout_miss and k > 0:
                # The prefiller forgets the decoders' layouts: the next layout-less pull is answered LAYOUT_MISS,
                # the decoder sends its layout again and the pull completes.
                for p in prefillers:
                    if p_kind == "vllm":
                        p.cmd("forget_layouts")
                    else:
                        p.cmd({"cmd": "forget_layouts"})
            for r, d in enumerate(decoders):
                ids = [a for a, _, _ in batch]
                if d_kind == "vllm":
                    d.cmd("pull", reqs=[list(x) for x in batch], bootstrap_addr=url, remote_engine_id=ENGINE_P)
                    done, failed = settle_vllm(d, ids, MODEL["abort_timeout_s"] + 10)
                else:
                    d.cmd({"cmd": "pull", "requests": [{"d_req_id": a, "transfer_id": b, "blocks": bl,
                                                        "engine_id": ENGINE_P, "bootstrap_addr": url}
                                                       for a, b, bl in batch]})
                    done, failed = settle_rust(d, ids, MODEL["abort_timeout_s"] + 10)
                if set(ids) - done:
                    raise Fail(f"decoder {r}: finished {sorted(done)}, failed {sorted(failed)} of {ids}")
                # Every word of every pulled block: the source block's provenance.
                for (_, xfer, dblocks) in batch:
                    sblocks = next(bl for _, x, bl in transfers if x == xfer)[0]
                    # Heterogeneous TP (heads split across ranks, heads outermost in a block): with more prefiller
                    # ranks a decoder block is their blocks side by side (word k = source word k mod the rank's
                    # block); with more decoder ranks, rank r's block is slice r of the prefiller's block.
                    dw, pw = block_len(d_tp) // 8, block_len(p_tp) // 8
                    mod, add = (pw, 0) if p_tp >= d_tp else (dw, (r % (d_tp // p_tp)) * dw)
                    pairs = [[i, b, s, mod, add] for i in range(2) for b, s in zip(dblocks[0][-len(sblocks):], sblocks)]
                    if d_kind == "vllm":
                        problems += d.cmd("check_blocks", pairs=pairs)
                    else:
                        base = rust_layout(d_tp, 0x6000_0000_0000 + r * 0x1_0000_0000)["kv_caches_base_addr"]
                        bl = block_len(d_tp)
                        for i, b, s, mod, add in pairs:
                            h = d.cmd({"cmd": "read_memory", "addr": base[i] + b * bl, "len": bl})["hex"]
                            why = provenance_ok(h, i, s, mod, add)
                            if why:
                                problems.append(f"block {b}: {why}")
                    moved += len(pairs)
        if problems:
            raise Fail(f"{len(problems)} blocks wrong, first: {problems[0]}")
        # Replies each decoder received: one FINISH per pull; with the forgotten layout, the second pull gets
        # LAYOUT_MISS first and then, re-sent with the layout, its FINISH.
        want = (len(rounds) + (1 if layout_miss else 0)) * max(1, p_tp // d_tp)
        for r, d in enumerate(decoders):
            if d_kind == "vllm":
                got = d.cmd("replies")
            else:
                got = sum(1 for e in d.cmd({"cmd": "status"}).get("wire", []) if e["dir"] == "in")
            if got != want:
                raise Fail(f"decoder {r} received {got} replies, expected {want}"
                           + (" (FINISH, LAYOUT_MISS, FINISH)" if layout_miss else ""))
        note = f"{moved} blocks checked word for word, {want} replies per decoder"
        print(f"PASS {name} — {note}", flush=True)
        return True
    except (Fail, record.RecordError) as e:
        print(f"FAIL {name} — {e} (logs: {run.log_dir})", flush=True)
        return False
    finally:
        run.stop()


def query(url):
    import urllib.request

    with urllib.request.urlopen(url + "/query", timeout=5) as r:
        return json.loads(r.read())


def replay_peer(ctx, name):
    """`mooncake-conformance replay --play decoder --peer` against vLLM's prefiller: the recorded decoder pulls,
    the bytes land in the runner's memory through vLLM's engine and are checked through that engine."""
    run = Run(ctx.zygote, ctx.log_dir, name, {})
    try:
        port = record.free_port()
        url = f"http://127.0.0.1:{port}"
        boot = run.vllm("bootstrap", "bootstrap")
        boot.cmd("init", args={"port": port})
        p = run.vllm("prefiller", "prefiller0", worker_args("kv_producer", ENGINE_P, 0, 1, port))
        p.cmd("register", timeout=40, limit=30)
        p.cmd("fill_provenance")
        p.cmd("send_reqs", reqs=[["p-req-1", "xfer-1", []]])
        p.cmd("send_reqs", reqs=[["p-req-1", "xfer-1", [[3, 4, 5]]]])
        table = json.dumps(query(url))
        ep = next(x for x in table.replace('"', " ").split() if x.startswith("tcp://"))
        out = subprocess.run([ctx.cli, "replay", "--play", "decoder", "--peer", ep, "--format", "json",
                              ctx.trace], capture_output=True, text=True, timeout=120)
        rep = json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}
        cases = rep.get("cases") or rep.get("results") or []
        notes = [n for c in cases for n in c.get("notes", [])]
        if out.returncode != 0:
            raise Fail(f"exit {out.returncode}: {out.stdout[-1500:]} {out.stderr[-500:]}")
        if any("landed bytes" in n for n in notes):
            raise Fail(f"landed bytes were not checked: {notes}")
        print(f"PASS {name} — replay --play decoder --peer <vLLM prefiller>: exit 0, landed bytes checked through vLLM's engine ({len(cases)} case)", flush=True)
        return True
    except (Fail, record.RecordError, subprocess.TimeoutExpired, StopIteration) as e:
        print(f"FAIL {name} — {e!r} (logs: {run.log_dir})", flush=True)
        return False
    finally:
        run.stop()


def replay_listen(ctx, name):
    """`mooncake-conformance replay --play prefiller --listen` with vLLM's decoder pulling from the runner."""
    run = Run(ctx.zygote, ctx.log_dir, name, {})
    proc = None
    try:
        bport, zport = record.free_port(), record.free_port()
        proc = subprocess.Popen([ctx.cli, "replay", "--play", "prefiller", "--listen", f"tcp://127.0.0.1:{zport}",
                                 "--bootstrap-bind", f"127.0.0.1:{bport}", "--timeout", "60", ctx.trace],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        url = f"http://127.0.0.1:{bport}"
        for _ in range(300):
            try:
                if query(url):
                    break
            except OSError:
                pass
            time.sleep(0.1)
        d = run.vllm("decoder", "decoder0", worker_args("kv_consumer", ENGINE_D, 0, 1, bport))
        d.cmd("register", timeout=40, limit=30)
        d.cmd("pull", reqs=[["d-req-1", "xfer-1", [[3, 4, 5]]]], bootstrap_addr=url, remote_engine_id=ENGINE_P)
        done, failed = settle_vllm(d, ["d-req-1"], MODEL["abort_timeout_s"] + 10)
        problems = d.cmd("check_blocks", pairs=[[i, b, b, 256, 0] for i in range(2) for b in (3, 4, 5)])
        out, err = proc.communicate(timeout=90)
        if proc.returncode != 0:
            raise Fail(f"exit {proc.returncode}: {out[-1500:]} {err[-500:]}")
        if "d-req-1" not in done or problems:
            raise Fail(f"vLLM's decoder: finished {sorted(done)}, failed {sorted(failed)}, {problems[:1]}")
        print(f"PASS {name} — replay --play prefiller --listen, vLLM decoder pulling: exit 0; vLLM's decoder finished d-req-1, 6 blocks checked word for word", flush=True)
        return True
    except (Fail, record.RecordError, subprocess.TimeoutExpired) as e:
        print(f"FAIL {name} — {e!r} (logs: {run.log_dir})", flush=True)
        return False
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        run.stop()


def probe_env():
    env = dict(os.environ, VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=str(MODEL["abort_timeout_s"]), VLLM_HOST_IP="127.0.0.1",
               VLLM_TARGET_DEVICE="cpu", CUDA_VISIBLE_DEVICES="", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", GLOG_minloglevel="1")
    env.pop("MOONCAKE_REAL_ENGINE", None)  # no bytes move: the recorder's fake engine
    return env


def release_path(a, rel):
    """PYTHONPATH entries that make the recorder environment import vLLM `rel`: nothing for its own release, else
    the release's package installed --no-deps under the recorder cache (scripts/record.sh makes them); None when
    absent."""
    if rel == a.env_release:
        return [HERE]
    overlay = os.path.join(a.record_cache, f"vllm-{rel}")
    return [overlay, HERE] if os.path.isfile(os.path.join(overlay, ".complete")) else None


def probe_verdict(name, ok, text, what):
    """Prints the probe's table and the pairing's verdict line (PASS only when every worker was as expected)."""
    print(text.stdout, end="", flush=True)
    verdict = f"PASS {name} — {what}" if ok else f"FAIL {name} — expected {what}"
    print(f"{verdict}; probe exit {text.returncode}", flush=True)
    return ok


def probe_deployment(a, log_dir, name, instances, decoder=None):
    """Starts each prefill instance (engine id, vLLM release, TP size, kv_lease_duration, the (revision, leases)
    probe must report) with its release's own MooncakeBootstrapServer, runs one `mooncake-conformance probe` over
    all of them and checks that each worker is reported as exactly its release. Returns (ok, table text)."""
    zygotes, runs, urls, want = {}, [], [], {}
    try:
        for inst, rel, tp, lease, expect in instances:
            if rel not in zygotes:
                zdir = os.path.join(log_dir, f"{name}-zygote-{rel}")
                os.makedirs(zdir, exist_ok=True)
                z = record.Zygote(a.python, dict(probe_env(), PYTHONPATH=os.pathsep.join(release_path(a, rel))), zdir)
                zygotes[rel] = z
                got = z.wait_ready()["vllm_version"]
                if got != rel:
                    raise Fail(f"the {rel} zygote imports vLLM {got}")
            port = record.free_port()
            # Releases before `bootstrap_server_address` find their server through the environment.
            run = Run(zygotes[rel], log_dir, f"{name}-{inst}", {"VLLM_MOONCAKE_BOOTSTRAP_PORT": str(port)})
            runs.append(run)
            run.vllm("bootstrap", "bootstrap").cmd("init", args={"port": port})
            for r in range(tp):
                args = worker_args("kv_producer", inst, r, tp, port)
                if lease is not None:
                    args["kv_lease_s"] = lease
                run.vllm("prefiller", f"prefiller{r}", args).cmd("register", timeout=40, limit=30)
            urls.append(f"http://127.0.0.1:{port}")
            want[inst] = expect
        cmd = [a.cli, "probe", "--timeout", "3"] + (["--decoder-revision", decoder] if decoder else [])
        for u in urls:
            cmd += ["--bootstrap", u]
        text = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        rep = json.loads(subprocess.run(cmd + ["--json"], capture_output=True, text=True, timeout=300).stdout)
        for w in rep["workers"]:
            ids = {(i["revision"], i["leases"]) for i in (w.get("identification") or {}).get("identities", [])}
            expect = want[w["worker"]["engine_id"]]
            # identify() returns every identity that answers as the worker did: holding the expected one, it is
            # exactly that one's class (conformance/tests/suite/probe.rs: classes are the revisions of one wire).
            if expect not in ids:
                raise Fail(f"{w['worker']['engine_id']} tp {w['worker']['tp_rank']}: probe says {sorted(ids)}, "
                           f"expected {expect}")
        workers = sum(tp for _, _, tp, _, _ in instances)
        if len(rep["workers"]) != workers:
            raise Fail(f"{len(rep['workers'])} workers in the probe's tables, expected {workers}: {text.stdout}")
        return True, text
    finally:
        for run in runs:
            run.stop()
        for z in zygotes.values():
            z.stop()


def probe_mixed(a, log_dir):
    """`mooncake-conformance probe` against vLLM's own processes: a vLLM 0.33.0 prefill instance (TP 2) and two
    vLLM 0.34.0 ones (kv_lease_duration unset, and 30 s), each with its release's own MooncakeBootstrapServer, all
    asked in one probe with --decoder-revision 0.33.0. The table is printed (README, "Probe a running
    deployment")."""
    name = "probe-mixed-0.33.0-0.34.0"
    if release_path(a, "0.34.0") is None:
        print(f"SKIPPED: {name} — no vLLM 0.34.0 package under {a.record_cache} (scripts/vllm-interop.sh installs it)",
              flush=True)
        return True
    instances = [("prefill-a", "0.33.0", 2, None, ("vllm-0.33.0", None)),
                 ("prefill-b", "0.34.0", 1, None, ("vllm-0.34.0", False)),
                 ("prefill-c", "0.34.0", 1, 30, ("vllm-0.34.0", True))]
    try:
        ok, text = probe_deployment(a, log_dir, name, instances, decoder="0.33.0")
        return probe_verdict(name, ok, text, "4 workers of vLLM's own 0.33.0 and 0.34.0 processes, each reported as "
                             "its release (0.34.0 with leases off and on)")
    except (Fail, record.RecordError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
        print(f"FAIL {name} — {e!r} (logs: {log_dir})", flush=True)
        return False


# The first release of each generation-2 spec revision (the recorder's releases).
PROBE_RELEASES = {"0.16.0": "vllm-0.16.0..0.18.1", "0.19.0": "vllm-0.19.0..0.19.1", "0.20.0": "vllm-0.20.0..0.23.0",
                  "0.24.0": "vllm-0.24.0", "0.25.0": "vllm-0.25.0..0.25.1", "0.28.0": "vllm-0.26.0..0.28.0",
                  "0.29.0": "vllm-0.29.0", "0.30.0": "vllm-0.30.0", "0.31.0": "vllm-0.31.0", "0.32.0": "vllm-0.32.0",
                  "0.33.0": "vllm-0.33.0", "0.34.0": "vllm-0.34.0"}


def probe_releases(a, log_dir):
    """One prefill instance of every generation-2 release the recorder cache holds, vLLM's own processes, each with
    its own bootstrap server; one probe over all: each worker's range holds its release's revision."""
    name = "probe-releases"
    have = [r for r in PROBE_RELEASES if release_path(a, r) is not None]
    for r in PROBE_RELEASES:
        if r not in have:
            print(f"SKIPPED: {name} {r} — no vLLM {r} package under {a.record_cache} (scripts/record.sh --release {r} "
                  f"installs it)", flush=True)
    instances = [(f"p-{r}", r, 1, None, (PROBE_RELEASES[r], False if r == "0.34.0" else None)) for r in have]
    try:
        ok, text = probe_deployment(a, log_dir, name, instances)
        return probe_verdict(name, ok, text, f"vLLM's own prefillers of {len(have)} releases ({', '.join(have)}), "
                             "each in a range holding its revision and no other wire")
    except (Fail, record.RecordError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
        print(f"FAIL {name} — {e!r} (logs: {log_dir})", flush=True)
        return False


PAIRINGS = {
    "vllm-prefiller->vllm-decoder": dict(p_kind="vllm", d_kind="vllm", b_kind="vllm"),
    "rust-prefiller->vllm-decoder": dict(p_kind="rust", d_kind="vllm", b_kind="vllm"),
    "vllm-prefiller->rust-decoder": dict(p_kind="vllm", d_kind="rust", b_kind="vllm"),
    "rust-bootstrap+vllm-pair": dict(p_kind="vllm", d_kind="vllm", b_kind="rust"),
    "layout-miss:rust-prefiller->vllm-decoder": dict(p_kind="rust", d_kind="vllm", b_kind="vllm", layout_miss=True),
    "layout-miss:vllm-prefiller->rust-decoder": dict(p_kind="vllm", d_kind="rust", b_kind="vllm", layout_miss=True),
    "hetero-tp:rust-prefiller-tp2->vllm-decoder-tp1": dict(p_kind="rust", d_kind="vllm", b_kind="vllm", p_tp=2),
    "hetero-tp:vllm-prefiller-tp1->rust-decoder-tp2": dict(p_kind="vllm", d_kind="rust", b_kind="vllm", d_tp=2),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter with vLLM and the engine installed")
    ap.add_argument("--peer", required=True, help="the mooncake-peer binary")
    ap.add_argument("--cli", required=True, help="the mooncake-conformance binary")
    ap.add_argument("--only", action="append", default=[], help="run only this pairing (repeatable)")
    ap.add_argument("--log-dir", default=None)
    ap.add_argument("--record-cache", default=os.environ.get("MOONCAKE_RECORD_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "mooncake-wire", "record"),
                    help="the recorder cache: other releases' vLLM packages, installed --no-deps, for the probe entries")
    a = ap.parse_args()
    log_dir = a.log_dir or os.path.join("/tmp", f"mooncake-interop-logs-{os.getpid()}")
    os.makedirs(log_dir, exist_ok=True)
    a.env_release = subprocess.run([a.python, "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
                                   capture_output=True, text=True).stdout.strip()
    ok = True
    for entry, f in (("probe-mixed", probe_mixed), ("probe-releases", probe_releases)):
        if not a.only or entry in a.only:
            ok &= f(a, log_dir)
    if a.only and all(x.startswith("probe-") for x in a.only):
        sys.exit(0 if ok else 1)
    env = dict(os.environ, PYTHONPATH=HERE, MOONCAKE_REAL_ENGINE="1",
               VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=str(MODEL["abort_timeout_s"]), VLLM_HOST_IP="127.0.0.1",
               VLLM_TARGET_DEVICE="cpu", CUDA_VISIBLE_DEVICES="", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", GLOG_minloglevel="1")
    zygote = record.Zygote(a.python, env, log_dir)
    try:
        info = zygote.wait_ready()
        print(f"== vLLM {info['vllm_version']} (real MooncakeConnector, real Transfer Engine over TCP); logs in {log_dir}",
              flush=True)
        trace = os.path.join(HERE, "..", "..", "conformance", "traces", "vllm-0.33.0", "a_single_success.jsonl")
        ctx = type("C", (), {"zygote": zygote, "log_dir": log_dir, "binary": a.peer, "cli": a.cli,
                             "trace": os.path.abspath(trace)})()
        for name, kw in PAIRINGS.items():
            if a.only and name not in a.only:
                continue
            ok &= pairing(ctx, name, **kw)
        for name, f in (("replay-peer", replay_peer), ("replay-listen", replay_listen)):
            if a.only and name not in a.only:
                continue
            ok &= f(ctx, name)
    finally:
        zygote.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
