# SPDX-License-Identifier: Apache-2.0
"""What limits.io does to buffered writes, as docs/policy.md says: on cgroup
v2 (memory and io enabled together) their writeback is charged to the
sandbox and throttled; on cgroup v1 it is not (the kernel's flusher writes
them outside the sandbox's cgroup). Each side runs where its hierarchy is;
if the kernel's behaviour changes, this fails and the docs must change."""

import os
import time

import pytest

from test_limits_io import EXPECTED_S, MIB, SIZE_MIB, root_only, throttleable_workspace

V2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
# Buffered, then flushed by sync(1), whose writing the kernel's flusher
# threads do: v2 throttles it (the dirty pages belong to the sandbox's
# cgroup), v1 does not. (An fsync writes from the caller's own context and
# is throttled on v1 too: test_v1_fsync_is_throttled.)
DD = f"dd if=/dev/zero of=out bs=1M count={SIZE_MIB} 2>&1 && sync"
FSYNC = f"dd if=/dev/zero of=out bs=1M count={SIZE_MIB} conv=fsync 2>&1"


def timed(airlock, ws, script=DD):
    t0 = time.monotonic()
    p, res = airlock.result(["-q", "-w", ws, "--io-write-bps", "5M", "--", "/bin/sh", "-c",
                             script], timeout=60)
    return time.monotonic() - t0, p, res


def test_v1_buffered_writes_are_not_throttled(airlock):
    root_only(airlock)
    if V2:
        pytest.skip("cgroup v2 host: see test_v2_buffered_writes_are_throttled")
    with throttleable_workspace(airlock) as ws:
        took, p, res = timed(airlock, ws)
        assert p.returncode == 0, p.stderr
        assert took / EXPECTED_S < 0.5, f"{took:.2f}s: v1 throttled buffered writes: {p.stdout}"
        # Nor are they counted as the sandbox's.
        assert res["usage"]["ioWriteBytes"] < SIZE_MIB * MIB, res["usage"]


def test_v2_buffered_writes_are_throttled(airlock):
    root_only(airlock)
    if not V2:
        pytest.skip("cgroup v1 host: buffered writeback is not charged to a v1 blkio cgroup")
    with throttleable_workspace(airlock) as ws:
        took, p, res = timed(airlock, ws)
        assert p.returncode == 0, p.stderr
        assert took / EXPECTED_S >= 0.6, f"{took:.2f}s: {p.stdout}"


def test_v1_fsync_is_throttled(airlock):
    root_only(airlock)
    if V2:
        pytest.skip("cgroup v2 host: every flush is throttled there")
    with throttleable_workspace(airlock) as ws:
        took, p, res = timed(airlock, ws, FSYNC)
        assert p.returncode == 0, p.stderr
        assert took / EXPECTED_S >= 0.6, f"{took:.2f}s: {p.stdout}"
        assert res["usage"]["ioWriteBytes"] >= SIZE_MIB * MIB, res["usage"]
