# SPDX-License-Identifier: Apache-2.0
"""A reviewed workspace's path swapped for a symlink before the accept.

`airlock accept` finds the workspace by the path the run recorded. Whoever
can rename in its parent (its owner, when root accepts for them) could make
that path a symlink to another directory, during the run or after it; the
accept then wrote the agent's files there and removed what the agent
deleted. It must refuse and change nothing."""

import os
import re
import threading
import time


def _run_review(airlock, ws, script):
    p = airlock.run(["run", "-q", "--review", "-w", ws, "--", "/bin/sh", "-c", script],
                    timeout=60)
    m = re.search(r"airlock accept (\w+)", p.stderr)
    assert m, p.stderr
    return m.group(1)


def _dirs(airlock):
    ws = airlock.make_dir()
    (ws / "keep.txt").write_text("mine\n")
    victim = airlock.make_dir("victim")
    (victim / "keep.txt").write_text("the victim's\n")
    airlock.chown(ws)
    airlock.chown(victim)
    if airlock.user:
        for d in (ws, victim):
            os.lchown(d / "keep.txt", airlock.user.pw_uid, airlock.user.pw_gid)
    return ws, victim


def test_accept_after_the_path_became_a_symlink(airlock):
    ws, victim = _dirs(airlock)
    sid = _run_review(airlock, ws, "echo owned > planted.sh; rm keep.txt")
    os.rename(ws, str(ws) + ".old")
    os.symlink(victim, ws)
    p = airlock.run(["accept", sid], timeout=30)
    assert p.returncode != 0, p.stdout + p.stderr
    assert "no longer names the directory" in p.stderr, p.stderr
    assert not (victim / "planted.sh").exists()
    assert (victim / "keep.txt").read_text() == "the victim's\n"
    # Put back, it applies.
    os.unlink(ws)
    os.rename(str(ws) + ".old", ws)
    p = airlock.run(["accept", sid], timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (ws / "planted.sh").read_text() == "owned\n"
    assert not (ws / "keep.txt").exists()


def test_accept_after_the_path_was_swapped_during_the_run(airlock):
    ws, victim = _dirs(airlock)
    old = str(ws) + ".old"

    def swap():
        time.sleep(0.5)
        os.rename(ws, old)
        os.symlink(victim, ws)

    # The host swaps the path while the agent runs.
    t = threading.Thread(target=swap)
    t.start()
    sid = _run_review(airlock, ws, "echo owned > planted.sh; rm keep.txt; sleep 1.5")
    t.join()
    assert os.path.islink(ws)
    p = airlock.run(["accept", sid], timeout=30)
    assert p.returncode != 0, p.stdout + p.stderr
    assert not (victim / "planted.sh").exists()
    assert (victim / "keep.txt").read_text() == "the victim's\n"
