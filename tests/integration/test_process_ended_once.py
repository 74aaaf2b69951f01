# SPDX-License-Identifier: Apache-2.0
"""A process's end is recorded once: a command that exits while something
it started still holds its output open ends when that output closes, and
the moment its output is let go later (the linger timer) must not record it
a second time."""

import json
import time

from test_supervise import Supervisor  # noqa: E402


def test_a_process_that_leaves_its_output_open_ends_once(airlock):
    s = Supervisor(airlock)
    assert s.ready == "ok"
    try:
        # The shell exits at once; its child writes and closes the output
        # 50 ms later, before the supervisor's 200 ms linger runs out.
        s.exec(["/bin/sh", "-c", "(sleep 0.05; echo late) & exit 0"])
        time.sleep(0.6)
        s.exec(["true"])
    finally:
        s.close()
    ended = [e["pid"] for e in (json.loads(x) for x in open(s.audit))
             if e["kind"] == "process.ended"]
    assert ended == [1, 2], ended
