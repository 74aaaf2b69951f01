# SPDX-License-Identifier: Apache-2.0
"""DNS rebinding through the parent proxy.

With network.parentProxy, the gate resolves a name, checks every answer
(private and host addresses refused unless allowPrivate lists them), and
then hands the parent... the name, which the parent resolves again. A name
whose second answer differs reaches whatever that answer is: here the gate
sees rebind.test at 127.0.0.1 (the one address allowPrivate lists), the
parent sees it at 127.0.0.2, where a service the policy never allowed
listens. The parent must be handed the address the gate checked (CONNECT
ip:port, a SOCKS5 request by address), the Host header keeping the name.
network.parentProxySendNames hands the name, and every record that crossed
so says "parent": "name"."""

import json
import select
import socket
import socketserver
import struct
import threading

import pytest

# The parent's resolver: the second answer differs from the gate's.
PARENT_NAMES = {"rebind.test": "127.0.0.2"}


def _relay(a, b):
    try:
        while True:
            r, _, _ = select.select([a, b], [], [], 20)
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

    def __init__(self, handler):
        super().__init__(("127.0.0.1", 0), handler)
        self.asked = []
        self.port = self.server_address[1]


class ConnectHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        s.settimeout(20)
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(1)
            if not d:
                return
            head += d
        target = head.split(b" ")[1].decode()
        host, _, port = target.rpartition(":")
        self.server.asked.append(target)
        up = socket.create_connection((PARENT_NAMES.get(host, host.strip("[]")), int(port)),
                                      timeout=10)
        s.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        _relay(s, up)


class SocksHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        s.settimeout(20)
        _, n = s.recv(2)
        s.recv(n)
        s.sendall(b"\x05\x00")
        _, _, _, atyp = s.recv(4)
        if atyp == 3:
            host = s.recv(s.recv(1)[0]).decode()
        elif atyp == 1:
            host = socket.inet_ntoa(s.recv(4))
        else:
            return
        port = struct.unpack(">H", s.recv(2))[0]
        self.server.asked.append(f"{host}:{port}")
        up = socket.create_connection((PARENT_NAMES.get(host, host), port), timeout=10)
        s.sendall(b"\x05\x00\x00\x01\x7f\x00\x00\x01\x00\x00")
        _relay(s, up)


class Who(socketserver.StreamRequestHandler):
    """Answers who it is and the Host it was asked for."""

    def handle(self):
        lines = []
        while True:
            line = self.rfile.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            lines.append(line.decode(errors="replace").strip())
        host = next((x.split(":", 1)[1].strip() for x in lines if x.lower().startswith("host:")),
                    "")
        body = f"{self.server.who} host={host}\n".encode()
        self.wfile.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)


class WhoServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, who):
        super().__init__(addr, Who)
        self.who = who


def _serve(srv):
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture(scope="module")
def servers():
    """The allowed upstream at 127.0.0.1:P, the forbidden one at 127.0.0.2:P."""
    for _ in range(20):
        ok = _serve(WhoServer(("127.0.0.1", 0), "allowed"))
        port = ok.server_address[1]
        try:
            bad = _serve(WhoServer(("127.0.0.2", port), "FORBIDDEN"))
        except OSError:
            ok.shutdown()
            ok.server_close()
            continue
        yield port
        ok.shutdown()
        bad.shutdown()
        ok.server_close()
        bad.server_close()
        return
    pytest.skip("no port free on both 127.0.0.1 and 127.0.0.2")


CLIENT = r"""
import json, sys, urllib.request
try:
    with urllib.request.urlopen(f"http://rebind.test:{sys.argv[1]}/x", timeout=30) as r:
        print(json.dumps([r.status, r.read().decode()]))
except urllib.error.HTTPError as e:
    print(json.dumps([e.code, e.headers.get("X-Airlock-Error")]))
"""


def _run(airlock, parent, port, send_names=False):
    ws = airlock.make_dir()
    (ws / "client.py").write_text(CLIENT)
    airlock.chown(ws)
    d = airlock.make_dir("parentpin")
    net = {"allow": [f"rebind.test:{port}"],
           "parentProxy": f"{'http' if parent.RequestHandlerClass is ConnectHandler else 'socks5'}"
                          f"://127.0.0.1:{parent.port}",
           "hosts": {"rebind.test": "127.0.0.1"},
           "allowPrivate": ["127.0.0.1/32"]}
    if send_names:
        net["parentProxySendNames"] = True
    (d / "policy.json").write_text(json.dumps({"network": net}))
    airlock.chown(d)
    p = airlock.run(["run", "-q", "-w", ws, "--audit", d / "audit.jsonl", "-p", d / "policy.json",
                     "--", "python3", "/workspace/client.py", str(port)], timeout=60)
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in open(d / "audit.jsonl")]
    dec = [e for e in events if e["kind"] == "net.decision" and e.get("host") == "rebind.test"]
    return json.loads(p.stdout.strip().splitlines()[-1]), dec


@pytest.mark.parametrize("kind", ["http", "socks5"])
def test_parent_reaches_only_the_checked_address(airlock, servers, kind):
    parent = _serve(Parent(ConnectHandler if kind == "http" else SocksHandler))
    try:
        out, dec = _run(airlock, parent, servers)
        # What the gate checked is what was reached, by its name.
        assert out == [200, f"allowed host=rebind.test:{servers}\n"], out
        assert parent.asked == [f"127.0.0.1:{servers}"], parent.asked
        assert dec and all(e.get("parent") == "address" for e in dec if e["decision"] == "allow"), dec
    finally:
        parent.shutdown()
        parent.server_close()


def test_send_names_is_explicit_and_recorded(airlock, servers):
    parent = _serve(Parent(ConnectHandler))
    try:
        out, dec = _run(airlock, parent, servers, send_names=True)
        # The operator gave the address check up for this parent: it
        # resolved the name itself, and each record says so.
        assert parent.asked == [f"rebind.test:{servers}"], parent.asked
        assert out[0] == 200, out
        allowed = [e for e in dec if e["decision"] == "allow"]
        assert allowed and all(e.get("parent") == "name" for e in allowed), dec
    finally:
        parent.shutdown()
        parent.server_close()


def test_send_names_without_a_parent_is_refused(airlock):
    ws = airlock.make_dir()
    d = airlock.make_dir("parentpin")
    (d / "policy.json").write_text(json.dumps({"network": {"allow": ["a.test"],
                                                           "parentProxySendNames": True}}))
    airlock.chown(d)
    p = airlock.run(["run", "-q", "-w", ws, "-p", d / "policy.json", "--", "true"], timeout=60,
                    check_setup=False)
    assert p.returncode == 125, p.stderr
    assert "parentProxySendNames" in p.stderr and "parentProxy" in p.stderr, p.stderr
