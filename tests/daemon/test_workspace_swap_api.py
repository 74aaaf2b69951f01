# SPDX-License-Identifier: Apache-2.0
"""A create's host workspace swapped by another user before the mount.

airlockd (root) resolves a create's `workspace` by its path and again while
the sandbox is built. A directory on that path another user owns (or can
write without the sticky bit) lets them swap what the path names, for a
link to a third party's tree, in between: the daemon mounted it read-write.
Such a create is refused: 403 `workspace_unsafe`, `field` `workspace`."""

import os
import pwd
import secrets

import pytest
from daemonlib import AirlockError


@pytest.fixture
def api(shared_daemon):
    return shared_daemon.client(shared_daemon.grant(
        "ws-" + secrets.token_hex(4), "--allow-sandbox", "--allow-exec", "--allow-host-workspace"))


def _dirs(tmp_path):
    other = pwd.getpwnam("nobody")
    victim = tmp_path / "victim"
    (victim / "ws").mkdir(parents=True)
    victim.chmod(0o700)
    (victim / "ws" / "secret").write_text("the victim's\n")
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, other.pw_uid, other.pw_gid)
    return other, victim, home


def test_create_through_another_users_link_is_refused(api, tmp_path):
    other, victim, home = _dirs(tmp_path)
    os.symlink(victim, home / "proj")
    os.lchown(home / "proj", other.pw_uid, other.pw_gid)
    with pytest.raises(AirlockError) as e:
        sb = api.create(sandbox_class="small", workspace=str(home / "proj" / "ws"))
        # The old daemon: the victim's tree, read-write.
        api.run(sb["id"], ["sh", "-c", "echo owned > planted"])
    assert e.value.status == 403, e.value.body
    assert e.value.body["error"] == "workspace_unsafe", e.value.body
    assert e.value.body["field"] == "workspace"
    assert f"{home} is owned by uid {other.pw_uid}" in e.value.body["message"]
    assert not (victim / "ws" / "planted").exists()


def test_create_under_a_world_writable_directory_is_refused(api, tmp_path):
    d = tmp_path / "open"
    (d / "proj").mkdir(parents=True)
    d.chmod(0o777)
    with pytest.raises(AirlockError) as e:
        api.create(sandbox_class="small", workspace=str(d / "proj"))
    assert (e.value.status, e.value.body["error"]) == (403, "workspace_unsafe"), e.value.body
    assert f"{d} is world-writable" in e.value.body["message"]


def test_create_on_a_root_path_still_works(api, tmp_path):
    ws = tmp_path / "proj"
    ws.mkdir()
    sb = api.create(sandbox_class="small", workspace=str(ws))
    api.run(sb["id"], ["sh", "-c", "echo made > made"])
    assert (ws / "made").read_text() == "made\n"
    api.delete(sb["id"])
