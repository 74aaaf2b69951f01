# SPDX-License-Identifier: Apache-2.0
"""Grants: every call needs a token in force; what a grant allows is what
it says, and nothing more."""

import json
import os
import sqlite3
import subprocess

import pytest

from daemonlib import AIRLOCK, AirlockError, Client


def status_of(f):
    try:
        f()
    except AirlockError as e:
        return e.status, e.body
    return 200, None


def test_no_token_is_401(shared_daemon):
    c = Client(socket_path=str(shared_daemon.socket), token="")
    for method, path in [("GET", "/healthz"), ("GET", "/metrics"), ("GET", "/v1/sandboxes"),
                         ("POST", "/v1/sandboxes"), ("GET", "/v1/sandboxes/0123456789abcdef")]:
        status, headers, body = c.request(method, path)
        assert status == 401, (method, path, body)
        assert headers.get("WWW-Authenticate") == "Bearer"
        assert b'"unauthorized"' in body


def test_wrong_or_malformed_token_is_401(shared_daemon):
    for tok in ["alk_" + "0" * 64, "x" * 300, "two words"]:
        c = Client(socket_path=str(shared_daemon.socket), token=tok)
        assert c.request("GET", "/healthz")[0] == 401
    status, _, _ = Client(socket_path=str(shared_daemon.socket), token=None).request(
        "GET", "/healthz")
    assert status == 401


def test_create_without_allow_sandbox_is_403_authz_denied(shared_daemon):
    tok = shared_daemon.grant("chat", "--allow-exec")
    c = shared_daemon.client(tok)
    status, body = status_of(lambda: c.create(sandbox_class="small"))
    assert status == 403
    assert body["error"] == "authz_denied"
    assert body["permission"] == "allowSandbox"
    # Reading is allowed to any grant in force.
    assert c.health()["ok"] is True


def test_exec_without_allow_exec_is_403(shared_daemon, sandbox):
    tok = shared_daemon.grant("maker", "--allow-sandbox")
    c = shared_daemon.client(tok)
    status, body = status_of(lambda: c.run(sandbox["id"], ["true"]))
    assert (status, body["error"], body["permission"]) == (403, "authz_denied", "allowExec")
    status, body = status_of(lambda: c.write_file(sandbox["id"], "x", b"1"))
    assert (status, body["error"]) == (403, "authz_denied")
    # Reading files is not exec.
    shared_daemon.client(shared_daemon.admin).write_file(sandbox["id"], "r.txt", b"r")
    assert c.read_file(sandbox["id"], "r.txt") == b"r"


def test_class_beyond_the_grant_is_403_naming_the_limit(shared_daemon):
    tok = shared_daemon.grant("smallonly", "--allow-sandbox", "--classes", "small")
    c = shared_daemon.client(tok)
    status, body = status_of(lambda: c.create(sandbox_class="large"))
    assert (status, body["error"], body["limit"]) == (403, "limit_exceeded", "classes")
    # The default class (medium) is beyond it too.
    status, body = status_of(lambda: c.create())
    assert (status, body["limit"]) == (403, "classes")
    # A small class with a bigger memory limit is beyond the class.
    status, body = status_of(lambda: c.create(sandbox_class="small",
                                              policy={"limits": {"memory": "1G"}}))
    assert (status, body["error"], body["limit"]) == (403, "limit_exceeded", "limits.memory")
    status, body = status_of(lambda: c.create(sandbox_class="small",
                                              policy={"limits": {"timeout": 0}}))
    assert (status, body["limit"]) == (403, "limits.timeout")
    sb = c.create(sandbox_class="small")
    assert sb["class"] == "small" and sb["grant"] == "smallonly"
    c.delete(sb["id"])


def test_host_paths_need_the_grant_flag(shared_daemon, tmp_path):
    tok = shared_daemon.grant("nohost", "--allow-sandbox", "--allow-exec")
    c = shared_daemon.client(tok)
    ws = tmp_path / "ws"
    ws.mkdir()
    for kw in [dict(workspace=str(ws)),
               dict(policy={"workspace": {"path": str(ws)}}),
               dict(policy={"filesystem": {"mounts": [{"source": "/etc", "target": "/x",
                                                       "readonly": False}]}}),
               dict(policy={"filesystem": {"read": "host"}})]:
        status, body = status_of(lambda: c.create(sandbox_class="small", **kw))
        assert (status, body["error"], body["limit"]) == (403, "limit_exceeded",
                                                          "allowHostWorkspace"), kw


def test_per_grant_maximum_is_429(shared_daemon):
    tok = shared_daemon.grant("two", "--allow-sandbox", "--max-sandboxes", "2")
    c = shared_daemon.client(tok)
    a = c.create(sandbox_class="small")
    b = c.create(sandbox_class="small")
    status, body = status_of(lambda: c.create(sandbox_class="small"))
    assert (status, body["error"], body["limit"], body["max"]) == (
        429, "too_many_sandboxes", "grant.maxSandboxes", 2)
    c.delete(a["id"])
    d = c.create(sandbox_class="small")
    for s in (b, d):
        c.delete(s["id"])


def test_daemon_maximum_is_429(make_daemon):
    d = make_daemon("--max-sandboxes", "1")
    c = d.client(d.admin)
    a = c.create(sandbox_class="small")
    status, body = status_of(lambda: c.create(sandbox_class="small"))
    assert (status, body["limit"]) == (429, "daemon.maxSandboxes")
    c.delete(a["id"])
    c.delete(c.create(sandbox_class="small")["id"])


def test_revoked_grant_is_401_at_once(shared_daemon):
    tok = shared_daemon.grant("shortlived", "--allow-sandbox")
    c = shared_daemon.client(tok)
    assert c.health()["ok"]
    shared_daemon.revoke("shortlived")
    assert status_of(c.health)[0] == 401
    # A new grant takes a new name (test_grant_names.py); the old stays dead.
    tok2 = shared_daemon.grant("shortlived2", "--allow-sandbox")
    assert tok2 != tok
    assert shared_daemon.client(tok2).health()["ok"]
    assert status_of(c.health)[0] == 401


def test_only_the_hash_is_stored(shared_daemon):
    tok = shared_daemon.grant("hashed")
    db = (shared_daemon.state / "airlockd.db").read_bytes()
    wal = shared_daemon.state / "airlockd.db-wal"
    if wal.exists():
        db += wal.read_bytes()
    assert tok.encode() not in db
    assert tok.startswith("alk_") and len(tok) == 68
    assert oct(os.stat(shared_daemon.state / "airlockd.db").st_mode & 0o777) == "0o600"


def grant_ls(state_dir, *args):
    p = subprocess.run([str(AIRLOCK), "grant", "ls", "--state-dir", str(state_dir), *args],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_allow_git_is_stored_and_listed(shared_daemon):
    shared_daemon.grant("gitter", "--allow-sandbox", "--allow-git")
    shared_daemon.grant("nogit", "--allow-sandbox")
    grants = {g["name"]: g for g in json.loads(grant_ls(shared_daemon.state, "--json"))}
    assert grants["gitter"]["allowGit"] is True and grants["gitter"]["allowSandbox"] is True
    assert grants["nogit"]["allowGit"] is False
    assert grants["admin"]["allowGit"] is False
    rows = {line.split()[0]: line.split()[2] for line in grant_ls(shared_daemon.state).splitlines()[1:]}
    assert rows["gitter"] == "sandbox,git" and rows["nogit"] == "sandbox"


# The grants table as the version before allowGit made it.
OLD_GRANTS = """CREATE TABLE grants (
 name TEXT PRIMARY KEY,
 token_hash TEXT NOT NULL UNIQUE,
 allow_sandbox INTEGER NOT NULL,
 allow_exec INTEGER NOT NULL,
 allow_host_workspace INTEGER NOT NULL,
 max_sandboxes INTEGER NOT NULL,
 classes TEXT NOT NULL,
 created_ms INTEGER NOT NULL,
 revoked_ms INTEGER NOT NULL DEFAULT 0)"""


def test_database_without_allow_git_is_migrated(tmp_path):
    db = tmp_path / "airlockd.db"
    con = sqlite3.connect(db)
    con.execute(OLD_GRANTS)
    con.execute("INSERT INTO grants VALUES ('old', ?, 1, 1, 0, 0, '', 1000, 0)", ("ab" * 32,))
    con.execute("PRAGMA user_version=1")
    con.commit()
    con.close()

    grants = {g["name"]: g for g in json.loads(grant_ls(tmp_path, "--json"))}
    assert grants["old"]["allowGit"] is False and grants["old"]["allowExec"] is True
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(grants)")]
    assert cols.count("allow_git") == 1 and cols.count("allow_runs") == 1
    assert con.execute("PRAGMA user_version").fetchone()[0] == 6
    con.close()

    # A migrated database takes the new flag, and opening it again is no
    # second migration.
    p = subprocess.run([str(AIRLOCK), "grant", "create", "--name", "new", "--allow-git",
                        "--state-dir", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    grants = {g["name"]: g for g in json.loads(grant_ls(tmp_path, "--json"))}
    assert grants["new"]["allowGit"] is True and grants["old"]["allowGit"] is False


@pytest.mark.parametrize("body,field", [
    ({"bogus": 1}, "bogus"),
    ({"class": "huge"}, "class"),
    ({"ttl": -1}, "ttl"),
    ({"ttl": "soon"}, "ttl"),
    ({"idleTimeout": []}, "idleTimeout"),
    ({"metadata": {"k": 1}}, "metadata.k"),
    ({"metadata": {"bad key": "v"}}, "metadata"),
    ({"policy": "nope"}, "policy"),
    ({"workspace": "relative/path"}, "workspace"),
])
def test_schema_violations_are_400_naming_the_field(api, body, field):
    status, _, data = api.request("POST", "/v1/sandboxes", body)
    assert status == 400, data
    import json
    doc = json.loads(data)
    assert doc["error"] == "bad_request" and doc["field"] == field, doc


def test_bad_policy_is_400_with_the_policy_message(api):
    status, body = status_of(lambda: api.create(policy={"limits": {"memroy": "1G"}}))
    assert status == 400 and body["error"] == "invalid_policy"
    assert "limits.memroy" in body["message"]


def test_body_that_is_not_json(api):
    status, _, data = api.request("POST", "/v1/sandboxes", b"{nope", "application/json")
    assert status == 400 and b"not JSON" in data


def test_unknown_sandbox_is_404(api):
    for f in [lambda: api.get("0123456789abcdef"), lambda: api.delete("0123456789abcdef"),
              lambda: api.run("0123456789abcdef", ["true"]),
              lambda: api.read_file("0123456789abcdef", "x"),
              lambda: api.audit("0123456789abcdef"), lambda: api.get("not-an-id")]:
        status, body = status_of(f)
        assert (status, body["error"]) == (404, "not_found")
    assert api.request("GET", "/v1/nothing")[0] == 404
    assert api.request("PATCH", "/v1/sandboxes")[0] == 501  # not a method the API knows
    assert api.request("PUT", "/v1/sandboxes")[0] == 405
