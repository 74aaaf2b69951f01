# SPDX-License-Identifier: Apache-2.0
"""Accept and diff across a host mount point inside the workspace.

A mount the host has under the workspace (a bind of another tree, a
network share) is another file system: the agent's changes under that name
were made to the sandbox's copy of the workspace, and accept wrote them
through the mount into whatever it shows (a bind of /etc, another user's
tree), and removed what the agent deleted there. Accept and diff do not
cross into another file system; they say which path is a mount point and
change nothing."""

import subprocess

import pytest
from test_review_attacks2 import _run_review


@pytest.fixture
def bound(root_airlock):
    made = []

    def bind(src, dst):
        subprocess.run(["mount", "--bind", str(src), str(dst)], check=True)
        made.append(dst)

    yield bind
    for d in reversed(made):
        if subprocess.run(["mountpoint", "-q", str(d)]).returncode == 0:
            subprocess.run(["umount", "-l", str(d)], check=False)


def test_accept_does_not_write_through_a_host_mount_point(root_airlock, bound):
    ws = root_airlock.make_dir()
    (ws / "sub").mkdir()
    (ws / "sub" / "keep.txt").write_text("mine\n")
    victim = root_airlock.make_dir("victim")
    (victim / "keep.txt").write_text("the victim's\n")
    sid = _run_review(root_airlock, ws, "echo owned > sub/planted; rm sub/keep.txt; echo top > top.txt")
    # After the run the host has another tree mounted at sub.
    bound(victim, ws / "sub")
    for verb in ("diff", "accept"):
        p = root_airlock.run([verb, sid], timeout=30, check_setup=False)
        assert p.returncode != 0, (verb, p.stdout + p.stderr)
        assert "mount point" in p.stderr and "sub" in p.stderr, p.stderr
    assert not (victim / "planted").exists()
    assert (victim / "keep.txt").read_text() == "the victim's\n"
    assert not (ws / "top.txt").exists()
    # Unmounted, the changes go where the sandbox made them.
    subprocess.run(["umount", str(ws / "sub")], check=True)
    p = root_airlock.run(["accept", sid], timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (ws / "top.txt").read_text() == "top\n"
    assert (ws / "sub" / "planted").read_text() == "owned\n"
    assert not (ws / "sub" / "keep.txt").exists()


def test_a_mount_point_the_run_had_too(root_airlock, bound):
    """A mount there from the start: what the agent wrote beneath it is
    still not written through it."""
    ws = root_airlock.make_dir()
    (ws / "share").mkdir()
    victim = root_airlock.make_dir("victim")
    (victim / "keep.txt").write_text("the victim's\n")
    bound(victim, ws / "share")
    sid = _run_review(root_airlock, ws, "echo owned > share/planted 2>/dev/null; echo x > x.txt; true")
    p = root_airlock.run(["accept", sid], timeout=30, check_setup=False)
    if p.returncode == 0:
        # Nothing was proposed beneath the mount (the sandbox could not
        # write there): then nothing crossed it either.
        assert not (victim / "planted").exists()
    else:
        assert "mount point" in p.stderr, p.stderr
        assert not (victim / "planted").exists()
