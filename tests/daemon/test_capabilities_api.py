# SPDX-License-Identifier: Apache-2.0
"""/v1/sandboxes/{id}/capabilities: a running sandbox's effective
capabilities read and changed through the daemon, only under the grant flag
allowCapabilities, only on the grant's own sandboxes; a bad entry is a 400
naming it and nothing of the change is applied; every change is audited
with the grant's name and reaches GET /v1/events."""

import pytest

from daemonlib import AirlockError
from test_events_api import opened


def path(sid):
    return f"/v1/sandboxes/{sid}/capabilities"


def error_of(f):
    with pytest.raises(AirlockError) as e:
        f()
    return e.value


@pytest.fixture(scope="module")
def capper(shared_daemon):
    d = shared_daemon
    tok = d.grant("capper", "--allow-sandbox", "--allow-exec", "--allow-capabilities")
    c = d.client(tok)
    c.tok = tok
    return c


@pytest.fixture
def own(capper):
    sb = capper.create(sandbox_class="small", policy={"network": {"allow": ["a.example.com"]}})
    yield sb
    try:
        capper.delete(sb["id"])
    except (AirlockError, OSError):
        pass


def test_grant_flag_required(shared_daemon, api, sandbox):
    e = error_of(lambda: api._json("GET", path(sandbox["id"])))
    assert (e.status, e.error, e.body["permission"]) == (403, "authz_denied", "allowCapabilities")
    e = error_of(lambda: api._json("POST", path(sandbox["id"]),
                                   {"grant": [{"network": {"allow": "x.example.com"}}]}))
    assert (e.status, e.body["permission"]) == (403, "allowCapabilities")


def test_flag_is_listed(shared_daemon, capper):
    import json
    import subprocess
    from daemonlib import AIRLOCK
    p = subprocess.run([str(AIRLOCK), "grant", "ls", "--json", "--state-dir", str(shared_daemon.state)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    grants = {g["name"]: g for g in json.loads(p.stdout)}
    assert grants["capper"]["allowCapabilities"] is True
    assert grants["admin"]["allowCapabilities"] is False


def test_another_grants_sandbox_is_not_found(shared_daemon, capper, sandbox):
    # `sandbox` is the admin grant's.
    e = error_of(lambda: capper._json("POST", path(sandbox["id"]),
                                      {"grant": [{"network": {"allow": "x.example.com"}}]}))
    assert (e.status, e.error) == (404, "not_found")


def test_read_grant_revoke_and_audit(shared_daemon, capper, own):
    sid = own["id"]
    s = opened(shared_daemon, capper.tok, query=f"?sandbox={sid}&kind=capability.granted")
    try:
        caps = capper._json("GET", path(sid))
        assert caps["network"]["allow"] == ["a.example.com"] and caps["network"]["gated"] is True
        caps = capper._json("POST", path(sid), {"grant": [{"network": {"allow": "b.example.com:443"}},
                                                          {"env": {"name": "GIVEN", "value": "yes"}}],
                                                "revoke": [{"network": {"allow": "a.example.com"}}]})
        assert caps["network"]["allow"] == ["b.example.com:443"], caps
        assert caps["env"] == {"GIVEN": "yes"}, caps
        ev = s.events_until(lambda line: line.get("capability") == "env")
        lines = [line for _, line in ev if line["kind"] == "capability.granted"]
        assert [line["capability"] for line in lines] == ["network.allow", "env"]
        assert all(line["by"] == "grant:capper" for line in lines)
    finally:
        s.close()
    # Later commands see the env, and not once it is revoked.
    r = capper.run(sid, ["sh", "-c", "echo ${GIVEN:-unset}"])
    assert r.stdout.strip() == b"yes", r.stderr
    capper._json("POST", path(sid), {"revoke": [{"env": {"name": "GIVEN"}}]})
    r = capper.run(sid, ["sh", "-c", "echo ${GIVEN:-unset}"])
    assert r.stdout.strip() == b"unset", r.stderr
    lines = [a for a in capper.audit(sid) if a["kind"].startswith("capability.")]
    assert all(set(a) == {"seq", "ts", "sandbox", "kind", "prev", "by", "capability", "entry"}
               for a in lines), lines
    kinds = [(a["kind"], a.get("capability")) for a in lines]
    assert kinds == [("capability.granted", "network.allow"), ("capability.granted", "env"),
                     ("capability.revoked", "network.allow"), ("capability.revoked", "env")], kinds


def test_bad_entry_is_400_and_nothing_is_applied(capper, own):
    sid = own["id"]
    before = capper._json("GET", path(sid))
    e = error_of(lambda: capper._json("POST", path(sid), {
        "grant": [{"network": {"allow": "c.example.com"}}, {"network": {"allow": "http://x/"}}]}))
    assert (e.status, e.error) == (400, "bad_request") and "grant[1].network.allow" in e.message, e.body
    e = error_of(lambda: capper._json("POST", path(sid), {
        "grant": [{"network": {"allow": "c.example.com"}}, {"env": {"name": "X", "value": "${secret:T}"}}]}))
    assert e.status == 400 and "secret" in e.message, e.body
    e = error_of(lambda: capper._json("POST", path(sid), {
        "grant": [{"network": {"allow": "c.example.com"}}], "revoke": [{"env": {"name": "NEVER_SET"}}]}))
    assert (e.status, e.error) == (422, "refused") and "NEVER_SET" in e.message, e.body
    e = error_of(lambda: capper._json("POST", path(sid), {"grant": {"tool": "x"}}))
    assert e.status == 400 and "grant" in e.message, e.body
    e = error_of(lambda: capper._json("POST", path(sid), {"grants": []}))
    assert e.status == 400, e.body
    assert capper._json("GET", path(sid)) == before
    assert not [a for a in capper.audit(sid) if a["kind"].startswith("capability.")]


def test_grant_limits_tools_and_host_paths(capper, own):
    sid = own["id"]
    e = error_of(lambda: capper._json("POST", path(sid), {"grant": [{"tool": "core.time"}]}))
    assert (e.status, e.body["permission"]) == (403, "tools") and "--tool core.time" in e.message
    e = error_of(lambda: capper._json("POST", path(sid), {
        "grant": [{"mount": {"source": "/usr/share", "target": "/workspace/x"}}]}))
    assert (e.status, e.body["permission"]) == (403, "allowHostWorkspace")


def test_database_before_capabilities_is_migrated(tmp_path):
    """A grants table from schema 4 gains allow_capabilities, off."""
    import json
    import sqlite3
    import subprocess
    from daemonlib import AIRLOCK
    db = tmp_path / "airlockd.db"
    con = sqlite3.connect(db)
    con.execute("""CREATE TABLE grants (name TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE,
        allow_sandbox INTEGER NOT NULL, allow_exec INTEGER NOT NULL,
        allow_host_workspace INTEGER NOT NULL, max_sandboxes INTEGER NOT NULL,
        classes TEXT NOT NULL, created_ms INTEGER NOT NULL, revoked_ms INTEGER NOT NULL DEFAULT 0,
        allow_git INTEGER NOT NULL DEFAULT 0, secrets TEXT NOT NULL DEFAULT '',
        tools TEXT NOT NULL DEFAULT '')""")
    con.execute("INSERT INTO grants VALUES ('old', ?, 1, 1, 0, 0, '', 1000, 0, 0, '', '')", ("ab" * 32,))
    con.execute("PRAGMA user_version=4")
    con.commit()
    con.close()
    p = subprocess.run([str(AIRLOCK), "grant", "ls", "--json", "--state-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)[0]["allowCapabilities"] is False
    con = sqlite3.connect(db)
    assert [r[1] for r in con.execute("PRAGMA table_info(grants)")].count("allow_capabilities") == 1
    assert con.execute("PRAGMA user_version").fetchone()[0] == 6
    con.close()


def test_tool_granted_is_listed_and_callable_then_revoked(make_daemon, daemon_base):
    import json
    import pathlib
    import tempfile
    d = pathlib.Path(tempfile.mkdtemp(prefix="capstools-", dir=daemon_base))
    d.chmod(0o755)
    f = d / "tools.json"
    f.write_text(json.dumps({"define": {"t.echo": {
        "description": "echo", "args": {"type": "object", "additionalProperties": False},
        "command": ["/bin/echo", "tool-ran"]}}}))
    daemon = make_daemon("--tools", str(f))
    c = daemon.client(daemon.grant("tooler", "--allow-sandbox", "--allow-exec", "--allow-capabilities",
                                   "--tool", "core.time", "--tool", "t.echo"))
    sb = c.create(sandbox_class="small", policy={"tools": {"allow": ["core.time"]}})
    sid = sb["id"]

    def names():
        return sorted(t["name"] for t in c._json("GET", f"/v1/sandboxes/{sid}/tools")["tools"])

    assert names() == ["core.time"]
    r = c.run(sid, ["airlock-tool", "call", "t.echo"])
    assert r.exit_code != 0 and b"policy_denied" in r.stderr, r
    caps = c._json("POST", path(sid), {"grant": [{"tool": "t.echo"}]})
    assert sorted(caps["tools"]) == ["core.time", "t.echo"]
    assert names() == ["core.time", "t.echo"]
    r = c.run(sid, ["airlock-tool", "call", "t.echo"])
    assert r.exit_code == 0 and b"tool-ran" in r.stdout, r
    c._json("POST", path(sid), {"revoke": [{"tool": "t.echo"}]})
    assert names() == ["core.time"]
    r = c.run(sid, ["airlock-tool", "call", "t.echo"])
    assert r.exit_code != 0 and b"policy_denied" in r.stderr, r
    c.delete(sid)
