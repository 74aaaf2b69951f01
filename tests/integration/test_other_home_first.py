# SPDX-License-Identifier: Apache-2.0
"""A workspace that is another user's home (from /etc/passwd), or a
directory holding one, is refused before anything reads it: gitguard's
snapshot of its files (as root, of a home the caller may not even own) is
not taken for a run that cannot start."""

import os
import pwd
import re
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AIRLOCK = os.path.join(REPO, os.environ.get("AIRLOCK_BUILD", "build"), "src/cli/airlock")


def _other_home():
    mine = os.path.realpath(os.path.expanduser("~"))
    for e in pwd.getpwall():
        h = os.path.realpath(e.pw_dir) if e.pw_dir else ""
        if (h.startswith("/home/") and h != mine and os.path.isdir(h)
                and not mine.startswith(h + "/")):
            return h
    return None


def _run(ws, tmp_path):
    trace = tmp_path / "trace.txt"
    if trace.exists():
        trace.unlink()
    env = dict(os.environ, AIRLOCK_TRACE=str(trace))
    p = subprocess.run([AIRLOCK, "run", "-q", "-w", ws, "--", "/bin/true"], env=env,
                       capture_output=True, text=True, timeout=60)
    steps = re.findall(r" step=(\S+) ", trace.read_text()) if trace.exists() else []
    return p, steps


def test_another_users_home_is_refused_before_the_git_snapshot(tmp_path):
    home = _other_home()
    if not home:
        pytest.skip("no other user's home under /home on this machine")
    p, steps = _run(home, tmp_path)
    assert p.returncode == 125, (home, p.returncode, p.stderr)
    assert "whole home" in p.stderr and "--allow-broad-workspace" in p.stderr, p.stderr
    assert "cli.gitguard" not in steps, (home, steps)
