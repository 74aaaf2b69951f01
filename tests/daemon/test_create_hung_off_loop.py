# SPDX-License-Identifier: Apache-2.0
"""A create that names a host workspace on a file system that never
answers waits for it off the daemon's loop: while it waits (up to 2 s,
then 504), every other request is answered at once, not after the wait."""

import ctypes
import os
import struct
import tempfile
import threading
import time

import pytest

FUSE_INIT = 26


def _hung_fuse(mnt):
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
    if libc.mount(b"airlock-hung", mnt.encode(), b"fuse", 0, opts) != 0:
        e = ctypes.get_errno()
        os.close(fd)
        pytest.skip(f"cannot mount a FUSE file system here: {os.strerror(e)}")
    buf = os.read(fd, 1 << 20)
    _, opcode, unique = struct.unpack_from("<IIQ", buf, 0)
    assert opcode == FUSE_INIT, opcode
    major, minor = struct.unpack_from("<II", buf, 40)
    out = struct.pack("<IIIIHHIIHHI28x", 7, min(minor, 31), 0, 0, 16, 12, 4096, 1, 0, 0, 0)
    os.write(fd, struct.pack("<IiQ", 16 + len(out), 0, unique) + out)
    return fd


@pytest.fixture
def hung_mount():
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.skip("needs root and /dev/fuse")
    mnt = tempfile.mkdtemp(prefix="airlock-hung-")
    fd = _hung_fuse(mnt)
    try:
        yield mnt
    finally:
        os.close(fd)
        ctypes.CDLL(None).umount2(mnt.encode(), 2)
        os.rmdir(mnt)


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
