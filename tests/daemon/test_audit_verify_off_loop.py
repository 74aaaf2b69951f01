# SPDX-License-Identifier: Apache-2.0
"""GET /v1/ui/audit/verify and GET /v1/sandboxes/{id}/audit, open to every
grant (no flag needed), read the daemon's whole audit log and its rotated
files (by default up to nine files of 64 MiB): the first hashes every
line, the second parses every line that holds the sandbox's id anywhere
(a host name the agent asked for can hold it). Both ran on the daemon's
one loop: while they read, no other request of any grant was served, the
kill switch (POST /v1/stop) included, and any grant could ask again and
again. They now run in jobs (airlock audit verify --json, airlock audit
show --json --sandbox ID), a few at a time, and the loop serves everyone
meanwhile."""

import hashlib
import json
import select
import socket
import time

LINES = 240_000
PAD = "x" * 400


def write_chain(path, n, pad=PAD, after=None):
    """A valid hash chain of n lines (about 110 MiB), as the daemon writes;
    `after`: the existing last line the chain goes on from."""
    prev, first = "0" * 64, 1
    if after:
        prev, first = hashlib.sha256(after).hexdigest(), json.loads(after)["seq"] + 1
    with open(path, "ab" if after else "wb") as f:
        for i in range(first, first + n):
            line = ('{"seq":%d,"ts":"2026-01-01T00:00:00.000000Z","sandbox":"","kind":"test.pad",'
                    '"pad":"%s","prev":"%s"}' % (i, pad, prev)).encode()
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
    with s, s.makefile("rb") as f:
        data = f.read()
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


def test_a_sandboxs_audit_holds_nothing_else_up(make_daemon):
    d = make_daemon()
    sid = d.client(d.admin).create(sandbox_class="small")["id"]
    d.client(d.admin).delete(sid)
    d.stop()
    # Every line after its own holds the id (as an agent's host names can),
    # none is its.
    last = d.audit.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    write_chain(d.audit, LINES, pad=(sid + "x" * 24) * 10, after=last)
    d.start()
    reader = d.grant("reader")

    audit = send(d, reader, "GET", f"/v1/sandboxes/{sid}/audit")
    time.sleep(0.3)  # let the daemon take it up first (no timing is asserted)
    st, body = answer(send(d, d.admin, "POST", "/v1/stop", json.dumps({"all": True}).encode()))
    assert st == 200, body
    ready, _, _ = select.select([audit], [], [], 0)
    assert not ready, "the kill switch waited for a sandbox's audit lines"
    st, body = answer(audit)
    assert st == 200, body
    lines = [json.loads(x) for x in body.splitlines()]
    assert lines and all(x["sandbox"] == sid for x in lines), body[:300]
