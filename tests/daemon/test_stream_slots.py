# SPDX-License-Identifier: Apache-2.0
"""Server-sent-event streams (GET /v1/events, GET /v1/runs/{id}/events)
hold a slot each while open. The slots are counted per grant: one grant
opening all it can leaves another grant's streams their own room."""

import pathlib
import socket
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from agentlib import ScriptedModel  # noqa: E402


def _open(d, token, path):
    """A stream's socket and its status (the socket stays open)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(d.socket))
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
               % (path, token)).encode())
    head = b""
    while b"\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    return s, int(head.split(b" ")[1])


def _fill(d, token, path, limit):
    """Open streams until one is refused; the open ones and the refusal."""
    held = []
    for _ in range(limit):
        s, status = _open(d, token, path)
        if status != 200:
            s.close()
            return held, status
        held.append(s)
    return held, 200


def test_event_streams_are_counted_per_grant(make_daemon):
    d = make_daemon()
    a = d.grant("greedy")
    b = d.grant("modest")
    held, status = _fill(d, a, "/v1/events", 80)
    try:
        assert status == 429, "one grant opened 80 event streams"
        assert 0 < len(held) < 64, len(held)
        s, status = _open(d, b, "/v1/events")
        s.close()
        assert status == 200, "another grant's event stream was refused"
    finally:
        for s in held:
            s.close()
    # Closed streams give their slots back.
    time.sleep(0.5)
    s, status = _open(d, a, "/v1/events")
    s.close()
    assert status == 200


def policy(port):
    return {"network": {"routes": [{"name": "model", "upstream": f"http://127.0.0.1:{port}",
                                    "inject": {"x-api-key": "${secret:MODEL_KEY}"}}],
                        "allowPrivate": ["127.0.0.1"]}}


def test_run_streams_are_counted_per_grant(run_daemon):
    d = run_daemon
    ta = d.grant("greedy-runs", "--allow-runs", "--allow-host-workspace", "--secret", "MODEL_KEY")
    tb = d.grant("modest-runs", "--allow-runs", "--allow-host-workspace", "--secret", "MODEL_KEY")
    script = [{"calls": [("bash", {"command": "sleep 30"})]}, {"text": "done"}]
    with ScriptedModel(script) as m:
        ra = d.client(ta).create_run("t", "m", policy(m.port))["id"]
        rb = d.client(tb).create_run("t", "m", policy(m.port))["id"]
        held, status = _fill(d, ta, f"/v1/runs/{ra}/events", 20)
        try:
            assert status == 429, "one grant opened 20 run streams"
            assert 0 < len(held) < 16, len(held)
            s, status = _open(d, tb, f"/v1/runs/{rb}/events")
            s.close()
            assert status == 200, "another grant's run stream was refused"
        finally:
            for s in held:
                s.close()
            for tok in (ta, tb):
                d.client(tok).request("POST", "/v1/stop", {"all": True})


def test_grants_that_fill_the_daemon_leave_a_newcomer_a_stream(make_daemon):
    # Sixteen grants that make sandboxes, each opening all it may (16), held
    # every one of the daemon's 256 event streams: a seventeenth grant got
    # none. Some room is kept for grants that hold few streams.
    d = make_daemon()
    greedy = [d.grant(f"greedy{i}", "--allow-sandbox") for i in range(16)]
    late = d.grant("late", "--allow-sandbox")
    held = []
    try:
        for tok in greedy:
            h, status = _fill(d, tok, "/v1/events", 17)
            held += h
            assert status == 429
        s, status = _open(d, late, "/v1/events")
        s.close()
        assert status == 200, ("a grant with no stream open was refused with %d "
                               "streams held by 16 others" % len(held))
    finally:
        for s in held:
            s.close()
