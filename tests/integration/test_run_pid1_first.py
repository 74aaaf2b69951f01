# SPDX-License-Identifier: Apache-2.0
"""pid 1 hides the host's command line and environment before the command's
process starts, not alongside it: the command's process shares pid 1's
memory until its execve and runs first, so a command that reads /proc/1 at
once must still find nothing of the host's."""

import os

MARK = "cold2-host-marker"


def test_command_reading_pid1_at_once_finds_nothing(airlock):
    ws = airlock.make_dir()
    env = dict(os.environ, COLD2_HOST_ENV=MARK)
    for _ in range(10):
        p = airlock.run(["run", "-q", "-w", ws, "--env", f"X={MARK}", "--",
                         "/bin/cat", "/proc/1/cmdline", "/proc/1/environ"],
                        env=env, timeout=30)
        # /proc/1/environ is refused (pid 1 is not dumpable): cat says so.
        assert "Permission denied" in p.stderr, p.stderr
        out = p.stdout.replace("\0", " ")
        assert out.strip() == "airlock-init", out
        assert MARK not in out and "run" not in out, out


def test_command_gets_its_own_argv_and_env(airlock):
    p = airlock.run(["run", "-q", "--env", "COLD2=env-ok", "--", "/bin/sh", "-c",
                     'echo "$0|$1|$2|$COLD2"', "zero", "one two", "three"], timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "zero|one two|three|env-ok\n", p.stdout
