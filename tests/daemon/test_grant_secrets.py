# SPDX-License-Identifier: Apache-2.0
"""Grants and daemon secrets: a policy given through the API may inject only
the daemon secrets its grant names (`airlock grant create --secret NAME`),
never the daemon's git credentials, and may name host paths (a route's
caFile, filesystem.denyRead) only with allowHostWorkspace. Without this, a
grant that may create sandboxes routes ${secret:GIT_TOKEN} to an upstream of
its choosing and reads the daemon's git token back."""

import json
import pathlib
import secrets
import subprocess
import tempfile

import pytest

from daemonlib import AIRLOCK, AirlockError


def status_of(f):
    try:
        r = f()
    except AirlockError as e:
        return e.status, e.body
    return 201, r


def route_policy(template, **extra):
    route = {"name": "echo", "upstream": "http://127.0.0.1:9/", "inject": {"x-api-key": template}}
    route.update(extra)
    return {"network": {"routes": [route]}}


@pytest.fixture
def secret_daemon(make_daemon, daemon_base):
    sec = pathlib.Path(tempfile.mkdtemp(prefix="sec-", dir=daemon_base)) / "secrets.env"
    sec.write_text(f"GIT_TOKEN=git-{secrets.token_hex(8)}\nGIT_USERNAME=bot\n"
                   f"API_KEY=sk-{secrets.token_hex(8)}\nOTHER_KEY=sk-{secrets.token_hex(8)}\n")
    sec.chmod(0o600)
    return make_daemon("--secrets", str(sec))


def test_policy_may_not_inject_the_git_token(secret_daemon):
    d = secret_daemon
    c = d.client(d.grant("nogit", "--allow-sandbox", "--allow-exec"))
    for name in ("GIT_TOKEN", "GIT_USERNAME"):
        for tmpl in ("${secret:%s}" % name, "Bearer ${secret:%s}" % name,
                     "$${secret:%s}" % name):
            status, body = status_of(lambda: c.create(sandbox_class="small",
                                                      policy=route_policy(tmpl)))
            assert (status, body["error"], body["limit"]) == (403, "limit_exceeded", "secrets"), \
                (tmpl, body)
            assert name in body["message"] and "git credential" in body["message"], body
    # Not even a grant that may use git, nor the admin grant.
    c = d.client(d.grant("git", "--allow-sandbox", "--allow-git", "--secret", "API_KEY"))
    status, body = status_of(lambda: c.create(sandbox_class="small",
                                              policy=route_policy("${secret:GIT_TOKEN}")))
    assert (status, body["limit"]) == (403, "secrets")
    status, body = status_of(lambda: d.client(d.admin).create(
        sandbox_class="small", policy=route_policy("${secret:GIT_TOKEN}")))
    assert (status, body["limit"]) == (403, "secrets")


def test_policy_injects_only_the_secrets_its_grant_names(secret_daemon):
    d = secret_daemon
    c = d.client(d.grant("keyed", "--allow-sandbox", "--allow-exec", "--secret", "API_KEY"))
    # Another secret from the file, or a name that would fall back to the
    # daemon's environment: 403 naming it and the option that grants it.
    for name in ("OTHER_KEY", "HOME", "PATH"):
        status, body = status_of(lambda: c.create(
            sandbox_class="small", policy=route_policy("k=${secret:API_KEY} ${secret:%s}" % name)))
        assert (status, body["error"], body["limit"]) == (403, "limit_exceeded", "secrets"), body
        assert f"${{secret:{name}}}" in body["message"], body
        assert f"--secret {name}" in body["message"], body
    # The secret it names works.
    status, sb = status_of(lambda: c.create(sandbox_class="small",
                                            policy=route_policy("${secret:API_KEY}")))
    assert status == 201, sb
    c.delete(sb["id"])
    # A grant with no --secret names none.
    plain = d.client(d.grant("plain", "--allow-sandbox"))
    status, body = status_of(lambda: plain.create(sandbox_class="small",
                                                  policy=route_policy("${secret:API_KEY}")))
    assert (status, body["limit"]) == (403, "secrets"), body
    # Templates without secrets need nothing.
    status, sb = status_of(lambda: plain.create(sandbox_class="small",
                                                policy=route_policy("sb-${sandbox.id}")))
    assert status == 201, sb
    plain.delete(sb["id"])


def test_host_paths_in_a_policy_need_allow_host_workspace(secret_daemon, tmp_path):
    d = secret_daemon
    c = d.client(d.grant("nohost", "--allow-sandbox", "--secret", "API_KEY"))
    for pol in (route_policy("x", upstream="https://127.0.0.1:9/", caFile="/etc/shadow"),
                {"filesystem": {"denyRead": ["/root/.ssh/id_rsa"]}},
                {"filesystem": {"denyRead": ["does/not/exist"]}}):
        status, body = status_of(lambda: c.create(sandbox_class="small", policy=pol))
        assert (status, body["error"], body["limit"]) == (403, "limit_exceeded",
                                                          "allowHostWorkspace"), (pol, body)
        assert "allowHostWorkspace" in body["message"]


def test_grant_secret_option(make_daemon):
    d = make_daemon()
    st = ["--state-dir", str(d.state)]
    for bad, why in (("GIT_TOKEN", "git credential"), ("GIT_USERNAME", "git credential"),
                     ("1X", "letters, digits"), ("A-B", "letters, digits")):
        p = subprocess.run([str(AIRLOCK), "grant", "create", "--name", "bad", "--secret", bad] + st,
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, p.stderr
        assert why in p.stderr and bad in p.stderr, p.stderr
    p = subprocess.run([str(AIRLOCK), "grant", "create", "--name", "twice", "--secret", "A",
                        "--secret", "A"] + st, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "twice" in p.stderr
    d.grant("two", "--allow-sandbox", "--secret", "API_KEY", "--secret", "B_2")
    p = subprocess.run([str(AIRLOCK), "grant", "ls", "--json"] + st, capture_output=True,
                       text=True, timeout=30)
    grants = {g["name"]: g for g in json.loads(p.stdout)}
    assert grants["two"]["secrets"] == ["API_KEY", "B_2"]
    assert grants["admin"]["secrets"] == []
    p = subprocess.run([str(AIRLOCK), "grant", "ls"] + st, capture_output=True, text=True,
                       timeout=30)
    row = [line for line in p.stdout.splitlines() if line.startswith("two ")][0]
    assert row.split()[-1] == "API_KEY,B_2"
