# SPDX-License-Identifier: Apache-2.0
"""Routes end to end: a sandboxed script calls http://127.0.0.1:8080/model/...
and the gate forwards it over TLS (a throwaway test CA) to an upstream on the
host's 127.0.0.1, with the client's own credentials stripped and the host's
key and billing headers injected. The upstream runs in this process and
remembers every request it saw; what it answers holds header names only, so
that nothing it echoes could carry the key back into the sandbox."""

import hashlib
import http.server
import json
import time

import pytest

from tlslib import Server, make_pki, read_body, serve

SECRET = "sk-route-7c1e9a52d48b36f0e2a4"
CALL_ID = "call-123"
EVENTS = 5
EVENT_GAP = 0.3


class Upstream(Server):
    def __init__(self, cert, key):
        super().__init__(Handler, cert, key)
        self.stream_done = []


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _handle(self):
        body = read_body(self)
        self.server.seen.append({"method": self.command, "path": self.path,
                                 "headers": [(k.lower(), v) for k, v in self.headers.items()],
                                 "body": body.decode(errors="replace")})
        if self.path == "/stream":
            return self._stream()
        key = self.headers.get("x-api-key", "")
        echo = json.dumps({
            "method": self.command,
            "path": self.path,
            "headerNames": sorted(k.lower() for k in self.headers.keys()),
            "apiKeySha256": hashlib.sha256(key.encode()).hexdigest(),
            "bodyBytes": len(body),
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(echo)))
        self.send_header("x-litellm-call-id", CALL_ID)
        self.end_headers()
        self.wfile.write(echo)

    def _stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-litellm-call-id", CALL_ID)
        self.end_headers()
        for i in range(EVENTS):
            data = f"data: {{\"n\": {i}}}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            if i < EVENTS - 1:
                time.sleep(EVENT_GAP)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.server.stream_done.append(time.time())

    do_GET = _handle
    do_POST = _handle


@pytest.fixture(scope="module")
def pki():
    return make_pki("airlock-routes-pki-")


@pytest.fixture(scope="module")
def upstream(pki):
    srv = serve(Upstream(pki.dir / "server.pem", pki.dir / "server.key"))
    yield srv
    srv.shutdown()


@pytest.fixture(scope="module")
def rogue(pki):
    srv = serve(Upstream(pki.dir / "rogue.pem", pki.dir / "rogue.key"))
    yield srv
    srv.shutdown()


# Runs inside the sandbox. The needle is the secret reversed, so that this
# file itself does not hold it.
CLIENT = r"""
import http.client, json, os, sys, time

needle = sys.argv[1][::-1].encode()
out = {}
c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=30)
c.request("POST", "/model/v1/messages", body=json.dumps({"model": "m", "messages": []}),
          headers={"x-api-key": "client-key", "x-litellm-end-user-id": "u1",
                   "Content-Type": "application/json"})
r = c.getresponse()
raw = r.read()
out["status"] = r.status
out["headers"] = {k.lower(): v for k, v in r.getheaders()}
out["echo"] = json.loads(raw)
out["needleInAnswer"] = needle in raw or any(needle in v.encode() for v in out["headers"].values())

c.request("GET", "/model/stream", headers={"x-api-key": "client-key"})
r = c.getresponse()
events = []
while True:
    line = r.readline()
    if not line:
        break
    if line.startswith(b"data:"):
        events.append([line.decode().strip(), time.time()])
out["streamStatus"] = r.status
out["events"] = events

found = []
with open("/proc/self/environ", "rb") as f:
    if needle in f.read():
        found.append("/proc/self/environ")
if any(needle in v.encode() for v in os.environ.values()):
    found.append("env")
for top in ("/workspace", "/tmp", os.environ.get("HOME", "/"), "/etc", "/run", "/dev/shm"):
    for root, dirs, files in os.walk(top):
        for name in files:
            p = os.path.join(root, name)
            try:
                with open(p, "rb") as f:
                    if needle in f.read(1 << 20):
                        found.append(p)
            except OSError:
                pass
out["secretFound"] = found
print(json.dumps(out))
"""

ROGUE_CLIENT = r"""
import http.client, json
out = {}
for route in ("rogue", "misnamed"):
    c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=30)
    c.request("GET", f"/{route}/v1/messages")
    r = c.getresponse()
    out[route] = {"status": r.status, "headers": {k.lower(): v for k, v in r.getheaders()},
                  "body": r.read().decode()}
c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=30)
c.request("GET", "/unknown/x")
r = c.getresponse()
out["unknown"] = {"status": r.status, "headers": {k.lower(): v for k, v in r.getheaders()}}
print(json.dumps(out))
"""


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def _setup(airlock, pki, routes, script):
    ws = airlock.make_dir()
    (ws / "client.py").write_text(script)
    airlock.chown(ws)
    d = airlock.make_dir("routes")
    sf = d / "secrets.env"
    sf.write_text(f"API_KEY={SECRET}\n")
    sf.chmod(0o600)
    (d / "policy.json").write_text(json.dumps({"network": {"routes": routes}}))
    airlock.chown(d)
    return ws, d, sf


def _run(airlock, ws, d, sf, *extra):
    return airlock.run([
        "run", "-q", "-w", ws, "--audit", d / "audit.jsonl", "-p", d / "policy.json",
        "--secrets", sf,
        "--host", "upstream.test=127.0.0.1", "--host", "other.test=127.0.0.1",
        "--allow-private", "127.0.0.0/8",
        *extra,
        "--", "python3", "/workspace/client.py", SECRET[::-1],
    ], timeout=90)


def test_route_call_end_to_end(airlock, pki, upstream):
    upstream.seen.clear()
    upstream.stream_done.clear()
    routes = [{"name": "model", "upstream": "https://upstream.test", "caFile": str(pki.ca),
               "record": ["x-litellm-call-id"], "strip": ["x-litellm-*"]}]
    ws, d, sf = _setup(airlock, pki, routes, CLIENT)
    p = _run(airlock, ws, d, sf,
             "--route", f"model=https://upstream.test:{upstream.port}",
             "--inject", "model:x-api-key=${secret:API_KEY}",
             "--inject", 'model:x-litellm-spend-logs-metadata={"sandbox":"${sandbox.id}","account":"${account}"}',
             "--account", "acct-7")
    assert p.returncode == 0, p.stderr
    assert SECRET not in p.stdout + p.stderr
    assert "[REDACTED]" not in p.stdout, "the sandbox saw the secret and printed it"
    out = json.loads(p.stdout)

    events = _lines(d / "audit.jsonl")
    sandbox = events[0]["sandbox"]

    # What the upstream saw: the host's key and billing header, never the
    # client's own key or end-user header.
    assert [(s["method"], s["path"]) for s in upstream.seen] == [("POST", "/v1/messages"),
                                                                 ("GET", "/stream")]
    for s in upstream.seen:
        h = s["headers"]
        names = [k for k, _ in h]
        assert ("x-api-key", SECRET) in h
        assert names.count("x-api-key") == 1
        assert "x-litellm-end-user-id" not in names
        assert "client-key" not in json.dumps(h)
        meta = json.loads(dict(h)["x-litellm-spend-logs-metadata"])
        assert meta == {"sandbox": sandbox, "account": "acct-7"}
        assert dict(h)["host"] == f"upstream.test:{upstream.port}"
    assert upstream.seen[0]["body"] == json.dumps({"model": "m", "messages": []})

    # What the sandbox got back: the echo's key digest is the secret's, and
    # nothing it holds, nor its environment or files, holds the secret.
    assert out["status"] == 200
    echo = out["echo"]
    assert echo["apiKeySha256"] == hashlib.sha256(SECRET.encode()).hexdigest()
    assert "x-api-key" in echo["headerNames"]
    assert "x-litellm-end-user-id" not in echo["headerNames"]
    assert out["headers"]["x-litellm-call-id"] == CALL_ID
    assert not out["needleInAnswer"]
    assert out["secretFound"] == []

    # The stream arrived event by event, before the upstream had finished.
    assert out["streamStatus"] == 200
    got = out["events"]
    assert [e[0] for e in got] == [f'data: {{"n": {i}}}' for i in range(EVENTS)]
    times = [e[1] for e in got]
    assert times[-1] - times[0] >= 2 * EVENT_GAP, times
    assert upstream.stream_done and times[0] < upstream.stream_done[0] - 2 * EVENT_GAP

    # The audit log verifies and holds both calls with the recorded call id.
    v = airlock.run(["audit", "verify", d / "audit.jsonl"])
    assert v.returncode == 0, v.stdout + v.stderr
    calls = [e for e in events if e["kind"] == "route.call"]
    assert [(c["method"], c["path"]) for c in calls] == [("POST", "/v1/messages"),
                                                         ("GET", "/stream")]
    for c in calls:
        assert c["route"] == "model"
        assert c["status"] == 200
        assert c["decision"] == "allow" and c["reason"] is None
        assert c["recorded"] == {"x-litellm-call-id": CALL_ID}
        assert c["upstream"] == f"https://upstream.test:{upstream.port}"
        assert c["address"] == "127.0.0.1"
        assert c["bytesUp"] > 0 and c["bytesDown"] > 0
        assert c["durationMs"] >= 0
    assert calls[1]["durationMs"] >= 1000 * (EVENTS - 1) * EVENT_GAP * 0.9
    assert SECRET not in (d / "audit.jsonl").read_text()

    # One byte changed is caught.
    data = bytearray((d / "audit.jsonl").read_bytes())
    i = data.index(b'"route.call"')
    data[i + 2] ^= 0x01
    (d / "audit.jsonl").write_bytes(bytes(data))
    v = airlock.run(["audit", "verify", d / "audit.jsonl"])
    assert v.returncode == 1, v.stdout + v.stderr


def test_untrusted_upstream_certificate_is_502(airlock, pki, upstream, rogue):
    rogue.seen.clear()
    routes = [
        # Signed by a CA the route does not trust.
        {"name": "rogue", "upstream": f"https://upstream.test:{rogue.port}", "caFile": str(pki.ca)},
        # A trusted certificate, but for another name.
        {"name": "misnamed", "upstream": f"https://other.test:{upstream.port}", "caFile": str(pki.ca)},
    ]
    ws, d, sf = _setup(airlock, pki, routes, ROGUE_CLIENT)
    seen_before = len(upstream.seen)
    p = _run(airlock, ws, d, sf, "--inject", "rogue:x-api-key=${secret:API_KEY}")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for route in ("rogue", "misnamed"):
        assert out[route]["status"] == 502, out
        assert out[route]["headers"]["x-airlock-error"] == "upstream_tls", out
        assert "certificate" in out[route]["body"], out
    assert out["unknown"]["status"] == 404
    assert out["unknown"]["headers"]["x-airlock-denied"] == "unknown_route"
    assert rogue.seen == [] and len(upstream.seen) == seen_before

    calls = [e for e in _lines(d / "audit.jsonl") if e["kind"] == "route.call"]
    assert [(c["route"], c["status"], c["reason"]) for c in calls] == [
        ("rogue", 502, "upstream_tls"), ("misnamed", 502, "upstream_tls"),
        ("unknown", 404, "unknown_route")]
    assert airlock.run(["audit", "verify", d / "audit.jsonl"]).returncode == 0
