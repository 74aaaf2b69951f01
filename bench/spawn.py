#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Spawn benchmark: `airlock run -- /bin/true` (every namespace, seccomp,
Landlock, cgroup limits) against a bubblewrap sandbox doing less, measured
in the same run, interleaved. Prints the ratio of medians and the
supervisor's peak RSS."""

import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.environ.get("AIRLOCK_BIN", os.path.join(REPO, "build/src/cli/airlock"))
RUNS = int(os.environ.get("BENCH_RUNS", "200"))
WARMUP = 10

BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
         "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]


def run(argv, cwd):
    """Fork+exec argv; return (seconds, exit status, peak RSS in KiB)."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            fd = os.open(os.devnull, os.O_RDWR)
            os.dup2(fd, 0)
            os.dup2(fd, 1)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    return time.perf_counter() - t0, os.waitstatus_to_exitcode(status), ru.ru_maxrss


def main():
    ws = tempfile.mkdtemp(prefix="airlock-bench-")
    airlock = [AIRLOCK, "run", "-q", "-w", ws, "--", "/bin/true"]
    for argv in (airlock, BWRAP):
        _, code, _ = run(argv, ws)
        if code != 0:
            print(f"bench: {argv[0]} failed with exit code {code}", file=sys.stderr)
            return 1
    for _ in range(WARMUP):
        run(airlock, ws)
        run(BWRAP, ws)
    a_times, b_times, a_rss = [], [], []
    for _ in range(RUNS):
        t, _, rss = run(airlock, ws)
        a_times.append(t)
        a_rss.append(rss)
        t, _, _ = run(BWRAP, ws)
        b_times.append(t)
    os.rmdir(ws)
    a, b = statistics.median(a_times), statistics.median(b_times)
    print(f"spawn: airlock run -- /bin/true   median {a * 1000:.2f} ms  "
          f"p90 {sorted(a_times)[int(RUNS * 0.9)] * 1000:.2f} ms")
    print(f"spawn: bwrap --unshare-all true   median {b * 1000:.2f} ms  "
          f"p90 {sorted(b_times)[int(RUNS * 0.9)] * 1000:.2f} ms")
    print(f"spawn: ratio airlock/bwrap {a / b:.2f}x (target <= 1.0x), {RUNS} runs each, interleaved")
    print(f"spawn: supervisor peak RSS {max(a_rss) / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
