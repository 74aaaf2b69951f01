# SPDX-License-Identifier: Apache-2.0
"""A read-write mount added while the sandbox runs (the capabilities API) is
a host tree the agent writes, as a --rw mount given at the start is: git
metadata it leaves there (a .git of its own with a hook and core.fsmonitor)
must be moved aside when the run ends, or the host's next `git status` in
that tree runs the agent's code."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from test_caps import Live  # noqa: E402


def test_git_metadata_left_on_a_runtime_mount_is_moved_aside(airlock):
    if airlock.rootless:
        pytest.skip("run-time mounts need a root supervisor")
    src = airlock.make_dir("src")
    (src / "data.txt").write_text("data\n")
    airlock.chown(src)
    attempt = ("mkdir -p /workspace/m/.git/hooks /workspace/m/.git/objects /workspace/m/.git/refs && "
               "echo 'ref: refs/heads/main' > /workspace/m/.git/HEAD && "
               "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > /workspace/m/.git/config && "
               "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > /workspace/m/.git/hooks/post-checkout && "
               "chmod +x /workspace/m/.git/hooks/post-checkout")
    ws = airlock.make_dir()
    (ws / "m").mkdir()
    live = Live(airlock, attempt, 1, ws=ws)
    try:
        r = live.caps(grant=[{"mount": {"source": str(src), "target": "/workspace/m",
                                        "readOnly": False}}])
        assert r["ok"], r
        out = live.step()
        assert out.endswith("rc=0\n"), out
        audit = live.finish()
    finally:
        live.kill()
    assert not (src / ".git").exists(), "the agent's .git was left where host git finds it"
    assert (src / ".git.airlock-quarantine").is_dir()
    assert any(a.get("kind") == "git.neutralised" for a in audit), audit
