"""What the real Mooncake Transfer Engine (pip mooncake-transfer-engine-non-cuda) does as the INITIATOR when the
target's handshake answer (its segment descriptor) varies: accepts and writes, or refuses the transfer.

The target is a small fake written here (127.0.0.1 only): a handshake server that answers with a descriptor
built per variation, and a data server that logs every request header it receives, reads the payload and
acknowledges it (status OK for the acknowledged format, nothing for version 1). So it shows what the initiator
*sends*, independently of what a real target would refuse. One process per variation (the engine caches
descriptors per segment name and its log goes to standard error, which the driver keeps per variation).

Usage: python descriptor_probe.py            runs every variation, prints one JSON line each
       python descriptor_probe.py NAME       runs one variation in this process (used by the driver)
Results: conformance/TESTEE.md, "The transfer-engine segment descriptor".
"""
import ctypes
import json
import socket
import struct
import subprocess
import sys
import threading

REGION = 64 * 1024  # what the initiator writes
BASE = 0x7F00_0000_0000  # the target address written (a virtual address, as a decoder advertises)
TIMEOUT_S = 20


def base_desc(name, data_port):
    return {
        "buffers": [{"addr": BASE, "length": REGION, "name": name}],
        "name": name,
        "protocol": "tcp",
        "rdma_server_name": "",
        "tcp_data_host": "127.0.0.1",
        "tcp_data_port": data_port,
        "tcp_proto_version": 2,
        "timestamp": "2026-12-05 12:00:00.000000",
    }


def without(k):
    return lambda d: {x: v for x, v in d.items() if x != k}


def setting(k, v):
    return lambda d: {**d, k: v}


def buf(**kw):
    return lambda d: {**d, "buffers": [{**d["buffers"][0], **kw}]}


# name -> (descriptor edit, raw answer override or None)
VARIATIONS = {
    "baseline": (lambda d: d, None),
    "buffer_short_4096": (buf(length=4096), None),
    "buffer_elsewhere": (buf(addr=BASE + 16 * REGION), None),
    "buffers_empty": (setting("buffers", []), None),
    "buffers_missing": (without("buffers"), None),
    "buffer_name_empty": (buf(name=""), None),
    "buffer_name_other": (buf(name="other"), None),
    "buffer_addr_0": (buf(addr=0), None),
    "buffer_length_0": (buf(length=0), None),
    "name_missing": (without("name"), None),
    "name_other_port": (setting("name", "127.0.0.1:1"), None),
    "name_other_host": (setting("name", "127.0.0.9:1"), None),
    "name_other_host_no_data_host": (lambda d: without("tcp_data_host")(setting("name", "127.0.0.9:1")(d)), None),
    "tcp_data_host_missing": (without("tcp_data_host"), None),
    "tcp_data_host_other": (setting("tcp_data_host", "127.0.0.9"), None),
    "rdma_server_name_missing": (without("rdma_server_name"), None),
    "tcp_proto_version_missing": (without("tcp_proto_version"), None),
    "tcp_proto_version_1": (setting("tcp_proto_version", 1), None),
    "tcp_proto_version_3": (setting("tcp_proto_version", 3), None),
    "tcp_proto_version_string": (setting("tcp_proto_version", "2"), None),
    "protocol_missing": (without("protocol"), None),
    "protocol_rdma": (setting("protocol", "rdma"), None),
    "tcp_data_port_missing": (without("tcp_data_port"), None),
    "timestamp_missing": (without("timestamp"), None),
    "answer_type_connection": (lambda d: d, "type0"),
    "answer_not_json": (lambda d: d, "notjson"),
    "answer_none": (lambda d: d, "close"),
}


def frame(ty, body):
    return struct.pack("<Q", len(body) + 1) + bytes([ty]) + body


def read_exact(s, n):
    out = b""
    while len(out) < n:
        c = s.recv(n - len(out))
        if not c:
            raise EOFError(f"closed after {len(out)} of {n} bytes")
        out += c
    return out


def handshake_server(lsock, make_desc, raw, log):
    while True:
        try:
            s, _ = lsock.accept()
        except OSError:
            return
        with s:
            s.settimeout(TIMEOUT_S)
            try:
                n = struct.unpack("<Q", read_exact(s, 8))[0]
                ty = read_exact(s, n)[0]
                log.append({"handshake_from_initiator_type": ty})
                body = (json.dumps(make_desc(), sort_keys=True) + "\n").encode()
                if raw == "close":
                    continue
                if raw == "notjson":
                    body = b"not json\n"
                s.sendall(frame(0 if raw == "type0" else ty, body))
                s.shutdown(socket.SHUT_WR)
                s.recv(1)
            except Exception as e:  # logged, the probe goes on
                log.append({"handshake_error": repr(e)})


def data_server(lsock, log):
    while True:
        try:
            s, _ = lsock.accept()
        except OSError:
            return
        threading.Thread(target=data_conn, args=(s, log), daemon=True).start()


def data_conn(s, log):
    with s:
        s.settimeout(TIMEOUT_S)
        try:
            while True:
                size, addr, op = struct.unpack("<QQB7x", read_exact(s, 24))
                log.append({"request": {"size": size, "addr": hex(addr), "opcode": hex(op)}})
                if op & 0x7F == 1:
                    read_exact(s, size)
                if op & 0x80:
                    s.sendall(struct.pack("<Q", 0x4D435456 << 32))
        except Exception:
            return


def listener():
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(8)
    return l


def run_one(variation):
    from mooncake.engine import TransferEngine

    edit, raw = VARIATIONS[variation]
    hs, ds = listener(), listener()
    name = f"127.0.0.1:{hs.getsockname()[1]}"
    log = []
    threading.Thread(target=handshake_server, args=(hs, lambda: edit(base_desc(name, ds.getsockname()[1])), raw, log), daemon=True).start()
    threading.Thread(target=data_server, args=(ds, log), daemon=True).start()
    eng = TransferEngine()
    rc_init = eng.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
    src = ctypes.create_string_buffer(REGION)
    ctypes.memset(src, 0x5A, REGION)
    local = ctypes.addressof(src)
    rc_reg = eng.register_memory(local, REGION)
    rc, rc2 = write(eng, name, local), write(eng, name, local)
    print(json.dumps({"variation": variation, "init": rc_init, "register": rc_reg, "write": rc, "second_write": rc2, "target_saw": log}))
    sys.stdout.flush()


def write(eng, name, local):
    """The return code of one write of REGION bytes at BASE, or the exception it raised."""
    try:
        return eng.transfer_sync_write(name, local, BASE, REGION)
    except Exception as e:  # reported as measured
        return f"{type(e).__name__}: {e}"


def main():
    if len(sys.argv) > 1:
        run_one(sys.argv[1])
        return
    for v in VARIATIONS:
        try:
            p = subprocess.run([sys.executable, __file__, v], capture_output=True, text=True, timeout=120)
            out = p.stdout.strip().splitlines()
            r = json.loads(out[-1]) if out else {"variation": v, "exit": p.returncode}
        except subprocess.TimeoutExpired:
            r, p = {"variation": v, "timeout": True}, None
        errs = [l for l in (p.stderr.splitlines() if p else []) if l[:1] in "EW" and "Local segment descriptor not found" not in l]
        r["engine_log"] = [l.split("] ", 1)[-1] for l in errs][:4]
        print(json.dumps(r))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
