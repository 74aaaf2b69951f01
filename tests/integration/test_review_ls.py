# SPDX-License-Identifier: Apache-2.0
"""`airlock review ls`: the review sandboxes whose changes are pending, with
what accepting them would add, modify and delete."""

import json
import os
import re


def _workspace(airlock):
    ws = airlock.make_dir()
    (ws / "change.txt").write_text("one\n")
    (ws / "gone.txt").write_text("bye\n")
    (ws / "keep.txt").write_text("keep\n")
    airlock.chown(ws)
    if airlock.user:
        for name in os.listdir(ws):
            os.lchown(ws / name, airlock.user.pw_uid, airlock.user.pw_gid)
    return ws


def _review(airlock, ws, root, script):
    p = airlock.run(["run", "-q", "--review", "--state-root", root, "-w", ws, "--",
                     "/bin/sh", "-c", script])
    m = re.search(r"airlock accept --state-root \S+ (\w+)", p.stderr)
    assert m, p.stderr
    return m.group(1)


def _ls(airlock, root):
    p = airlock.run(["review", "ls", "--state-root", root, "--json"])
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]


def test_pending_sandboxes_with_their_counts(airlock):
    root = airlock.make_dir("state")
    ws = _workspace(airlock)
    first = _review(airlock, ws, root,
                    "echo two >> change.txt; rm gone.txt; echo new > a.txt; echo n > b.txt")
    second = _review(airlock, ws, root, "echo only > c.txt")

    got = _ls(airlock, root)
    assert [e["sandbox"] for e in got] == [second, first]  # newest first
    one = got[1]
    assert (one["added"], one["modified"], one["deleted"]) == (2, 1, 1), one
    assert one["workspace"] == str(ws)
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", one["startedAt"])
    assert (got[0]["added"], got[0]["modified"], got[0]["deleted"]) == (1, 0, 0)

    text = airlock.run(["review", "ls", "--state-root", root])
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["ID", "STARTED", "ADDED", "MODIFIED", "DELETED", "WORKSPACE"]
    row = [ln for ln in lines if ln.startswith(first)][0].split()
    assert row[2:5] == ["2", "1", "1"] and row[5] == str(ws)

    # Accepted and discarded sandboxes are no longer pending.
    assert airlock.run(["accept", "--state-root", root, first]).returncode == 0
    assert [e["sandbox"] for e in _ls(airlock, root)] == [second]
    assert airlock.run(["discard", "--state-root", root, second]).returncode == 0
    assert _ls(airlock, root) == []


def test_partial_accept_counts_what_is_left(airlock):
    root = airlock.make_dir("state")
    ws = _workspace(airlock)
    sid = _review(airlock, ws, root, "echo new > a.txt; echo n > b.txt")
    assert airlock.run(["accept", "--state-root", root, sid, "a.txt"]).returncode == 0
    [e] = _ls(airlock, root)
    assert (e["added"], e["modified"], e["deleted"]) == (1, 0, 0), e


def test_a_workspace_gone_is_listed_with_why(airlock):
    root = airlock.make_dir("state")
    ws = _workspace(airlock)
    sid = _review(airlock, ws, root, "echo new > a.txt")
    for name in os.listdir(ws):
        os.unlink(ws / name)
    os.rmdir(ws)
    [e] = _ls(airlock, root)
    assert e["sandbox"] == sid and e["added"] is None and "workspace" in e["error"]


def test_empty_and_bad_usage(airlock):
    root = airlock.make_dir("state")
    assert _ls(airlock, root) == []
    p = airlock.run(["review"], check_setup=False)
    assert p.returncode == 2 and "expected \"ls\"" in p.stderr
    p = airlock.run(["review", "ls", "extra", "--state-root", root], check_setup=False)
    assert p.returncode == 2
