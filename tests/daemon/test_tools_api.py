# SPDX-License-Identifier: Apache-2.0
"""Tools through the daemon: a grant names the tools its sandboxes may be
given, an API policy may allow no other and may define none (definitions
are the operator's: airlockd --tools FILE), the idle sandbox gets the
endpoint like `airlock run`'s, and GET /v1/sandboxes/{id}/tools lists what
it may call."""

import json
import pathlib
import subprocess
import tempfile

import pytest

from daemonlib import AIRLOCK, AirlockError

ARGV_TOOL = """#!/usr/bin/python3
import json, sys
print(json.dumps(sys.argv[1:]))
"""

SCHEMA = {"type": "object", "properties": {"v": {"type": "string", "maxLength": 100}},
          "required": ["v"], "additionalProperties": False}


def status_of(f):
    try:
        r = f()
    except AirlockError as e:
        return e.status, e.body
    return 201, r


@pytest.fixture
def tools_daemon(make_daemon, daemon_base):
    d = pathlib.Path(tempfile.mkdtemp(prefix="tools-", dir=daemon_base))
    d.chmod(0o755)
    script = d / "argv.py"
    script.write_text(ARGV_TOOL)
    script.chmod(0o755)
    f = d / "tools.json"
    f.write_text(json.dumps({"define": {
        "argv.sep": {"description": "echo an argument", "args": SCHEMA,
                     "command": [str(script), "--", "${args.v}"]}}}))
    return make_daemon("--tools", str(f))


def test_grant_refuses_tools_it_does_not_name(tools_daemon):
    d = tools_daemon
    c = d.client(d.grant("notools", "--allow-sandbox", "--allow-exec"))
    status, body = status_of(lambda: c.create(sandbox_class="small",
                                              policy={"tools": {"allow": ["core.time"]}}))
    assert (status, body["error"], body["limit"]) == (403, "limit_exceeded", "tools"), body
    assert "core.time" in body["message"] and "--tool core.time" in body["message"], body
    c = d.client(d.grant("onetool", "--allow-sandbox", "--allow-exec", "--tool", "core.time"))
    status, body = status_of(lambda: c.create(
        sandbox_class="small", policy={"tools": {"allow": ["core.time", "argv.sep"]}}))
    assert (status, body["limit"]) == (403, "tools") and "argv.sep" in body["message"], body


def test_api_policy_may_not_define_tools(tools_daemon):
    d = tools_daemon
    c = d.client(d.grant("definer", "--allow-sandbox", "--allow-exec", "--tool", "evil.sh"))
    policy = {"tools": {"allow": ["evil.sh"],
                        "define": {"evil.sh": {"args": {"type": "object"},
                                               "command": ["/usr/bin/id"]}}}}
    status, body = status_of(lambda: c.create(sandbox_class="small", policy=policy))
    assert (status, body["error"]) == (400, "invalid_policy"), body
    assert "host configuration" in body["message"] and "--tools" in body["message"], body


def test_granted_tools_work_in_an_idle_sandbox(tools_daemon):
    d = tools_daemon
    c = d.client(d.grant("tools", "--allow-sandbox", "--allow-exec", "--tool", "core.time",
                         "--tool", "argv.sep"))
    sb = c.create(sandbox_class="small", policy={"tools": {"allow": ["core.time", "argv.sep"]}})
    try:
        r = c.run(sb["id"], ["airlock-tool", "call", "core.time"])
        assert r.exit_code == 0, r.stderr
        r = c.run(sb["id"], ["airlock-tool", "call", "argv.sep", "v=a b"])
        assert (r.exit_code, json.loads(r.stdout)) == (0, ["--", "a b"]), r.stderr
        r = c.run(sb["id"], ["airlock-tool", "call", "other.tool"])
        assert r.exit_code == 3 and b"policy_denied" in r.stderr, r.stderr
        listed = c.tools(sb["id"])
        assert sorted(t["name"] for t in listed) == ["argv.sep", "core.time"], listed
        sep = next(t for t in listed if t["name"] == "argv.sep")
        assert sep["inputSchema"]["required"] == ["v"], sep
    finally:
        c.delete(sb["id"])
    calls = [json.loads(line) for line in open(d.audit)]
    calls = [e for e in calls if e["kind"] == "tool.call" and e["sandbox"] == sb["id"]]
    assert [(e["tool"], e["decision"]) for e in calls] == [
        ("core.time", "allow"), ("argv.sep", "allow"), ("other.tool", "deny")], calls


def test_sandbox_without_tools_has_no_endpoint_and_lists_none(tools_daemon):
    d = tools_daemon
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")
    try:
        r = c.run(sb["id"], ["sh", "-c", "test -e /run/airlock && echo present; "
                                         "echo \"${AIRLOCK_TOOL_SOCKET:-none}\""])
        assert r.stdout.split() == [b"none"], r.stdout
        assert c.tools(sb["id"]) == []
    finally:
        c.delete(sb["id"])
    status, body = status_of(lambda: c.tools("0" * 16))
    assert status == 404, body


def test_grant_lists_its_tools(tools_daemon):
    d = tools_daemon
    d.grant("lister", "--allow-sandbox", "--tool", "core.time")
    p = subprocess.run([str(AIRLOCK), "grant", "ls", "--json", "--state-dir", str(d.state)],
                       capture_output=True, text=True, timeout=30)
    g = next(g for g in json.loads(p.stdout) if g["name"] == "lister")
    assert g["tools"] == ["core.time"], g
    p = subprocess.run([str(AIRLOCK), "grant", "create", "--name", "bad", "--tool", "-x",
                        "--state-dir", str(d.state)], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "tool" in p.stderr, p.stderr


def test_database_before_tools_is_migrated(tmp_path):
    """A grants table from before tools (schema 3) gains the column, and
    its grants name no tool."""
    import sqlite3
    db = tmp_path / "airlockd.db"
    con = sqlite3.connect(db)
    con.execute("""CREATE TABLE grants (name TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE,
        allow_sandbox INTEGER NOT NULL, allow_exec INTEGER NOT NULL,
        allow_host_workspace INTEGER NOT NULL, max_sandboxes INTEGER NOT NULL,
        classes TEXT NOT NULL, created_ms INTEGER NOT NULL, revoked_ms INTEGER NOT NULL DEFAULT 0,
        allow_git INTEGER NOT NULL DEFAULT 0, secrets TEXT NOT NULL DEFAULT '')""")
    con.execute("INSERT INTO grants VALUES ('old', ?, 1, 1, 0, 0, '', 1000, 0, 0, '')",
                ("cd" * 32,))
    con.execute("PRAGMA user_version=3")
    con.commit()
    con.close()
    p = subprocess.run([str(AIRLOCK), "grant", "ls", "--json", "--state-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)[0]["tools"] == []
    con = sqlite3.connect(db)
    assert [r[1] for r in con.execute("PRAGMA table_info(grants)")].count("tools") == 1
    assert con.execute("PRAGMA user_version").fetchone()[0] == 6
    con.close()


def test_daemon_refuses_a_bad_tools_file(make_daemon, daemon_base):
    f = pathlib.Path(tempfile.mkdtemp(prefix="badtools-", dir=daemon_base)) / "tools.json"
    f.write_text(json.dumps({"define": {"x.sh": {"args": {"type": "object"},
                                                 "command": ["/bin/sh", "-c", "id"]}}}))
    with pytest.raises(AssertionError) as e:
        make_daemon("--tools", str(f))
    assert "x.sh" in str(e.value), e.value
