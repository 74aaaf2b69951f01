# SPDX-License-Identifier: Apache-2.0
"""The gate connects from the daemon host's own network namespace: a
sandbox whose policy lifts the private-address check (network.allowPrivate)
reaches the host's loopback services, the cloud metadata address
(169.254.169.254) and the host's LAN. Through the API that is host power,
as host paths are: it needs a grant with allowHostWorkspace, in a create,
a run, and whatever the sandbox's class."""

import http.server
import threading

import pytest

from daemonlib import AirlockError


@pytest.fixture
def host_service():
    """A service on the host's loopback only, as many trust localhost."""
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"host-only-secret"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()


def reach(port):
    return {"network": {"allow": [f"hostsvc.test:{port}"], "allowPrivate": ["127.0.0.1"],
                        "hosts": {"hostsvc.test": "127.0.0.1"}}}


def test_allow_private_needs_host_rights(make_daemon, host_service):
    d = make_daemon()
    c = d.client(d.grant("plain", "--allow-sandbox", "--allow-exec"))
    try:
        sb = c.create(sandbox_class="small", policy=reach(host_service))
    except AirlockError as e:
        assert (e.status, e.body.get("limit")) == (403, "allowHostWorkspace"), e.body
        assert "allowPrivate" in e.body["message"], e.body
    else:
        r = c.run(sb["id"], ["sh", "-c", f"curl -s -m 5 http://hostsvc.test:{host_service}/"])
        c.delete(sb["id"])
        pytest.fail(f"a grant without host rights may reach the host's loopback: {r.stdout!r}")
    with pytest.raises(AirlockError) as e:
        c.create(sandbox_class="small",
                 policy={"network": {"allow": ["169.254.169.254:80"],
                                     "allowPrivate": ["169.254.0.0/16"]}})
    assert (e.value.status, e.value.body.get("limit")) == (403, "allowHostWorkspace")
    # With host rights it is the operator's choice, and it works.
    admin = d.client(d.admin)
    sb = admin.create(sandbox_class="small", policy=reach(host_service))
    r = admin.run(sb["id"], ["sh", "-c", f"curl -s -m 5 http://hostsvc.test:{host_service}/"])
    admin.delete(sb["id"])
    assert b"host-only-secret" in (r.stdout if isinstance(r.stdout, bytes) else r.stdout.encode())
