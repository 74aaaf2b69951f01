# SPDX-License-Identifier: Apache-2.0
"""The daemon's sandbox record: the class's limits (the design's table) and
the usage the supervisor counts (block I/O bytes, network bytes)."""

import os

from daemonlib import wait_for


def test_class_values_in_the_record(api):
    sb = api.create(sandbox_class="small")
    try:
        lim = sb["limits"]
        assert lim["memory"] == 256 << 20 and lim["cpuTime"] == 30 and lim["timeout"] == 300, lim
    finally:
        api.delete(sb["id"])


def test_record_usage_counts_block_io(api):
    if os.geteuid() != 0 or not os.path.isdir("/sys/fs/cgroup/blkio") and \
            not os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        import pytest
        pytest.skip("no blkio/io controller to count with")
    sb = api.create(sandbox_class="small")
    try:
        r = api.run(sb["id"], ["sh", "-c", "dd if=/dev/zero of=/workspace/f bs=1M count=2 "
                                           "oflag=direct 2>&1"])
        assert r.exit_code == 0, r.stdout

        def written():
            u = api.get(sb["id"]).get("usage") or {}
            return (u.get("ioWriteBytes") or 0) >= 2 << 20
        wait_for(written, timeout=20, what="ioWriteBytes in the record")
        assert "bytesUp" in api.get(sb["id"])["network"]
    finally:
        api.delete(sb["id"])
