# SPDX-License-Identifier: Apache-2.0
"""Attacks from inside a sandbox on the network gate's transparent mode.

The direct path hands the sandbox a socket the host connected (it lives in
the host's network namespace). A TCP socket can be taken back to the
unconnected state with connect(AF_UNSPEC); were that let through, the host's
socket could then be connected anywhere the host reaches (its loopback, say)
or send a SYN with data to any address (sendto with MSG_FASTOPEN), with no
connect() for the gate to catch."""

import errno
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import netns  # noqa: E402
from netns import HTTP_PORT, LOOP_PORT, OTHER_PORT, RANGE, SERVER_ADDR  # noqa: E402
from test_transparent import NAME, run  # noqa: E402

NORATE = {"network": {"directPath": True, "budget": {"rate": 0}}}  # the direct path (no relay)


from netns import net  # noqa: E402,F401  (the test network, one per module)


DISCONNECT = r'''
import ctypes, errno, json, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
name, port, loop_port, other = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
srv = sys.argv[5]
out = {}

def unspec(s):
    sa = (ctypes.c_ubyte * 16)()  # sa_family 0: AF_UNSPEC
    r = libc.connect(s.fileno(), sa, 16)
    return 0 if r == 0 else ctypes.get_errno()

def talk(s, path):
    s.settimeout(10)
    s.sendall(("GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % path).encode())
    return s.recv(100).decode(errors="replace")

# 1. The host's socket, unconnected, then connected to the host's loopback.
s = socket.socket()
s.settimeout(10)
s.connect((name, port))
out["unspec1"] = unspec(s)
try:
    s.connect(("127.0.0.1", loop_port))
    out["loop"] = talk(s, "/hello.txt")
except OSError as e:
    out["loop"] = e.errno
# 2. The same, then TCP Fast Open to an address the gate refuses.
s = socket.socket()
s.settimeout(10)
s.connect((name, port))
out["unspec2"] = unspec(s)
try:
    s.setblocking(True)
    s.sendto(b"GET /hello.txt HTTP/1.0\r\nHost: x\r\n\r\n", socket.MSG_FASTOPEN, (srv, other))
    s.settimeout(10)
    out["tfo"] = s.recv(100).decode(errors="replace")
except OSError as e:
    out["tfo"] = e.errno
# 3. A socket of the sandbox's own may still be disconnected (UDP, as
#    resolvers do) and reused.
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.connect(("127.0.0.1", 53))
out["udp_unspec"] = unspec(u)
# 4. TCP Fast Open on a fresh socket: a connect with no connect(), refused.
t = socket.socket()
try:
    t.sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", 53))
    out["tfo_fresh"] = "sent"
except OSError as e:
    out["tfo_fresh"] = e.errno
# 5. The host's socket, still connected, aimed at loopback: not let through.
s = socket.socket()
s.settimeout(10)
s.connect((name, port))
try:
    s.connect(("127.0.0.1", loop_port))
    out["loop_connected"] = "connected"
except OSError as e:
    out["loop_connected"] = e.errno
print(json.dumps(out))
'''


def test_direct_socket_cannot_be_disconnected_and_reused(airlock, net):
    r = run(airlock, net,
            f"python3 /workspace/d.py {NAME} {HTTP_PORT} {LOOP_PORT} {OTHER_PORT} {SERVER_ADDR}",
            files={"d.py": DISCONNECT}, policy=NORATE, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert not isinstance(out["loop"], str), out  # reached the host's loopback
    assert not isinstance(out["tfo"], str), out  # reached an unlisted port
    assert out["unspec1"] != 0 and out["unspec2"] != 0, out
    assert out["udp_unspec"] == 0, out
    assert out["tfo_fresh"] == errno.EOPNOTSUPP, out
    assert out["loop_connected"] == errno.EISCONN, out
    reuse = [d for d in r.of("transparent", "deny") if d.get("reason") == "host_socket_reuse"]
    assert len(reuse) >= 3, r.records
    assert all(d["port"] == HTTP_PORT for d in r.of("transparent", "allow")), r.records

