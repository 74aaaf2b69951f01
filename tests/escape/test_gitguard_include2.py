# SPDX-License-Identifier: Apache-2.0
"""A config the host reaches through its own symbolic link in the
workspace (.gitconfig-shared -> conf/team.cfg) includes `local.cfg`: host
git resolves that from the link's directory, the path it opened, so the
workspace's top-level local.cfg is read as config. The agent writes a
core.fsmonitor there; after the run, real host git is run in the
workspace, and the program must not have run."""

import os

from test_gitguard_include import _repo, host, host_git  # noqa: F401 (host: a fixture)


def test_what_a_linked_config_includes_is_read_from_the_links_directory(airlock, host):
    ws = airlock.make_dir()
    marker = host / "pwned"
    _repo(ws, "[include]\n\tpath = ../.gitconfig-shared\n")
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
