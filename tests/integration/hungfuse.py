# SPDX-License-Identifier: Apache-2.0
"""A FUSE file system whose server answers its INIT and nothing else: a
host path that never answers (root and /dev/fuse, else the test skips)."""

import ctypes
import os
import struct

import pytest

FUSE_INIT = 26


def hung_fuse(mnt):
    """Mount at mnt a FUSE file system that answers its INIT and nothing
    else. Returns the /dev/fuse fd; closing it aborts every request."""
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
