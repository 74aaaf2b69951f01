# SPDX-License-Identifier: Apache-2.0
"""The next prepared process of an idle sandbox (init-warm.c) is forked off
the path of the answer: not right after pid 1 reports an exit, where its
fork and confinement would run beside the supervisor and the daemon that
record and answer that exit, but once pid 1 has had nothing to do for a
millisecond. Read from the per-step trace (AIRLOCK_TRACE): after each
command's exit, the next prepared process is ready no sooner than a
millisecond later, and there is one."""

import re
import time

RUNS = 6
TRACE_LINE = re.compile(r"airlock-trace pid=(\d+) at=\d+us step=(\S+) \+\d+us mono=(\d+)us")


def marks(path):
    out = []
    with open(path) as f:
        for line in f:
            m = TRACE_LINE.search(line)
            if m:
                out.append((int(m.group(3)), m.group(2), int(m.group(1))))
    return sorted(out)


def waiting(m):
    """A prepared process is ready and not yet handed to a request."""
    ready = sum(1 for _, step, _ in m if step == "warm.ready")
    handed = sum(1 for _, step, _ in m if step == "init.warm_handed")
    return ready > handed


def test_next_prepared_process_is_forked_after_an_idle_millisecond(make_daemon, monkeypatch,
                                                                     daemon_base):
    trace = daemon_base / ("refill-trace-%d" % time.monotonic_ns())
    monkeypatch.setenv("AIRLOCK_TRACE", str(trace))
    d = make_daemon()
    api = d.client(d.admin)
    sid = api.create(sandbox_class="small")["id"]
    try:
        for _ in range(RUNS):
            time.sleep(0.05)
            r = api.run(sid, ["true"], timeout=20)
            assert r.exit_code == 0, r.stderr
        # The last exit's replacement too (a loaded machine may be slow):
        # one prepared process more made than handed out.
        end = time.monotonic() + 10
        while time.monotonic() < end and not waiting(marks(trace)):
            time.sleep(0.05)
    finally:
        api.delete(sid)
    m = marks(trace)
    exits = [t for t, step, _ in m if step == "init.cmd_exit"]
    assert len(exits) == RUNS, m
    assert waiting(m), "no prepared process after the last exit: %s" % m
    checked = 0
    for t in exits:
        # pid 1's next fork of a prepared process (init.warm_fork, in pid 1
        # itself: the child's own first step can come late on a loaded
        # machine). None: the one forked while the command still ran (pid 1
        # idle for a millisecond meanwhile) still waits, and this exit made
        # no fork.
        forks = [u for u, step, _ in m if step == "init.warm_fork" and u > t]
        if not forks:
            continue
        # pid 1 waited a millisecond with nothing to do before it forked.
        assert forks[0] - t >= 1000, (forks[0] - t, m)
        checked += 1
    assert checked > 0, "every command outlived a millisecond: nothing to check"
