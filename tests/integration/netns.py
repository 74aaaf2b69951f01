# SPDX-License-Identifier: Apache-2.0
"""A private test network for the network gate's integration tests.

Two network namespaces joined by a veth pair, neither connected to anything
else, so nothing a test does (or a faulty gate does) can leave the machine:

    client ns  airlock-t-<rand>-c   lo, veth 10.231.7.1/24   <- `airlock run`
                                         fd7a:1e57:7::1/64    (and so the gate)
    server ns  airlock-t-<rand>     lo, veth 10.231.7.2/24   <- the servers
                                         fd7a:1e57:7::2/64

The 10.231.7.0/24 routes exist only inside these two namespaces; the host's
own routing table is never touched. `airlock run` is started inside the
client namespace with nsenter (network only, so the cgroup and /sys mounts are
the host's), which makes that namespace the "host side" the gate works from:
its only routes are the test range and its own loopback, and the name server
in /etc/resolv.conf is unreachable from it.

Servers, all one Python process per namespace, run as root:

    10.231.7.2:8080 and [fd7a:1e57:7::2]:8080
                     HTTP/1.1: static files (hello.txt, big.bin, repo.git as
                     a dumb-HTTP git repository), POST/PUT /upload answering
                     {"bytes": N, "sha256": HEX} (Content-Length or chunked
                     bodies), GET /peer answering the client address,
                     GET /chunked/N a chunked body of N bytes (chunked_body),
                     GET /status/N an empty answer with that status,
                     GET /headers the request's headers as [[name, value]...]
    10.231.7.2:8081  the same, on a port the tests leave unlisted
    10.231.7.2:8443  the same over TLS, certificate for upstream.test from a
                     throwaway CA (ca.pem)
    127.0.0.1:8090   the same, on the client namespace's loopback: what a
                     gate that forgot the address check would reach

Every request any server receives is appended to requests.log as
"PORT METHOD PATH", so tests can check that a refused request never arrived.

Run as a script (`python3 netns.py serve DIR LOG CERT KEY ADDR:PORT[:tls]...`) it is
the server itself.
"""

import hashlib
import http.server
import json
import os
import pathlib
import secrets
import select
import shutil
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading

HERE = pathlib.Path(__file__).resolve()

CLIENT_ADDR = "10.231.7.1"
SERVER_ADDR = "10.231.7.2"
PREFIX = 24
RANGE = "10.231.7.0/24"
CLIENT_ADDR6 = "fd7a:1e57:7::1"
SERVER_ADDR6 = "fd7a:1e57:7::2"
RANGE6 = "fd7a:1e57:7::/64"
HTTP_PORT = 8080
OTHER_PORT = 8081
TLS_PORT = 8443
LOOP_PORT = 8090
TLS_NAME = "upstream.test"

BIG_SIZE = 50 * 1024 * 1024
HELLO = "hello from the test network\n"


# --------------------------------------------------------------------------
# The server (runs inside a namespace)


class _Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _log(self):
        port = self.server.server_address[1]
        with self.server.log_lock, open(self.server.log_path, "a") as f:
            f.write(f"{port} {self.command} {self.path}\n")

    def _reply(self, code, body, ctype="application/json"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._log()
        path = self.path.split("?")[0]
        if path == "/peer":
            return self._reply(200, self.client_address[0] + "\n", "text/plain")
        if path == "/headers":
            return self._reply(200, json.dumps([[k, v] for k, v in self.headers.items()]) + "\n")
        if path.startswith("/chunked/"):
            return self._chunked(int(path.split("/")[2]))
        if path.startswith("/status/"):
            self.send_response(int(path.split("/")[2]))
            self.end_headers()
            return None
        return super().do_GET()

    def _chunked(self, size):
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        data = chunked_body(size)
        for i in range(0, size, 7919):
            piece = data[i:i + 7919]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")

    def do_HEAD(self):
        self._log()
        return super().do_HEAD()

    def _read_body(self):
        h = hashlib.sha256()
        n = 0
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(1024)
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                left = size
                while left:
                    chunk = self.rfile.read(min(left, 1 << 16))
                    if not chunk:
                        raise ConnectionError("short chunk")
                    h.update(chunk)
                    n += len(chunk)
                    left -= len(chunk)
                self.rfile.readline(16)
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left:
                chunk = self.rfile.read(min(left, 1 << 16))
                if not chunk:
                    raise ConnectionError("short body")
                h.update(chunk)
                n += len(chunk)
                left -= len(chunk)
        return n, h.hexdigest()

    def do_POST(self):
        self._log()
        n, digest = self._read_body()
        self._reply(200, json.dumps({"bytes": n, "sha256": digest}) + "\n")

    do_PUT = do_POST


def chunked_body(size):
    """What GET /chunked/SIZE answers, in chunks of 7919 bytes."""
    return (b"0123456789abcdef" * (size // 16 + 1))[:size]


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def serve(directory, log_path, binds, cert=None, key=None):
    servers = []
    lock = threading.Lock()
    for b in binds:
        tls = b.endswith(":tls")
        host, _, port = b.removesuffix(":tls").rpartition(":")
        handler = lambda *a, **kw: _Handler(*a, directory=directory, **kw)  # noqa: E731
        if host.startswith("["):
            srv = _Server6((host[1:-1], int(port)), handler)
        else:
            srv = _Server((host, int(port)), handler)
        srv.log_path = log_path
        srv.log_lock = lock
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        servers.append(srv)
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    print("ready", flush=True)
    # Until the test session closes our stdin (or kills us).
    try:
        sys.stdin.read()
    finally:
        for srv in servers:
            srv.shutdown()


# --------------------------------------------------------------------------
# The fixture side (runs on the host, as root)


def _run(*argv, **kw):
    return subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True, **kw)


class Network:
    """The two namespaces, the files the servers serve, and the servers."""

    def __init__(self):
        tag = secrets.token_hex(3)
        self.server_ns = f"airlock-t-{tag}"
        self.client_ns = f"airlock-t-{tag}-c"
        self.client_if = f"alt{tag}c"
        self.server_if = f"alt{tag}s"
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="airlock-netns-", dir="/tmp"))
        self.dir.chmod(0o755)
        self.www = self.dir / "www"
        self.log = self.dir / "requests.log"
        self.ca = self.dir / "ca.pem"
        self.procs = []
        self.made = []
        self.big_sha256 = None

    @property
    def client_ns_path(self):
        return f"/run/netns/{self.client_ns}"

    # -- setup ------------------------------------------------------------

    def start(self):
        try:
            self._namespaces()
            self._files()
            self._certs()
            self._git_repo()
            self.log.write_text("")
            self._server(self.server_ns, [f"{SERVER_ADDR}:{HTTP_PORT}", f"{SERVER_ADDR}:{OTHER_PORT}",
                                          f"{SERVER_ADDR}:{TLS_PORT}:tls", f"[{SERVER_ADDR6}]:{HTTP_PORT}"])
            self._server(self.client_ns, [f"127.0.0.1:{LOOP_PORT}"])
        except BaseException:
            self.stop()
            raise
        return self

    def _namespaces(self):
        for ns in (self.server_ns, self.client_ns):
            _run("ip", "netns", "add", ns)
            self.made.append(ns)
        _run("ip", "link", "add", self.client_if, "netns", self.client_ns, "type", "veth",
             "peer", "name", self.server_if, "netns", self.server_ns)
        _run("ip", "-n", self.client_ns, "addr", "add", f"{CLIENT_ADDR}/{PREFIX}", "dev", self.client_if)
        _run("ip", "-n", self.server_ns, "addr", "add", f"{SERVER_ADDR}/{PREFIX}", "dev", self.server_if)
        _run("ip", "-n", self.client_ns, "addr", "add", f"{CLIENT_ADDR6}/64", "dev", self.client_if, "nodad")
        _run("ip", "-n", self.server_ns, "addr", "add", f"{SERVER_ADDR6}/64", "dev", self.server_if, "nodad")
        for ns, ifname in ((self.client_ns, self.client_if), (self.server_ns, self.server_if)):
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "link", "set", ifname, "up")

    def _files(self):
        self.www.mkdir()
        (self.www / "hello.txt").write_text(HELLO)
        h = hashlib.sha256()
        with open(self.www / "big.bin", "wb") as f:
            left = BIG_SIZE
            while left:
                block = os.urandom(min(left, 1 << 20))
                h.update(block)
                f.write(block)
                left -= len(block)
        self.big_sha256 = h.hexdigest()

    def _certs(self):
        d = self.dir / "pki"
        d.mkdir()
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _run("openssl", "req", "-x509", *ec, "-keyout", d / "ca.key", "-out", self.ca,
             "-days", "2", "-subj", "/CN=airlock test CA")
        _run("openssl", "req", *ec, "-keyout", d / "server.key", "-out", d / "server.csr",
             "-subj", f"/CN={TLS_NAME}")
        (d / "ext.cnf").write_text(f"subjectAltName=DNS:{TLS_NAME}\n")
        _run("openssl", "x509", "-req", "-in", d / "server.csr", "-CA", self.ca, "-CAkey", d / "ca.key",
             "-CAcreateserial", "-out", d / "server.pem", "-days", "2", "-extfile", d / "ext.cnf")
        self.ca.chmod(0o644)
        self.cert, self.key = d / "server.pem", d / "server.key"

    def _git_repo(self):
        src = self.dir / "src"
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                   GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
        _run("git", "init", "-q", "-b", "main", src, env=env)
        (src / "README").write_text("cloned through the gate\n")
        _run("git", "-C", src, "add", "README", env=env)
        _run("git", "-C", src, "commit", "-q", "-m", "first commit", env=env)
        _run("git", "clone", "-q", "--bare", src, self.www / "repo.git", env=env)
        _run("git", "-C", self.www / "repo.git", "update-server-info", env=env)

    def _server(self, ns, binds):
        argv = ["ip", "netns", "exec", ns, "/usr/bin/python3", str(HERE), "serve", str(self.www), str(self.log),
                str(self.cert), str(self.key), *binds]
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(p)
        ready, _, _ = select.select([p.stdout], [], [], 15)
        line = p.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            p.kill()
            p.wait()
            raise RuntimeError(f"server in {ns} did not start: {p.stderr.read1(4096).decode(errors='replace')}")

    # -- what tests use ---------------------------------------------------

    def requests(self, marker):
        """Request lines the servers received whose path holds `marker`."""
        return [line for line in self.log.read_text().splitlines() if marker in line]

    # -- teardown ---------------------------------------------------------

    def stop(self):
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        if self.client_ns in self.made:
            subprocess.run(["ip", "-n", self.client_ns, "link", "del", self.client_if], capture_output=True)
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.made = []
        shutil.rmtree(self.dir, ignore_errors=True)


def available():
    """None when this process can build the test network, else why not."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if not shutil.which("ip") or not shutil.which("nsenter") or not shutil.which("openssl"):
        return "needs ip (iproute2), nsenter (util-linux) and openssl"
    probe = f"airlock-t-probe-{secrets.token_hex(3)}"
    p = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if p.returncode != 0:
        return f"ip netns unavailable: {p.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


try:
    import pytest
except ImportError:  # the servers run this file as a script
    pytest = None

if pytest:
    @pytest.fixture(scope="module")
    def net():
        """The test network, one per test module; skipped with the reason
        where it cannot be built."""
        why = available()
        if why:
            pytest.skip(why)
        n = Network().start()
        yield n
        n.stop()


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], sys.argv[6:], cert=sys.argv[4], key=sys.argv[5])
    else:
        sys.exit("usage: netns.py serve DIR LOG CERT KEY HOST:PORT[:tls]...")
