# SPDX-License-Identifier: Apache-2.0
"""A host tool call has one end line, never two. `airlock run` keeps its
calls under way in a file beside its run record (runs/<id>.calls) and
writes each call's tool.call line, then drops the call from the file. A
run killed between the two (here a shim kills it as it removes the file,
the call's line written) left the call in the file, and the next sweep
wrote a second tool.call for it. The run now marks the call as ending in
the file before its line, and the sweep writes an end only for a call
whose own line (its callSeq) is not on the log."""

import json
import os

import pytest

import shim
from test_run_kill import audit_lines, verify

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* `airlock run` dies (SIGKILL) as it removes its calls file: the last
 * call's tool.call line is written, the file not yet updated. */
int unlinkat(int dirfd, const char *path, int flags)
{
        static int (*real)(int, const char *, int);
        if (!real)
                real = (int (*)(int, const char *, int))dlsym(RTLD_NEXT, "unlinkat");
        char comm[32] = "";
        FILE *f = fopen("/proc/self/comm", "re");
        if (f) {
                if (!fgets(comm, sizeof(comm), f))
                        comm[0] = '\0';
                fclose(f);
        }
        if (strcmp(comm, "airlock\n") == 0 && strcmp(path, "tool-calls.json") == 0)
                kill(getpid(), SIGKILL);
        return real(dirfd, path, flags);
}
"""


@pytest.fixture
def kill_at_unlink(tmp_path):
    return shim.build(tmp_path, "killunlink", SHIM)


def test_a_run_killed_after_a_calls_end_line_gets_no_second_end(airlock, kill_at_unlink):
    if airlock.mode != "root":
        pytest.skip("the shim is preloaded into airlock run as root")
    audit = airlock.make_dir("audit") / "audit.jsonl"
    tdir = airlock.make_dir("tools")
    tools = tdir / "tools.json"
    tools.write_text(json.dumps({"define": {"t.quick": {
        "description": "a quick host tool",
        "args": {"type": "object", "properties": {}, "additionalProperties": False},
        "command": ["/bin/true"], "timeout": "30s"}}}))
    tools.chmod(0o644)
    ws = airlock.make_dir()
    # An ASan build wants its runtime first; the shim only wraps unlinkat.
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = dict(os.environ, LD_PRELOAD=str(kill_at_unlink),
               ASAN_OPTIONS=(asan + ":" if asan else "") + "verify_asan_link_order=0")
    # A state root of its own: the run's record is swept by this test's
    # next run only, not by whatever else runs Airlock on the machine.
    root = airlock.make_dir("state")
    p = airlock.run(["run", "-q", "--state-root", root, "--audit", audit, "-w", ws,
                     "--timeout", "60", "--tools", tools, "--tool", "t.quick", "--",
                     "/bin/sh", "-c", "airlock-tool call t.quick; sleep 30"],
                    timeout=60, env=env)
    assert p.returncode == -9, (p.returncode, p.stderr)
    ended = [e for e in audit_lines(audit) if e["kind"] == "tool.call"]
    assert len(ended) == 1 and "errorCode" in ended[0], ended
    sandbox = ended[0]["sandbox"]

    p = airlock.run(["run", "-q", "--state-root", root, "--audit", audit, "-w",
                     airlock.make_dir(), "--", "true"], timeout=30)
    assert p.returncode == 0, p.stderr
    lines = [e for e in audit_lines(audit) if e["sandbox"] == sandbox]
    kinds = [e["kind"] for e in lines]
    assert kinds.count("tool.started") == 1, kinds
    assert kinds.count("tool.call") == 1, kinds
    assert [e for e in lines if e["kind"] == "sandbox.destroyed"][0]["reason"] == "owner_died"
    verify(airlock, audit)
