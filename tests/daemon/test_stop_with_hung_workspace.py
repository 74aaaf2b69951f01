# SPDX-License-Identifier: Apache-2.0
"""airlockd stops promptly while a create waits for a host workspace on a
file system that never answers. The reader of the workspace is a forked
copy of the daemon; it must hold nothing of the daemon's but its own pipe,
or the daemon's last step (closing its audit log, whose sync helper ends
when every copy of its socket is closed) waits for the hung reader, which
in turn lives as long as the daemon."""

import signal
import threading
import time


def test_daemon_stops_while_a_workspace_hangs(make_daemon, hung_mount):
    d = make_daemon()

    def create():
        try:
            d.client(d.admin, timeout=10).create(sandbox_class="small", workspace=hung_mount)
        except Exception:  # noqa: BLE001 - the daemon stops under it
            pass

    t = threading.Thread(target=create, daemon=True)
    t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    try:
        d.proc.wait(timeout=5)
    except Exception:  # noqa: BLE001 - reported below
        d.proc.kill()
        d.proc.wait()
        raise AssertionError("airlockd did not stop within 5 s of SIGTERM while a "
                             "workspace read hung")
    assert time.monotonic() - t0 < 5
    t.join(10)
