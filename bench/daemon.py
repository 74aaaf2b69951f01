#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Daemon benchmark, through the API: create + exec(`true`) + destroy,
cold and from the warm pool, against `airlock run -- /bin/true` measured in
the same run, interleaved; then the memory of idle sandboxes (supervisor RSS
plus what the sandbox's cgroup charges)."""

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, os.environ.get("AIRLOCK_BUILD", "build"))
AIRLOCK = os.path.join(BUILD, "src/cli/airlock")
AIRLOCKD = os.path.join(BUILD, "src/daemon/airlockd")
RUNS = int(os.environ.get("BENCH_RUNS", "100"))
IDLE = int(os.environ.get("BENCH_IDLE", "100"))

sys.path.insert(0, os.path.join(REPO, "clients/python"))
from airlock_client import Client  # noqa: E402


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * p))]


class Daemon:
    def __init__(self, base, *args):
        self.base = base
        self.sock = os.path.join(base, "d.sock")
        state = os.path.join(base, "state")
        tok = subprocess.run([AIRLOCK, "grant", "create", "--name", "bench", "--allow-sandbox",
                              "--allow-exec", "--state-dir", state],
                             check=True, capture_output=True, text=True).stdout.strip()
        self.proc = subprocess.Popen(
            [AIRLOCKD, "--quiet", "--socket", self.sock, "--state-dir", state, "--run-dir",
             os.path.join(base, "run"), "--audit", os.path.join(base, "audit.jsonl"),
             "--airlock", AIRLOCK, "--max-sandboxes", str(IDLE + 50)] + list(args),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.c = Client(socket_path=self.sock, token=tok, timeout=300)
        end = time.monotonic() + 30
        while True:
            try:
                self.c.health()
                break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)

    def pool_ready(self):
        for line in self.c.metrics().splitlines():
            if line.startswith("airlock_pool_ready "):
                return int(float(line.split()[1]))
        return 0

    def stop(self):
        """Destroy what is left, pooled ones included (a restart without
        --pool lets them go), and stop."""
        if self.proc.poll() is not None:
            return
        try:
            for sb in self.c.list(state="running"):
                self.c.delete(sb["id"])
        finally:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait()


def one_shot(ws):
    t0 = time.perf_counter()
    subprocess.run([AIRLOCK, "run", "-q", "-w", ws, "--", "/bin/true"], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def cycle(c, wait_pool=None):
    """create + exec(true), then destroy; returns the two times."""
    if wait_pool:
        end = time.monotonic() + 30
        while wait_pool() < 1 and time.monotonic() < end:
            time.sleep(0.005)
    t0 = time.perf_counter()
    sb = c.create(sandbox_class="small")
    r = c.run(sb["id"], ["true"])
    t1 = time.perf_counter()
    c.delete(sb["id"])
    t2 = time.perf_counter()
    assert r.exit_code == 0, r
    return t1 - t0, t2 - t1


def cgroup_memory(pid, sid):
    """Bytes the sandbox's memory cgroup charges (v2 or v1)."""
    with open("/proc/%d/cgroup" % pid) as f:
        lines = f.read().splitlines()
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if ctrls == "":
            p = "/sys/fs/cgroup%s/airlock-%s/memory.current" % (path.rstrip("/"), sid)
            if os.path.exists(p):
                return int(open(p).read())
        if "memory" in ctrls.split(","):
            p = "/sys/fs/cgroup/memory%s/airlock-%s/memory.usage_in_bytes" % (path.rstrip("/"), sid)
            if os.path.exists(p):
                return int(open(p).read())
    return 0


def rss(pid, field="Rss:"):
    """Rss, or Pss (shared pages divided among their users), in bytes."""
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def main():
    if os.geteuid() != 0:
        print("bench: daemon: needs root", file=sys.stderr)
        return 1
    base = tempfile.mkdtemp(prefix="airlock-bench-daemon-")
    ws = tempfile.mkdtemp(prefix="airlock-bench-ws-")
    cold = warm = None
    try:
        os.makedirs(os.path.join(base, "cold"))
        cold = Daemon(os.path.join(base, "cold"))
        warm_dir = os.path.join(base, "warm")
        os.makedirs(warm_dir)
        warm = Daemon(warm_dir, "--pool", "small=4")
        for _ in range(5):
            cycle(cold.c)
            one_shot(ws)
        ref, c_ce, c_d, w_ce, w_d = [], [], [], [], []
        t_cold = t_warm = 0.0
        for _ in range(RUNS):
            ref.append(one_shot(ws))
            a, b = cycle(cold.c)
            c_ce.append(a)
            c_d.append(b)
            t_cold += a + b
            a, b = cycle(warm.c, warm.pool_ready)
            w_ce.append(a)
            w_d.append(b)
            t_warm += a + b
        r = statistics.median(ref)
        print("daemon: airlock run -- /bin/true            p50 %.2f ms  p99 %.2f ms (reference)"
              % (r * 1e3, pct(ref, 0.99) * 1e3))
        for name, ce, d, t in (("cold", c_ce, c_d, t_cold), ("warm", w_ce, w_d, t_warm)):
            print("daemon: %s create + exec(true)            p50 %.2f ms  p99 %.2f ms  ratio %.2fx"
                  % (name, statistics.median(ce) * 1e3, pct(ce, 0.99) * 1e3,
                     statistics.median(ce) / r))
            print("daemon: %s destroy                        p50 %.2f ms  p99 %.2f ms"
                  % (name, statistics.median(d) * 1e3, pct(d, 0.99) * 1e3))
            print("daemon: %s create+exec+destroy throughput %.1f/s (one client)"
                  % (name, RUNS / t))
        print("daemon: warm-pool create + exec p50 target < 5 ms: %.2f ms"
              % (statistics.median(w_ce) * 1e3))
        warm.stop()

        # Idle sandboxes.
        t0 = time.perf_counter()
        ids = [cold.c.create(sandbox_class="small")["id"] for _ in range(IDLE)]
        made = time.perf_counter() - t0
        sups = {}
        rund = os.path.join(base, "cold", "run")
        for i in ids:
            with open(os.path.join(rund, i, "supervisor.json")) as f:
                sups[i] = json.load(f)["pid"]
        sup_rss = [rss(sups[i]) for i in ids]
        sup_pss = [rss(sups[i], "Pss:") for i in ids]
        cg = [cgroup_memory(sups[i], i) for i in ids]
        per = [a + b for a, b in zip(sup_pss, cg)]
        print("daemon: %d idle sandboxes created in %.1f s; all answer: %s"
              % (IDLE, made, all(cold.c.run(i, ["true"]).exit_code == 0 for i in ids[:10])))
        print("daemon: per idle sandbox (median): supervisor RSS %.2f MiB, PSS %.2f MiB; "
              "sandbox cgroup %.2f MiB; PSS + cgroup %.2f MiB; daemon RSS %.1f MiB"
              % (statistics.median(sup_rss) / 2**20, statistics.median(sup_pss) / 2**20,
                 statistics.median(cg) / 2**20, statistics.median(per) / 2**20,
                 rss(cold.proc.pid) / 2**20))
        cold.stop()
    finally:
        for d in (warm, cold):
            if d:
                d.stop()
        if warm:
            # Its pool: a daemon without --pool destroys pooled sandboxes.
            warm.proc = subprocess.Popen(warm.proc.args[:-2], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
            end = time.monotonic() + 30
            while os.listdir(os.path.join(base, "warm", "run")) and time.monotonic() < end:
                time.sleep(0.05)
            warm.proc.send_signal(signal.SIGTERM)
            warm.proc.wait()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
