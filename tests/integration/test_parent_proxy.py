# SPDX-License-Identifier: Apache-2.0
"""network.parentProxy: the gate's upstream connections go through an HTTP
(CONNECT) or SOCKS5 parent proxy, to the address the gate checked, except for
the hosts of network.noProxy; a parent that refuses is a 502. The parents
here are small Python proxies that log what they were asked for and know
the test names themselves."""

import http.server
import json
import select
import socket
import socketserver
import struct
import threading

import pytest

NAMES = {"plain.test": "127.0.0.1", "direct.test": "127.0.0.1"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        body = f"upstream saw {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _relay(a, b):
    try:
        while True:
            r, _, _ = select.select([a, b], [], [], 30)
            if not r:
                return
            for s in r:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    finally:
        a.close()
        b.close()


class Parent(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler, refuse=()):
        super().__init__(("127.0.0.1", 0), handler)
        self.asked = []
        self.refuse = set(refuse)
        self.refuse_all = "*" in self.refuse
        self.port = self.server_address[1]


class ConnectHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(1)
            if not d:
                return
            head += d
        target = head.split(b" ")[1].decode()
        host, _, port = target.rpartition(":")
        self.server.asked.append(target)
        if head.split(b" ")[0] != b"CONNECT" or host in self.server.refuse or \
                self.server.refuse_all:
            s.sendall(b"HTTP/1.1 403 Forbidden by parent\r\nContent-Length: 0\r\n\r\n")
            return
        up = socket.create_connection((NAMES.get(host, host), int(port)), timeout=10)
        s.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        _relay(s, up)


class SocksHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        ver, n = s.recv(2)
        s.recv(n)
        s.sendall(b"\x05\x00")
        ver, cmd, _, atyp = s.recv(4)
        if atyp == 3:
            host = s.recv(s.recv(1)[0]).decode()
        elif atyp == 1:
            host = socket.inet_ntoa(s.recv(4))
        else:
            return
        port = struct.unpack(">H", s.recv(2))[0]
        self.server.asked.append(f"{host}:{port}")
        up = socket.create_connection((NAMES.get(host, host), port), timeout=10)
        s.sendall(b"\x05\x00\x00\x01\x7f\x00\x00\x01\x00\x00")
        _relay(s, up)


def _serve(srv):
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture(scope="module")
def upstream():
    srv = _serve(socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler))
    srv.daemon_threads = True
    yield srv
    srv.shutdown()


CLIENT = r"""
import json, sys, urllib.request
out = {}
for name in sys.argv[2:]:
    try:
        with urllib.request.urlopen(f"http://{name}:{sys.argv[1]}/x", timeout=30) as r:
            out[name] = [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        out[name] = [e.code, e.headers.get("X-Airlock-Error")]
    except Exception as e:
        out[name] = [0, repr(e)]
print(json.dumps(out))
"""


def _run(airlock, parent_url, no_proxy, port, names):
    ws = airlock.make_dir()
    (ws / "client.py").write_text(CLIENT)
    airlock.chown(ws)
    d = airlock.make_dir("parent")
    net = {"allow": [f"{n}:{port}" for n in names], "parentProxy": parent_url,
           "hosts": {n: "127.0.0.1" for n in names}, "allowPrivate": ["127.0.0.0/8"]}
    if no_proxy:
        net["noProxy"] = no_proxy
    (d / "policy.json").write_text(json.dumps({"network": net}))
    airlock.chown(d)
    p = airlock.run(["run", "-q", "-w", ws, "--audit", d / "audit.jsonl", "-p", d / "policy.json",
                     "--", "python3", "/workspace/client.py", str(port), *names], timeout=90)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), d


@pytest.mark.parametrize("kind", ["http", "socks5"])
def test_upstream_goes_through_the_parent(airlock, upstream, kind):
    parent = _serve(Parent(ConnectHandler if kind == "http" else SocksHandler))
    try:
        port = upstream.server_address[1]
        out, d = _run(airlock, f"{kind}://127.0.0.1:{parent.port}", ["direct.test"], port,
                      ["plain.test", "direct.test"])
        assert out["plain.test"] == [200, "upstream saw /x\n"], out
        assert out["direct.test"] == [200, "upstream saw /x\n"], out
        # The parent was asked for the address the gate checked for the
        # decided name (never the name: it would resolve it again), and
        # only for it.
        assert parent.asked == [f"127.0.0.1:{port}"], parent.asked
    finally:
        parent.shutdown()


def test_parent_refusal_is_502(airlock, upstream):
    parent = _serve(Parent(ConnectHandler, refuse={"*"}))
    try:
        port = upstream.server_address[1]
        out, d = _run(airlock, f"http://127.0.0.1:{parent.port}", None, port, ["plain.test"])
        assert out["plain.test"] == [502, "upstream_failed"], out
        events = [json.loads(line) for line in open(d / "audit.jsonl")]
        dec = [e for e in events if e["kind"] == "net.decision" and e["host"] == "plain.test"]
        assert dec and dec[-1]["reason"] == "upstream_failed", dec
    finally:
        parent.shutdown()


@pytest.mark.parametrize("bad", ["ftp://127.0.0.1:3128", "http://127.0.0.1", "http://u:p@h:1",
                                 "http://127.0.0.1:99999", "http://127.0.0.1:3128/path"])
def test_bad_parent_proxy_is_refused(airlock, bad):
    ws = airlock.make_dir()
    d = airlock.make_dir("parent")
    (d / "policy.json").write_text(json.dumps({"network": {"allow": ["a.test"],
                                                           "parentProxy": bad}}))
    airlock.chown(d)
    p = airlock.run(["run", "-q", "-w", ws, "-p", d / "policy.json", "--", "true"], timeout=60,
                    check_setup=False)
    assert p.returncode == 125, p.stderr
    assert "network.parentProxy" in p.stderr, p.stderr


def test_private_parent_needs_allow_private(airlock):
    ws = airlock.make_dir()
    d = airlock.make_dir("parent")
    (d / "policy.json").write_text(json.dumps({"network": {
        "allow": ["a.test"], "parentProxy": "http://127.0.0.1:3128"}}))
    airlock.chown(d)
    p = airlock.run(["run", "-q", "-w", ws, "-p", d / "policy.json", "--", "true"], timeout=60,
                    check_setup=False)
    assert p.returncode == 125, p.stderr
    assert "network.parentProxy" in p.stderr and "allowPrivate" in p.stderr, p.stderr
