# SPDX-License-Identifier: Apache-2.0
"""Reflected secrets, the corners an echoing upstream can still use.

A route injects a real key; its upstream (a raw socket server on the host's
127.0.0.1) puts the key where the gate's scrubbers did not look:
- a response field's *name* (the key is all token characters, so it is a
  valid field name);
- the Content-Encoding value of an answer the gate refuses as encoded, which
  the gate's own 502 message quoted back to the sandbox;
- an interim (1xx) answer's field and the status line's reason (held).

The sandboxed client gets the key XOR-masked in argv, rebuilds it, and
reports only whether anything it received held the key in a form it
recognises, so the host's output redaction cannot hide a leak."""

import html
import json
import socketserver

import pytest
from reflectlib import read_request, serving

# Token characters only: a valid HTTP field name.
SECRET = "sk-tok_3c9Q.a7e1d0b5f2K8vY!x"
MASK = 0x5A


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        req = read_request(self.rfile)
        if req is None:
            return
        _, path, fields = req
        headers = {k.lower(): v for k, v in fields}
        key = headers.get("x-api-key", "")
        self.server.seen.append(key)
        body = b"ok\n"
        if path.endswith("/html"):
            # An error page that escapes what it echoes, as template
            # engines do; cut into tiny writes.
            page = (f"<p>invalid key: {html.escape(key)}</p>"
                    f"<p>{key.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&#62;')}"
                    f"</p>").encode()
            head = (f"HTTP/1.1 401 Unauthorized\r\nContent-Length: {len(page)}\r\n"
                    "Connection: close\r\n\r\n")
            data = head.encode() + page
            for i in range(0, len(data), 3):
                self.connection.sendall(data[i:i + 3])
            return
        if path.endswith("/name"):
            head = (f"HTTP/1.1 200 OK\r\nX-{key}: 1\r\n{key}: 2\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        elif path.endswith("/coding"):
            head = (f"HTTP/1.1 200 OK\r\nContent-Encoding: x-{key}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        elif path.endswith("/te"):
            head = (f"HTTP/1.1 200 OK\r\nTransfer-Encoding: {key}, chunked\r\n"
                    "Connection: close\r\n\r\n")
            body = b"3\r\nok\n\r\n0\r\n\r\n"
        else:  # /interim
            head = (f"HTTP/1.1 103 Early {key}\r\nLink: <{key}>\r\n\r\n"
                    f"HTTP/1.1 200 Fine {key}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        self.connection.sendall(head.encode() + body)


@pytest.fixture(scope="module")
def upstream():
    with serving(Handler) as srv:
        yield srv


CLIENT = r"""
import json, socket, sys

key = bytes(int(sys.argv[1][i:i + 2], 16) ^ 0x5A for i in range(0, len(sys.argv[1]), 2))
out = {}
for path in ("/name", "/coding", "/te", "/interim"):
    s = socket.create_connection(("127.0.0.1", 8080), timeout=10)
    s.sendall(b"GET /echo" + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    low = data.lower()
    out[path] = {"status": data.split(b"\r\n", 1)[0].decode(errors="replace"),
                 "leak": key.lower() in low or key.hex().encode() in low,
                 "len": len(data)}
print(json.dumps(out))
"""


def test_reflected_key_in_field_names_and_gate_messages(airlock, upstream):
    upstream.seen.clear()
    ws = airlock.make_dir()
    (ws / "client.py").write_text(CLIENT)
    airlock.chown(ws)
    d = airlock.make_dir("reflect2")
    sf = d / "secrets.env"
    sf.write_text(f"API_KEY='{SECRET}'\n")
    sf.chmod(0o600)
    airlock.chown(d)
    masked = bytes(b ^ MASK for b in SECRET.encode()).hex()
    p = airlock.run([
        "run", "-q", "-w", ws, "--audit", d / "audit.jsonl", "--secrets", sf,
        "--host", "upstream.test=127.0.0.1", "--allow-private", "127.0.0.0/8",
        "--route", f"echo=http://upstream.test:{upstream.port}",
        "--inject", "echo:x-api-key=${secret:API_KEY}",
        "--", "python3", "/workspace/client.py", masked,
    ], timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    # The upstream got the key each time.
    assert upstream.seen and all(k == SECRET for k in upstream.seen), upstream.seen
    for path, r in out.items():
        assert not r["leak"], (path, r)
    assert out["/name"]["status"].startswith("HTTP/1.1 200"), out
    assert out["/interim"]["status"].startswith("HTTP/1.1 103"), out
    for path in ("/coding", "/te"):
        assert out[path]["status"].startswith("HTTP/1.1 502"), (path, out[path])
    assert SECRET not in (d / "audit.jsonl").read_text()


HTML_SECRET = "pw\"<K&9>'zQ-r3fl-7c2Q9xV3"

HTML_CLIENT = r"""
import html, json, socket, sys

key = bytes(int(sys.argv[1][i:i + 2], 16) ^ 0x5A for i in range(0, len(sys.argv[1]), 2)).decode()
s = socket.create_connection(("127.0.0.1", 8080), timeout=10)
s.sendall(b"GET /echo/html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
text = html.unescape(data.decode(errors="replace"))
print(json.dumps({"status": data.split(b"\r\n", 1)[0].decode(), "leak": key in text,
                  "stars": data.count(b"*")}))
"""


def test_reflected_key_html_escaped_in_an_error_page(airlock, upstream):
    upstream.seen.clear()
    ws = airlock.make_dir()
    (ws / "client.py").write_text(HTML_CLIENT)
    airlock.chown(ws)
    d = airlock.make_dir("reflect-html")
    sf = d / "secrets.env"
    sf.write_text(json.dumps({"API_KEY": HTML_SECRET}))
    sf.chmod(0o600)
    airlock.chown(d)
    masked = bytes(b ^ MASK for b in HTML_SECRET.encode()).hex()
    p = airlock.run([
        "run", "-q", "-w", ws, "--secrets", sf,
        "--host", "upstream.test=127.0.0.1", "--allow-private", "127.0.0.0/8",
        "--route", f"echo=http://upstream.test:{upstream.port}",
        "--inject", "echo:x-api-key=${secret:API_KEY}",
        "--", "python3", "/workspace/client.py", masked,
    ], timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert upstream.seen == [HTML_SECRET], upstream.seen
    out = json.loads(p.stdout)
    assert out["status"].startswith("HTTP/1.1 401"), out
    assert not out["leak"], out
    assert out["stars"] >= 2 * len(HTML_SECRET), out
