# SPDX-License-Identifier: Apache-2.0
"""`git push` over https with a token the host keeps: the sandbox's
GH_TOKEN is a sentinel, git sends it as the URL's Basic credentials through
the gate's CONNECT proxy, the gate terminates TLS for the route's host and
puts the real token in; a smart-HTTP git server (git http-backend behind a
small Python server over TLS, a test CA the route trusts) accepts only the
real token."""

import base64
import http.server
import json
import os
import pathlib
import subprocess
import tempfile

import pytest

from tlslib import Server, make_pki, read_body, serve

TOKEN = "ghp_push7c40aa19d3e25b86f1"


class GitServer(Server):
    def __init__(self, cert, key, root):
        super().__init__(GitHandler, cert, key)
        self.root = root
        self.auth = []


class GitHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _handle(self):
        body = read_body(self)
        auth = self.headers.get("Authorization", "")
        self.server.auth.append(auth)
        want = "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
        if auth != want:
            msg = b"auth required\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": "x-access-token",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        p = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True,
                           timeout=30)
        head, _, out = p.stdout.partition(b"\r\n\r\n")
        status = 200
        fields = []
        for line in head.split(b"\r\n"):
            k, _, v = line.decode().partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                fields.append((k, v.strip()))
        self.send_response(status)
        for k, v in fields:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = _handle
    do_POST = _handle


@pytest.fixture(scope="module")
def pki():
    return make_pki("airlock-git-pki-")


@pytest.fixture
def server(pki):
    root = pathlib.Path(tempfile.mkdtemp(prefix="airlock-git-srv-", dir="/tmp"))
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(root / "repo.git")],
                   check=True)
    srv = serve(GitServer(pki.dir / "server.pem", pki.dir / "server.key", root))
    yield srv
    srv.shutdown()


SCRIPT = r"""
set -e
case "$GH_TOKEN" in airlock-sentinel-*) ;; *) echo "not a sentinel"; exit 3;; esac
cd /tmp
git clone -q "https://x-access-token:$GH_TOKEN@upstream.test:$1/repo.git" r 2>&1
cd r
echo pushed-from-the-sandbox > f
git add f
git -c user.name=agent -c user.email=agent@example.test commit -qm "from the sandbox"
git push -q origin HEAD:main 2>&1
echo PUSHED
"""


def test_git_push_over_https_with_host_held_token(airlock, pki, server):
    ws = airlock.make_dir()
    (ws / "push.sh").write_text(SCRIPT)
    airlock.chown(ws)
    d = airlock.make_dir("git")
    sf = d / "secrets.env"
    sf.write_text(f"GH_PAT={TOKEN}\n")
    sf.chmod(0o600)
    policy = {"network": {
        "routes": [{"name": "git", "upstream": f"https://upstream.test:{server.port}",
                    "terminate": True, "caFile": str(pki.ca)}],
        "sentinels": [{"env": "GH_TOKEN", "secret": "GH_PAT", "hosts": ["upstream.test"]}],
    }}
    (d / "policy.json").write_text(json.dumps(policy))
    airlock.chown(d)
    p = airlock.run([
        "run", "-q", "-w", ws, "--audit", d / "audit.jsonl", "-p", d / "policy.json",
        "--secrets", sf, "--host", "upstream.test=127.0.0.1", "--allow-private", "127.0.0.0/8",
        "--", "sh", "/workspace/push.sh", str(server.port),
    ], timeout=90)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PUSHED" in p.stdout, p.stdout + p.stderr
    assert TOKEN not in p.stdout + p.stderr
    log = subprocess.run(["git", "--git-dir", str(server.root / "repo.git"), "log", "--format=%s",
                          "main"], capture_output=True, text=True)
    assert log.stdout.strip() == "from the sandbox", log.stderr
    # The server saw the real token, never the placeholder.
    assert any(TOKEN in base64.b64decode(a[6:]).decode() for a in server.auth if a)
    assert not any("airlock-sentinel-" in base64.b64decode(a[6:]).decode()
                   for a in server.auth if a)
    assert TOKEN not in (d / "audit.jsonl").read_text()
