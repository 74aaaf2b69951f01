# SPDX-License-Identifier: Apache-2.0
"""Terminals over the API: exec with "pty", resize, and the WebSocket stream
(docs/api.md, "Terminals"), from the Python client, the JavaScript client
and raw sockets."""

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import time

import pytest

from daemonlib import REPO, AirlockError

PROMPT = "PTY-PROMPT> "
SHELL = ["/bin/bash", "--norc", "--noprofile", "-i"]


def _shell(api, sandbox, rows=24, cols=80):
    return api.pty.create(sandbox["id"], rows=rows, cols=cols, cmd=SHELL, env={"PS1": PROMPT})


def test_shell_session_over_the_api(api, sandbox):
    pid = _shell(api, sandbox, rows=30, cols=100)
    t = api.pty.connect(sandbox["id"], pid)
    try:
        t.read_until(PROMPT)
        t.send("tty; echo TTY-DONE\r")
        out = t.read_until("\nTTY-DONE")
        assert b"/dev/pts/" in out, out
        t.read_until(PROMPT)
        t.send("stty size\r")
        t.read_until("30 100")
        t.read_until(PROMPT)
        api.pty.resize(sandbox["id"], pid, 40, 120)
        t.send("stty size\r")
        t.read_until("40 120")
        t.read_until(PROMPT)
        # ^C reaches the foreground job through the terminal.
        t.send("sleep 30\r")
        time.sleep(0.5)
        t.send("\x03")
        t.send("echo rc=$?\r")
        t.read_until("rc=130")
        t.send("exit 7\r")
        while t.recv(timeout=20) is not None:
            pass
        assert t.exit and t.exit["exitCode"] == 7, t.events
        assert t.close_code == 1000
    finally:
        t.close()


def test_reconnect_loses_nothing(api, sandbox):
    script = ("for i in $(seq 1 300); do echo line-$i; [ $((i % 50)) = 0 ] && sleep 0.2; done; "
              "read x; echo got-$x")
    pid = api.pty.create(sandbox["id"], cmd=["/bin/bash", "-c", script])
    t = api.pty.connect(sandbox["id"], pid)
    got = t.read_until("line-60\r\n")
    # Drop the connection mid-stream, without a goodbye; output goes on.
    t._sock.shutdown(socket.SHUT_RDWR)
    t._sock.close()
    time.sleep(1.0)
    t2 = api.pty.connect(sandbox["id"], pid, offset=len(got))
    try:
        got += t2.read_until("line-300\r\n")
        assert t2.offset == len(got)
        expected = "".join("line-%d\r\n" % i for i in range(1, 301)).encode()
        assert got == expected, (len(got), len(expected))
        assert not [e for e in t2.events if e.get("type") == "gap"]
        # Input through the stream, and through the plain stdin call.
        api.pty.send_input(sandbox["id"], pid, b"ok\r")
        t2.read_until("got-ok")
        while t2.recv(timeout=20) is not None:
            pass
        assert t2.exit["exitCode"] == 0
    finally:
        t2.close()


def test_pty_refusals(api, sandbox):
    sid = sandbox["id"]
    with pytest.raises(AirlockError) as e:
        api._json("POST", "/v1/sandboxes/%s/exec" % sid,
                  {"argv": ["true"], "pty": {"rows": 0, "cols": 80}, "background": True})
    assert e.value.status == 400 and e.value.body.get("field") == "pty", e.value.body
    with pytest.raises(AirlockError) as e:
        api._json("POST", "/v1/sandboxes/%s/exec" % sid,
                  {"argv": ["cat"], "pty": {"rows": 24, "cols": 80}, "stdin": "aGkK",
                   "background": True})
    assert e.value.status == 400
    # A process without a terminal has no terminal stream, and no resize.
    pid = api.exec_background(sid, ["sleep", "30"])
    with pytest.raises(AirlockError) as e:
        api.pty.connect(sid, pid)
    assert e.value.status == 400 and e.value.error == "no_terminal", e.value.body
    with pytest.raises(AirlockError) as e:
        api.pty.resize(sid, pid, 10, 10)
    assert e.value.status == 400
    with pytest.raises(AirlockError) as e:
        api.pty.connect(sid, 999)
    assert e.value.status == 404
    api.pty.kill(sid, pid)
    # A plain GET is told to upgrade.
    status, _, body = api.request("GET", "/v1/sandboxes/%s/processes/%d/pty" % (sid, pid))
    assert status == 426, body


def _raw_ws(shared, api, sid, pid, key=None, token=True):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(15)
    s.connect(str(shared.socket))
    key = key if key is not None else base64.b64encode(os.urandom(16)).decode()
    head = ("GET /v1/sandboxes/%s/processes/%d/pty HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n"
            % (sid, pid, key))
    if token:
        head += "Authorization: Bearer %s\r\n" % shared.admin
    s.sendall((head + "\r\n").encode())
    resp = b""
    while b"\r\n\r\n" not in resp:
        d = s.recv(4096)
        if not d:
            break
        resp += d
    return s, resp


def _read_close(s):
    """Read frames until a close frame; its code, or None if the socket
    closed without one."""
    buf = b""
    end = time.monotonic() + 15
    while time.monotonic() < end:
        while len(buf) >= 2:
            n = buf[1] & 0x7F
            hl = 2 + (2 if n == 126 else 8 if n == 127 else 0)
            if len(buf) < hl:
                break
            if n == 126:
                n = struct.unpack(">H", buf[2:4])[0]
            elif n == 127:
                n = struct.unpack(">Q", buf[2:10])[0]
            if len(buf) < hl + n:
                break
            op, payload, buf = buf[0] & 0xF, buf[hl:hl + n], buf[hl + n:]
            if op == 0x8:
                return struct.unpack(">H", payload[:2])[0]
        d = s.recv(65536)
        if not d:
            return None
        buf += d
    raise AssertionError("no close frame")


def _masked(op, payload, fin=True, rsv=0, mask=True, length=None):
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | rsv | op
    m = os.urandom(4)
    if n < 126:
        head = bytes([b0, (0x80 if mask else 0) | n])
    elif n < 65536:
        head = bytes([b0, (0x80 if mask else 0) | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, (0x80 if mask else 0) | 127]) + struct.pack(">Q", n)
    if not mask:
        return head + payload
    return head + m + bytes(b ^ m[i & 3] for i, b in enumerate(payload))


BAD_FRAMES = {
    "unmasked": (_masked(0x2, b"ls\r", mask=False), 1002),
    "reserved-bits": (_masked(0x2, b"ls\r", rsv=0x40), 1002),
    "reserved-opcode": (_masked(0x3, b"x"), 1002),
    "fragmented-ping": (_masked(0x9, b"x", fin=False), 1002),
    "long-control": (_masked(0x9, b"x" * 126), 1002),
    "stray-continuation": (_masked(0x0, b"x"), 1002),
    "too-large": (_masked(0x2, b"", length=1 << 20), 1009),
    "text-input": (_masked(0x1, b"ls"), 1003),
    "non-minimal-length": (bytes([0x82, 0x80 | 126, 0, 5]) + b"\0\0\0\0" + b"hello", 1002),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_bad_frames_are_refused(shared_daemon, api, sandbox, name):
    sid = sandbox["id"]
    pid = api.pty.create(sid, cmd=["/bin/cat"])
    s, resp = _raw_ws(shared_daemon, api, sid, pid)
    try:
        assert resp.startswith(b"HTTP/1.1 101"), resp
        frame, code = BAD_FRAMES[name]
        s.sendall(frame)
        assert _read_close(s) == code
        # The connection ends after the close frame.
        s.settimeout(5)
        rest = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            rest += d
    finally:
        s.close()
    # The terminal's process is not the stream's: it runs on.
    api.pty.send_input(sid, pid, b"still-here\r")
    api.pty.kill(sid, pid)


def test_handshake_refusals(shared_daemon, api, sandbox):
    sid = sandbox["id"]
    pid = api.pty.create(sid, cmd=["/bin/cat"])
    try:
        s, resp = _raw_ws(shared_daemon, api, sid, pid, key="short")
        s.close()
        assert resp.startswith(b"HTTP/1.1 400"), resp
        s, resp = _raw_ws(shared_daemon, api, sid, pid, token=False)
        s.close()
        assert resp.startswith(b"HTTP/1.1 401"), resp
        s, resp = _raw_ws(shared_daemon, api, sid, pid)
        assert resp.startswith(b"HTTP/1.1 101"), resp
        # A ping is answered with its payload; input reaches the terminal.
        s.sendall(_masked(0x9, b"hello") + _masked(0x2, b"echo-me\r"))
        buf = b""
        end = time.monotonic() + 10
        while (b"\x8a\x05hello" not in buf or b"echo-me" not in buf) and time.monotonic() < end:
            buf += s.recv(65536)
        assert b"\x8a\x05hello" in buf and b"echo-me" in buf, buf
        s.close()
    finally:
        api.pty.kill(sid, pid)


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")
def test_js_client_shell_session(shared_daemon, api, sandbox):
    script = REPO / "tests/daemon/pty_session.mjs"
    p = subprocess.run(["node", str(script), str(shared_daemon.socket), shared_daemon.admin,
                        sandbox["id"]], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert "/dev/pts/" in r["tty"] and r["size"] == "40 120" and r["exitCode"] == 5, r
    assert r["reconnected"] == r["expected"], r


def test_airlock_attach_from_a_terminal(shared_daemon, api, sandbox):
    import sys
    import termios
    sys.path.insert(0, str(REPO / "tests/integration"))
    from term import Term
    from daemonlib import AIRLOCK

    sid = sandbox["id"]
    pid = _shell(api, sandbox)
    argv = [str(AIRLOCK), "attach", "--socket", str(shared_daemon.socket), "--token",
            shared_daemon.admin, sid, str(pid)]
    t = Term(argv, rows=33, cols=90)
    try:
        t.expect(PROMPT.encode())
        assert not t.mode()[3] & termios.ECHO, "the terminal is not raw while attached"
        t.send("stty size\r")
        t.expect(rb"33 90")
        t.resize(44, 100)
        time.sleep(0.5)
        t.send("stty size\r")
        t.expect(rb"44 100")
        t.send("\x1d")  # Ctrl-]: detach
        assert t.wait() == 0
        assert b"detached" in t.out
        assert t.mode() == t.initial
    finally:
        t.close()
    # The process ran on; attach again and end it.
    t = Term(argv, rows=20, cols=70)
    try:
        t.expect(rb"44 100")  # the kept output is replayed
        t.send("stty size; exit 4\r")
        t.expect(rb"20 70")
        assert t.wait() == 4
        assert t.mode() == t.initial
    finally:
        t.close()
