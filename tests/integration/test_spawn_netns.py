# SPDX-License-Identifier: Apache-2.0
"""The sandbox's network namespace is made by a helper of the setup child
beside the root's construction, not by clone3 (src/lib/boundary/netns.c).
It must still be a namespace of the sandbox's own, owned by the sandbox's
user namespace, with nothing but lo; the supervisor's handle on it (port
forwards) must be that namespace; and when it cannot be made, the start
fails: a sandbox never runs in the namespace its setup began in."""

import os
import subprocess

import pytest

NS_GET_USERNS = 0xB701

PROBE = r"""
import fcntl, os
net = os.stat("/proc/self/ns/net").st_ino
user = os.stat("/proc/self/ns/user").st_ino
fd = fcntl.ioctl(os.open("/proc/self/ns/net", os.O_RDONLY), 0xB701)
owner = os.fstat(fd).st_ino
devs = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])
print(net, user, owner, ",".join(devs))
"""


@pytest.mark.parametrize("net", ["none", "gated"])
def test_own_namespace_owned_by_the_sandbox(airlock, net):
    host = os.stat("/proc/self/ns/net").st_ino
    p = airlock.run(["run", "-q", "--net", net, "--", "python3", "-c", PROBE], timeout=60)
    assert p.returncode == 0, p.stderr
    netns, userns, owner, devs = p.stdout.split()
    assert int(netns) != host
    assert owner == userns, "the network namespace is not owned by the sandbox's user namespace"
    assert devs == "lo"


def test_one_cpu_own_namespace_from_clone3(airlock):
    # With one CPU to run on, nothing is put beside other work: clone3 makes
    # the namespace (the command is pid 2, no helper before it), and it is
    # still the sandbox's own, with lo up.
    host = os.stat("/proc/self/ns/net").st_ino
    p = subprocess.run(airlock.cmd(["run", "-q", "--", "python3", "-c",
                                    PROBE + "print(os.getpid())"]),
                       cwd=str(airlock.make_dir()), capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    assert p.returncode == 0, p.stderr
    netns, userns, owner, devs, pid = p.stdout.split()
    assert int(netns) != host and owner == userns and devs == "lo"
    assert pid == "2", pid


def _refuse_new_netns(errno=1):
    """preexec: a seccomp filter (inherited by all airlock starts) that
    refuses unshare(CLONE_NEWNET) with `errno` and allows everything else."""
    import ctypes
    import struct
    CLONE_NEWNET = 0x40000000
    insns = [
        (0x20, 0, 0, 4),            # ld arch
        (0x15, 0, 5, 0xC000003E),   # x86_64, else allow
        (0x20, 0, 0, 0),            # ld nr
        (0x15, 0, 3, 272),          # unshare, else allow
        (0x20, 0, 0, 16),           # ld args[0] (low half)
        (0x45, 0, 1, CLONE_NEWNET), # jset CLONE_NEWNET
        (0x06, 0, 0, 0x00050000 | errno),  # ERRNO(errno)
        (0x06, 0, 0, 0x7FFF0000),   # ALLOW
    ]
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in insns))
    prog = struct.pack("HxxxxxxQ", len(insns), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(22, 2, ctypes.c_char_p(prog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        os._exit(99)


def test_cannot_make_it_fails_closed(airlock):
    # unshare(CLONE_NEWNET) refused around Airlock: the start must fail
    # (setup_failed, exit 125, one line naming the network namespace),
    # never run the command in the namespace its setup began in.
    if os.uname().machine != "x86_64":
        pytest.skip("the filter is written for x86_64")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("with one CPU clone3 makes the namespace (no unshare to refuse)")
    ws = airlock.make_dir()
    airlock.chown(ws)
    marker = os.path.join(ws, "ran")
    for net in ("none", "gated"):
        p = subprocess.run(airlock.cmd(["run", "-q", "--net", net, "-w", str(ws), "--",
                                        "/bin/sh", "-c", "touch /workspace/ran"]),
                           cwd=str(ws), capture_output=True, text=True, timeout=60,
                           preexec_fn=_refuse_new_netns)
        assert p.returncode == 125, (net, p.returncode, p.stderr)
        assert "network namespace" in p.stderr, p.stderr
        assert p.stderr.count("\n") == 1, p.stderr
        assert not os.path.exists(marker), "the command ran"
    # The host's limit reached (ENOSPC): the message names the setting.
    p = subprocess.run(airlock.cmd(["run", "-q", "-w", str(ws), "--", "true"]), cwd=str(ws),
                       capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: _refuse_new_netns(28))
    assert p.returncode == 125 and "user.max_net_namespaces" in p.stderr, p.stderr
