# SPDX-License-Identifier: Apache-2.0
"""A host tool call cut short in a container of airlock-runtime: the
container stops (its pid 1 killed) while a node tool runs, the keeper kills
the gates' process with the call in it, and the call's end is still on the
audit log. Before, the log had the call's tool.started line and no
tool.call: the gates died with it. Now the gates keep the calls under way
in the container's state directory and the keeper, which kills them, writes
each one's tool.call (errorCode "supervisor_died"). Needs root."""

import json
import os
import random
import signal
import subprocess
import time

from test_oci_runtime import (RUNTIME, create, env, rt, spec,  # noqa: F401
                              wait_pid, write_spec)


def _procs_with_cmdline(argv):
    want = "\0".join(argv).encode() + b"\0"
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/cmdline", "rb") as f:
                    if f.read() == want:
                        out.append(int(e))
            except OSError:
                pass
    return out


def test_a_call_cut_by_the_containers_end_has_its_end(env):
    secs = "%d.%03d" % (40, random.randrange(1000))
    tool_argv = ["/bin/sleep", secs]
    node = env["tmp"] / "node"
    node.mkdir()
    (node / "tools.json").write_text(json.dumps({"define": {"node.slow": {
        "args": {"type": "object", "properties": {}, "additionalProperties": False},
        "command": tool_argv, "timeout": "60s"}}}))
    env["env"].update(AIRLOCK_RUNTIME_TOOLS=str(node / "tools.json"))
    write_spec(env, spec(["/bin/sh", "-c", "airlock-tool call node.slow"], annotations={
        "airlock.io/policy": json.dumps({"tools": {"allow": ["node.slow"]}})}))
    p = create(env, "cut")
    assert p.returncode == 0, p.stderr
    try:
        assert rt(env, "start", "cut").returncode == 0
        end = time.monotonic() + 20
        while not _procs_with_cmdline(tool_argv):
            assert time.monotonic() < end, "the tool did not start: " + p.out.read_text()
            time.sleep(0.05)
        assert rt(env, "kill", "cut", "TERM").returncode == 0
        assert wait_pid(p.pid, 20)
        end = time.monotonic() + 10
        while _procs_with_cmdline(tool_argv):
            assert time.monotonic() < end, "the tool outlived its container"
            time.sleep(0.05)
        # The keeper's last line, once it has closed what it had to.
        end = time.monotonic() + 10
        while True:
            lines = [json.loads(x) for x in (env["tmp"] / "audit.log").read_text().splitlines()]
            mine = [a for a in lines if a.get("sandbox") == "oci:cut"]
            if any(a["kind"] == "container.exited" for a in mine):
                break
            assert time.monotonic() < end, [a["kind"] for a in mine]
            time.sleep(0.05)
        started = [a for a in mine if a["kind"] == "tool.started"]
        calls = [a for a in mine if a["kind"] == "tool.call"]
        assert len(started) == 1, [a["kind"] for a in mine]
        assert len(calls) == 1, f"the cut call has no end: {[a['kind'] for a in mine]}"
        assert calls[0]["callId"] == started[0]["callId"], (started, calls)
        assert calls[0]["errorCode"] == "supervisor_died", calls
        assert calls[0]["seq"] > started[0]["seq"]
        v = subprocess.run([str(RUNTIME.parent.parent / "cli/airlock"), "audit", "verify",
                            str(env["tmp"] / "audit.log")], capture_output=True, text=True,
                           timeout=30)
        assert v.returncode == 0, v.stdout + v.stderr
    finally:
        rt(env, "delete", "--force", "cut")
        for pid in _procs_with_cmdline(tool_argv):
            os.kill(pid, signal.SIGKILL)
