# SPDX-License-Identifier: Apache-2.0
"""A real airlockd per test (or per module): see daemonlib.py."""

import os
import pathlib
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
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
