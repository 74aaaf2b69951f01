# SPDX-License-Identifier: Apache-2.0
"""The sandbox aims an allowed name at the gate's own host.

The gate connects from the host. An address of one of the host's own
interfaces is then the host itself: whatever listens there on the wildcard
address (its SSH server, a database, a daemon's TCP port) answers, through
the host's loopback, past any firewall on the way in. The private ranges
do not cover it when the interface holds a public address (or, as on many
test and lab machines, a documentation one). A DNS answer for an allowed
name (rebinding) or a `network.hosts` entry pointing there must be refused
as the loopback is, unless `network.allowPrivate` names the address; and
every refusal is recorded."""

import ipaddress
import json
import os
import socket
import subprocess
import threading

import pytest

SPECIAL = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4",
    "240.0.0.0/4")]


def own_public_address():
    """An IPv4 address of one of this host's interfaces outside the ranges
    the gate already refuses, or None."""
    try:
        out = subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True,
                             timeout=10).stdout
        ifs = json.loads(out or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    for i in ifs:
        for a in i.get("addr_info", []):
            ip = ipaddress.ip_address(a.get("local", "0.0.0.0"))
            if not any(ip in n for n in SPECIAL):
                return str(ip)
    return None


class HostService:
    """A host service on the wildcard address: it counts who reached it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = False
        self.t = threading.Thread(target=self.serve, daemon=True)
        self.t.start()

    def serve(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            try:
                c.settimeout(2)
                c.recv(4096)
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 12\r\n\r\nHOSTSERVICE\n")
            except OSError:
                pass
            c.close()

    def close(self):
        self.stop = True
        self.t.join(timeout=2)
        self.sock.close()


PROBE = r'''
import json, os, socket, sys, urllib.request
name, port = sys.argv[1], int(sys.argv[2])
out = {}
# Through the proxy (HTTP_PROXY is set by the gate).
try:
    with urllib.request.urlopen("http://%s:%d/" % (name, port), timeout=10) as r:
        out["proxy"] = r.read().decode(errors="replace")
except urllib.error.HTTPError as e:
    out["proxy"] = "%d %s" % (e.code, e.headers.get("X-Airlock-Denied"))
    out["ask"] = e.headers.get("X-Airlock-Ask")
except Exception as e:
    out["proxy"] = "error %r" % (e,)
# The same address spelt as IPv4-mapped IPv6, an IP rule's literal.
if len(sys.argv) > 3:
    try:
        with urllib.request.urlopen("http://[::ffff:%s]:%d/" % (sys.argv[3], port),
                                    timeout=10) as r:
            out["mapped"] = r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        out["mapped"] = "%d %s" % (e.code, e.headers.get("X-Airlock-Denied"))
    except Exception as e:
        out["mapped"] = "error %r" % (e,)
# Transparent: the gate's name server, then connect().
try:
    s = socket.create_connection((name, port), timeout=10)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    out["transparent"] = s.recv(100).decode(errors="replace")
except OSError as e:
    out["transparent"] = "oserror %s" % (e.errno,)
print(json.dumps(out))
'''


@pytest.fixture
def host_service():
    s = HostService()
    yield s
    s.close()


@pytest.mark.parametrize("airlock", ["root"], indirect=True)
def test_allowed_name_at_host_own_address_refused(airlock, host_service, tmp_path):
    addr = own_public_address()
    if addr is None:
        pytest.skip("no interface of this host holds an address outside the private ranges")
    port = host_service.port
    ws = airlock.make_dir()
    (ws / "probe.py").write_text(PROBE)
    audit = tmp_path / "audit.jsonl"
    p = airlock.run(["run", "-q", "-w", ws, "--audit", str(audit),
                     "--allow", f"svc.test:{port}", "--host", f"svc.test={addr}",
                     "--allow", f"[::ffff:{addr}]:{port}",
                     "--", "python3", "/workspace/probe.py", "svc.test", str(port), addr],
                    timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert host_service.accepted == 0, (addr, out)
    assert "HOSTSERVICE" not in json.dumps(out), out
    assert out["proxy"] == "403 private_address", out
    assert out["ask"] == f"network.allowPrivate {addr}", out
    assert out["transparent"].startswith("oserror"), out
    assert out["mapped"] == "403 private_address", out
    # Each refusal is recorded with its reason, naming the address.
    lines = [json.loads(x) for x in audit.read_text().splitlines() if x.strip()]
    refused = [x for x in lines if x.get("reason") == "private_address"]
    assert refused, lines[-5:]
    assert any(addr in json.dumps(x) for x in refused), refused


@pytest.mark.parametrize("airlock", ["root"], indirect=True)
def test_host_own_address_lifted_by_allow_private(airlock, host_service, tmp_path):
    """The operator may still name the address on purpose."""
    addr = own_public_address()
    if addr is None:
        pytest.skip("no interface of this host holds an address outside the private ranges")
    port = host_service.port
    ws = airlock.make_dir()
    (ws / "probe.py").write_text(PROBE)
    p = airlock.run(["run", "-q", "-w", ws, "--allow-private", addr,
                     "--allow", f"svc.test:{port}", "--host", f"svc.test={addr}",
                     "--allow", f"[::ffff:{addr}]:{port}",
                     "--", "python3", "/workspace/probe.py", "svc.test", str(port), addr],
                    timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert "HOSTSERVICE" in out["proxy"], out
    assert "HOSTSERVICE" in out["mapped"], out
