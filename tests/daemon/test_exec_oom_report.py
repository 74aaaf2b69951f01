# SPDX-License-Identifier: Apache-2.0
"""An exec killed by the OOM killer is reported as "oom_killed"; one killed
by SIGKILL otherwise, in the same sandbox after an OOM kill, is not. The
supervisor reads the sandbox's OOM count once the process has started
(off the path of "started"): these pin that the count is read before the
exit is judged, whenever the exit comes."""

import time

import pytest

HOG = ["sh", "-c", "x=$(head -c 400000000 /dev/zero | tr \"\\\\0\" a); echo ${#x}"]


def oom_enforced(api, sid):
    r = api.run(sid, HOG, timeout=30)
    if r.exit_code == 0:
        pytest.skip("no memory limit enforced by this host's cgroups")
    return r


def test_oom_kill_then_plain_sigkill(api):
    sb = api.create(policy={"limits": {"memory": "64M"}})
    sid = sb["id"]
    try:
        r = oom_enforced(api, sid)
        assert r.exit_code == 137 and r.error_code == "oom_killed", (r.exit_code, r.error_code)
        # A later process that kills itself with SIGKILL, right away and
        # after a moment: the earlier OOM kill is not taken for its own.
        for argv in (["sh", "-c", "kill -9 $$"], ["sh", "-c", "sleep 0.2; kill -9 $$"]):
            r = api.run(sid, argv, timeout=30)
            assert r.exit_code == 137 and r.error_code is None, (argv, r.exit_code, r.error_code)
        # And the next OOM kill is seen as one again.
        time.sleep(0.05)
        r = api.run(sid, HOG, timeout=30)
        assert r.exit_code == 137 and r.error_code == "oom_killed", (r.exit_code, r.error_code)
    finally:
        api.delete(sid)
