#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Tool gateway benchmark, measured inside one sandbox, interleaved:

  (a) the gateway's round trip: core.time called N times over one
      connection (what `airlock-tool mcp` or any persistent client does),
      p50 and p99 per call; core.time itself costs a clock read, so this is
      the latency the gateway adds to a call (target: p50 <= 200 us);
  (b) the one-shot client against the local reference: `airlock-tool call
      core.time` against `airlock-tool --version` (its own start cost, which
      is subtracted) and against running `date`.

Reports, never judges: exit 1 only when a step fails."""

import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.environ.get("AIRLOCK_BIN", os.path.join(REPO, "build/src/cli/airlock"))
CALLS = int(os.environ.get("BENCH_TOOL_CALLS", "5000"))
WARMUP = 200
SPAWNS = int(os.environ.get("BENCH_TOOL_SPAWNS", "300"))

INSIDE = r"""
import json, os, socket, subprocess, sys, time
calls, warmup, spawns = (int(a) for a in sys.argv[1:4])
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["AIRLOCK_TOOL_SOCKET"])
f = s.makefile("rwb", buffering=0)
run_id = os.environ["AIRLOCK_RUN_ID"]
rt = []
for i in range(warmup + calls):
    line = ('{"runId":"%s","callId":"%d","tool":"core.time","args":{}}\n' % (run_id, i)).encode()
    t = time.perf_counter_ns()
    s.sendall(line)
    resp = f.readline()
    dt = time.perf_counter_ns() - t
    if b'"ok":true' not in resp.replace(b" ", b""):
        sys.exit("core.time failed: %r" % resp[:200])
    if i >= warmup:
        rt.append(dt)
def once(argv):
    t = time.perf_counter_ns()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter_ns() - t
call, version, date = [], [], []
for _ in range(spawns):
    call.append(once(["airlock-tool", "call", "core.time"]))
    version.append(once(["airlock-tool", "--version"]))
    date.append(once(["date"]))
print(json.dumps({"rt": rt, "call": call, "version": version, "date": date}))
"""


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def main():
    if not os.path.exists(AIRLOCK):
        print(f"toolgate bench: {AIRLOCK} is not built", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="airlock-bench-tools-") as ws:
        os.chmod(ws, 0o755)
        with open(os.path.join(ws, "inside.py"), "w") as fh:
            fh.write(INSIDE)
        p = subprocess.run([AIRLOCK, "run", "-q", "-w", ws, "--tool", "core.time",
                            "--audit", os.path.join(ws, "..", os.path.basename(ws) + ".audit"),
                            "--", "python3", "/workspace/inside.py", str(CALLS), str(WARMUP),
                            str(SPAWNS)],
                           capture_output=True, text=True, timeout=600)
        try:
            os.unlink(os.path.join(os.path.dirname(ws), os.path.basename(ws) + ".audit"))
        except OSError:
            pass
    if p.returncode != 0:
        print("toolgate bench failed:", p.stderr.strip()[-500:], file=sys.stderr)
        return 1
    r = json.loads(p.stdout)
    us = lambda ns: ns / 1000.0  # noqa: E731
    rt50, rt99 = us(pct(r["rt"], 50)), us(pct(r["rt"], 99))
    call50, ver50, date50 = (us(pct(r[k], 50)) for k in ("call", "version", "date"))
    call99, ver99 = us(pct(r["call"], 99)), us(pct(r["version"], 99))
    print("== tool gateway: core.time round trips inside one sandbox")
    print(f"   persistent client, {CALLS} calls on one connection: "
          f"p50 {rt50:.0f} us, p99 {rt99:.0f} us per call (target: p50 <= 200 us)")
    print(f"   one-shot `airlock-tool call core.time`: p50 {call50:.0f} us, p99 {call99:.0f} us;"
          f" its start cost (`airlock-tool --version`) p50 {ver50:.0f} us, p99 {ver99:.0f} us")
    print(f"   added by the gateway to a one-shot call (call - --version): "
          f"p50 {call50 - ver50:.0f} us")
    print(f"   reference: `date` p50 {date50:.0f} us; `airlock-tool call core.time` / `date` "
          f"= {call50 / date50:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
