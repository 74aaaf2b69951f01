# SPDX-License-Identifier: Apache-2.0
"""GET /v1/approvals asks each of the grant's sandboxes' supervisors. One
that does not answer (stopped, hung) is given up after its bound, but the
daemon's loop must not wait for it meanwhile: every other request, of
every grant, is answered at once."""

import os
import signal
import threading
import time


def test_approvals_of_hung_supervisors_do_not_stall_the_daemon(make_daemon):
    d = make_daemon()
    c = d.client(d.admin, timeout=30)
    ids = [c.create(sandbox_class="small")["id"] for _ in range(2)]
    sups = d.supervisors()
    stopped = [sups[i] for i in ids]
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:
        result = {}

        def listing():
            t0 = time.monotonic()
            try:
                result["list"] = c.approvals()
            except Exception as e:  # noqa: BLE001 - checked below
                result["error"] = e
            result["took"] = time.monotonic() - t0

        t = threading.Thread(target=listing, daemon=True)
        t.start()
        time.sleep(0.3)
        other = d.client(d.admin, timeout=10)
        took = []
        for _ in range(3):
            t1 = time.monotonic()
            other.health()
            took.append(time.monotonic() - t1)
        assert max(took) < 0.7, f"requests waited for hung supervisors: {took}"
        t.join(10)
        assert not t.is_alive(), "the listing never answered"
        assert "error" not in result, result
        # The two are asked side by side, each within its own bound.
        assert result["took"] < 3.5, result
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    for i in ids:
        c.delete(i)
