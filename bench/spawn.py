#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Spawn benchmark: `airlock run -- /bin/true` (every namespace, seccomp,
Landlock, cgroup limits) against a bubblewrap sandbox doing less, measured
in the same run, interleaved; the same with the network gate on
(`--net gated`) against the same bubblewrap reference. Prints the ratios of
the medians and of the 90th percentiles, the median CPU time of each one's
whole process tree (which moves less than wall time on a loaded machine),
the supervisor's peak RSS, the
host settings that cost start time, and (BENCH_TRACE_RUNS, default 30; 0:
none) the median of each step of a spawn from AIRLOCK_TRACE.

  BENCH_RUNS=N      interleaved runs of each (default 200)
  BENCH_TRACE_RUNS  traced runs, after the timed ones (default 30)
  BENCH_AGAINST=BIN another airlock (e.g. main's build) interleaved with the
                    rest, plain and with --net gated: its ratios to
                    bubblewrap in the same run
  --trace           print every step's median (default: the 12 slowest)
"""

import os
import random
import re
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.environ.get("AIRLOCK_BIN", os.path.join(REPO, "build/src/cli/airlock"))
RUNS = int(os.environ.get("BENCH_RUNS", "200"))
TRACE_RUNS = int(os.environ.get("BENCH_TRACE_RUNS", "30"))
WARMUP = 10

BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
         "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]

CPU = {}

TRACE_LINE = re.compile(r"airlock-trace pid=(\d+) at=(\d+)us step=(\S+) \+(\d+)us")


def run(argv, cwd, env=None):
    """Fork+exec argv; return (seconds, exit status, peak RSS in KiB).
    The CPU time of its whole process tree (every process of a sandbox is
    reaped inside it) is appended to CPU[tuple(argv)]."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            fd = os.open(os.devnull, os.O_RDWR)
            os.dup2(fd, 0)
            os.dup2(fd, 1)
            if env is None:
                os.execvp(argv[0], argv)
            else:
                os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    CPU.setdefault(tuple(argv), []).append(ru.ru_utime + ru.ru_stime)
    return time.perf_counter() - t0, os.waitstatus_to_exitcode(status), ru.ru_maxrss


def pct(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * q))]


def host_settings():
    """The cgroup mounts and whether each has favordynmods (docs/internals/
    spawn.md): without it, moving a process into a cgroup waits for an RCU
    grace period."""
    out = []
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                    opts = parts[3].split(",")
                    name = next((o for o in opts if o not in ("rw", "ro", "nosuid", "nodev",
                                                             "noexec", "relatime",
                                                             "favordynmods", "nsdelegate",
                                                             "memory_recursiveprot")),
                                parts[2])
                    out.append((parts[1], name, "favordynmods" in opts))
    except OSError:
        pass
    return out


def trace_steps(argv, ws, runs):
    """Per-step medians over `runs` traced runs: {step: ([+us], [at us])},
    and the time of each run outside cli.start..cli.exit (exec, the dynamic
    loader, the process's exit, this harness's fork and wait) in us."""
    steps = {}
    outside = []
    fd, path = tempfile.mkstemp(prefix="airlock-trace-")
    os.close(fd)
    env = dict(os.environ, AIRLOCK_TRACE=path)
    try:
        for _ in range(runs):
            open(path, "w").close()
            t, _, _ = run(argv, ws, env)
            end = None
            with open(path) as f:
                for line in f:
                    m = TRACE_LINE.search(line)
                    if m:
                        d, a = steps.setdefault(m.group(3), ([], []))
                        d.append(int(m.group(4)))
                        a.append(int(m.group(2)))
                        if m.group(3) == "cli.exit":
                            end = int(m.group(2))
            if end is not None:
                outside.append(t * 1e6 - end)
    finally:
        os.unlink(path)
    return steps, outside


def main():
    show_all = "--trace" in sys.argv[1:]
    ws = tempfile.mkdtemp(prefix="airlock-bench-")
    airlock = [AIRLOCK, "run", "-q", "-w", ws, "--", "/bin/true"]
    gated = [AIRLOCK, "run", "-q", "--net", "gated", "-w", ws, "--", "/bin/true"]
    for argv in (airlock, gated, BWRAP):
        _, code, _ = run(argv, ws)
        if code != 0:
            print(f"bench: {' '.join(argv[:4])} failed with exit code {code}", file=sys.stderr)
            return 1
    for _ in range(WARMUP):
        run(airlock, ws)
        run(gated, ws)
        run(BWRAP, ws)
    against = os.environ.get("BENCH_AGAINST")
    other = [against, "run", "-q", "-w", ws, "--", "/bin/true"] if against else None
    other_gated = ([against, "run", "-q", "--net", "gated", "-w", ws, "--", "/bin/true"]
                   if against else None)
    a_times, g_times, b_times, a_rss, o_times, og_times = [], [], [], [], [], []
    CPU.clear()
    load0 = os.getloadavg()[0]
    # Each round runs every command once, in a new random order: a run pays
    # for what the one before it left to the kernel's asynchronous teardown
    # (a network namespace's, a cgroup's), so a fixed order would favour
    # whichever command always follows the cheapest one.
    rounds = [(airlock, a_times), (BWRAP, b_times), (gated, g_times)]
    if other:
        rounds += [(other, o_times), (other_gated, og_times)]
    shuffle = random.Random(RUNS)
    for _ in range(RUNS):
        shuffle.shuffle(rounds)
        for argv, times in rounds:
            t, _, rss = run(argv, ws)
            times.append(t)
            if argv is airlock:
                a_rss.append(rss)
    load1 = os.getloadavg()[0]
    a, g, b = (statistics.median(x) for x in (a_times, g_times, b_times))
    a9, g9, b9 = (pct(x, 0.9) for x in (a_times, g_times, b_times))
    print(f"spawn: airlock run -- /bin/true   median {a * 1000:.2f} ms  p90 {a9 * 1000:.2f} ms")
    print(f"spawn: airlock run --net gated    median {g * 1000:.2f} ms  p90 {g9 * 1000:.2f} ms")
    print(f"spawn: bwrap --unshare-all true   median {b * 1000:.2f} ms  p90 {b9 * 1000:.2f} ms")
    print(f"spawn: ratio airlock/bwrap p50 {a / b:.2f}x (target <= 0.8x)  "
          f"p90 {a9 / b9:.2f}x (target <= 1.0x)")
    print(f"spawn: ratio gated/bwrap   p50 {g / b:.2f}x  p90 {g9 / b9:.2f}x")
    if o_times:
        o, o9 = statistics.median(o_times), pct(o_times, 0.9)
        print(f"spawn: BENCH_AGAINST {against}: median {o * 1000:.2f} ms  p90 {o9 * 1000:.2f} ms; "
              f"ratio to bwrap p50 {o / b:.2f}x  p90 {o9 / b9:.2f}x")
        og, og9 = statistics.median(og_times), pct(og_times, 0.9)
        print(f"spawn: BENCH_AGAINST --net gated: median {og * 1000:.2f} ms  p90 {og9 * 1000:.2f} ms; "
              f"ratio to bwrap p50 {og / b:.2f}x  p90 {og9 / b9:.2f}x")
    # CPU time moves less than wall time with the other work on a shared
    # machine.
    cpu = {k: statistics.median(v) * 1000 for k, v in CPU.items()}
    ca = cpu[tuple(airlock)]
    line = f"spawn: CPU of the process tree, median: airlock {ca:.2f} ms"
    if other:
        co = cpu[tuple(other)]
        line += f", BENCH_AGAINST {co:.2f} ms (this/against {ca / co:.2f}x)"
        cog = cpu[tuple(other_gated)]
        line += (f", BENCH_AGAINST gated {cog:.2f} ms (this/against gated "
                 f"{cpu[tuple(gated)] / cog:.2f}x)")
    line += f", gated {cpu[tuple(gated)]:.2f} ms, bwrap {cpu[tuple(BWRAP)]:.2f} ms"
    print(line)
    print(f"spawn: {RUNS} runs each, interleaved; load average {load0:.2f} -> {load1:.2f}")
    print(f"spawn: supervisor peak RSS {max(a_rss) / 1024:.1f} MiB")
    hs = host_settings()
    on = [name for _, name, fav in hs if fav]
    print(f"spawn: host: favordynmods on {len(on)} of {len(hs)} cgroup mounts"
          f"{' (' + ', '.join(on) + ')' if on else ''}"
          f"{'; each cgroup v1 move waits for an RCU grace period (airlock doctor)' if hs and not on and any(n != 'cgroup2' for _, n, _ in hs) else ''}")
    if TRACE_RUNS > 0:
        steps, outside = trace_steps(airlock, ws, TRACE_RUNS)
        base = [run(["/bin/true"], ws)[0] * 1e6 for _ in range(TRACE_RUNS)]
        if outside:
            print(f"spawn: outside cli.start..cli.exit median {statistics.median(outside):.0f} us "
                  f"(exec, loader, exit, fork/wait); /bin/true whole "
                  f"{statistics.median(base):.0f} us")
        rows = sorted(steps.items(), key=lambda kv: statistics.median(kv[1][1]))
        slow = sorted((statistics.median(d) for d, _ in steps.values()), reverse=True)
        cut = slow[min(11, len(slow) - 1)] if slow and not show_all else -1
        print(f"spawn: per-step medians over {TRACE_RUNS} traced runs "
              f"(step, +us since the process's previous step, at us)"
              f"{'' if show_all else ', the 12 slowest (--trace: all)'}")
        for name, (d, at) in rows:
            md = statistics.median(d)
            if md >= cut:
                print(f"spawn:   {name:<20} +{md:>7.0f}  at {statistics.median(at):>7.0f}")
    os.rmdir(ws)
    return 0


if __name__ == "__main__":
    sys.exit(main())
