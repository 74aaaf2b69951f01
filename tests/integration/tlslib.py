# SPDX-License-Identifier: Apache-2.0
"""The TLS upstreams the route tests talk to, and their throwaway PKI: one
copy for test_routes.py, test_tls_inject.py, test_tls_git_push.py (and
whoever imports their fixtures)."""

import http.server
import pathlib
import socketserver
import ssl
import subprocess
import tempfile
import threading


def _openssl(*argv):
    subprocess.run(["openssl", *[str(a) for a in argv]], check=True, capture_output=True)


class PKI:
    """A test CA and a server certificate for upstream.test it signed, and a
    second CA, unknown to the gate, that signed another for the same name.
    server.pem/.key and rogue.pem/.key are in dir; ca is the CA to trust."""

    def __init__(self, d):
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        self.dir = d
        for ca in ("ca", "rogue-ca"):
            _openssl("req", "-x509", *ec, "-keyout", d / f"{ca}.key", "-out", d / f"{ca}.pem",
                     "-days", "2", "-subj", f"/CN=airlock {ca}")
        (d / "ext.cnf").write_text("subjectAltName=DNS:upstream.test\n")
        for name, ca in (("server", "ca"), ("rogue", "rogue-ca")):
            _openssl("req", *ec, "-keyout", d / f"{name}.key", "-out", d / f"{name}.csr",
                     "-subj", "/CN=upstream.test")
            _openssl("x509", "-req", "-in", d / f"{name}.csr", "-CA", d / f"{ca}.pem",
                     "-CAkey", d / f"{ca}.key", "-CAcreateserial", "-out", d / f"{name}.pem",
                     "-days", "2", "-extfile", d / "ext.cnf")
        self.ca = d / "ca.pem"
        self.ca.chmod(0o644)


def make_pki(prefix):
    """A new PKI in a fresh directory under /tmp (readable by the test user)."""
    d = pathlib.Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    d.chmod(0o755)
    return PKI(d)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """An HTTP server on 127.0.0.1 (a free port: .port) with handler, over
    TLS with cert and key when given; `seen` is for the handler to fill."""

    daemon_threads = True

    def __init__(self, handler, cert=None, key=None):
        super().__init__(("127.0.0.1", 0), handler)
        self.seen = []
        if cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.socket = ctx.wrap_socket(self.socket, server_side=True)
        self.port = self.server_address[1]

    def handle_error(self, request, client_address):
        pass  # refused handshakes are part of the tests


def serve(srv):
    """srv, serving on a thread of its own."""
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def tls_server(pki, name, handler, cls=Server, **kw):
    """cls serving handler over TLS with the PKI's `name` certificate
    ("server": the CA the route trusts; "rogue": another)."""
    return serve(cls(handler, pki.dir / f"{name}.pem", pki.dir / f"{name}.key", **kw))


def read_body(h):
    """The request body of BaseHTTPRequestHandler h, chunked or not."""
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        data = b""
        while True:
            size = int(h.rfile.readline().split(b";")[0], 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return data
            data += h.rfile.read(size)
            h.rfile.readline()
    return h.rfile.read(int(h.headers.get("Content-Length", "0")))
