# SPDX-License-Identifier: Apache-2.0
"""A host tool under a full audit disk: a call acts on the host only once
its record is on the log. The sandbox calls a tool that creates a file on
the host, again and again, while the log's disk is full; every file that
exists has its call's tool.started line, and the calls past the last
recorded one are refused (audit_failed), never run unrecorded."""

import json
import os
import pathlib
import subprocess
import time

import pytest

TOUCH_ARGS = {"type": "object", "additionalProperties": False, "required": ["p"],
              "properties": {"p": {"type": "string", "pattern": ""}}}


@pytest.fixture
def small_tmpfs(airlock):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d = airlock.make_dir("auditdisk")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs: " + r.stderr.strip())
    try:
        airlock.chown(d)

        def fill():
            fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                for size in (4096, 512, 1):
                    try:
                        while True:
                            os.write(fd, b"x" * size)
                    except OSError:
                        pass
            finally:
                os.close(fd)
        yield d, fill
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def test_no_tool_acts_without_its_line_on_a_full_audit_disk(airlock, small_tmpfs):
    disk, fill = small_tmpfs
    log = disk / "audit.jsonl"
    out = airlock.make_dir("acted")
    ws = airlock.make_dir()
    args = json.loads(json.dumps(TOUCH_ARGS))
    args["properties"]["p"]["pattern"] = "^" + str(out) + "/m[0-9]+$"
    tdir = airlock.make_dir("tools")
    tools = tdir / "tools.json"
    tools.write_text(json.dumps({"define": {"t.touch": {
        "description": "make a file on the host", "args": args,
        "command": ["/usr/bin/touch", "--", "${args.p}"]}}}))
    tools.chmod(0o644)
    airlock.chown(tdir)
    script = ("touch /workspace/ready; "
              "while [ ! -e /workspace/go ]; do sleep 0.02; done; "
              "i=0; while [ $i -lt 300 ]; do "
              f"airlock-tool call t.touch p={out}/m$i >/dev/null 2>/workspace/err; rc=$?; "
              "if [ $rc -ne 0 ]; then echo $i $rc > /workspace/refused; break; fi; "
              "i=$((i+1)); done")
    p = subprocess.Popen(airlock.cmd(["run", "-q", "-w", ws, "--audit", log, "--tools", tools,
                                      "--tool", "t.touch", "--", "/bin/sh", "-c", script]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 30
        while not (ws / "ready").exists():
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < end, "the sandbox did not start"
            time.sleep(0.02)
        fill()
        (ws / "go").touch()
        _, err = p.communicate(timeout=40)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    refused = (ws / "refused").read_text() if (ws / "refused").exists() else ""
    why = (ws / "err").read_text() if (ws / "err").exists() else ""
    acted = sorted(int(f.name[1:]) for f in out.iterdir() if f.name.startswith("m"))
    with open(log) as f:
        lines = [json.loads(line) for line in f]
    recorded = {(e.get("args") or {}).get("p") for e in lines
                if e["kind"] in ("tool.started", "tool.call")}
    unrecorded = [i for i in acted if f"{out}/m{i}" not in recorded]
    assert not unrecorded, (f"the tool acted on the host with no record of its call: {unrecorded}"
                            f" (acted {len(acted)}; {err[-500:]})")
    # The full disk was met: the call refused, the run ended for it.
    assert "audit_failed" in why + err, (p.returncode, refused, why, err[-500:])
    # The disk did fill: a call was refused, or the sandbox was stopped for it.
    assert len(acted) < 300, "300 calls on a full disk all ran"
    (disk / "filler").unlink()
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 0, v.stdout + v.stderr
