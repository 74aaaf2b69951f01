# SPDX-License-Identifier: Apache-2.0
"""Sandboxes keep running when the daemon stops, also when it stops while a
status call to a supervisor is still unanswered (as right after a restart,
when every supervisor is asked): the call is cancelled, which says nothing
about the supervisor, so it must not be taken for one that does not answer."""
import os
import signal
import time

from daemonlib import wait_for


def alive(pid):
    """Running, not a zombie waiting to be reaped."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_a_daemon_stopped_while_asking_a_supervisor_leaves_it_running(make_daemon):
    d = make_daemon()
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")["id"]
    sup = d.supervisors()[sb]
    d.kill9()
    # A supervisor that cannot answer yet: the restarted daemon's status
    # call waits on it.
    os.kill(sup, signal.SIGSTOP)
    try:
        d.start()
        time.sleep(0.3)
        d.stop()
    finally:
        os.kill(sup, signal.SIGCONT)
    time.sleep(0.2)
    assert alive(sup), "the daemon's stop killed a supervisor it had only asked for its status"
    assert "destroying it" not in d.log.read_text()
    d.start()
    wait_for(lambda: c.run(sb, ["true"]).exit_code == 0, timeout=15,
             what="the sandbox to answer after the restart")
