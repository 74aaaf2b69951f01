# SPDX-License-Identifier: Apache-2.0
"""A sandbox never outlives its owner. kill -9 of `airlock run` or of
`airlock supervise` must take the whole tree down within seconds (no process
left in the sandbox's pid namespace or cgroup, also ones that ignore SIGTERM
and SIGHUP), and the next Airlock command must remove the leftover cgroups
and audit the killed run's end exactly once, in a log that still verifies.

Runs as root and as an ordinary user (tests/conftest.py)."""

import json
import os
import signal
import socket
import subprocess
import time

import pytest

DEADLINE = 5.0  # seconds for the tree to die after its owner


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def audit_lines(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def sandbox_init(owner_pid):
    """The sandbox's pid 1: the owner's child that is pid 1 in its namespace."""
    for c in children(owner_pid):
        try:
            with open(f"/proc/{c}/status") as f:
                for line in f:
                    if line.startswith("NSpid:") and line.split()[-1] == "1" and len(line.split()) > 2:
                        return c
        except OSError:
            pass
    return None


def cgroup_dirs(pid, sandbox):
    """The sandbox's cgroup leaves as the host sees them."""
    dirs = set()
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if os.path.basename(path) != f"airlock-{sandbox}":
                continue
            if not ctrls:
                dirs.add(f"/sys/fs/cgroup{path}")
                continue
            for c in [ctrls] + ctrls.split(","):
                d = f"/sys/fs/cgroup/{c}{path}"
                if os.path.isdir(d):
                    dirs.add(d)
    return sorted(dirs)


def in_namespace(ns):
    """Host pids of every process in pid namespace `ns`."""
    found = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{e}/ns/pid") == ns:
                found.append(int(e))
        except OSError:
            pass
    return found


class Sandbox:
    """What identifies a running sandbox from the host, taken before the kill."""

    def __init__(self, owner_pid, sandbox):
        self.id = sandbox
        self.init = wait_for(lambda: sandbox_init(owner_pid), 10, "the sandbox's pid 1")
        self.ns = os.readlink(f"/proc/{self.init}/ns/pid")
        self.cgroups = wait_for(lambda: cgroup_dirs(self.init, sandbox), 5, "the sandbox's cgroups")
        self.members = {}
        for d in self.cgroups:
            with open(f"{d}/cgroup.procs") as f:
                for p in f.read().split():
                    self.members[int(p)] = start_time(int(p))

    def alive(self):
        left = set(in_namespace(self.ns))
        for pid, st in self.members.items():
            if st is not None and start_time(pid) == st:
                left.add(pid)
        return sorted(left)

    def assert_dies(self):
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end and self.alive():
            time.sleep(0.05)
        left = self.alive()
        assert not left, f"still running after its owner died: {left}"


def ends_of(audit, sandbox):
    return [e for e in audit_lines(audit) if e["sandbox"] == sandbox and e["kind"] == "sandbox.destroyed"]


def sweep(airlock, audit):
    """The next `airlock run` finishes what the killed one left."""
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "--audit", audit, "-w", ws, "--", "true"], timeout=30)
    assert p.returncode == 0, p.stderr


def verify(airlock, audit):
    p = airlock.run(["audit", "verify", audit], timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr


def start_run(airlock, script, audit):
    ws = airlock.make_dir()
    argv = airlock.cmd(["run", "-q", "--audit", audit, "-w", ws, "--timeout", "60", "--",
                        "/bin/sh", "-c", script])
    proc = subprocess.Popen(argv, cwd=str(airlock.base), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        started = wait_for(lambda: [e for e in audit_lines(audit) if e["kind"] == "process.started"],
                           10, "process.started in the audit log")
    except AssertionError:
        proc.kill()
        raise AssertionError(proc.communicate(timeout=10)[1].decode())
    return proc, started[0]["sandbox"]


@pytest.mark.parametrize("script", [
    "exec sleep 1000",
    # A tree that ignores the polite signals, with a child in its own session.
    "trap '' TERM HUP INT; (trap '' TERM HUP INT; setsid sleep 1000 & sleep 1000) & sleep 1000",
], ids=["sleep", "stubborn-tree"])
def test_kill_run(airlock, script):
    audit = airlock.make_dir("audit") / "audit.jsonl"
    proc, sandbox = start_run(airlock, script, audit)
    try:
        sb = Sandbox(proc.pid, sandbox)
        assert len(sb.members) >= 2, sb.members  # pid 1 and the command at least
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        sb.assert_dies()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    sweep(airlock, audit)
    left = [d for d in sb.cgroups if os.path.exists(d)]
    assert not left, f"cgroups left: {left}"
    ends = ends_of(audit, sandbox)
    assert len(ends) == 1, ends
    assert ends[0].get("reason") == "owner_died", ends[0]
    # A second sweep does not record it again.
    sweep(airlock, audit)
    assert len(ends_of(audit, sandbox)) == 1
    verify(airlock, audit)


def test_normal_end_is_not_swept(airlock):
    """A run that ended by itself is audited once, by itself."""
    audit = airlock.make_dir("audit") / "audit.jsonl"
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "--audit", audit, "-w", ws, "--", "true"], timeout=30)
    assert p.returncode == 0, p.stderr
    sandbox = audit_lines(audit)[0]["sandbox"]
    sweep(airlock, audit)
    ends = ends_of(audit, sandbox)
    assert len(ends) == 1 and "reason" not in ends[0], ends


def test_kill_supervise(airlock):
    ws = airlock.make_dir()
    run_dir = airlock.make_dir("run")
    audit = airlock.make_dir("audit") / "audit.jsonl"
    pol = airlock.make_dir("policy") / "policy.json"
    pol.write_text(json.dumps({"workspace": {"path": str(ws)}}))
    airlock.chown(pol.parent)
    sandbox = os.urandom(8).hex()
    r, w = os.pipe()
    argv = airlock.cmd(["supervise", "--id", sandbox, "--policy", pol, "--run-dir", run_dir,
                        "--audit", audit, "--ready-fd", str(w)])
    proc = subprocess.Popen(argv, pass_fds=(w,), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(w)
    conn = None
    try:
        with os.fdopen(r) as f:
            ready = f.readline().strip()
        assert ready == "ok", ready + proc.stderr.read().decode() if proc.poll() is not None else ready
        # A process that ignores SIGTERM and SIGHUP, left running.
        conn = socket.socket(socket.AF_UNIX)
        conn.settimeout(10)
        conn.connect(str(run_dir / sandbox / "control.sock"))
        req = {"op": "exec", "argv": ["/bin/sh", "-c", "trap '' TERM HUP; sleep 1000 & sleep 1000"]}
        conn.sendall((json.dumps(req) + "\n").encode())
        conn.recv(4096)
        sb = Sandbox(proc.pid, sandbox)
        wait_for(lambda: len(in_namespace(sb.ns)) >= 3, 10, "the exec'd tree")
        sb.members.update({p: start_time(p) for p in in_namespace(sb.ns)})
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        sb.assert_dies()
    finally:
        if conn:
            conn.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    # The daemon records a supervisor's death; the cgroups are gone after the
    # next sweep whoever runs it.
    sweep(airlock, audit)
    left = [d for d in sb.cgroups if os.path.exists(d)]
    assert not left, f"cgroups left: {left}"
    assert not [e for e in ends_of(audit, sandbox) if e.get("reason") == "owner_died"]
    verify(airlock, audit)


def state_runs(airlock):
    if airlock.user:
        return os.path.join(airlock.user.pw_dir, ".local/state/airlock/runs")
    if os.geteuid() == 0:
        return "/var/lib/airlock/runs"
    return os.path.expanduser("~/.local/state/airlock/runs")


def records(airlock):
    d = state_runs(airlock)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return {}
    out = {}
    for n in names:
        if len(n) == 16:
            try:
                with open(os.path.join(d, n)) as f:
                    out[n] = json.load(f)
            except (OSError, ValueError):
                pass
    return out


def procs_in_cgroup(sandbox):
    found = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/cgroup") as f:
                if f"/airlock-{sandbox}\n" in f.read():
                    found.append(int(e))
        except OSError:
            pass
    return found


def test_kill_run_during_setup(airlock):
    """kill -9 at every stage of a start: nothing of the sandbox survives,
    and every run that got as far as its record is finished once."""
    audit = airlock.make_dir("audit") / "audit.jsonl"
    ws = airlock.make_dir()
    before = set(records(airlock))
    for delay in (0.0, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.08, 0.12, 0.16, 0.2, 0.25):
        proc = subprocess.Popen(
            airlock.cmd(["run", "-q", "--audit", audit, "-w", ws, "--", "sleep", "1000"]),
            cwd=str(airlock.base), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.kill()
        proc.wait(timeout=10)
    # The state root's runs/ is shared with every other airlock on the
    # machine: only this test's runs (its own audit log) are its business.
    killed = {k: v for k, v in records(airlock).items()
              if k not in before and v.get("audit") == str(audit)}
    assert killed, "no kill landed after the run was recorded"
    for sandbox in killed:
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end and procs_in_cgroup(sandbox):
            time.sleep(0.05)
        assert not procs_in_cgroup(sandbox), f"sandbox {sandbox} outlived its owner"

    sweep(airlock, audit)
    assert not set(killed) & set(records(airlock))
    for sandbox, rec in killed.items():
        left = [d for d in rec["cgroups"] if os.path.exists(d)]
        assert not left, f"cgroups left: {left}"
        assert len(ends_of(audit, sandbox)) == 1, (sandbox, audit_lines(audit))
    verify(airlock, audit)
