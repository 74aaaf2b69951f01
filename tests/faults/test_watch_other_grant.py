# SPDX-License-Identifier: Apache-2.0
"""File watches are bounded per grant, not only in all: a grant that may
only read opens as many watches as it is let on another grant's sandbox;
the sandbox's maker must still be able to watch its own files. Before, one
reader took all 64 of the daemon's watches for up to a day."""

import socket
import tempfile


def _watch(d, token, sb):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(d.socket))
    s.sendall((f"GET /v1/sandboxes/{sb}/files/watch?path=.&recursive=false&timeout=60 HTTP/1.1\r\n"
               f"Host: airlockd\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
    head = b""
    while b"\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    return s, head.split(b"\r\n", 1)[0]


def test_a_reader_cannot_take_every_watch(two_grants):
    d = two_grants
    c = d.client(d.admin)
    ws = tempfile.mkdtemp(prefix="ws-", dir=d.tmp)
    sb = c.create(sandbox_class="small", workspace=ws)["id"]
    held = []
    try:
        refused = 0
        for _ in range(70):
            s, status = _watch(d, d.reader, sb)
            held.append(s)
            assert b" 200 " in status or b" 429 " in status, status
            refused += b" 429 " in status
        assert refused, "70 watches of one grant were all taken"
        s, status = _watch(d, d.admin, sb)
        held.append(s)
        assert b" 200 " in status, f"the maker could not watch its own sandbox: {status!r}"
    finally:
        for s in held:
            s.close()
