"""Bootstrap HTTP: vLLM's registry server (`/register`, `/query`) and the two client calls, stdlib only.

Server semantics follow vLLM 0.31.0+ `MooncakeBootstrapServer` (kv_connector/v1/mooncake/mooncake_utils.py;
spec/PROTOCOL.md#bootstrap): state `dp_rank -> {engine_id, worker_addr: {tp_rank: {pp_rank: addr}}}` in insertion
order; an identical re-registration is accepted; an engine-id or address conflict is a 400 whose `detail`
texts are wire facts; a body that does not validate as `RegisterWorkerPayload` is a 422 shaped like FastAPI's
validation errors. Responses are compact JSON like Starlette's `JSONResponse`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger("peer.http")

MAX_BODY_BYTES = 1024 * 1024
CONNECTOR_TIMEOUT_S = 30.0  # VLLM_MOONCAKE_CONNECTOR_TIMEOUT
ATTEMPTS = 3  # registration and query attempts on connection errors


def dumps(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


# --------------------------------------------------------------------------------------------------------
# Validation of the register payload (pydantic lax mode: ints accept integral floats, bools and numeric
# strings; strings accept only strings)

FIELDS = (("engine_id", str), ("dp_rank", int), ("tp_rank", int), ("pp_rank", int), ("addr", str))


def _as_int(v):
    if isinstance(v, bool):
        return int(v), None
    if isinstance(v, int):
        return v, None
    if isinstance(v, float):
        if v.is_integer():
            return int(v), None
        return None, ("int_from_float", "Input should be a valid integer, got a number with a fractional part")
    if isinstance(v, str):
        try:
            return int(v.strip()), None
        except ValueError:
            return None, ("int_parsing", "Input should be a valid integer, unable to parse string as an integer")
    return None, ("int_type", "Input should be a valid integer")


def _is_json_type(content_type) -> bool:
    if not content_type:
        return True  # FastAPI parses a body without content-type as JSON
    main, _, sub = content_type.split(";", 1)[0].strip().lower().partition("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


def validate_register(raw: bytes, content_type=None):
    """(payload dict, None) or (None, FastAPI-style error list)."""
    if not raw:
        return None, [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
    if not _is_json_type(content_type):
        return None, [{"type": "model_attributes_type", "loc": ["body"],
                       "msg": "Input should be a valid dictionary or object to extract fields from",
                       "input": raw.decode("utf-8", "replace")}]
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        pos = getattr(e, "pos", 0)
        return None, [{"type": "json_invalid", "loc": ["body", pos], "msg": "JSON decode error",
                       "input": {}, "ctx": {"error": getattr(e, "msg", str(e))}}]
    if not isinstance(body, dict):
        return None, [{"type": "model_attributes_type", "loc": ["body"],
                       "msg": "Input should be a valid dictionary or object to extract fields from", "input": body}]
    out, errors = {}, []
    for name, kind in FIELDS:
        if name not in body:
            errors.append({"type": "missing", "loc": ["body", name], "msg": "Field required", "input": body})
            continue
        v = body[name]
        if kind is str:
            if isinstance(v, str):
                out[name] = v
            else:
                errors.append({"type": "string_type", "loc": ["body", name], "msg": "Input should be a valid string", "input": v})
        else:
            iv, err = _as_int(v)
            if err is None:
                out[name] = iv
            else:
                errors.append({"type": err[0], "loc": ["body", name], "msg": err[1], "input": v})
    return (None, errors) if errors else (out, None)


class Registry:
    def __init__(self):
        self.lock = threading.Lock()
        self.workers: dict = {}  # dp_rank -> {"engine_id": str, "worker_addr": {tp: {pp: addr}}}

    def register(self, p: dict):
        """(status, body)"""
        with self.lock:
            entry = self.workers.setdefault(p["dp_rank"], {"engine_id": p["engine_id"], "worker_addr": {}})
            if entry["engine_id"] != p["engine_id"]:
                return 400, {"detail": f"Engine ID mismatch for dp_rank={p['dp_rank']}: "
                                       f"expected {entry['engine_id']}, got {p['engine_id']}"}
            slots = entry["worker_addr"].setdefault(p["tp_rank"], {})
            old = slots.get(p["pp_rank"])
            if old is not None:
                if old == p["addr"]:
                    return 200, {"status": "ok"}
                return 400, {"detail": f"Worker with dp_rank={p['dp_rank']}, tp_rank={p['tp_rank']}, "
                                       f"pp_rank={p['pp_rank']} is already registered at {old}, "
                                       f"but still want to register at {p['addr']}"}
            slots[p["pp_rank"]] = p["addr"]
            return 200, {"status": "ok"}

    def table(self) -> dict:
        with self.lock:
            return {
                str(dp): {"engine_id": e["engine_id"],
                          "worker_addr": {str(tp): {str(pp): a for pp, a in pps.items()}
                                          for tp, pps in e["worker_addr"].items()}}
                for dp, e in self.workers.items()
            }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mooncake-test-peer"
    sys_version = ""

    def log_message(self, fmt, *args):
        log.debug("%s " + fmt, self.address_string(), *args)

    def _reply(self, status: int, body, extra=()):
        data = b"" if body is None else dumps(body)
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self):
        n = self.headers.get("content-length")
        if n is None:
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                self.close_connection = True
                return None
            return b""
        try:
            n = int(n)
        except ValueError:
            n = -1
        if n < 0 or n > MAX_BODY_BYTES:
            self.close_connection = True
            return None
        return self.rfile.read(n)

    def _route(self, method: str):
        path = self.path.split("?", 1)[0]
        routes = {"/register": "POST", "/query": "GET"}
        if path.endswith("/") and path[:-1] in routes:
            self._read_body()
            self._reply(307, None, (("location", path[:-1]),))
            return
        if path not in routes:
            self._read_body()
            self._reply(404, {"detail": "Not Found"})
            return
        if routes[path] != method:
            self._read_body()
            self._reply(405, {"detail": "Method Not Allowed"}, (("allow", routes[path]),))
            return
        raw = self._read_body()
        if raw is None:
            self._reply(413, {"detail": "Request body too large or unreadable"})
            return
        if path == "/query":
            self._reply(200, self.server.registry.table())
            return
        payload, errors = validate_register(raw, self.headers.get("content-type"))
        if errors:
            self._reply(422, {"detail": errors})
            return
        status, body = self.server.registry.register(payload)
        self._reply(status, body)

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_PUT(self):
        self._route("PUT")

    def do_DELETE(self):
        self._route("DELETE")


class BootstrapServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.httpd = ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.registry = Registry()
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                       name="bootstrap-http", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


# --------------------------------------------------------------------------------------------------------
# Clients (blocking; callers run them off the event loop)


def _connect_failure(e: Exception) -> bool:
    return isinstance(e, (urllib.error.URLError, TimeoutError, ConnectionError)) and not isinstance(
        e, urllib.error.HTTPError)


def register(bootstrap_url: str, payload: dict) -> None:
    """POST {bootstrap}/register with vLLM's key order; retries connection failures (1 s, then 2 s)."""
    body = dumps({k: payload[k] for k in ("engine_id", "dp_rank", "tp_rank", "pp_rank", "addr")})
    url = bootstrap_url.rstrip("/") + "/register"
    backoff = 1.0
    for attempt in range(1, ATTEMPTS + 1):
        req = urllib.request.Request(url, data=body, method="POST", headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=CONNECTOR_TIMEOUT_S) as r:
                r.read()
            return
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            raise RuntimeError(f"bootstrap {url} answered {e.code}: {text}") from None
        except Exception as e:
            if not _connect_failure(e) or attempt == ATTEMPTS:
                raise RuntimeError(f"cannot register with the bootstrap server at {url}: {e}") from None
            log.warning("registration attempt %d failed: %s; retrying in %.0f s", attempt, e, backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, 10.0)


def query(bootstrap_url: str) -> dict:
    """GET {bootstrap}/query: 3 attempts on request errors, 0.1 s apart; an HTTP error status raises."""
    url = bootstrap_url + "/query"
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with urllib.request.urlopen(url, timeout=CONNECTOR_TIMEOUT_S) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError:
            raise
        except Exception as e:
            if not _connect_failure(e) or attempt == ATTEMPTS:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")
