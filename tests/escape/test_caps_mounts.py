# SPDX-License-Identifier: Apache-2.0
"""Mounts added to a running sandbox (docs/internals/caps.md) against an
agent that rearranges the paths around them. Taking a mount out must take
out that mount, not whatever its path names by then: the agent renames the
directory above it and puts a link in its place that leads to a deny mask;
a detach by path would remove the mask and show the denied file. The
verdict is the sandbox's view after the revoke, and the host's tree."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from test_caps import Live  # noqa: E402

SECRET = "denied-by-policy\n"


def test_revoke_detaches_the_mount_not_its_path(airlock):
    if airlock.rootless:
        pytest.skip("run-time mounts need a root supervisor")
    src = airlock.make_dir("src")
    (src / "given.txt").write_text("given\n")
    (src / "given.txt").chmod(0o644)
    ws = airlock.make_dir()
    (ws / "m").mkdir()
    (ws / "m" / "secret.txt").write_text(SECRET)
    (ws / "a" / "m").mkdir(parents=True)
    airlock.chown(ws)
    pol = airlock.make_dir("pol") / "p.json"
    pol.write_text('{"filesystem": {"denyRead": ["%s"]}}' % (ws / "m"))
    pol.chmod(0o644)
    # Phase 1: the mount is there; the agent swaps the path around it.
    # Phase 2 (after the revoke): what the mask and the mount point show.
    attempt = ("if [ -e /workspace/go2 ]; then cat /workspace/m/secret.txt; ls /workspace/b/m; "
               "else cat /workspace/a/m/given.txt && mv /workspace/a /workspace/b && "
               "ln -s /workspace /workspace/a && ls /workspace/a/m; fi")
    live = Live(airlock, attempt, 2, ["-p", pol], ws=ws)
    try:
        r = live.caps(grant=[{"mount": {"source": str(src), "target": "/workspace/a/m"}}])
        assert r["ok"], r
        out = live.step()
        assert out.startswith("given\n") and out.endswith("rc=0\n"), out
        assert SECRET not in out
        r = live.caps(revoke=[{"mount": "/workspace/a/m"}])
        assert r["ok"], r
        out = live.step()
        live.finish()
    finally:
        live.kill()
    assert SECRET not in out, "the revoke took the deny mask away"
    assert "given.txt" not in out, "the run-time mount is still there"
    assert (ws / "m" / "secret.txt").read_text() == SECRET
    assert (src / "given.txt").read_text() == "given\n"
