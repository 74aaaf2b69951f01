# SPDX-License-Identifier: Apache-2.0
"""kill -9 of `airlock run` (the supervisor) while a host tool it started
runs: the tool's whole tree dies with it, and the call is on the audit log
(tool.started). Nobody is left to write its end when it dies, so the run
keeps the calls under way beside its run record (state root,
runs/<id>.calls), and the next Airlock command that sweeps the run records
writes a tool.call line for each (errorCode "supervisor_died", closedBy
"airlock") before the run's end; the log still verifies, and a second sweep
writes nothing again."""

import json
import os
import random
import signal
import subprocess
import time

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


def _airlock_pid(top):
    """`airlock run` itself: top, or its descendant (under runuser)."""
    todo = [top]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() == "airlock":
                    return p
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return None


def _slow_tool(airlock, secs):
    """A tools file defining t.slow, a host tool that sleeps secs.fff seconds
    (a duration of its own, so its processes are found by command line)."""
    tool_argv = ["/bin/sleep", "%d.%03d" % (secs, random.randrange(1000))]
    tdir = airlock.make_dir("tools")
    tools = tdir / "tools.json"
    tools.write_text(json.dumps({"define": {"t.slow": {
        "description": "a slow host tool",
        "args": {"type": "object", "properties": {}, "additionalProperties": False},
        "command": tool_argv, "timeout": "60s"}}}))
    tools.chmod(0o644)
    airlock.chown(tdir)
    return tool_argv, tools


def test_kill9_of_the_supervisor_takes_the_running_tool_down(airlock):
    tool_argv, tools = _slow_tool(airlock, 30)
    ws = airlock.make_dir()
    adir = airlock.make_dir("audit")
    audit = adir / "audit.jsonl"
    p = subprocess.Popen(airlock.cmd(["run", "-q", "-w", ws, "--audit", audit, "--tools", tools,
                                      "--tool", "t.slow", "--", "/bin/sh", "-c",
                                      "airlock-tool call t.slow"]),
                         cwd=str(airlock.base), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 20
        while not _procs_with_cmdline(tool_argv):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < end, "the tool did not start"
            time.sleep(0.02)
        owner = _airlock_pid(p.pid)
        assert owner, "no airlock process"
        os.kill(owner, signal.SIGKILL)
        end = time.monotonic() + 5
        while _procs_with_cmdline(tool_argv):
            assert time.monotonic() < end, "the host tool outlived its supervisor"
            time.sleep(0.05)
    finally:
        if p.poll() is None:
            p.kill()
        p.communicate(timeout=20)
        for pid in _procs_with_cmdline(tool_argv):
            os.kill(pid, signal.SIGKILL)
    lines = [json.loads(x) for x in audit.read_text().splitlines() if x.strip()]
    assert [e["tool"] for e in lines if e["kind"] == "tool.started"] == ["t.slow"], lines


def test_a_call_cut_by_the_runs_death_gets_its_end_from_the_next_sweep(airlock):
    audit = airlock.make_dir("audit") / "audit.jsonl"
    tool_argv, tools = _slow_tool(airlock, 41)
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
        owner = _airlock_pid(proc.pid)
        assert owner, "no airlock process"
        os.kill(owner, signal.SIGKILL)
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
