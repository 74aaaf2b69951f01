# SPDX-License-Identifier: Apache-2.0
"""A revocation holds from the next request on; a terminal is one request
that lasts. A grant revoked while its WebSocket terminal is open types no
more into the sandbox: the terminal is closed within a second or two, as
its event streams end (docs/api.md)."""

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
