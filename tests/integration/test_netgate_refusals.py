# SPDX-License-Identifier: Apache-2.0
"""Refused requests cost the host little and the audit log a bounded number
of lines: each is charged to the refusal budget (network.budget.refusals),
repeated ones are aggregated into one line with a count, and past the
budget the gate closes new connections without a record."""

import json

HAMMER = r'''
import json, socket, sys
n, hosts = int(sys.argv[1]), int(sys.argv[2])
seen = {}
for i in range(n):
    key = "error"
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        try:
            s.sendall(b"GET http://denied-%d.example/ HTTP/1.1\r\nHost: x\r\n\r\n" % (i % hosts))
            data = s.recv(64)
            key = data.split(b" ")[1].decode() if data else "closed"
        finally:
            s.close()
    except OSError:
        key = "closed"
    seen[key] = seen.get(key, 0) + 1
print(json.dumps(seen))
'''


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def _hammer(airlock, n, hosts, policy=None):
    d = airlock.make_dir("refusals")
    log = d / "audit.jsonl"
    netlog = d / "net.jsonl"
    args = ["run", "-q", "--net", "gated", "--audit", log, "--net-log", netlog]
    if policy is not None:
        pfile = d / "policy.json"
        pfile.write_text(json.dumps(policy))
        airlock.chown(d)
        args += ["--policy", pfile]
    p = airlock.run(args + ["--", "python3", "-c", HAMMER, str(n), str(hosts)], timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), _lines(log), _lines(netlog)


def _refused(lines):
    """How many refusals the net.decision lines stand for: one each, or the
    count of an aggregated line."""
    return sum(e.get("count", 1) for e in lines
               if e["kind"] == "net.decision" and e["decision"] == "deny")


def test_two_thousand_refusals_make_a_bounded_log(airlock):
    seen, audit, netlog = _hammer(airlock, 2000, 3)
    # The default budget: 1000 refusals are answered, then the gate closes.
    assert seen.get("403") == 1000, seen
    assert seen.get("closed") == 1000, seen
    exceeded = [e for e in audit if e["kind"] == "net.budget_exceeded"]
    assert len(exceeded) == 1, exceeded
    assert exceeded[0]["refusals"] == 1000 and exceeded[0]["rule"] == "network.budget.refusals"
    # Every refusal is accounted for, in far fewer lines than refusals.
    net = [e for e in audit if e["kind"] == "net.decision"]
    assert _refused(audit) == 1000, net[:5]
    assert len(audit) < 150, len(audit)
    assert any(e.get("count", 0) > 1 for e in net)
    # The net log gets the same records.
    assert len(netlog) < 150


def test_refusal_budget_from_the_policy(airlock):
    policy = {"network": {"mode": "gated", "budget": {"refusals": 10}}}
    seen, audit, _ = _hammer(airlock, 200, 1, policy)
    assert seen.get("403") == 10 and seen.get("closed") == 190, seen
    exceeded = [e for e in audit if e["kind"] == "net.budget_exceeded"]
    assert len(exceeded) == 1 and exceeded[0]["refusals"] == 10
    kinds = [e["kind"] for e in audit]
    # The exceeded event comes after every refusal it counts.
    assert kinds.index("net.budget_exceeded") > max(i for i, k in enumerate(kinds) if k == "net.decision")


def test_refusal_budget_zero_is_unlimited_and_still_aggregated(airlock):
    policy = {"network": {"mode": "gated", "budget": {"refusals": 0}}}
    seen, audit, _ = _hammer(airlock, 1500, 2, policy)
    assert seen.get("403") == 1500, seen
    assert not [e for e in audit if e["kind"] == "net.budget_exceeded"]
    net = [e for e in audit if e["kind"] == "net.decision"]
    assert _refused(audit) == 1500
    assert len(audit) < 150, len(audit)


def test_refusal_budget_is_validated(airlock):
    d = airlock.make_dir("policy")
    pfile = d / "policy.json"
    pfile.write_text(json.dumps({"network": {"budget": {"refusals": -1}}}))
    airlock.chown(d)
    p = airlock.run(["run", "--policy", pfile, "--", "true"], check_setup=False)
    assert p.returncode == 125
    assert "network.budget.refusals" in p.stderr, p.stderr
