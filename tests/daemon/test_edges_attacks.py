# SPDX-License-Identifier: Apache-2.0
"""Attacks at the edges where the daemon serves or reads what a client or
an agent made: the terminal WebSocket, the files API's tar streams."""

import os
import socket
import time

import pytest

from daemonlib import AIRLOCK, REPO
from test_pty_api import _masked, _raw_ws


def _rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_ws_client_that_never_reads_cannot_grow_the_daemon(shared_daemon, api, sandbox):
    """A client sends pings as fast as it can and reads no pong: the daemon
    stops reading it once its answers back up, instead of queueing pongs
    without a limit."""
    sid = sandbox["id"]
    pid = api.pty.create(sid, cmd=["/bin/cat"])
    s, resp = _raw_ws(shared_daemon, api, sid, pid)
    try:
        assert resp.startswith(b"HTTP/1.1 101"), resp
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        ping = _masked(0x9, b"p" * 125)
        chunk = ping * 2000
        before = _rss_kib(shared_daemon.proc.pid)
        s.setblocking(False)
        sent = 0
        end = time.monotonic() + 15
        stalled_since = None
        while time.monotonic() < end and sent < 96 << 20:
            try:
                sent += s.send(chunk)
                stalled_since = None
            except BlockingIOError:
                if stalled_since is None:
                    stalled_since = time.monotonic()
                elif time.monotonic() - stalled_since > 4:
                    break  # the daemon stopped reading us: what we want
                time.sleep(0.01)
        time.sleep(0.5)
        grown = _rss_kib(shared_daemon.proc.pid) - before
        assert grown < 24 << 10, "daemon grew by %d KiB after %d bytes of pings" % (grown, sent)
    finally:
        s.close()
    # The terminal's process runs on.
    api.pty.send_input(sid, pid, b"still-here\r")
    api.pty.kill(sid, pid)


class _Counter:
    def __init__(self, limit_s):
        self.n = 0
        self.end = time.monotonic() + limit_s

    def write(self, b):
        self.n += len(b)
        if self.n <= 1 << 20:
            time.sleep(0.1)  # slow at first: the file grows while it is read
        if time.monotonic() > self.end:
            raise TimeoutError("still streaming after %d bytes" % self.n)


def test_streamed_read_of_a_file_growing_forever_ends(api):
    """The agent grows a file faster than anyone reads it (sparse, so it
    costs it no disk): a streamed read ends at the size the file had when
    it was opened, the size the reply announced, instead of copying to the
    host without end."""
    sid = api.create(policy={"limits": {"fileSize": "4T"}})["id"]
    api.write_file(sid, "grow", b"x" * (1 << 20))
    pid = api.exec_background(sid, ["/bin/sh", "-c",
                                     "sleep 0.5; while :; do truncate -s +512M /workspace/grow; "
                                     "sleep 0.02; done"])
    try:
        out = _Counter(15)
        n = api.read_file_to(sid, "grow", out, chunk=1 << 16)
        # The size at open, and the stream stopped there.
        assert n == out.n == 1 << 20
    finally:
        api.signal(sid, pid, "KILL")
        api.delete(sid)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGUSR1", "SIGALRM"])
def test_attach_restores_the_terminal_when_signalled(shared_daemon, api, sandbox, sig):
    """`airlock attach` puts the user's terminal in raw mode; a SIGTERM or a
    hang-up must not leave it there."""
    import signal
    import sys
    import termios
    sys.path.insert(0, str(REPO / "tests/integration"))
    from term import Term

    sid = sandbox["id"]
    pid = api.pty.create(sid, cmd=["/bin/sh", "-c", "echo ATTACHED-HERE; sleep 60"])
    argv = [str(AIRLOCK), "attach", "--socket", str(shared_daemon.socket), "--token",
            shared_daemon.admin, sid, str(pid)]
    t = Term(argv)
    try:
        t.expect(rb"ATTACHED-HERE")
        assert not t.mode()[3] & termios.ECHO, "the terminal is not raw while attached"
        os.kill(t.proc.pid, getattr(signal, sig))
        rc = t.wait(timeout=15)
        assert rc != 0
        assert t.mode() == t.initial, "the user's terminal was left in raw mode"
    finally:
        t.close()
    api.pty.kill(sid, pid)


@pytest.mark.parametrize("name", ["%2e%2e", "..", ".", "a%2Fb", "..%2F..%2Fetc", "A", "x" * 65,
                                  "%C3%A9t%C3%A9", "a%00b", "-rf", "_x"])
def test_volume_names_that_are_not_names(api, name):
    """A volume name in a URL is checked before any path is made of it:
    refused (400) or not found (404), never served or removed."""
    for method in ("GET", "DELETE"):
        status, _, body = api.request(method, "/v1/volumes/" + name)
        assert status in (400, 404), (method, name, status, body)
    status, _, body = api.request("POST", "/v1/volumes",
                                  body=('{"name": "%s", "size": "8M"}' % name).encode(),
                                  content_type="application/json")
    assert status == 400, (name, status, body)
