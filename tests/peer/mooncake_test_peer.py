#!/usr/bin/env python3
"""Independent Python peer for vLLM's Mooncake push protocol (revisions vllm-0.32.0 and vllm-0.33.0).

It is the cross-implementation counterpart of the Rust reference peer and a testee for
`mooncake-conformance run --testee`: it speaks the control protocol of conformance/TESTEE.md (one JSON
object per line on stdin/stdout, logs on stderr) and takes one role per process: `bootstrap`, `prefiller` or
`decoder`. Everything it knows about vLLM was written here from the protocol reference and the released vLLM
sources; nothing is imported from the Rust side or from tests/oracle.

Dependencies: Python 3.11 standard library, msgspec 0.23.0, pyzmq 27.3.0 (tests/oracle/requirements.txt).
Log level: environment variable MOONCAKE_PEER_LOG (default WARNING).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peer_http  # noqa: E402
from peer_wire import REVISIONS, Unsupported  # noqa: E402

NAME = "mooncake-test-peer (python) 0.1.0"
PROTOCOL = 1
ROLES = ["prefiller", "decoder", "bootstrap"]
COMMAND_TIMEOUT_S = 120.0
MAX_LINE_BYTES = 256 * 1024 * 1024

log = logging.getLogger("peer")


class LoopThread:
    """An asyncio loop on its own thread; the control loop hands coroutines to it."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="peer-loop", daemon=True)
        self.thread.start()

    def run(self, coro, timeout=COMMAND_TIMEOUT_S):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class BootstrapRole:
    def __init__(self, config: dict):
        bind = str(config.get("bind") or "127.0.0.1:0")
        host, _, port = bind.rpartition(":")
        self.server = peer_http.BootstrapServer(host.strip("[]") or "127.0.0.1", int(port or 0))

    def start(self) -> dict:
        self.server.start()
        return {"url": self.server.url}

    def handle(self, cmd: dict) -> dict:
        if cmd.get("cmd") == "status":
            return {"table": self.server.httpd.registry.table()}
        raise Unsupported(f"unsupported: {cmd.get('cmd')}")

    def stop(self):
        self.server.stop()


class AsyncRole:
    """A prefiller or decoder living on the loop thread."""

    def __init__(self, kind: str, rev, config: dict):
        self.lt = LoopThread()
        if kind == "prefiller":
            from peer_prefiller import Prefiller as cls
        else:
            from peer_decoder import Decoder as cls

        async def make():
            return cls(rev, config)

        try:
            self.role = self.lt.run(make())
        except BaseException:
            self.lt.close()
            raise

    def start(self) -> dict:
        return self.lt.run(self.role.start())

    def handle(self, cmd: dict) -> dict:
        return self.lt.run(self.role.handle(cmd))

    def stop(self):
        try:
            self.lt.run(self.role.stop(), timeout=10)
        finally:
            self.lt.close()


def make_role(cmd: dict):
    role = cmd.get("role")
    rev_name = cmd.get("revision", "vllm-0.33.0")
    if role not in ROLES:
        raise Unsupported(f"unsupported: role {role}")
    rev = REVISIONS.get(rev_name)
    if rev is None:
        raise Unsupported(f"unsupported: revision {rev_name}")
    config = cmd.get("config") or {}
    if role == "bootstrap":
        return BootstrapRole(config)
    return AsyncRole(role, rev, config)


def main() -> int:
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("MOONCAKE_PEER_LOG", "WARNING").upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing but protocol lines may reach the real stdout

    def send(obj):
        out.write(json.dumps(obj, separators=(",", ":")) + "\n")
        out.flush()

    send({"hello": "mooncake-testee", "protocol": PROTOCOL, "name": NAME, "revisions": sorted(REVISIONS),
          "roles": ROLES})
    role = None
    try:
        while True:
            line = sys.stdin.buffer.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            if not line.strip():
                continue
            try:
                cmd = json.loads(line)
                if not isinstance(cmd, dict):
                    raise ValueError("a command is a JSON object")
            except ValueError as e:
                send({"ok": False, "error": f"bad command line: {e}"})
                continue
            name = cmd.get("cmd")
            if name == "stop":
                send({"ok": True})
                break
            try:
                if name == "start":
                    if role is not None:
                        raise RuntimeError("a role is already started")
                    new = make_role(cmd)
                    try:
                        answer = new.start()
                    except BaseException:
                        new.stop()
                        raise
                    role = new
                elif role is None:
                    raise Unsupported(f"unsupported: {name}" if name not in (
                        "allocate", "ready", "abort", "forget_layouts", "fail_next_transfer", "status", "pull",
                        "read_memory") else f"no role started for {name}")
                else:
                    answer = role.handle(cmd)
                send({"ok": True, **answer})
            except Unsupported as e:
                send({"ok": False, "error": e.args[0] if e.args else str(e)})
            except Exception as e:  # noqa: BLE001 - every failure is an answer, never a crash
                log.debug("command %s failed", name, exc_info=True)
                send({"ok": False, "error": f"{type(e).__name__}: {e}"})
    finally:
        if role is not None:
            try:
                role.stop()
            except Exception:  # noqa: BLE001
                log.exception("stop failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
