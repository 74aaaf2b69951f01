# SPDX-License-Identifier: Apache-2.0
"""GET /v1/approvals and POST /v1/approvals/{id} (docs/api.md,
"Approvals"): a sandbox whose policy asks holds an unlisted request; the
grant that made it lists and decides it; another grant sees nothing and
decides nothing; bad ids and decisions are refused; the decision is in the
audit with the grant's name."""

import http.server
import json
import socketserver
import threading
import time

import pytest

from daemonlib import wait_for


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def upstream():
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Hello)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()


FETCH = ("import urllib.request,sys\n"
         "try:\n"
         "    print(urllib.request.urlopen(sys.argv[1], timeout=60).status)\n"
         "except Exception as e:\n"
         "    print(getattr(e, 'code', e))\n")


def asking(port):
    return {"network": {"mode": "gated", "onUnlisted": "ask", "allow": [f"listed.test:{port}"],
                        "allowPrivate": ["127.0.0.0/8"], "hosts": {"up.test": "127.0.0.1"}},
            "ask": {"timeout": 30}}


def get(c, path):
    status, _, body = c.request("GET", path)
    return status, json.loads(body)


def post(c, path, doc):
    status, _, body = c.request("POST", path, doc)
    return status, json.loads(body)


def test_list_and_decide(shared_daemon, api, upstream):
    sb = api.create(policy=asking(upstream), sandbox_class="small")
    sid = sb["id"]
    try:
        pid = api.exec_background(sid, ["python3", "-c", FETCH, f"http://up.test:{upstream}/"])
        items = wait_for(lambda: get(api, "/v1/approvals")[1]["approvals"], what="an approval")
        [a] = [x for x in items if x["sandbox"] == sid]
        assert a["kind"] == "network" and a["host"] == "up.test" and a["port"] == upstream, a
        assert a["id"].startswith(sid + "-")
        st, only = get(api, f"/v1/approvals?sandbox={sid}")
        assert st == 200 and [x["id"] for x in only["approvals"]] == [a["id"]]

        # Another grant: no list, no decision (even with allowSandbox).
        other = shared_daemon.client(shared_daemon.grant(f"other{time.monotonic_ns()}",
                                                         "--allow-sandbox"))
        assert [x for x in get(other, "/v1/approvals")[1]["approvals"] if x["sandbox"] == sid] == []
        assert get(other, f"/v1/approvals?sandbox={sid}")[0] == 404
        assert post(other, f"/v1/approvals/{a['id']}", {"decision": "allow-once"})[0] == 404
        # A grant without allowSandbox is refused first.
        reader = shared_daemon.client(shared_daemon.grant(f"reader{time.monotonic_ns()}"))
        assert get(reader, "/v1/approvals")[0] == 403
        assert post(reader, f"/v1/approvals/{a['id']}", {"decision": "deny"})[0] == 403

        # Bad input.
        assert post(api, f"/v1/approvals/{a['id']}", {"decision": "yes"})[0] == 400
        assert post(api, f"/v1/approvals/{a['id']}", {"decision": "deny", "x": 1})[0] == 400
        assert post(api, "/v1/approvals/nonsense", {"decision": "deny"})[0] == 404
        assert post(api, f"/v1/approvals/{sid}-999", {"decision": "deny"})[0] == 404

        st, d = post(api, f"/v1/approvals/{a['id']}", {"decision": "allow-once"})
        assert st == 200 and d["decision"] == "allow-once" and d["decidedBy"].startswith("grant:"), d
        r = api.collect(api.events(sid, pid))
        assert "200" in str(r.stdout), r.events
        assert post(api, f"/v1/approvals/{a['id']}", {"decision": "deny"})[0] == 404

        log = [json.loads(line) for line in shared_daemon.audit.read_text().splitlines()]
        dec = [e for e in log if e["sandbox"] == sid and e["kind"] == "approval.decided"]
        assert [(e["id"], e["decision"], e["by"]) for e in dec] == [
            (a["id"], "allow-once", d["decidedBy"])], dec
    finally:
        api.delete(sid)


def test_tool_asks_are_refused_through_the_api(api):
    status, _, body = api.request("POST", "/v1/sandboxes", {
        "policy": {"tools": {"onUnlisted": "ask"}}, "class": "small"})
    assert status == 403 and b"tools.onUnlisted" in body, (status, body)
