# SPDX-License-Identifier: Apache-2.0
"""Reflected secrets: a route's upstream that echoes its request (a debug
endpoint, an error page) must not hand the injected key to the sandbox, in
a response field or body, whole or split across tiny writes, framed by
Content-Length, chunked or by the close, raw or in an encoded form, nor
compressed. The upstream is a raw socket server on the host's 127.0.0.1 so
that it controls exactly how its answer is cut into writes.

The sandboxed client gets the key XOR-masked in argv (a form no redactor
knows), rebuilds it, and reports only whether any response held the key in
a recognisable form: the host's own output redaction must not be what hides
a leak from the test."""

import base64
import gzip
import json
import socket
import socketserver
import time
import urllib.parse

import pytest
from reflectlib import read_request, serving

SECRET = "sk-refl/3c9+Q_a7e1d0b5f2=K8vY"
MASK = 0x5A


def _forms_text(key):
    """The encoded forms an echoing upstream might carry the key in."""
    pre = "Authorization: Bearer "
    b64s = []
    for n in range(3):
        plain = ("x" * n + pre + key + "\r\n").encode()
        b64s.append(base64.b64encode(plain).decode())
        b64s.append(base64.urlsafe_b64encode(plain).decode())
    partial = "".join("%%%02X" % ord(c) if i % 2 else c for i, c in enumerate(key))
    # JSON as some servers write it: "\/" for "/", and "\u00XX" escapes.
    php = key.replace("/", "\\/")
    uesc = "".join("\\u%04x" % ord(c) if i % 3 == 0 else c for i, c in enumerate(key))
    raw_json = '{"php": "' + php + '", "uescape": "' + uesc + '"}\n'
    return raw_json + json.dumps({
        "raw": key,
        "hex": key.encode().hex(),
        "HEX": key.encode().hex().upper(),
        "url": urllib.parse.quote(key, safe=""),
        "partial": partial,
        "b64": b64s,
        "b64url": urllib.parse.quote(base64.b64encode(key.encode()).decode(), safe=""),
        "rev": key[::-1],
    })


class Handler(socketserver.StreamRequestHandler):
    def _send(self, data, piece=3):
        # Tiny writes, so that the gate reads the key split across reads.
        for i in range(0, len(data), piece):
            self.connection.sendall(data[i:i + piece])
            time.sleep(0.0005)

    def handle(self):
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req = read_request(self.rfile)
        if req is None:
            return
        _, path, headers = req
        hd = {k.lower(): v for k, v in headers}
        self.server.seen.append({"path": path, "headers": headers})
        key = hd.get("x-api-key", "")
        raw_head = "".join(f"{k}: {v}\r\n" for k, v in headers)
        body = (json.dumps({"headers": headers}) + "\n" + raw_head + _forms_text(key)).encode()
        reflect = (f"X-Echo: {key}\r\n"
                   f"X-Echo-B64: {base64.b64encode(key.encode()).decode()}\r\n"
                   f"X-Echo-Hex: {key.encode().hex()}\r\n")
        if path == "/length":
            head = f"HTTP/1.1 200 OK\r\n{reflect}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            self._send(head.encode() + body)
        elif path == "/chunked":
            head = f"HTTP/1.1 200 OK\r\n{reflect}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            self._send(head.encode())
            for i in range(0, len(body), 5):
                piece = body[i:i + 5]
                self._send(b"%x\r\n%s\r\n" % (len(piece), piece), piece=4)
            self._send(b"0\r\n\r\n")
        elif path == "/close":
            head = f"HTTP/1.1 200 OK\r\n{reflect}Connection: close\r\n\r\n"
            self._send(head.encode() + body, piece=7)
        elif path == "/error":
            head = f"HTTP/1.1 500 Internal Server Error\r\n{reflect}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            self._send(head.encode() + body, piece=2)
        elif path == "/te-gzip":
            # A transfer coding the gate would strip, leaving gzip bytes.
            z = gzip.compress(body)
            head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n"
            self._send(head.encode() + b"%x\r\n%s\r\n0\r\n\r\n" % (len(z), z), piece=64)
        elif path in ("/gzip", "/gzip-always"):
            wants = "gzip" in hd.get("accept-encoding", "")
            enc = ""
            if wants or path == "/gzip-always":
                body = gzip.compress(body)
                enc = "Content-Encoding: gzip\r\n"
            head = f"HTTP/1.1 200 OK\r\n{enc}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            self._send(head.encode() + body, piece=64)


@pytest.fixture(scope="module")
def upstream():
    with serving(Handler) as srv:
        yield srv


CLIENT = r"""
import base64, gzip, http.client, json, re, sys, urllib.parse

key = bytes(int(sys.argv[1][i:i + 2], 16) ^ 0x5A for i in range(0, len(sys.argv[1]), 2))

def cores(k):
    # The base64 characters the key gives at each offset, both alphabets.
    out = []
    for a in range(3):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            e = enc(b"\0" * a + k + b"\0\0").decode()
            first = (8 * a + 5) // 6
            last = (8 * (a + len(k))) // 6
            out.append(e[first:last].encode())
    return out

def unjson(t):
    t = re.sub(rb"\\u00([0-7][0-9a-fA-F])", lambda m: bytes([int(m.group(1), 16)]), t)
    return t.replace(b"\\/", b"/").replace(b"\\\\", b"\\")

def found(data):
    hits = []
    texts = [data, urllib.parse.unquote_to_bytes(data), unjson(data)]
    for t in texts:
        if key in t: hits.append("raw")
        if key.hex().encode() in t.lower(): hits.append("hex")
        if key[::-1] in t: hits.append("reversed")
        for c in cores(key):
            if c in t: hits.append("base64")
    return sorted(set(hits))

out = {}
for path in ("/length", "/chunked", "/close", "/error", "/gzip", "/gzip-always", "/te-gzip"):
    c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=30)
    c.request("GET", "/echo" + path, headers={"x-api-key": "client-key", "Accept-Encoding": "gzip"})
    r = c.getresponse()
    body = r.read()
    heads = r.getheaders()
    hblob = "\n".join(f"{k}: {v}" for k, v in heads).encode()
    enc = r.getheader("Content-Encoding", "")
    if enc == "gzip":
        body = gzip.decompress(body)
    out[path] = {
        "status": r.status,
        "encoding": enc,
        "error": r.getheader("X-Airlock-Error"),
        "length": r.getheader("Content-Length"),
        "bodyLen": len(body),
        "stars": body.count(b"*"),
        "sawHeaderName": b"x-api-key" in body.lower(),
        "leaks": found(body) + [h + "-in-head" for h in found(hblob)],
    }
print(json.dumps(out))
"""


def test_reflected_key_never_reaches_the_sandbox(airlock, upstream):
    upstream.seen.clear()
    ws = airlock.make_dir()
    (ws / "client.py").write_text(CLIENT)
    airlock.chown(ws)
    d = airlock.make_dir("reflect")
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
    ], timeout=90)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)

    for path in ("/length", "/chunked", "/close", "/error", "/gzip"):
        r = out[path]
        assert r["leaks"] == [], (path, r)
        assert r["sawHeaderName"], (path, r)
        assert r["stars"] >= len(SECRET), (path, r)
        assert r["encoding"] == "", (path, r)
    assert out["/length"]["status"] == 200
    assert int(out["/length"]["length"]) == out["/length"]["bodyLen"]
    assert out["/error"]["status"] == 500
    # Compressed although identity was asked for: refused, never passed on.
    for path in ("/gzip-always", "/te-gzip"):
        r = out[path]
        assert r["status"] == 502 and r["error"] == "encoded_response", (path, r)
        assert r["leaks"] == []
    assert SECRET not in (d / "audit.jsonl").read_text()

    # The upstream did get the key, and asked for nothing compressed.
    assert upstream.seen
    for s in upstream.seen:
        h = {k.lower(): v for k, v in s["headers"]}
        assert h["x-api-key"] == SECRET
        assert h.get("accept-encoding") == "identity", s["headers"]


# Prints the key in every form an agent might use to smuggle it out through
# its own output; the same forms come back in a recorded response field.
PRINTER = r"""
import base64, sys, urllib.parse, http.client

key = bytes(int(sys.argv[1][i:i + 2], 16) ^ 0x5A for i in range(0, len(sys.argv[1]), 2))
forms = [key.hex(), key.hex().upper(), urllib.parse.quote(key, safe=""),
         "".join("%%%02x" % b if i % 3 == 0 else chr(b) for i, b in enumerate(key)),
         key[::-1].decode()]
for pre in range(3):
    plain = b"x" * pre + b"token=" + key + b";"
    forms.append(base64.b64encode(plain).decode())
    forms.append(base64.urlsafe_b64encode(plain).decode())
for f in forms:
    print("out:", f, flush=True)
    print("err:", f, file=sys.stderr, flush=True)
c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=30)
c.request("GET", "/echo/length")
r = c.getresponse()
r.read()
print("status", r.status)
"""


def _leaks(text, key):
    import base64 as b64
    k = key.encode()
    hits = []
    for t in (text.encode(), urllib.parse.unquote_to_bytes(text)):
        if k in t:
            hits.append("raw")
        if k.hex().encode() in t.lower():
            hits.append("hex")
        if k[::-1] in t:
            hits.append("reversed")
        for a in range(3):
            for enc in (b64.b64encode, b64.urlsafe_b64encode):
                e = enc(b"\0" * a + k + b"\0\0")
                core = e[(8 * a + 5) // 6:(8 * (a + len(k))) // 6]
                if core in t:
                    hits.append("base64")
    return sorted(set(hits))


def test_encoded_forms_never_reach_output_or_audit(airlock, upstream):
    ws = airlock.make_dir()
    (ws / "printer.py").write_text(PRINTER)
    airlock.chown(ws)
    d = airlock.make_dir("forms")
    sf = d / "secrets.env"
    sf.write_text(f"API_KEY='{SECRET}'\n")
    sf.chmod(0o600)
    (d / "policy.json").write_text(json.dumps({"network": {"routes": [{
        "name": "echo", "upstream": f"http://upstream.test:{upstream.port}",
        "inject": {"x-api-key": "${secret:API_KEY}"},
        "record": ["x-echo", "x-echo-b64", "x-echo-hex"]}]}}))
    airlock.chown(d)
    masked = bytes(b ^ MASK for b in SECRET.encode()).hex()
    p = airlock.run([
        "run", "-q", "-w", ws, "--audit", d / "audit.jsonl", "--secrets", sf,
        "-p", d / "policy.json",
        "--host", "upstream.test=127.0.0.1", "--allow-private", "127.0.0.0/8",
        "--", "python3", "/workspace/printer.py", masked,
    ], timeout=90)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "status 200" in p.stdout
    assert p.stdout.count("out: ") == 11 and p.stderr.count("err: ") == 11
    assert _leaks(p.stdout, SECRET) == [], p.stdout
    assert _leaks(p.stderr, SECRET) == [], p.stderr
    assert p.stdout.count("[REDACTED]") >= 11, p.stdout
    audit = (d / "audit.jsonl").read_text()
    assert _leaks(audit, SECRET) == [], audit
    calls = [json.loads(line) for line in audit.splitlines() if '"route.call"' in line]
    assert calls and set(calls[0]["recorded"]) == {"x-echo", "x-echo-b64", "x-echo-hex"}
