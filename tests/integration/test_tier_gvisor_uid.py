# SPDX-License-Identifier: Apache-2.0
"""The gvisor tier and --uid: inside gVisor the command is gVisor's root,
which is the sandbox user outside; another uid is refused with the reason
(exit 125), never silently ignored (docs/tiers.md)."""

import os

import pytest


def _need():
    if not os.access("/usr/bin/runsc", os.X_OK):
        pytest.skip("runsc is not installed (the gvisor tier needs it)")


@pytest.mark.parametrize("uid", ["0", "4242"])
def test_gvisor_other_uid_refused(airlock, uid):
    _need()
    p = airlock.run(["run", "-q", "--tier", "gvisor", "--uid", uid, "--", "/bin/true"],
                    timeout=60, check_setup=False)
    assert p.returncode == 125, (p.stdout, p.stderr)
    assert f"tier gvisor: --uid {uid} is not supported" in p.stderr, p.stderr


def test_gvisor_default_uid_runs(airlock):
    _need()
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "--tier", "gvisor", "--uid", "1000", "-w", ws, "--",
                     "/bin/sh", "-c", "echo x > /workspace/f"], timeout=60)
    assert p.returncode == 0, p.stderr
    assert (ws / "f").read_text() == "x\n"
