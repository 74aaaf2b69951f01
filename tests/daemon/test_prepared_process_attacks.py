# SPDX-License-Identifier: Apache-2.0
"""Attacks from inside a sandbox on the processes pid 1 starts for the
host's execs: the prepared process (init-warm.c) and the forked one that
serves a request when there is none. A process inside runs as the same user
and may signal both once they have taken the sandbox's uid. Stopping one
before its execve must not wedge pid 1: the host's exec gets an answer in
bounded time and its timeout still ends it."""

import time

import pytest

from daemonlib import AirlockError

# Every process the caller may signal, again and again: the prepared process
# while it waits and the forked one between its setresuid and its execve.
STOPPER = "while :; do kill -STOP -1 2>/dev/null; done"


def test_stopping_every_process_does_not_wedge_pid1(shared_daemon):
    api = shared_daemon.client(shared_daemon.admin, timeout=20)
    sb = api.create(sandbox_class="small")
    sid = sb["id"]
    try:
        assert api.run(sid, ["true"], timeout=20).exit_code == 0
        api.exec_background(sid, ["sh", "-c", STOPPER])
        time.sleep(0.3)
        # Each exec gets an answer (run, or refused) well within the
        # client's wait; none hangs pid 1 for the ones after it.
        for _ in range(3):
            t0 = time.monotonic()
            try:
                # Stopped after its execve, its timeout ends it.
                r = api.run(sid, ["true"], timeout=1)
                assert r.exit_code is not None
            except AirlockError:
                pass
            # Under the prepared process's 5 s deadline: a stopped one is
            # let go at once, not waited for.
            assert time.monotonic() - t0 < 4, "pid 1 answered late or never"
    finally:
        try:
            api.delete(sid)
        except (AirlockError, OSError):
            pass
