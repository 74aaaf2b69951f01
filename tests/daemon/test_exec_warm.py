# SPDX-License-Identifier: Apache-2.0
"""An idle sandbox's pid 1 keeps one process ready for the next exec, already
confined (session, descriptors, limits, uid, no_new_privs, Landlock, no
capabilities, the seccomp filter), waiting only for argv, env, cwd and stdio.
It is used once and replaced. These tests check that it is used, that what
it runs is exactly what a forked process would run (options honoured,
confinement whole, nothing left over from before), and that a process inside
that kills or stops it costs nothing but the speed-up."""

import os
import time

import pytest

from daemonlib import AirlockError

CLK_TCK = 100


def ages(api, sid, **kw):
    """(age in seconds of the exec'd process when it ran, its pid)."""
    r = api.run(sid, ["sh", "-c", "cat /proc/$$/stat /proc/uptime"], timeout=20, **kw)
    assert r.exit_code == 0, r.stderr
    stat, uptime = r.stdout.decode().splitlines()[:2]
    fields = stat.rsplit(")", 1)[1].split()
    start = int(fields[19]) / CLK_TCK
    return float(uptime.split()[0]) - start, int(stat.split()[0])


def status(api, sid, **kw):
    """The exec'd process's /proc status, and (a second exec) the
    descriptors a shell finds open when it starts."""
    r = api.run(sid, ["cat", "/proc/self/status"], timeout=20, **kw)
    assert r.exit_code == 0, r.stderr
    out = {}
    for line in r.stdout.decode().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    r = api.run(sid, ["sh", "-c", "ls /proc/$$/fd"], timeout=20, **kw)
    assert r.exit_code == 0, r.stderr
    out["fds"] = " ".join(r.stdout.decode().split())
    return out


def check_confined(st):
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[k], 16) == 0, (k, st[k])
    assert st["NoNewPrivs"] == "1", st["NoNewPrivs"]
    assert st["Seccomp"] == "2", st["Seccomp"]
    for k in ("SigBlk", "SigIgn", "SigCgt", "SigPnd", "ShdPnd"):
        assert int(st[k], 16) == 0, (k, st[k])
    # stdio only: the channel to pid 1 and the received descriptors are
    # gone (ls's own directory descriptor is not in $$'s list).
    assert st["fds"].split() == ["0", "1", "2"], st["fds"]


def test_exec_is_served_by_a_prepared_process(api, sandbox):
    sid = sandbox["id"]
    api.run(sid, ["true"], timeout=20)
    seen = set()
    for _ in range(2):
        time.sleep(0.6)
        age, pid = ages(api, sid)
        # Forked before the request: it waited, ready, since the last one.
        assert age >= 0.4, age
        seen.add(pid)
    assert len(seen) == 2, "each exec is a fresh process"


def test_prepared_process_is_confined_and_clean(api, sandbox):
    sid = sandbox["id"]
    for i in range(3):
        time.sleep(0.05)
        st = status(api, sid, env={"ONLY_ONCE": str(i)} if i == 0 else None)
        check_confined(st)


def test_prepared_process_honours_every_option(api, sandbox):
    sid = sandbox["id"]
    api.run(sid, ["true"], timeout=20)
    time.sleep(0.1)
    r = api.run(sid, ["sh", "-c", "pwd; echo $FOO; echo ${ONLY_ONCE:-unset}; cat; id -u"],
                env={"FOO": "bar"}, cwd="/tmp", stdin=b"from-stdin\n", timeout=20)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.decode().split() == ["/tmp", "bar", "unset", "from-stdin",
                                         r.stdout.decode().split()[-1]], r.stdout
    time.sleep(0.1)
    # Nothing of the previous request reaches the next one.
    r = api.run(sid, ["sh", "-c", "echo ${FOO:-unset}; pwd"], timeout=20)
    assert r.stdout.decode().split()[0] == "unset", r.stdout
    assert r.stdout.decode().split()[1] != "/tmp", r.stdout
    # A command that is not there, and one whose directory is not.
    r = api.run(sid, ["/nonexistent/cmd"], timeout=20)
    assert r.exit_code == 127, (r.exit_code, r.stderr)
    r = api.run(sid, ["true"], cwd="/nonexistent", timeout=20)
    assert r.exit_code == 125, (r.exit_code, r.stderr)
    assert api.run(sid, ["true"], timeout=20).exit_code == 0


FIND = ("for p in /proc/[0-9]*; do n=${p#/proc/}; [ $n = 1 ] && continue; "
        "[ \"$(cat $p/comm 2>/dev/null)\" = airlock-init ] && echo $n; done")


def test_killing_or_stopping_the_prepared_process(api, sandbox):
    # A process inside sees the waiting one (same user) and may signal it:
    # the next exec still runs, on time, and nothing it sent reaches a
    # command.
    sid = sandbox["id"]
    api.run(sid, ["true"], timeout=20)
    for sig in ("TERM", "STOP", "USR1", "KILL"):
        time.sleep(0.2)
        r = api.run(sid, ["sh", "-c", "sleep 0.2; " + FIND + " | while read w; do kill -%s $w && echo hit; done" % sig],
                    timeout=20)
        assert b"hit" in r.stdout, (sig, r.stdout, r.stderr)
        time.sleep(0.1)
        t0 = time.monotonic()
        st = status(api, sid)
        assert time.monotonic() - t0 < 3, sig
        check_confined(st)
    # Once the one killed has been replaced, the prepared path is back.
    api.run(sid, ["true"], timeout=20)
    time.sleep(0.6)
    assert ages(api, sid)[0] >= 0.4


def sandbox_pid1(supervisor):
    """The host pid of the sandbox's pid 1: the supervisor's child that is
    pid 1 of a namespace of its own."""
    for tid in os.listdir("/proc/%d/task" % supervisor):
        try:
            kids = open("/proc/%d/task/%s/children" % (supervisor, tid)).read().split()
        except OSError:
            continue
        for k in kids:
            for line in open("/proc/%s/status" % k):
                if line.startswith("NSpid:") and line.split()[-1] == "1":
                    return int(k)
    raise AssertionError("no pid 1 under supervisor %d" % supervisor)


def wakeups(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


def pids_dir(pid):
    """The pids controller's directory of pid's cgroup (v1 or v2)."""
    v2 = None
    for line in open("/proc/%d/cgroup" % pid):
        _, ctrls, path = line.strip().split(":", 2)
        if "pids" in ctrls.split(","):
            return "/sys/fs/cgroup/pids" + path
        if ctrls == "":
            v2 = "/sys/fs/cgroup" + path
    return v2


def test_no_retry_loop_when_the_sandbox_is_out_of_processes(shared_daemon, api):
    # No process slot left: pid 1 cannot fork the next prepared process
    # after an exec, and must not try again every millisecond.
    sb = api.create(sandbox_class="small", policy={"limits": {"pids": 64}})
    sid = sb["id"]
    limit = None
    try:
        api.run(sid, ["true"], timeout=20)
        time.sleep(0.3)
        pid1 = sandbox_pid1(shared_daemon.supervisors()[sid])
        d = pids_dir(pid1)
        if not d or not os.path.exists(d + "/pids.max"):
            pytest.skip("no pids controller for the sandbox")
        limit = d + "/pids.max"
        # One below what is there: the prepared process's slot, once it has
        # run the next command, is not to be had again.
        with open(limit, "w") as f:
            f.write(str(int(open(d + "/pids.current").read()) - 1))
        # Served by the prepared process; the one after it cannot be made.
        assert api.run(sid, ["true"], timeout=20).exit_code == 0
        time.sleep(0.3)
        before = wakeups(pid1)
        time.sleep(1.0)
        woke = wakeups(pid1) - before
        assert woke < 100, "pid 1 woke %d times in a second" % woke
    finally:
        if limit:
            with open(limit, "w") as f:
                f.write("64")
        try:
            api.delete(sid)
        except (AirlockError, OSError):
            pass


def test_no_prepared_process_for_a_low_pids_limit(api):
    # limits.pids counts it: a sandbox held to a few processes gets none.
    sb = api.create(sandbox_class="small", policy={"limits": {"pids": 8}})
    try:
        api.run(sb["id"], ["true"], timeout=20)
        time.sleep(0.6)
        r = api.run(sb["id"], ["sh", "-c", "sleep 0.2; " + FIND], timeout=20)
        assert r.stdout.strip() == b"", r.stdout
        assert ages(api, sb["id"])[0] < 0.4
    finally:
        try:
            api.delete(sb["id"])
        except (AirlockError, OSError):
            pass
