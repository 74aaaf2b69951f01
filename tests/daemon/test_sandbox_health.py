# SPDX-License-Identifier: Apache-2.0
"""Per-sandbox health: gate counts from the audit lines, the policy's
"health" thresholds, the state in the record, /metrics and /healthz."""

import json

import pytest

from airlock_client import AirlockError
from daemonlib import wait_for

FLOOD = """
import urllib.request, urllib.error
codes = []
for i in range(%d):
    try:
        urllib.request.urlopen('http://denied%%d.test/' %% i, timeout=20)
        codes.append(200)
    except urllib.error.HTTPError as e:
        codes.append(e.code)
print(codes)
"""


def refusals(api, sid, n):
    r = api.run(sid, ["python3", "-c", FLOOD % n])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.decode().strip() == str([403] * n)


def test_flood_of_refusals_turns_unhealthy(shared_daemon, api):
    d = shared_daemon
    policy = {"network": {"allow": ["allowed.test:80"]},
              "health": {"maxDenialRate": 0.5, "minDecisions": 5, "window": 60}}
    sid = api.create(sandbox_class="small", policy=policy)["id"]
    calm = api.create(sandbox_class="small", policy={"network": {"allow": ["allowed.test:80"]}})["id"]
    try:
        assert api.get(sid)["health"]["state"] == "healthy"
        refusals(api, sid, 2)  # under minDecisions: not yet
        wait_for(lambda: api.get(sid)["health"]["gates"]["network"]["denied"] == 2,
                 timeout=10, what="two refusals counted")
        assert api.get(sid)["health"]["state"] == "healthy"
        refusals(api, sid, 8)
        refusals(api, calm, 10)  # the same flood, no thresholds
        rec = wait_for(lambda: (lambda r: r if r["health"]["state"] == "unhealthy" else None)(
            api.get(sid)), timeout=10, what="the sandbox to turn unhealthy")
        h = rec["health"]
        assert h["gates"]["network"] == {"allowed": 0, "denied": 10}
        assert "maxDenialRate" in h["reason"] and "10 of 10" in h["reason"]
        # Read from the log each 250 ms tick: the calm flood's lines may
        # come a tick after the one that judged the first sandbox.
        c = wait_for(lambda: (lambda h: h if h["gates"]["network"]["denied"] == 10 else None)(
            api.get(calm)["health"]), timeout=10, what="the calm sandbox's refusals counted")
        assert c["state"] == "healthy" and c["gates"]["network"]["denied"] == 10

        status, _, body = api.request("GET", "/healthz")
        hz = json.loads(body)
        assert status == 200 and hz["ok"]  # the daemon itself is fine
        assert [u["id"] for u in hz["unhealthySandboxes"]] == [sid]
        _, _, metrics = api.request("GET", "/metrics")
        m = metrics.decode()
        assert ('airlock_sandbox_gate_decisions_total{sandbox="%s",gate="network",result="denied"} 10'
                % sid) in m
        assert 'airlock_sandbox_unhealthy{sandbox="%s"} 1' % sid in m
        assert 'airlock_sandbox_unhealthy{sandbox="%s"} 0' % calm in m
        # The change of state is an audit line (and so an event).
        log = [json.loads(x) for x in d.audit.read_text().splitlines()]
        ch = [e for e in log if e["sandbox"] == sid and e["kind"] == "sandbox.health"]
        assert ch and ch[-1]["state"] == "unhealthy"
    finally:
        api.delete(sid)
        api.delete(calm)
    status, _, body = api.request("GET", "/healthz")
    assert json.loads(body)["unhealthySandboxes"] == []


@pytest.mark.parametrize("health,what", [
    ({"maxDenialRate": 0}, "health.maxDenialRate"),
    ({"maxDenialRate": 1.5}, "health.maxDenialRate"),
    ({"maxMemoryFraction": "x"}, "health.maxMemoryFraction"),
    ({"window": 0}, "health.window"),
    ({"minDecisions": -1}, "health.minDecisions"),
    ({"maxDenial": 0.5}, "health.maxDenial"),
])
def test_health_policy_is_validated(api, health, what):
    with pytest.raises(AirlockError) as e:
        api.create(sandbox_class="small", policy={"health": health})
    assert e.value.status == 400 and what in str(e.value)


def test_memory_past_the_fraction_turns_unhealthy(api):
    policy = {"limits": {"memory": "256M"}, "health": {"maxMemoryFraction": 0.25}}
    sid = api.create(sandbox_class="small", policy=policy)["id"]
    try:
        r = api.run(sid, ["python3", "-c", "b = bytearray(32 << 20); b[::4096] = b'x' * len(b[::4096])"])
        assert r.exit_code == 0, r.stderr
        assert api.get(sid)["health"]["state"] == "healthy"  # 32M of 256M: under a quarter
        r = api.run(sid, ["python3", "-c", "b = bytearray(100 << 20); b[::4096] = b'x' * len(b[::4096])"])
        assert r.exit_code == 0, r.stderr
        rec = wait_for(lambda: (lambda x: x if x["health"]["state"] == "unhealthy" else None)(
            api.get(sid)), timeout=10, what="the sandbox to turn unhealthy")
        assert "maxMemoryFraction" in rec["health"]["reason"], rec["health"]
    finally:
        api.delete(sid)
