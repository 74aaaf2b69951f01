# SPDX-License-Identifier: Apache-2.0
"""A request held for the operator ("ask") meets the rules as they are when
it is answered: a deny rule granted while it waited refuses it even when
the operator approves, the refusal is recorded with its reason and rule,
and the approver is told. Runs `airlock supervise` as root and as an
ordinary user."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_ask import audit, decide, fetch, make, pending, policy, upstream  # noqa: E402,F401


def deny_now(sup, host):
    ans = sup.request({"op": "caps", "by": "test",
                       "grant": [{"network": {"deny": host}}]})[0]
    assert ans["ok"], ans


def test_deny_rule_added_while_held_refuses_an_approval(make, upstream):
    sup = make(policy(upstream))
    f = fetch(sup, "up.test", upstream, "/held")
    [a] = pending(sup)
    deny_now(sup, "up.test")
    assert f.t.is_alive(), "the held request still waits for its answer"
    ans = decide(sup, a["id"], "allow-once", by="grant:ops")
    out = f.result()
    assert out.split()[0] == "403" and "denied_by_rule" in out, out
    assert "hello" not in out
    # The approver is told that the rules in force now refused it.
    assert ans["ok"], ans
    ap = ans["approval"]
    assert ap["decision"] == "allow-once" and ap["refused"]["reason"] == "denied_by_rule", ans
    assert ap["refused"]["rule"] == "up.test", ans
    [d] = audit(sup, "approval.decided")
    assert d["id"] == a["id"] and d["decision"] == "allow-once"
    assert d["refused"] == {"reason": "denied_by_rule", "rule": "up.test"}, d


def test_allow_sandbox_refused_by_a_new_deny_is_not_remembered(make, upstream):
    sup = make(policy(upstream))
    f = fetch(sup, "up.test", upstream, "/a")
    [a] = pending(sup)
    deny_now(sup, "up.test")
    ans = decide(sup, a["id"], "allow-sandbox")
    assert f.result().split()[0] == "403"
    assert ans["ok"] and ans["approval"]["refused"]["reason"] == "denied_by_rule", ans
    # Nothing remembered: with the deny rule taken back, the next request
    # is asked again rather than passed on the refused allow-sandbox.
    ans = sup.request({"op": "caps", "by": "test", "revoke": [{"network": {"deny": "up.test"}}]})[0]
    assert ans["ok"], ans
    g = fetch(sup, "up.test", upstream, "/b")
    [b] = pending(sup)
    assert b["id"] != a["id"]
    decide(sup, b["id"], "deny")
    assert g.result().split()[0] == "403"


def test_an_allow_granted_while_held_still_passes(make, upstream):
    """Control: the re-decision lets through what the rules now allow."""
    sup = make(policy(upstream))
    f = fetch(sup, "up.test", upstream, "/ok")
    [a] = pending(sup)
    ans = sup.request({"op": "caps", "by": "test",
                       "grant": [{"network": {"allow": f"up.test:{upstream}"}}]})[0]
    assert ans["ok"], ans
    ans = decide(sup, a["id"], "allow-once")
    assert ans["ok"] and "refused" not in ans["approval"], ans
    status, _, body = f.result().split(" ", 2)
    assert status == "200" and "hello /ok" in body


def test_cli_approver_is_told_the_rules_refused_it(make, upstream, airlock):
    sup = make(policy(upstream))
    f = fetch(sup, "up.test", upstream, "/cli")
    [a] = pending(sup)
    deny_now(sup, "up.test")
    p = airlock.run(["approvals", "allow", a["id"], "--run-dir", sup.run_dir])
    assert p.returncode == 4, (p.returncode, p.stdout, p.stderr)
    assert "rules in force now refuse" in p.stderr and "denied_by_rule" in p.stderr, p.stderr
    assert f.result().split()[0] == "403"


def test_an_operator_deny_is_reported_as_the_operators_even_under_a_new_deny_rule(make, upstream):
    """The agent learns what decided: the operator's deny (ask_denied), not
    the rule that would also have refused an approval."""
    sup = make(policy(upstream))
    f = fetch(sup, "up.test", upstream, "/denied")
    [a] = pending(sup)
    deny_now(sup, "up.test")
    decide(sup, a["id"], "deny")
    out = f.result()
    assert out.split()[0] == "403" and "ask_denied" in out and "denied_by_rule" not in out, out
