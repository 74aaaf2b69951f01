# SPDX-License-Identifier: Apache-2.0
"""A real airlockd per test (or per module): see daemonlib.py."""

import ctypes
import os
import pathlib
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # agentlib
from daemonlib import AIRLOCK, AIRLOCKD, BUILD, AirlockError, Daemon  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "integration"))
from hungfuse import hung_fuse  # noqa: E402


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


@pytest.fixture
def hung_mount():
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.skip("needs root and /dev/fuse")
    mnt = tempfile.mkdtemp(prefix="airlock-hung-")
    fd = hung_fuse(mnt)
    try:
        yield mnt
    finally:
        os.close(fd)  # aborts every request still waiting
        ctypes.CDLL(None).umount2(mnt.encode(), 2)
        os.rmdir(mnt)
