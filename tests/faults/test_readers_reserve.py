# SPDX-License-Identifier: Apache-2.0
"""Read-only grants together cannot take every file watch or event stream.
Watches and streams were bounded per grant under a daemon-wide cap: four
grants that may only read took all 64 watches of the daemon (16 each), and
sixteen took all 256 event streams, so the sandbox's maker could not watch
its own files or follow its own events. Now the watches of sandboxes
another grant made share at most half of the daemon's, and so do the
streams of grants that make nothing: the rest stay for the makers."""

import os
import pathlib
import shutil
import socket
import sys
import tempfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "daemon"))
from daemonlib import AIRLOCK, AIRLOCKD, Daemon  # noqa: E402


@pytest.fixture
def readers():
    if os.geteuid() != 0:
        pytest.skip("the daemon fault tests run as root")
    for b in (AIRLOCK, AIRLOCKD):
        if not b.exists():
            pytest.skip(f"{b} is not built")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="airlockd-rr-", dir="/tmp"))
    d = Daemon(tmp / "d", [])
    d.admin = d.grant("owner", "--allow-sandbox", "--allow-exec", "--allow-host-workspace")
    d.readers = [d.grant(f"reader{i}") for i in range(16)]
    d.start()
    d.tmp = tmp
    try:
        yield d
    finally:
        d.cleanup(d.admin)
        shutil.rmtree(tmp, ignore_errors=True)


def _open(d, token, target):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(d.socket))
    s.sendall((f"GET {target} HTTP/1.1\r\nHost: airlockd\r\n"
               f"Authorization: Bearer {token}\r\n\r\n").encode())
    head = b""
    while b"\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    return s, head.split(b"\r\n", 1)[0]


def _take_all(d, tokens, target, per_grant, held):
    taken = 0
    for token in tokens:
        for _ in range(per_grant):
            s, status = _open(d, token, target)
            assert b" 200 " in status or b" 429 " in status, status
            if b" 200 " in status:
                held.append(s)
                taken += 1
            else:
                s.close()
    return taken


def test_readers_cannot_take_the_makers_watches(readers):
    d = readers
    c = d.client(d.admin)
    ws = tempfile.mkdtemp(prefix="ws-", dir=d.tmp)
    sb = c.create(sandbox_class="small", workspace=ws)["id"]
    target = f"/v1/sandboxes/{sb}/files/watch?path=.&recursive=false&timeout=60"
    held = []
    try:
        taken = _take_all(d, d.readers[:4], target, 16, held)
        assert 0 < taken < 64, taken
        s, status = _open(d, d.admin, target)
        held.append(s)
        assert b" 200 " in status, f"the maker could not watch its own sandbox: {status!r}"
    finally:
        for s in held:
            s.close()


def test_readers_cannot_take_the_makers_event_streams(readers):
    d = readers
    held = []
    try:
        taken = _take_all(d, d.readers, "/v1/events", 16, held)
        assert 0 < taken < 256, taken
        s, status = _open(d, d.admin, "/v1/events")
        held.append(s)
        assert b" 200 " in status, f"the maker could not follow its events: {status!r}"
    finally:
        for s in held:
            s.close()
