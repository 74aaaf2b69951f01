# SPDX-License-Identifier: Apache-2.0
"""Live capabilities of a running sandbox (docs/internals/caps.md), through
`airlock run --control PATH` and `airlock caps --control PATH`: for each kind
(network rules, tools, mounts), refused, granted -> works, revoked ->
refused again, each change audited; run-time mounts obey the start's rules
(a symbolic link on the source's or the target's path, the deny list, the
sandbox's Landlock rules), as root and as an ordinary user (who is told
run-time mounts need a root supervisor)."""

import json
import os
import pathlib
import subprocess
import time

import pytest

import netns
from controllib import ask
from netns import HELLO, HTTP_PORT, RANGE, SERVER_ADDR

URL = f"http://upstream.test:{HTTP_PORT}/hello.txt"

# The script each sandbox runs: for phase N it waits for the file goN (the
# test's go-ahead, after it changed something), runs the attempt and writes
# its output to rN. Ends after the last phase.
PHASES = """
i=1
while [ $i -le {n} ]; do
    t=0
    while [ ! -e /workspace/go$i ]; do sleep 0.05; t=$((t+1)); [ $t -gt 600 ] && exit 9; done
    ( {attempt} ) > /workspace/r$i.tmp 2>&1; echo "rc=$?" >> /workspace/r$i.tmp
    mv /workspace/r$i.tmp /workspace/r$i
    i=$((i+1))
done
"""


class Live:
    """One `airlock run --control` sandbox going through phases."""

    def __init__(self, airlock, attempt, phases, opts=(), netns_path=None, ws=None):
        self.a = airlock
        self.ws = ws or airlock.make_dir()
        airlock.chown(self.ws)
        self.dir = airlock.make_dir("ctl")
        self.sock = self.dir / "c.sock"
        self.audit = self.dir / "audit.jsonl"
        script = PHASES.format(n=phases, attempt=attempt)
        argv = airlock.cmd(["run", "-q", "-w", self.ws, "--control", self.sock, "--audit", self.audit,
                            *opts, "--", "/bin/sh", "-c", script])
        if netns_path:
            argv = ["nsenter", f"--net={netns_path}", *argv]
        self.p = subprocess.Popen(argv, cwd=str(airlock.base), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not self.sock.exists():
            if self.p.poll() is not None or time.monotonic() > deadline:
                out, err = self.p.communicate(timeout=10)
                raise AssertionError(f"no control socket: rc={self.p.returncode} {err}")
            time.sleep(0.05)
        self.phase = 0

    def caps(self, grant=None, revoke=None):
        req = {"op": "caps"}
        if grant is not None:
            req["grant"] = grant
        if revoke is not None:
            req["revoke"] = revoke
        return ask(self.sock, req)

    def step(self):
        """Let the next phase run; its output."""
        self.phase += 1
        go = self.ws / f"go{self.phase}"
        go.write_text("")
        res = self.ws / f"r{self.phase}"
        deadline = time.monotonic() + 30
        while not res.exists():
            assert self.p.poll() is None or res.exists(), self.p.communicate()
            assert time.monotonic() < deadline, "phase timed out"
            time.sleep(0.05)
        return res.read_text()

    def finish(self):
        out, err = self.p.communicate(timeout=30)
        assert self.p.returncode == 0, err
        assert not self.sock.exists(), "the control socket outlived the run"
        return [json.loads(line) for line in self.audit.read_text().splitlines()]

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.communicate(timeout=10)


# The fields of capability.granted and capability.revoked, whichever
# supervisor wrote them (docs/audit.md); test_capabilities_api.py checks
# airlockd's sandboxes' the same way.
CHANGE_FIELDS = {"seq", "ts", "sandbox", "kind", "prev", "by", "capability", "entry"}


def changes(audit):
    for r in audit:
        if r["kind"].startswith("capability."):
            assert set(r) == CHANGE_FIELDS, r
    return [(r["kind"], r["capability"], r["entry"], r["by"]) for r in audit
            if r["kind"].startswith("capability.")]


from netns import net  # noqa: E402,F401  (the test network, one per module)


def test_socket_is_the_callers_and_private(airlock):
    live = Live(airlock, "true", 1)
    try:
        st = live.sock.stat()
        assert oct(st.st_mode & 0o777) == "0o600"
        assert st.st_uid == (airlock.user.pw_uid if airlock.user else os.geteuid())
        r = ask(live.sock, {"op": "status"})
        assert r["ok"] is False and "caps" in r["message"]
        live.step()
        live.finish()
    finally:
        live.kill()


def test_network_allow_granted_then_revoked(airlock, net):
    attempt = f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 {URL}"
    opts = ["--allow-private", RANGE, "--host", f"upstream.test={SERVER_ADDR}", "--allow", "placeholder.invalid"]
    live = Live(airlock, attempt, 3, opts, netns_path=net.client_ns_path)
    try:
        assert live.step().startswith("403"), "allowed before the grant"
        rule = f"upstream.test:{HTTP_PORT}"
        r = live.caps(grant=[{"network": {"allow": rule}}])
        assert r["ok"], r
        assert rule in r["capabilities"]["network"]["allow"]
        assert live.step().startswith("200"), "the grant did not take effect"
        r = live.caps(revoke=[{"network": {"allow": rule}}])
        assert r["ok"] and rule not in r["capabilities"]["network"]["allow"], r
        assert live.step().startswith("403"), "allowed after the revoke"
        audit = live.finish()
    finally:
        live.kill()
    assert changes(audit) == [
        ("capability.granted", "network.allow", {"network": {"allow": rule}}, "control-socket"),
        ("capability.revoked", "network.allow", {"network": {"allow": rule}}, "control-socket"),
    ]
    # The gate's decisions follow: denied, allowed by the granted rule, denied.
    dec = [(d["decision"], d.get("rule")) for d in audit if d["kind"] == "net.decision"
           and d.get("host") == "upstream.test"]
    assert dec == [("deny", None), ("allow", rule), ("deny", None)], dec


def test_network_deny_and_budget(airlock, net):
    attempt = f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 {URL}"
    rule = f"upstream.test:{HTTP_PORT}"
    opts = ["--allow-private", RANGE, "--host", f"upstream.test={SERVER_ADDR}", "--allow", rule]
    live = Live(airlock, attempt, 4, opts, netns_path=net.client_ns_path)
    try:
        assert live.step().startswith("200")
        r = live.caps(grant=[{"network": {"deny": "upstream.test"}}])
        assert r["ok"] and r["capabilities"]["network"]["deny"] == ["upstream.test"], r
        assert live.step().startswith("403"), "a granted deny rule did not refuse"
        r = live.caps(grant=[{"network": {"allow": rule}}, {"network": {"budget": {"requests": 1}}}])
        assert r["ok"] and r["capabilities"]["network"]["deny"] == [], r
        # The budget counts from the start: 1 request was made already.
        assert live.step().startswith("429"), "the budget was not applied"
        r = live.caps(grant=[{"network": {"budget": {"requests": 0}}}])
        assert r["ok"], r
        assert live.step().startswith("200")
        live.finish()
    finally:
        live.kill()


def test_bad_change_is_refused_whole(airlock):
    live = Live(airlock, "true", 1, ["--allow", "a.example.com"])
    try:
        before = live.caps()["capabilities"]
        r = live.caps(grant=[{"network": {"allow": "b.example.com"}}, {"network": {"allow": "http://x/"}}])
        assert r == {"ok": False, "error": "bad_request", "message": r["message"]}
        assert "grant[1].network.allow" in r["message"], r
        r = live.caps(grant=[{"network": {"allow": "b.example.com"}}, {"tool": "no.such"}])
        assert r["ok"] is False and r["error"] == "refused" and "no.such" in r["message"], r
        r = live.caps(grant=[{"env": {"name": "K", "value": "v"}}])
        assert r["error"] == "refused" and "one command" in r["message"], r
        r = live.caps(grant=[{"network": {"allow": "b.example.com"}}], revoke=[{"network": {"deny": "z"}}])
        assert r["error"] == "refused", r
        assert live.caps()["capabilities"] == before, "part of a refused change was applied"
        live.step()
        audit = live.finish()
    finally:
        live.kill()
    assert changes(audit) == []


def _tools(airlock):
    d = airlock.make_dir("tools")
    f = d / "tools.json"
    f.write_text(json.dumps({"define": {"t.echo": {
        "description": "echo", "args": {"type": "object", "properties": {}, "additionalProperties": False},
        "command": ["/bin/echo", "tool-ran"]}}}))
    f.chmod(0o644)
    airlock.chown(d)
    return f


def test_tool_granted_then_revoked(airlock):
    live = Live(airlock, "airlock-tool call t.echo", 3, ["--tool", "core.time", "--tools", _tools(airlock)])
    try:
        out = live.step()
        assert "policy_denied" in out and "tool-ran" not in out, out
        r = live.caps(grant=[{"tool": "t.echo"}])
        assert r["ok"] and sorted(r["capabilities"]["tools"]) == ["core.time", "t.echo"], r
        out = live.step()
        assert "tool-ran" in out and out.endswith("rc=0\n"), out
        r = live.caps(revoke=[{"tool": "t.echo"}])
        assert r["ok"] and r["capabilities"]["tools"] == ["core.time"], r
        out = live.step()
        assert "policy_denied" in out and "tool-ran" not in out, out
        audit = live.finish()
    finally:
        live.kill()
    assert [c[:3] for c in changes(audit)] == [
        ("capability.granted", "tool", {"tool": "t.echo"}),
        ("capability.revoked", "tool", {"tool": "t.echo"}),
    ]
    calls = [(c["decision"], c["tool"]) for c in audit if c["kind"] == "tool.call"]
    assert calls == [("deny", "t.echo"), ("allow", "t.echo"), ("deny", "t.echo")], calls


def _mount_source(airlock):
    src = airlock.make_dir("src")
    (src / "f.txt").write_text("from the host\n")
    (src / "f.txt").chmod(0o644)
    airlock.chown(src)
    return src


def test_mount_added_then_removed(airlock):
    src = _mount_source(airlock)
    ws = airlock.make_dir()
    (ws / "m").mkdir()
    live = Live(airlock, "cat /workspace/m/f.txt; touch /workspace/m/new", 3, ws=ws)
    try:
        assert "from the host" not in live.step()
        r = live.caps(grant=[{"mount": {"source": str(src), "target": "/workspace/m"}}])
        if airlock.rootless:
            assert r["ok"] is False and "root" in r["message"], r
            live.step()
            live.step()
            live.finish()
            return
        assert r["ok"], r
        assert r["capabilities"]["mounts"] == [{"source": str(src), "target": "/workspace/m", "readOnly": True}]
        out = live.step()
        assert "from the host" in out and "Read-only file system" in out, out
        assert not (src / "new").exists()
        r = live.caps(revoke=[{"mount": "/workspace/m"}])
        assert r["ok"] and r["capabilities"]["mounts"] == [], r
        assert "from the host" not in live.step()
        audit = live.finish()
    finally:
        live.kill()
    assert [c[:2] for c in changes(audit)] == [("capability.granted", "mount"), ("capability.revoked", "mount")]


def test_mount_read_write_and_protected(airlock):
    if airlock.rootless:
        pytest.skip("run-time mounts need a root supervisor (the refusal: test_mount_added_then_removed)")
    src = _mount_source(airlock)
    (src / ".git" / "hooks").mkdir(parents=True)
    airlock.chown(src)
    ws = airlock.make_dir()
    (ws / "m").mkdir()
    live = Live(airlock, "echo w > /workspace/m/out.txt; echo h > /workspace/m/.git/hooks/pre-commit; true",
                1, ws=ws)
    try:
        r = live.caps(grant=[{"mount": {"source": str(src), "target": "/workspace/m", "readOnly": False}}])
        assert r["ok"], r
        out = live.step()
        live.finish()
    finally:
        live.kill()
    assert (src / "out.txt").read_text() == "w\n", out
    assert not (src / ".git" / "hooks" / "pre-commit").exists(), "a write-protected path was writable"


def test_mount_refusals_follow_the_start_rules(airlock, tmp_path):
    if airlock.rootless:
        pytest.skip("run-time mounts need a root supervisor")
    src = _mount_source(airlock)
    link = airlock.make_dir("links") / "to-src"
    link.symlink_to(src)
    ws = airlock.make_dir()
    (ws / "m").mkdir()
    (ws / "real").mkdir()
    (ws / "viaink").symlink_to("/workspace/real")
    secret = airlock.make_dir("secret")
    (secret / "key").write_text("s")
    denied_parent = airlock.make_dir("holds")
    (denied_parent / ".ssh").mkdir()
    policy = airlock.make_dir("pol") / "p.json"
    policy.write_text(json.dumps({"filesystem": {"denyRead": [str(secret), str(denied_parent / ".ssh")]}}))
    policy.chmod(0o644)
    live = Live(airlock, "true", 1, ["-p", policy], ws=ws)
    try:
        cases = [
            ({"source": str(link), "target": "/workspace/m"}, "symbolic link"),
            ({"source": str(src), "target": "/workspace/viaink"}, "symbolic link"),
            ({"source": str(secret), "target": "/workspace/m"}, "denied path"),
            ({"source": str(denied_parent), "target": "/workspace/m"}, "denied path"),
            ({"source": "/etc", "target": "/workspace/m"}, "denied path"),
            ({"source": str(src), "target": "/workspace/missing"}, "mkdir -p"),
            ({"source": str(src), "target": "/opt", "readOnly": False}, "Landlock"),
            ({"source": str(src), "target": "/proc/x"}, "/proc"),
        ]
        for entry, why in cases:
            r = live.caps(grant=[{"mount": entry}])
            assert r["ok"] is False and why in r["message"], (entry, r)
        assert live.caps()["capabilities"]["mounts"] == []
        live.step()
        audit = live.finish()
    finally:
        live.kill()
    assert changes(audit) == []


def test_cli_against_a_run(airlock):
    live = Live(airlock, "true", 1, ["--allow", "a.example.com"])
    try:
        p = subprocess.run(airlock.cmd(["caps", "--control", live.sock, "--allow", "b.example.com:443",
                                        "--deny", "c.example.com", "--json"]),
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        caps = json.loads(p.stdout)
        assert caps["network"]["allow"] == ["a.example.com", "b.example.com:443"], caps
        assert caps["network"]["deny"] == ["c.example.com"], caps
        p = subprocess.run(airlock.cmd(["caps", "--control", live.sock, "--revoke-allow", "nope.example.com"]),
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 1 and "not in the effective rules" in p.stderr, p.stderr
        p = subprocess.run(airlock.cmd(["caps", "--control", live.sock, "--mount", "nocolon"]),
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "SRC:DST" in p.stderr, p.stderr
        # The socket's owner is who changed it, whatever the request says.
        r = ask(live.sock, {"op": "caps", "by": "grant:someone", "grant": [{"network": {"deny": "d.example.com"}}]})
        assert r["ok"], r
        live.step()
        audit = live.finish()
    finally:
        live.kill()
    assert {c[3] for c in changes(audit)} == {"control-socket"}
    assert [c[1] for c in changes(audit)] == ["network.allow", "network.deny", "network.deny"]
