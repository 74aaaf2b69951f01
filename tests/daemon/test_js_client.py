# SPDX-License-Identifier: Apache-2.0
"""The JavaScript client (clients/js) against a real daemon: processes,
files (a write larger than one request), tar, watch, errors, audit. The
script checks each answer; this side checks the workspace through the
Python client, so the two clients agree."""

import json
import shutil
import subprocess

import pytest

from daemonlib import REPO

pytestmark = pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")


def test_js_client_tour(shared_daemon, api, sandbox):
    script = REPO / "tests/daemon/js_client_tour.mjs"
    p = subprocess.run(["node", str(script), str(shared_daemon.socket), shared_daemon.admin,
                        sandbox["id"]], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["listed"] and r["audit"] > 0 and r["metrics"], r
    sid = sandbox["id"]
    assert api.read_file(sid, "d/moved.txt") == b"hello"
    assert api.stat(sid, "big.bin")["size"] == r["bigSize"]
    assert api.read_file(sid, "watched.txt") == b"x"
    assert not api.exists(sid, "copy")
