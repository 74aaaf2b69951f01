# SPDX-License-Identifier: Apache-2.0
"""No cgroup leaf is left behind, in any hierarchy, when an owner is killed
outright and the state root that recorded its run is gone too (a daemon's
state directory removed after `kill -9`, a test's temporary --state-root):
the next Airlock command, and `airlock gc`, remove every empty airlock-<id>
leaf whose owner has died, found by the owner's lock on the leaf itself.
A leaf whose sandbox still runs is never touched.

Root only: the leaves of an ordinary user sit in a cgroup delegated to it,
which the sweep covers the same way (the unit test covers the lock)."""

import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
AIRLOCK_BIN = REPO / os.environ.get(
    "AIRLOCK_BIN", REPO / os.environ.get("AIRLOCK_BUILD", "build") / "src/cli/airlock")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a sandbox's cgroups)")


def leaves(sid):
    """Every directory named airlock-<sid> beneath /sys/fs/cgroup."""
    name = f"airlock-{sid}"
    found = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        if name in dirs:
            found.append(os.path.join(root, name))
        dirs[:] = [d for d in dirs if not (d.startswith("airlock-") and len(d) == 24)]
        if root.count("/") > 8:
            dirs[:] = []
    return found


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def empty(paths):
    for p in paths:
        try:
            with open(os.path.join(p, "cgroup.procs")) as f:
                if f.read().strip():
                    return False
        except FileNotFoundError:
            pass
    return True


def run(args, timeout=60):
    return subprocess.run([str(AIRLOCK_BIN), *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def tmp():
    d = tempfile.mkdtemp(prefix="airlock-leaves-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start(state_root, ws, *cmd):
    """`airlock run` in the background; its sandbox id once its leaves exist."""
    p = subprocess.Popen([str(AIRLOCK_BIN), "run", "-q", "--state-root", state_root, "-w", ws,
                          "--", *cmd], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    runs = os.path.join(state_root, "runs")

    def recorded():
        try:
            ids = [n for n in os.listdir(runs) if len(n) == 16]
        except FileNotFoundError:
            return None
        return ids[0] if ids and leaves(ids[0]) else None

    try:
        sid = wait_for(recorded, 20, "the run's record and cgroups")
    except AssertionError:
        p.kill()
        p.wait()
        raise
    return p, sid


def leak(tmp):
    """kill -9 the owner of a running sandbox, then lose its state root:
    what a daemon's test teardown does to the supervisors it started."""
    state = os.path.join(tmp, "state")
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    p, sid = start(state, ws, "sleep", "60")
    found = leaves(sid)
    p.kill()
    p.wait(timeout=10)
    wait_for(lambda: empty(found), 10, "the killed owner's tree to die")
    shutil.rmtree(state)
    assert leaves(sid), "the killed owner's leaves should still be there before a sweep"
    # Old enough that no owner can still be between making a leaf and
    # locking it (the sweep leaves younger ones alone).
    for d in leaves(sid):
        os.utime(d, (time.time() - 3600, time.time() - 3600))
    return sid, found


def test_next_run_removes_a_dead_owners_leaves_in_every_hierarchy(tmp):
    sid, found = leak(tmp)
    ws2 = os.path.join(tmp, "ws2")
    os.makedirs(ws2)
    p = run(["run", "-q", "--state-root", os.path.join(tmp, "other"), "-w", ws2, "--", "/bin/true"])
    assert p.returncode == 0, p.stderr
    assert leaves(sid) == [], f"left behind (were {found})"


def test_gc_removes_dead_owners_leaves_but_not_a_running_sandboxs(tmp):
    sid, found = leak(tmp)
    ws2 = os.path.join(tmp, "ws2")
    os.makedirs(ws2)
    live, live_id = start(os.path.join(tmp, "live"), ws2, "sleep", "30")
    try:
        live_leaves = leaves(live_id)
        for d in live_leaves:
            os.utime(d, (time.time() - 3600, time.time() - 3600))
        p = run(["gc", "--state-root", os.path.join(tmp, "gcroot")])
        assert p.returncode == 0, p.stderr
        assert leaves(sid) == [], f"left behind (were {found})"
        assert sorted(leaves(live_id)) == sorted(live_leaves)
        assert live.poll() is None, "gc touched a running sandbox"
    finally:
        live.kill()
        live.wait(timeout=10)
    # The live one's owner died just now: its leaves are young, so only a
    # sweep after the age bound (or the record, here still present) takes
    # them; the record's sweep does.
    p = run(["run", "-q", "--state-root", os.path.join(tmp, "live"), "-w", ws2, "--", "/bin/true"])
    assert p.returncode == 0, p.stderr
    assert leaves(live_id) == []


def test_daemon_teardown_that_kills_its_supervisors_and_removes_its_state_leaves_nothing(tmp):
    # What tests/daemon/daemonlib.py's cleanup does, and what left the
    # leaves found on the shared machine: the daemon stops (its sandboxes
    # keep running, to be found again by the next daemon), their
    # supervisors are killed outright, and the daemon's directory, where
    # they recorded their runs, is removed.
    import sys
    sys.path.insert(0, str(REPO / "tests/daemon"))
    from daemonlib import Daemon

    base = os.path.join(tmp, "d")
    os.makedirs(base)
    d = Daemon(base)
    tok = d.grant("admin", "--allow-sandbox")
    d.start()
    try:
        sb = d.client(tok).create(sandbox_class="small")["id"]
        sups = d.supervisors()
        assert sb in sups, sups
        d.stop()
        found = {s: leaves(s) for s in sups}
        d.cleanup(None)
    finally:
        d.stop()
    wait_for(lambda: all(empty(f) for f in found.values()), 10, "the killed supervisors' trees")
    shutil.rmtree(base)
    assert leaves(sb), "the killed supervisor's leaves should still be there before a sweep"
    for s in sups:
        for leaf in leaves(s):
            os.utime(leaf, (time.time() - 3600, time.time() - 3600))
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    p = run(["run", "-q", "--state-root", os.path.join(tmp, "other"), "-w", ws, "--", "/bin/true"])
    assert p.returncode == 0, p.stderr
    assert {s: leaves(s) for s in sups} == {s: [] for s in sups}, found
