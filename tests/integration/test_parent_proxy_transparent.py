# SPDX-License-Identifier: Apache-2.0
"""network.parentProxy in transparent mode: with a parent proxy, every
upstream connection goes through it. The direct path (the host's socket
handed to the sandbox) would connect past the parent, so it is not taken,
whether the connection was allowed by a name with network.directPath or by
an address rule. Runs against the private test network of netns.py, the
parent a small CONNECT proxy in the sandbox host's namespace."""

import json
import subprocess
import sys

import pytest

import netns
from netns import HELLO, HTTP_PORT, RANGE, SERVER_ADDR

from netns import net  # noqa: E402,F401  (the test network, one per module)

PARENT_PORT = 18472
NOPROXY = "unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY; "
PARENT = r'''
import select, socket, sys, threading
log = open(sys.argv[1], "a", buffering=1)
def relay(a, b):
    try:
        while True:
            r, _, _ = select.select([a, b], [], [], 30)
            if not r:
                return
            for s in r:
                d = s.recv(65536)
                if not d:
                    return
                (b if s is a else a).sendall(d)
    finally:
        a.close(); b.close()
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(1)
        if not d:
            return c.close()
        head += d
    target = head.split()[1].decode()
    log.write(target + "\n")
    host, port = target.rsplit(":", 1)
    up = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
    c.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    relay(c, up)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[2])))
s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


@pytest.fixture(scope="module")
def parent(net):
    log = net.dir / "parent.log"
    log.write_text("")
    p = subprocess.Popen(["ip", "netns", "exec", net.client_ns, sys.executable, "-c", PARENT, str(log),
                          str(PARENT_PORT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"ready", p.stderr.read1(4096)
        yield log
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("target", ["name", "address"])
def test_transparent_connections_go_through_the_parent(airlock, net, parent, target):
    dest = "upstream.test" if target == "name" else SERVER_ADDR
    before = parent.read_text().splitlines()
    d = airlock.make_dir("parent")
    pol = {"network": {"allow": [f"{dest}:{HTTP_PORT}"], "hosts": {"upstream.test": SERVER_ADDR},
                       "allowPrivate": [RANGE, "127.0.0.0/8"],
                       "parentProxy": f"http://127.0.0.1:{PARENT_PORT}",
                       "directPath": True, "budget": {"rate": 0}}}
    (d / "policy.json").write_text(json.dumps(pol))
    airlock.chown(d)
    ws = airlock.make_dir()
    airlock.chown(ws)
    args = ["run", "-q", "-w", ws, "-p", d / "policy.json", "--", "/bin/sh", "-c",
            NOPROXY + f"curl -sS --noproxy '*' --max-time 20 http://{dest}:{HTTP_PORT}/hello.txt"]
    p = subprocess.run(["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(args)],
                       cwd=str(airlock.base), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == HELLO, (p.stdout, p.stderr)
    asked = parent.read_text().splitlines()[len(before):]
    assert asked == [f"{SERVER_ADDR}:{HTTP_PORT}"], asked
