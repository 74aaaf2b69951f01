# SPDX-License-Identifier: Apache-2.0
"""A tool revoked while the sandbox's call of it runs on the host: the
call is stopped and refused (policy_denied), its process tree killed, not
left to run to its end under a grant that was taken back."""

import json
import subprocess
import time

from controllib import ask


def test_revoke_stops_a_running_tool_call(airlock):
    tdir = airlock.make_dir("tools")
    tools = tdir / "tools.json"
    tools.write_text(json.dumps({"define": {"t.slow": {
        "description": "a slow host tool",
        "args": {"type": "object", "properties": {}, "additionalProperties": False},
        "command": ["/bin/sleep", "8"], "timeout": "20s"}}}))
    tools.chmod(0o644)
    airlock.chown(tdir)
    ws = airlock.make_dir()
    cdir = airlock.make_dir("ctl")
    sock, audit = cdir / "c.sock", cdir / "audit.jsonl"
    script = ("touch /workspace/ready; airlock-tool call t.slow > /workspace/out 2>&1; "
              "echo rc=$? >> /workspace/out")
    p = subprocess.Popen(airlock.cmd(["run", "-q", "-w", ws, "--control", sock, "--audit", audit,
                                      "--tools", tools, "--tool", "t.slow", "--",
                                      "/bin/sh", "-c", script]),
                         cwd=str(airlock.base), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        end = time.monotonic() + 30
        while not (ws / "ready").exists() or not sock.exists():
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < end, "the sandbox did not start"
            time.sleep(0.02)
        time.sleep(0.7)  # the call is under way on the host
        t0 = time.monotonic()
        r = ask(sock, {"op": "caps", "revoke": [{"tool": "t.slow"}]})
        assert r["ok"], r
        p.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    out = (ws / "out").read_text()
    assert "policy_denied" in out and out.endswith("rc=3\n"), out
    assert took < 5, f"the revoked call ran on for {took:.1f} s"
    calls = [json.loads(line) for line in audit.read_text().splitlines()]
    ends = [c for c in calls if c["kind"] == "tool.call"]
    assert [(c["decision"], c["errorCode"]) for c in ends] == [("allow", "policy_denied")], ends
