# SPDX-License-Identifier: Apache-2.0
"""A terminal harness: runs a command on a pseudo-terminal that plays the
user's terminal (the test holds its master, as a terminal emulator does),
types into it, reads the screen's byte stream and resizes it."""

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Term:
    def __init__(self, argv, rows=24, cols=80, env=None, cwd=None):
        self.master, self.slave = os.openpty()
        set_size(self.slave, rows, cols)
        # A cooked terminal with echo, as a user's shell leaves it.
        self.initial = termios.tcgetattr(self.slave)
        e = dict(env or os.environ)
        e.setdefault("TERM", "xterm")
        self.proc = subprocess.Popen(
            argv,
            stdin=self.slave,
            stdout=self.slave,
            stderr=self.slave,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
            env=e,
            cwd=cwd,
            close_fds=True,
        )
        self.out = b""

    def read_some(self, timeout=0.2):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return b""
        try:
            d = os.read(self.master, 65536)
        except OSError:
            return b""
        self.out += d
        return d

    def expect(self, pattern, timeout=15):
        """Read until `pattern` (bytes regex) matches what came since the
        last expect; returns the match."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        start = getattr(self, "_mark", 0)
        while time.monotonic() < end:
            m = rx.search(self.out, start)
            if m:
                self._mark = m.end()
                return m
            self.read_some()
        raise AssertionError(f"timed out waiting for {pattern!r}; screen: {self.out[start:][-2000:]!r}")

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        os.write(self.master, data)

    def resize(self, rows, cols):
        # The kernel sends SIGWINCH to the terminal's foreground job: the
        # airlock process.
        set_size(self.master, rows, cols)

    def mode(self):
        return termios.tcgetattr(self.slave)

    def wait(self, timeout=30):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.read_some(0.1)
            rc = self.proc.poll()
            if rc is not None:
                while self.read_some(0.1):
                    pass
                return rc
        self.proc.kill()
        raise AssertionError(f"still running after {timeout}s; screen: {self.out[-2000:]!r}")

    def pending_input(self):
        """Bytes waiting in the user's terminal's input queue (what a shell
        would read next): anything injected into it."""
        fl = fcntl.fcntl(self.slave, fcntl.F_GETFL)
        fcntl.fcntl(self.slave, fcntl.F_SETFL, fl | os.O_NONBLOCK)
        try:
            # Canonical mode holds a line without newline back: read raw.
            attrs = termios.tcgetattr(self.slave)
            raw = list(attrs)
            raw[3] &= ~termios.ICANON
            raw[6] = list(raw[6])
            raw[6][termios.VMIN] = 0
            raw[6][termios.VTIME] = 0
            termios.tcsetattr(self.slave, termios.TCSANOW, raw)
            try:
                return os.read(self.slave, 4096)
            except BlockingIOError:
                return b""
            finally:
                termios.tcsetattr(self.slave, termios.TCSANOW, attrs)
        finally:
            fcntl.fcntl(self.slave, fcntl.F_SETFL, fl)

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass
