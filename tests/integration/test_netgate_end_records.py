# SPDX-License-Identifier: Apache-2.0
"""A connection the client ended is recorded as ended, even when the
upstream never closes its side: the gate half-closes towards the upstream
and waits for it, and the sandbox's end then closes the connection. The
record must say the client ended it (no reason), not that the gate cut it
at shutdown ("shutdown" is for connections still in use when the run
ended). Runs against the private test network of netns.py."""

import json
import os
import subprocess
import sys

import pytest

import netns
from netns import RANGE, SERVER_ADDR

from netns import net  # noqa: E402,F401  (the test network, one per module)

NAME = "upstream.test"
HOLD_PORT = 18471
# Reads until the client's end, answers, and then keeps its side open.
HOLDER = r'''
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
print("ready", flush=True)
held = []
while True:
    c, _ = s.accept()
    while c.recv(65536):
        pass
    c.sendall(b"bye\n")
    held.append(c)
'''
CLIENT = r'''
import os, socket, sys
name, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if mode == "connect":
    px = os.environ["http_proxy"].split("//", 1)[1].rstrip("/")
    host, pport = px.rsplit(":", 1)
    s = socket.create_connection((host, int(pport)), timeout=20)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (name.encode(), port, name.encode(), port))
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
else:
    s = socket.create_connection((name, port), timeout=20)
s.sendall(b"hello\n")
s.shutdown(socket.SHUT_WR)
print(s.recv(100).decode().strip(), flush=True)
s.close()
'''


@pytest.fixture(scope="module")
def holder(net):
    p = subprocess.Popen(["ip", "netns", "exec", net.server_ns, sys.executable, "-c", HOLDER,
                          SERVER_ADDR, str(HOLD_PORT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stdout.readline()
        assert line.strip() == b"ready", p.stderr.read1(4096)
        yield
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("mode", ["transparent", "connect"])
def test_a_connection_the_client_ended_is_not_recorded_as_cut(airlock, net, holder, mode):
    ws = airlock.make_dir()
    (ws / "c.py").write_text(CLIENT)
    airlock.chown(ws)
    logdir = airlock.make_dir("netlog")
    args = ["run", "-q", "-w", ws, "--net-log", logdir / "net.jsonl", "--allow-private", RANGE,
            "--host", f"{NAME}={SERVER_ADDR}", "--allow", f"{NAME}:{HOLD_PORT}", "--",
            "python3", "/workspace/c.py", NAME, str(HOLD_PORT), mode]
    p = subprocess.run(["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(args)],
                       cwd=str(airlock.base), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "bye", (p.stdout, p.stderr)
    records = [json.loads(x) for x in (logdir / "net.jsonl").read_text().splitlines()]
    ended = [r for r in records if r.get("decision") == "allow" and r.get("port") == HOLD_PORT]
    assert ended and all(r.get("reason") is None for r in ended), records
