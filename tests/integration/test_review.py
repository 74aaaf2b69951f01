# SPDX-License-Identifier: Apache-2.0
"""Reviewable workspaces: `airlock run --review`, then diff, accept, discard."""

import json
import os
import re
import time


def _workspace(airlock):
    ws = airlock.make_dir()
    (ws / "keep.txt").write_text("keep\n")
    (ws / "change.txt").write_text("one\n")
    (ws / "gone.txt").write_text("bye\n")
    (ws / "old-name.txt").write_text("moving\n")
    (ws / "src").mkdir()
    (ws / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    airlock.chown(ws)
    if airlock.user:
        for root, dirs, files in os.walk(ws):
            for name in dirs + files:
                os.lchown(os.path.join(root, name), airlock.user.pw_uid, airlock.user.pw_gid)
    return ws


AGENT = (
    "echo two >> change.txt; rm gone.txt; mv old-name.txt new-name.txt; "
    "echo new > added.txt; printf '\\000\\001\\002' > blob.bin; chmod 755 keep.txt; "
    "mkdir -p docs && echo doc > docs/readme.md"
)


def _run_review(airlock, ws, script=AGENT, *opts):
    p = airlock.run(["run", "-q", "--review", "-w", ws, *opts, "--", "/bin/sh", "-c", script])
    m = re.search(r"airlock accept (\w+)", p.stderr)
    assert m, p.stderr
    return p, m.group(1)


def _snapshot(ws):
    out = {}
    for root, dirs, files in os.walk(ws):
        for f in files:
            path = os.path.join(root, f)
            st = os.lstat(path)
            out[os.path.relpath(path, ws)] = (open(path, "rb").read(), st.st_mode)
    return out


def test_host_untouched_until_accept(airlock):
    ws = _workspace(airlock)
    before = _snapshot(ws)
    p, sid = _run_review(airlock, ws)
    assert p.returncode == 0
    assert _snapshot(ws) == before
    assert "3 added" in p.stderr or "added" in p.stderr


def test_diff_shows_every_kind_of_change(airlock):
    ws = _workspace(airlock)
    _, sid = _run_review(airlock, ws)
    d = airlock.run(["diff", sid])
    assert d.returncode == 0, d.stderr
    out = d.stdout
    assert "+two" in out  # changed
    assert "deleted file" in out and "gone.txt" in out  # deleted
    assert "new-name.txt" in out and "old-name.txt" in out  # renamed: delete + add
    assert "new file" in out and "added.txt" in out
    assert "Binary files" in out and "blob.bin" in out
    assert "old mode 100644" in out and "new mode 100755" in out
    assert "docs/readme.md" in out


def test_accept_all(airlock):
    ws = _workspace(airlock)
    _, sid = _run_review(airlock, ws)
    a = airlock.run(["accept", sid])
    assert a.returncode == 0, a.stderr
    assert (ws / "change.txt").read_text() == "one\ntwo\n"
    assert not (ws / "gone.txt").exists()
    assert not (ws / "old-name.txt").exists()
    assert (ws / "new-name.txt").read_text() == "moving\n"
    assert (ws / "added.txt").read_text() == "new\n"
    assert (ws / "blob.bin").read_bytes() == b"\x00\x01\x02"
    assert os.stat(ws / "keep.txt").st_mode & 0o777 == 0o755
    assert (ws / "docs" / "readme.md").read_text() == "doc\n"


def test_accept_subset(airlock):
    ws = _workspace(airlock)
    _, sid = _run_review(airlock, ws)
    a = airlock.run(["accept", sid, "added.txt", "docs"])
    assert a.returncode == 0, a.stderr
    assert (ws / "added.txt").exists() and (ws / "docs" / "readme.md").exists()
    assert (ws / "change.txt").read_text() == "one\n"
    assert (ws / "gone.txt").exists()
    # The rest can still be accepted later.
    assert airlock.run(["accept", sid]).returncode == 0
    assert (ws / "change.txt").read_text() == "one\ntwo\n"


def test_conflict_refused_by_name(airlock):
    ws = _workspace(airlock)
    _, sid = _run_review(airlock, ws)
    time.sleep(0.01)
    (ws / "change.txt").write_text("edited on the host\n")
    before = _snapshot(ws)
    a = airlock.run(["accept", sid])
    assert a.returncode != 0
    assert "change.txt" in a.stderr and a.stderr.count("\n") == 1
    assert _snapshot(ws) == before


def test_discard(airlock):
    ws = _workspace(airlock)
    before = _snapshot(ws)
    _, sid = _run_review(airlock, ws)
    assert airlock.run(["discard", sid]).returncode == 0
    assert _snapshot(ws) == before
    assert airlock.run(["accept", sid]).returncode != 0


def test_upper_layer_size_limit(airlock):
    ws = _workspace(airlock)
    pol = airlock.make_dir("policy") / "p.json"
    pol.write_text('{"limits": {"disk": "8M", "fileSize": "1G"}}')
    airlock.chown(pol.parent)
    p, sid = _run_review(
        airlock, ws,
        "dd if=/dev/zero of=big bs=1M count=32 2>/dev/null; echo rc=$?; du -m big | cut -f1",
        "-p", pol,
    )
    rc, size = p.stdout.split()
    assert rc != "rc=0"
    assert int(size) <= 8
    assert not (ws / "big").exists()


def test_git_hooks_still_read_only_in_review(airlock):
    ws = _workspace(airlock)
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    airlock.chown(ws)
    p, sid = _run_review(airlock, ws, "echo evil > .git/hooks/pre-commit; echo rc=$?")
    assert p.stdout.strip() != "rc=0"
    assert "pre-commit" not in airlock.run(["diff", sid]).stdout


# ---- --json: what the daemon reads ----


def _json_line(p):
    """The one JSON line a --json command prints on stdout."""
    lines = p.stdout.splitlines()
    assert len(lines) == 1, p.stdout + p.stderr
    return json.loads(lines[0])


def test_accept_json(airlock):
    ws = _workspace(airlock)
    _, sid = _run_review(airlock, ws)
    part = airlock.run(["accept", "--json", sid[:6], "added.txt", "docs"])
    assert part.returncode == 0, part.stderr
    doc = _json_line(part)
    assert set(doc) == {"sandbox", "written", "removed", "dirs", "bytes", "remaining", "complete"}
    assert doc["sandbox"] == sid and re.fullmatch(r"[0-9a-f]{16}", sid)
    assert (doc["written"], doc["removed"], doc["dirs"], doc["bytes"]) == (2, 0, 1, 8)
    assert doc["remaining"] > 0 and doc["complete"] is False

    rest = _json_line(airlock.run(["accept", "--json", sid]))
    assert rest["removed"] == 2 and rest["remaining"] == 0 and rest["complete"] is True
    assert rest["written"] >= 3 and (ws / "change.txt").read_text() == "one\ntwo\n"

    again = airlock.run(["accept", "--json", sid])
    assert again.returncode == 1 and again.stderr == ""
    doc = _json_line(again)
    assert doc["error"] == "already" and doc["message"]
    assert _json_line(airlock.run(["discard", "--json", sid]))["error"] == "already"


def test_accept_json_errors(airlock):
    ws = _workspace(airlock)
    _, sid = _run_review(airlock, ws)
    for args, code, status in [
        (["0123456789abcdef"], "not_found", 2),
        ([sid, "no-such-file"], "not_found", 2),
        ([sid, "../outside"], "bad_path", 2),
    ]:
        p = airlock.run(["accept", "--json", *args])
        assert p.returncode == status and p.stderr == "", (args, p.stderr)
        doc = _json_line(p)
        assert set(doc) == {"error", "message"} and doc["error"] == code, (args, doc)

    time.sleep(0.01)
    (ws / "change.txt").write_text("edited on the host\n")
    before = _snapshot(ws)
    p = airlock.run(["accept", "--json", sid])
    assert p.returncode == 1 and p.stderr == ""
    doc = _json_line(p)
    assert doc["error"] == "conflict" and "change.txt" in doc["message"]
    assert not doc["message"].startswith("accept:")
    assert _snapshot(ws) == before


def test_discard_and_diff_json(airlock):
    ws = _workspace(airlock)
    before = _snapshot(ws)
    _, sid = _run_review(airlock, ws)
    d = airlock.run(["diff", "--json", sid])
    assert d.returncode == 0 and "+two" in d.stdout
    unknown = airlock.run(["diff", "--json", "0123456789abcdef"])
    assert unknown.returncode == 2 and unknown.stderr == ""
    assert _json_line(unknown)["error"] == "not_found"

    p = airlock.run(["discard", "--json", sid[:10]])
    assert p.returncode == 0, p.stderr
    assert _json_line(p) == {"sandbox": sid, "state": "discarded"}
    assert _snapshot(ws) == before
    assert _json_line(airlock.run(["discard", "--json", "0123456789abcdef"]))["error"] == "not_found"
