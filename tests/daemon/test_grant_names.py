# SPDX-License-Identifier: Apache-2.0
"""A grant's name is its identity: the sandboxes and runs it made, its
approvals and its events are found by it. So a revoked grant's name is never
given again: a new grant under that name would inherit everything the
revoked one left running."""

import subprocess

from daemonlib import AIRLOCK, AirlockError


def _status(f):
    try:
        f()
    except AirlockError as e:
        return e.status
    return 200


def test_revoked_name_is_never_given_again(make_daemon):
    d = make_daemon()
    old = d.client(d.grant("ci", "--allow-sandbox", "--allow-exec"))
    sid = old.create(sandbox_class="small")["id"]
    d.revoke("ci")

    p = subprocess.run([str(AIRLOCK), "grant", "create", "--name", "ci", "--allow-sandbox",
                        "--allow-exec", "--state-dir", str(d.state)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0, "a revoked grant's name was given again"
    assert "revoked" in p.stderr and "another name" in p.stderr, p.stderr
    assert not p.stdout.strip(), "a token was printed"

    # Under a new name, the revoked grant's sandbox is not the new grant's.
    new = d.client(d.grant("ci2", "--allow-sandbox", "--allow-exec"))
    assert _status(lambda: new.run(sid, ["true"])) == 404
    assert _status(lambda: new.delete(sid)) == 404
    # The listing keeps the revoked grant, so that its name stays taken.
    ls = subprocess.run([str(AIRLOCK), "grant", "ls", "--state-dir", str(d.state)],
                        capture_output=True, text=True, timeout=30)
    assert any(line.split()[:1] == ["ci"] and "revoked" in line
               for line in ls.stdout.splitlines()), ls.stdout
    d.client(d.admin).request("DELETE", f"/v1/sandboxes/{sid}")
