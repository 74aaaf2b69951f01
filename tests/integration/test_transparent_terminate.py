# SPDX-License-Identifier: Apache-2.0
"""Transparent mode and routes with "terminate": a client that uses no proxy
variables and connects to the route's host by its own name is terminated
too, as a CONNECT to it is. The gate answers the TLS handshake with the
sandbox's CA (trusted through the bundle in place of the system one),
applies the route (inject, sentinels) and re-encrypts to the real upstream,
which it verifies. The secret stays on the host; a sentinel goes out
unchanged to a host not listed for it."""

import json

import pytest

import netns
from netns import SERVER_ADDR, TLS_PORT
from test_transparent import NAME, run

SECRET = "sk-transparent-7c1e0a93d54b28f6"
PAT = "ghp-transparent-0b9d4e2a61c7f835"


from netns import net  # noqa: E402,F401  (the test network, one per module)


CLIENT = r'''
import json, os, subprocess, sys
url = sys.argv[1]
out = {"token": os.environ.get("GH_TOKEN", "")}
def curl(*args):
    c = subprocess.run(["curl", "-sS", "--noproxy", "*", "--max-time", "20", *args],
                       capture_output=True, text=True, timeout=30)
    return c.stdout if c.returncode == 0 else "rc=%d %s" % (c.returncode, c.stderr)
# First by address, before the gate has answered any name with it.
out["direct_ip"] = curl("-k", "--resolve", "x.test:%s:%s" % (sys.argv[2], sys.argv[3]),
                        "-H", "Authorization: Bearer " + out["token"],
                        "https://x.test:%s/headers" % sys.argv[2])
out["headers"] = curl("-H", "Authorization: Bearer " + out["token"], url + "/headers")
print(json.dumps(out))
'''


def test_transparent_tls_to_a_terminated_route_is_terminated(airlock, net):
    d = airlock.make_dir("term")
    sf = d / "secrets.env"
    sf.write_text(f"API_KEY={SECRET}\nGH_PAT={PAT}\n")
    sf.chmod(0o600)
    airlock.chown(d)
    policy = {"network": {
        "routes": [{"name": "up", "upstream": f"https://{NAME}:{TLS_PORT}", "terminate": True,
                    "caFile": str(net.ca), "inject": {"x-api-key": "${secret:API_KEY}"}}],
        "sentinels": [{"env": "GH_TOKEN", "secret": "GH_PAT", "hosts": [NAME]}],
        "budget": {"rate": 0}}}
    r = run(airlock, net,
            f"python3 /workspace/c.py https://{NAME}:{TLS_PORT} {TLS_PORT} {SERVER_ADDR}",
            "--secrets", sf, "--allow", f"{SERVER_ADDR}:{TLS_PORT}",
            files={"c.py": CLIENT}, policy=policy, timeout=90)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert SECRET not in r.stdout and PAT not in r.stdout
    assert out["token"].startswith("airlock-sentinel-"), out
    # By name, with no proxy: terminated, the route's header injected and
    # the sentinel replaced, over TLS the client verified (no -k).
    assert not out["headers"].startswith("rc="), out
    seen = {k.lower(): v for k, v in json.loads(out["headers"])}
    # The upstream echoes what it got; the gate scrubs the secrets' values
    # from what comes back, so each shows as its mask.
    assert seen["x-api-key"] == "*" * len(SECRET), seen
    assert seen["authorization"] == "Bearer " + "*" * len(PAT), seen
    # To the address by an IP rule (no name): not the route's, so not
    # terminated, and the placeholder goes out unchanged.
    assert not out["direct_ip"].startswith("rc="), out
    raw = {k.lower(): v for k, v in json.loads(out["direct_ip"])}
    assert "x-api-key" not in raw, raw
    assert raw["authorization"] == "Bearer " + out["token"], raw
    term = [x for x in r.of("transparent", "allow")
            if x.get("rule") == "network.routes[up].terminate"]
    assert term and term[0]["host"] == NAME, r.records
