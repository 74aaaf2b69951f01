# SPDX-License-Identifier: Apache-2.0
"""A maker's diffs of a running sandbox wait for its supervisor's copy of
the changes before their job: the grant's bound on jobs and unread answers
(16) is checked before that copy, not after it. Before, a grant's diffs
waiting for a slow or stopped supervisor were each counted in the daemon's
whole (256) but not against the grant's own 16: one grant could queue
hundreds of copies of host disk work and push the daemon past its bound,
so every other grant's diff, export, accept and push was refused with 503
for the two minutes the copies could wait."""

import os
import signal
import socket
import tempfile
import time

HOLDS_PER_GRANT = 16


def _ask(d, token, path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(0.2)
    s.connect(str(d.socket))
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: airlockd\r\n"
               f"Authorization: Bearer {token}\r\n\r\n").encode())
    return s


def _status(s):
    try:
        head = s.recv(1024)
    except socket.timeout:
        return None
    return head.split(b"\r\n", 1)[0]


def test_diffs_waiting_for_the_copy_count_against_the_grant(two_grants):
    d = two_grants
    c = d.client(d.admin, timeout=60)
    ws = tempfile.mkdtemp(prefix="ws-", dir=d.tmp)
    sb = c.create(sandbox_class="small", workspace=ws, review=True)["id"]
    pid = d.supervisors()[sb]
    path = f"/v1/sandboxes/{sb}/diff"
    held = []
    os.kill(pid, signal.SIGSTOP)
    try:
        held = [_ask(d, d.admin, path) for _ in range(HOLDS_PER_GRANT + 4)]
        deadline = time.monotonic() + 5
        refused = []
        while time.monotonic() < deadline and len(refused) < 4:
            refused = [st for st in map(_status, held) if st and b" 429 " in st] + refused
        assert len(refused) >= 4, (
            f"{len(held)} diffs of one grant waiting for the copy, none refused: "
            "the grant's bound is not checked before the copy")
    finally:
        os.kill(pid, signal.SIGCONT)
        for s in held:
            s.close()
    c.delete(sb)
