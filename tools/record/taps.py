"""Taps that observe the traffic of one recorder process without changing it.

* ZeroMQ: the public send/recv methods of pyzmq's socket classes are wrapped. A socket is recorded only once the
  application has bound or connected it to a tcp:// endpoint through the same wrapped object, so pyzmq's internal
  shadow sockets (asyncio sockets do their I/O through one) and in-process pairs are never recorded twice or at all.
  Sends are recorded when the application calls send, receives when the receive completed, with the frames exactly
  as passed to / returned by pyzmq.
* HTTP: an ASGI wrapper around the bootstrap server's application records each request body as received and each
  response body as sent (server side).

Every event carries `t`, CLOCK_MONOTONIC in nanoseconds, which is shared by all processes of one machine; the
coordinator merges the events of all processes by it (and writes it relative to the scenario's start). Every tapped
socket gets an id of its own in this process (`sock`), which the coordinator turns into the trace's `socket_id`.
"""

import json
import threading
import time

_lock = threading.Lock()
_events = []
_conn = None
_side = None
_recv_counts = {}
_next_sock = [0]
# Sockets (by `sock`) whose first message was a KV-lease heartbeat (vLLM 0.34.0+): their replies are not replies to
# a pull, so `replies()` leaves them out.
_heartbeat_socks = set()


def configure(conn, side):
    global _conn, _side
    _conn, _side = conn, side


def _emit(event):
    event["t"] = time.monotonic_ns()
    with _lock:
        _events.append(event)
        if event.get("kind") == "zmq" and not event["bound"]:
            if event["dir"] == "send" and _is_heartbeat(event.get("decoded")):
                _heartbeat_socks.add(event["sock"])
            elif event["dir"] == "recv" and event["sock"] not in _heartbeat_socks:
                _recv_counts[event["conn"]] = _recv_counts.get(event["conn"], 0) + 1


def emit(event):
    """Record an event of another kind (e.g. a transfer-engine call)."""
    _emit(event)


def drain():
    with _lock:
        out = list(_events)
        _events.clear()
    return out


def _is_heartbeat(decoded):
    """A MooncakeLeaseHeartbeat (vLLM 0.34.0 wheel, mooncake_connector.py): a map holding only
    `lease_transfer_ids`."""
    return isinstance(decoded, dict) and set(decoded) == {"lease_transfer_ids"}


def replies():
    """Replies to pulls this process's connecting sockets (DEALER / REQ) have received so far (the replies to
    KV-lease heartbeats are not counted)."""
    with _lock:
        return sum(_recv_counts.values())


# --------------------------------------------------------------------------------------------------------------
# ZeroMQ


def _frame_bytes(f):
    if isinstance(f, (bytes, bytearray)):
        return bytes(f)
    if isinstance(f, memoryview):
        return f.tobytes()
    if isinstance(f, str):
        # pyzmq refuses str frames; record what the application passed anyway.
        return f.encode()
    b = getattr(f, "bytes", None)  # zmq.Frame
    if b is not None:
        return bytes(b)
    return bytes(f)


def _decode_last(frames):
    import msgspec

    out = {}
    last = frames[-1] if frames else b""
    try:
        value = msgspec.msgpack.decode(last)
        out["decoded"] = json.loads(msgspec.json.encode(value, enc_hook=_enc_hook))
    except Exception:
        try:
            out["payload_text"] = last.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return out


def _enc_hook(obj):
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    raise TypeError(type(obj).__name__)


def _endpoint(sock):
    return sock.__dict__.get("_mw_tap_endpoint")


def _record_zmq(sock, direction, frames):
    info = _endpoint(sock)
    if info is None:
        return
    endpoint, bound, socket_type, sock_id = info
    frames = [_frame_bytes(f) for f in frames]
    event = {
        "kind": "zmq",
        "side": _side,
        "conn": _conn,
        "socket": socket_type,
        "endpoint": endpoint,
        "sock": sock_id,
        "bound": bound,
        "dir": direction,
        "frames": [f.hex() for f in frames],
    }
    event.update(_decode_last(frames))
    if bound:
        event["note"] = "frame 0 is the ZMQ routing id seen by the ROUTER (not a ZMTP payload frame)"
    _emit(event)


_SOCKET_TYPES = {}
_depth = threading.local()


def _socket_type_name(sock):
    import zmq

    if not _SOCKET_TYPES:
        for name in ("REQ", "REP", "DEALER", "ROUTER", "PUSH", "PULL", "PUB", "SUB", "PAIR"):
            _SOCKET_TYPES[getattr(zmq, name)] = name
    return _SOCKET_TYPES.get(sock.socket_type, str(sock.socket_type))


def _note_endpoint(sock, addr, bound):
    if not isinstance(addr, str) or not addr.startswith("tcp://"):
        return
    if bound and addr.endswith(":*"):
        # bind_to_random_port lets the OS pick the port; the bound address is the socket's last endpoint.
        addr = sock.last_endpoint.decode("ascii", "replace")
    with _lock:
        _next_sock[0] += 1
        sock_id = _next_sock[0]
    object.__setattr__(sock, "_mw_tap_endpoint", (addr, bound, _socket_type_name(sock), sock_id))


_installed = []


def install_zmq_taps():
    if _installed:
        return
    _installed.append(True)
    import zmq
    import zmq.asyncio

    sync_cls = zmq.Socket
    async_cls = zmq.asyncio.Socket

    orig_bind = sync_cls.bind
    orig_connect = sync_cls.connect

    def bind(self, addr):
        r = orig_bind(self, addr)
        _note_endpoint(self, addr, True)
        return r

    def connect(self, addr):
        r = orig_connect(self, addr)
        _note_endpoint(self, addr, False)
        return r

    sync_cls.bind = bind
    sync_cls.connect = connect

    # Synchronous sockets: send_multipart is implemented with send, recv_multipart with recv; only the outermost
    # call of a thread records.
    def wrap_sync_send(orig, multipart):
        def send(self, data, *args, **kwargs):
            outer = not getattr(_depth, "busy", False)
            if outer and _endpoint(self) is not None:
                _record_zmq(self, "send", list(data) if multipart else [data])
            _depth.busy = True
            try:
                return orig(self, data, *args, **kwargs)
            finally:
                _depth.busy = not outer

        return send

    def wrap_sync_recv(orig, multipart):
        def recv(self, *args, **kwargs):
            outer = not getattr(_depth, "busy", False)
            _depth.busy = True
            try:
                r = orig(self, *args, **kwargs)
            finally:
                _depth.busy = not outer
            if outer and _endpoint(self) is not None:
                _record_zmq(self, "recv", list(r) if multipart else [r])
            return r

        return recv

    for name, multipart in (("send", False), ("send_multipart", True)):
        setattr(sync_cls, name, wrap_sync_send(getattr(sync_cls, name), multipart))
    for name, multipart in (("recv", False), ("recv_multipart", True)):
        setattr(sync_cls, name, wrap_sync_recv(getattr(sync_cls, name), multipart))

    # asyncio sockets: the methods return futures; pyzmq does the I/O on an untapped shadow socket.
    def wrap_async_send(orig, multipart):
        def send(self, data, *args, **kwargs):
            if _endpoint(self) is not None:
                _record_zmq(self, "send", list(data) if multipart else [data])
            return orig(self, data, *args, **kwargs)

        return send

    def wrap_async_recv(orig, multipart):
        def recv(self, *args, **kwargs):
            fut = orig(self, *args, **kwargs)
            if _endpoint(self) is not None:

                def done(f, sock=self):
                    if f.cancelled() or f.exception() is not None:
                        return
                    r = f.result()
                    _record_zmq(sock, "recv", list(r) if multipart else [r])

                fut.add_done_callback(done)
            return fut

        return recv

    for name, multipart in (("send", False), ("send_multipart", True)):
        setattr(async_cls, name, wrap_async_send(getattr(async_cls, name), multipart))
    for name, multipart in (("recv", False), ("recv_multipart", True)):
        setattr(async_cls, name, wrap_async_recv(getattr(async_cls, name), multipart))


# --------------------------------------------------------------------------------------------------------------
# HTTP (server side)


def _json_or_none(raw):
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


class HttpTap:
    """ASGI wrapper: reads the whole request body (recording it), replays it to the application, and records the
    response body the application sends."""

    def __init__(self, app, conn="bootstrap"):
        self.app = app
        self.conn = conn

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        qs = scope.get("query_string") or b""
        if qs:
            path += "?" + qs.decode("latin-1")
        method = scope.get("method", "")
        chunks = []
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body"):
                break
        body = b"".join(chunks)
        text = body.decode("utf-8", "replace")
        _emit({"kind": "http", "conn": self.conn, "dir": "request", "method": method, "path": path,
               "body": _json_or_none(text), "body_raw": text})
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        status = None
        out = []

        async def tapped_send(msg):
            nonlocal status
            if msg["type"] == "http.response.start":
                status = msg["status"]
            elif msg["type"] == "http.response.body":
                out.append(msg.get("body", b""))
                if not msg.get("more_body"):
                    rtext = b"".join(out).decode("utf-8", "replace")
                    _emit({"kind": "http", "conn": self.conn, "dir": "response", "method": method, "path": path,
                           "status": status, "body": _json_or_none(rtext), "body_raw": rtext})
            await send(msg)

        await self.app(scope, replay, tapped_send)
