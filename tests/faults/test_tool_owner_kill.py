# SPDX-License-Identifier: Apache-2.0
"""kill -9 of `airlock run` (the supervisor) while a host tool it started
runs: the tool's whole tree dies with it, and the call is on the audit log
(tool.started) although its end never will be."""

import json
import os
import random
import signal
import subprocess
import time


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


def test_kill9_of_the_supervisor_takes_the_running_tool_down(airlock):
    secs = "%d.%03d" % (30, random.randrange(1000))
    tool_argv = ["/bin/sleep", secs]
    tdir = airlock.make_dir("tools")
    tools = tdir / "tools.json"
    tools.write_text(json.dumps({"define": {"t.slow": {
        "description": "a slow host tool",
        "args": {"type": "object", "properties": {}, "additionalProperties": False},
        "command": tool_argv, "timeout": "60s"}}}))
    tools.chmod(0o644)
    airlock.chown(tdir)
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
