# SPDX-License-Identifier: Apache-2.0
"""Which path a transparent connection takes. The direct path (the host's
own connected socket in the sandbox's hands, no relay) is the default where
nothing needs the bytes: no byte budget, no rate, and no name whose TLS
server name the relay must check. A connection allowed by a name goes
through the relay (counted, SNI-checked) unless network.directPath waives
the check. A record's byte counts tell the paths apart: the relay counts,
the direct path cannot."""

import pytest

import netns
from netns import HTTP_PORT, OTHER_PORT, SERVER_ADDR
from test_transparent import NAME, run

NORATE = {"network": {"budget": {"rate": 0}}}


from netns import net  # noqa: E402,F401  (the test network, one per module)


def fetch(airlock, net, url, *opts, policy=NORATE):
    r = run(airlock, net, f"curl -sS -o /dev/null --noproxy '*' --max-time 10 {url}", *opts,
            policy=policy, timeout=60)
    assert r.returncode == 0, r.stderr
    allowed = r.of("transparent", "allow")
    assert allowed, r.records
    return allowed


def test_ip_rule_goes_direct_by_default(airlock, net):
    allowed = fetch(airlock, net, f"http://{SERVER_ADDR}:{OTHER_PORT}/hello.txt",
                    "--allow", f"{SERVER_ADDR}:{OTHER_PORT}")
    assert all(d["bytesDown"] == 0 for d in allowed), allowed


def test_name_goes_through_the_relay_by_default(airlock, net):
    allowed = fetch(airlock, net, f"http://{NAME}:{HTTP_PORT}/hello.txt")
    assert all(d["bytesDown"] > 0 for d in allowed), allowed


def test_a_rate_takes_an_ip_rule_through_the_relay(airlock, net):
    allowed = fetch(airlock, net, f"http://{SERVER_ADDR}:{OTHER_PORT}/hello.txt",
                    "--allow", f"{SERVER_ADDR}:{OTHER_PORT}", policy=None)
    assert all(d["bytesDown"] > 0 for d in allowed), allowed
