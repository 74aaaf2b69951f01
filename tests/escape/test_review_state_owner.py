# SPDX-License-Identifier: Apache-2.0
"""A root accept of a state directory another user can write.

A review's `meta.json` names the workspace accept writes to. Root accepting
from a state directory another user owns (their `~/.local/state/airlock`,
given with --state-root) or can write read whatever they had put there: a
`meta.json` naming a third party's directory (its recorded identity left
out) made root write the agent's files into it. As root, the state
directory, every directory on its path and its JSON files must be
changeable by nobody but root or the user sudo runs for (SUDO_UID); `sudo
airlock accept` of one's own run still works."""

import json
import os
import pwd
import re



def _review(airlock, state, script="echo owned > planted"):
    ws = airlock.make_dir()
    (ws / "keep.txt").write_text("mine\n")
    p = airlock.run(["run", "-q", "--review", "--state-root", state, "-w", ws, "--",
                     "/bin/sh", "-c", script], timeout=60)
    m = re.search(r"airlock accept --state-root \S+ (\w+)", p.stderr)
    assert m, p.stderr
    return ws, m.group(1)


def _chown_tree(top, user):
    for d, dirs, files in os.walk(top):
        os.chown(d, user.pw_uid, user.pw_gid)
        for f in files:
            os.lchown(os.path.join(d, f), user.pw_uid, user.pw_gid)


def _meta(state, sid):
    return state / "sandboxes" / sid / "meta.json"


def test_meta_json_of_another_users_state_dir_is_not_trusted(root_airlock):
    other = pwd.getpwnam("nobody")
    state = root_airlock.make_dir("state")
    ws, sid = _review(root_airlock, state)
    victim = root_airlock.make_dir("victim")
    (victim / "keep.txt").write_text("the victim's\n")
    # The other user's state directory: they point its meta.json at the
    # victim and drop the recorded identity.
    _chown_tree(state, other)
    meta = json.loads(_meta(state, sid).read_text())
    meta["workspace"] = str(victim)
    meta.pop("workspaceIdentity", None)
    _meta(state, sid).write_text(json.dumps(meta))
    for verb in ("accept", "diff"):
        p = root_airlock.run([verb, "--state-root", state, sid], timeout=30, check_setup=False)
        assert p.returncode != 0, (verb, p.stdout + p.stderr)
        assert f"is owned by uid {other.pw_uid}" in p.stderr, p.stderr
    assert not (victim / "planted").exists()
    assert not (ws / "planted").exists()


def test_sudo_accept_of_ones_own_state_dir(root_airlock):
    other = pwd.getpwnam("nobody")
    state = root_airlock.make_dir("state")
    ws, sid = _review(root_airlock, state)
    _chown_tree(state, other)
    p = root_airlock.run(["accept", "--state-root", state, sid], timeout=30, check_setup=False)
    assert p.returncode != 0 and "owned by uid" in p.stderr, p.stdout + p.stderr
    env = dict(os.environ, SUDO_UID=str(other.pw_uid))
    p = root_airlock.run(["accept", "--state-root", state, sid], timeout=30, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (ws / "planted").read_text() == "owned\n"


def test_a_foreign_writable_meta_or_manifest_in_roots_state_dir(root_airlock):
    other = pwd.getpwnam("nobody")
    state = root_airlock.make_dir("state")
    ws, sid = _review(root_airlock, state)
    meta = _meta(state, sid)
    meta.chmod(0o666)
    p = root_airlock.run(["accept", "--state-root", state, sid], timeout=30, check_setup=False)
    assert p.returncode != 0 and "meta.json is not a regular file only root" in p.stderr, \
        p.stdout + p.stderr
    meta.chmod(0o600)
    manifest = meta.parent / "manifest.json"
    os.chown(manifest, other.pw_uid, other.pw_gid)
    p = root_airlock.run(["accept", "--state-root", state, sid], timeout=30, check_setup=False)
    assert p.returncode != 0 and "manifest.json is not a regular file" in p.stderr, \
        p.stdout + p.stderr
    os.chown(manifest, 0, 0)
    p = root_airlock.run(["accept", "--state-root", state, sid], timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (ws / "planted").read_text() == "owned\n"


def test_a_state_root_under_a_world_writable_directory(root_airlock):
    top = root_airlock.make_dir("open")
    state = top / "state"
    state.mkdir()
    ws, sid = _review(root_airlock, state)
    top.chmod(0o777)
    p = root_airlock.run(["accept", "--state-root", state, sid], timeout=30, check_setup=False)
    assert p.returncode != 0, p.stdout + p.stderr
    assert f"{top} is world-writable" in p.stderr, p.stderr
    assert not (ws / "planted").exists()
