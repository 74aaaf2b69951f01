# SPDX-License-Identifier: Apache-2.0
"""The API's router (src/daemon/http/router.c): which path and method reach
which handler, and the exact 404 and 405 answers of the ones that reach
none. Pinned so that a change to the router table cannot change what a
client sees."""

import json

import pytest

SB = "0123456789abcdef"  # a well-formed id no sandbox has
LONG = "z" * 70


def call(api, method, path, body=None):
    status, headers, data = api.request(method, path, body=body, timeout=20)
    doc = json.loads(data) if data.strip() else None
    return status, headers, doc


NOT_FOUND = [
    ("GET", "/nope", "no such endpoint: /nope"),
    ("GET", "/healthz/", "no such endpoint: /healthz/"),
    ("GET", "/v1/sandboxesx", "no such endpoint: /v1/sandboxesx"),
    ("GET", "/v1/sandboxes/xyz", "no sandbox xyz"),
    ("POST", "/v1/sandboxes/xyz/exec", "no sandbox xyz"),
    ("GET", "/v1/sandboxes/xyz/nope/deeper", "no sandbox xyz"),
    ("GET", "/v1/sandboxes//exec", "no sandbox "),
    ("GET", "/v1/sandboxes/" + SB.upper(), "no sandbox " + SB.upper()),
    ("GET", "/v1/sandboxes/" + LONG, "no sandbox " + LONG[:64]),
    ("GET", "/v1/sandboxes/" + SB, "no sandbox " + SB),
    ("GET", f"/v1/sandboxes/{SB}/nope", f"no such endpoint: /v1/sandboxes/{SB}/nope"),
    ("POST", f"/v1/sandboxes/{SB}/exec/more", f"no such endpoint: /v1/sandboxes/{SB}/exec/more"),
    ("GET", f"/v1/sandboxes/{SB}/processes/x/events", "no process x"),
    ("GET", f"/v1/sandboxes/{SB}/processes/0/events", "no process 0"),
    ("GET", f"/v1/sandboxes/{SB}/processes/", "no process "),
    ("GET", f"/v1/sandboxes/{SB}/processes/12x", "no process 12x"),
    ("GET", f"/v1/sandboxes/{SB}/processes/5", f"no such endpoint: /v1/sandboxes/{SB}/processes/5"),
    ("GET", f"/v1/sandboxes/{SB}/processes/5/nope",
     f"no such endpoint: /v1/sandboxes/{SB}/processes/5/nope"),
]


@pytest.mark.parametrize("method,path,message", NOT_FOUND)
def test_not_found(api, method, path, message):
    status, _, doc = call(api, method, path)
    assert status == 404, (status, doc)
    assert doc == {"error": "not_found", "message": message}


NOT_ALLOWED = [
    ("POST", "/healthz", "GET"),
    ("DELETE", "/metrics", "GET"),
    ("PUT", "/v1/sandboxes", "GET, POST"),
    ("DELETE", "/v1/sandboxes/", "GET, POST"),
    ("POST", f"/v1/sandboxes/{SB}", "GET, DELETE"),
    ("GET", f"/v1/sandboxes/{SB}/ttl", "POST"),
    ("GET", f"/v1/sandboxes/{SB}/exec", "POST"),
    ("POST", f"/v1/sandboxes/{SB}/files", "GET, PUT, DELETE"),
    ("PUT", f"/v1/sandboxes/{SB}/files/list", "GET"),
    ("POST", f"/v1/sandboxes/{SB}/diff", "GET"),
    ("GET", f"/v1/sandboxes/{SB}/accept", "POST"),
    ("GET", f"/v1/sandboxes/{SB}/discard", "POST"),
    ("GET", f"/v1/sandboxes/{SB}/export", "POST"),
    ("GET", f"/v1/sandboxes/{SB}/push", "POST"),
    ("POST", f"/v1/sandboxes/{SB}/audit", "GET"),
    ("DELETE", f"/v1/sandboxes/{SB}/processes", "GET"),
    ("POST", f"/v1/sandboxes/{SB}/processes/5/events", "GET"),
    ("GET", f"/v1/sandboxes/{SB}/processes/5/stdin", "POST"),
    ("GET", f"/v1/sandboxes/{SB}/processes/5/signal", "POST"),
]


@pytest.mark.parametrize("method,path,allow", NOT_ALLOWED)
def test_method_not_allowed(api, method, path, allow):
    status, headers, doc = call(api, method, path)
    assert status == 405, (status, doc)
    assert headers.get("Allow") == allow
    assert doc == {"error": "method_not_allowed", "message": "use " + allow}


# Each endpoint reached with a sandbox no one has: the handler's own answer
# (a 404 naming the sandbox), which the router's would not be.
REACHED = [
    ("GET", f"/v1/sandboxes/{SB}"),
    ("DELETE", f"/v1/sandboxes/{SB}"),
    ("POST", f"/v1/sandboxes/{SB}/ttl", {"ttl": 60}),
    ("POST", f"/v1/sandboxes/{SB}/exec", {"argv": ["true"]}),
    ("GET", f"/v1/sandboxes/{SB}/files?path=x"),
    ("GET", f"/v1/sandboxes/{SB}/files/list?path=."),
    ("GET", f"/v1/sandboxes/{SB}/diff"),
    ("POST", f"/v1/sandboxes/{SB}/accept", {}),
    ("POST", f"/v1/sandboxes/{SB}/discard", {}),
    ("POST", f"/v1/sandboxes/{SB}/export", {}),
    ("GET", f"/v1/sandboxes/{SB}/audit"),
    ("GET", f"/v1/sandboxes/{SB}/processes"),
    ("GET", f"/v1/sandboxes/{SB}/processes/5/events"),
    ("POST", f"/v1/sandboxes/{SB}/processes/5/signal", {"signal": "TERM"}),
]


@pytest.mark.parametrize("req", REACHED, ids=lambda r: r[0] + " " + r[1].replace(SB, "{id}"))
def test_reaches_handler(api, req):
    method, path = req[0], req[1]
    status, _, doc = call(api, method, path, req[2] if len(req) > 2 else None)
    assert status == 404, (status, doc)
    assert doc["error"] == "not_found"
    assert SB in doc["message"] and "no such endpoint" not in doc["message"]


def test_collection(api):
    for path in ("/v1/sandboxes", "/v1/sandboxes/"):
        status, _, doc = call(api, "GET", path)
        assert status == 200 and isinstance(doc.get("sandboxes"), list), (path, status, doc)


def test_grant_before_route(shared_daemon):
    """No grant: 401 whatever the path, before the router says 404 or 405."""
    anon = shared_daemon.client("not-a-token")
    for method, path in (("GET", "/nope"), ("PUT", "/v1/sandboxes"), ("GET", "/healthz")):
        status, headers, doc = call(anon, method, path)
        assert status == 401 and doc["error"] == "unauthorized", (method, path, doc)
        assert headers.get("WWW-Authenticate") == "Bearer"


def test_query_before_route(api):
    status, _, doc = call(api, "GET", "/nope?a=%00")
    assert status == 400, doc
    assert doc == {"error": "bad_request", "message": "the query string is malformed"}
