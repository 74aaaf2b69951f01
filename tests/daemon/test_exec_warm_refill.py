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
        # The last exit's replacement too (a loaded machine may be slow).
        end = time.monotonic() + 10
        while time.monotonic() < end:
            m = marks(trace)
            last = max((t for t, step, _ in m if step == "init.cmd_exit"), default=None)
            if last and any(step == "warm.ready" and u > last for u, step, _ in m):
                break
            time.sleep(0.05)
    finally:
        api.delete(sid)
    m = marks(trace)
    exits = [t for t, step, _ in m if step == "init.cmd_exit"]
    assert len(exits) == RUNS, m
    checked = 0
    for t in exits:
        ready = [(u, pid) for u, step, pid in m if step == "warm.ready" and u > t]
        assert ready, "no prepared process after the exit at %d: %s" % (t, m)
        # Its first step, right after its fork. One forked while the
        # command still ran (pid 1 idle for a millisecond meanwhile, on a
        # loaded machine) is not the exit's business.
        first = min(u for u, _, pid in m if pid == ready[0][1])
        if first < t:
            continue
        # pid 1 waited a millisecond with nothing to do before it forked.
        assert first - t >= 1000, (first - t, m)
        checked += 1
    assert checked > 0, "every command outlived a millisecond: nothing to check"
