# SPDX-License-Identifier: Apache-2.0
"""Transparent mode and local connects: every connect() inside a gated
sandbox is caught, and the local ones (Unix, loopback) are made by the host
on its copy of the caller's socket, never handed back to the kernel. They
must still behave as the caller's own: a Unix path resolved beneath the
sandbox's root and from its working directory (relative, `..`, symbolic
links), abstract names in the sandbox's namespace, datagram sockets, and
no socket of the host's reachable through a path or a link."""

import json
import os
import socket
import tempfile

import pytest

import netns
from test_transparent import run


from netns import net  # noqa: E402,F401  (the test network, one per module)


CLIENT = r'''
import errno, json, os, socket, sys, threading
host_path = sys.argv[1]
os.makedirs("/tmp/u/sub", exist_ok=True)
out = {}

def serve(addr, kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_UNIX, kind)
    s.bind(addr)
    if kind == socket.SOCK_STREAM:
        s.listen(8)
        def loop():
            while True:
                c, _ = s.accept()
                c.sendall(b"hi")
                c.close()
        threading.Thread(target=loop, daemon=True).start()
    return s

serve("/tmp/u/s.sock")
serve("\0airlock-abstract")
d = serve("/tmp/u/d.sock", socket.SOCK_DGRAM)
os.symlink("/tmp/u/s.sock", "/tmp/u/link")
os.symlink("../../../../../.." + host_path, "/tmp/u/out")

def attempt(key, addr, kind=socket.SOCK_STREAM, cwd=None):
    if cwd:
        os.chdir(cwd)
    c = socket.socket(socket.AF_UNIX, kind)
    c.settimeout(5)
    try:
        c.connect(addr)
        out[key] = c.recv(2).decode() if kind == socket.SOCK_STREAM else "ok"
        if kind == socket.SOCK_DGRAM:
            c.send(b"x")
            out[key] = d.recv(1).decode()
    except OSError as e:
        out[key] = e.errno
    c.close()

attempt("absolute", "/tmp/u/s.sock")
attempt("relative", "s.sock", cwd="/tmp/u")
attempt("dotdot", "../s.sock", cwd="/tmp/u/sub")
attempt("symlink", "/tmp/u/link")
attempt("abstract", "\0airlock-abstract")
attempt("dgram", "/tmp/u/d.sock", kind=socket.SOCK_DGRAM)
attempt("missing", "/tmp/u/none")
attempt("host", host_path)
attempt("host_link", "/tmp/u/out")
os.chdir("/")
print(json.dumps(out))
'''


def test_unix_connects_resolve_as_the_caller(airlock, net):
    # A listener on the host, outside the sandbox's root: no path, link or
    # `..` inside may reach it through the host's resolution.
    d = tempfile.mkdtemp(prefix="airlock-hostsock-", dir="/tmp")
    os.chmod(d, 0o755)
    path = os.path.join(d, "h.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    os.chmod(path, 0o777)
    srv.listen(4)
    srv.setblocking(False)
    try:
        r = run(airlock, net, f"python3 /workspace/c.py {path}", files={"c.py": CLIENT},
                timeout=60)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        for k in ("absolute", "relative", "dotdot", "symlink", "abstract"):
            assert out[k] == "hi", (k, out)
        assert out["dgram"] == "x", out
        assert out["missing"] == 2, out  # ENOENT
        assert out["host"] == 2 and out["host_link"] == 2, out
        with pytest.raises(BlockingIOError):
            srv.accept()
    finally:
        srv.close()
        os.unlink(path)
        os.rmdir(d)


BACKLOG = r'''
import errno, json, socket, threading, time
srv = socket.socket(socket.AF_UNIX)
srv.bind("/tmp/b.sock")
srv.listen(0)
held = []
# Fill the backlog: non-blocking clients until the kernel says EAGAIN.
for _ in range(64):
    c = socket.socket(socket.AF_UNIX)
    c.setblocking(False)
    try:
        c.connect("/tmp/b.sock")
        held.append(c)
    except BlockingIOError:
        break
out = {"filled": len(held)}
def accept_later():
    time.sleep(0.5)
    srv.accept()
    srv.accept()
threading.Thread(target=accept_later, daemon=True).start()
t0 = time.monotonic()
b = socket.socket(socket.AF_UNIX)  # blocking: waits for room, as with no gate
try:
    b.connect("/tmp/b.sock")
    out["blocking"] = "connected"
except OSError as e:
    out["blocking"] = e.errno
out["waited"] = time.monotonic() - t0
print(json.dumps(out))
'''


def test_blocking_unix_connect_waits_for_room_in_the_backlog(airlock, net):
    r = run(airlock, net, "python3 /workspace/b.py", files={"b.py": BACKLOG}, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["filled"] >= 1, out
    assert out["blocking"] == "connected", out
    assert out["waited"] >= 0.3, out
