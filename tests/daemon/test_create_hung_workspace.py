# SPDX-License-Identifier: Apache-2.0
"""A create names a host workspace, and the daemon reads that directory
(is it one, its .airlock/isolation.json). A file system that never
answers (a FUSE mount whose server hangs) must not stall the daemon: the
create is refused within a few seconds and other requests go on being
answered meanwhile. A FIFO named .airlock/isolation.json never blocks."""

import os
import threading
import time

import pytest

def test_hung_workspace_does_not_stall_the_daemon(make_daemon, hung_mount):
    d = make_daemon()
    c = d.client(d.admin, timeout=30)
    result = {}

    def create():
        t0 = time.monotonic()
        try:
            result["sb"] = c.create(sandbox_class="small", workspace=hung_mount)
        except Exception as e:  # noqa: BLE001 - checked below
            result["error"] = e
        result["took"] = time.monotonic() - t0

    t = threading.Thread(target=create, daemon=True)
    t.start()
    time.sleep(0.3)
    other = d.client(d.admin, timeout=3)
    t0 = time.monotonic()
    other.health()
    assert time.monotonic() - t0 < 2.5, "the daemon stalled on a hung workspace"
    t.join(10)
    assert not t.is_alive(), "the create never answered"
    assert "error" in result, result
    e = result["error"]
    assert getattr(e, "status", None) == 504, e
    assert getattr(e, "error", None) == "workspace_unresponsive", e


def test_fifo_config_does_not_block(make_daemon, tmp_path):
    d = make_daemon()
    c = d.client(d.admin, timeout=10)
    ws = tmp_path / "ws"
    (ws / ".airlock").mkdir(parents=True)
    os.mkfifo(ws / ".airlock" / "isolation.json")
    os.chmod(tmp_path, 0o755)
    t0 = time.monotonic()
    with pytest.raises(Exception) as ei:
        c.create(sandbox_class="small", workspace=str(ws))
    assert time.monotonic() - t0 < 5
    assert getattr(ei.value, "status", None) == 400, ei.value
    assert "regular file" in str(getattr(ei.value, "message", ei.value)), ei.value
