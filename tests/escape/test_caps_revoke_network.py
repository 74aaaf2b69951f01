# SPDX-License-Identifier: Apache-2.0
"""A network capability revoked live cuts what is already open.

The attack: an agent granted a host live opens connections to it through
the gate (a CONNECT tunnel, a SOCKS5 tunnel, a transparent relayed
connection), then the grant is revoked. If the gate only decided new
connections, the open ones would keep the power the revoke took away. Each
must be closed at the revoke (the next use finds it closed, well within
2 s) and recorded in the audit log with reason "revoked"; connections to a
host the rules still allow stay open and keep working."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from controllib import ask, wait_file  # noqa: E402
import netns  # noqa: E402
from netns import HTTP_PORT, RANGE, SERVER_ADDR  # noqa: E402

NAME = "upstream.test"
OTHER = "other.test"

from netns import net  # noqa: E402,F401  (the test network, one per module)

# Runs inside the sandbox: opens each connection, uses it once (r1), waits
# for the test's go-ahead (the revoke), uses each again (r2).
CLIENT = r'''
import json, os, socket, struct, sys, time
NAME, OTHER, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])

def recv_exact(s, n):
    data = b""
    while len(data) < n:
        c = s.recv(n - len(data))
        if not c:
            raise EOFError("closed")
        data += c
    return data

def get(s):
    s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: " + NAME.encode() + b"\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        c = s.recv(4096)
        if not c:
            raise EOFError("closed")
        data += c
    head, rest = data.split(b"\r\n\r\n", 1)
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    if len(rest) < n:
        rest += recv_exact(s, n - len(rest))
    return head.split(b"\r\n")[0].decode()

def tunnel(host):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    t = ("%s:%d" % (host, PORT)).encode()
    s.sendall(b"CONNECT " + t + b" HTTP/1.1\r\nHost: " + t + b"\r\n\r\n")
    data = b""
    while not data.endswith(b"\r\n\r\n"):
        c = s.recv(1)
        if not c:
            raise EOFError("closed")
        data += c
    assert data.startswith(b"HTTP/1.1 200"), data
    return s

def socks(host):
    s = socket.create_connection(("127.0.0.1", 1080), timeout=10)
    s.sendall(b"\x05\x01\x00")
    assert recv_exact(s, 2) == b"\x05\x00"
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode() + struct.pack(">H", PORT))
    r = recv_exact(s, 4)
    assert r[1] == 0, r
    recv_exact(s, 6 if r[3] == 1 else 18)
    return s

def direct(host):
    return socket.create_connection((host, PORT), timeout=10)

conns = {}
out = {}
for key, fn, host in (("connect", tunnel, NAME), ("socks5", socks, NAME),
                      ("transparent", direct, NAME), ("keep_connect", tunnel, OTHER),
                      ("keep_transparent", direct, OTHER)):
    try:
        conns[key] = fn(host)
        out[key] = get(conns[key])
    except Exception as e:
        out[key] = "error: %r" % e
with open("/workspace/r1.tmp", "w") as f:
    json.dump(out, f)
os.rename("/workspace/r1.tmp", "/workspace/r1")
t = time.monotonic()
while not os.path.exists("/workspace/go"):
    time.sleep(0.02)
    if time.monotonic() - t > 30:
        sys.exit(9)
out = {}
for key, s in conns.items():
    t0 = time.monotonic()
    try:
        out[key] = "ok " + get(s)
    except Exception as e:
        out[key] = "closed %r" % e
    out[key + "_s"] = time.monotonic() - t0
with open("/workspace/r2.tmp", "w") as f:
    json.dump(out, f)
os.rename("/workspace/r2.tmp", "/workspace/r2")
'''


def test_revoke_cuts_open_tunnels_and_relays(airlock, net):
    ws = airlock.make_dir()
    (ws / "client.py").write_text(CLIENT)
    airlock.chown(ws)
    ctl = airlock.make_dir("ctl")
    sock, audit = ctl / "c.sock", ctl / "audit.jsonl"
    opts = ["--allow-private", RANGE, "--host", f"{NAME}={SERVER_ADDR}",
            "--host", f"{OTHER}={SERVER_ADDR}", "--allow", "placeholder.invalid"]
    argv = ["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(
        ["run", "-q", "-w", ws, "--control", sock, "--audit", audit, *opts, "--",
         "/bin/sh", "-c", f"while [ ! -e /workspace/go0 ]; do sleep 0.05; done; "
         f"exec python3 /workspace/client.py {NAME} {OTHER} {HTTP_PORT}"])]
    p = subprocess.Popen(argv, cwd=str(airlock.base), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert p.poll() is None, p.communicate(timeout=10)
            assert time.monotonic() < deadline, "no control socket"
            time.sleep(0.05)
        rule, kept = f"{NAME}:{HTTP_PORT}", f"{OTHER}:{HTTP_PORT}"
        r = ask(sock, {"op": "caps", "grant": [{"network": {"allow": rule}},
                                               {"network": {"allow": kept}}]})
        assert r["ok"], r
        (ws / "go0").write_text("")
        first = wait_file(ws / "r1", p)
        assert all(v.startswith("HTTP/1.1 200") for v in first.values()), first

        r = ask(sock, {"op": "caps", "revoke": [{"network": {"allow": rule}}]})
        assert r["ok"], r
        (ws / "go").write_text("")
        second = wait_file(ws / "r2", p)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=10)

    # What the revoke refused is closed at once; what is still allowed works.
    for key in ("connect", "socks5", "transparent"):
        assert second[key].startswith("closed"), (key, second)
        assert second[key + "_s"] < 2, (key, second)
    for key in ("keep_connect", "keep_transparent"):
        assert second[key].startswith("ok HTTP/1.1 200"), (key, second)

    # Each cut is in the audit log, naming the connection and the revoke.
    recs = [json.loads(x) for x in audit.read_text().splitlines()]
    cut = [d for d in recs if d["kind"] == "net.decision" and d.get("reason") == "revoked"]
    assert sorted(d["protocol"] for d in cut) == ["connect", "socks5", "transparent"], cut
    assert all(d["host"] == NAME and d["port"] == HTTP_PORT and d["address"] == SERVER_ADDR
               for d in cut), cut
    assert all(d.get("bytesDown", 0) > 0 for d in cut), cut
    # The cut comes after the revoke that caused it.
    seqs = {d["kind"]: d["seq"] for d in recs if d["kind"] == "capability.revoked"}
    assert all(d["seq"] > seqs["capability.revoked"] for d in cut), (seqs, cut)
