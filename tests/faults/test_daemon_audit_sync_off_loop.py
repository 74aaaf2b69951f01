# SPDX-License-Identifier: Apache-2.0
"""The daemon's periodic sync of its own audit lines (api.exec and the
other lines no answer waits for) runs in the log's helper process, not on
the daemon's event loop: a slow disk under the audit log never holds up
the requests of every other client. A shim makes each fdatasync of the
audit log by airlockd take 400 ms; before, every request that came in
while the batch's sync ran waited for it."""

import os
import pathlib
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "daemon"))
from daemonlib import Daemon  # noqa: E402
import shim  # noqa: E402

SLOW_MS = 400

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* airlockd's syncs of its audit log take SLOW_MS; nothing else does. */
int fdatasync(int fd)
{
        static int (*real)(int);
        if (!real)
                real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
        char comm[32] = "", link[64], path[4096];
        FILE *f = fopen("/proc/self/comm", "re");
        if (f) {
                if (!fgets(comm, sizeof(comm), f))
                        comm[0] = '\0';
                fclose(f);
        }
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof(path) - 1);
        path[n > 0 ? n : 0] = '\0';
        size_t len = strlen(path);
        if (strncmp(comm, "airlockd", 8) == 0 && len >= 11 &&
            strcmp(path + len - 11, "audit.jsonl") == 0) {
                struct timespec ts = {.tv_sec = 0, .tv_nsec = SLOW_MS * 1000000L};
                nanosleep(&ts, NULL);
        }
        return real(fd);
}
"""


@pytest.fixture
def slow_audit_shim(tmp_path):
    return shim.build(tmp_path, "slowsync", SHIM.replace("SLOW_MS", str(SLOW_MS)))


def test_a_slow_audit_sync_does_not_stall_other_requests(airlock, slow_audit_shim,
                                                         tmp_path_factory, monkeypatch):
    if airlock.mode != "root":
        pytest.skip("the daemon runs as root")
    d = Daemon(tmp_path_factory.mktemp("airlockd"))
    d.admin = d.grant("admin", "--allow-sandbox", "--allow-exec")
    monkeypatch.setenv("LD_PRELOAD", str(slow_audit_shim))
    # An ASan build wants its runtime first; the shim only wraps fdatasync.
    asan = os.environ.get("ASAN_OPTIONS", "")
    monkeypatch.setenv("ASAN_OPTIONS", (asan + ":" if asan else "") + "verify_asan_link_order=0")
    d.start()
    monkeypatch.delenv("LD_PRELOAD")
    try:
        c = d.client(d.admin, timeout=30)
        other = d.client(d.admin, timeout=30)
        sid = c.create(sandbox_class="small")["id"]
        other.list()
        worst = 0.0
        for _ in range(3):
            # api.exec is written, and its batch synced within 100 ms.
            assert c.run(sid, ["true"]).exit_code == 0
            end = time.monotonic() + (SLOW_MS + 300) / 1000
            while time.monotonic() < end:
                t0 = time.monotonic()
                other.list()
                worst = max(worst, time.monotonic() - t0)
        assert worst < SLOW_MS / 2000, (
            f"a request waited {worst * 1000:.0f} ms for the audit log's batch sync")
        c.delete(sid)
    finally:
        d.cleanup(d.admin)
