# SPDX-License-Identifier: Apache-2.0
"""A revocation holds from the next request on; a terminal is one request
that lasts. A grant revoked while its WebSocket terminal is open types no
more into the sandbox: the terminal is closed within a second or two, as
its event streams end (docs/api.md)."""

import json
import time

PROMPT = "RV-PROMPT> "


def test_revoked_grant_terminal_is_closed(make_daemon):
    d = make_daemon()
    tok = d.grant("rvpty", "--allow-sandbox", "--allow-exec")
    c = d.client(tok, timeout=30)
    sid = c.create(sandbox_class="small")["id"]
    t = None
    try:
        pid = c.pty.create(sid, rows=24, cols=80, cmd=["/bin/sh", "-i"], env={"PS1": PROMPT})
        t = c.pty.connect(sid, pid)
        t.read_until(PROMPT)
        t.send("echo BEFORE-$((6*7))\r")
        t.read_until("BEFORE-42")
        d.revoke("rvpty")
        # Typed at once after the revocation: not typed into the sandbox.
        t.send("echo AFTER-$((6*7))\r")
        got = b""
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5:
            try:
                b = t.recv(timeout=0.3)
            except TimeoutError:
                continue
            except OSError:
                break
            if b is None:
                break
            got += b
        took = time.monotonic() - t0
        assert b"AFTER-42" not in got, "a revoked grant still types into its terminal"
        assert t.closed and t.close_code == 1008, (t.closed, t.close_code, got[-300:])
        assert took < 2.5, took
    finally:
        if t:
            t.close()


def test_revoked_grant_exec_stream_ends(make_daemon):
    """A command's output stream is the grant's reading: it ends within a
    second or two of the revocation with an error line, and the command,
    which dies with the client that waits for it, is stopped."""
    d = make_daemon()
    tok = d.grant("rvexec", "--allow-sandbox", "--allow-exec")
    c = d.client(tok, timeout=30)
    sid = c.create(sandbox_class="small")["id"]
    script = "i=0; while [ $i -lt 100 ]; do echo tick-$i; i=$((i+1)); sleep 0.1; done"
    evs = []
    t_rev = None
    for ev in c.exec(sid, ["sh", "-c", script]):
        evs.append((time.monotonic(), ev))
        if t_rev is None and ev.get("type") == "stdout" and b"tick-3" in ev.get("data", b""):
            d.revoke("rvexec")
            t_rev = time.monotonic()
    assert t_rev, evs
    after = [ev for t, ev in evs if t - t_rev > 2.5]
    assert not after, f"output still read {len(after)} events after the revocation"
    last = evs[-1][1]
    assert last.get("type") == "error" and last.get("error") == "grant_revoked", last
    # The command was stopped: its record says it ended, well before 10 s.
    admin = d.client(d.admin, timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        procs = [p for p in admin.processes(sid) if "tick" in json.dumps(p.get("argv"))]
        if procs and all(p["state"] != "running" for p in procs):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the revoked grant's command goes on: {procs}")
