# SPDX-License-Identifier: Apache-2.0
"""A real airlockd per test (or per module): see daemonlib.py."""

import ctypes
import os
import pathlib
import shutil
import struct
import sys
import tempfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # agentlib
from daemonlib import AIRLOCK, AIRLOCKD, BUILD, AirlockError, Daemon  # noqa: E402


@pytest.fixture(scope="session")
def daemon_base():
    if os.geteuid() != 0:
        pytest.skip("the daemon tests run as root")
    for b in (AIRLOCK, AIRLOCKD):
        if not b.exists():
            pytest.skip(f"{b} is not built (run 'ninja -C {BUILD}')")
    base = pathlib.Path(tempfile.mkdtemp(prefix="airlockd-tests-", dir="/tmp"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def make_daemon(daemon_base):
    """make_daemon(*args) starts a fresh daemon; all are cleaned up."""
    made = []

    def make(*args):
        d = Daemon(tempfile.mkdtemp(prefix="d-", dir=daemon_base), args)
        d.admin = d.grant("admin", "--allow-sandbox", "--allow-exec", "--allow-host-workspace")
        d.start()
        made.append(d)
        return d
    yield make
    for d in made:
        d.cleanup(getattr(d, "admin", None))


@pytest.fixture(scope="module")
def shared_daemon(daemon_base):
    d = Daemon(tempfile.mkdtemp(prefix="m-", dir=daemon_base))
    d.admin = d.grant("admin", "--allow-sandbox", "--allow-exec", "--allow-host-workspace")
    d.start()
    yield d
    d.cleanup(d.admin)


@pytest.fixture
def api(shared_daemon):
    return shared_daemon.client(shared_daemon.admin)


@pytest.fixture
def sandbox(api):
    sb = api.create(sandbox_class="small")
    yield sb
    try:
        api.delete(sb["id"])
    except (AirlockError, OSError):
        pass


@pytest.fixture
def run_daemon(make_daemon, daemon_base):
    """A daemon holding the scripted model's key (agentlib.KEY) as MODEL_KEY,
    for the model route of POST /v1/runs."""
    from agentlib import KEY

    sec = pathlib.Path(tempfile.mkdtemp(prefix="sec-", dir=daemon_base)) / "secrets.env"
    sec.write_text(f"MODEL_KEY={KEY}\n")
    sec.chmod(0o600)
    return make_daemon("--secrets", str(sec))


# A FUSE file system whose server answers its INIT and nothing else: a
# host path that never answers (root and /dev/fuse, else the test skips).
FUSE_INIT = 26


def _hung_fuse(mnt):
    """Mount a FUSE file system at mnt that answers its INIT and nothing
    else. Returns the /dev/fuse fd; closing it aborts the connection."""
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
        os.close(fd)  # aborts every request still waiting
        ctypes.CDLL(None).umount2(mnt.encode(), 2)
        os.rmdir(mnt)
