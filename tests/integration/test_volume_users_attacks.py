# SPDX-License-Identifier: Apache-2.0
"""Attacks on an ordinary user's volume saved back to the host
(src/lib/volume/dirvol.c) by a sandbox with several users ("users").

The saved files belong to the caller on the host, so on the next run they
belong to the sandbox's own user. What another inside user made must not
come back as the sandbox user's: a repository, a config file or a link of
that user would then pass every "owned by me" check (git's safe.directory,
ssh's StrictModes) of the sandbox's own user, which would run it."""

import os

import pytest

from test_exec_uid_rootless import multi, subid_range  # noqa: F401 (fixture)
from test_volume_rootless import _data, uvol  # noqa: F401 (fixture)


def test_another_users_files_do_not_come_back_as_the_sandbox_users(airlock, uvol, multi):
    s = multi({"users": 1024, "filesystem": {"mounts": [
        {"volume": uvol, "target": "/v", "readonly": False}]}})
    ev, out, err = s.exec(["sh", "-c", "chmod 777 /v && echo mine > /v/mine"])
    assert [e for e in ev if e.get("type") == "exit"][0]["exitCode"] == 0, err
    ev, out, err = s.exec(["sh", "-c",
                           "mkdir -p /v/repo/.git && echo '[core] fsmonitor = evil' > "
                           "/v/repo/.git/config && chmod -R a+rX /v/repo && "
                           "echo planted > /v/planted && chmod 644 /v/planted && "
                           "ln -s /v/mine /v/link500"], uid=500)
    assert [e for e in ev if e.get("type") == "exit"][0]["exitCode"] == 0, err
    s.close()
    d = _data(airlock, uvol)
    assert (d / "mine").read_text() == "mine\n"
    assert os.stat(d / "mine").st_uid == airlock.user.pw_uid
    # Inside user 500's entries: left out, not handed to the sandbox's user.
    for name in ("planted", "repo", "link500"):
        assert not os.path.lexists(d / name), f"{name} of inside user 500 saved as the caller's"


def test_the_sandbox_users_files_survive_runs_with_users(airlock, uvol, multi):
    """The restored files are the sandbox user's (not another inside id's),
    so a save after a save keeps them."""
    pol = {"users": 1024, "filesystem": {"mounts": [
        {"volume": uvol, "target": "/v", "readonly": False}]}}
    s = multi(pol)
    ev, out, err = s.exec(["sh", "-c", "mkdir /v/d && echo mine > /v/d/f"])
    assert [e for e in ev if e.get("type") == "exit"][0]["exitCode"] == 0, err
    s.close()
    for _ in range(2):
        s = multi(pol)
        ev, out, err = s.exec(["sh", "-c", "stat -c %u /v/d /v/d/f; cat /v/d/f"])
        assert out.split() == ["1000", "1000", "mine"], (ev, err)
        s.close()
    assert (_data(airlock, uvol) / "d" / "f").read_text() == "mine\n"
