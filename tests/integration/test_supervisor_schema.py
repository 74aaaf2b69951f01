# SPDX-License-Identifier: Apache-2.0
"""One supervisor core: `airlock run` and `airlock supervise` record each
audit event with the same fields (docs/audit.md), and both ends of the
control protocol read lines of the same length (control-proto.h)."""

import json
import socket

import pytest

from test_supervise import Supervisor  # noqa: E402

# The fields every process.ended, limit.hit, violation and sandbox.destroyed
# carries, whichever supervisor wrote it (docs/audit.md).
ENDED = {"pid", "exitCode", "signal", "errorCode", "durationMs", "usage"}
USAGE = {"cpuMs", "cpuUserMs", "cpuSystemMs", "memoryPeakBytes", "maxRssKb", "outputBytes",
         "ioReadBytes", "ioWriteBytes", "netSentBytes", "netReceivedBytes", "workspaceAddedBytes",
         "diskPeakBytes"}
LIMIT = {"pid", "limit", "message"}
VIOLATION = {"pid", "what", "signal"}
DESTROYED = {"durationMs"}
STARTED = {"pid", "argv"}
COMMON = {"seq", "ts", "sandbox", "kind", "prev"}

X32_GETPID = "import ctypes; ctypes.CDLL(None).syscall(0x40000000 | 39)"


def _lines(path):
    return [json.loads(line) for line in open(path)]


def _fields(e):
    return set(e) - COMMON


def _check(events):
    by = {}
    for e in events:
        by.setdefault(e["kind"], []).append(e)
    for e in by["process.started"]:
        assert _fields(e) == STARTED, e
    for e in by["process.ended"]:
        assert _fields(e) == ENDED, e
        assert set(e["usage"]) == USAGE, e
    for e in by["sandbox.destroyed"]:
        assert _fields(e) == DESTROYED, e
    for e in by.get("limit.hit", []):
        assert _fields(e) == LIMIT, e
        assert e["message"], e
    for e in by.get("violation", []):
        assert _fields(e) == VIOLATION, e
    return by


def test_run_events_have_the_one_schema(airlock):
    log = airlock.make_dir("audit") / "audit.jsonl"
    airlock.run(["run", "-q", "--audit", log, "--timeout", "1", "--", "sleep", "10"], timeout=30)
    airlock.run(["run", "-q", "--audit", log, "--", "python3", "-c", X32_GETPID], timeout=30)
    by = _check(_lines(log))
    assert [h["limit"] for h in by["limit.hit"]] == ["timeout"]
    assert by["limit.hit"][0]["pid"] == 1
    assert by["violation"][0]["what"] == "seccomp" and by["violation"][0]["signal"] == 31
    assert all(e["pid"] == 1 for e in by["process.ended"])


def test_supervise_events_have_the_one_schema(airlock):
    s = Supervisor(airlock)
    assert s.ready == "ok"
    try:
        s.exec(["sleep", "10"], timeout=0.5)
        s.exec(["python3", "-c", X32_GETPID])
        s.exec(["true"])
    finally:
        s.close()
    by = _check(_lines(s.audit))
    assert [h["limit"] for h in by["limit.hit"]] == ["timeout"]
    assert "500 ms" in by["limit.hit"][0]["message"]
    assert by["violation"][0]["what"] == "seccomp" and by["violation"][0]["signal"] == 31
    assert [e["pid"] for e in by["process.ended"]] == [1, 2, 3]


def _request(sock, obj, timeout=30):
    """One request; a supervisor that refuses a line closes before it is
    all sent: what it answered is read all the same."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(sock)
    try:
        s.sendall((json.dumps(obj) + "\n").encode())
    except (BrokenPipeError, ConnectionResetError):
        pass
    out = b""
    try:
        while d := s.recv(65536):
            out += d
    except ConnectionResetError:
        pass
    s.close()
    return [json.loads(line) for line in out.decode().splitlines()]


def test_a_request_line_up_to_the_shared_limit_is_read(airlock):
    """The supervisor reads request lines as long as the daemon reads answer
    lines (8 MiB): a 5 MiB exec request is answered, not refused as too long."""
    s = Supervisor(airlock)
    assert s.ready == "ok"
    try:
        pad = "x" * (5 << 20)
        events = _request(s.sock, {"op": "exec", "argv": ["true"], "env": {"PAD": pad}})
        assert events and not any("too long" in e.get("message", "") for e in events), events
        over = _request(s.sock, {"op": "exec", "argv": ["true"], "env": {"PAD": "x" * (9 << 20)}})
        assert over and over[0].get("message") == "request line too long", over
    finally:
        s.close()


REVIEW_KEPT = {"dir", "added", "modified", "deleted", "bytes", "skipped"}


def test_review_kept_has_the_one_schema(airlock):
    ws = airlock.make_dir()
    airlock.chown(ws)
    log = airlock.make_dir("audit") / "audit.jsonl"
    p = airlock.run(["run", "-q", "--review", "-w", ws, "--audit", log, "--", "/bin/sh", "-c",
                     "echo new > added.txt"])
    assert p.returncode == 0, p.stderr
    s = Supervisor(airlock, review=True)
    assert s.ready == "ok"
    try:
        s.exec(["sh", "-c", "echo new > /workspace/added.txt"])
    finally:
        s.close()
    for path in (log, s.audit):
        kept = [e for e in _lines(path) if e["kind"] == "review.kept"]
        assert kept and all(_fields(e) == REVIEW_KEPT for e in kept), kept
        assert kept[-1]["added"] == 1
