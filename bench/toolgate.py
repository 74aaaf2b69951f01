#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Tool gateway benchmark, measured inside sandboxes, interleaved:

  (a) the gateway's round trip: core.time called over one connection (what
      `airlock-tool mcp` or any persistent client does), p50 and p99 per
      call; core.time itself costs a clock read, so this is the latency the
      gateway adds to a call (target: p50 <= 200 us);
  (b) the one-shot client against the local reference: `airlock-tool call
      core.time` against `airlock-tool --version` (its own start cost, which
      is subtracted) and against running `date`.

core.time is held to 600 calls a minute per sandbox (a bucket that starts
full), so the samples come from ROUNDS sandboxes of 500 calls.

Reports, never judges: exit 1 only when a step fails."""

import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.environ.get("AIRLOCK_BIN", os.path.join(REPO, "build/src/cli/airlock"))
ROUNDS = int(os.environ.get("BENCH_TOOL_ROUNDS", "4"))
CALLS = 500  # per sandbox, within the rate limit's first minute
WARMUP = 50
SPAWNS = 100  # one-shot calls per sandbox (three processes each)

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


def one_round(ws, calls, warmup, spawns):
    p = subprocess.run([AIRLOCK, "run", "-q", "-w", ws, "--tool", "core.time",
                        "--audit", os.path.join(ws + ".d", "audit.jsonl"),
                        "--", "python3", "/workspace/inside.py", str(calls), str(warmup),
                        str(spawns)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-500:])
    return json.loads(p.stdout)


def main():
    if not os.path.exists(AIRLOCK):
        print(f"toolgate bench: {AIRLOCK} is not built", file=sys.stderr)
        return 1
    r = {"rt": [], "call": [], "version": [], "date": []}
    with tempfile.TemporaryDirectory(prefix="airlock-bench-tools-") as ws:
        os.chmod(ws, 0o755)
        os.mkdir(ws + ".d")
        with open(os.path.join(ws, "inside.py"), "w") as fh:
            fh.write(INSIDE)
        try:
            for _ in range(ROUNDS):
                # Round trips in one sandbox, one-shot processes in another:
                # each within core.time's 600 calls a minute.
                for k, v in one_round(ws, CALLS, WARMUP, 0).items():
                    r[k] += v
                for k, v in one_round(ws, 0, 0, SPAWNS).items():
                    r[k] += v
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            print("toolgate bench failed:", e, file=sys.stderr)
            return 1
        finally:
            subprocess.run(["rm", "-rf", ws + ".d"], check=False)
    us = lambda ns: ns / 1000.0  # noqa: E731
    rt50, rt99 = us(pct(r["rt"], 50)), us(pct(r["rt"], 99))
    call50, ver50, date50 = (us(pct(r[k], 50)) for k in ("call", "version", "date"))
    call99, ver99 = us(pct(r["call"], 99)), us(pct(r["version"], 99))
    print("== tool gateway: core.time round trips from inside sandboxes")
    print(f"   persistent client, {len(r['rt'])} calls ({CALLS} per connection): "
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
