# SPDX-License-Identifier: Apache-2.0
"""TLS termination for a route with "terminate": the sandbox's client talks
HTTPS to the upstream's own name through the gate's CONNECT proxy, with no
base URL changed. The gate answers the handshake with a leaf signed by the
sandbox's own CA (trusted inside through the CA variables and the bundle in
place of the system one), applies the route's rules and re-encrypts to the
real upstream (a throwaway test CA the route trusts). The secret and the
CA's key stay on the host."""

import http.server
import json

import pytest

from tlslib import Server, make_pki, serve, tls_server

SECRET = "sk-term-4f0b7d19a2c8e6531b9d"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.server.seen.append({"path": self.path,
                                 "headers": [(k.lower(), v) for k, v in self.headers.items()]})
        if self.path == "/reflect":
            # An upstream that echoes its request: the key must not come back.
            body = self.headers.get("x-api-key", "").encode()
        else:
            body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def pki():
    return make_pki("airlock-tls-pki-")


@pytest.fixture(scope="module")
def upstream(pki):
    srv = tls_server(pki, "server", Handler)
    yield srv
    srv.shutdown()


@pytest.fixture(scope="module")
def rogue(pki):
    srv = tls_server(pki, "rogue", Handler)
    yield srv
    srv.shutdown()


# Runs inside the sandbox with the gate's proxy variables: plain urllib over
# HTTPS_PROXY (a CONNECT), trusting what SSL_CERT_FILE names.
CLIENT = r"""
import json, os, ssl, subprocess, sys, urllib.error, urllib.request

port = sys.argv[1]
needle = sys.argv[2][::-1].encode()
out = {}

def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return {"status": r.status, "body": r.read().decode(errors="replace"),
                    "headers": {k.lower(): v for k, v in r.getheaders()}}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read().decode(errors="replace"),
                "headers": {k.lower(): v for k, v in e.headers.items()}}
    except Exception as e:
        return {"error": repr(e)}

base = f"https://upstream.test:{port}"
out["plain"] = get(base + "/v1/items?x=1", {"Authorization": "Bearer client-own-token"})
out["reflect"] = get(base + "/reflect")
out["rogue"] = get(sys.argv[3] + "/v1/items") if len(sys.argv) > 3 else None
out["env"] = {k: os.environ.get(k) for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
              "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS")}
bundle = open("/etc/ssl/certs/ca-certificates.crt").read()
out["bundleCerts"] = bundle.count("BEGIN CERTIFICATE")
# curl, with the same proxy and trust variables.
c = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                    base + "/v1/curl"], capture_output=True, text=True, timeout=30)
out["curl"] = c.stdout + c.stderr
# The same through the SOCKS5 listener.
c = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x",
                    "socks5h://127.0.0.1:1080", base + "/v1/socks"],
                   capture_output=True, text=True, timeout=30)
out["socks"] = c.stdout + c.stderr

found, keys = [], []
with open("/proc/self/environ", "rb") as f:
    if needle in f.read():
        found.append("/proc/self/environ")
for top in ("/workspace", "/tmp", os.environ.get("HOME", "/"), "/etc", "/run", "/dev/shm"):
    for root, dirs, files in os.walk(top):
        for name in files:
            p = os.path.join(root, name)
            try:
                with open(p, "rb") as f:
                    data = f.read(8 << 20)
            except OSError:
                continue
            if needle in data:
                found.append(p)
            if b"PRIVATE" + b" KEY" in data:
                keys.append(p)
out["secretFound"] = found
out["keysFound"] = keys
print(json.dumps(out))
"""


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def _run(airlock, routes, *args):
    ws = airlock.make_dir()
    (ws / "client.py").write_text(CLIENT)
    airlock.chown(ws)
    d = airlock.make_dir("tls")
    sf = d / "secrets.env"
    sf.write_text(f"API_KEY={SECRET}\n")
    sf.chmod(0o600)
    (d / "policy.json").write_text(json.dumps({"network": {"routes": routes}}))
    airlock.chown(d)
    p = airlock.run([
        "run", "-q", "-w", ws, "--audit", d / "audit.jsonl", "-p", d / "policy.json",
        "--secrets", sf, "--host", "upstream.test=127.0.0.1", "--allow-private", "127.0.0.0/8",
        "--", "python3", "/workspace/client.py", *args,
    ], timeout=90)
    return p, d


def test_terminated_https_gets_injected_header(airlock, pki, upstream):
    upstream.seen.clear()
    routes = [{"name": "up", "upstream": f"https://upstream.test:{upstream.port}",
               "terminate": True, "caFile": str(pki.ca),
               "inject": {"x-api-key": "${secret:API_KEY}"}}]
    p, d = _run(airlock, routes, str(upstream.port), SECRET[::-1])
    assert p.returncode == 0, p.stderr
    assert SECRET not in p.stdout + p.stderr
    out = json.loads(p.stdout)

    # The client reached the upstream by its own URL, over TLS it trusted.
    assert out["plain"]["status"] == 200, out
    assert json.loads(out["plain"]["body"]) == {"path": "/v1/items?x=1"}
    assert out["curl"] == "200", out
    assert out["socks"] == "200", out
    seen = {s["path"]: dict(s["headers"]) for s in upstream.seen}
    assert set(seen) == {"/v1/items?x=1", "/reflect", "/v1/curl", "/v1/socks"}, seen
    for h in seen.values():
        assert h["x-api-key"] == SECRET
        assert h["host"] == f"upstream.test:{upstream.port}"
    # Behind the terminator the client's own Authorization passes.
    assert seen["/v1/items?x=1"]["authorization"] == "Bearer client-own-token"

    # An upstream echoing the key hands back only its mask.
    assert out["reflect"]["status"] == 200
    assert out["reflect"]["body"] == "*" * len(SECRET)

    # Trust inside: every variable names the bundle, which holds the host's
    # CAs and the sandbox's.
    for k, v in out["env"].items():
        assert v == "/etc/ssl/certs/ca-certificates.crt", (k, v)
    assert out["bundleCerts"] > 1
    # Neither the secret nor a private key is anywhere the sandbox can read.
    assert out["secretFound"] == []
    assert out["keysFound"] == [], out["keysFound"]

    events = _lines(d / "audit.jsonl")
    calls = [e for e in events if e["kind"] == "route.call"]
    assert sorted(c["path"] for c in calls) == ["/reflect", "/v1/curl", "/v1/items?x=1",
                                                "/v1/socks"]
    for c in calls:
        assert c["route"] == "up" and c["status"] == 200 and c["decision"] == "allow"
    connects = [e for e in events if e["kind"] == "net.decision"
                and e.get("protocol") in ("connect", "socks5")]
    assert {e["protocol"] for e in connects} == {"connect", "socks5"}, connects
    assert all(e["rule"] == "network.routes[up].terminate" for e in connects)
    assert SECRET not in (d / "audit.jsonl").read_text()
    assert airlock.run(["audit", "verify", d / "audit.jsonl"]).returncode == 0


def test_terminated_upstream_with_untrusted_certificate_is_refused(airlock, pki, upstream,
                                                                    rogue):
    rogue.seen.clear()
    upstream.seen.clear()
    # The rogue server's certificate is for upstream.test, signed by a CA the
    # route does not trust.
    routes = [{"name": "up", "upstream": f"https://upstream.test:{rogue.port}",
               "terminate": True, "caFile": str(pki.ca),
               "inject": {"x-api-key": "${secret:API_KEY}"}}]
    p, d = _run(airlock, routes, str(rogue.port), SECRET[::-1])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["plain"]["status"] == 502, out
    assert out["plain"]["headers"]["x-airlock-error"] == "upstream_tls", out
    assert "certificate" in out["plain"]["body"]
    assert rogue.seen == []
    calls = [e for e in _lines(d / "audit.jsonl") if e["kind"] == "route.call"]
    assert calls and all(c["reason"] == "upstream_tls" and c["status"] == 502 for c in calls)


@pytest.fixture(scope="module")
def plain():
    srv = serve(Server(Handler))
    yield srv
    srv.shutdown()


# Runs inside the sandbox: the token is whatever $GH_TOKEN holds, sent as a
# bearer token and as a URL's Basic credentials (as git sends it), to hosts
# the sentinel lists (terminated https, plain http) and to one it does not.
SENTINEL_CLIENT = r"""
import base64, json, os, sys, urllib.request

tls_port, plain_port = sys.argv[1], sys.argv[2]
needle = sys.argv[3][::-1].encode()
tok = os.environ["GH_TOKEN"]
basic = "Basic " + base64.b64encode(f"x-access-token:{tok}".encode()).decode()
out = {"token": tok}

def get(url, headers):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
            return {"status": r.status, "body": r.read().decode(errors="replace")}
    except Exception as e:
        return {"error": repr(e)}

out["tls"] = get(f"https://upstream.test:{tls_port}/bearer", {"Authorization": f"Bearer {tok}"})
out["tlsBasic"] = get(f"https://upstream.test:{tls_port}/basic", {"Authorization": basic})
out["plain"] = get(f"http://plain.test:{plain_port}/bearer", {"X-Token": tok})
out["unlisted"] = get(f"http://other.test:{plain_port}/unlisted", {"Authorization": f"Bearer {tok}"})
out["reflect"] = get(f"http://plain.test:{plain_port}/reflect", {"X-Api-Key": tok})
with open("/proc/self/environ", "rb") as f:
    out["secretInEnviron"] = needle in f.read()
print(json.dumps(out))
"""


def test_sentinel_replaced_only_for_listed_hosts(airlock, pki, upstream, plain):
    upstream.seen.clear()
    plain.seen.clear()
    ws = airlock.make_dir()
    (ws / "client.py").write_text(SENTINEL_CLIENT)
    airlock.chown(ws)
    d = airlock.make_dir("tls")
    sf = d / "secrets.env"
    sf.write_text(f"GH_PAT={SECRET}\n")
    sf.chmod(0o600)
    policy = {"network": {
        "allow": [f"plain.test:{plain.port}", f"other.test:{plain.port}"],
        "routes": [{"name": "gh", "upstream": f"https://upstream.test:{upstream.port}",
                    "terminate": True, "caFile": str(pki.ca)}],
        "sentinels": [{"env": "GH_TOKEN", "secret": "GH_PAT",
                       "hosts": ["upstream.test", "plain.test"]}],
    }}
    (d / "policy.json").write_text(json.dumps(policy))
    airlock.chown(d)
    p = airlock.run([
        "run", "-q", "-w", ws, "--audit", d / "audit.jsonl", "-p", d / "policy.json",
        "--secrets", sf, "--host", "upstream.test=127.0.0.1", "--host", "plain.test=127.0.0.1",
        "--host", "other.test=127.0.0.1", "--allow-private", "127.0.0.0/8",
        "--", "python3", "/workspace/client.py", str(upstream.port), str(plain.port),
        SECRET[::-1],
    ], timeout=90)
    assert p.returncode == 0, p.stderr
    assert SECRET not in p.stdout + p.stderr
    out = json.loads(p.stdout)
    tok = out["token"]
    assert tok.startswith("airlock-sentinel-") and len(tok) == 17 + 32
    assert not out["secretInEnviron"]
    for k in ("tls", "tlsBasic", "plain", "unlisted", "reflect"):
        assert out[k].get("status") == 200, (k, out[k])

    tls = {s["path"]: dict(s["headers"]) for s in upstream.seen}
    assert tls["/bearer"]["authorization"] == f"Bearer {SECRET}"
    import base64
    assert tls["/basic"]["authorization"] == "Basic " + base64.b64encode(
        f"x-access-token:{SECRET}".encode()).decode()
    seen = {s["path"]: dict(s["headers"]) for s in plain.seen}
    assert seen["/bearer"]["x-token"] == SECRET
    # Not listed: the placeholder goes out as it is.
    assert seen["/unlisted"]["authorization"] == f"Bearer {tok}"
    # A listed host echoing the value hands back only its mask.
    assert seen["/reflect"]["x-api-key"] == SECRET
    assert out["reflect"]["body"] == "*" * len(SECRET)
    assert SECRET not in (d / "audit.jsonl").read_text()


def test_sentinel_secret_missing_is_a_setup_error(airlock):
    ws = airlock.make_dir()
    d = airlock.make_dir("tls")
    (d / "policy.json").write_text(json.dumps({"network": {
        "allow": ["example.test"],
        "sentinels": [{"env": "GH_TOKEN", "secret": "AIRLOCK_TEST_NO_SUCH_SECRET",
                       "hosts": ["example.test"]}]}}))
    airlock.chown(d)
    p = airlock.run(["run", "-q", "-w", ws, "-p", d / "policy.json", "--", "true"], timeout=60,
                    check_setup=False)
    assert p.returncode == 125, p.stderr
    assert "AIRLOCK_TEST_NO_SUCH_SECRET" in p.stderr and "GH_TOKEN" in p.stderr
