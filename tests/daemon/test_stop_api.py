# SPDX-License-Identifier: Apache-2.0
"""The kill switch over the API (POST /v1/stop) and with the daemon down
(`airlock stop --run-dir`): sandboxes with a busy loop and a network flood
through the gate are frozen, killed and destroyed within a bound; a grant
stops only its own; the audit shows sandbox.stopped and no gate crossing
that began after the freeze."""

import json
import subprocess
import time

import pytest

from daemonlib import AIRLOCK, wait_for
from stoplib import parse_ts, settle, start_upstream

N = 8
BOUND_S = 30


@pytest.fixture
def upstream():
    srv = start_upstream()
    yield srv
    srv.shutdown()
    srv.server_close()


def audit(d):
    return [json.loads(line) for line in d.audit.read_text().splitlines()]


def flooding(c, port, n):
    pol = {"network": {"allow": [f"upstream.test:{port}"], "hosts": {"upstream.test": "127.0.0.1"},
                       "allowPrivate": ["127.0.0.1"]},
           "limits": {"cpus": 0.05}}
    ids = [c.create(policy=pol, sandbox_class="small")["id"] for _ in range(n)]
    for i in ids:
        c.exec_background(i, ["sh", "-c", "while :; do :; done"])
        c.exec_background(i, ["sh", "-c",
                              f"while :; do curl -s -o /dev/null http://upstream.test:{port}/; done"])
    return ids


def check_stopped(d, ids, by):
    log = audit(d)
    for i in ids:
        mine = [e for e in log if e["sandbox"] == i]
        kinds = [e["kind"] for e in mine]
        assert "net.decision" in kinds, kinds  # it did flood the gate
        stopped = [e for e in mine if e["kind"] == "sandbox.stopped"]
        assert len(stopped) == 1, kinds
        st = stopped[0]
        assert st["by"] == by and st["frozen"] is True, st
        at = kinds.index("sandbox.stopped")
        assert "net.decision" not in kinds[at + 1:], kinds[at:]
        frozen_at = parse_ts(st["frozenAt"])
        for e in mine:
            if e["kind"] == "net.decision" and parse_ts(e["ts"]) > frozen_at:
                assert parse_ts(e["ts"]) - e.get("durationMs", 0) / 1000.0 <= frozen_at + 0.002, e


def test_post_stop_all_stops_only_the_grants_own(make_daemon, upstream):
    d = make_daemon()
    c = d.client(d.admin)
    other_token = d.grant("other", "--allow-sandbox", "--allow-exec")
    other = d.client(other_token)
    port = upstream.server_address[1]
    ids = flooding(c, port, N)
    theirs = other.create(sandbox_class="small")["id"]
    wait_for(lambda: all(any(e["kind"] == "net.decision" and e["sandbox"] == i for e in audit(d))
                         for i in ids), timeout=60, what="every sandbox reaching the gate")

    # Another grant cannot stop them: not found, untouched.
    status, _, body = other.request("POST", "/v1/stop", {"ids": ids[:2]})
    assert status == 200
    assert [o["how"] for o in json.loads(body)["stopped"]] == ["not_found", "not_found"]
    assert c.get(ids[0])["state"] == "running"

    t0 = time.monotonic()
    status, _, body = c.request("POST", "/v1/stop", {"all": True}, timeout=BOUND_S + 30)
    took = time.monotonic() - t0
    assert status == 200, body
    out = json.loads(body)["stopped"]
    assert sorted(o["id"] for o in out) == sorted(ids)  # not the other grant's
    assert all(o["stopped"] and o["frozen"] and o["how"] == "supervisor" for o in out), out
    assert took < BOUND_S
    for i in ids:
        wait_for(lambda: c.get(i)["state"] == "destroyed", timeout=BOUND_S, what=f"{i} destroyed")
    assert set(d.supervisors()) == {theirs}
    settle(upstream)
    check_stopped(d, ids, "grant:admin")
    assert other.get(theirs)["state"] == "running"


def test_post_stop_refusals(make_daemon):
    d = make_daemon()
    c = d.client(d.admin)
    for body, field in (({}, "ids"), ({"ids": "x"}, "ids"), ({"ids": []}, "ids"),
                        ({"ids": ["NOTANID"]}, "ids"), ({"all": 1}, "all"),
                        ({"all": True, "ids": ["0123456789abcdef"]}, "ids"), ({"every": True}, "every")):
        status, _, data = c.request("POST", "/v1/stop", body)
        assert status == 400 and field in data.decode(), (body, status, data)
    ro = d.client(d.grant("ro", "--allow-exec"))
    status, _, data = ro.request("POST", "/v1/stop", {"all": True})
    assert status == 403 and b"allowSandbox" in data


def test_stop_with_the_daemon_down(make_daemon, upstream):
    d = make_daemon()
    c = d.client(d.admin)
    port = upstream.server_address[1]
    ids = flooding(c, port, 3)
    wait_for(lambda: all(any(e["kind"] == "net.decision" and e["sandbox"] == i for e in audit(d))
                         for i in ids), timeout=60, what="every sandbox reaching the gate")
    sups = d.supervisors()
    d.kill9()  # the sandboxes do not notice
    p = subprocess.run([str(AIRLOCK), "stop", "--all", "--json", "--run-dir", str(d.run_dir)],
                       capture_output=True, text=True, timeout=BOUND_S + 30)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)["stopped"]
    assert sorted(o["id"] for o in out) == sorted(ids)
    assert all(o["stopped"] and o["frozen"] for o in out), out
    for pid in sups.values():
        wait_for(lambda: not pathlib_exists(f"/proc/{pid}"), timeout=BOUND_S, what="supervisor gone")
    check_stopped(d, ids, "cli:uid=0")
    # The daemon, back, records them as ended.
    d.start()
    for i in ids:
        wait_for(lambda: c.get(i)["state"] in ("destroyed", "failed"), timeout=BOUND_S,
                 what=f"{i} ended in the record")


def pathlib_exists(p):
    import os
    return os.path.exists(p)
