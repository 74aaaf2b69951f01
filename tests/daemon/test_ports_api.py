# SPDX-License-Identifier: Apache-2.0
"""/v1/sandboxes/{id}/ports: a server inside a daemon's sandbox served on the
host through a forward its supervisor owns; listed, closed one by one, all
gone with the sandbox."""

import json
import socket
import subprocess
import time

import pytest

from daemonlib import AirlockError


def curl_until(port, path, deadline_s=20):
    end = time.monotonic() + deadline_s
    while True:
        r = subprocess.run(["curl", "-sS", "-m", "3", f"http://127.0.0.1:{port}{path}"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode == 0 or time.monotonic() > end:
            return r
        time.sleep(0.3)


def refused(port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(("127.0.0.1", port))
        return False
    except ConnectionRefusedError:
        return True
    finally:
        s.close()


def serve(api, sid, port=8000):
    api.write_file(sid, "hello.txt", b"served by the sandbox\n")
    api.exec_background(sid, ["python3", "-m", "http.server", "--bind", "127.0.0.1", str(port)])


def test_open_list_fetch_close(shared_daemon, api, sandbox):
    sid = sandbox["id"]
    serve(api, sid)
    fwd = api.open_port(sid, 8000)
    assert fwd["port"] == 8000 and fwd["bind"] == "127.0.0.1" and fwd["hostPort"] > 0
    host = fwd["hostPort"]
    r = curl_until(host, "/hello.txt")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "served by the sandbox\n"

    listed = api.ports(sid)
    assert [(p["port"], p["hostPort"]) for p in listed] == [(8000, host)]
    assert listed[0]["accepted"] >= 1

    with pytest.raises(AirlockError) as e:
        api._json("POST", f"/v1/sandboxes/{sid}/ports", {"port": 8000})
    assert e.value.status == 409 and e.value.error == "port_unavailable"

    closed = api.close_port(sid, 8000)
    assert closed == {"port": 8000, "closed": True}
    assert refused(host)
    assert api._json("GET", f"/v1/sandboxes/{sid}/ports")["ports"] == []
    with pytest.raises(AirlockError) as e:
        api._json("DELETE", f"/v1/sandboxes/{sid}/ports/8000")
    assert e.value.status == 404 and e.value.error == "unknown_port"

    kinds = [e["kind"] for e in api.audit(sid)]
    for k in ("api.port_open", "port.opened", "port.connect", "api.port_close", "port.closed"):
        assert k in kinds, (k, kinds)
    conn = [e for e in api.audit(sid) if e["kind"] == "port.connect"][-1]
    assert conn["result"] == "closed" and conn["bytesFromSandbox"] > 0
    assert conn["peer"].startswith("127.0.0.1:")


def test_forwards_close_with_the_sandbox(api):
    sb = api.create(sandbox_class="small")
    sid = sb["id"]
    serve(api, sid, 8001)
    host = api._json("POST", f"/v1/sandboxes/{sid}/ports", {"port": 8001})["hostPort"]
    assert curl_until(host, "/hello.txt").returncode == 0
    api.delete(sid)
    assert refused(host)
    with pytest.raises(AirlockError) as e:
        api._json("GET", f"/v1/sandboxes/{sid}/ports")
    assert e.value.status == 409


@pytest.mark.parametrize("body,field", [
    ({}, "port"),
    ({"port": 0}, "port"),
    ({"port": 70000}, "port"),
    ({"port": "80"}, "port"),
    ({"port": 80, "hostPort": -1}, "hostPort"),
    ({"port": 80, "bind": 1}, "bind"),
    ({"port": 80, "extra": 1}, "extra"),
])
def test_bad_bodies(api, sandbox, body, field):
    with pytest.raises(AirlockError) as e:
        api._json("POST", f"/v1/sandboxes/{sandbox['id']}/ports", body)
    assert e.value.status == 400
    assert field in json.dumps(e.value.body)


def test_bad_bind_address_and_gate_port(api, sandbox):
    sid = sandbox["id"]
    with pytest.raises(AirlockError) as e:
        api._json("POST", f"/v1/sandboxes/{sid}/ports", {"port": 80, "bind": "example.com"})
    assert e.value.status == 400 and "bind" in e.value.message


def test_delete_port_out_of_range(api, sandbox):
    with pytest.raises(AirlockError) as e:
        api._json("DELETE", f"/v1/sandboxes/{sandbox['id']}/ports/70000")
    assert e.value.status == 404 and e.value.message == "no port 70000"


def test_needs_allow_sandbox(shared_daemon, sandbox):
    tok = shared_daemon.grant("execonly-ports", "--allow-exec")
    c = shared_daemon.client(tok)
    with pytest.raises(AirlockError) as e:
        c._json("POST", f"/v1/sandboxes/{sandbox['id']}/ports", {"port": 8000})
    assert e.value.status == 403
    with pytest.raises(AirlockError) as e:
        c._json("DELETE", f"/v1/sandboxes/{sandbox['id']}/ports/8000")
    assert e.value.status == 403


def test_forwards_outlive_a_daemon_restart(make_daemon):
    """The supervisor owns the forward: a daemon restart re-attaches to the
    sandbox and finds it still served."""
    d = make_daemon()
    api = d.client(d.admin)
    sid = api.create(sandbox_class="small")["id"]
    serve(api, sid, 8002)
    host = api.open_port(sid, 8002)["hostPort"]
    assert curl_until(host, "/hello.txt").returncode == 0
    d.stop()
    assert curl_until(host, "/hello.txt").stdout == "served by the sandbox\n"
    d.start()
    api = d.client(d.admin)
    assert [p["hostPort"] for p in api.ports(sid)] == [host]
    api.delete(sid)
    assert refused(host)


def test_client_pages(make_daemon):
    d = make_daemon()
    api = d.client(d.admin)
    ids = [api.create(sandbox_class="small")["id"] for _ in range(3)]
    got, token = api.list_page(limit=2)
    assert len(got) == 2 and token
    more, token = api.list_page(limit=2, next_token=token)
    assert token is None
    assert [s["id"] for s in got + more] == list(reversed(ids))
