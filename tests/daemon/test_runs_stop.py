# SPDX-License-Identifier: Apache-2.0
"""The kill switch and a grant's revocation reach the host-owned agent runs
(POST /v1/runs) as they reach sandboxes: the agent and its sandbox are
stopped, the run ends with errorCode "stopped", and the daemon's audit log
says who stopped it (run.stopped)."""

import json
import pathlib
import socket
import subprocess
import sys
import time


sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from agentlib import ScriptedModel  # noqa: E402


def policy(port):
    return {"network": {"routes": [{"name": "model", "upstream": f"http://127.0.0.1:{port}",
                                    "inject": {"x-api-key": "${secret:MODEL_KEY}"}}],
                        "allowPrivate": ["127.0.0.1"]}}


def _sleeping(tag):
    p = subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True, text=True)
    return p.stdout.split()


def _wait(cond, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(what)


def _start(d, c, m, tag):
    run = c.create_run("sleep", "test-model", policy(m.port), max_turns=5)
    _wait(lambda: _sleeping(tag), 30, "the run's tool call never started")
    return run["id"]


def _result(d, rid):
    path = d.state / "runs" / rid / "result.json"
    _wait(path.exists, 15, "the stopped run has no result")
    return json.loads(path.read_text())


def _audit(d, rid, kind):
    return [e for e in (json.loads(line) for line in d.audit.read_text().splitlines() if line.strip())
            if e.get("sandbox") == rid and e.get("kind") == kind]


def _events_of(d, token, query, needle, timeout=10):
    """GET /v1/events?QUERY as raw bytes, until needle is seen or the time is up."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect(str(d.socket))
    s.sendall(("GET /v1/events?%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
               % (query, token)).encode())
    data = b""
    end = time.monotonic() + timeout
    try:
        while needle not in data and time.monotonic() < end:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    return data


def test_stop_all_stops_the_grants_runs(run_daemon):
    d = run_daemon
    c = d.client(d.grant("runner", "--allow-runs", "--allow-host-workspace", "--secret", "MODEL_KEY"))
    tag = "47.31"
    script = [{"calls": [("bash", {"command": f"sleep {tag}; echo late"})]}, {"text": "done"}]
    with ScriptedModel(script) as m:
        rid = _start(d, c, m, tag)
        t0 = time.monotonic()
        status, _, body = c.request("POST", "/v1/stop", {"all": True})
        assert status == 200, body
        entries = {e["id"]: e for e in json.loads(body)["stopped"]}
        assert entries[rid]["how"] == "run" and entries[rid]["stopped"] is True, entries
        _wait(lambda: not _sleeping(tag), 10, "the run's sandbox outlived the kill switch")
        assert time.monotonic() - t0 < 10
        res = _result(d, rid)
        assert res["ok"] is False and res["errorCode"] == "stopped", res
        assert c.get_run(rid)["state"] == "done"
        (rec,) = _audit(d, rid, "run.stopped")
        assert rec["by"] == "grant:runner" and rec["grant"] == "runner", rec
        # The grant's event stream carries its runs' lines, this one too.
        data = _events_of(d, c.token, "kind=run.stopped&lastEventId=0", rid.encode())
        assert rid.encode() in data and b'"run.stopped"' in data, data[-500:]


def test_another_grants_run_is_not_stopped(run_daemon):
    d = run_daemon
    c = d.client(d.grant("runner3", "--allow-runs", "--allow-host-workspace", "--secret", "MODEL_KEY"))
    other = d.client(d.grant("other3", "--allow-runs", "--allow-sandbox"))
    tag = "47.33"
    script = [{"calls": [("bash", {"command": f"sleep {tag}; echo late"})]}, {"text": "done"}]
    with ScriptedModel(script) as m:
        rid = _start(d, c, m, tag)
        status, _, body = other.request("POST", "/v1/stop", {"ids": [rid]})
        assert status == 200, body
        assert json.loads(body)["stopped"][0]["how"] == "not_found"
        other.request("POST", "/v1/stop", {"all": True})
        time.sleep(1)
        assert _sleeping(tag), "another grant's stop reached the run"
        status, _, body = c.request("POST", "/v1/stop", {"ids": [rid]})
        assert json.loads(body)["stopped"][0]["how"] == "run", body
        _wait(lambda: not _sleeping(tag), 10, "the run's sandbox outlived the kill switch")


def test_revoking_the_grant_stops_its_runs(run_daemon):
    d = run_daemon
    c = d.client(d.grant("runner2", "--allow-runs", "--allow-host-workspace", "--secret", "MODEL_KEY"))
    tag = "47.32"
    script = [{"calls": [("bash", {"command": f"sleep {tag}; echo late"})]}, {"text": "done"}]
    with ScriptedModel(script) as m:
        rid = _start(d, c, m, tag)
        d.revoke("runner2")
        _wait(lambda: not _sleeping(tag), 10, "a revoked grant's run went on")
        res = _result(d, rid)
        assert res["ok"] is False and res["errorCode"] == "stopped", res
        assert "revoked" in res["message"], res
        (rec,) = _audit(d, rid, "run.stopped")
        assert rec["grant"] == "runner2" and rec["by"] == "daemon", rec
        assert "revoked" in rec["reason"], rec
