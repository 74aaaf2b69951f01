# SPDX-License-Identifier: Apache-2.0
"""The gvisor tier and "gid": inside gVisor the command is gVisor's root
(gid 0 there), which is the sandbox user outside; a policy's other gid was
accepted and silently ignored (the command ran with gid 0, not the gid the
policy named). It is refused with the reason (exit 125), as --uid is."""

import json
import os

import pytest


def _need():
    if not os.access("/usr/bin/runsc", os.X_OK):
        pytest.skip("runsc is not installed (the gvisor tier needs it)")


def test_gvisor_other_gid_refused(airlock):
    _need()
    d = airlock.make_dir("pol")
    pol = d / "p.json"
    pol.write_text(json.dumps({"gid": 5}))
    airlock.chown(d)
    p = airlock.run(["run", "-q", "--tier", "gvisor", "--policy", pol, "--", "/bin/true"],
                    timeout=60, check_setup=False)
    assert p.returncode == 125, (p.stdout, p.stderr)
    assert "tier gvisor: \"gid\" 5 is not supported" in p.stderr, p.stderr
