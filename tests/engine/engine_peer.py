"""A real Mooncake Transfer Engine (pip mooncake-transfer-engine-non-cuda) in P2P-handshake mode over TCP,
driven by one JSON object per line on standard input; one JSON answer per line on standard output.

Used by reference-impl/tests/suite/engine_interop.rs and bench/engine-throughput: the Rust transport against the
real engine, both directions. Memory is host memory (ctypes buffers) registered with the engine.

Commands: init, alloc {len, seed?}, write/read {target, local, remote, len}, batch_write/batch_read
{target, locals, remotes, lens}, hex {addr, len}, sha256 {addr, len}, fill {addr, len, seed}, quit.
Pattern of seed s: byte i of a buffer is (7 * (i % 251) + s) % 256 (the Rust tests compute the same).
"""
import ctypes
import hashlib
import json
import sys
import time


def pattern(n, seed):
    unit = bytes((7 * j + seed) % 256 for j in range(251))
    return (unit * (n // 251 + 1))[:n]


def main():
    from mooncake.engine import TransferEngine

    eng = TransferEngine()
    bufs = []
    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        m = json.loads(line)
        cmd = m["cmd"]
        r = {}
        try:
            if cmd == "init":
                rc = eng.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
                port = eng.get_rpc_port()
                r = {"rc": rc, "rpc_port": port, "session": f"127.0.0.1:{port}"}
            elif cmd == "alloc":
                n = m["len"]
                b = ctypes.create_string_buffer(n)
                if "seed" in m:
                    ctypes.memmove(b, pattern(n, m["seed"]), n)
                bufs.append(b)
                addr = ctypes.addressof(b)
                r = {"addr": addr, "rc": eng.register_memory(addr, n)}
            elif cmd == "fill":
                ctypes.memmove(m["addr"], pattern(m["len"], m["seed"]), m["len"])
            elif cmd in ("write", "read"):
                f = eng.transfer_sync_write if cmd == "write" else eng.transfer_sync_read
                t = time.perf_counter()
                rc = f(m["target"], m["local"], m["remote"], m["len"])
                r = {"rc": rc, "secs": time.perf_counter() - t}
            elif cmd in ("batch_write", "batch_read"):
                f = eng.batch_transfer_sync_write if cmd == "batch_write" else eng.batch_transfer_sync_read
                t = time.perf_counter()
                rc = f(m["target"], m["locals"], m["remotes"], m["lens"])
                r = {"rc": rc, "secs": time.perf_counter() - t}
            elif cmd == "hex":
                r = {"hex": ctypes.string_at(m["addr"], m["len"]).hex()}
            elif cmd == "sha256":
                r = {"sha256": hashlib.sha256(ctypes.string_at(m["addr"], m["len"])).hexdigest()}
            elif cmd == "quit":
                out.write(json.dumps({"ok": True}) + "\n")
                out.flush()
                return
            else:
                r = {"error": f"unknown command {cmd}"}
        except Exception as e:  # answered, so the driver sees it
            r = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(r) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
