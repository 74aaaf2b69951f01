# SPDX-License-Identifier: Apache-2.0
"""Hooks and config host git reaches in ways the end-of-run scan did not
follow: a core.hooksPath set in a file the host's .git/config includes, the
relative core.hooksPath of a linked worktree, and a workspace given through a
symbolic link while its config names the real path. In each, the agent
plants a program; after the run, real host git is run in the workspace, and
the program must not have run."""

import os
import pathlib
import subprocess
import tempfile

import pytest

GIT = "/usr/bin/git"


def host_git(cwd, *args, home):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        [GIT, "-c", "safe.directory=*", "-c", "user.name=u", "-c", "user.email=u@example.com",
         *args],
        cwd=str(cwd), env=env, capture_output=True, text=True, timeout=30)


@pytest.fixture
def host(tmp_path):
    if not os.access(GIT, os.X_OK):
        pytest.skip("git is not installed")
    home = tmp_path / "home"
    home.mkdir()
    return home


def plant_hook(path, marker):
    return (f"mkdir -p {path.rsplit('/', 1)[0]} && "
            f"printf '#!/bin/sh\\ntouch {marker}\\n' > {path} && chmod 755 {path}")


def _repo(ws, config):
    """A repository at ws whose .git/config gets config appended."""
    subprocess.run([GIT, "init", "-q", "-b", "main", str(ws)], check=True, timeout=30)
    with open(ws / ".git" / "config", "a") as f:
        f.write(config)


def _commit_ran_no_hook(where, hook, marker, host, p):
    """After the run: a host commit in `where` works, the agent's hook was
    moved aside and did not run."""
    assert p.returncode == 0, p.stderr
    g = host_git(where, "commit", "-q", "--allow-empty", "-m", "x", home=host)
    assert g.returncode == 0, g.stderr
    assert not marker.exists(), "host git ran the agent's hook"
    assert not hook.exists(), p.stderr


def test_a_hooks_path_set_in_an_included_file(airlock, host):
    ws = airlock.make_dir()
    marker = host / "pwned"
    _repo(ws, "[include]\n\tpath = ../shared.cfg\n")
    (ws / "shared.cfg").write_text("[core]\n\thooksPath = .githooks\n")
    # No .githooks at the start (one there is read-only): the agent makes it.
    airlock.chown(ws)
    p = airlock.sandbox(plant_hook("/workspace/.githooks/pre-commit", marker), workspace=ws,
                        timeout=60)
    _commit_ran_no_hook(ws, ws / ".githooks" / "pre-commit", marker, host, p)
    assert "core.hooksPath" in p.stderr


def test_a_relative_hooks_path_in_a_linked_worktree(airlock, host):
    ws = airlock.make_dir()
    marker = host / "pwned"
    _repo(ws, "[core]\n\thooksPath = .githooks\n")
    assert host_git(ws, "commit", "-q", "--allow-empty", "-m", "init", home=host).returncode == 0
    assert host_git(ws, "worktree", "add", "-q", "wt2", home=host).returncode == 0
    airlock.chown(ws)
    p = airlock.sandbox(plant_hook("/workspace/wt2/.githooks/pre-commit", marker),
                        workspace=ws, timeout=60)
    _commit_ran_no_hook(ws / "wt2", ws / "wt2" / ".githooks" / "pre-commit", marker, host, p)


def test_a_workspace_given_through_a_link_named_by_its_real_path(airlock, host):
    ws = airlock.make_dir()
    marker = host / "pwned"
    ldir = pathlib.Path(tempfile.mkdtemp(prefix="lnk-", dir=ws.parent))
    ldir.chmod(0o755)
    # A link to the directory holding it: the sandbox refuses a workspace
    # that is itself a link, not one reached through one.
    (ldir / "up").symlink_to(ws.parent)
    link = ldir / "up" / ws.name
    _repo(ws, f"[core]\n\thooksPath = {ws}/.githooks\n")
    airlock.chown(ws)
    p = airlock.sandbox(plant_hook("/workspace/.githooks/pre-commit", marker), workspace=link,
                        timeout=60)
    _commit_ran_no_hook(ws, ws / ".githooks" / "pre-commit", marker, host, p)


def test_what_included_files_name_is_read_only_while_the_sandbox_runs(airlock, host):
    # Host git used in the workspace during the run (a `git status` in
    # another terminal) reads nested includes and the hooksPath an included
    # file sets: those are read-only inside, as .git/config is.
    ws = airlock.make_dir()
    _repo(ws, "[include]\n\tpath = ../shared.cfg\n")
    (ws / "shared.cfg").write_text("[include]\n\tpath = conf/deep.cfg\n")
    (ws / "conf").mkdir()
    (ws / "conf" / "deep.cfg").write_text("[core]\n\thooksPath = .githooks\n")
    (ws / ".githooks").mkdir()
    (ws / ".githooks" / "pre-commit").write_text("#!/bin/sh\nmake lint\n")
    airlock.chown(ws)
    script = "; ".join([
        "printf '[core]\\n\\tfsmonitor = x\\n' >> /workspace/conf/deep.cfg",
        "echo 'touch /tmp/x' >> /workspace/.githooks/pre-commit",
        "echo ok > /workspace/conf/other.txt",
    ])
    p = airlock.sandbox(script, workspace=ws, timeout=60)
    assert (ws / "conf" / "deep.cfg").read_text() == "[core]\n\thooksPath = .githooks\n"
    assert (ws / ".githooks" / "pre-commit").read_text() == "#!/bin/sh\nmake lint\n"
    assert (ws / "conf" / "other.txt").read_text() == "ok\n", p.stderr
