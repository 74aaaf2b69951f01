# SPDX-License-Identifier: Apache-2.0
"""A root run's workspace swapped by another user before the sandbox starts.

Root resolves `--workspace` by its path, and again while it builds the
sandbox. A directory on that path another user can change (their home, a
group- or world-writable directory without the sticky bit, their entry in
/tmp) lets them swap what the path names, for a symbolic link to a third
user's project or to /etc, in between: root then mounted that tree
read-write for the agent. As root, such a workspace is refused (exit 123,
`workspace_unsafe`), naming the directory and what to do."""

import json
import os
import pwd

import pytest

UNSAFE = 123


def _victim(airlock):
    """A third party's project: the path the attacker's link leads to is
    VICTIM/ws (a link as the workspace's last component is refused by
    the mount, which follows none; one above it was followed)."""
    v = airlock.make_dir("victim")
    v.chmod(0o700)
    (v / "ws").mkdir()
    (v / "ws" / "secret").write_text("the victim's\n")
    return v / "ws"


def _their_dir(airlock, other, name="home"):
    """A directory of the other user's (their home, say)."""
    d = airlock.make_dir(name)
    os.chown(d, other.pw_uid, other.pw_gid)
    return d


def _write_in_ws(airlock, ws, env=None):
    return airlock.run(["run", "-q", "-w", ws, "--", "/bin/sh", "-c",
                        "cat /workspace/secret 2>/dev/null; echo owned > /workspace/planted"],
                       timeout=60, check_setup=False, env=env)


def test_swapped_for_a_link_in_another_users_directory(root_airlock):
    """The other user owns the workspace's parent and makes the workspace
    name a link to a third party's directory: nothing of it is mounted."""
    other = pwd.getpwnam("nobody")
    victim = _victim(root_airlock)
    home = _their_dir(root_airlock, other)
    os.symlink(victim.parent, home / "proj")
    os.lchown(home / "proj", other.pw_uid, other.pw_gid)
    p = _write_in_ws(root_airlock, home / "proj" / "ws")
    assert p.returncode == UNSAFE, p.stdout + p.stderr
    assert "the victim's" not in p.stdout
    assert not (victim / "planted").exists()
    assert f"{home} is owned by uid {other.pw_uid}" in p.stderr, p.stderr
    assert "another user could swap" in p.stderr


def test_a_real_directory_under_another_users_directory_is_refused_too(root_airlock):
    """What the path names now does not matter: the other user can change it
    between the check and the mount."""
    other = pwd.getpwnam("nobody")
    home = _their_dir(root_airlock, other)
    (home / "proj").mkdir()
    p = _write_in_ws(root_airlock, home / "proj")
    assert p.returncode == UNSAFE, p.stdout + p.stderr
    assert not (home / "proj" / "planted").exists()
    # The result file says why.
    rdir = root_airlock.make_dir("result")
    p = root_airlock.run(["run", "--result", rdir / "r.json", "-w", home / "proj", "--", "true"],
                 check_setup=False)
    assert p.returncode == UNSAFE
    res = json.loads((rdir / "r.json").read_text())
    assert res["errorCode"] == "workspace_unsafe", res


def test_the_user_sudo_runs_for_may_own_the_path(root_airlock):
    """`sudo airlock run` in one's own home: SUDO_UID names whose
    directories root trusts besides its own."""
    other = pwd.getpwnam("nobody")
    home = _their_dir(root_airlock, other)
    (home / "proj").mkdir()
    os.chown(home / "proj", other.pw_uid, other.pw_gid)
    env = dict(os.environ, SUDO_UID=str(other.pw_uid))
    p = _write_in_ws(root_airlock, home / "proj", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (home / "proj" / "planted").read_text() == "owned\n"
    # Another user's SUDO_UID does not vouch for this one.
    env = dict(os.environ, SUDO_UID=str(other.pw_uid + 1))
    p = _write_in_ws(root_airlock, home / "proj", env=env)
    assert p.returncode == UNSAFE, p.stdout + p.stderr


def test_a_link_further_up_the_path_is_walked_too(root_airlock):
    """A link owned by root in a root directory is followed, and the
    directories where it leads are held to the same rule."""
    other = pwd.getpwnam("nobody")
    victim = _victim(root_airlock)
    shared = _their_dir(root_airlock, other, "shared")
    os.symlink(victim.parent, shared / "proj")
    top = root_airlock.make_dir("top")
    os.symlink(shared, top / "via")
    p = _write_in_ws(root_airlock, top / "via" / "proj" / "ws")
    assert p.returncode == UNSAFE, p.stdout + p.stderr
    assert f"{shared} is owned by uid {other.pw_uid}" in p.stderr, p.stderr
    assert not (victim / "planted").exists()
    # Through "..": the same.
    p = _write_in_ws(root_airlock, f"{top}/../{top.name}/via/proj/ws")
    assert p.returncode == UNSAFE, p.stdout + p.stderr


@pytest.mark.parametrize("mode,why", [(0o777, "world-writable"), (0o775, "group-writable")])
def test_a_writable_directory_without_the_sticky_bit(root_airlock, mode, why):
    d = root_airlock.make_dir("open")
    (d / "proj").mkdir()
    d.chmod(mode)
    p = _write_in_ws(root_airlock, d / "proj")
    assert p.returncode == UNSAFE, p.stdout + p.stderr
    assert f"{d} is {why}" in p.stderr, p.stderr


def test_a_sticky_directory_like_tmp(root_airlock):
    """In a sticky directory an entry of root's (or the caller's) stays
    theirs; another user's entry, a link included, is refused."""
    other = pwd.getpwnam("nobody")
    victim = _victim(root_airlock)
    d = root_airlock.make_dir("sticky")
    d.chmod(0o1777)
    (d / "mine").mkdir()
    p = _write_in_ws(root_airlock, d / "mine")
    assert p.returncode == 0, p.stdout + p.stderr
    os.symlink(victim.parent, d / "theirs")
    os.lchown(d / "theirs", other.pw_uid, other.pw_gid)
    p = _write_in_ws(root_airlock, d / "theirs" / "ws")
    assert p.returncode == UNSAFE, p.stdout + p.stderr
    assert "sticky" in p.stderr and f"uid {other.pw_uid}" in p.stderr, p.stderr
    assert not (victim / "planted").exists()


def test_review_and_read_only_runs_are_refused_too(root_airlock):
    other = pwd.getpwnam("nobody")
    victim = _victim(root_airlock)
    home = _their_dir(root_airlock, other)
    os.symlink(victim.parent, home / "proj")
    pdir = root_airlock.make_dir("policy")
    (pdir / "ro.json").write_text(json.dumps({"workspace": {"mode": "ro"}}))
    for flags in (["--review"], ["-p", pdir / "ro.json"]):
        p = root_airlock.run(["run", "-q", *flags, "-w", home / "proj" / "ws", "--", "cat", "/workspace/secret"],
                     check_setup=False)
        assert p.returncode == UNSAFE, (flags, p.stdout + p.stderr)
        assert "the victim's" not in p.stdout
