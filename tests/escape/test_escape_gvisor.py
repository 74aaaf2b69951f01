# SPDX-License-Identifier: Apache-2.0
"""The escape suite's representative cases under the gvisor tier, as root
and as an ordinary user: runsc inside Airlock's own sandbox (its namespaces,
read-only root, cgroup, network namespace holding only the gate's
listeners), the agent's system calls served by gVisor's user-space kernel.

The differences from the namespace tier, stated: inside gVisor the agent's
kernel is gVisor's, so what it does to that kernel is not a host escape.
GVISOR_KERNEL lists the probe cases that succeed against gVisor's kernel
(they are checked to still be blocked on the host by the namespace tier's
suite, tests/escape/test_escape.py). Airlock's seccomp filter and Landlock
do not wrap runsc (it needs namespaces, mounts and ptrace for its sandbox;
runsc filters its own kernel's calls to the host); the command runs with
no capability and no_new_privs inside gVisor (setpriv)."""

import os
import pathlib
import socket
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
PROBE = REPO / os.environ.get("AIRLOCK_ESCAPE_PROBE", BUILD / "tests/escape/escape-probe")

# Blocked under gVisor as in the namespace tier: host files, writes outside
# the workspace, git metadata, the network (only the gate), capabilities.
CASES = [
    "read-shadow",
    "read-ssh-key",
    "read-credentials",
    "symlink-escape",
    "write-usr",
    "write-etc",
    "write-root-fs",
    "write-git-hooks",
    "mount-tmpfs",
    "kernel-module",
    "raw-socket",
    "reach-host-loopback",
    "reach-metadata",
    "reach-internet",
    "env-secrets",
    "leaked-fds",
]

# Succeed against gVisor's kernel, never the host's (stated differences).
GVISOR_KERNEL = {
    "unshare-user": "gVisor's own user namespaces",
    "unshare-mount": "gVisor's own mount namespaces",
    "clone-newuser": "gVisor's own user namespaces",
    "ptrace-traceme": "ptrace inside gVisor",
    "io-uring": "gVisor's io_uring",
    "x32-abi": "served by gVisor",
    "i386-abi": "served by gVisor",
    "dev-block": "gVisor's /dev/fuse",
    "netlink-other": "gVisor's netlink",
    "caps-check": "gVisor's /proc/self/status lacks CapAmb",
    "no-new-privs": "gVisor's /proc/self/status lacks NoNewPrivs (prctl says it is set)",
    "seccomp-mode": "the agent's calls are filtered by gVisor, not by a seccomp filter",
    "setuid-0": "gVisor's view of its own user namespace",
}


def _need():
    if not PROBE.exists():
        pytest.skip(f"{PROBE} is not built")
    if not os.access("/usr/bin/runsc", os.X_OK):
        pytest.skip("runsc is not installed (the gvisor tier needs it)")


def _ws(airlock):
    ws = airlock.make_dir("gv-ws")
    hooks = ws / ".git/hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (ws / ".git/config").write_text("[core]\n")
    airlock.chown(ws)
    return ws


@pytest.mark.parametrize("case", CASES)
def test_escape_under_gvisor(airlock, case):
    _need()
    socks = []
    args = []
    if case == "reach-host-loopback":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        socks.append(s)
        args = [str(s.getsockname()[1])]
    try:
        ws = _ws(airlock)
        p = airlock.run(["run", "-q", "-w", ws, "--timeout", "30", "--tier", "gvisor",
                         "--ro", f"{PROBE}:/probe", "--", "/probe", case, *args], timeout=60)
    finally:
        for s in socks:
            s.close()
    report = (p.stdout + p.stderr).strip()
    assert "ESCAPED" not in p.stdout, report
    assert p.returncode == 0 and p.stdout.startswith(case + ": "), report
    assert (ws / ".git/hooks/pre-commit").read_text() == "#!/bin/sh\nexit 0\n"


def test_gvisor_kernel_is_gvisor_and_gates_hold(airlock):
    """uname is gVisor's; the workspace is written through; the gate's
    proxy answers (a denied host gets the gate's 403); the tool gateway
    answers through /run/airlock/tool.sock."""
    _need()
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--tier", "gvisor", "--allow", "example.com",
                     "--tool", "core.time", "--", "/bin/sh", "-c",
                     "uname -r; echo ok > /workspace/out; "
                     "curl -s -o /dev/null -w 'gate=%{http_code}\\n' "
                     "-x http://127.0.0.1:3128 http://denied.test/; "
                     "airlock-tool call core.time"], timeout=60)
    assert p.returncode == 0, p.stderr
    host = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
    assert p.stdout.splitlines()[0] != host  # gVisor's kernel, not the host's
    assert (ws / "out").read_text() == "ok\n"
    assert "gate=403" in p.stdout
    assert '"unixMs"' in p.stdout


def test_gvisor_limits_and_review(airlock):
    """The cgroup's memory limit holds the whole runsc tree; --review keeps
    the host's workspace untouched."""
    _need()
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--tier", "gvisor", "--timeout", "2", "--",
                     "/bin/sleep", "30"], timeout=60)
    assert p.returncode == 124, p.stderr
    p = airlock.run(["run", "-q", "-w", ws, "--tier", "gvisor", "--review", "--", "/bin/sh",
                     "-c", "echo new > /workspace/proposed"], timeout=60)
    assert p.returncode == 0, p.stderr
    assert not (ws / "proposed").exists()
    assert "1 added" in p.stderr, p.stderr
