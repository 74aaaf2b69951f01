# SPDX-License-Identifier: Apache-2.0
"""Attacks on the API's newer routes (capabilities, approvals, estop, runs,
the dashboard's session): every route goes through the router's grant
chokepoint, so acting on another grant's sandbox is a 404 whatever flags the
acting grant holds; reads follow the one rule for reads; a session cookie
never mints, never acts without its CSRF token and Origin; bodies are
bounded."""

import base64
import http.client
import json
import os
import socket
import tempfile

import pytest

from daemonlib import AirlockError, Daemon


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def d(daemon_base):
    port = free_port()
    d = Daemon(tempfile.mkdtemp(prefix="atk2-", dir=daemon_base), ["--listen", f"127.0.0.1:{port}"])
    d.admin = d.grant("admin", "--allow-sandbox", "--allow-exec", "--allow-capabilities",
                      "--allow-runs")
    d.host = f"127.0.0.1:{port}"
    d.start()
    yield d
    d.cleanup(d.admin)


@pytest.fixture(scope="module")
def victim(d):
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")
    yield sb["id"]
    try:
        c.delete(sb["id"])
    except (AirlockError, OSError):
        pass


def raw(d, method, path, headers=None, body=None):
    c = http.client.HTTPConnection(d.host, timeout=20)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def status(client, method, path, body=None):
    st, _, b = client.request(method, path, body=body, timeout=20)
    try:
        return st, json.loads(b) if b else {}
    except ValueError:
        return st, {}


def test_estop_on_another_grants_sandbox_is_not_found(d, victim):
    # allowSandbox alone is enough for the estop route, and the router's
    # ownership check must hold for it as for every acting route.
    for flags in (("--allow-sandbox",), ("--allow-exec",)):
        name = "estopper" + flags[0].replace("-", "")
        other = d.client(d.grant(name, *flags))
        st, b = status(other, "POST", f"/v1/sandboxes/{victim}/estop", {})
        assert (st, b.get("error")) == (404, "not_found"), (flags, st, b)


def test_capabilities_read_follows_the_rule_for_reads_change_does_not(d, victim):
    other = d.client(d.grant("capreader", "--allow-sandbox", "--allow-exec",
                             "--allow-capabilities"))
    # A read, like the record, files and audit lines: open to every grant
    # that holds the flag the request needs.
    st, b = status(other, "GET", f"/v1/sandboxes/{victim}/capabilities")
    assert st == 200 and "network" in b, (st, b)
    st, b = status(other, "POST", f"/v1/sandboxes/{victim}/capabilities",
                   {"revoke": [{"network": {"allow": "a.example.com"}}]})
    assert (st, b.get("error")) == (404, "not_found"), (st, b)
    # Without the flag: the 403 first, whoever made the sandbox.
    plain = d.client(d.grant("capless", "--allow-sandbox", "--allow-exec"))
    for m in ("GET", "POST"):
        st, b = status(plain, m, f"/v1/sandboxes/{victim}/capabilities", {} if m == "POST" else None)
        assert (st, b.get("permission")) == (403, "allowCapabilities"), (m, st, b)


def test_approvals_of_another_grants_sandbox_are_not_found(d, victim):
    other = d.client(d.grant("approver", "--allow-sandbox"))
    st, b = status(other, "GET", f"/v1/approvals?sandbox={victim}")
    assert (st, b.get("error")) == (404, "not_found"), (st, b)
    st, b = status(other, "POST", f"/v1/approvals/{victim}-1", {"decision": "allow-once"})
    assert (st, b.get("error")) == (404, "not_found"), (st, b)
    # Nothing of the request is judged before whose sandbox it is.
    for body in ({"decision": "bogus"}, {"other": 1}, [1]):
        st, b = status(other, "POST", f"/v1/approvals/{victim}-1", body)
        assert (st, b.get("error")) == (404, "not_found"), (body, st, b)
    st, b = status(other, "GET", "/v1/approvals")
    assert st == 200 and all(a["sandbox"] != victim for a in b["approvals"]), b


def test_runs_are_their_grants_and_ids_are_not_sandbox_ids(d, victim):
    other = d.client(d.grant("runner2", "--allow-runs"))
    # A sandbox's id is no run, and an unknown run is a 404, for every grant.
    for c in (other, d.client(d.admin)):
        for p in (f"/v1/runs/{victim}", f"/v1/runs/{victim}/events", "/v1/runs/0123456789abcdef",
                  "/v1/runs/..%2f..%2fgrants"):
            st, b = status(c, "GET", p)
            assert st == 404, (p, st, b)


def session(d, token):
    code = d.client(token)._json("POST", "/v1/ui/codes")["code"]
    st, h, _ = raw(d, "GET", f"/ui/login?code={code}", {"Sec-Fetch-Site": "none"})
    assert st == 303, st
    cookie = h["Set-Cookie"].split(";")[0]
    # The session's token goes to the page alone, in the redirect's fragment.
    assert h["Location"].startswith("/ui/#csrf="), h["Location"]
    csrf = h["Location"].split("#csrf=", 1)[1]
    assert len(csrf) == 64, csrf
    st, _, b = raw(d, "GET", "/v1/ui/session", {"Cookie": cookie, "X-Airlock-CSRF": csrf})
    assert st == 200, b
    assert json.loads(b)["csrf"] == csrf
    return cookie, csrf


def test_session_cookie_needs_csrf_and_origin_on_every_new_state_change(d, victim):
    cookie, csrf = session(d, d.admin)
    origin = f"http://{d.host}"
    body = json.dumps({}).encode()
    posts = [f"/v1/sandboxes/{victim}/estop", f"/v1/sandboxes/{victim}/capabilities",
             f"/v1/approvals/{victim}-1", "/v1/runs", "/v1/stop", "/v1/ui/logout"]
    for p in posts:
        for h in ({"Cookie": cookie},                                   # no Origin
                  {"Cookie": cookie, "Origin": origin},                 # no CSRF token
                  {"Cookie": cookie, "Origin": "http://evil.example", "X-Airlock-CSRF": csrf},
                  {"Cookie": cookie, "Origin": origin, "X-Airlock-CSRF": "0" * len(csrf)}):
            st, _, b = raw(d, "POST", p, dict(h, **{"Content-Type": "application/json"}), body)
            assert (st, json.loads(b)["error"]) == (403, "csrf_refused"), (p, h, st, b)
    # A read from another origin is refused too (its answer is the grant's).
    for p in (f"/v1/sandboxes/{victim}/capabilities", "/v1/approvals", "/v1/runs/0123456789abcdef"):
        st, _, b = raw(d, "GET", p, {"Cookie": cookie, "Origin": "http://evil.example",
                                     "X-Airlock-CSRF": csrf})
        assert st == 403, (p, st, b)
    # A session never mints what would outlive it, even with its CSRF token.
    st, _, b = raw(d, "POST", "/v1/ui/codes", {"Cookie": cookie, "Origin": origin,
                                               "X-Airlock-CSRF": csrf})
    assert (st, json.loads(b)["error"]) == (403, "authz_denied"), (st, b)
    # With both the state change goes through the grant's own checks.
    st, _, b = raw(d, "GET", f"/v1/sandboxes/{victim}/capabilities",
                   {"Cookie": cookie, "Origin": origin, "X-Airlock-CSRF": csrf})
    assert st == 200, b


def test_the_cookie_alone_reads_and_does_nothing(d):
    """A dashboard session's cookie alone is no credential. A browser sends the
    cookies of 127.0.0.1 to every port of 127.0.0.1: a page a sandbox serves
    through a port forward (POST .../ports, http://127.0.0.1:HOSTPORT) gets the
    session cookie in its request headers, HttpOnly or not, so the agent's
    server reads it. With the cookie alone a client that is not a browser (it
    sends whatever Origin it likes) read everything the grant may read, fetched
    the session's CSRF token from /v1/ui/session and then acted as the grant.
    The session's second half, its token, is handed to the dashboard's page
    only, in the login's redirect fragment (which no server sees), and every
    request of a session needs it: a header, or for the terminal's WebSocket
    the subprotocol "airlock.csrf.TOKEN"."""
    cookie, token = session(d, d.admin)
    sb = d.client(d.admin).create(sandbox_class="small")
    try:
        # What a client holding only the cookie sends: the daemon's own
        # Origin is one header among others to it.
        only = {"Cookie": cookie, "Origin": f"http://{d.host}"}
        for p in ("/v1/ui/session", "/v1/sandboxes", f"/v1/sandboxes/{sb['id']}",
                  f"/v1/sandboxes/{sb['id']}/audit", "/v1/events"):
            st, _, b = raw(d, "GET", p, only)
            assert st == 403 and json.loads(b)["error"] == "csrf_refused", (p, st, b[:200])
        st, _, b = raw(d, "POST", f"/v1/sandboxes/{sb['id']}/exec",
                       dict(only, **{"Content-Type": "application/json"}),
                       json.dumps({"cmd": ["/bin/true"]}).encode())
        assert st == 403, (st, b)
        key = base64.b64encode(os.urandom(16)).decode()
        ws = dict(only, Upgrade="websocket", Connection="Upgrade",
                  **{"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": key})
        st, _, b = raw(d, "GET", f"/v1/sandboxes/{sb['id']}/processes/1/pty", ws)
        assert st == 403, (st, b)

        # The page's half (in the login's redirect fragment: session()).
        with_token = dict(only, **{"X-Airlock-CSRF": token})
        st, _, b = raw(d, "GET", "/v1/ui/session", with_token)
        assert st == 200 and json.loads(b)["grant"] == "admin", (st, b)
        st, _, b = raw(d, "GET", f"/v1/sandboxes/{sb['id']}", with_token)
        assert st == 200, (st, b)
        # A wrong token is no token.
        st, _, b = raw(d, "GET", "/v1/sandboxes", dict(only, **{"X-Airlock-CSRF": "0" * 64}))
        assert st == 403, (st, b)
        # The terminal's WebSocket carries it as a subprotocol, and the
        # daemon names the one it speaks.
        st, h, b = raw(d, "GET", f"/v1/sandboxes/{sb['id']}/processes/1/pty",
                       dict(ws, **{"Sec-WebSocket-Protocol": "airlock.csrf.0" + token[1:]}))
        assert st == 403, (st, b)
        c = http.client.HTTPConnection(d.host, timeout=20)
        try:
            c.request("GET", f"/v1/sandboxes/{sb['id']}/processes/1/pty",
                      headers=dict(ws, **{"Sec-WebSocket-Protocol": f"airlock, airlock.csrf.{token}"}))
            r = c.getresponse()
            # Past the session's checks: the process is not the grant's
            # terminal (no such process), or the upgrade is made.
            assert r.status != 403, (r.status, r.read())
            if r.status == 101:
                assert r.getheader("Sec-WebSocket-Protocol") == "airlock"
        finally:
            c.close()
    finally:
        d.client(d.admin).delete(sb["id"])


def test_bodies_of_new_routes_are_bounded(d, victim):
    c = d.client(d.admin)
    big = b'{"x": "' + b"a" * (2 << 20) + b'"}'
    for p in (f"/v1/sandboxes/{victim}/capabilities", f"/v1/approvals/{victim}-1", "/v1/runs",
              f"/v1/sandboxes/{victim}/estop"):
        try:
            st, _, _ = c.request("POST", p, body=big, content_type="application/json", timeout=20)
        except (BrokenPipeError, ConnectionResetError):
            continue  # refused before the body was read: bounded too
        # estop reads no body: its answer is the sandbox's (no hardware).
        assert st == (409 if p.endswith("/estop") else 413), (p, st)
    # The daemon is still up and answers.
    assert c.get(victim)["id"] == victim


def test_run_stream_ends_when_its_grant_is_revoked(d):
    # A model that takes the connection and never answers: the run goes on,
    # its event stream stays open with nothing to say.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    tok = d.grant("revokedrunner", "--allow-runs", "--allow-host-workspace")
    c = d.client(tok)
    try:
        run = c.create_run("t", "m", {"network": {"routes": [
            {"name": "model", "upstream": f"http://127.0.0.1:{port}"}],
            "allowPrivate": ["127.0.0.1"]}}, timeout=60)
        conn, resp = c._open("GET", f"/v1/runs/{run['id']}/events", timeout=10)
        assert resp.status == 200
        d.revoke("revokedrunner")
        # The stream ends (an "end" event naming the revocation), well
        # before the run would.
        data = resp.read()
        conn.close()
        assert b"event: end" in data and b"revoked" in data, data[-300:]
        # And the run is no longer this token's to read.
        st, _ = status(c, "GET", f"/v1/runs/{run['id']}")
        assert st == 401
    finally:
        srv.close()


def test_runs_count_against_max_sandboxes(d):
    # Each run is a sandbox: a grant held to one live sandbox does not get
    # a second (nor a hundredth) by asking for runs.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    pol = {"network": {"routes": [{"name": "model", "upstream": f"http://127.0.0.1:{port}"}],
                       "allowPrivate": ["127.0.0.1"]}}
    c = d.client(d.grant("onerun", "--allow-runs", "--allow-host-workspace", "--allow-sandbox", "--max-sandboxes", "1"))
    try:
        run = c.create_run("t", "m", pol, timeout=20)
        with pytest.raises(AirlockError) as e:
            c.create_run("t", "m", pol, timeout=20)
        assert (e.value.status, e.value.error) == (429, "too_many_sandboxes"), e.value
        assert e.value.body["limit"] == "grant.maxSandboxes"
        with pytest.raises(AirlockError) as e:
            c.create(sandbox_class="small")
        assert (e.value.status, e.value.error) == (429, "too_many_sandboxes"), e.value
    finally:
        srv.close()
    # The model gone, the run ends, and its place is free again.
    from daemonlib import wait_for
    wait_for(lambda: c.get_run(run["id"])["state"] == "done", timeout=25, what="the run to end")

    def create():
        try:
            return c.create(sandbox_class="small")
        except AirlockError as e:
            assert e.status == 429, e
            return None  # the agent wrote its result and is still exiting
    sb = wait_for(create, timeout=10, what="the run's place to be free")
    c.delete(sb["id"])


def test_tier_on_create_is_never_served_from_the_warm_pool(make_daemon):
    # The pool holds namespace sandboxes: a create that names another tier
    # must start one of that tier, never be handed a weaker pooled one.
    import os
    import subprocess
    from daemonlib import wait_for
    if not os.access("/usr/bin/runsc", os.X_OK):
        pytest.skip("runsc is not installed")
    dd = make_daemon("--pool", "small=1")
    c = dd.client(dd.admin)
    wait_for(lambda: any(line == "airlock_pool_ready 1" for line in c.metrics().splitlines()),
             timeout=30, what="the pool to fill")
    pooled = set(dd.supervisors())
    sb = c._json("POST", "/v1/sandboxes", {"class": "small", "tier": "gvisor"})
    try:
        assert sb["id"] not in pooled and sb["tier"] == "gvisor", sb
        host = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
        out = c.run(sb["id"], ["/bin/uname", "-r"])
        assert out.stdout.strip() and out.stdout.decode().strip() != host, out
    finally:
        c.delete(sb["id"])
