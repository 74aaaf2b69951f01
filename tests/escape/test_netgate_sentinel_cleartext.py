# SPDX-License-Identifier: Apache-2.0
"""A secret put into plain HTTP crosses the network in the clear.

A sentinel (GH_TOKEN=airlock-sentinel-...) listed for upstream.test is
replaced with the real value in any request to that host: a plain-HTTP
request through the proxy, on any allowed port, hands the secret to
whoever reads the wire. The same for a route whose upstream is http://
and whose inject names a ${secret:...}. The gate puts secrets only into
TLS it verifies upstream (or to the host's own loopback, where no byte
leaves the host); a plain-HTTP request that would carry one elsewhere is
refused, recorded `cleartext_secret`, and nothing is sent, unless the
sentinel's (the route's) "cleartext" says so. The upstream here is on the
test network (10.231.7.2), off the gate's host."""

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

from netns import HTTP_PORT, RANGE, SERVER_ADDR  # noqa: E402
from netns import net  # noqa: E402,F401  (the test network, one per module)

SECRET = "ghp_clear7c2Q9xV3kT0mB5sN8aW1yE4uR6iO"
NAME = "upstream.test"


def _run(airlock, net, policy, script, tmp_path):
    ws = airlock.make_dir()
    logdir = airlock.make_dir("cleartext")
    (logdir / "policy.json").write_text(json.dumps(policy))
    sec = tmp_path / "secrets.env"
    sec.write_text(f"GH_TOKEN={SECRET}\n")
    sec.chmod(0o600)
    args = ["run", "-q", "-w", ws, "--net-log", logdir / "net.jsonl", "--secrets", sec,
            "-p", logdir / "policy.json", "--", "/bin/sh", "-c", script]
    argv = ["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(args)]
    p = subprocess.run(argv, cwd=str(airlock.base), capture_output=True, text=True, timeout=60)
    assert p.returncode != 125, p.stderr
    log = logdir / "net.jsonl"
    records = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return p, records


def _arrived(net, mark):
    return [line for line in net.log.read_text().splitlines() if mark in line]


def _policy(**sentinel):
    return {"network": {
        "allow": [f"{NAME}:{HTTP_PORT}"], "allowPrivate": [RANGE],
        "hosts": {NAME: SERVER_ADDR},
        "sentinels": [{"env": "GH_TOKEN", "secret": "GH_TOKEN", "hosts": [NAME], **sentinel}],
    }}


CURL = ("curl -s -o /dev/null -D - --max-time 20 -H \"Authorization: token $GH_TOKEN\" "
        f"'http://{NAME}:{HTTP_PORT}/hello.txt?m=%s'")


@pytest.mark.parametrize("airlock", ["root"], indirect=True)
def test_plain_http_never_carries_a_sentinel_off_the_host(airlock, net, tmp_path):
    mark = "clear1"
    p, records = _run(airlock, net, _policy(), CURL % mark, tmp_path)
    head = p.stdout.lower()
    assert " 403 " in head.splitlines()[0] if head else False, p.stdout + p.stderr
    assert "x-airlock-denied: cleartext_secret" in head, p.stdout
    # Nothing was sent: neither the value nor the placeholder.
    assert _arrived(net, mark) == [], net.log.read_text()
    denied = [r for r in records if r.get("reason") == "cleartext_secret"]
    assert denied and denied[0]["decision"] == "deny", records
    assert denied[0]["rule"] == "network.sentinels[GH_TOKEN].cleartext", denied


@pytest.mark.parametrize("airlock", ["root"], indirect=True)
def test_cleartext_listed_host_port_is_sent(airlock, net, tmp_path):
    mark = "clear2"
    p, records = _run(airlock, net, _policy(cleartext=[f"{NAME}:{HTTP_PORT}"]),
                      CURL % mark, tmp_path)
    assert " 200 " in p.stdout.splitlines()[0], p.stdout + p.stderr
    assert len(_arrived(net, mark)) == 1, net.log.read_text()
    # Listed for another port only: refused.
    mark = "clear3"
    p, records = _run(airlock, net, _policy(cleartext=[f"{NAME}:{HTTP_PORT + 1}"]),
                      CURL % mark, tmp_path)
    assert "cleartext_secret" in p.stdout.lower(), p.stdout
    assert _arrived(net, mark) == [], net.log.read_text()


@pytest.mark.parametrize("airlock", ["root"], indirect=True)
def test_http_route_never_injects_a_secret_off_the_host(airlock, net, tmp_path):
    def route(**extra):
        return {"network": {
            "allowPrivate": [RANGE], "hosts": {NAME: SERVER_ADDR},
            "routes": [{"name": "api", "upstream": f"http://{NAME}:{HTTP_PORT}",
                        "inject": {"Authorization": "token ${secret:GH_TOKEN}"}, **extra}],
        }}
    script = "curl -s -o /dev/null -D - --max-time 20 'http://127.0.0.1:8080/api/hello.txt?m=%s'"
    p, records = _run(airlock, net, route(), script % "clear4", tmp_path)
    assert "x-airlock-denied: cleartext_secret" in p.stdout.lower(), p.stdout + p.stderr
    assert _arrived(net, "clear4") == [], net.log.read_text()
    calls = [r for r in records if r.get("reason") == "cleartext_secret"]
    assert calls and calls[0]["rule"] == "network.routes[api].cleartext", records
    # The route's explicit "cleartext": sent.
    p, records = _run(airlock, net, route(cleartext=True), script % "clear5", tmp_path)
    assert " 200 " in p.stdout.splitlines()[0], p.stdout + p.stderr
    assert len(_arrived(net, "clear5")) == 1, net.log.read_text()
