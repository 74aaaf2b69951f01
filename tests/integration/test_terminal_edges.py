# SPDX-License-Identifier: Apache-2.0
"""Attacks on the user's terminal from a command run without a terminal of
its own (-T, or stdout not a terminal): the command's stdin is a pipe that
Airlock fills from the user's terminal, never the terminal itself, so the
command cannot change its mode or its file status flags."""

import fcntl
import os
import termios

import pytest

from term import Term

ATTACK = r"""
import fcntl, os, sys, termios
st = os.fstat(0)
print("FD0", st.st_dev, st.st_ino, os.isatty(0), flush=True)
try:
    m = termios.tcgetattr(0)
    m[3] &= ~(termios.ECHO | termios.ICANON | termios.ISIG)
    termios.tcsetattr(0, termios.TCSANOW, m)
    print("MODE-CHANGED", flush=True)
except termios.error as e:
    print("MODE-REFUSED", e, flush=True)
fl = fcntl.fcntl(0, fcntl.F_GETFL)
fcntl.fcntl(0, fcntl.F_SETFL, fl | os.O_NONBLOCK)
print("ATTACK-DONE", flush=True)
"""


@pytest.mark.parametrize("how", ["no-tty-flag", "stdout-redirected"])
def test_command_without_a_terminal_cannot_touch_the_users(airlock, how):
    ws = airlock.make_dir()
    (ws / "attack.py").write_text(ATTACK)
    airlock.chown(ws)
    out = ws / "out.txt"
    args = ["run", "-q", "-w", ws, "--", "python3", "/workspace/attack.py"]
    if how == "no-tty-flag":
        argv = airlock.cmd(args[:2] + ["-T"] + args[2:])
    else:
        # stdin a terminal, stdout a file: no terminal is given by default.
        cmd = " ".join("'%s'" % str(a) for a in airlock.cmd(args))
        argv = ["/bin/sh", "-c", "exec %s > %s" % (cmd, out)]
    t = Term(argv, cwd=str(airlock.base))
    try:
        before = fcntl.fcntl(t.slave, fcntl.F_GETFL)
        assert t.wait() == 0, t.out
        text = t.out if how == "no-tty-flag" else out.read_bytes()
        assert b"ATTACK-DONE" in text, text
        user = os.fstat(t.slave)
        fd0 = text.split(b"FD0 ")[1].split()
        assert (int(fd0[0]), int(fd0[1])) != (user.st_dev, user.st_ino), \
            "the command was given the user's own terminal"
        assert t.mode() == t.initial, "the command changed the user's terminal mode"
        assert fcntl.fcntl(t.slave, fcntl.F_GETFL) == before, \
            "the command changed the user's terminal's file status flags"
    finally:
        t.close()


def test_typed_input_still_reaches_a_command_without_a_terminal(airlock):
    ws = airlock.make_dir()
    t = Term(airlock.cmd(["run", "-q", "-T", "-w", ws, "--", "/bin/sh", "-c",
                          "echo READY; read line; echo got=$line"]), cwd=str(airlock.base))
    try:
        t.expect(rb"READY")
        t.send("hello\n")
        t.expect(rb"got=hello")
        assert t.wait() == 0
        assert t.mode() == t.initial
    finally:
        t.close()


@pytest.mark.parametrize("sig", ["SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGABRT"])
def test_terminal_restored_when_airlock_run_is_signalled(airlock, sig):
    """-t puts the user's terminal in raw mode; a signal sent to `airlock run`
    from outside ends the run but must not leave the terminal raw. (SIGINT
    is passed to the command, SIGTERM and SIGHUP end the run; the rest are
    fatal by default.)"""
    import signal
    ws = airlock.make_dir()
    t = Term(airlock.cmd(["run", "-q", "-t", "-w", ws, "--", "/bin/sh", "-c",
                          "echo STARTED; sleep 30"]), cwd=str(airlock.base))
    try:
        t.expect(rb"STARTED")
        assert not t.mode()[3] & termios.ECHO, "the terminal is not raw while the run lasts"
        os.kill(t.proc.pid, getattr(signal, sig))
        t.wait(timeout=20)
        assert t.mode() == t.initial, "the user's terminal was left raw after " + sig
    finally:
        t.close()
