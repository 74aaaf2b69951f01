# SPDX-License-Identifier: Apache-2.0
"""A create that names a host workspace on a file system that never
answers waits for it off the daemon's loop: while it waits (up to 2 s,
then 504), every other request is answered at once, not after the wait."""

import threading
import time


def test_other_requests_do_not_wait_for_a_hung_workspace(make_daemon, hung_mount):
    d = make_daemon()
    results = []

    def create():
        c = d.client(d.admin, timeout=30)
        try:
            c.create(sandbox_class="small", workspace=hung_mount)
            results.append(None)
        except Exception as e:  # noqa: BLE001 - checked below
            results.append(e)

    threads = [threading.Thread(target=create, daemon=True) for _ in range(2)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(0.3)
    other = d.client(d.admin, timeout=5)
    took = []
    for _ in range(3):
        t1 = time.monotonic()
        other.health()
        took.append(time.monotonic() - t1)
    assert max(took) < 0.7, f"requests waited for the hung workspace: {took}"
    for t in threads:
        t.join(10)
        assert not t.is_alive(), "a create never answered"
    # Two hung creates wait side by side, not one after the other.
    assert time.monotonic() - t0 < 3.8, time.monotonic() - t0
    for e in results:
        assert getattr(e, "status", None) == 504, e
        assert getattr(e, "error", None) == "workspace_unresponsive", e
