# SPDX-License-Identifier: Apache-2.0
"""kill -9 of a sandbox's supervisor while a host tool call runs: the call's
tool.started line is on the audit log, and its end is too. Before, the
supervisor took the call's tool.call line with it, so the log showed a call
that began and never ended. Now the supervisor keeps the calls under way in
its run directory, and airlockd, which sees it die, writes a tool.call line
for each (errorCode "supervisor_died"); the log still verifies."""

import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "daemon"))
from daemonlib import AIRLOCK, AIRLOCKD, Daemon, wait_for  # noqa: E402


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


def _lines(path):
    out = []
    for line in pathlib.Path(path).read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


@pytest.fixture
def tool_daemon():
    if os.geteuid() != 0:
        pytest.skip("the daemon fault tests run as root")
    for b in (AIRLOCK, AIRLOCKD):
        if not b.exists():
            pytest.skip(f"{b} is not built")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="airlockd-tsd-", dir="/tmp"))
    tmp.chmod(0o755)
    secs = "%d.%03d" % (40, random.randrange(1000))
    tools = tmp / "tools.json"
    tools.write_text(json.dumps({"define": {"t.slow": {
        "description": "a slow host tool",
        "args": {"type": "object", "properties": {}, "additionalProperties": False},
        "command": ["/bin/sleep", secs], "timeout": "60s"}}}))
    d = Daemon(tmp / "d", ["--tools", str(tools)])
    d.admin = d.grant("owner", "--allow-sandbox", "--allow-exec", "--tool", "t.slow")
    d.start()
    d.tool_argv = ["/bin/sleep", secs]
    try:
        yield d
    finally:
        d.cleanup(d.admin)
        for pid in _procs_with_cmdline(d.tool_argv):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("daemon_up", [True, False], ids=["seen", "seen-at-restart"])
def test_a_call_cut_by_the_supervisors_death_has_its_end(tool_daemon, daemon_up):
    d = tool_daemon
    c = d.client(d.admin, timeout=60)
    sb = c.create(sandbox_class="small", policy={"tools": {"allow": ["t.slow"]}})["id"]
    done = []

    def call():
        try:
            done.append(c.run(sb, ["airlock-tool", "call", "t.slow"]))
        except Exception as e:  # the supervisor dies under it
            done.append(e)
    t = threading.Thread(target=call, daemon=True)
    t.start()
    wait_for(lambda: _procs_with_cmdline(d.tool_argv), timeout=20, what="the tool to start")
    sv = d.supervisors()[sb]
    if not daemon_up:
        # The daemon is down when the supervisor dies: it learns of it when
        # it starts again.
        d.kill9()
    os.kill(sv, signal.SIGKILL)
    wait_for(lambda: not _procs_with_cmdline(d.tool_argv), timeout=10,
             what="the tool to die with its supervisor")
    if not daemon_up:
        d.start()

    def ended():
        return c.request("GET", f"/v1/sandboxes/{sb}")[2].find(b'"running"') < 0
    wait_for(ended, timeout=20, what="the daemon to see the supervisor die")
    t.join(20)

    def closed():
        lines = [e for e in _lines(d.audit) if e.get("sandbox") == sb]
        started = [e for e in lines if e.get("kind") == "tool.started"]
        calls = [e for e in lines if e.get("kind") == "tool.call"]
        return (started, calls) if started and calls else None
    try:
        started, calls = wait_for(closed, timeout=10, what="the call's end on the audit log")
    except AssertionError:
        kinds = [e.get("kind") for e in _lines(d.audit) if e.get("sandbox") == sb]
        raise AssertionError(f"no tool.call line for the started call: {kinds}")
    assert len(started) == 1 and len(calls) == 1, (started, calls)
    s, e = started[0], calls[0]
    assert e["callId"] == s["callId"] and e["tool"] == "t.slow", (s, e)
    assert e["argsDigest"] == s["argsDigest"], (s, e)
    assert e["errorCode"] == "supervisor_died", e
    assert e["seq"] > s["seq"], (s, e)
    v = subprocess.run([str(AIRLOCK), "audit", "verify", str(d.audit)], capture_output=True,
                       text=True, timeout=30)
    assert v.returncode == 0, v.stdout + v.stderr
