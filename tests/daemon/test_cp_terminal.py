# SPDX-License-Identifier: Apache-2.0
"""`airlock cp ID:PATH -` on a terminal shows the agent's bytes escaped,
as `airlock export` and `airlock diff` do: a file the agent wrote must not
drive the user's terminal (set its title, write the clipboard with OSC 52,
answer a query into the input). Into a pipe or a file it is byte-exact."""

import os
import pty
import select
import subprocess
import time

from daemonlib import AIRLOCK

EVIL = b"hello\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x9b31m\n"


def _env(d, token):
    return dict(os.environ, AIRLOCK_SOCKET=str(d.socket), AIRLOCK_TOKEN=token)


def test_cp_to_a_terminal_is_escaped(make_daemon, tmp_path):
    d = make_daemon()
    tok = d.grant("cpt", "--allow-sandbox", "--allow-exec")
    env = _env(d, tok)
    p = subprocess.run([str(AIRLOCK), "create", "--class", "small"], capture_output=True,
                       env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    sid = p.stdout.decode().strip()
    src = tmp_path / "evil.txt"
    src.write_bytes(EVIL)
    p = subprocess.run([str(AIRLOCK), "cp", str(src), sid + ":evil.txt"], env=env, timeout=60)
    assert p.returncode == 0
    # Into a pipe: byte-exact.
    p = subprocess.run([str(AIRLOCK), "cp", sid + ":evil.txt", "-"], capture_output=True,
                       env=env, timeout=60)
    assert p.returncode == 0 and p.stdout == EVIL, p
    # On a terminal: no escape byte reaches it.
    mfd, sfd = pty.openpty()
    proc = subprocess.Popen([str(AIRLOCK), "cp", sid + ":evil.txt", "-"], stdin=sfd,
                            stdout=sfd, stderr=subprocess.PIPE, env=env)
    os.close(sfd)
    out = b""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        r, _, _ = select.select([mfd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(mfd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(mfd)
    assert proc.returncode == 0, proc.stderr.read()
    assert b"hello" in out, out
    assert b"\x1b" not in out and b"\x07" not in out and b"\x9b" not in out, out
    subprocess.run([str(AIRLOCK), "rm", sid], env=env, timeout=60)


def test_the_daemons_error_messages_reach_stderr_escaped(make_daemon):
    # An error that quotes a path names what the agent made (a listing the
    # user copied); whatever its bytes, the one-line message is escaped.
    d = make_daemon()
    tok = d.grant("cpe", "--allow-sandbox", "--allow-exec")
    env = _env(d, tok)
    p = subprocess.run([str(AIRLOCK), "create", "--class", "small"], capture_output=True,
                       env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    sid = p.stdout.decode().strip()
    try:
        name = "gone\x1b]0;owned\x07\x1b[2J"
        p = subprocess.run([str(AIRLOCK), "cp", sid + ":" + name, "-"], capture_output=True,
                           env=env, timeout=60)
        assert p.returncode != 0
        assert p.stderr.count(b"\n") == 1, p.stderr
        assert b"\x1b" not in p.stderr and b"\x07" not in p.stderr, p.stderr
    finally:
        subprocess.run([str(AIRLOCK), "rm", sid], env=env, timeout=60)
