# SPDX-License-Identifier: Apache-2.0
"""Attacks on per-command users' host ids (src/lib/boundary/idrange.c).

A root sandbox's range is freed when it ends unless its other users could
leave files on a host tree that outlives it; then it is retired, never
handed out again (another sandbox's user of the same number would own
those files). A read-write tree mounted while the sandbox runs is such a
tree as much as one mounted at the start."""

import os
import shutil
import tempfile

import pytest

from daemonlib import AirlockError

BASE, END = 0x70000000, 0x7FFE0000
RECORDS = "/var/lib/airlock/idranges"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root's id ranges (airlockd as root)")


@pytest.fixture(scope="module")
def lm(shared_daemon):
    d = shared_daemon
    tok = d.grant("idr-attacks", "--allow-sandbox", "--allow-exec", "--allow-capabilities",
                  "--allow-host-workspace")
    return d.client(tok)


def host_of(api, sid, inside):
    r = api.run(sid, ["cat", "/proc/self/uid_map"], timeout=20)
    assert r.exit_code == 0, r.stderr
    for line in r.stdout.decode().splitlines():
        first, out, count = (int(x) for x in line.split())
        if first <= inside < first + count:
            return out + inside - first
    return None


def record(first):
    try:
        with open(os.path.join(RECORDS, str(first))) as f:
            return f.read().split()
    except FileNotFoundError:
        return None  # freed and already taken out by a later allocation


def test_live_read_write_mount_retires_the_range(lm):
    plain = tempfile.mkdtemp(prefix="idr-live-", dir="/tmp")
    os.chmod(plain, 0o777)
    os.chown(plain, 65534, 65534)  # the sandbox user's own tree: a plain bind
    sb = lm.create(sandbox_class="small", policy={"users": 1024, "workspace": {"mode": "ro"}})
    sid = sb["id"]
    try:
        base = host_of(lm, sid, 0)
        assert BASE <= base < END
        first = (base - BASE) // 1024
        # Nothing writable of the host's at the start: the range would be freed.
        assert record(first) == ["1", "0"]
        r = lm.run(sid, ["mkdir", "-p", "/tmp/p"], timeout=20)
        assert r.exit_code == 0, r.stderr
        lm.grant_capabilities(sid, {"mount": {"source": plain, "target": "/tmp/p",
                                              "readOnly": False}})
        r = lm.run(sid, ["sh", "-c", "echo mine > /tmp/p/by500 && chmod 600 /tmp/p/by500"],
                   uid=500, timeout=20)
        assert r.exit_code == 0, r.stderr
        owner = os.stat(os.path.join(plain, "by500")).st_uid
        assert owner == base + 500
    finally:
        try:
            lm.delete(sid)
        except (AirlockError, OSError):
            pass
    try:
        # A file of inside user 500 stays on the host: its host id must
        # never be another sandbox's user 500.
        assert record(first) == ["1", "1"], "range freed with a file of its user left on the host"
    finally:
        shutil.rmtree(plain, ignore_errors=True)


def test_idmapped_workspace_does_not_use_up_the_reserve(lm):
    """Ranges retired for good are gone from the reserve for every grant:
    one that makes sandboxes with "users": 65536 (64 blocks each) and a
    read-write workspace would use the whole reserve up after about 4094
    of them, and no sandbox on the host could have "users" again. A
    workspace idmapped to the sandbox's user takes no file of another
    user (EOVERFLOW), so its range is freed, not retired."""
    ws = tempfile.mkdtemp(prefix="idr-ws-", dir="/tmp")
    os.chmod(ws, 0o777)  # root's: idmapped to the sandbox's user
    sb = lm.create(sandbox_class="small", workspace=ws, policy={"users": 1024})
    sid = sb["id"]
    try:
        base = host_of(lm, sid, 0)
        first = (base - BASE) // 1024
        r = lm.run(sid, ["sh", "-c", "touch /workspace/by500"], uid=500, timeout=20)
        assert r.exit_code != 0
        assert os.listdir(ws) == []
        assert record(first) == ["1", "0"]
    finally:
        try:
            lm.delete(sid)
        except (AirlockError, OSError):
            pass
        shutil.rmtree(ws, ignore_errors=True)
    assert record(first) in (["1", "0"], None)
