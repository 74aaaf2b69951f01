# SPDX-License-Identifier: Apache-2.0
"""A sentinel's value reflected back, compressed.

A route with no `inject` of its own still carries a sentinel's value when
the sentinel lists the route's host (the GitHub recipe of docs/network.md:
a terminated route and a sentinel, no inject; the sentinel may stand in
any field). The gate scrubs that value
from the answer, which it can do only in a plain body. The sandbox asks for
gzip; an upstream that echoes its request (a debug endpoint, an error page)
then compresses the value where no scrubber sees it, and the sandbox
decompresses the secret. The gate must ask for an unencoded answer for such
a route too, and refuse one that comes compressed anyway."""

import gzip
import json
import os
import socketserver

import pytest
from reflectlib import read_request, serving

SECRET = "ghp_refl7c2Q9xV3kT0mB5sN8aW1yE4uR6iO"
MASK = 0x5A


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        req = read_request(self.rfile)
        if req is None:
            return
        _, path, fields = req
        headers = [(k.lower(), v) for k, v in fields]
        self.server.seen.append(dict(headers))
        body = json.dumps({"headers": headers}).encode()
        wants = "gzip" in dict(headers).get("accept-encoding", "")
        enc = ""
        if wants or path.endswith("/always"):
            body = gzip.compress(body)
            enc = "Content-Encoding: gzip\r\n"
        head = (f"HTTP/1.1 200 OK\r\n{enc}Content-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n")
        self.connection.sendall(head.encode() + body)


@pytest.fixture
def upstream():
    with serving(Handler) as srv:
        yield srv


CLIENT = r"""
import gzip, http.client, json, os, sys
key = bytes(int(sys.argv[1][i:i + 2], 16) ^ 0x5A for i in range(0, len(sys.argv[1]), 2))
token = os.environ["GH_TOKEN"]
out = {"placeholder": token.startswith("airlock-sentinel-")}
for path in ("/echo/asks", "/echo/always"):
    c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=20)
    c.request("GET", path, headers={"X-Gh-Token": "token " + token,
                                    "Accept-Encoding": "gzip"})
    r = c.getresponse()
    body = r.read()
    enc = r.getheader("Content-Encoding", "")
    if enc == "gzip":
        body = gzip.decompress(body)
    out[path] = {"status": r.status, "encoding": enc, "leak": key in body,
                 "denied": r.getheader("X-Airlock-Denied") or r.getheader("X-Airlock-Error")}
print(json.dumps(out))
"""


@pytest.mark.parametrize("airlock", ["root"], indirect=True)
def test_sentinel_route_answer_is_never_compressed_past_the_scrubber(airlock, upstream,
                                                                      tmp_path):
    ws = airlock.make_dir()
    (ws / "client.py").write_text(CLIENT)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps({"network": {
        "allowPrivate": ["127.0.0.0/8"],
        "hosts": {"echo.test": "127.0.0.1"},
        "routes": [{"name": "echo", "upstream": f"http://echo.test:{upstream.port}"}],
        "sentinels": [{"env": "GH_TOKEN", "secret": "GH_TOKEN", "hosts": ["echo.test"]}],
    }}))
    masked = bytes(b ^ MASK for b in SECRET.encode()).hex()
    env = dict(os.environ, GH_TOKEN=SECRET)
    p = airlock.run(["run", "-q", "-w", ws, "-p", pol, "--", "python3", "/workspace/client.py",
                     masked], timeout=60, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["placeholder"], out
    # The sentinel was replaced on the way out: the upstream got the value.
    assert any(h.get("x-gh-token") == "token " + SECRET for h in upstream.seen), upstream.seen
    # Asked for identity, so the echo is plain and scrubbed.
    asks = out["/echo/asks"]
    assert not asks["leak"], out
    assert asks["status"] == 200 and asks["encoding"] == "", out
    assert all("accept-encoding" not in h or "gzip" not in h["accept-encoding"]
               for h in upstream.seen), upstream.seen
    # Compressed anyway: refused, never passed on.
    always = out["/echo/always"]
    assert not always["leak"], out
    assert always["status"] == 502, out
