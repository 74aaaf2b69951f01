# SPDX-License-Identifier: Apache-2.0
"""GET /v1/events: the audit log as Server-Sent Events, scoped to the
grant, filtered, resumable by Last-Event-ID, bounded for a slow client."""

import json
import socket
import time

import pytest

from daemonlib import wait_for  # noqa: F401


class Stream:
    """A raw SSE reader over the daemon's unix socket (chunked body)."""

    def __init__(self, d, token, query="", last_id=None, rcvbuf=None, timeout=20):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(str(d.socket))
        hdr = "GET /v1/events%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n" % (
            query, token)
        if last_id is not None:
            hdr += "Last-Event-ID: %s\r\n" % last_id
        self.sock.sendall((hdr + "\r\n").encode())
        self.raw = b""
        self.body = b""
        self.status = None
        self.done = False

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            self.done = True
            return
        self.raw += data
        if self.status is None and b"\r\n\r\n" in self.raw:
            head, self.raw = self.raw.split(b"\r\n\r\n", 1)
            self.status = int(head.split(b" ")[1])
            self.head = head.decode()
        while self.status is not None:
            if b"\r\n" not in self.raw:
                return
            size_s, rest = self.raw.split(b"\r\n", 1)
            size = int(size_s, 16)
            if len(rest) < size + 2:
                return
            self.body += rest[:size]
            self.raw = rest[size + 2:]
            if size == 0:
                self.done = True
                return

    def read_status(self):
        while self.status is None and not self.done:
            self._fill()
        return self.status

    def next(self, timeout=20):
        """The next event as (event type, id, data) or a comment ("comment", None, text)."""
        end = time.monotonic() + timeout
        while b"\n\n" not in self.body:
            if self.done or time.monotonic() > end:
                return None
            self._fill()
        block, self.body = self.body.split(b"\n\n", 1)
        typ, eid, data = "message", None, None
        for line in block.decode().split("\n"):
            if line.startswith(":"):
                return ("comment", None, line[1:].strip())
            k, _, v = line.partition(": ")
            if k == "event":
                typ = v
            elif k == "id":
                eid = int(v)
            elif k == "data":
                data = json.loads(v)
        return (typ, eid, data)

    def events_until(self, pred, timeout=30):
        """Audit events (id, line) up to and including the first pred(line) holds for."""
        out = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ev = self.next(timeout=max(0.1, end - time.monotonic()))
            if ev is None:
                break
            if ev[0] == "message":
                out.append((ev[1], ev[2]))
                if pred(ev[2]):
                    return out
            elif ev[0] == "end":
                out.append((None, ev[2]))
                return out
        raise AssertionError("no matching event; got %r" % [e[1].get("kind") for e in out])

    def close(self):
        self.sock.close()


FETCH_DENIED = """
import urllib.request, urllib.error
try:
    urllib.request.urlopen('http://denied.test/', timeout=20)
except urllib.error.HTTPError as e:
    print(e.code)
"""


def opened(d, token, **kw):
    s = Stream(d, token, **kw)
    assert s.read_status() == 200, s.raw
    ev = s.next()
    assert ev[0] == "comment" and ev[2].startswith("events after"), ev
    return s


def test_stream_sees_lifecycle_in_order_and_resumes_exactly(shared_daemon, api):
    d = shared_daemon
    s = opened(d, d.admin)
    sb = api.create(sandbox_class="small", policy={"network": {"allow": ["allowed.test:80"]}})
    sid = sb["id"]
    r = api.run(sid, ["python3", "-c", FETCH_DENIED])
    assert r.exit_code == 0
    api.delete(sid)
    got = s.events_until(lambda e: e["sandbox"] == sid and e["kind"] == "sandbox.destroyed")
    s.close()
    mine = [(i, e) for i, e in got if e["sandbox"] == sid]
    kinds = [e["kind"] for _, e in mine]
    for k in ("api.create", "sandbox.created", "api.exec", "process.started", "net.decision",
              "process.ended", "api.destroy", "sandbox.destroyed"):
        assert k in kinds, kinds
    assert (kinds.index("sandbox.created") < kinds.index("api.exec") < kinds.index("process.started")
            < kinds.index("net.decision") < kinds.index("process.ended")
            < kinds.index("sandbox.destroyed"))
    gate = next(e for _, e in mine if e["kind"] == "net.decision")
    assert (gate["decision"], gate["host"]) == ("deny", "denied.test")
    ids = [i for i, _ in got]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(e["seq"] == i for i, e in got)  # the id is the audit line's seq

    # One schema: the same lines as the audit log, byte for byte.
    log = {json.loads(line)["seq"]: json.loads(line) for line in d.audit.read_text().splitlines()}
    assert all(log[i] == e for i, e in got)

    # Resume from the middle: everything after, nothing before, no repeats.
    cut = ids[len(ids) // 2]
    s2 = opened(d, d.admin, last_id=cut)
    again = s2.events_until(lambda e: e["seq"] == ids[-1])
    s2.close()
    assert [i for i, _ in again] == [i for i in ids if i > cut]


def test_disconnect_and_reconnect_loses_nothing(shared_daemon, api, sandbox):
    d = shared_daemon
    sid = sandbox["id"]
    s = opened(d, d.admin, query="?sandbox=" + sid)
    api.run(sid, ["true", "one"])
    first = s.events_until(lambda e: e["kind"] == "process.ended")
    s.close()
    last = first[-1][0]
    # While nobody listens.
    for i in range(3):
        api.run(sid, ["true", "gap%d" % i])
    s = opened(d, d.admin, query="?sandbox=" + sid, last_id=last)
    api.run(sid, ["true", "after"])
    rest = s.events_until(lambda e: e["kind"] == "api.exec" and e["argv"] == ["true", "after"])
    s.close()
    argvs = [e["argv"] for _, e in rest if e["kind"] == "api.exec"]
    assert argvs == [["true", "gap0"], ["true", "gap1"], ["true", "gap2"], ["true", "after"]]
    ids = [i for i, _ in rest]
    assert min(ids) > last and len(set(ids)) == len(ids) and ids == sorted(ids)
    log = [json.loads(x) for x in d.audit.read_text().splitlines()]
    want = [e["seq"] for e in log if e["sandbox"] == sid and last < e["seq"] <= ids[-1]]
    assert ids == want


def test_filters_by_sandbox_and_kind(shared_daemon, api):
    d = shared_daemon
    a = api.create(sandbox_class="small")["id"]
    b = api.create(sandbox_class="small")["id"]
    try:
        s = opened(d, d.admin, query="?sandbox=%s&kind=process.*&kind=api.destroy" % b)
        api.run(a, ["true", "a"])
        api.run(b, ["true", "b"])
        api.delete(b)
        got = s.events_until(lambda e: e["kind"] == "api.destroy")
        s.close()
        assert {e["sandbox"] for _, e in got} == {b}
        assert [e["kind"] for _, e in got] == ["process.started", "process.ended", "api.destroy"]
    finally:
        api.delete(a)
    for q, field in (("?kind=NET", "kind"), ("?sandbox=xyz", "sandbox"), ("?kind=a*", "kind"),
                     ("?heartbeat=0", "heartbeat"), ("?bogus=1", "bogus")):
        s = Stream(d, d.admin, query=q)
        assert s.read_status() == 400, q
        s.close()
    s = Stream(d, d.admin, last_id="12x")
    assert s.read_status() == 400
    s.close()


def test_another_grants_events_are_invisible(shared_daemon, api):
    d = shared_daemon
    other = d.grant("events-other-%d" % time.monotonic_ns(), "--allow-sandbox", "--allow-exec")
    oc = d.client(other)
    theirs = oc.create(sandbox_class="small")["id"]
    mine = api.create(sandbox_class="small")["id"]
    try:
        # Naming their sandbox is naming no sandbox.
        s = Stream(d, d.admin, query="?sandbox=" + theirs)
        assert s.read_status() == 404
        s.close()
        s = opened(d, d.admin)
        t = opened(d, other)
        oc.run(theirs, ["true", "secret-argv"])
        api.run(mine, ["true", "mine"])
        got = s.events_until(lambda e: e["kind"] == "process.ended" and e["sandbox"] == mine)
        their_view = t.events_until(
            lambda e: e["kind"] == "process.ended" and e["sandbox"] == theirs)
        s.close()
        t.close()
        assert theirs not in {e["sandbox"] for _, e in got}
        assert "secret-argv" not in json.dumps([e for _, e in got])
        assert {e["sandbox"] for _, e in their_view} == {theirs}
        # Resuming from the start shows them nothing of ours either.
        t = opened(d, other, last_id=0)
        hist = t.events_until(lambda e: e["kind"] == "process.ended" and e["sandbox"] == theirs)
        t.close()
        assert {e["sandbox"] for _, e in hist} == {theirs}
    finally:
        oc.delete(theirs)
        api.delete(mine)


def test_heartbeat_and_revoked_grant(shared_daemon):
    d = shared_daemon
    name = "events-rev-%d" % time.monotonic_ns()
    tok = d.grant(name, "--allow-sandbox")
    s = opened(d, tok, query="?heartbeat=1")
    assert s.next(timeout=5) == ("comment", None, "heartbeat")
    d.revoke(name)
    end = None
    for _ in range(10):
        ev = s.next(timeout=5)
        if ev and ev[0] == "end":
            end = ev
            break
    s.close()
    assert end and "revoked" in end[2]["reason"]


def test_slow_client_is_dropped_with_a_final_event(shared_daemon, api, sandbox):
    d = shared_daemon
    sid = sandbox["id"]
    s = opened(d, d.admin, query="?sandbox=" + sid, rcvbuf=4096)
    first = None
    # About 2.4 MB of audit lines, far past what one client may leave unread.
    big = "x" * 100000
    for i in range(12):
        api.run(sid, ["true", big])
    time.sleep(7)  # past the stall limit, reading nothing
    got = []
    end = None
    while True:
        ev = s.next(timeout=20)
        assert ev is not None, "the stream neither went on nor ended"
        if ev[0] == "message":
            got.append(ev[1])
            first = first or ev[1]
        elif ev[0] == "end":
            end = ev[2]
            break
    s.close()
    assert end["reason"].startswith("slow client")
    # What was delivered was delivered in order, and the end names where to resume.
    assert got == sorted(got) and end["lastEventId"] >= (got[-1] if got else 0)
    log = [json.loads(x) for x in d.audit.read_text().splitlines()]
    assert len(got) < len([e for e in log if e["sandbox"] == sid])  # cut off before the end
    s = opened(d, d.admin, query="?sandbox=%s&kind=api.exec" % sid, last_id=end["lastEventId"])
    api.run(sid, ["true", "marker"])
    rest = s.events_until(lambda e: e["argv"] == ["true", "marker"])
    s.close()
    log = [json.loads(x) for x in d.audit.read_text().splitlines()]
    want = [e["seq"] for e in log if e["sandbox"] == sid and e["kind"] == "api.exec"
            and e["seq"] > end["lastEventId"]]
    assert [i for i, _ in rest] == want


def test_resume_across_rotations(make_daemon):
    d = make_daemon("--audit-rotate", "32K:50")
    api = d.client(d.admin)
    sid = api.create(sandbox_class="small")["id"]
    s = opened(d, d.admin, query="?kind=api.exec")
    pad = "y" * 8000
    for i in range(12):
        api.run(sid, ["true", str(i), pad])
    live = s.events_until(lambda e: e["argv"][1] == "11")
    s.close()
    assert [e["argv"][1] for _, e in live] == [str(i) for i in range(12)]
    assert len(list(d.base.glob("audit.jsonl.*"))) >= 3  # the stream crossed rotations
    # From before the first: read back through the rotated files.
    s = opened(d, d.admin, query="?kind=api.exec", last_id=live[0][0] - 1)
    again = s.events_until(lambda e: e["argv"][1] == "11")
    s.close()
    assert [i for i, _ in again] == [i for i, _ in live]
    # From the middle: only what came after.
    s = opened(d, d.admin, query="?kind=api.exec", last_id=live[5][0])
    tail = s.events_until(lambda e: e["argv"][1] == "11")
    s.close()
    assert [i for i, _ in tail] == [i for i, _ in live[6:]]
