# SPDX-License-Identifier: Apache-2.0
"""Every action the daemon takes for a grant has its audit line, or is
refused (503 audit_failed) and not done: file writes, deletes, renames,
directories and port openings as much as execs and creates. A full disk
under the audit log must never leave a change to a workspace, or a host
port opened, with no line saying who did it."""

import json
import os

import pytest

from test_audit_faults import _status, daemon_on, full_tmpfs  # noqa: F401  (fixtures)


def _audit_kinds(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def test_file_and_port_actions_are_refused_without_their_audit_line(  # noqa: F811
        airlock, full_tmpfs, daemon_on):
    if airlock.mode != "root":
        pytest.skip("the daemon runs as root")
    d_fs, fill = full_tmpfs
    d = daemon_on(d_fs / "audit.jsonl")
    api = d.client(d.admin, timeout=60)
    ws = airlock.make_dir()
    sb = api.create(sandbox_class="small", workspace=str(ws))
    sid = sb["id"]
    # A review sandbox whose change waits to be accepted.
    rws = airlock.make_dir()
    (rws / "kept.txt").write_text("old\n")
    airlock.chown(rws)
    rsb = api.create(sandbox_class="small", workspace=str(rws), review=True)
    api.run(rsb["id"], ["sh", "-c", "echo new > /workspace/kept.txt"])
    api.delete(rsb["id"])
    fill()
    answered = []
    refused = None
    for i in range(200):
        name = f"f-{i:03d}.txt"
        status, body = _status(lambda: api.write_file(sid, name, b"x" * 64))
        if status == 200:
            answered.append(name)
            continue
        refused = (name, status, body)
        break
    assert refused, "200 file writes with the audit disk full: none refused"
    name, status, body = refused
    assert status == 503 and body["error"] == "audit_failed", refused
    assert not (ws / name).exists(), "the write was done although it could not be recorded"
    # Every write answered 200 has its line.
    lines = _audit_kinds(d.audit)
    written = {e.get("path") for e in lines if e.get("kind") == "api.file_written"}
    missing = [n for n in answered if n not in written]
    assert not missing, f"writes done with no audit line: {missing[:5]}"

    # While the log is full: each action is done with its line or refused
    # and not done (a shorter line may still fit where a longer did not).
    def lines_of(kind):
        return [e for e in _audit_kinds(d.audit) if e.get("kind") == kind]

    if answered:
        status, body = _status(lambda: api.delete_file(sid, answered[0]))
        if status == 200:
            assert any(e.get("path") == answered[0] for e in lines_of("api.file_deleted"))
        else:
            assert status == 503 and (ws / answered[0]).exists(), (status, body)
    status, body = _status(lambda: api.mkdir(sid, "newdir"))
    if status == 200:
        assert any(e.get("path") == "newdir" for e in lines_of("api.dir_created"))
    else:
        assert status == 503 and not (ws / "newdir").exists(), (status, body)
    opened = []
    for port in range(8000, 8040):
        status, body = _status(lambda: api.open_port(sid, port))
        if status != 200:
            assert status == 503 and body["error"] == "audit_failed", (status, body)
            break
        opened.append(port)
    else:
        pytest.fail("40 ports opened with the audit disk full: none refused")
    logged = {e.get("port") for e in lines_of("api.port_open")}
    assert not [p for p in opened if p not in logged], (opened, logged)
    listed = {p["port"] for p in api.ports(sid)}
    assert port not in listed, "the port was opened although it could not be recorded"

    # An accept writes into the host's workspace: not without its line.
    status, body = _status(lambda: api.accept(rsb["id"]))
    if status == 200:
        assert lines_of("api.accept"), "accepted with no audit line"
    else:
        assert status == 503 and body["error"] == "audit_failed", (status, body)
        assert (rws / "kept.txt").read_text() == "old\n"

    # Room again: the same actions go through, with their lines.
    (d_fs / "filler").unlink()
    assert api.health()["ok"] is True
    api.write_file(sid, "after.txt", b"ok")
    assert (ws / "after.txt").read_bytes() == b"ok"
    kinds = [(e.get("kind"), e.get("path")) for e in _audit_kinds(d.audit)]
    assert ("api.file_written", "after.txt") in kinds
    api.delete(sid)
    v = airlock.run(["audit", "verify", d.audit])
    assert v.returncode == 0, v.stdout
