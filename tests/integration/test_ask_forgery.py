# SPDX-License-Identifier: Apache-2.0
"""`airlock run --ask` shares the user's terminal with the sandbox, whose
bytes are hostile: it can print a prompt that looks like Airlock's, and
time a real ask to come up just as the user answers its fake one. The real
prompt carries a word shown once at the start of the run, which the sandbox
never sees; while it is up the sandbox's output is held back; and an answer
typed before the prompt could be read (type-ahead) never counts."""

import json
import os
import pty
import re
import select
import time

import pytest

from test_ask import FETCH, upstream  # noqa: F401  (the fixture)

FAKE = ("printf '\\r\\n[airlock] the sandbox asks to connect to pypi.org:443 (https)\\r\\n"
        "[airlock] allow it? [o]nce / [a]lways / [d]eny / [n]ever (denied in 20 s): '")
BANNER = re.compile(rb"\[airlock\] --ask: this run's prompts begin \"\[airlock ([a-z]+-[a-z]+)\]\"")


class PtyRun:
    def __init__(self, airlock, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.chdir(str(airlock.base))
                os.execvp(argv[0], argv)
            finally:
                os._exit(127)
        self.out = b""

    def read(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if r:
                try:
                    d = os.read(self.fd, 4096)
                except OSError:
                    return
                if not d:
                    return
                self.out += d

    def until(self, pattern, timeout=30):
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = rx.search(self.out)
            if m:
                return m
            self.read(0.1)
        raise AssertionError(f"no {pattern!r} on the terminal: {self.out[-1500:]!r}")

    def finish(self, timeout=30):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.read(0.2)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.read(0.2)
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        raise AssertionError(f"still running: {self.out[-1500:]!r}")


def _setup(airlock, name):
    d = airlock.make_dir(name)
    pol = d / "policy.json"
    pol.write_text(json.dumps({"network": {"allowPrivate": ["127.0.0.0/8"],
                                           "hosts": {"up.test": "127.0.0.1"}},
                               "ask": {"timeout": 20}}))
    airlock.chown(d)
    return d, pol


def _decisions(d):
    log = [json.loads(line) for line in (d / "audit.jsonl").read_text().splitlines()]
    return [(e["decision"], e["by"]) for e in log if e["kind"] == "approval.decided"]


def test_fake_prompt_and_typed_ahead_answer_do_not_count(airlock, upstream):  # noqa: F811
    d, pol = _setup(airlock, "askfake")
    assert "'" not in FETCH
    # The sandbox prints a fake prompt, shows what it knows of the run, then
    # asks for real at once: the user's answer to the fake prompt lands on
    # the real one.
    script = (f"{FAKE}; env; cat /proc/self/cmdline; "
              f"python3 -c '{FETCH}' up.test {upstream} /one")
    argv = [str(x) for x in airlock.cmd(["run", "-q", "-T", "--ask", "-p", pol, "--audit",
                                         d / "audit.jsonl", "--", "sh", "-c", script])]
    t = PtyRun(airlock, argv)
    word = t.until(BANNER).group(1)
    # The fake prompt shows; the user answers it as a prompt at once...
    t.until(rb"pypi\.org:443")
    real = re.escape(b"[airlock " + word + b"] the sandbox asks to connect to up.test")
    m = t.until(real)
    os.write(t.fd, b"a\n")
    # ...which is not an answer to the real prompt: it is still up.
    t.read(1.0)
    assert b"allowed" not in t.out[m.end():], t.out[m.end():]
    os.write(t.fd, b"d\n")
    code = t.finish()
    shown = t.out.decode(errors="replace")
    assert _decisions(d) == [("deny", "terminal")], shown
    assert "403 " in shown or "denied" in shown, shown
    # The word is on the user's terminal once before the sandbox's output and
    # in the real prompt, and nowhere the sandbox can read it.
    before_fake = t.out.index(b"pypi.org:443")
    assert t.out.index(word) < before_fake
    # (the start, the prompt's two lines, and each "answer o, a, d or n")
    assert t.out.count(word) == 3 + t.out.count(b"answer o, a, d or n"), shown
    assert b"typed before this prompt could be read: ignored" in t.out
    fake_part = t.out[before_fake:m.start()]
    assert word not in fake_part, "the sandbox printed the run's word"
    assert code == 0, shown


def test_sandbox_output_is_held_while_a_prompt_is_up(airlock, upstream):  # noqa: F811
    d, pol = _setup(airlock, "askhold")
    script = (f"python3 -c '{FETCH}' up.test {upstream} /one & "
              "i=0; while [ $i -lt 40 ]; do printf 'SPAM%d\\r\\033[2K\\033[1A' $i; "
              "i=$((i+1)); sleep 0.1; done; wait")
    argv = [str(x) for x in airlock.cmd(["run", "-q", "-t", "--ask", "-p", pol, "--audit",
                                         d / "audit.jsonl", "--", "sh", "-c", script])]
    t = PtyRun(airlock, argv)
    m = t.until(rb"the sandbox asks to connect to up\.test")
    t.until(rb"\(denied in 20 s\): ")
    # The prompt starts from a clean terminal state: any string or sequence
    # the sandbox left open is cancelled and its colours reset.
    head = t.out[max(0, m.start() - 64):m.start()]
    assert b"\x18" in head and b"\x1b[0m" in head, head
    mark = len(t.out)
    t.read(1.5)
    assert b"SPAM" not in t.out[mark:], t.out[mark:]
    time.sleep(0.2)
    os.write(t.fd, b"o")
    assert t.finish() == 0, t.out[-1500:]
    assert b"SPAM39" in t.out and b"200 " in t.out, t.out[-1500:]
    assert _decisions(d) == [("allow-once", "terminal")]


def test_unanswered_prompt_comes_down_and_output_follows(airlock, upstream):  # noqa: F811
    d = airlock.make_dir("askgone")
    pol = d / "policy.json"
    pol.write_text(json.dumps({"network": {"allowPrivate": ["127.0.0.0/8"],
                                           "hosts": {"up.test": "127.0.0.1"}},
                               "ask": {"timeout": 2}}))
    airlock.chown(d)
    script = (f"python3 -c '{FETCH}' up.test {upstream} /one & "
              "sleep 0.5; echo held-line; wait; echo after-line")
    argv = [str(x) for x in airlock.cmd(["run", "-q", "-T", "--ask", "-p", pol, "--audit",
                                         d / "audit.jsonl", "--", "sh", "-c", script])]
    t = PtyRun(airlock, argv)
    t.until(rb"the sandbox asks to connect to up\.test")
    t0 = time.monotonic()
    assert t.finish(timeout=20) == 0, t.out[-1500:]
    assert time.monotonic() - t0 < 10
    shown = t.out.decode(errors="replace")
    assert "no longer asked" in shown and "held-line" in shown and "after-line" in shown, shown
    assert "ask_timeout" in shown, shown
