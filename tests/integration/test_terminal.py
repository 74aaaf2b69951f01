# SPDX-License-Identifier: Apache-2.0
"""`airlock run -t`: the command gets a terminal of the sandbox's own,
driven here through a pseudo-terminal that plays the user's terminal
(term.py), as root and as an ordinary user."""

import json
import os
import signal
import subprocess
import termios
import time

import pytest

from term import Term

PROMPT = "AIRLOCK-PROMPT> "


def _term(airlock, args, rows=24, cols=80, **kw):
    return Term(airlock.cmd(args), rows=rows, cols=cols, cwd=str(airlock.base), **kw)


def _shell(airlock, *opts, rows=24, cols=80):
    ws = airlock.make_dir()
    t = _term(airlock, ["run", "-q", "-w", ws, "--env", f"PS1={PROMPT}", *opts, "--",
                        "/bin/bash", "--norc", "--noprofile", "-i"], rows=rows, cols=cols)
    t.expect(PROMPT.encode())
    return t


def test_shell_prompt_and_tty_names_a_pty(airlock):
    t = _shell(airlock)
    try:
        t.send("tty; echo TTY-DONE\r")
        m = t.expect(rb"(/dev/pts/\d+|not a tty)\r\nTTY-DONE")
        assert m.group(1).startswith(b"/dev/pts/"), t.out
        # The terminal is the sandbox's own: its devpts has nothing else.
        t.send("ls /dev/pts; echo LS-DONE\r")
        m = t.expect(rb"echo LS-DONE\r\n(?:\x1b\[\?2004l\r)?([^\x1b]*?)LS-DONE")
        assert set(m.group(1).split()) <= {b"0", b"ptmx"}, m.group(1)
        # The user's terminal is raw while the command runs: no echo, no
        # line editing, the keys go through as bytes.
        mode = t.mode()
        assert not mode[3] & termios.ECHO and not mode[3] & termios.ICANON
        t.send("exit 3\r")
        assert t.wait() == 3
        assert t.mode() == t.initial, "the user's terminal mode was not restored"
    finally:
        t.close()


def test_stty_size_follows_resize(airlock):
    t = _shell(airlock, rows=30, cols=100)
    try:
        t.send("stty size\r")
        t.expect(rb"[\r\n]30 100\r\n")
        t.resize(41, 132)
        time.sleep(0.3)
        t.send("stty size\r")
        t.expect(rb"[\r\n]41 132\r\n")
        # The foreground job is told too (SIGWINCH through the pty).
        t.send("trap 'echo GOT-WINCH' WINCH; sleep 5\r")
        time.sleep(0.5)
        t.resize(20, 60)
        t.send("\x03")
        t.expect(rb"GOT-WINCH")
        t.send("exit\r")
        t.wait()
    finally:
        t.close()


def test_ctrl_c_and_job_control(airlock):
    t = _shell(airlock)
    try:
        # ^C reaches the foreground job through the terminal's line
        # discipline; the shell itself lives on.
        t.send("sleep 30\r")
        time.sleep(0.5)
        t.send("\x03")
        t.send("echo rc=$?\r")
        t.expect(rb"rc=130")
        # A background job, brought to the foreground, stopped with ^Z,
        # resumed in the background, then killed.
        t.send("sleep 30 &\r")
        t.expect(rb"\[1\] \d+")
        t.send("jobs\r")
        t.expect(rb"\[1\]\+\s+Running\s+sleep 30 &")
        t.send("fg\r")
        t.expect(rb"sleep 30\r\n")
        time.sleep(0.5)
        t.send("\x1a")
        t.expect(rb"\[1\]\+\s+Stopped\s+sleep 30")
        t.send("bg\r")
        t.expect(rb"\[1\]\+ sleep 30 &")
        t.send("kill %1; wait; echo JOBS-DONE\r")
        t.expect(rb"[\r\n]JOBS-DONE\r\n")
        t.send("exit 0\r")
        assert t.wait() == 0
    finally:
        t.close()


CURSES = r"""
import curses
def main(scr):
    curses.curs_set(0)
    h, w = scr.getmaxyx()
    scr.border()
    scr.addstr(h // 2, max(0, w // 2 - 7), "CURSES-DRAWN", curses.A_REVERSE)
    scr.addstr(h - 2, 2, "size %dx%d" % (h, w))
    scr.refresh()
    k = scr.getkey()
    return k
k = curses.wrapper(main)
print("CURSES-QUIT key=%s" % k)
"""


def test_curses_program_draws_and_quits(airlock):
    ws = airlock.make_dir()
    (ws / "ui.py").write_text(CURSES)
    airlock.chown(ws)
    t = _term(airlock, ["run", "-q", "-w", ws, "--", "python3", "/workspace/ui.py"], rows=25, cols=90)
    try:
        t.expect(rb"CURSES-DRAWN")
        t.expect(rb"size 25x90")
        # It switched to the alternate screen and drew with escape sequences.
        assert b"\x1b[" in t.out
        t.send("q")
        t.expect(rb"CURSES-QUIT key=q")
        assert t.wait() == 0
        assert t.mode() == t.initial
    finally:
        t.close()


def test_terminal_restored_after_timeout_kill(airlock):
    ws = airlock.make_dir()
    t = _term(airlock, ["run", "-q", "-w", ws, "--timeout", "2", "--", "/bin/sh", "-c",
                        "echo STARTED; sleep 30"])
    try:
        t.expect(rb"STARTED")
        raw = t.mode()
        assert not raw[3] & termios.ECHO, "the user's terminal is not raw while the command runs"
        assert t.wait() == 124
        assert t.mode() == t.initial, "the user's terminal mode was not restored after a timeout"
    finally:
        t.close()


def test_terminal_restored_after_command_killed(airlock):
    ws = airlock.make_dir()
    t = _term(airlock, ["run", "-q", "-w", ws, "--", "/bin/sh", "-c",
                        "echo STARTED; sleep 1; kill -9 $$"])
    try:
        t.expect(rb"STARTED")
        assert not t.mode()[3] & termios.ECHO, "the user's terminal is not raw while the command runs"
        assert t.wait() == 137
        assert t.mode() == t.initial
    finally:
        t.close()


def test_terminal_restored_after_supervisor_sigterm(airlock):
    ws = airlock.make_dir()
    t = _term(airlock, ["run", "-q", "-w", ws, "--", "/bin/sh", "-c", "echo STARTED; sleep 30"])
    try:
        t.expect(rb"STARTED")
        assert not t.mode()[3] & termios.ECHO
        # SIGTERM goes to the command (it dies of it); a second one would
        # end the sandbox.
        os.kill(t.proc.pid, signal.SIGTERM)
        assert t.wait() == 128 + signal.SIGTERM
        assert t.mode() == t.initial
    finally:
        t.close()


def test_terminal_restored_when_the_command_is_not_found(airlock):
    ws = airlock.make_dir()
    t = _term(airlock, ["run", "-q", "-w", ws, "--", "/no/such/command"])
    try:
        assert t.wait() == 127
        assert b"command not found" in t.out, t.out
        assert t.mode() == t.initial
    finally:
        t.close()


@pytest.fixture
def full_disk():
    """A tmpfs filled to the last byte, with 24 KiB held in a spacer file
    that a test may delete to leave just that much room."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    import tempfile
    d = tempfile.mkdtemp(prefix="airlock-fulltty-", dir="/tmp")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k,mode=0777", "tmpfs", d], check=True)
    try:
        with open(os.path.join(d, "spacer"), "wb") as f:
            f.write(b"s" * 24 * 1024)
        fd = os.open(os.path.join(d, "fill"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for size in (4096, 512, 1):
                try:
                    while True:
                        os.write(fd, b"x" * size)
                except OSError:
                    pass
        finally:
            os.close(fd)
        yield d
    finally:
        subprocess.run(["umount", "-l", d], check=False)
        os.rmdir(d)


def test_terminal_restored_after_audit_failure(airlock, full_disk):
    ws = airlock.make_dir()
    t = _term(airlock, ["run", "-q", "-w", ws, "--audit", os.path.join(full_disk, "audit.jsonl"),
                        "--", "/bin/sh", "-c", "echo SHOULD-NOT-RUN"])
    try:
        assert t.wait() == 125
        assert b"audit_failed" in t.out and b"SHOULD-NOT-RUN" not in t.out, t.out
        assert t.mode() == t.initial
    finally:
        t.close()


DENIED = r"""
import socket, sys
print("STARTED", flush=True)
sys.stdin.readline()  # the test has seen the terminal raw
for i in range(2000):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
        s.sendall(b"CONNECT denied-%d.example:443 HTTP/1.1\r\nHost: x\r\n\r\n" % i)
        s.recv(4096)
        s.close()
    except OSError:
        pass
print("ALL-DENIED", flush=True)
"""


def test_terminal_restored_after_an_audit_failure_mid_run(airlock, full_disk):
    """The audit log fills while the command runs (each refused connection
    is a line): the sandbox is killed, and the terminal restored."""
    ws = airlock.make_dir()
    (ws / "denied.py").write_text(DENIED)
    airlock.chown(ws)
    os.unlink(os.path.join(full_disk, "spacer"))
    t = _term(airlock, ["run", "-q", "-w", ws, "--net", "gated", "--allow", "allowed.example",
                        "--audit", os.path.join(full_disk, "audit.jsonl"),
                        "--", "python3", "/workspace/denied.py"])
    try:
        t.expect(rb"STARTED")
        assert not t.mode()[3] & termios.ECHO
        t.send("go\r")
        assert t.wait(timeout=60) == 125
        assert b"audit_failed" in t.out and b"ALL-DENIED" not in t.out, t.out[-500:]
        assert t.mode() == t.initial
    finally:
        t.close()


INJECT = r"""
import fcntl, os, termios
st = os.fstat(0)
print("FD0 %d %d" % (st.st_dev, st.st_ino), flush=True)
for name in ("TIOCSTI", "TIOCLINUX"):
    req = getattr(termios, name, 0x541C if name == "TIOCLINUX" else 0x5412)
    try:
        for c in b"touch /tmp/airlock-pwned-%d\n" % os.getpid():
            arg = bytes([c]) if name == "TIOCSTI" else bytes([2, 0, 0, 0, 0, 0, 0])
            fcntl.ioctl(0, req, arg)
        print(name, "ACCEPTED", flush=True)
    except OSError as e:
        print(name, "REFUSED", e.errno, flush=True)
print("INJECT-DONE", flush=True)
"""


def test_tiocsti_cannot_reach_the_users_terminal(airlock):
    """The attack: push input into the terminal the command was given, hoping
    it is the user's, so that the user's shell runs it after the sandbox."""
    ws = airlock.make_dir()
    (ws / "inject.py").write_text(INJECT)
    airlock.chown(ws)
    t = _term(airlock, ["run", "-q", "-w", ws, "--", "python3", "/workspace/inject.py"])
    try:
        m = t.expect(rb"FD0 (\d+) (\d+)")
        t.expect(rb"INJECT-DONE")
        assert t.wait() == 0
        user = os.fstat(t.slave)
        # The command's terminal is not the user's terminal at all.
        assert (int(m.group(1)), int(m.group(2))) != (user.st_dev, user.st_ino), \
            "the command was given the user's own terminal"
        # Nothing reached the user's terminal's input queue.
        assert t.pending_input() == b""
        assert t.mode() == t.initial
    finally:
        t.close()


def test_no_tty_flag_gives_pipes(airlock):
    ws = airlock.make_dir()
    t = _term(airlock, ["run", "-q", "-T", "-w", ws, "--", "/bin/sh", "-c",
                        "tty; test -t 1 && echo OUT-TTY || echo OUT-PIPE"])
    try:
        t.wait()
        assert b"not a tty" in t.out and b"OUT-PIPE" in t.out, t.out
        assert t.mode() == t.initial
    finally:
        t.close()


def test_tty_flag_without_terminals(airlock):
    """-t from pipes: the command still gets a terminal; typed input is the
    pipe's, and its end is the terminal's end-of-file."""
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-t", "-w", ws, "--", "/bin/sh", "-c",
                     "tty; read line; echo got=$line; cat; echo CAT-ENDED"], input="hello\n", timeout=30)
    assert p.returncode == 0, p.stderr
    assert "/dev/pts/" in p.stdout and "got=hello" in p.stdout and "CAT-ENDED" in p.stdout, p.stdout


def test_tty_output_counts_against_the_output_limit(airlock):
    d = airlock.make_dir("policy")
    pol = d / "policy.json"
    pol.write_text(json.dumps({"limits": {"output": "64k"}}))
    airlock.chown(d)
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-t", "-p", pol, "-w", ws, "--", "/bin/sh", "-c", "yes"], timeout=30)
    assert p.returncode == 137, (p.returncode, p.stderr)
    assert "output_limit" in p.stderr
    assert len(p.stdout.encode()) <= 64 * 1024


def test_tty_output_is_redacted(airlock):
    secret = "sk-terminal-0123456789abcdef"
    d = airlock.make_dir("secrets")
    sf = d / "secrets.env"
    sf.write_text(f"API_KEY={secret}\n")
    sf.chmod(0o600)
    airlock.chown(d)
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-t", "--secrets", sf, "--route", "model=https://api.model.test",
                     "--inject", "model:x-api-key=${secret:API_KEY}", "-w", ws, "--", "/bin/sh", "-c",
                     f"echo key={secret}"], timeout=30)
    assert p.returncode == 0, p.stderr
    assert secret not in p.stdout and "[REDACTED]" in p.stdout, p.stdout


@pytest.mark.parametrize("source", ["file", "devnull"])
def test_tty_flag_with_input_that_cannot_be_polled(airlock, source):
    """A regular file or /dev/null as input: read to its end, then Ctrl-D."""
    ws = airlock.make_dir()
    path = "/dev/null"
    if source == "file":
        path = str(ws / "input.txt")
        with open(path, "w") as f:
            f.write("from-a-file\n")
    with open(path) as inp:
        p = subprocess.run(airlock.cmd(["run", "-q", "-t", "-w", ws, "--", "/bin/sh", "-c",
                                        "cat; echo CAT-ENDED"]),
                           stdin=inp, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert "CAT-ENDED" in p.stdout
    assert ("from-a-file" in p.stdout) == (source == "file"), p.stdout
