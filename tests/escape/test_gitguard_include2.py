# SPDX-License-Identifier: Apache-2.0
"""A config the host reaches through its own symbolic link in the
workspace (.gitconfig-shared -> conf/team.cfg) includes `local.cfg`: host
git resolves that from the link's directory, the path it opened, so the
workspace's top-level local.cfg is read as config. The agent writes a
core.fsmonitor there; after the run, real host git is run in the
workspace, and the program must not have run."""

import os
import subprocess

import pytest

GIT = "/usr/bin/git"


def host_git(cwd, *args, home):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        [GIT, "-c", "safe.directory=*", *args],
        cwd=str(cwd), env=env, capture_output=True, text=True, timeout=30)


@pytest.fixture
def host(tmp_path):
    if not os.access(GIT, os.X_OK):
        pytest.skip("git is not installed")
    home = tmp_path / "home"
    home.mkdir()
    return home


def test_what_a_linked_config_includes_is_read_from_the_links_directory(airlock, host):
    ws = airlock.make_dir()
    marker = host / "pwned"
    subprocess.run([GIT, "init", "-q", "-b", "main", str(ws)], check=True, timeout=30)
    with open(ws / ".git" / "config", "a") as f:
        f.write("[include]\n\tpath = ../.gitconfig-shared\n")
    (ws / "conf").mkdir()
    (ws / "conf" / "team.cfg").write_text("[include]\n\tpath = local.cfg\n")
    os.symlink("conf/team.cfg", ws / ".gitconfig-shared")
    airlock.chown(ws)
    script = ("printf '[core]\\n\\tfsmonitor = \"touch %s\"\\n' > /workspace/local.cfg"
              % marker)
    p = airlock.sandbox(script, workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    host_git(ws, "status", home=host)
    assert not marker.exists(), "host git ran the agent's fsmonitor:\n" + p.stderr
    assert not (ws / "local.cfg").exists(), p.stderr
    assert list(ws.glob("local.cfg.airlock-quarantine*")), "the agent wrote nothing"
