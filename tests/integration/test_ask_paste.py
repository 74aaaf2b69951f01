# SPDX-License-Identifier: Apache-2.0
"""The `--ask` prompt reads the user's terminal. A terminal in bracketed
paste mode (which the sandbox can switch on) sends what is pasted between
ESC [ 200 ~ and ESC [ 201 ~: a pasted "allow" or "yes" is not a key the
user typed to answer, so nothing between the markers counts."""

import os
import re
import time

import pytest

from test_ask import FETCH, upstream  # noqa: F401  (the fixture)
from test_ask_forgery import BANNER, PtyRun, _decisions, _setup


@pytest.mark.parametrize("mode", ["-T", "-t"])
def test_bracketed_paste_is_not_an_answer(airlock, upstream, mode):  # noqa: F811
    d, pol = _setup(airlock, "askpaste" + mode[1])
    script = f"python3 -c '{FETCH}' up.test {upstream} /one"
    end = b"\n" if mode == "-T" else b""
    argv = [str(x) for x in airlock.cmd(["run", "-q", mode, "--ask", "-p", pol, "--audit",
                                         d / "audit.jsonl", "--", "sh", "-c", script])]
    t = PtyRun(airlock, argv)
    word = t.until(BANNER).group(1)
    m = t.until(re.escape(b"[airlock " + word + b"] the sandbox asks to connect to up.test"))
    t.until(rb"\(denied in 20 s\): ")
    time.sleep(0.8)  # past the type-ahead window
    # One paste in one read, and one whose text comes in a later read.
    os.write(t.fd, b"\x1b[200~allow yes once\x1b[201~" + end)
    time.sleep(0.3)
    os.write(t.fd, b"\x1b[200~")
    time.sleep(0.3)
    os.write(t.fd, b"always")
    time.sleep(0.3)
    os.write(t.fd, b"\x1b[201~" + end)
    t.read(0.5)
    after = t.out[m.end():]
    assert b"allowed" not in after and b"denied\r\n" not in after, after
    assert _decisions(d) == [], after
    # A key typed after the paste ended is an answer.
    os.write(t.fd, b"d" + end)
    code = t.finish()
    assert _decisions(d) == [("deny", "terminal")], t.out[-1500:]
    assert code == 0, t.out[-1500:]
