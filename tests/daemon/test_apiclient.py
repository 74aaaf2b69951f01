# SPDX-License-Identifier: Apache-2.0
"""The CLI's API client (src/cli/apiclient.c) reads airlockd's answers with
the project's strict HTTP/1.1 parser (netgate/http.c): a well-framed
answer is read whole, whatever its framing; an answer two parsers could
read differently, or one cut short, is refused, never guessed at. A fake
daemon on a unix socket gives the answers."""

import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from daemonlib import AIRLOCK  # noqa: E402

SB = "0123456789abcdef"


def serve_once(path, answer):
    """Answer one request on a unix socket with `answer` (bytes), then close."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    srv.settimeout(15)
    got = {}

    def run():
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            got["request"] = data
            conn.sendall(answer)
        srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, got


def logs(answer):
    if not AIRLOCK.exists():
        pytest.skip(f"{AIRLOCK} is not built")
    with tempfile.TemporaryDirectory(prefix="apiclient-") as d:
        sock = os.path.join(d, "s.sock")
        t, got = serve_once(sock, answer)
        p = subprocess.run([str(AIRLOCK), "logs", "--socket", sock, "--token", "tok", SB],
                           capture_output=True, timeout=30)
        t.join(10)
        return p, got


GOOD = [
    (b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: 6\r\n\r\nhello\n",
     b"hello\n"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n3\r\nlo\n\r\n0\r\n\r\n",
     b"hello\n"),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello\n", b"hello\n"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b""),
    # A response's chunking overrides its length (RFC 9112 6.3), as the
    # gate reads upstream answers.
    (b"HTTP/1.1 200 OK\r\nContent-Length: 60\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"6\r\nhello\n\r\n0\r\n\r\n", b"hello\n"),
]


@pytest.mark.parametrize("answer,body", GOOD, ids=["length", "chunked", "close", "empty",
                                                   "chunked-over-length"])
def test_well_framed(answer, body):
    p, got = logs(answer)
    assert p.returncode == 0, p.stderr
    assert p.stdout == body
    assert got["request"].startswith(f"GET /v1/sandboxes/{SB}/audit HTTP/1.1\r\n".encode())
    assert b"Authorization: Bearer tok\r\n" in got["request"]


def test_api_error():
    body = b'{"error":"not_found","message":"no sandbox ' + SB.encode() + b'"}\n'
    p, _ = logs(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    assert p.returncode == 1
    assert p.stderr.decode() == f"airlock: logs: not_found: no sandbox {SB}\n"


BAD = [
    # Two lengths: which one frames the body is a guess.
    b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Length: 3\r\n\r\nhello\n",
    # A field line with no name.
    b"HTTP/1.1 200 OK\r\nnot a field\r\nContent-Length: 6\r\n\r\nhello\n",
    # A folded field (obsolete line folding).
    b"HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 6\r\n\r\nhello\n",
    # A length that is not a number.
    b"HTTP/1.1 200 OK\r\nContent-Length: 6x\r\n\r\nhello\n",
    # Not HTTP/1.x.
    b"HTTP/2.0 200 OK\r\nContent-Length: 6\r\n\r\nhello\n",
    # Cut short.
    b"HTTP/1.1 200 OK\r\nContent-Length: 60\r\n\r\nhello\n",
    # A bad chunk size.
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\n\r\n0\r\n\r\n",
]


@pytest.mark.parametrize("answer", BAD, ids=["two-lengths", "no-name",
                                              "folded", "bad-length", "http2", "cut-short",
                                              "bad-chunk"])
def test_refused(answer):
    p, _ = logs(answer)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert p.stdout == b""
    assert p.stderr.decode() == "airlock: logs: talking to airlockd: Protocol error\n"
