# SPDX-License-Identifier: Apache-2.0
"""The `--ask` terminal prompt, when the user allows a request that a deny
rule granted while it waited now refuses: the user is told on the terminal
that the rules in force refused it (and why), the request is refused, and
the audit log keeps both the user's decision and the refusal."""

import json
import os
import re
import time

from controllib import ask
from test_ask import FETCH, upstream  # noqa: F401  (the fixture)
from test_ask_forgery import BANNER, PtyRun, _setup


def test_terminal_allow_refused_by_a_new_deny_rule_says_so(airlock, upstream):  # noqa: F811
    d, pol = _setup(airlock, "askrefused")
    sock = d / "c.sock"
    script = f"python3 -c '{FETCH}' up.test {upstream} /held"
    argv = [str(x) for x in airlock.cmd(["run", "-q", "-T", "--ask", "-p", pol, "--control", sock,
                                         "--audit", d / "audit.jsonl", "--", "sh", "-c", script])]
    t = PtyRun(airlock, argv)
    word = t.until(BANNER).group(1)
    m = t.until(re.escape(b"[airlock " + word + b"] the sandbox asks to connect to up.test"))
    t.until(rb"\(denied in 20 s\): ")
    ans = ask(sock, {"op": "caps", "by": "test", "grant": [{"network": {"deny": "up.test"}}]})
    assert ans["ok"], ans
    time.sleep(0.8)  # past the type-ahead window
    os.write(t.fd, b"o\n")
    code = t.finish()
    after = t.out[m.end():]
    assert re.search(rb"refused by the rules in force now \(denied_by_rule, rule: up\.test\)", after), after
    assert b"hello /held" not in after, after
    assert code == 0, t.out[-1500:]
    log = [json.loads(x) for x in (d / "audit.jsonl").read_text().splitlines()]
    [dec] = [e for e in log if e["kind"] == "approval.decided"]
    assert dec["decision"] == "allow-once" and dec["by"] == "terminal", dec
    assert dec["refused"] == {"reason": "denied_by_rule", "rule": "up.test"}, dec
