# SPDX-License-Identifier: Apache-2.0
"""GET /v1/ui/audit/verify, open to every grant (no flag needed), re-reads
and hashes the daemon's whole audit log and its rotated files (by default
up to nine files of 64 MiB). It ran on the daemon's one loop: while it
read, no other request of any grant was served, the kill switch
(POST /v1/stop) included, and any grant could ask again and again. The
verification now runs in a job (airlock audit verify --json), one at a
time, and the loop serves everyone meanwhile."""

import hashlib
import json
import select
import socket
import time

LINES = 240_000
PAD = "x" * 400


def write_chain(path, n):
    """A valid hash chain of n lines (about 110 MiB), as the daemon writes."""
    prev = "0" * 64
    with open(path, "wb") as f:
        for i in range(1, n + 1):
            line = ('{"seq":%d,"ts":"2026-01-01T00:00:00.000000Z","sandbox":"","kind":"test.pad",'
                    '"pad":"%s","prev":"%s"}' % (i, PAD, prev)).encode()
            f.write(line + b"\n")
            prev = hashlib.sha256(line).hexdigest()


def send(d, token, method, path, body=b""):
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(d.socket))
    s.sendall((f"{method} {path} HTTP/1.1\r\nHost: airlockd\r\nAuthorization: Bearer {token}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
               "Connection: close\r\n\r\n").encode() + body)
    return s


def answer(s):
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_verify_holds_nothing_else_up(make_daemon):
    d = make_daemon()
    d.stop()
    for p in d.audit.parent.glob(d.audit.name + ".*"):
        p.unlink()
    write_chain(d.audit, LINES)
    d.start()
    reader = d.grant("reader")

    verify = send(d, reader, "GET", "/v1/ui/audit/verify")
    time.sleep(0.3)  # let the daemon take it up first (no timing is asserted)
    st, body = answer(send(d, d.admin, "POST", "/v1/stop", json.dumps({"all": True}).encode()))
    assert st == 200, body
    # The kill switch answered while the verification still reads.
    ready, _, _ = select.select([verify], [], [], 0)
    assert not ready, "the kill switch waited for the audit log's verification"
    # A second verification meanwhile is refused, not queued on the loop.
    st, body = answer(send(d, reader, "GET", "/v1/ui/audit/verify"))
    assert st == 429 and json.loads(body)["error"] == "busy", (st, body)

    st, body = answer(verify)
    assert st == 200, body
    v = json.loads(body)
    assert v["ok"] is True and v["lines"] >= LINES and v["firstSeq"] == 1, v
