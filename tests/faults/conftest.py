# SPDX-License-Identifier: Apache-2.0
"""Fixtures shared by the fault tests."""

import os
import pathlib
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "daemon"))
from daemonlib import AIRLOCK, AIRLOCKD, Daemon  # noqa: E402


@pytest.fixture
def two_grants():
    """A daemon of its own with two grants: `admin`, the sandboxes' maker
    (sandbox, exec, host workspaces), and `reader`, which may only read
    them. Its scratch directory is `tmp`."""
    if os.geteuid() != 0:
        pytest.skip("the daemon fault tests run as root")
    for b in (AIRLOCK, AIRLOCKD):
        if not b.exists():
            pytest.skip(f"{b} is not built")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="airlockd-grants-", dir="/tmp"))
    d = Daemon(tmp / "d", [])
    d.admin = d.grant("owner", "--allow-sandbox", "--allow-exec", "--allow-host-workspace")
    d.reader = d.grant("reader")
    d.start()
    d.tmp = tmp
    try:
        yield d
    finally:
        d.cleanup(d.admin)
        shutil.rmtree(tmp, ignore_errors=True)
