# SPDX-License-Identifier: Apache-2.0
"""The Python and JavaScript clients' methods for capabilities (read, grant,
revoke), approvals (list, decide) and the emergency stop, against a real
daemon."""

import http.server
import json
import pathlib
import shutil
import socketserver
import subprocess
import threading

import pytest

from daemonlib import AirlockError, wait_for

FETCH = ("import urllib.request,sys\n"
         "try:\n"
         "    print(urllib.request.urlopen(sys.argv[1], timeout=30).status)\n"
         "except Exception as e:\n"
         "    print(getattr(e, 'code', e))\n")


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def upstream():
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Hello)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()


@pytest.fixture(scope="module")
def capper(shared_daemon):
    tok = shared_daemon.grant("clientcaps", "--allow-sandbox", "--allow-host-workspace", "--allow-exec",
                              "--allow-capabilities")
    c = shared_daemon.client(tok)
    c.tok = tok
    return c


@pytest.fixture(scope="module")
def asking(capper, upstream):
    policy = {"network": {"mode": "gated", "onUnlisted": "ask", "allow": ["a.example.com"],
                          "allowPrivate": ["127.0.0.0/8"], "hosts": {"up.test": "127.0.0.1"}},
              "ask": {"timeout": 30}}
    sb = capper.create(policy=policy, sandbox_class="small")
    yield sb["id"]
    try:
        capper.delete(sb["id"])
    except (AirlockError, OSError):
        pass


def test_python_client(capper, asking, upstream):
    sid = asking
    assert capper.capabilities(sid)["network"]["allow"] == ["a.example.com"]
    caps = capper.grant_capabilities(sid, {"network": {"allow": "b.example.com:443"}})
    assert caps["network"]["allow"] == ["a.example.com", "b.example.com:443"], caps
    caps = capper.revoke_capabilities(sid, {"network": {"allow": "a.example.com"}})
    assert caps["network"]["allow"] == ["b.example.com:443"], caps
    caps = capper.change_capabilities(sid, grant=[{"env": {"name": "X", "value": "1"}}],
                                      revoke=[{"network": {"allow": "b.example.com:443"}}])
    assert caps["network"]["allow"] == [] and caps["env"] == {"X": "1"}, caps
    with pytest.raises(AirlockError) as e:
        capper.grant_capabilities(sid, {"bogus": 1})
    assert e.value.status == 400

    pid = capper.exec_background(sid, ["python3", "-c", FETCH, f"http://up.test:{upstream}/"])
    [a] = wait_for(lambda: capper.approvals(sid), timeout=20, what="an approval")
    assert a["sandbox"] == sid and a["kind"] == "network", a
    capper.decide_approval(a["id"], "allow-once")
    r = capper.collect(capper.events(sid, pid))
    assert r.stdout.strip() == b"200", (r.stdout, r.stderr)
    assert capper.approvals(sid) == []
    with pytest.raises(AirlockError) as e:
        capper.decide_approval(a["id"], "deny")
    assert e.value.status == 404

    with pytest.raises(AirlockError) as e:
        capper.estop(sid)
    assert (e.value.status, e.value.error) == (409, "no_hardware")


JS = """
import { Client } from %s;
const [sock, token, sid, port] = process.argv.slice(2);
const c = new Client({ socketPath: sock, token });
const out = {};
out.read = (await c.capabilities(sid)).network.allow;
out.granted = (await c.grantCapabilities(sid, { network: { allow: "c.example.com:443" } })).network.allow;
out.revoked = (await c.revokeCapabilities(sid, { network: { allow: "c.example.com:443" } })).network.allow;
out.changed = (await c.changeCapabilities(sid, { grant: [{ env: { name: "Y", value: "2" } }] })).env;
await c.execBackground(sid, ["python3", "-c", %s, `http://up.test:${port}/js`]);
let list = [];
for (let i = 0; i < 200 && !list.length; i++) {
  list = await c.approvals(sid);
  if (!list.length) await new Promise((r) => setTimeout(r, 100));
}
out.kind = list.length ? list[0].kind : null;
if (list.length) await c.decideApproval(list[0].id, "deny");
out.after = (await c.approvals(sid)).length;
try { await c.estop(sid); out.estop = "ok"; } catch (e) { out.estop = `${e.status} ${e.error}`; }
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")
def test_js_client(shared_daemon, capper, asking, upstream, tmp_path):
    index = pathlib.Path(__file__).resolve().parent.parent.parent / "clients/js/index.js"
    script = tmp_path / "new_routes.mjs"
    script.write_text(JS % (json.dumps(index.as_uri()), json.dumps(FETCH)))
    p = subprocess.run(["node", str(script), str(shared_daemon.socket), capper.tok, asking,
                        str(upstream)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["revoked"] == [c for c in out["granted"] if c != "c.example.com:443"], out
    assert "c.example.com:443" in out["granted"], out
    assert out["changed"].get("Y") == "2", out
    assert (out["kind"], out["after"]) == ("network", 0), out
    assert out["estop"] == "409 no_hardware", out
