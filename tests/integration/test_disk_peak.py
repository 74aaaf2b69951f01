# SPDX-License-Identifier: Apache-2.0
"""usage.diskPeakBytes: the most the workspace grew by while the sandbox ran,
in the result and in the audit log's process.ended. A command writes 8 MiB,
keeps it for a few sample intervals, deletes it: the peak is at least 8 MiB,
the final growth (workspaceAddedBytes) about nothing."""

import json
import os

import pytest

MIB = 1 << 20
# Written, held past two tree walks (one a second at least), then removed;
# the sleep after rm lets the tick see the drop before the end.
SCRIPT = ("dd if=/dev/zero of=big bs=1M count=8 2>/dev/null && sync && sleep 2.5 && "
          "rm big && sleep 0.5 && echo done")


def audit_ended(path):
    with open(path) as f:
        ended = [json.loads(line) for line in f if '"process.ended"' in line]
    assert ended, path
    return ended[-1]


def run(airlock, *opts, script=SCRIPT):
    ws = airlock.make_dir()
    audit = airlock.make_dir("audit") / "audit.jsonl"
    p, res = airlock.result(["-q", "--audit", audit, "-w", ws, *opts, "--", "/bin/sh", "-c",
                             script], timeout=60)
    assert p.returncode == 0 and "done" in p.stdout, (p.stdout, p.stderr)
    return res, audit_ended(audit)


@pytest.mark.parametrize("mode", ["rw", "review"])
def test_peak_outlives_a_deleted_file(airlock, mode):
    res, ended = run(airlock, *(["--review"] if mode == "review" else []))
    u = res["usage"]
    assert u["diskPeakBytes"] is not None, u
    assert u["diskPeakBytes"] >= 8 * MIB, u
    assert u["diskPeakBytes"] < 8 * MIB + 4 * MIB, u
    assert u["workspaceAddedBytes"] is not None and u["workspaceAddedBytes"] < 256 * 1024, u
    # The record says the same as the result.
    assert ended["usage"]["diskPeakBytes"] == u["diskPeakBytes"], ended
    assert ended["usage"]["workspaceAddedBytes"] == u["workspaceAddedBytes"], ended


def test_nothing_written_peaks_near_zero(airlock):
    res, _ = run(airlock, script="sleep 1.2; echo done")
    assert res["usage"]["diskPeakBytes"] is not None
    assert res["usage"]["diskPeakBytes"] < 256 * 1024, res["usage"]


def test_read_only_workspace_is_not_measured(airlock):
    pol = airlock.make_dir("pol") / "p.json"
    pol.write_text('{"workspace": {"mode": "ro"}}')
    res, ended = run(airlock, "-p", pol, script="echo done")
    assert res["usage"]["diskPeakBytes"] is None, res["usage"]
    assert ended["usage"]["diskPeakBytes"] is None, ended


@pytest.mark.parametrize("review", [False, True], ids=["rw", "review"])
def test_supervise_status_reports_the_peak(airlock, review):
    from test_supervise import Supervisor
    s = Supervisor(airlock, review=review)
    try:
        assert s.ready == "ok", s.ready
        s.exec(["/bin/sh", "-c", "cd /workspace && dd if=/dev/zero of=big bs=1M count=8 "
                "2>/dev/null && sync && sleep 2.5 && rm big && sleep 0.5"])
        u = s.request({"op": "status"})[0]["usage"]
        assert u["diskPeakBytes"] is not None and u["diskPeakBytes"] >= 8 * MIB, u
    finally:
        s.close()


def test_a_tree_over_the_walk_cap_is_not_measured(airlock):
    """Past DISKUSE_TREE_ENTRIES (10000) entries the walk stops: null, never a
    figure counted from part of the tree."""
    ws = airlock.make_dir()
    d = os.path.join(ws, "many")
    os.mkdir(d)
    for i in range(10001):
        os.close(os.open(os.path.join(d, str(i)), os.O_CREAT | os.O_WRONLY, 0o644))
    airlock.chown(ws)
    p, res = airlock.result(["-q", "-w", ws, "--", "/bin/true"], timeout=60)
    assert p.returncode == 0, p.stderr
    assert res["usage"]["diskPeakBytes"] is None, res["usage"]
    assert res["usage"]["workspaceAddedBytes"] is None, res["usage"]
