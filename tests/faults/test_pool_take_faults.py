# SPDX-License-Identifier: Apache-2.0
"""A create served from the warm pool writes two records before its 201:
the take (the state database) and api.create (the audit log), synced side
by side. When either cannot be written, the pooled sandbox is not handed
out: the create is refused, the sandbox is destroyed, and nothing is left
running that no record gives to the grant."""

import json
import time

from test_daemon_faults import (  # noqa: F401  (fixtures)
    FullStore, assert_no_orphans, fault_daemon, health, small_db, supervisor_procs,
    wait_for)


def pooled(d):
    for line in d.client(d.admin).metrics().splitlines():
        if line.startswith("airlock_pool_ready "):
            return int(float(line.split()[1]))
    return 0


def test_a_pooled_take_whose_record_fails_is_not_handed_out(fault_daemon, small_db):
    d = fault_daemon("--pool", "small=1", base=small_db)
    c = d.client(d.admin)
    wait_for(lambda: pooled(d) == 1, timeout=20, what="the pool to fill")
    waiting = set(supervisor_procs(d).values())
    assert len(waiting) == 1
    full = FullStore(d, small_db / "dbfs")
    status, _, body = c.request("POST", "/v1/sandboxes",
                                {"class": "small", "metadata": {"x": "y" * 200}})
    body = json.loads(body)
    assert status == 503 and body["error"] == "store_unavailable", (status, body)
    full.unhold()
    assert not [s for s in c.list(state="running")], "a sandbox was handed out unrecorded"
    wait_for(lambda: not (waiting & set(supervisor_procs(d).values())), timeout=15,
             what="the pooled sandbox that was not handed out to be destroyed")
    st, h = health(d)
    assert st == 503 and "store" in h["reasons"], h

    full.release()
    wait_for(lambda: health(d)[1]["ok"], timeout=10, what="healthz to say ok again")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 20:
        status, _, body = c.request("POST", "/v1/sandboxes", {"class": "small"})
        if status == 201:
            break
        time.sleep(0.2)
    assert status == 201, body
    sid = json.loads(body)["id"]
    assert c.run(sid, ["echo", "ok"]).stdout == b"ok\n"
    # The refused sandbox's last record may not have fitted on the full
    # disk (a destroy goes ahead without it): a restart reconciles.
    d.kill9()
    d.start()
    assert_no_orphans(d, c)
