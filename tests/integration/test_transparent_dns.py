# SPDX-License-Identifier: Apache-2.0
"""Transparent mode's name server: AAAA questions and DNS over TCP. Only
IPv4 addresses are ever offered (IPv6 connections are refused), so an AAAA
question about a name that passes is answered with no records, and one
about a name that does not (a private address, not allowed) is NXDOMAIN,
recorded as the A question is. A client that falls back to TCP gets the
same answers on 127.0.0.1:53."""

import json

import pytest

import netns
from netns import HTTP_PORT, SERVER_ADDR
from test_transparent import NAME, run


from netns import net  # noqa: E402,F401  (the test network, one per module)


CLIENT = r'''
import json, random, socket, struct, sys

def query(name, qtype, tcp=False):
    qid = random.randrange(65536)
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack("!HH", qtype, 1)
    if tcp:
        s = socket.create_connection(("127.0.0.1", 53), timeout=10)
        s.sendall(struct.pack("!H", len(q)) + q)
        data = b""
        while len(data) < 2 or len(data) < 2 + struct.unpack("!H", data[:2])[0]:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        a = data[2:]
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(10)
        s.sendto(q, ("127.0.0.1", 53))
        a = s.recv(4096)
    rid, flags, qd, an = struct.unpack("!HHHH", a[:8])
    assert rid == qid
    addrs = []
    pos = len(q)
    for _ in range(an):
        rtype, _, _, rdlen = struct.unpack("!HHIH", a[pos + 2:pos + 12])
        rd = a[pos + 12:pos + 12 + rdlen]
        addrs.append(socket.inet_ntop(socket.AF_INET if rtype == 1 else socket.AF_INET6, rd))
        pos += 12 + rdlen
    return {"rcode": flags & 15, "addrs": addrs}

name = sys.argv[1]
out = {
    "a": query(name, 1),
    "aaaa": query(name, 28),
    "mx": query(name, 15),
    "aaaa_private": query("loop.test", 28),
    "aaaa_unlisted": query("unlisted.test", 28),
    "tcp_a": query(name, 1, tcp=True),
    "tcp_aaaa": query(name, 28, tcp=True),
    "tcp_unlisted": query("unlisted2.test", 1, tcp=True),
}
try:
    out["gai6"] = [a[4][0] for a in socket.getaddrinfo(name, 80, socket.AF_INET6)]
except socket.gaierror as e:
    out["gai6"] = e.errno
out["gai"] = sorted({a[4][0] for a in socket.getaddrinfo(name, 80)})
print(json.dumps(out))
'''


def test_aaaa_and_tcp_answers(airlock, net):
    r = run(airlock, net, f"python3 /workspace/q.py {NAME}",
            "--host", "loop.test=127.0.0.1", "--allow", f"loop.test:{HTTP_PORT}",
            files={"q.py": CLIENT}, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["a"] == {"rcode": 0, "addrs": [SERVER_ADDR]}, out
    assert out["aaaa"] == {"rcode": 0, "addrs": []}, out
    assert out["mx"] == {"rcode": 0, "addrs": []}, out
    assert out["aaaa_private"] == {"rcode": 3, "addrs": []}, out
    assert out["aaaa_unlisted"] == {"rcode": 3, "addrs": []}, out
    assert out["tcp_a"] == {"rcode": 0, "addrs": [SERVER_ADDR]}, out
    assert out["tcp_aaaa"] == {"rcode": 0, "addrs": []}, out
    assert out["tcp_unlisted"] == {"rcode": 3, "addrs": []}, out
    assert isinstance(out["gai6"], int), out
    assert out["gai"] == [SERVER_ADDR], out
    denied = {(d["host"], d["reason"]) for d in r.of("dns", "deny")}
    assert ("loop.test", "private_address") in denied, r.records
    assert ("unlisted.test", "not_allowed") in denied, r.records
    assert ("unlisted2.test", "not_allowed") in denied, r.records
