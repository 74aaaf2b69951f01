# SPDX-License-Identifier: Apache-2.0
"""The disk meter's walk of a read-write workspace (boundary/diskuse.c) does
not pause the network gate. The gate relays on the supervisor's event loop;
the walk of the workspace's tree must not run there. Here the walk is made
to take as long as the test wants: once the sandbox has started (its base
walk done), a FUSE file system that never answers is mounted inside the
workspace on the host, so the next walk waits on its mount point. Requests
relayed by the gate's HTTP proxy meanwhile must keep being answered at
once.

The bound on a request (1 s) is far above a relayed request's normal time
on a loaded machine (milliseconds) and far below the walk's (until the test
aborts the file system)."""

import ctypes
import json
import os
import subprocess
import threading
import time

import pytest

from hungfuse import hung_fuse
from netns import HELLO, HTTP_PORT, RANGE, SERVER_ADDR
from netns import net  # noqa: F401  (the test network, one per module)

BOUND = 1.0  # s, one relayed request at most
RELAY_FOR = 2.5  # s of requests after the mount: the walk comes once a second

SCRIPT = r'''
import json, os, socket, sys, time
open("/workspace/ready", "w").close()
deadline = time.monotonic() + 20
while not os.path.exists("/workspace/go") and time.monotonic() < deadline:
    time.sleep(0.01)
req = ("GET http://upstream.test:%s/hello.txt HTTP/1.1\r\nHost: upstream.test:%s\r\n"
       "Connection: close\r\n\r\n" % (sys.argv[1], sys.argv[1])).encode()
lat, errs = [], []
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=2)
        s.settimeout(2)
        s.sendall(req)
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        if not data.startswith(b"HTTP/1.1 200") or sys.argv[3].encode() not in data:
            errs.append(data[:80].decode("latin-1"))
    except OSError as e:
        errs.append(repr(e))
    lat.append(time.monotonic() - t0)
    time.sleep(0.02)
print(json.dumps({"n": len(lat), "max": max(lat), "errs": errs[:5], "nerrs": len(errs)}), flush=True)
'''


def test_relay_answers_while_the_workspace_walk_waits(airlock, net):
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.skip("needs root and /dev/fuse to mount the hung file system")
    ws = airlock.make_dir()
    (ws / "mnt").mkdir()
    (ws / "client.py").write_text(SCRIPT)
    airlock.chown(ws)
    rdir = airlock.make_dir("result")
    args = ["run", "-q", "--result", rdir / "result.json", "-w", ws,
            "--allow-private", RANGE, "--host", f"upstream.test={SERVER_ADDR}",
            "--allow", f"upstream.test:{HTTP_PORT}",
            "--", "/usr/bin/python3", "/workspace/client.py", str(HTTP_PORT), str(RELAY_FOR), HELLO.strip()]
    argv = ["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(args)]
    p = subprocess.Popen(argv, cwd=str(airlock.base), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    fuse_fd = None
    aborted = threading.Event()

    def abort():
        if not aborted.is_set():
            aborted.set()
            if fuse_fd is not None:
                os.close(fuse_fd)  # every request waiting on it fails
                ctypes.CDLL(None).umount2(str(ws / "mnt").encode(), 2)

    try:
        deadline = time.monotonic() + 30
        while not (ws / "ready").exists():
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the sandbox never started"
            time.sleep(0.02)
        fuse_fd = hung_fuse(str(ws / "mnt"))
        (ws / "go").touch()
        # Whatever the gate does, the file system is aborted in time for
        # the run to end within the test's bound.
        timer = threading.Timer(RELAY_FOR + 12, abort)
        timer.start()
        line = p.stdout.readline()
        got = json.loads(line) if line.startswith("{") else None
        timer.cancel()
        # The end of the run opens the workspace's directories (its git
        # metadata is looked for): the file system is aborted first.
        abort()
        out, err = p.communicate(timeout=30)
        assert got is not None, (line, out, err)
        assert p.returncode == 0, (p.returncode, err)
        assert got["max"] < BOUND, f"a relayed request waited {got['max']:.2f} s during the walk: {got}"
        assert got["nerrs"] == 0, got
        assert got["n"] >= 10, got
    finally:
        abort()
        if p.poll() is None:
            p.kill()
            p.wait(10)
