# SPDX-License-Identifier: Apache-2.0
"""A broad workspace (/, a system directory, the caller's home) is refused
before anything looks at its files: gitguard's snapshot of the workspace's
git metadata (seconds over /) is not taken for a run that cannot start."""

import os
import re
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AIRLOCK = os.path.join(REPO, os.environ.get("AIRLOCK_BUILD", "build"), "src/cli/airlock")


def _run(ws, tmp_path):
    trace = tmp_path / "trace.txt"
    env = dict(os.environ, AIRLOCK_TRACE=str(trace))
    p = subprocess.run([AIRLOCK, "run", "-q", "-w", ws, "--", "/bin/true"], env=env,
                       capture_output=True, text=True, timeout=60)
    steps = re.findall(r" step=(\S+) ", trace.read_text()) if trace.exists() else []
    return p, steps


def test_root_is_refused_before_the_git_snapshot(tmp_path):
    for ws in ("/", "/usr", os.path.expanduser("~")):
        p, steps = _run(ws, tmp_path)
        assert p.returncode == 125, (ws, p.returncode, p.stderr)
        assert "--allow-broad-workspace" in p.stderr, p.stderr
        assert "cli.gitguard" not in steps, (ws, steps)


def test_a_project_directory_still_takes_the_snapshot(tmp_path):
    ws = tmp_path / "project"
    ws.mkdir()
    p, steps = _run(str(ws), tmp_path)
    assert p.returncode == 0, p.stderr
    assert "cli.gitguard" in steps, steps
