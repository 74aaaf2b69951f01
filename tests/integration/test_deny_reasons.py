# SPDX-License-Identifier: Apache-2.0
"""Refusals the agent can act on: the HTTP proxy's 403 says why and what to
ask for (body, X-Airlock-Denied, X-Airlock-Rule, X-Airlock-Ask) and the
policy's network.denyReasons text for the host (X-Airlock-Reason); SOCKS5
answers its code and the audit has the reason; a refused tool call's
safeMessage says what to ask for."""

import json

PROBE = r'''
import json, socket, struct, sys
out = []
def http(host, port):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(("GET http://%s:%d/ HTTP/1.1\r\nHost: x\r\n\r\n" % (host, port)).encode())
    d = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        d += c
    head, _, body = d.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    hdrs = dict(l.split(": ", 1) for l in lines[1:])
    return {"status": int(lines[0].split()[1]), "headers": hdrs, "body": body.decode()}
def socks(host, port):
    s = socket.create_connection(("127.0.0.1", 1080), timeout=10)
    s.sendall(b"\x05\x01\x00"); s.recv(2)
    h = host.encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", port))
    return s.recv(10)[1]
print(json.dumps({
    "unlisted": http("api.corp.example", 443),
    "port": http("ok.example", 8443),
    "rule": http("bad.example", 80),
    "socks": socks("api.corp.example", 443),
}))
'''


def test_refusals_say_why_and_what_to_ask_for(airlock):
    d = airlock.make_dir("deny")
    pol = d / "policy.json"
    pol.write_text(json.dumps({"network": {
        "mode": "gated", "allow": ["ok.example"], "deny": ["bad.example"],
        "denyReasons": {"*.corp.example": "internal hosts are off limits; ask #infra",
                        "bad.example": "known exfiltration endpoint"}}}))
    airlock.chown(d)
    p = airlock.run(["run", "-q", "-p", pol, "--audit", d / "audit.jsonl", "--",
                     "python3", "-c", PROBE], timeout=60)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)

    u = r["unlisted"]
    assert u["status"] == 403
    assert u["headers"]["X-Airlock-Denied"] == "not_allowed"
    assert u["headers"]["X-Airlock-Rule"] == "none"
    assert u["headers"]["X-Airlock-Ask"] == "network.allow api.corp.example:443"
    assert u["headers"]["X-Airlock-Reason"] == "internal hosts are off limits; ask #infra"
    assert "why: no network.allow rule names this host" in u["body"]
    assert 'ask for: network.allow api.corp.example:443' in u["body"]
    assert "note: internal hosts are off limits; ask #infra" in u["body"]

    pt = r["port"]
    assert pt["headers"]["X-Airlock-Denied"] == "port_not_allowed"
    assert pt["headers"]["X-Airlock-Ask"] == "network.allow ok.example:8443"
    assert "X-Airlock-Reason" not in pt["headers"]

    rule = r["rule"]
    assert rule["headers"]["X-Airlock-Denied"] == "denied_by_rule"
    assert rule["headers"]["X-Airlock-Rule"] == "bad.example"
    assert "X-Airlock-Ask" not in rule["headers"], "a deny rule is not something to ask around"
    assert "deny rules beat allow rules" in rule["body"]
    assert rule["headers"]["X-Airlock-Reason"] == "known exfiltration endpoint"

    assert r["socks"] == 2
    log = [json.loads(line) for line in (d / "audit.jsonl").read_text().splitlines()]
    socks = [e for e in log if e["kind"] == "net.decision" and e.get("protocol") == "socks5"]
    assert socks and socks[0]["reason"] == "not_allowed" and socks[0]["status"] == 2, socks


def test_bad_deny_reasons_are_refused(airlock):
    d = airlock.make_dir("denybad")
    pol = d / "policy.json"
    pol.write_text(json.dumps({"network": {"denyReasons": {"x.example": "a\u0007b"}}}))
    airlock.chown(d)
    p = airlock.run(["run", "-q", "-p", pol, "--", "true"], check_setup=False)
    assert p.returncode == 125 and "network.denyReasons.x.example" in p.stderr, p.stderr


def test_refused_tool_says_what_to_ask_for(airlock):
    p = airlock.run(["run", "-q", "--tool", "core.time", "--", "sh", "-c",
                     "airlock-tool call no.such x=1"], check_setup=False)
    assert p.returncode != 0
    assert "add it to tools.allow" in p.stderr, p.stderr
