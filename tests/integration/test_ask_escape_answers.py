# SPDX-License-Identifier: Apache-2.0
"""The `--ask` prompt reads the user's terminal, and a terminal sends more
than typed letters: an arrow key is ESC [ A (the 'A' of "always"), a
focus report the sandbox switched on is ESC [ O (the 'O' of "once"), a
mouse click in X10 mode is ESC [ M and three raw bytes (a column of 65 is
'a'), a report of a title the sandbox set carries its letters. None of
these is an answer: only a letter typed on its own counts."""

import os
import re
import time

import pytest

from test_ask import FETCH, upstream  # noqa: F401  (the fixture)
from test_ask_forgery import BANNER, PtyRun, _decisions, _setup


@pytest.mark.parametrize("mode", ["-T", "-t"])
def test_escape_sequences_are_not_answers(airlock, upstream, mode):  # noqa: F811
    d, pol = _setup(airlock, "askesc" + mode[1])
    script = f"python3 -c '{FETCH}' up.test {upstream} /one"
    # -T: the terminal is in line mode (what is typed comes with Enter);
    # -t: raw, each key as it is pressed.
    end = b"\n" if mode == "-T" else b""
    argv = [str(x) for x in airlock.cmd(["run", "-q", mode, "--ask", "-p", pol, "--audit",
                                         d / "audit.jsonl", "--", "sh", "-c", script])]
    t = PtyRun(airlock, argv)
    word = t.until(BANNER).group(1)
    m = t.until(re.escape(b"[airlock " + word + b"] the sandbox asks to connect to up.test"))
    t.until(rb"\(denied in 20 s\): ")
    time.sleep(0.8)  # past the type-ahead window: these come as if typed now
    for seq in (b"\x1b[A",            # up arrow
                b"\x1bOA",            # up arrow, application cursor keys
                b"\x1b[O",            # focus out (CSI ? 1004 h)
                b"\x1b[M a!",         # X10 mouse press at column 65
                b"\x1b]lallow\x1b\\",  # a title report
                b"\x9bO",             # focus out with 8-bit controls
                b"\x1bo"):            # Alt-o
        os.write(t.fd, seq + end)
        time.sleep(0.25)
    t.read(0.5)
    after = t.out[m.end():]
    assert b"allowed" not in after and b"denied\r\n" not in after, after
    assert _decisions(d) == [], after
    os.write(t.fd, b"d" + end)
    code = t.finish()
    assert _decisions(d) == [("deny", "terminal")], t.out[-1500:]
    assert code == 0, t.out[-1500:]
