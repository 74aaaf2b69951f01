# SPDX-License-Identifier: Apache-2.0
"""A login code from grant A must not log in a browser that did not ask for
it (login CSRF): a link or a form on another site that leads a browser to
/ui/login?code=... gets a page to confirm, never a session. The session is
given when the user opened the address themselves (Sec-Fetch-Site: none),
or from that page, with the nonce its Strict cookie carries."""

import http.client
import re
import socket
import tempfile

import pytest

from daemonlib import Daemon


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def d(daemon_base):
    port = free_port()
    d = Daemon(tempfile.mkdtemp(prefix="uicsrf-", dir=daemon_base), ["--listen", f"127.0.0.1:{port}"])
    d.admin = d.grant("admin", "--allow-sandbox")
    d.host = f"127.0.0.1:{port}"
    d.start()
    yield d
    d.cleanup(d.admin)


def raw(d, path, headers):
    c = http.client.HTTPConnection(d.host, timeout=20)
    try:
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        return r.status, r.getheader("Set-Cookie") or "", r.getheaders(), r.read().decode()
    finally:
        c.close()


def code(d):
    return d.client(d.admin)._json("POST", "/v1/ui/codes")["code"]


def test_a_code_from_another_site_gives_no_session(d):
    c = code(d)
    for fetch_site in ({"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}, {}):
        st, ck, _, body = raw(d, f"/ui/login?code={c}", fetch_site)
        assert "airlock_session=" not in ck, (fetch_site, st, ck)
        assert st == 200 and "<form" in body, (fetch_site, st)
    # The confirmation needs the nonce of the browser it was shown to: a
    # guess, or the right one without its cookie (another site's form), no.
    st, ck, headers, body = raw(d, f"/ui/login?code={c}", {"Sec-Fetch-Site": "cross-site"})
    nonce = re.search(r'name="nonce" value="([0-9a-f]{64})"', body).group(1)
    login_cookie = [v.split(";")[0] for k, v in headers if k.lower() == "set-cookie"
                    and v.startswith("airlock_login=")][0]
    assert "SameSite=Strict" in ck and "HttpOnly" in ck
    for h in ({"Sec-Fetch-Site": "cross-site"},
              {"Sec-Fetch-Site": "same-origin", "Cookie": "airlock_login=" + "0" * 64},
              {"Sec-Fetch-Site": "cross-site", "Cookie": login_cookie}):
        st, ck, _, _ = raw(d, f"/ui/login?code={c}&nonce={nonce}", h)
        assert "airlock_session=" not in ck, (h, st, ck)
    # From the page itself, with its cookie: logged in, once.
    st, ck, _, _ = raw(d, f"/ui/login?code={c}&nonce={nonce}",
                       {"Sec-Fetch-Site": "same-origin", "Cookie": login_cookie})
    assert st == 303 and "airlock_session=" in ck, (st, ck)
    st, ck, _, _ = raw(d, f"/ui/login?code={c}&nonce={nonce}",
                       {"Sec-Fetch-Site": "same-origin", "Cookie": login_cookie})
    assert st == 401 and "airlock_session=" not in ck


def test_an_address_the_user_opened_logs_in(d):
    st, ck, _, _ = raw(d, f"/ui/login?code={code(d)}", {"Sec-Fetch-Site": "none"})
    assert st == 303 and ck.startswith("airlock_session="), (st, ck)


def test_a_forged_code_is_never_put_in_the_page(d):
    st, ck, _, body = raw(d, "/ui/login?code=%3Cscript%3E", {"Sec-Fetch-Site": "cross-site"})
    assert st in (400, 401) and "<script>" not in body and "airlock_session=" not in ck
