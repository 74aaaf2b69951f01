# SPDX-License-Identifier: Apache-2.0
"""GET /v1/sandboxes/{id}/capabilities by a grant other than the sandbox's
own shows the names of its environment and the targets of its mounts, never
their values or host sources: those may carry the owning grant's secrets."""

import pytest

from daemonlib import AirlockError


def path(sid):
    return f"/v1/sandboxes/{sid}/capabilities"


@pytest.fixture(scope="module")
def two(shared_daemon):
    d = shared_daemon
    a = d.client(d.grant("capsown", "--allow-sandbox", "--allow-exec", "--allow-capabilities"))
    b = d.client(d.grant("capsother", "--allow-sandbox", "--allow-capabilities"))
    return a, b


def test_another_grant_sees_names_not_values(two):
    a, b = two
    sb = a.create(sandbox_class="small",
                  policy={"env": {"DEPLOY_TOKEN": "tok-VALUE-of-a"}})
    sid = sb["id"]
    try:
        a._json("POST", path(sid), {"grant": [{"env": {"name": "LATER", "value": "later-VALUE"}}]})
        mine = a._json("GET", path(sid))
        assert mine["env"].get("DEPLOY_TOKEN") == "tok-VALUE-of-a", mine
        assert mine["env"].get("LATER") == "later-VALUE", mine
        theirs = b._json("GET", path(sid))
        assert "VALUE" not in str(theirs), theirs
        assert set(theirs["env"]) == {"DEPLOY_TOKEN", "LATER"} | (set(mine["env"]) - {
            "DEPLOY_TOKEN", "LATER"}), theirs
        assert all(m.get("source") is None for m in theirs["mounts"]), theirs
        assert theirs["network"] == mine["network"]
        # Nor through the sandbox's record.
        assert "VALUE" not in str(b.get(sid)), b.get(sid)
        # Nor through the audit lines, which any grant may read: the line
        # of the change names the variable, not its value.
        lines = b.audit(sid)
        assert any(l.get("capability") == "env" for l in lines), lines
        assert "VALUE" not in str(lines), [l for l in lines if "VALUE" in str(l)]
    finally:
        try:
            a.delete(sid)
        except (AirlockError, OSError):
            pass
