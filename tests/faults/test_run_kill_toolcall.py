# SPDX-License-Identifier: Apache-2.0
"""kill -9 of `airlock run` while a host tool call runs: the call's
tool.started line is on the audit log, and its end must be too. Nobody is
left to write it when it dies, so the run keeps the calls under way beside
its run record (state root, runs/<id>.calls), and the next Airlock command
that sweeps the run records writes a tool.call line for each (errorCode
"supervisor_died", closedBy "airlock") before the run's end; the log still
verifies, and a second sweep writes nothing again.

Runs as root and as an ordinary user (tests/conftest.py)."""

import json
import os
import random
import signal
import subprocess

from test_run_kill import audit_lines, sweep, verify, wait_for


def _procs_with_cmdline(argv):
    want = "\0".join(argv).encode() + b"\0"
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/cmdline", "rb") as f:
                if f.read() == want:
                    out.append(int(e))
        except OSError:
            pass
    return out


def test_a_call_cut_by_the_runs_death_has_its_end(airlock):
    audit = airlock.make_dir("audit") / "audit.jsonl"
    d = airlock.make_dir("tools")
    tool_argv = ["/bin/sleep", "%d.%03d" % (41, random.randrange(1000))]
    tools = d / "tools.json"
    tools.write_text(json.dumps({"define": {"t.slow": {
        "description": "a slow host tool",
        "args": {"type": "object", "properties": {}, "additionalProperties": False},
        "command": tool_argv, "timeout": "60s"}}}))
    tools.chmod(0o644)
    airlock.chown(d)
    ws = airlock.make_dir()
    argv = airlock.cmd(["run", "-q", "--audit", audit, "-w", ws, "--timeout", "60",
                        "--tools", tools, "--tool", "t.slow", "--",
                        "airlock-tool", "call", "t.slow"])
    proc = subprocess.Popen(argv, cwd=str(airlock.base), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        try:
            wait_for(lambda: _procs_with_cmdline(tool_argv), 20, "the tool to start")
            started = wait_for(lambda: [e for e in audit_lines(audit)
                                        if e["kind"] == "tool.started"], 10, "tool.started")
        except AssertionError:
            proc.kill()
            raise AssertionError(proc.communicate(timeout=10)[1].decode())
        sandbox = started[0]["sandbox"]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for pid in _procs_with_cmdline(tool_argv):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    sweep(airlock, audit)
    lines = [e for e in audit_lines(audit) if e["sandbox"] == sandbox]
    kinds = [e["kind"] for e in lines]
    calls = [e for e in lines if e["kind"] == "tool.call"]
    assert len(calls) == 1, kinds
    s, c = started[0], calls[0]
    assert c["callId"] == s["callId"] and c["tool"] == "t.slow", (s, c)
    assert c["argsDigest"] == s["argsDigest"], (s, c)
    assert c["errorCode"] == "supervisor_died" and c["closedBy"] == "airlock", c
    # The call's end comes before the run's.
    assert kinds.index("tool.call") < kinds.index("sandbox.destroyed"), kinds
    assert [e for e in lines if e["kind"] == "sandbox.destroyed"][0]["reason"] == "owner_died"

    # Nothing of it is left to close again.
    sweep(airlock, audit)
    assert [e["kind"] for e in audit_lines(audit) if e["sandbox"] == sandbox] == kinds
    verify(airlock, audit)
