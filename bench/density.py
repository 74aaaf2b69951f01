#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Idle density: host memory per idle sandbox, by the drop of MemAvailable
over N sandboxes created through airlockd (each one supervisor process and
the sandbox's init), against N bare namespace trees (`unshare --user --pid
--mount --net --fork sleep`) measured in the same run, interleaved.

BENCH_DENSITY=N sets the count (default 200), BENCH_DENSITY_ROUNDS the
rounds (default 4; the figure is the median). The breakdown (anonymous
memory, page tables, kernel stacks, unreclaimable slab, per-cpu) comes from /proc/meminfo's
deltas over the same span: it is the whole machine's, like MemAvailable, so
other work on the host shows up as noise in both."""

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
N = int(os.environ.get("BENCH_DENSITY", "200"))
ROUNDS = int(os.environ.get("BENCH_DENSITY_ROUNDS", "4"))
DEADLINE = time.monotonic() + float(os.environ.get("BENCH_DENSITY_TIMEOUT", "150"))
FIELDS = ("MemAvailable", "AnonPages", "PageTables", "KernelStack", "SUnreclaim", "Percpu")
TARGET_MIB = 1.0

sys.path.insert(0, os.path.join(REPO, "clients/python"))
from airlock_client import Client  # noqa: E402


class Timeout(Exception):
    pass


def check_time(what):
    if time.monotonic() > DEADLINE:
        raise Timeout("density: out of time while %s (BENCH_DENSITY_TIMEOUT)" % what)


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            if k in FIELDS:
                out[k] = int(v.split()[0]) * 1024
    return out


def settle(quiet=False):
    """Let deferred frees (RCU, per-cpu caches, exited tasks) land, then
    read meminfo three times and keep each field's median. With quiet, first
    wait (at most 5 s) for MemAvailable to stop moving: the namespaces of
    trees torn down just before are freed by the kernel in the background,
    and that must not count against the next measurement."""
    subprocess.run(["sync"], check=False)
    time.sleep(1.5)
    if quiet:
        end = time.monotonic() + 5
        last = []
        while time.monotonic() < end:
            last = (last + [meminfo()["MemAvailable"]])[-5:]
            if len(last) == 5 and max(last) - min(last) < N * 8192:
                break
            time.sleep(0.25)
    reads = []
    for _ in range(3):
        reads.append(meminfo())
        time.sleep(0.2)
    return {k: statistics.median(r[k] for r in reads) for k in FIELDS}


class ChargeGroup:
    """A memory cgroup of our own below ours: what it charges (anonymous
    memory, page tables, kernel stacks and the kernel objects allocated on
    its members' behalf; the sandboxes' own cgroups are below it) is this
    benchmark's alone, free of the rest of the host's noise, though not all
    kernel memory is charged. The daemon's growth is in it too."""

    def __init__(self, name):
        self.dir = self.usage = None
        try:
            with open("/proc/self/cgroup") as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for line in lines:
            _, ctrls, path = line.split(":", 2)
            if "memory" in ctrls.split(","):
                root, usage = "/sys/fs/cgroup/memory", "memory.usage_in_bytes"
            elif ctrls == "" and os.path.exists("/sys/fs/cgroup/memory.stat"):
                root, usage = "/sys/fs/cgroup", "memory.current"
            else:
                continue
            d = os.path.join(root + path.rstrip("/"), name)
            try:
                os.mkdir(d)
            except OSError:
                continue
            self.dir, self.usage = d, os.path.join(d, usage)
            return

    def join(self):
        """For preexec_fn: move the calling process in."""
        if self.dir:
            with open(os.path.join(self.dir, "cgroup.procs"), "w") as f:
                f.write("0")

    def charged(self):
        """Bytes charged, less the page cache (files written, reclaimable)."""
        if not self.usage:
            return None
        with open(self.usage) as f:
            used = int(f.read())
        v1 = self.usage.endswith("usage_in_bytes")
        keys = ("total_active_file", "total_inactive_file") if v1 else ("active_file", "inactive_file")
        with open(os.path.join(self.dir, "memory.stat")) as f:
            for line in f:
                k, v = line.split()
                if k in keys:
                    used -= int(v)
        return used

    def remove(self):
        if not self.dir:
            return
        for _ in range(50):
            try:
                for top, subdirs, _ in os.walk(self.dir, topdown=False):
                    for sd in subdirs:
                        os.rmdir(os.path.join(top, sd))
                os.rmdir(self.dir)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


class Trees:
    """N bare namespace trees, each `unshare` + its forked `sleep`."""

    def __init__(self, cg):
        self.procs = []
        self.cg = cg

    def start(self, n):
        for _ in range(n):
            check_time("starting the reference trees")
            self.procs.append(subprocess.Popen(
                ["unshare", "--user", "--pid", "--mount", "--net", "--fork", "sleep", "600"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=self.cg.join))
        # Ready when each has forked its sleep (its child in the new pid ns).
        for p in self.procs:
            while True:
                check_time("waiting for the reference trees")
                try:
                    with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                        if f.read().strip():
                            break
                except OSError:
                    pass
                if p.poll() is not None:
                    raise RuntimeError("density: unshare exited with %d" % p.returncode)
                time.sleep(0.01)

    def stop(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.procs:
            p.wait()
        self.procs = []


class Daemon:
    """airlockd on a private socket, state and run directory under base."""

    def __init__(self, base, n, cg):
        self.base = base
        self.run_dir = os.path.join(base, "run")
        self.sock = os.path.join(base, "d.sock")
        self.ids = []
        self.cgdirs = set()
        state = os.path.join(base, "state")
        tok = subprocess.run([AIRLOCK, "grant", "create", "--name", "bench", "--allow-sandbox",
                              "--state-dir", state],
                             check=True, capture_output=True, text=True, timeout=30).stdout.strip()
        self.proc = subprocess.Popen(
            [AIRLOCKD, "--quiet", "--socket", self.sock, "--state-dir", state, "--run-dir",
             self.run_dir, "--audit", os.path.join(base, "audit.jsonl"), "--airlock", AIRLOCK,
             "--max-sandboxes", str(n + 10)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=cg.join)
        self.c = Client(socket_path=self.sock, token=tok, timeout=60)
        while True:
            check_time("starting airlockd")
            try:
                self.c.health()
                break
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("density: airlockd exited with %d" % self.proc.returncode)
                time.sleep(0.05)

    def create(self, n):
        try:
            for _ in range(n):
                check_time("creating sandboxes")
                self.ids.append(self.c.create(sandbox_class="small")["id"])
        finally:
            self.note_cgroups()

    def note_cgroups(self):
        """Where the sandboxes' cgroups are (their inits' own), so that
        they can be removed if their supervisors have to be killed."""
        for pid in self.supervisors():
            try:
                with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                    for child in f.read().split():
                        self.cgdirs |= {d for d in cgroup_dirs(int(child))
                                        if os.path.basename(d).startswith("airlock-")}
            except (OSError, ValueError):
                pass

    def supervisors(self):
        pids = []
        for i in os.listdir(self.run_dir) if os.path.isdir(self.run_dir) else []:
            try:
                with open(os.path.join(self.run_dir, i, "supervisor.json")) as f:
                    pids.append(json.load(f)["pid"])
            except (OSError, ValueError, KeyError):
                pass
        return pids

    def destroy(self):
        for i in self.ids:
            if time.monotonic() > DEADLINE + 30:
                break
            try:
                self.c.delete(i)
            except Exception:  # noqa: BLE001 -- the fallback below kills it
                pass
        self.ids = []

    def stop(self):
        """Destroy every sandbox, stop the daemon; whatever is left after
        that (a supervisor the daemon could not stop) is killed, which takes
        its sandbox with it."""
        try:
            if self.proc.poll() is None:
                self.destroy()
        finally:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            killed = []
            for pid in self.supervisors():
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
            # A killed supervisor takes its sandbox with it but leaves its
            # cgroups: remove them once their processes are gone.
            end = time.monotonic() + 10
            for d in sorted(self.cgdirs, key=len, reverse=True):
                while os.path.isdir(d):
                    try:
                        os.rmdir(d)
                    except OSError:
                        if time.monotonic() > end:
                            break
                        time.sleep(0.05)
            self.cgdirs = set()


def footprint(pids, children=True):
    """Anonymous memory and page tables of the given processes and their
    children (the sandbox's init), by smaps_rollup's Pss_Anon."""
    anon = pte = 0
    seen = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Pss_Anon:"):
                        anon += int(line.split()[1]) * 1024
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmPTE:"):
                        pte += int(line.split()[1]) * 1024
            if children:
                with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return anon, pte


def mib(b):
    return b / 2**20


def on_term(signum, frame):
    # Once: the clean-up that follows must not be cut short by another.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Timeout("density: stopped by signal %d" % signum)


def cgroup_mounts():
    """{controller (or "" for cgroup2): mount point}, from mountinfo."""
    out = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, post = line.split(" - ", 1)
            fstype, _, opts = post.split()[:3]
            if fstype == "cgroup2":
                out[""] = pre.split()[4]
            elif fstype == "cgroup":
                for o in opts.split(","):
                    if o not in ("rw", "ro") and "=" not in o or o.startswith("name="):
                        out[o] = pre.split()[4]
    return out


def cgroup_dirs(pid):
    """The directories of pid's cgroups, one per hierarchy."""
    mounts, dirs = cgroup_mounts(), set()
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in (ctrls.split(",") if ctrls else [""]):
                if c in mounts:
                    dirs.add(mounts[c] + path.rstrip("/"))
                    break
    return dirs


def main():
    signal.signal(signal.SIGTERM, on_term)
    if os.geteuid() != 0:
        print("bench: density: needs root", file=sys.stderr)
        return 1
    if not shutil.which("unshare"):
        print("bench: density: needs unshare(1) for the reference", file=sys.stderr)
        return 1
    base = tempfile.mkdtemp(prefix="airlock-bench-density-")
    groups, daemons, trees = [], [], []
    ref, al, ref_cg, al_cg, deltas, procs, grew = [], [], [], [], [], [], []
    try:
        for r in range(ROUNDS):
            # The reference: bare namespace trees.
            cg = ChargeGroup("airlock-bench-density-%d-ref%d" % (os.getpid(), r))
            groups.append(cg)
            t = Trees(cg)
            trees.append(t)
            m0, c0 = settle(quiet=True), cg.charged()
            t.start(N)
            m1, c1 = settle(), cg.charged()
            t.stop()
            ref.append((m0["MemAvailable"] - m1["MemAvailable"]) / N)
            if c0 is not None:
                ref_cg.append((c1 - c0) / N)

            # Airlock: N idle sandboxes through the daemon, which is started
            # before the first reading (its own start is not the sandboxes').
            cg = ChargeGroup("airlock-bench-density-%d-%d" % (os.getpid(), r))
            groups.append(cg)
            d = Daemon(os.path.join(base, str(r)), N, cg)
            daemons.append(d)
            m0, c0 = settle(quiet=True), cg.charged()
            d0 = footprint([d.proc.pid], children=False)[0]
            t0 = time.monotonic()
            d.create(N)
            made = time.monotonic() - t0
            m1, c1 = settle(), cg.charged()
            grew.append((footprint([d.proc.pid], children=False)[0] - d0) / N)
            procs.append(footprint(d.supervisors()))
            al.append((m0["MemAvailable"] - m1["MemAvailable"]) / N)
            if c0 is not None:
                al_cg.append((c1 - c0) / N)
            deltas.append({k: (m1[k] - m0[k]) / N for k in FIELDS if k != "MemAvailable"})
            d.stop()
            print("density: round %d: %d sandboxes created in %.1f s; MemAvailable drop %.2f MiB "
                  "each, reference %.2f MiB each" % (r + 1, N, made, mib(al[-1]), mib(ref[-1])))
        a, rf = statistics.median(al), statistics.median(ref)
        runs = lambda v: " ".join("%.2f" % mib(x) for x in v)  # noqa: E731
        print("density: reference: unshare --user --pid --mount --net --fork sleep: %.2f MiB "
              "per tree (MemAvailable drop over %d, median of %d runs: %s)"
              % (mib(rf), N, ROUNDS, runs(ref)))
        print("density: idle sandbox through airlockd: %.2f MiB per sandbox (runs: %s)  ratio %.2fx"
              % (mib(a), runs(al), a / rf))
        if al_cg and ref_cg:
            ac, rc = statistics.median(al_cg), statistics.median(ref_cg)
            print("density: charged to a memory cgroup of the benchmark's own, page cache "
                  "aside (not all kernel memory is charged): sandbox %.2f MiB, reference %.2f MiB  ratio %.2fx"
                  % (mib(ac), mib(rc), ac / rc))
        br = {k: statistics.median(x[k] for x in deltas) for k in deltas[0]}
        pa = statistics.median(p[0] for p in procs) / N
        pp = statistics.median(p[1] for p in procs) / N
        print("density: per sandbox (host-wide deltas, medians): anon %.0f KiB (supervisor + init "
              "Pss_Anon %.0f KiB), page tables %.0f KiB (VmPTE %.0f KiB), kernel stacks %.0f KiB, "
              "unreclaimable slab %.0f KiB, per-cpu %.0f KiB; sum %.2f MiB; the daemon's own "
              "growth %.0f KiB"
              % (br["AnonPages"] / 1024, pa / 1024, br["PageTables"] / 1024, pp / 1024,
                 br["KernelStack"] / 1024, br["SUnreclaim"] / 1024, br["Percpu"] / 1024,
                 mib(sum(br.values())), statistics.median(grew) / 1024))
        print("density: idle sandbox target <= %.1f MiB: %.2f MiB" % (TARGET_MIB, mib(a)))
    except Timeout as e:
        print("bench: %s" % e, file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for t in trees:
            t.stop()
        for d in daemons:
            d.stop()
        for cg in groups:
            cg.remove()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
