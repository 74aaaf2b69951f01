# SPDX-License-Identifier: Apache-2.0
"""A read-write run-time mount (airlock caps --mount ...:rw) is checked on
the source as opened (no symbolic link anywhere on its path, the deny
list) and must be mounted from that same open file: a path opened again
after the checks would follow a directory swapped for a symbolic link in
between, and put a tree the checks never saw, a denied one, into the
sandbox read-write. The attack swaps a parent of the source with a link
to a denied tree, atomically (renameat2 RENAME_EXCHANGE), as fast as it
can, while the mount is asked for again and again."""

import ctypes
import json
import os
import subprocess
import sys
import time

import pytest

from test_caps import ask

FLIP = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, end = sys.argv[1].encode(), sys.argv[2].encode(), time.monotonic() + float(sys.argv[3])
AT_FDCWD, RENAME_EXCHANGE = -100, 2
while time.monotonic() < end:
    for _ in range(1000):
        libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
"""

WATCH = ("while true; do [ -e /workspace/m/MARKER ] && cp /workspace/m/MARKER /workspace/LEAK; "
         "sleep 0.01; done")


def test_swapped_parent_never_mounts_another_tree(airlock):
    if airlock.rootless:
        pytest.skip("run-time mounts need a root supervisor")
    base = airlock.make_dir("race")
    # The source the caller names: base/p/src, a plain directory.
    (base / "p" / "src").mkdir(parents=True)
    (base / "p" / "src" / "ok.txt").write_text("fine\n")
    # A denied tree with the same shape, and a link to it ready to swap in
    # for p. Owned by another uid, so the mount is an idmapped one.
    secret = airlock.make_dir("secret")
    (secret / "src").mkdir()
    (secret / "src" / "MARKER").write_text("denied tree\n")
    for path in (secret, secret / "src", secret / "src" / "MARKER"):
        os.chown(path, 54321, 54321)
    os.symlink(str(secret), str(base / "plink"))
    ws = airlock.make_dir()
    (ws / "m").mkdir()
    airlock.chown(ws)
    ctl = airlock.make_dir("ctl")
    sock = ctl / "c.sock"
    pol = ctl / "p.json"
    pol.write_text(json.dumps({"filesystem": {"denyRead": [str(secret)]}}))
    pol.chmod(0o644)
    run = subprocess.Popen(airlock.cmd(["run", "-q", "-w", ws, "-p", pol, "--control", sock, "--",
                                        "/bin/sh", "-c", WATCH]),
                           cwd=str(airlock.base), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    flip = None
    try:
        end = time.monotonic() + 30
        while not sock.exists():
            assert run.poll() is None and time.monotonic() < end, run.communicate()[1]
            time.sleep(0.05)
        flip = subprocess.Popen([sys.executable, "-c", FLIP, str(base / "p"), str(base / "plink"),
                                 "5"])
        granted = 0
        end = time.monotonic() + 4
        while time.monotonic() < end and not (ws / "LEAK").exists():
            r = ask(sock, {"op": "caps", "grant": [{"mount": {
                "source": str(base / "p" / "src"), "target": "/workspace/m", "readOnly": False}}]})
            if r.get("ok"):
                granted += 1
                time.sleep(0.03)
                r = ask(sock, {"op": "caps", "revoke": [{"mount": "/workspace/m"}]})
                assert r.get("ok"), r
        time.sleep(0.1)
        assert not (ws / "LEAK").exists(), \
            f"a denied tree was mounted read-write (after {granted} mounts)"
        assert granted > 0, "no mount was granted while the parent was being swapped"
    finally:
        if flip:
            flip.kill()
            flip.wait()
        run.kill()
        run.communicate(timeout=10)
