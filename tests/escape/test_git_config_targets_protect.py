# SPDX-License-Identifier: Apache-2.0
"""What a repository's own config makes host git run or read from the
working tree: its core.hooksPath directory (`.githooks`, husky's
`.husky/_`), a program it names by a path (`core.fsmonitor =
tools/fsmonitor.sh`) and a file it includes (`../.gitconfig-shared`). These
are ordinary files the agent could rewrite while it runs, and host git
used in the workspace meanwhile (a `git status` in another terminal) ran
the agent's version before the end-of-run scan moved it aside. Where they
exist at the start they are read-only inside, as .git/hooks is."""

import subprocess


def test_config_targets_are_read_only_while_the_sandbox_runs(airlock):
    ws = airlock.make_dir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True, timeout=30)
    git = ws / ".git"
    with open(git / "config", "a") as f:
        f.write("[core]\n\thooksPath = .githooks\n\tfsmonitor = tools/fsmonitor.sh\n"
                "[include]\n\tpath = ../.gitconfig-shared\n")
    (ws / ".githooks").mkdir()
    (ws / ".githooks" / "pre-commit").write_text("#!/bin/sh\nmake lint\n")
    (ws / "tools").mkdir()
    (ws / "tools" / "fsmonitor.sh").write_text("#!/bin/sh\nexit 1\n")
    (ws / ".gitconfig-shared").write_text("[user]\n\tname = Team\n")
    airlock.chown(ws)
    script = "; ".join([
        "echo 'touch /tmp/x' >> /workspace/.githooks/pre-commit",
        "echo evil > /workspace/.githooks/post-checkout",
        "echo 'touch /tmp/x' >> /workspace/tools/fsmonitor.sh",
        "printf '[core]\\n\\tsshCommand = touch /tmp/x\\n' >> /workspace/.gitconfig-shared",
        "echo ok > /workspace/tools/other.txt",
        "echo ok > /workspace/other.txt",
    ])
    p = airlock.sandbox(script, workspace=ws, timeout=60)
    assert (ws / ".githooks" / "pre-commit").read_text() == "#!/bin/sh\nmake lint\n"
    assert (ws / "tools" / "fsmonitor.sh").read_text() == "#!/bin/sh\nexit 1\n"
    assert (ws / ".gitconfig-shared").read_text() == "[user]\n\tname = Team\n"
    # Not written, or moved aside at the end.
    assert not (ws / ".githooks" / "post-checkout").exists()
    # The rest of the tree, and of the programs' directory, stays writable.
    assert (ws / "tools" / "other.txt").read_text() == "ok\n", p.stderr
    assert (ws / "other.txt").read_text() == "ok\n", p.stderr


def test_a_target_through_a_link_out_of_the_tree_does_not_stop_the_run(airlock):
    # The host's own config naming a program through a link that leaves
    # the tree: not covered at the start (the end-of-run scan looks), and
    # the sandbox starts as before.
    ws = airlock.make_dir()
    out = airlock.make_dir()
    (out / "fsmonitor.sh").write_text("#!/bin/sh\nexit 1\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True, timeout=30)
    with open(ws / ".git" / "config", "a") as f:
        f.write("[core]\n\tfsmonitor = tools/fsmonitor.sh\n")
    (ws / "tools").symlink_to(out)
    airlock.chown(ws)
    p = airlock.sandbox("echo ok > /workspace/other.txt", workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (ws / "other.txt").read_text() == "ok\n"


def test_the_enclosing_repositorys_targets_are_read_only(airlock):
    # The workspace is a package of a host repository: that repository's
    # hooks directory lies in it.
    top = airlock.make_dir()
    subprocess.run(["git", "init", "-q", str(top)], check=True, timeout=30)
    with open(top / ".git" / "config", "a") as f:
        f.write("[core]\n\thooksPath = pkg/hooks\n")
    ws = top / "pkg"
    (ws / "hooks").mkdir(parents=True)
    (ws / "hooks" / "pre-commit").write_text("#!/bin/sh\nmake lint\n")
    airlock.chown(top)
    script = "; ".join([
        "echo 'touch /tmp/x' >> /workspace/hooks/pre-commit",
        "echo ok > /workspace/other.txt",
    ])
    p = airlock.sandbox(script, workspace=ws, timeout=60)
    assert (ws / "hooks" / "pre-commit").read_text() == "#!/bin/sh\nmake lint\n"
    assert (ws / "other.txt").read_text() == "ok\n", p.stderr


def test_the_script_a_hook_links_to_is_read_only(airlock):
    ws = airlock.make_dir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True, timeout=30)
    (ws / "scripts").mkdir()
    (ws / "scripts" / "pre-commit.sh").write_text("#!/bin/sh\nmake lint\n")
    (ws / ".git" / "hooks" / "pre-commit").symlink_to("../../scripts/pre-commit.sh")
    airlock.chown(ws)
    script = "; ".join([
        "echo 'touch /tmp/x' >> /workspace/scripts/pre-commit.sh",
        "echo ok > /workspace/scripts/other.sh",
    ])
    p = airlock.sandbox(script, workspace=ws, timeout=60)
    assert (ws / "scripts" / "pre-commit.sh").read_text() == "#!/bin/sh\nmake lint\n"
    assert (ws / "scripts" / "other.sh").read_text() == "ok\n", p.stderr
