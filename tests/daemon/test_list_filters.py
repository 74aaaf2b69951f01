# SPDX-License-Identifier: Apache-2.0
"""GET /v1/sandboxes: pages (limit and the "next" token), filters by state
and metadata, and the CLI's `airlock ls --state --meta --limit` over them."""

import json
import os
import subprocess
import urllib.parse

import pytest

from daemonlib import AIRLOCK, AirlockError


def page(api, **params):
    q = urllib.parse.urlencode(params)
    return api._json("GET", "/v1/sandboxes" + ("?" + q if q else ""))


def cli(d, token, *args):
    env = dict(os.environ, AIRLOCK_SOCKET=str(d.socket), AIRLOCK_TOKEN=token)
    return subprocess.run([str(AIRLOCK)] + [str(a) for a in args], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.fixture
def five(make_daemon):
    d = make_daemon("--max-sandboxes", "16")
    api = d.client(d.admin)
    made = []
    for i in range(5):
        sb = api.create(sandbox_class="small",
                        metadata={"team": "a" if i % 2 == 0 else "b", "n": str(i)})
        made.append(sb["id"])
    return d, api, made


def test_pages_cover_every_sandbox_once_newest_first(five):
    d, api, made = five
    whole = page(api)
    assert whole["next"] is None
    assert [s["id"] for s in whole["sandboxes"]] == list(reversed(made))

    seen, token, pages = [], None, 0
    while True:
        params = {"limit": 2}
        if token:
            params["next"] = token
        p = page(api, **params)
        pages += 1
        assert len(p["sandboxes"]) <= 2
        seen += [s["id"] for s in p["sandboxes"]]
        token = p["next"]
        if token is None:
            break
    assert seen == list(reversed(made)) and pages == 3
    # A page that ends exactly at the last sandbox says so.
    assert page(api, limit=5)["next"] is None
    assert page(api, limit=4)["next"] is not None


def test_filters_with_pages(five):
    d, api, made = five
    team_a = [m for i, m in enumerate(made) if i % 2 == 0]
    p1 = page(api, **{"metadata.team": "a", "limit": 2})
    assert [s["id"] for s in p1["sandboxes"]] == list(reversed(team_a))[:2]
    p2 = page(api, **{"metadata.team": "a", "limit": 2, "next": p1["next"]})
    assert [s["id"] for s in p2["sandboxes"]] == list(reversed(team_a))[2:]
    assert p2["next"] is None
    assert page(api, **{"metadata.team": "a", "metadata.n": "2"})["sandboxes"][0]["id"] == made[2]
    assert page(api, **{"metadata.team": "c"})["sandboxes"] == []

    api.delete(made[0])
    running = [s["id"] for s in page(api, state="running")["sandboxes"]]
    assert made[0] not in running and set(made[1:]) <= set(running)
    gone = page(api, state="destroyed", **{"metadata.team": "a"})["sandboxes"]
    assert [s["id"] for s in gone] == [made[0]]


@pytest.mark.parametrize("params,field", [
    ({"next": "bogus"}, "next"),
    ({"next": "12-zzzzzzzzzzzzzzzz"}, "next"),
    ({"next": "-0123456789abcdef"}, "next"),
    ({"next": "99999999999999999999999-0123456789abcdef"}, "next"),
    ({"limit": 0}, "limit"),
    ({"state": "pooled"}, "state"),
    ({"colour": "red"}, "colour"),
])
def test_bad_queries(five, params, field):
    d, api, made = five
    with pytest.raises(AirlockError) as e:
        page(api, **params)
    assert e.value.status == 400 and field in json.dumps(e.value.body)
    if field == "next":
        assert "token" in e.value.message


def test_metadata_is_a_small_string_map(five):
    d, api, made = five
    for meta in ({"k": 1}, {"bad key": "v"}, {"k": "x" * 257},
                 {str(i): "v" for i in range(33)}, ["k"]):
        with pytest.raises(AirlockError) as e:
            api.create(sandbox_class="small", metadata=meta)
        assert e.value.status == 400 and "metadata" in json.dumps(e.value.body)


def test_cli_ls_pages_and_filters(five):
    d, api, made = five
    p = cli(d, d.admin, "ls", "--json")
    assert p.returncode == 0, p.stderr
    assert [s["id"] for s in json.loads(p.stdout)] == list(reversed(made))
    p = cli(d, d.admin, "ls", "--json", "--limit", "3")
    assert [s["id"] for s in json.loads(p.stdout)] == list(reversed(made))[:3]
    p = cli(d, d.admin, "ls", "--json", "--meta", "team=b", "--state", "running")
    assert sorted(s["id"] for s in json.loads(p.stdout)) == sorted([made[1], made[3]])
    p = cli(d, d.admin, "ls", "--limit", "0")
    assert p.returncode == 2 and "--limit" in p.stderr

