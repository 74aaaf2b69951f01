# SPDX-License-Identifier: Apache-2.0
"""Another grant attached to a process's output is a reader, never a
holder: a grant that may only read attaches to a command another grant
runs and stops reading. The command's owner, who reads everything, must
get its whole output and exit, not a paused and then killed ("abandoned")
command; nor may the readers' attaches take the places the owner's own
reconnect needs."""

import json
import re
import socket
import threading


def _request(d, token, method, path, body=None, rcvbuf=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(str(d.socket))
    data = json.dumps(body).encode() if body is not None else b""
    s.sendall((f"{method} {path} HTTP/1.1\r\nHost: airlockd\r\nAuthorization: Bearer {token}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
               ).encode() + data)
    return s


def test_a_reader_that_stops_reading_does_not_stall_or_kill_the_owners_command(two_grants):
    d = two_grants
    c = d.client(d.admin)
    sb = c.create(policy={"limits": {"output": "1G"}}, sandbox_class="small")["id"]
    # About 24 MB of output, paced so that the readers attach while it runs.
    cmd = ["sh", "-c", "i=0; while [ $i -lt 40 ]; do head -c 600000 /dev/zero | tr '\\0' x;"
           " sleep 0.05; i=$((i+1)); done"]
    owner = _request(d, d.admin, "POST", f"/v1/sandboxes/{sb}/exec",
                     {"argv": cmd, "stallTimeout": 2})
    owner.settimeout(40)
    got = bytearray()
    pid = None
    while pid is None:
        chunk = owner.recv(65536)
        assert chunk, got[-500:]
        got += chunk
        m = re.search(rb'"type":\s*"started",\s*"pid":\s*(\d+)', got)
        if m:
            pid = int(m.group(1))
    readers = [_request(d, d.reader, "GET", f"/v1/sandboxes/{sb}/processes/{pid}/events",
                        rcvbuf=4096) for _ in range(10)]
    # The owner can still attach (its own reconnect), past the readers.
    again = _request(d, d.admin, "GET", f"/v1/sandboxes/{sb}/processes/{pid}/events")
    again.settimeout(10)
    head = again.recv(4096).split(b"\r\n", 1)[0]
    again.close()
    assert b" 200 " in head, f"the owner could not attach again past other grants: {head!r}"
    done = threading.Event()

    def drain():
        try:
            while b'"type":"exit"' not in got[-4096:] and b'"type": "exit"' not in got[-4096:]:
                chunk = owner.recv(1 << 20)
                if not chunk:
                    break
                got.extend(chunk)
        except OSError:
            pass
        done.set()
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    try:
        assert done.wait(45), "the owner's exec never ended"
        tail = bytes(got[-4096:])
        at = max(tail.rfind(b'"type":"exit"'), tail.rfind(b'"type": "exit"'))
        assert at >= 0, tail[-400:]
        ev = tail[at:at + 300]
        code = re.search(rb'"exitCode":\s*(-?\d+|null)', ev)
        err = re.search(rb'"errorCode":\s*(null|"[a-z_]+")', ev)
        assert code and err, ev
        assert (code.group(1), err.group(1)) == (b"0", b"null"), \
            f"another grant's reader stalled the owner's command: {ev!r}"
    finally:
        owner.close()
        for r in readers:
            r.close()


def test_readers_cannot_take_every_connection_of_the_supervisor(two_grants):
    """A reader attached to every running process of another grant's
    sandbox, as often as it may: the owner can still run commands."""
    d = two_grants
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")["id"]
    pids = []
    for _ in range(12):
        s = _request(d, d.admin, "POST", f"/v1/sandboxes/{sb}/exec",
                     {"argv": ["sleep", "60"], "background": True})
        s.settimeout(10)
        ans = s.recv(4096)
        s.close()
        m = re.search(rb'"pid":\s*(\d+)', ans)
        assert m, ans
        pids.append(int(m.group(1)))
    readers = []
    try:
        for pid in pids:
            for _ in range(6):
                readers.append(_request(d, d.reader, "GET",
                                        f"/v1/sandboxes/{sb}/processes/{pid}/events"))
        for r in readers:
            r.settimeout(10)
            r.recv(64)  # each answered, one way or the other
        res = c.run(sb, ["echo", "still mine"])
        assert res.exit_code == 0, res
    finally:
        for r in readers:
            r.close()
