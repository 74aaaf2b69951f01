# SPDX-License-Identifier: Apache-2.0
"""airlockd and each sandbox's supervisor ask the scheduler for its
shortest slice (0.1 ms), so that, woken, they run at once rather than after
the slice of the sandbox's command that holds the CPU; the request resets
at fork, so nothing of the sandbox (pid 1, the prepared process, a
command) inherits it."""

import ctypes
import platform
import struct
import time

import pytest

SYS_SCHED_GETATTR = {"x86_64": 315, "aarch64": 275}.get(platform.machine())
SLICE_NS = 100000
_libc = ctypes.CDLL(None, use_errno=True)


def sched_slice(pid):
    """The slice (sched_attr.sched_runtime) of pid, in ns."""
    buf = ctypes.create_string_buffer(56)
    if _libc.syscall(SYS_SCHED_GETATTR, pid, buf, 56, 0) < 0:
        raise OSError(ctypes.get_errno(), "sched_getattr")
    return struct.unpack("IIQiIQQQ", buf.raw[:48])[5]


def children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        for c in children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def test_host_side_answers_promptly_and_the_sandbox_keeps_the_default(make_daemon):
    if SYS_SCHED_GETATTR is None:
        pytest.skip("sched_getattr's number is not known for " + platform.machine())
    if tuple(int(x) for x in platform.release().split(".")[:2] if x.isdigit()) < (6, 12):
        pytest.skip("custom slices need Linux 6.12")
    d = make_daemon()
    api = d.client(d.admin, timeout=30)
    sid = api.create(sandbox_class="small")["id"]
    r = api.request("POST", f"/v1/sandboxes/{sid}/exec",
                    {"argv": ["sleep", "30"], "background": True})
    assert r[0] == 201, r
    sup = d.supervisors()[sid]
    assert sched_slice(d.proc.pid) == SLICE_NS
    assert sched_slice(sup) == SLICE_NS
    # pid 1, the prepared process, the command, the supervisor's helpers.
    deadline = time.monotonic() + 10
    while True:
        inside = descendants(sup)
        comms = [open(f"/proc/{p}/comm").read().strip() for p in inside]
        if "sleep" in comms or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert "sleep" in comms and "airlock-init" in comms, comms
    slices = {(p, c): sched_slice(p) for p, c in zip(inside, comms)}
    inherited = {k: v for k, v in slices.items() if v == SLICE_NS}
    assert not inherited, f"the sandbox inherited the host side's slice: {inherited}"
    api.delete(sid)
